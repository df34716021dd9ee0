"""What accelpool keeps in Kueue for the pools that ask for it, decided from a plan and what Kueue holds.

`decide(plan, previous, observed, now)` runs after planning, on the pools' planned statuses:

- **ResourceFlavors**: one per pool with `spec.kueue.enabled` (`resource_flavor`): `nodeLabels` and
  `tolerations` from the pool's `status.scheduling`, labelled as accelpool's (managed-by, pool)
  and owned by the pool. A flavor of the same name that is not this pool's is never taken over.
- **ClusterQueues** (`accelpool.decide.kueue.queues`): in the queue a pool names, the flavor's nominal
  quota per resource is the pool's healthy, requestable capacity (`status.capacity.resources`:
  whole GPUs, MIG devices per profile, or shared replicas, on serving members only), so a
  quarantined member's devices leave the quota and come back on release. A DRA pool's quota is its
  devices under one resource its DeviceClass is mapped to (`accelpool.decide.kueue.dra`). Anywhere else,
  accelpool's flavors are removed. Nothing else of a queue changes; a queue is never created.
  An edit that raises a quota is written after the pass's node writes, one that lowers it before.
- **Deletions**: accelpool's flavors no pool wants (a pool deleted, Kueue turned off, a flavor
  renamed), once the queues no longer list them (Kueue's finalizer `kueue.x-k8s.io/resource-in-use`
  holds a flavor a queue still uses; the writer deletes only after every queue edit went through).
  The flavors of an invalid pool are left as they are.
- **Statuses**: each asking pool's KueueSynced condition and `status.kueue` (`accelpool.decide.poolstatus.with_kueue`),
  and Events when a quota changes or the condition turns False.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import accelpool_api as api
from accelpool.decide import render
from accelpool.decide.kueue.dra import DraQuota, dra_quota
from accelpool.decide.kueue.queues import edit_groups, nominal_quota, same_groups
from accelpool.decide.planning import EventIntent, Plan, PoolPlan
from accelpool.decide.poolstatus import Finding, with_kueue
from accelpool_api import conventions

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
"""Kueue's storage version (config/components/crd/bases in kubernetes-sigs/kueue)."""
API_VERSION = f"{GROUP}/{VERSION}"
IN_USE_FINALIZER = f"{GROUP}/resource-in-use"
"""Kueue's finalizer on a ResourceFlavor (and a ClusterQueue) while it is in use; accelpool never removes it."""
MAX_TOLERATIONS = 8
"""A ResourceFlavor's `spec.tolerations` holds at most 8 (the CRD's maxItems)."""


@dataclass(frozen=True)
class KueueObserved:
    """What Kueue holds, as the controller last read it."""

    installed: bool = False
    """The kueue.x-k8s.io/v1beta2 ResourceFlavor and ClusterQueue APIs are served."""
    error: str | None = None
    """Why they could not be read (RBAC, say), when they could not."""
    flavors: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Every ResourceFlavor, by name."""
    queues: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    """Every ClusterQueue, by name."""


@dataclass(frozen=True)
class QueueEdit:
    """A ClusterQueue's new `spec.resourceGroups`, written against the `resourceVersion` it was computed from."""

    name: str
    resource_version: str | None
    resource_groups: list[dict[str, Any]]
    pools: tuple[str, ...]
    """The pools whose flavors the edit sets or removes."""
    grows: bool = False
    """A flavor's quota rises or appears: written after the node writes, so a queue never offers more than
    what is about to serve (an edit that only lowers or removes quota is written before them)."""


@dataclass(frozen=True)
class KueuePlan:
    """Everything a pass writes to Kueue, in the order it is written."""

    flavors: Mapping[str, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    """Flavor name → (pool, the ResourceFlavor to apply)."""
    queues: tuple[QueueEdit, ...] = ()
    deletions: Mapping[str, str] = field(default_factory=dict)
    """Flavor name → the pool it was kept for: accelpool's flavors no pool wants any more."""


@dataclass(frozen=True)
class _Asking:
    """A pool that asks for Kueue, and how far its objects can be kept."""

    pool: PoolPlan
    flavor: str
    queue: str | None
    quota: dict[str, int]
    blocked: Finding | None = None
    """Why its flavor cannot be kept (nothing is written for it)."""
    dra: DraQuota | None = None
    """allocation DRA: the quota resource its devices count against, and the mapping Kueue needs."""


def decide(
    plan: Plan, previous: Mapping[str, api.ComputePoolStatus | None], observed: KueueObserved, now: datetime
) -> tuple[Plan, KueuePlan]:
    """The plan with the asking pools' statuses completed, and the Kueue writes (see the module docstring)."""
    asking = _asking(plan, observed)
    if not asking and not _ours(observed):
        return plan, KueuePlan()
    if not observed.installed:
        return _with_statuses(plan, asking, {}, {}, previous, now, observed), KueuePlan()
    held = _held(plan, observed, asking)
    kept = {a.flavor: a for a in asking if a.blocked is None}
    ours = (set(_ours(observed)) | set(kept)) - held
    edits, conflicts = _queue_edits(observed, kept, ours)
    flavors = {a.flavor: (a.pool.name, resource_flavor(a.flavor, a.pool)) for a in kept.values()}
    deletions = {
        name: _pool_label(obj)
        for name, obj in _ours(observed).items()
        if name not in kept and name not in held and not (obj.get("metadata") or {}).get("deletionTimestamp")
    }
    result = _with_statuses(plan, asking, conflicts, {e.name: e for e in edits}, previous, now, observed)
    return result, KueuePlan(flavors, tuple(edits), deletions)


def resource_flavor(name: str, pool: PoolPlan) -> dict[str, Any]:
    """The pool's ResourceFlavor: its members' label, the tolerations its pods need, owned by the pool."""
    assert pool.status is not None
    scheduling = pool.status.scheduling
    spec: dict[str, Any] = {"nodeLabels": dict(sorted(scheduling.node_selector.items()))}
    tolerations = [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in scheduling.tolerations]
    if tolerations:
        spec["tolerations"] = tolerations
    obj: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {
            "name": name,
            "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: pool.name},
            "ownerReferences": [render.owner_reference(pool.name, pool.uid)],
        },
        "spec": spec,
    }
    return render.with_spec_hash(obj)


def requestable(status: api.ComputePoolStatus) -> dict[str, int]:
    """The pool's healthy, requestable capacity per resource: what serving members advertise."""
    return dict(sorted(status.capacity.resources.items()))


# ---------------------------------------------------------------- the pools that ask


def _asking(plan: Plan, observed: KueueObserved) -> list[_Asking]:
    found: list[_Asking] = []
    claimed: dict[str, str] = {}
    for pool in plan.pools:  # in name order: the first pool naming a flavor keeps it
        spec = pool.spec
        if not pool.valid or pool.deleting or spec is None or pool.status is None:
            continue
        if spec.kueue is None or not spec.kueue.enabled:
            continue
        flavor = spec.kueue.flavor_name(pool.name)
        dra = dra_quota(pool.status) if spec.allocation == "DRA" else None
        quota = dra.quota if dra is not None else requestable(pool.status)
        asking = _Asking(pool, flavor, spec.kueue.cluster_queue, quota, dra=dra)
        blocked = _blocked(asking, observed, claimed.get(flavor))
        claimed.setdefault(flavor, pool.name)
        found.append(replace(asking, blocked=blocked))
    return found


def _blocked(asking: _Asking, observed: KueueObserved, claimed_by: str | None) -> Finding | None:
    flavor, pool = asking.flavor, asking.pool
    if not observed.installed:
        if observed.error:
            return Finding(False, "KueueUnreadable", f"Kueue's ResourceFlavors and ClusterQueues: {observed.error}")
        return Finding(
            False,
            "KueueNotInstalled",
            f"the {API_VERSION} ResourceFlavor and ClusterQueue APIs are not served by this cluster: install Kueue; "
            "accelpool keeps the pool's flavor once they are",
        )
    if claimed_by is not None:
        return Finding(
            False,
            "FlavorConflict",
            f"pool {claimed_by} keeps ResourceFlavor {flavor}: set another spec.kueue.resourceFlavor",
        )
    existing = observed.flavors.get(flavor)
    if existing is not None and _pool_label(existing) != pool.name:
        return Finding(
            False,
            "FlavorNotOwned",
            f"ResourceFlavor {flavor} exists and is not this pool's (labels {conventions.MANAGED_BY_LABEL}="
            f"{conventions.MANAGED_BY}, {conventions.POOL_LABEL}={pool.name}): accelpool does not take it over; "
            "set another spec.kueue.resourceFlavor, or delete it",
        )
    if existing is not None and (existing.get("metadata") or {}).get("deletionTimestamp"):
        return Finding(
            False,
            "FlavorTerminating",
            f"ResourceFlavor {flavor} is being deleted (Kueue's finalizer {IN_USE_FINALIZER} holds it while a "
            "ClusterQueue lists it); accelpool creates it again once it is gone",
        )
    assert pool.status is not None
    if len(pool.status.scheduling.tolerations) > MAX_TOLERATIONS:
        return Finding(
            False,
            "TooManyTolerations",
            f"the pool's pods need {len(pool.status.scheduling.tolerations)} tolerations "
            f"(status.scheduling.tolerations); a ResourceFlavor holds at most {MAX_TOLERATIONS}",
        )
    return None


def _held(plan: Plan, observed: KueueObserved, asking: Sequence[_Asking]) -> set[str]:
    """accelpool's flavors left as they are: an invalid pool's, and those of pools whose flavor is blocked."""
    invalid = {p.name for p in plan.pools if not p.valid and not p.deleting}
    blocked = {a.pool.name for a in asking if a.blocked is not None and a.blocked.reason == "TooManyTolerations"}
    return {name for name, obj in _ours(observed).items() if _pool_label(obj) in invalid | blocked}


def _ours(observed: KueueObserved) -> dict[str, Mapping[str, Any]]:
    """The ResourceFlavors accelpool keeps (labelled managed-by accelpool, with a pool)."""
    return {name: obj for name, obj in observed.flavors.items() if _pool_label(obj)}


def _pool_label(obj: Mapping[str, Any]) -> str:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    if labels.get(conventions.MANAGED_BY_LABEL) != conventions.MANAGED_BY:
        return ""
    return str(labels.get(conventions.POOL_LABEL) or "")


def _pool_of(observed: KueueObserved, kept: Mapping[str, _Asking], flavor: str) -> str:
    if flavor in kept:
        return kept[flavor].pool.name
    return _pool_label(observed.flavors.get(flavor) or {})


def _queue_edits(
    observed: KueueObserved, kept: Mapping[str, _Asking], ours: set[str]
) -> tuple[list[QueueEdit], dict[str, str]]:
    """Every queue whose groups change (the kept flavors set where their pools name the queue, the rest of
    `ours` removed), and why a flavor could not be placed (flavor → message)."""
    edits: list[QueueEdit] = []
    conflicts: dict[str, str] = {}
    for name, queue in sorted(observed.queues.items()):
        wanted = {a.flavor: a.quota for a in kept.values() if a.queue == name}
        groups = list((queue.get("spec") or {}).get("resourceGroups") or [])
        edited, problems = edit_groups(groups, wanted, ours)
        conflicts.update({p.flavor: f"ClusterQueue {name}: {p.message}" for p in problems})
        if same_groups(groups, edited):
            continue
        touched = {f.get("name") for g in [*groups, *edited] for f in g.get("flavors") or []} & ours
        pools = sorted({_pool_of(observed, kept, str(f)) for f in touched} - {""})
        version = (queue.get("metadata") or {}).get("resourceVersion")
        grows = any(_raised(nominal_quota(groups, str(f)), nominal_quota(edited, str(f))) for f in touched)
        edits.append(QueueEdit(name, version, edited, tuple(pools), grows))
    return edits, conflicts


def _raised(before: Mapping[str, int], after: Mapping[str, int]) -> bool:
    return any(quota > before.get(resource, -1) for resource, quota in after.items())


# ---------------------------------------------------------------- statuses and Events


def _with_statuses(
    plan: Plan,
    asking: Sequence[_Asking],
    conflicts: Mapping[str, str],
    edits: Mapping[str, QueueEdit],
    previous: Mapping[str, api.ComputePoolStatus | None],
    now: datetime,
    observed: KueueObserved,
) -> Plan:
    by_name = {a.pool.name: a for a in asking}
    pools: list[PoolPlan] = []
    events = list(plan.events)
    for pool in plan.pools:
        found = by_name.get(pool.name)
        if found is None or pool.status is None:
            pools.append(pool)
            continue
        finding, quota = _finding(found, conflicts, observed)
        mapping = found.dra.mapping if found.dra is not None and found.blocked is None else None
        block = api.KueueStatus(
            resource_flavor=found.flavor, cluster_queue=found.queue, nominal_quota=quota, device_class_mapping=mapping
        )
        status = with_kueue(pool.status, finding, block, previous.get(pool.name), now)
        pools.append(replace(pool, status=status))
        events.extend(_events(found, finding, edits, observed))
    return replace(plan, pools=tuple(pools), events=tuple(events))


def _finding(asking: _Asking, conflicts: Mapping[str, str], observed: KueueObserved) -> tuple[Finding, dict[str, int]]:
    """KueueSynced, and the nominal quota the queue will hold for the flavor."""
    if asking.blocked is not None:
        return asking.blocked, {}
    if asking.dra is not None and asking.dra.problem is not None:
        return asking.dra.problem, {}
    flavor, queue = asking.flavor, asking.queue
    mapping = asking.dra.explained() if asking.dra is not None else ""
    if queue is None:
        return Finding(
            True, "FlavorSynced", f"ResourceFlavor {flavor} (no spec.kueue.clusterQueue: no quota kept){mapping}"
        ), {}
    if queue not in observed.queues:
        return Finding(
            False,
            "ClusterQueueNotFound",
            f"ClusterQueue {queue} does not exist: accelpool never creates one; create it and accelpool adds "
            f"ResourceFlavor {flavor} with the pool's quota (ResourceFlavor {flavor} is kept meanwhile)",
        ), {}
    if flavor in conflicts:
        return Finding(False, "ResourceGroupConflict", conflicts[flavor]), {}
    listed = ", ".join(f"{r}={n}" for r, n in asking.quota.items()) or "nothing"
    return Finding(
        True,
        "Synced",
        f"ResourceFlavor {flavor}; ClusterQueue {queue} nominal quota {listed} (the pool's healthy, requestable "
        f"capacity){mapping}",
    ), dict(asking.quota)


def _event_reason(finding: Finding) -> str:
    """A Warning's reason: the condition's reason, prefixed Kueue once (`KueueClusterQueueNotFound`, and
    `KueueNotInstalled` as it is, not `KueueKueueNotInstalled`)."""
    return finding.reason if finding.reason.startswith("Kueue") else f"Kueue{finding.reason}"


def _events(
    asking: _Asking, finding: Finding, edits: Mapping[str, QueueEdit], observed: KueueObserved
) -> list[EventIntent]:
    pool = asking.pool
    if finding.ok is False:
        return [EventIntent("ComputePool", pool.name, pool.uid, "Warning", _event_reason(finding), finding.message)]
    queue = asking.queue
    if finding.reason != "Synced" or queue is None or queue not in edits:
        return []
    stored = (observed.queues[queue].get("spec") or {}).get("resourceGroups") or []
    before = nominal_quota(stored, asking.flavor)
    if before == asking.quota:
        return []
    was = ", ".join(f"{r}={n}" for r, n in before.items()) or "none"
    now = ", ".join(f"{r}={n}" for r, n in asking.quota.items())
    message = f"ClusterQueue {queue}: nominal quota of ResourceFlavor {asking.flavor} {was} -> {now}"
    return [EventIntent("ComputePool", pool.name, pool.uid, "Normal", "KueueQuotaUpdated", message)]
