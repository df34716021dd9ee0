"""Incremental planning: after a few nodes changed, plan only the part of the cluster they can affect.

`replan(memo, pools, nodes, config, options)` returns a `Memo` whose plan is the same as
`plan(pools, nodes, config, options)` (`tests/unit/operator/test_incremental.py` compares them over
random changes), planning only the pools and nodes what changed since `memo` can reach, or the
whole cluster when something else changed. Pure: the memo is a value. Called by
`accelpool.decide.desired.decide` for the controller's planner.

How it works and why: docs/design/incremental-planning.md.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TypeVar

from accelpool.decide.planning import configs
from accelpool.decide.planning.cluster_pass import (
    ClaimsNeeded,
    Scope,
    Trace,
    _by_object,
    _plan_traced,
    _selected_sets,
    plan_traced,
)
from accelpool.decide.planning.model import (
    ConfigState,
    HealthAges,
    Plan,
    PlannerOptions,
    PoolInput,
    bounded_events,
)
from accelpool.decide.planning.pools import claim_priority, pool_works
from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision, differing

_T = TypeVar("_T")
PART_LIMIT = 0.5
"""Plan the whole cluster instead when the part to plan holds more than this share of its nodes (a part is
mostly free candidates, which cost a plan less than members: half of the nodes costs well under half a plan)."""


@dataclass(frozen=True)
class Memo:
    """A plan and what it was made of: the input of the next `replan`."""

    pools: tuple[PoolInput, ...]
    inputs: tuple[PoolInput, ...]
    """`pools`, the ones that could not be planned set aside (what was planned)."""
    failed: Mapping[str, str]
    """Pools set aside (name → why): other controllers' config keys, `unplannable`, bisected failures."""
    unplannable: Mapping[str, str]
    config: ConfigState
    options: PlannerOptions
    nodes: Mapping[str, NodeView]
    stale: frozenset[str] | None
    """Nodes whose health had gone stale by `options.health_unchanged_for` (None: not given)."""
    plan: Plan
    trace: Trace
    members: Mapping[str, frozenset[str]]
    """Pool → the nodes its planning read (`Trace.owners` inverted)."""
    free_by_accelerator: Mapping[str, frozenset[str]]
    accelerators: Mapping[str, str]
    """Node → its detected accelerator (catalog name), where detected."""
    filters: Mapping[str, frozenset[str]]
    """Valid, live pool → the accelerators its filter takes."""
    selected_keys: Counter[str]
    selected_entries: Counter[str]
    priority: tuple[str, ...]
    """Pool names in claim priority."""
    full: bool = True
    """Whether this memo's plan was of the whole cluster (for the metrics; the plan is the same)."""
    planned_pools: int = 0
    planned_nodes: int = 0


def replan(
    memo: Memo | None,
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView] | Mapping[str, NodeView],
    config: ConfigState,
    options: PlannerOptions,
    unplannable: Mapping[str, str] | None = None,
    *,
    part_limit: float = PART_LIMIT,
) -> Memo:
    """The plan (`Memo.plan`) of `plan(pools, nodes, config, options, unplannable)`, planning only what changed
    since `memo` where it can (see the module docstring); `part_limit`: `PART_LIMIT`. `nodes` may be given by
    name: a `Revision` of the memo's is compared in as many steps as nodes changed."""
    unplannable = dict(unplannable or {})
    by_name = nodes if isinstance(nodes, Mapping) else {view.name: view for view in nodes}
    if memo is not None and len(by_name) == len(nodes):
        found = _incremental(memo, pools, by_name, config, options, unplannable, part_limit)
        if found is not None:
            return found
    views = list(nodes.values()) if isinstance(nodes, Mapping) else nodes
    result, trace = plan_traced(pools, views, config, options, unplannable)
    failed = configs.foreign_config_keys(pools, config) | unplannable | dict(result.unplannable)
    inputs = tuple(p.set_aside(failed[p.name]) if p.name in failed else p for p in pools)
    return _memo(pools, inputs, failed, unplannable, config, options, by_name, result, trace, full=True)


def _memo(
    pools: Sequence[PoolInput],
    inputs: Sequence[PoolInput],
    failed: Mapping[str, str],
    unplannable: Mapping[str, str],
    config: ConfigState,
    options: PlannerOptions,
    nodes: Mapping[str, NodeView],
    result: Plan,
    trace: Trace,
    *,
    full: bool,
    planned: tuple[int, int] = (0, 0),
) -> Memo:
    members: dict[str, set[str]] = {}
    for node, owners in trace.owners.items():
        for owner in owners:
            members.setdefault(owner, set()).add(node)
    free: dict[str, set[str]] = {}
    for node, accelerator in trace.free.items():
        free.setdefault(accelerator, set()).add(node)
    keys: Counter[str] = Counter()
    entries: Counter[str] = Counter()
    for key, entry in trace.selected.values():
        if key:
            keys[key] += 1
        if entry:
            entries[entry] += 1
    by_name = {p.name: p for p in inputs}
    works = pool_works(sorted(by_name.values(), key=claim_priority))
    return Memo(
        pools=tuple(pools),
        inputs=tuple(inputs),
        failed=dict(failed),
        unplannable=dict(unplannable),
        config=config,
        options=options,
        nodes=nodes,
        stale=_stale(options),
        plan=result,
        trace=trace,
        members={pool: frozenset(names) for pool, names in members.items()},
        free_by_accelerator={accelerator: frozenset(names) for accelerator, names in free.items()},
        accelerators={v.name: v.detected.accelerator.name for v in nodes.values() if v.detected is not None},
        filters={name: work.filter.accelerators for name, work in works.items()},
        selected_keys=keys,
        selected_entries=entries,
        priority=tuple(p.name for p in sorted(by_name.values(), key=claim_priority)),
        full=full,
        planned_pools=planned[0] if not full else len(by_name),
        planned_nodes=planned[1] if not full else len(nodes),
    )


def _stale(options: PlannerOptions) -> frozenset[str] | None:
    ages = options.health_unchanged_for
    if ages is None:
        return None
    limit = options.health_stale_seconds
    if isinstance(ages, HealthAges):
        return ages.reached(limit)
    return frozenset(name for name, age in ages.items() if age >= limit)


_POOL_LOCAL = ("previous", "generation", "check_request")
"""PoolInput fields only the pool's own outcome reads."""


def _changed_pools(memo: Memo, pools: Sequence[PoolInput]) -> set[str] | None:
    """The pools whose own inputs changed since the memo; None when a change reaches further (plan it all)."""
    if len(pools) != len(memo.pools):
        return None
    changed: set[str] = set()
    for new, old in zip(pools, memo.pools, strict=True):
        if new is old:
            continue
        if new.name != old.name:
            return None
        local = {field: getattr(old, field) for field in _POOL_LOCAL}
        if replace(new, **local) != old:
            return None
        if new != old:
            changed.add(new.name)
    return changed


def _same_settings(a: PlannerOptions, b: PlannerOptions) -> bool:
    return (
        a.release_orphans == b.release_orphans
        and a.not_ready_grace_seconds == b.not_ready_grace_seconds
        and a.karpenter_available == b.karpenter_available
        and a.tolerated_taints == b.tolerated_taints
        and a.health_stale_seconds == b.health_stale_seconds
        and (a.health_unchanged_for is None) == (b.health_unchanged_for is None)
        and (a.agents is None) == (b.agents is None)
        and (a.config_sync is b.config_sync or a.config_sync == b.config_sync)
    )


def _changed_nodes(memo: Memo, by_name: Mapping[str, NodeView], options: PlannerOptions) -> set[str]:
    changed = differing(by_name, memo.nodes)
    stale = _stale(options)
    if stale is not None and memo.stale is not None and stale != memo.stale:
        changed |= stale ^ memo.stale
    changed |= differing(options.healthy_since, memo.options.healthy_since)
    changed |= differing(options.drains, memo.options.drains)
    return changed


def _incremental(
    memo: Memo,
    pools: Sequence[PoolInput],
    by_name: Mapping[str, NodeView],
    config: ConfigState,
    options: PlannerOptions,
    unplannable: Mapping[str, str],
    part_limit: float,
) -> Memo | None:
    """The incremental pass, or None where the whole cluster must be planned."""
    if not _same_settings(options, memo.options) or dict(unplannable) != memo.unplannable:
        return None
    if options.health_unchanged_for is None and options.now != memo.options.now:
        return None  # an offline plan ages health by the heartbeats against now: every node may change
    if not (config is memo.config or config == memo.config):
        return None
    pools_changed = _changed_pools(memo, pools)
    if pools_changed is None:
        return None
    elapsed = (options.now - memo.options.now).total_seconds()
    affected = set(pools_changed)
    affected |= {pool for pool, seconds in memo.trace.requeue.items() if seconds - elapsed <= 0}
    if options.agents is not None and memo.options.agents is not None:
        affected |= differing(options.agents, memo.options.agents)
    affected &= set(memo.priority)
    changed = _changed_nodes(memo, by_name, options)
    if not changed and not affected:
        requeue = {pool: seconds - elapsed for pool, seconds in memo.trace.requeue.items()}
        return replace(
            memo,
            options=options,
            pools=tuple(pools),
            nodes=by_name,
            stale=_stale(options),
            plan=replace(memo.plan, requeue_after=_requeue_after(requeue)),
            trace=replace(memo.trace, requeue=requeue),
            full=False,
            planned_pools=0,
            planned_nodes=0,
        )
    in_pools = Counter(memo.trace.in_pools)
    for name in changed:
        for view, sign in ((memo.nodes.get(name), -1), (by_name.get(name), 1)):
            if (accelerator := _in_pool(view)) is not None:
                in_pools[accelerator] += sign
    inputs = tuple(
        old_input if new is old_pool else _set_aside(new, memo.failed)
        for new, old_pool, old_input in zip(pools, memo.pools, memo.inputs, strict=True)
    )
    scope = _part(memo, by_name, changed, set(affected), part_limit, claims=False)
    if scope is None:
        return None
    try:
        if _moves_candidates(memo, by_name, changed, scope):
            raise ClaimsNeeded("the change moved what a short pool outside the part counts")
        trace = _plan_part(memo, inputs, by_name, config, options, in_pools, scope, claims=False)
    except ClaimsNeeded:
        scope = _part(memo, by_name, changed, set(affected), part_limit, claims=True)
        if scope is None:
            return None
        trace = _plan_part(memo, inputs, by_name, config, options, in_pools, scope, claims=True)
    if trace is None:
        return None
    return _recombine(memo, pools, inputs, by_name, config, options, trace, scope[0], scope[1], elapsed)


def _plan_part(
    memo: Memo,
    inputs: Sequence[PoolInput],
    by_name: Mapping[str, NodeView],
    config: ConfigState,
    options: PlannerOptions,
    in_pools: Counter[str],
    part: tuple[set[str], set[str]],
    *,
    claims: bool,
) -> Trace | None:
    """The plan of a part (`_part`: its pools and nodes) as its `Trace`; None where the whole cluster must be
    planned. Without `claims`, `ClaimsNeeded` where the part needs the claims' candidates."""
    scope_pools, scope_nodes = part
    views = [by_name[name] for name in sorted(scope_nodes) if name in by_name]
    scope = Scope(frozenset(scope_pools), in_pools, memo.trace.owned_configs, claims=claims)
    try:
        return _plan_traced(inputs, views, config, options, scope)[1]
    except ClaimsNeeded:
        raise
    except Exception:
        return None  # the whole-cluster plan finds the pool that raises and sets it aside


def _set_aside(pool: PoolInput, failed: Mapping[str, str]) -> PoolInput:
    return pool.set_aside(failed[pool.name]) if pool.name in failed else pool


def _part(
    memo: Memo,
    by_name: Mapping[str, NodeView],
    changed: Collection[str],
    affected: set[str],
    limit: float,
    *,
    claims: bool,
) -> tuple[set[str], set[str]] | None:
    """The pools and nodes to plan again (step 2 of the module docstring); None when that is too much. Without
    `claims`, only the pools that read a changed node or whose own inputs changed, with their nodes: the part
    for a change that moves no node into or out of the free candidates (`_moves_candidates` and `ClaimsNeeded`
    say where one did)."""
    known = set(memo.priority)
    accelerators: set[str] = set()
    for name in changed:
        affected.update(memo.trace.owners.get(name, ()))
        for view in (memo.nodes.get(name), by_name.get(name)):
            if view is None:
                continue
            if view.pool is not None and view.pool in known:
                affected.add(view.pool)
            if view.detected is not None and claims:
                accelerators.add(view.detected.accelerator.name)
    seen_pools: set[str] = set()
    seen_accelerators: set[str] = set()
    while claims:
        for pool in affected - seen_pools:
            seen_pools.add(pool)
            accelerators.update(memo.filters.get(pool, ()))
            for node in memo.members.get(pool, ()):
                accelerator = memo.accelerators.get(node)
                if accelerator is not None:
                    accelerators.add(accelerator)
        for accelerator in accelerators - seen_accelerators:
            seen_accelerators.add(accelerator)
            for node in memo.free_by_accelerator.get(accelerator, ()):
                affected.update(memo.trace.owners.get(node, ()))
        affected.update(
            pool
            for pool, takes in memo.trace.needy.items()
            if pool not in affected and not takes.isdisjoint(accelerators)
        )
        if affected <= seen_pools and accelerators <= seen_accelerators:
            break
    nodes = set(changed)
    for pool in affected:
        nodes.update(memo.members.get(pool, ()))
    for accelerator in accelerators:
        nodes.update(memo.free_by_accelerator.get(accelerator, ()))
    for name in nodes:
        view = by_name.get(name)
        if view is not None and view.pool is not None and view.pool in known and view.pool not in affected:
            return None  # a node of a pool outside the part: the closure missed something, plan it all
    if len(nodes) > limit * max(1, len(by_name)):
        return None
    return affected, nodes


def _moves_candidates(
    memo: Memo, by_name: Mapping[str, NodeView], changed: Collection[str], part: tuple[set[str], set[str]]
) -> bool:
    """Whether a pool outside the part that lacks members takes an accelerator whose free candidates or count of
    nodes in pools the part may move: a node of the part that was a free candidate (a pass without the claims
    plans it as no candidate, or stops), a changed node that joined or left a pool. Such a pool's claims, or the
    shortfall its status explains, could differ, and the part without the claims would miss it."""
    scope_pools, scope_nodes = part
    moved = {memo.trace.free[name] for name in scope_nodes if name in memo.trace.free}
    for name in changed:
        before, after = _in_pool(memo.nodes.get(name)), _in_pool(by_name.get(name))
        if before != after:
            moved.update(accelerator for accelerator in (before, after) if accelerator)
    return any(pool not in scope_pools and not takes.isdisjoint(moved) for pool, takes in memo.trace.needy.items())


def _in_pool(view: NodeView | None) -> str | None:
    """The accelerator a node counts for in the nodes in pools (`Trace.in_pools`), None where it counts for none."""
    if view is None or view.pool is None or view.detected is None:
        return None
    return view.detected.accelerator.name


def _recombine(
    memo: Memo,
    pools: Sequence[PoolInput],
    inputs: Sequence[PoolInput],
    by_name: Mapping[str, NodeView],
    config: ConfigState,
    options: PlannerOptions,
    part: Trace,
    scope_pools: set[str],
    scope_nodes: set[str],
    elapsed: float,
) -> Memo:
    """The memo's plan with the part planned again (step 4 of the module docstring)."""
    before = memo.trace
    pool_plans = {**before.pool_plans, **part.pool_plans}

    changes = _revised(before.changes, scope_nodes, part.changes)  # the writer compares only these

    kept = [
        e
        for e in before.events
        if not ((e.kind == "Node" and e.name in scope_nodes) or (e.kind == "ComputePool" and e.name in scope_pools))
    ]
    events = _by_object([*kept, *part.events])

    remediations = _replaced(before.remediations, part.remediations, scope_pools)
    drains = _replaced(before.drains, part.drains, scope_pools)
    requeue = {pool: seconds - elapsed for pool, seconds in before.requeue.items() if pool not in scope_pools}
    requeue.update(part.requeue)
    needy = {pool: takes for pool, takes in before.needy.items() if pool not in scope_pools}
    needy.update(part.needy)

    owners = _revised(before.owners, scope_nodes, part.owners)
    free = _revised(before.free, scope_nodes, part.free)
    selected = _revised(before.selected, scope_nodes, part.selected)
    keys, entries = Counter(memo.selected_keys), Counter(memo.selected_entries)
    for name in scope_nodes:
        old = before.selected.get(name)
        if old is not None:
            _count(keys, entries, old, -1)
    for pair in part.selected.values():
        _count(keys, entries, pair, 1)
    keys, entries = +keys, +entries
    previous = memo.plan
    if set(keys) == set(memo.selected_keys) and set(entries) == set(memo.selected_entries):
        device_plugin = configs.DevicePluginConfig(
            dict(previous.device_plugin), previous.device_plugin_managed, dict(previous.device_plugin_documents)
        )
        mig_document, mig_managed = previous.mig_document, previous.mig_managed
    else:
        ordered = sorted({p.name: p for p in inputs}.values(), key=claim_priority)
        works = pool_works(ordered)
        selected_keys, selected_entries = _selected_sets(selected.values())
        device_plugin = configs.device_plugin_config(ordered, works, config, selected_keys)
        mig_document, mig_managed = configs.mig_config(ordered, works, config, selected_entries)

    in_pools = Counter(part.in_pools)
    result = Plan(
        pools=tuple(pool_plans[name] for name in sorted(pool_plans)),
        changes=changes,
        device_plugin=device_plugin.data,
        device_plugin_managed=device_plugin.managed,
        device_plugin_documents=device_plugin.documents,
        mig_document=mig_document,
        mig_managed=mig_managed,
        events=bounded_events(events),
        remediations=tuple(r for pool in memo.priority for r in remediations.get(pool, ())),
        requeue_after=_requeue_after(requeue),
        unplannable=previous.unplannable,
        drains=tuple(d for pool in memo.priority for d in drains.get(pool, ())),
    )
    trace = Trace(
        pool_plans=pool_plans,
        events=events,
        remediations=remediations,
        drains=drains,
        requeue=requeue,
        needy=needy,
        owners=owners,
        free=free,
        selected=selected,
        changes=changes,
        in_pools=in_pools,
        owned_configs=before.owned_configs,
    )
    members, free_by_accelerator, accelerators = _index(memo, by_name, scope_pools, scope_nodes, part)
    return replace(
        memo,
        pools=tuple(pools),
        inputs=tuple(inputs),
        options=options,
        nodes=by_name,
        stale=_stale(options),
        plan=result,
        trace=trace,
        selected_keys=keys,
        selected_entries=entries,
        full=False,
        planned_pools=len(scope_pools),
        planned_nodes=len(scope_nodes),
        members=members,
        free_by_accelerator=free_by_accelerator,
        accelerators=accelerators,
    )


def _revised(before: Mapping[str, _T], scope: Collection[str], part: Mapping[str, _T]) -> Revision[_T]:
    """`before` with the part's nodes (`scope`) as the part planned them: a `Revision` (no copy of the rest)."""
    base = before if isinstance(before, Revision) else Revision(before)
    return base.revised({**dict.fromkeys(scope), **part})


def _requeue_after(requeue: Mapping[str, float]) -> float | None:
    """The plan's `requeue_after` from the pools' own (each at least 1 s, as `Ledger.requeue` has it)."""
    return min((max(1.0, seconds) for seconds in requeue.values()), default=None)


def _replaced(before: Mapping[str, _T], part: Mapping[str, _T], pools: Collection[str]) -> dict[str, _T]:
    found = {pool: items for pool, items in before.items() if pool not in pools}
    found.update(part)
    return found


def _count(keys: Counter[str], entries: Counter[str], pair: tuple[str | None, str | None], sign: int) -> None:
    key, entry = pair
    if key:
        keys[key] += sign
    if entry:
        entries[entry] += sign


def _index(
    memo: Memo, by_name: Mapping[str, NodeView], scope_pools: Iterable[str], scope_nodes: set[str], part: Trace
) -> tuple[dict[str, frozenset[str]], dict[str, frozenset[str]], Mapping[str, str]]:
    """The memo's indexes (`members`, `free_by_accelerator`, `accelerators`) with the part's nodes and pools
    updated."""
    members = dict(memo.members)
    for pool in scope_pools:
        members[pool] = frozenset()
    grouped: dict[str, set[str]] = {}
    for node, owners in part.owners.items():
        for owner in owners:
            grouped.setdefault(owner, set()).add(node)
    for pool, names in grouped.items():
        members[pool] = members.get(pool, frozenset()) - scope_nodes | names
    members = {pool: names for pool, names in members.items() if names}
    touched = set(part.free.values())
    for name in scope_nodes:
        for accelerator in (memo.accelerators.get(name), memo.trace.free.get(name)):
            if accelerator is not None:
                touched.add(accelerator)
    free = dict(memo.free_by_accelerator)
    for accelerator in touched:
        free[accelerator] = (free.get(accelerator, frozenset()) - scope_nodes) | {
            n for n, a in part.free.items() if a == accelerator
        }
    detected = {
        name: view.detected.accelerator.name
        for name in scope_nodes
        if (view := by_name.get(name)) is not None and view.detected is not None
    }
    return members, free, _revised(memo.accelerators, scope_nodes, detected)
