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


PENDING = "not yet brought in line with the real server: the step's own failure says how it differs"

_EVENT_NAMESPACES = (
    "the emulator accepts an Event about an object of no namespace (a Node, a ComputePool) outside `default`, "
    "which kube-apiserver refuses (pkg/apis/core/validation/events.go: involvedObject.namespace does not match "
    "event.namespace), unless `Store.strict_event_namespaces`: accelpool's operator and demo post such Events in "
    "their own namespace, so enforcing it would drop them; with it on these steps match"
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
    "crd-admission-and-apply/crd-install": Known(PENDING),
    "crd-admission-and-apply/crd-schema-and-cel": Known(PENDING),
    "crd-admission-and-apply/crd-field-validation": Known(PENDING, except_steps=(11,)),
    "crd-admission-and-apply/crd-status-and-scale": Known(PENDING, except_steps=(15, 17)),
    "crd-admission-and-apply/server-side-apply": Known(PENDING, except_steps=(7, 8)),
    "ownerrefs-gc-eviction/ownerreferences-gc": Known(PENDING),
    "ownerrefs-gc-eviction/pod-eviction-pdb": Known(PENDING, except_steps=(0, 5, 6, 7, 8, 15, 16)),
    "dra/dra-objects": Known(PENDING, except_steps=(1, 2)),
    "dra/dra-scheduling": Known(PENDING, except_steps=(2, 5, 8, 11, 14, 17)),
    "dra/dra-device-taint-eviction": Known(PENDING),
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
