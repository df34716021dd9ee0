"""Pods as the API server deletes them: DeleteOptions, preconditions and graceful deletion. Pure.

- `DeleteOptions`: metav1.DeleteOptions as a DELETE (its body, or `?gracePeriodSeconds=`) or an
  Eviction's `deleteOptions` carries them: `gracePeriodSeconds`, `preconditions` (`uid`,
  `resourceVersion`); `dryRun` is refused (400: not modelled), `propagationPolicy` ignored (no GC).
- `grace_period`: pkg/registry/core/pod/strategy.go `CheckGracefulDelete`: the grace period asked for,
  else the pod's `spec.terminationGracePeriodSeconds` (the emulator does not default it to 30 as a real
  server does: a pod without it is deleted at once), 0 for a pod on no node or in a terminal phase.
- `deletion`: k8s.io/apiserver/pkg/registry/rest/delete.go `BeforeDelete` on a pod: a first deletion
  stamps `deletionTimestamp` (now + the grace period), `deletionGracePeriodSeconds` and generation+1;
  a later one may only shorten the grace period; a negative one counts as 1 second.
- `ready`, `controller_of`: `podutil.IsPodReady` and `metav1.GetControllerOf`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_demo.apiserver.resources import refused
from accelpool_demo.apiserver.writes import JsonObject, seconds_of, timestamp

TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


@dataclass(frozen=True)
class DeleteOptions:
    grace_period_seconds: int | None = None
    uid: str | None = None
    """`preconditions.uid`: refuse unless the stored object has it."""
    resource_version: str | None = None
    """`preconditions.resourceVersion`."""
    propagation: str | None = None
    """`propagationPolicy` (Background, Foreground, Orphan; `orphanDependents: true` is Orphan)."""
    dry_run: bool = False
    """`dryRun: [All]`: everything checked, nothing written."""

    @classmethod
    def parse(cls, body: Any, params: Mapping[str, str], *, where: str = "DeleteOptions") -> DeleteOptions:
        """Options from a body (None, or a DeleteOptions object) and the query; 400 naming a bad field."""
        if body is None:
            body = {}
        if not isinstance(body, Mapping):
            raise refused(400, "BadRequest", f"{where} must be a JSON object, not {type(body).__name__}")
        dry_run = body.get("dryRun") or params.get("dryRun")
        if dry_run not in (None, [], "All", ["All"]):
            raise refused(400, "BadRequest", f"{where}.dryRun: only All is a dry run")
        grace = body.get("gracePeriodSeconds", params.get("gracePeriodSeconds"))
        if grace is not None:
            try:
                grace = int(grace)
            except (TypeError, ValueError):
                raise refused(400, "BadRequest", f"{where}.gracePeriodSeconds: {grace!r} is not an integer") from None
        preconditions = body.get("preconditions") or {}
        if not isinstance(preconditions, Mapping):
            raise refused(400, "BadRequest", f"{where}.preconditions must be an object with uid and resourceVersion")
        propagation = body.get("propagationPolicy", params.get("propagationPolicy"))
        if propagation is None and (body.get("orphanDependents") is True or params.get("orphanDependents") == "true"):
            propagation = "Orphan"
        return cls(grace, preconditions.get("uid"), preconditions.get("resourceVersion"), propagation, bool(dry_run))


def ready(pod: Mapping[str, Any]) -> bool:
    """pkg/api/v1/pod/util.go `IsPodReady`: a Ready condition that is True (whatever the phase)."""
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def phase(pod: Mapping[str, Any]) -> str:
    return str((pod.get("status") or {}).get("phase") or "")


def terminating(obj: Mapping[str, Any]) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def controller_of(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The ownerReference with `controller: true` (`metav1.GetControllerOf`), or None."""
    for reference in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if reference.get("controller") is True:
            return dict(reference)
    return None


def check_preconditions(
    resource: kmock.resource, kind: str, current: Mapping[str, Any], options: DeleteOptions
) -> None:
    """409 for a DELETE whose preconditions fail, as `rest.BeforeDelete` checks them before anything
    (k8s.io/apiserver/pkg/registry/rest/delete.go: the uid first, then the resourceVersion; a Conflict on the
    group and *kind*)."""
    metadata = current.get("metadata") or {}
    if options.uid is not None and options.uid != metadata.get("uid"):
        why = (
            f"the UID in the precondition ({options.uid}) does not match the UID in record ({metadata.get('uid')}). "
            "The object might have been deleted and then recreated"
        )
    elif options.resource_version is not None and options.resource_version != metadata.get("resourceVersion"):
        why = (
            f"the ResourceVersion in the precondition ({options.resource_version}) does not match the ResourceVersion "
            f"in record ({metadata.get('resourceVersion')}). The object might have been modified"
        )
    else:
        return
    name = metadata.get("name")
    qualified = f"{kind}.{resource.group}" if resource.group else kind
    details = {"name": name, **({"group": resource.group} if resource.group else {}), "kind": kind}
    raise refused(409, "Conflict", f'Operation cannot be fulfilled on {qualified} "{name}": {why}', **details)


def grace_period(pod: Mapping[str, Any], requested: int | None) -> int:
    """`CheckGracefulDelete`: the seconds the pod is given to terminate."""
    seconds = requested if requested is not None else (pod.get("spec") or {}).get("terminationGracePeriodSeconds")
    if not (pod.get("spec") or {}).get("nodeName") or phase(pod) in TERMINAL_PHASES:
        return 0
    return int(seconds or 0)


def deletion(pod: Mapping[str, Any], requested: int | None, now: float) -> JsonObject | None:
    """The pod as a DELETE leaves it while it terminates (its grace period in `deletionGracePeriodSeconds`,
    0: to be removed now, unless finalizers hold it), or None when the DELETE changes nothing (a graceful
    deletion pending and not shortened, or finalizers holding a pod whose grace period is over)."""
    if requested is not None and requested < 0:
        requested = 1
    metadata = pod.get("metadata") or {}
    marked = copy.deepcopy(dict(pod))
    if metadata.get("deletionTimestamp"):
        current = metadata.get("deletionGracePeriodSeconds")
        if not current or requested is None or requested >= current:
            return None
        started = seconds_of(metadata["deletionTimestamp"]) - current
        marked["metadata"].update(
            deletionTimestamp=timestamp(started + requested), deletionGracePeriodSeconds=requested
        )
        return marked
    seconds = grace_period(pod, requested)
    marked["metadata"].update(
        deletionTimestamp=timestamp(math.ceil(now + seconds)),
        deletionGracePeriodSeconds=seconds,
        generation=int(metadata.get("generation") or 0) + 1,
    )
    return marked


def due(pod: Mapping[str, Any], now: float) -> bool:
    """Whether a terminating pod's grace period has passed (its kubelet then deletes it with grace 0)."""
    metadata = pod.get("metadata") or {}
    stamp = metadata.get("deletionTimestamp")
    return bool(stamp and metadata.get("deletionGracePeriodSeconds")) and seconds_of(str(stamp)) <= now


def with_condition(pod: Mapping[str, Any], condition: Mapping[str, Any]) -> JsonObject:
    """The pod with a status condition set by type (`podutil.UpdatePodCondition`: the transition time kept
    while the status stays)."""
    result = copy.deepcopy(dict(pod))
    status = result.setdefault("status", {})
    conditions = [dict(c) for c in status.get("conditions") or []]
    for index, existing in enumerate(conditions):
        if existing.get("type") == condition.get("type"):
            kept = existing.get("lastTransitionTime") if existing.get("status") == condition.get("status") else None
            conditions[index] = {**condition, **({"lastTransitionTime": kept} if kept else {})}
            break
    else:
        conditions.append(dict(condition))
    status["conditions"] = conditions
    return result
