"""The disruption controller's work: a PodDisruptionBudget's status from the pods it selects. Pure.

After kube-controller-manager's (pkg/controller/disruption/disruption.go), with the helpers of
k8s.io/component-helpers/apps/poddisruptionbudget/helpers.go and k8s.io/apimachinery's
`intstr.GetScaledValueFromIntOrPercent` and `meta.SetStatusCondition`:

- the pods: those of the PDB's namespace its selector selects (`getPodsForPdb`; null selects none,
  `{}` every one), terminating ones included;
- `getExpectedPodCount`: `minAvailable` as an integer → desiredHealthy is it, expectedPods the pods
  selected; `minAvailable` as a percentage, or any `maxUnavailable` → expectedPods is the sum of the
  `spec.replicas` of the pods' controllers (`getExpectedScale`: a Deployment over its ReplicaSet, a
  ReplicaSet, a StatefulSet, found by the controller ownerReference and its uid; replicas default 1),
  percentages rounded up; desiredHealthy = expected - maxUnavailable (not below 0). Pods without a
  controller are left out of the count (the real controller also records an `UnmanagedPods` Event).
  A pod whose controller is of a kind without a scale subresource (a DaemonSet: `daemonsets.apps does
  not implement the scale subresource`), of a kind not served (`no matches for kind ...`) or not found
  (`found no controllers for pod "x"`) fails the sync: `failSafe` sets disruptionsAllowed 0 and
  `DisruptionAllowed=False/SyncFailed` with the error, observedGeneration left as it was (so the
  eviction handler keeps answering "still being processed");
- `buildDisruptedPodMap`/`countHealthyPods`: an evicted pod stays in `disruptedPods` and out of
  currentHealthy until it terminates, or for `DeletionTimeout` (2 minutes); currentHealthy counts the
  Ready pods not terminating;
- `updatePdbStatus`: disruptionsAllowed = currentHealthy - desiredHealthy, 0 when negative or when no
  pod is expected; observedGeneration = generation; `DisruptionAllowed` True/`SufficientPods` or
  False/`InsufficientPods`; nothing written when nothing changed.

Not modelled: Events (`NoPods`, `UnmanagedPods`, `CalculateExpectedPodCountFailed`, `NotDeleted`),
ReplicationControllers, scale subresources of other kinds, and the stale `DisruptionTarget` cleanup.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kmock

from accelpool_demo.apiserver import resources
from accelpool_demo.apiserver.pods import controller_of, ready, terminating
from accelpool_demo.apiserver.selectors import selects
from accelpool_demo.apiserver.writes import JsonObject, seconds_of, timestamp

DELETION_TIMEOUT = 120.0
"""disruption.go `DeletionTimeout`: how long an evicted pod counts as about to go."""
DISRUPTION_ALLOWED = "DisruptionAllowed"
ALWAYS_ALLOW = "AlwaysAllow"
IF_HEALTHY_BUDGET = "IfHealthyBudget"
SCALABLE = frozenset({resources.REPLICA_SETS, resources.DEPLOYMENTS, resources.STATEFUL_SETS})
"""Served kinds with a scale subresource in a real cluster (the emulator stores them, serves no Scale)."""
_PERCENT = re.compile(r"^[0-9]+%$")
Lookup = Callable[[str, str, str], Mapping[str, Any] | None]
"""A stored object by (resource key, namespace, name), or None."""


class SyncFailed(Exception):
    """The sync of a PDB failed (the message is the controller's error)."""


def selected(budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """The pods of the budget's namespace its selector selects."""
    namespace = (budget.get("metadata") or {}).get("namespace")
    selector = (budget.get("spec") or {}).get("selector")
    return [
        pod
        for pod in pods
        if (pod.get("metadata") or {}).get("namespace") == namespace
        and selects(selector, (pod.get("metadata") or {}).get("labels") or {})
    ]


def scaled_value(value: int | str, total: int) -> int:
    """`intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true)`."""
    if isinstance(value, int):
        return value
    if not value.endswith("%"):
        raise SyncFailed("invalid value for IntOrString: invalid type: string is not a percentage")
    if not _PERCENT.match(value):
        raise SyncFailed(f'invalid value "{value}": strconv.Atoi: parsing "{value[:-1]}": invalid syntax')
    return math.ceil(int(value[:-1]) * total / 100)


def _replicas(obj: Mapping[str, Any]) -> int:
    replicas = (obj.get("spec") or {}).get("replicas")
    return 1 if replicas is None else int(replicas)


def _found(lookup: Lookup, key: str | None, namespace: str, reference: Mapping[str, Any]) -> Mapping[str, Any] | None:
    found = lookup(key, namespace, str(reference.get("name"))) if key else None
    if found is None or (found.get("metadata") or {}).get("uid") != reference.get("uid"):
        return None
    return found


def _controller_scale(reference: Mapping[str, Any], namespace: str, lookup: Lookup) -> tuple[str, int] | None:
    """The finders of `getExpectedScale`: a Deployment over the pod's ReplicaSet, else the controller itself
    through its scale (`getScaleController`); None when it is not found."""
    api_version, kind = str(reference.get("apiVersion") or ""), str(reference.get("kind") or "")
    key = resources.key_of_kind(api_version, kind)
    target = _found(lookup, key, namespace, reference)
    owner = controller_of(target) if target is not None and key == resources.REPLICA_SETS else None
    if owner is not None and owner.get("kind") == "Deployment":
        deployment = _found(lookup, resources.key_of_kind(str(owner.get("apiVersion")), "Deployment"), namespace, owner)
        if deployment is not None:
            return str(deployment["metadata"]["uid"]), _replicas(deployment)
    if key is None:
        raise SyncFailed(f'no matches for kind "{kind}" in version "{api_version}"')
    if key not in SCALABLE:
        raise SyncFailed(f"{resources.qualified(kmock.resource(key))} does not implement the scale subresource")
    return None if target is None else (str(target["metadata"]["uid"]), _replicas(target))


def expected_scale(pods: Sequence[Mapping[str, Any]], lookup: Lookup) -> int:
    """`getExpectedScale`: the summed scale of the pods' controllers (pods without one left out)."""
    scales: dict[str, int] = {}
    for pod in pods:
        reference = controller_of(pod)
        if reference is None or reference.get("uid") in scales:
            continue
        found = _controller_scale(reference, str(pod["metadata"].get("namespace")), lookup)
        if found is None:
            raise SyncFailed(f'found no controllers for pod "{pod["metadata"]["name"]}"')
        scales[found[0]] = found[1]
    return sum(scales.values())


def expected_and_desired(
    budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], lookup: Lookup
) -> tuple[int, int]:
    """`getExpectedPodCount`: (expectedPods, desiredHealthy)."""
    spec = budget.get("spec") or {}
    if spec.get("maxUnavailable") is not None:
        expected = expected_scale(pods, lookup)
        return expected, max(0, expected - scaled_value(spec["maxUnavailable"], expected))
    minimum = spec.get("minAvailable")
    if isinstance(minimum, int):
        return len(pods), minimum
    if minimum is not None:
        expected = expected_scale(pods, lookup)
        return expected, scaled_value(minimum, expected)
    return 0, 0


def disrupted_pods(
    budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], now: float
) -> tuple[dict[str, str], float | None]:
    """`buildDisruptedPodMap`: the evicted pods still expected to go, and when to look again."""
    known = (budget.get("status") or {}).get("disruptedPods") or {}
    kept: dict[str, str] = {}
    recheck: float | None = None
    for pod in pods:
        name = pod["metadata"]["name"]
        if terminating(pod) or name not in known:
            continue
        expires = seconds_of(known[name]) + DELETION_TIMEOUT
        if expires >= now:
            kept[name] = known[name]
            recheck = expires if recheck is None else min(recheck, expires)
    return kept, recheck


def healthy(pods: Sequence[Mapping[str, Any]], disrupted: Mapping[str, str]) -> int:
    """`countHealthyPods`: Ready pods neither terminating nor just evicted."""
    return sum(1 for p in pods if ready(p) and not terminating(p) and p["metadata"]["name"] not in disrupted)


def set_condition(status: JsonObject, condition: Mapping[str, Any], now: float) -> None:
    """`meta.SetStatusCondition`: replaced by type, its lastTransitionTime moved only when its status does."""
    conditions = [dict(c) for c in status.get("conditions") or []]
    fresh = {k: v for k, v in condition.items() if k != "observedGeneration" or v}
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition["type"]:
            moved = existing.get("status") != condition["status"]
            fresh["lastTransitionTime"] = timestamp(now) if moved else existing.get("lastTransitionTime")
            conditions[index] = _ordered(fresh)
            break
    else:
        conditions.append(_ordered({**fresh, "lastTransitionTime": timestamp(now)}))
    status["conditions"] = conditions


def _ordered(condition: Mapping[str, Any]) -> JsonObject:
    """metav1.Condition's fields in their declared order (reason and message always present)."""
    order = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")
    return {k: condition.get(k, "") for k in order if k in condition or k in ("reason", "message")}


def with_allowed_condition(status: JsonObject, now: float) -> JsonObject:
    """`UpdateDisruptionAllowedCondition`."""
    allowed = int(status.get("disruptionsAllowed") or 0) > 0
    condition = {
        "type": DISRUPTION_ALLOWED,
        "status": "True" if allowed else "False",
        "observedGeneration": status.get("observedGeneration", 0),
        "reason": "SufficientPods" if allowed else "InsufficientPods",
        "message": "",
    }
    set_condition(status, condition, now)
    return status


def _up_to_date(budget: Mapping[str, Any]) -> bool:
    """`ConditionsAreUpToDate`."""
    status = budget.get("status") or {}
    found = [c for c in status.get("conditions") or [] if c.get("type") == DISRUPTION_ALLOWED]
    if not found or status.get("observedGeneration") != (budget.get("metadata") or {}).get("generation"):
        return False
    wanted = (
        ("True", "SufficientPods") if int(status.get("disruptionsAllowed") or 0) > 0 else ("False", "InsufficientPods")
    )
    return (found[0].get("status"), found[0].get("reason")) == wanted


def synced_status(
    budget: Mapping[str, Any], pods: Sequence[Mapping[str, Any]], lookup: Lookup, now: float
) -> tuple[JsonObject, float | None]:
    """The status the controller leaves on the budget (`trySync`, else `failSafe`), and when to sync again."""
    current = dict(budget.get("status") or {})
    chosen = selected(budget, pods)
    try:
        expected, desired = expected_and_desired(budget, chosen, lookup)
    except SyncFailed as failure:
        failed = {**current, "disruptionsAllowed": 0}
        condition = {
            "type": DISRUPTION_ALLOWED,
            "status": "False",
            "observedGeneration": current.get("observedGeneration", 0),
            "reason": "SyncFailed",
            "message": str(failure),
        }
        set_condition(failed, condition, now)
        return failed, None
    disrupted, recheck = disrupted_pods(budget, chosen, now)
    current_healthy = healthy(chosen, disrupted)
    allowed = current_healthy - desired if expected > 0 and current_healthy > desired else 0
    status: JsonObject = {
        "observedGeneration": (budget.get("metadata") or {}).get("generation", 1),
        "disruptedPods": disrupted,
        "disruptionsAllowed": allowed,
        "currentHealthy": current_healthy,
        "desiredHealthy": desired,
        "expectedPods": expected,
    }
    unchanged = all(current.get(k) == v for k, v in status.items() if k != "disruptedPods")
    if unchanged and (current.get("disruptedPods") or {}) == disrupted and _up_to_date(budget):
        return current, recheck
    if not disrupted:
        del status["disruptedPods"]
    status["conditions"] = current.get("conditions") or []
    return with_allowed_condition(status, now), recheck
