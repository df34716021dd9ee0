"""One planning pass over the whole cluster (`plan`), its stages in order; see the package docstring."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import accelpool_api as api
from accelpool.decide.planning import claims, configs, membership, sizing
from accelpool.decide.planning.changes import member_changes
from accelpool.decide.planning.ledger import Ledger
from accelpool.decide.planning.membership import Roster
from accelpool.decide.planning.model import (
    ConfigState,
    EventIntent,
    Plan,
    PlannerOptions,
    PoolInput,
    PoolPlan,
    Remediation,
    bounded_events,
)
from accelpool.decide.planning.pools import PoolWork, claim_priority, pool_works
from accelpool.decide.planning.remediation import burnin, quarantine
from accelpool.decide.poolstatus import Member, PoolFacts, Selection, compute_status, driver_versions, invalid_status
from accelpool.model import nvidia
from accelpool.model.agents import AgentObservation
from accelpool.model.evictions import DrainOrder
from accelpool.model.nodes import NodeChange, NodeView
from accelpool_api import conventions


def plan(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState,
    options: PlannerOptions,
    unplannable: Mapping[str, str] | None = None,
) -> Plan:
    """The desired state of the whole cluster (see the module docstring). Deterministic for equal inputs.

    One pool can never stop the others: when planning raises, the pools that raise on their own are
    found by bisection, set aside (`PoolInput.set_aside`: Valid=False naming the error, nothing
    written for them, their nodes held as they are) and the rest are planned again. `unplannable`
    names pools the caller already knows cannot be planned (e.g. their agent DaemonSet could not be
    rendered). Raises only when the failure needs several pools together to happen.
    """
    return plan_traced(pools, nodes, config, options, unplannable)[0]


def plan_traced(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState,
    options: PlannerOptions,
    unplannable: Mapping[str, str] | None = None,
) -> tuple[Plan, Trace]:
    """`plan`, with what each part of the cluster contributed (`Trace`, for `incremental`)."""
    failed = configs.foreign_config_keys(pools, config) | dict(unplannable or {})
    while True:
        inputs = [p.set_aside(failed[p.name]) if p.name in failed else p for p in pools]
        try:
            result, trace = _plan_traced(inputs, nodes, config, options)
        except Exception:
            culprits = _failing_pools([p for p in inputs if not p.unplannable], nodes, config, options)
            if not culprits:
                raise
            failed.update(culprits)
            continue
        planned = {p.name for p in result.pools}
        return replace(result, unplannable={name: why for name, why in failed.items() if name in planned}), trace


def _failing_pools(
    pools: Sequence[PoolInput], nodes: Sequence[NodeView], config: ConfigState, options: PlannerOptions
) -> dict[str, str]:
    """The pools whose planning raises on its own (bisection: O(log pools) plans per culprit)."""
    offline = replace(options, release_orphans=False)
    try:
        _plan_once(pools, nodes, config, offline)
    except Exception as error:
        if len(pools) == 1:
            return {pools[0].name: f"accelpool could not plan this pool: {type(error).__name__}: {error}"[:1000]}
    else:
        return {}
    half = len(pools) // 2
    return _failing_pools(pools[:half], nodes, config, options) | _failing_pools(pools[half:], nodes, config, options)


def _plan_once(
    pools: Sequence[PoolInput], nodes: Sequence[NodeView], config: ConfigState, options: PlannerOptions
) -> Plan:
    """One pass: the stages of the module docstring, in order, recorded in one ledger."""
    return _plan_traced(pools, nodes, config, options)[0]


@dataclass(frozen=True)
class Scope:
    """Part of the cluster to plan (`accelpool.decide.planning.incremental`): only the pools named get a
    `PoolWork`, and `nodes` hold only their nodes and the free candidates they could claim; `in_pools` counts
    the whole cluster's nodes in pools (a claim's shortfall names them)."""

    pools: frozenset[str]
    in_pools: Counter[str]
    owned_configs: frozenset[str]
    """accelpool's own NVIDIA config names (`_owned_configs` of all the pools)."""
    claims: bool = True
    """False: `nodes` hold no free candidates beside the part's own nodes; planning stops (`ClaimsNeeded`) as soon
    as a pool lacks members or a node of the part is free, before any pool's outcome is worked out."""


class ClaimsNeeded(Exception):
    """A part planned without the claims' candidates (`Scope.claims` False) needs them."""


@dataclass
class Trace:
    """What each part of the cluster contributed to a pass: the pieces `incremental` recombines."""

    pool_plans: dict[str, PoolPlan]
    events: list[EventIntent]
    """The pass's Events before `bounded_events`, grouped by object (`_by_object`)."""
    remediations: dict[str, tuple[Remediation, ...]]
    drains: dict[str, tuple[DrainOrder, ...]]
    requeue: dict[str, float]
    """Pool → seconds until a time-based decision of its own needs another pass."""
    needy: dict[str, frozenset[str]]
    """Static pools that lacked members before the claims → the accelerators (catalog names) they take."""
    owners: Mapping[str, tuple[str, ...]]
    """Node → the pools whose planning read it (its pool, the pool that released or claimed it); absent: none."""
    free: Mapping[str, str]
    """Free candidates of the claims (before them) with a detected accelerator → its catalog name."""
    selected: Mapping[str, tuple[str | None, str | None]]
    """Node → (device-plugin key, mig-parted entry) it selects once the pass's writes land."""
    changes: Mapping[str, NodeChange]
    in_pools: Counter[str]
    owned_configs: frozenset[str]


def _plan_traced(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState,
    options: PlannerOptions,
    scope: Scope | None = None,
) -> tuple[Plan, Trace]:
    """The pass of `_plan_once`, with its `Trace`; with a `scope`, only that part of the cluster (the Plan's
    configs are then left empty: `incremental` keeps them)."""
    by_name = {p.name: p for p in pools}  # a name given twice: the last one counts, as with kubectl apply
    ledger = Ledger(_owned_configs(pools, config) if scope is None else scope.owned_configs)
    in_scope = by_name.values() if scope is None else [p for p in by_name.values() if p.name in scope.pools]
    planned = sorted(in_scope, key=claim_priority)
    works = pool_works(planned)
    judged = [
        membership.judge_health(n, options.now, options.health_stale_seconds, options.health_unchanged_for)
        for n in nodes
    ]
    roster = membership.sort_nodes(
        sorted(judged, key=lambda n: n.name), by_name, works, ledger, release_orphans=options.release_orphans
    )
    if scope is not None:
        roster.in_pools = Counter(scope.in_pools)
    owners: dict[str, tuple[str, ...]] = {}
    for view in nodes:
        if view.pool is not None and view.pool in by_name:
            owners[view.name] = (view.pool,)
    requeue: dict[str, float] = {}
    for work in works.values():
        ledger.requeue_after = None
        _remediate(work, ledger, options)
        _burn_in(work, ledger, options)
        _size(work, ledger, roster, options)
        if ledger.requeue_after is not None:
            requeue[work.name] = ledger.requeue_after
        if scope is not None and not scope.claims and not work.karpenter and work.need > 0:
            raise ClaimsNeeded(f"pool {work.name} lacks members")
    free = {name: view.detected.accelerator.name for name, view in roster.free.items() if view.detected is not None}
    if scope is not None and not scope.claims and free:
        raise ClaimsNeeded(f"node {min(free)} is free")
    needy = {w.name: w.filter.accelerators for w in works.values() if not w.karpenter and w.need > 0}
    _claim(works, roster, options)
    for work in works.values():
        for view in work.new_members:
            owners[view.name] = (*owners.get(view.name, ()), work.name)
        ledger.requeue_after = requeue.get(work.name)
        member_changes(ledger, work, options.now, options.config_sync)
        if ledger.requeue_after is not None:
            requeue[work.name] = ledger.requeue_after
    ledger.requeue_after = min(requeue.values(), default=None)
    changes = ledger.changes()
    selected = _selected_configs(nodes, changes)
    if scope is None:
        selected_keys, selected_entries = _selected_sets(selected.values())
        device_plugin = configs.device_plugin_config(planned, works, config, selected_keys)
        mig_document, mig_managed = configs.mig_config(planned, works, config, selected_entries)
    else:
        device_plugin, mig_document, mig_managed = configs.DevicePluginConfig({}, frozenset(), {}), {}, frozenset()
    pool_plans = [_pool_plan(pool, works.get(pool.name), roster, ledger, changes, options) for pool in planned]
    for pool_name, names in sorted(ledger.released_by.items()):
        owner = by_name.get(pool_name)
        if owner is not None:
            ledger.event("ComputePool", pool_name, owner.uid, "Normal", "NodesReleased", _listing("released", names))
    events = _by_object(ledger.events)
    remediations: dict[str, list[Remediation]] = {}
    for record in ledger.remediations:
        remediations.setdefault(record.pool, []).append(record)
    drains = {work.name: work.remediation.drains for work in works.values() if work.remediation.drains}
    result = Plan(
        pools=tuple(sorted(pool_plans, key=lambda p: p.name)),
        changes=changes,
        device_plugin=device_plugin.data,
        device_plugin_managed=device_plugin.managed,
        device_plugin_documents=device_plugin.documents,
        mig_document=mig_document,
        mig_managed=mig_managed,
        events=bounded_events(events),
        remediations=tuple(ledger.remediations),
        requeue_after=ledger.requeue_after,
        drains=tuple(order for work in works.values() for order in work.remediation.drains),
    )
    trace = Trace(
        pool_plans={p.name: p for p in pool_plans},
        events=events,
        remediations={pool: tuple(records) for pool, records in remediations.items()},
        drains=drains,
        requeue=requeue,
        needy=needy,
        owners=owners,
        free=free,
        selected=selected,
        changes=changes,
        in_pools=roster.in_pools,
        owned_configs=ledger.owned_configs,
    )
    return result, trace


def _by_object(events: Sequence[EventIntent]) -> list[EventIntent]:
    """The Events grouped by the object they are about (kind, then name), each object's in the order asked
    for: a part of the cluster planned again replaces its objects' Events and no other's."""
    return sorted(events, key=lambda e: (e.kind, e.name))


def _owned_configs(pools: Sequence[PoolInput], config: ConfigState) -> frozenset[str]:
    """accelpool's own NVIDIA config names: its pools' keys and what its ConfigMaps say it manages, less the
    names every node may be given by others (`default`, NVIDIA's default mig-parted entries)."""
    shared = {conventions.DEFAULT_DEVICE_PLUGIN_KEY} | nvidia.DEFAULT_MIG_CONFIG_NAMES
    names = configs.own_config_names(pools)
    return (names | config.device_plugin_managed | config.mig_managed) - shared


def _selected_configs(
    nodes: Sequence[NodeView], changes: Mapping[str, NodeChange]
) -> dict[str, tuple[str | None, str | None]]:
    """The device-plugin key and mig-parted entry each node selects once the pass's writes land."""
    selected: dict[str, tuple[str | None, str | None]] = {}
    for view in nodes:
        change = changes.get(view.name)
        key = view.label_after(change, conventions.DEVICE_PLUGIN_CONFIG_LABEL)
        entry = view.label_after(change, conventions.MIG_CONFIG_LABEL)
        if key or entry:
            selected[view.name] = (key or None, entry or None)
    return selected


def _selected_sets(selected: Iterable[tuple[str | None, str | None]]) -> tuple[frozenset[str], frozenset[str]]:
    """The device-plugin keys and mig-parted entries nodes select (`_selected_configs`' values)."""
    keys: set[str] = set()
    entries: set[str] = set()
    for key, entry in selected:
        if key:
            keys.add(key)
        if entry:
            entries.add(entry)
    return frozenset(keys), frozenset(entries)


def _remediate(work: PoolWork, ledger: Ledger, options: PlannerOptions) -> None:
    """Stage 2: the pool's remediation decision, kept on the pool and recorded."""
    decision = quarantine.remediate(
        work.name,
        work.input.uid,
        work.spec.health,
        work.desired,
        work.members,
        now=options.now,
        healthy_since=options.healthy_since,
        drains=options.drains,
    )
    work.remediation = decision
    ledger.remediations.extend(decision.records)
    ledger.events.extend(decision.events)
    ledger.requeue(decision.requeue_after)


def _burn_in(work: PoolWork, ledger: Ledger, options: PlannerOptions) -> None:
    """Stage 2, after remediation: which members pass or fail burn-in, kept on the pool and recorded."""
    decision = burnin.judge(
        work.name,
        work.input.uid,
        work.spec,
        work.members,
    )
    work.burn_in = decision
    ledger.events.extend(decision.events)


def _size(work: PoolWork, ledger: Ledger, roster: Roster, options: PlannerOptions) -> None:
    """Stage 3: release a surplus (its nodes become free candidates) or note what the pool lacks."""
    remediated, burn_in = work.remediation, work.burn_in
    decision = sizing.size(
        work.members,
        work.desired,
        karpenter=work.karpenter,
        quarantined=lambda view: remediated.quarantined_after(view) or burn_in.failed_after(view),
        now=options.now,
        not_ready_grace_seconds=options.not_ready_grace_seconds,
    )
    ledger.requeue(decision.requeue_after)
    for view in decision.surplus:
        work.members.remove(view)
        roster.free[view.name] = ledger.release(view, work.name)
    work.need = decision.need


def _claim(works: Mapping[str, PoolWork], roster: Roster, options: PlannerOptions) -> None:
    """Stage 4: static pools that lack members take free nodes, in claim priority."""
    requests = [
        claims.ClaimRequest(work.name, work.filter, work.need, len(work.members), claims.member_cliques(work.members))
        for work in works.values()
        if not work.karpenter and work.need > 0
    ]
    found = claims.claim(requests, roster.free, held=roster.in_pools, tolerated_taints=options.tolerated_taints)
    for name, claim in found.items():
        works[name].new_members.extend(claim.nodes)
        works[name].shortfall = claim.shortfall


def _pool_plan(
    pool: PoolInput,
    work: PoolWork | None,
    roster: Roster,
    ledger: Ledger,
    changes: Mapping[str, NodeChange],
    options: PlannerOptions,
) -> PoolPlan:
    """One pool's outcome: its members and status (`accelpool.decide.poolstatus`)."""
    if pool.deleting:
        return PoolPlan(pool.name, pool.uid, pool.valid, True, pool.spec, (), None)
    if work is None:
        held = roster.held_invalid.get(pool.name, [])
        facts = PoolFacts(
            name=pool.name,
            spec=pool.spec,
            problems=pool.problems or ("invalid spec",),
            unplannable=pool.unplannable,
            generation=pool.generation,
            previous=pool.previous,
            now=options.now,
            members=tuple(Member(v) for v in held),
        )
        status = invalid_status(facts)
        return PoolPlan(pool.name, pool.uid, False, False, pool.spec, tuple(v.name for v in held), status)
    established = pool.previous is not None and pool.previous.nodes.members > 0
    if work.new_members and established:  # the first fill is in the status; changes later are Events
        claimed = _listing("claimed", [v.name for v in work.new_members])
        ledger.event("ComputePool", work.name, pool.uid, "Normal", "NodesClaimed", claimed)
    views = [*work.members, *work.new_members]
    members = tuple([Member(ledger.edits[v.name].view, changes.get(v.name)) for v in views])
    entry = work.resolved.entry
    facts = PoolFacts(
        name=pool.name,
        spec=work.spec,
        problems=(),
        generation=pool.generation,
        previous=pool.previous,
        now=options.now,
        members=members,
        selection=Selection(
            desired=work.desired,
            provisioner=work.spec.provisioner.type,
            shortfall=work.shortfall,
            karpenter_available=options.karpenter_available,
        ),
        breaker=work.remediation.breaker,
        resolved=work.resolved,
        agents=None if options.agents is None else options.agents.get(pool.name, AgentObservation()),
    )
    status = compute_status(facts)
    peak = entry.peaks.get(work.spec.health.matmul.dtype)
    expected = round(peak * status.capacity.gpus, 1) if peak is not None else None
    tolerations = tuple(t for t in status.scheduling.tolerations if t.key != conventions.POOL_TAINT_KEY)
    _warn_of_driver_mismatch(pool, status, ledger)
    return PoolPlan(
        name=pool.name,
        uid=pool.uid,
        valid=True,
        deleting=False,
        spec=work.spec,
        members=tuple(sorted([v.name for v in views])),
        status=status,
        breaker_open=work.remediation.breaker.open,
        expected_tflops=expected,
        tolerations=tolerations,
        burn_in=work.burn_in.active,
        driver_versions=len(driver_versions(members, pool.name)),
        ladder_steps=work.remediation.steps,
    )


def _warn_of_driver_mismatch(pool: PoolInput, status: api.ComputePoolStatus, ledger: Ledger) -> None:
    """A Warning Event while the members run different drivers (DriversConsistent False, naming them): asked
    for on every pass, posted once per window by the controller's Event recorder."""
    drivers = next((c for c in status.conditions if c.type == "DriversConsistent"), None)
    if drivers is not None and drivers.status == "False":
        ledger.event("ComputePool", pool.name, pool.uid, "Warning", drivers.reason, drivers.message)


def _listing(verb: str, names: Sequence[str]) -> str:
    shown = ", ".join(sorted(names)[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"{verb} {len(names)} node(s): {shown}{more}"
