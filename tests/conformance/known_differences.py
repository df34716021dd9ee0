"""Where the emulated API server answers otherwise than the real kube-apiserver, and why that is
acceptable for the demo: the one list of them. Each step listed here is expected to differ (an
xfail(strict=True)): when a difference disappears, its test fails until its entry is removed.

Keys are step ids (`FILE/SCENARIO/NN`), or a scenario id (`FILE/SCENARIO`) for every step of a
scenario that is not listed on its own and not in `Known.except_steps`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    reason: str
    except_steps: tuple[int, ...] = ()
    """For a scenario-wide entry: the steps that match all the same."""


_EVENT_NAMESPACES = (
    "the emulator accepts an Event about an object of no namespace (a Node, a ComputePool) outside `default`, "
    "which kube-apiserver refuses (pkg/apis/core/validation/events.go: involvedObject.namespace does not match "
    "event.namespace), unless `Store.strict_event_namespaces`: accelpool's operator and demo post such Events in "
    "their own namespace, so enforcing it would drop them; with it on these steps match"
)

_POD_DEFAULTS = (
    "the emulator does not default pods (pkg/apis/core/v1/defaults.go: imagePullPolicy, terminationMessagePath, "
    "dnsPolicy, restartPolicy, schedulerName, terminationGracePeriodSeconds 30...), nor admit them through the "
    "ServiceAccount plugin (its token volume is named with a random suffix, which the recording kept) and the "
    "Priority one, nor set their qosClass"
)
_NO_GRACE = (
    "the emulator gives a pod no default terminationGracePeriodSeconds (30), so an evicted pod on a node is "
    "deleted at once instead of terminating while no kubelet ends it"
)
KNOWN: dict[str, Known] = {
    "list-watch-events/watch-bookmarks/10": Known(
        "the recorded server's etcd ran without RequestWatchProgress, so it answered sendInitialEvents=true with "
        "an ERROR event; the emulator serves the watch-list as a server with it does (the objects as ADDED, then "
        "a BOOKMARK annotated k8s.io/initial-events-end)"
    ),
    "list-watch-events/events/00": Known(_EVENT_NAMESPACES),
    "list-watch-events/events/01": Known(_EVENT_NAMESPACES),
    "list-watch-events/events/03": Known(_EVENT_NAMESPACES),
    "list-watch-events/events/04": Known(_EVENT_NAMESPACES),
    "list-watch-events/events/05": Known(_EVENT_NAMESPACES),
    "crd-admission-and-apply/crd-install/00": Known(
        "the emulator estimates no CEL costs, so it stores the CRD whose messageExpression the server refuses on "
        "its estimated cost (apiextensions-apiserver pkg/apiserver/schema/cel)"
    ),
    "crd-admission-and-apply/crd-install/01": Known(
        "step 00's CRD was stored (the emulator estimates no CEL costs), so this create is 409 AlreadyExists; "
        "with step 00 left out it matches"
    ),
    "crd-admission-and-apply/crd-schema-and-cel/22": Known(
        "a body whose kind is not the resource's is not defaulted by the real server (its codec defaults by the "
        "object's own kind, which no CRD serves), so the rule reading the defaulted `mode` fails to evaluate "
        "there; the emulator defaults by the resource, and refuses the object for its kind alone"
    ),
    "ownerrefs-gc-eviction/pod-eviction-pdb/01": Known(_POD_DEFAULTS),
    "ownerrefs-gc-eviction/pod-eviction-pdb/02": Known(_POD_DEFAULTS),
    "ownerrefs-gc-eviction/pod-eviction-pdb/03": Known(_POD_DEFAULTS),
    "ownerrefs-gc-eviction/pod-eviction-pdb/10": Known(
        _NO_GRACE + ": the evicted p0 is gone, so one pod fewer is expected"
    ),
    "ownerrefs-gc-eviction/pod-eviction-pdb/12": Known(_NO_GRACE + ": the evicted p1 is gone, not terminating"),
    "ownerrefs-gc-eviction/pod-eviction-pdb/14": Known(
        _NO_GRACE + ": the evicted p0 and p1 are gone, so fewer pods are expected"
    ),
}


def known(step_id: str) -> Known | None:
    """The known difference of a step, if it has one."""
    if step_id in KNOWN:
        return KNOWN[step_id]
    scenario, _, index = step_id.rpartition("/")
    found = KNOWN.get(scenario)
    if found is not None and int(index) not in found.except_steps:
        return found
    return None
