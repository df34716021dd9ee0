"""Incremental planning gives the same plan as planning the whole cluster (`accelpool.decide.planning.incremental`).

Scenario clusters (several accelerators, zones and NVLink cliques, static, zonal, same-clique, MIG,
time-sliced, Karpenter, invalid and deleted pools, orphans, nodes of every state) are planned and
settled as the writes would leave them; then random changes, a few at a time (agent health flipping
and going stale, cordons, NotReady, quarantine taints, nodes relabelled to another pool, accelerator
or clique, removed or added, a pool's previous status moving on, a hold-down coming due), are
planned both ways and the plans compared whole. The memo is carried from change to change, so a
wrong memo shows up later.
Hypothesis searches derandomized with a fixed budget: CI runs the same examples every time.
"""

from __future__ import annotations

import random
from dataclasses import replace
from datetime import timedelta
from typing import Any

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from accelpool.decide import desired, render
from accelpool.decide.planning import ConfigState, PlannerOptions, PoolInput, plan
from accelpool.decide.planning.incremental import Memo, replan
from accelpool.model.nodes import HealthCondition, NodeView, Taint
from accelpool_api import conventions

from .conftest import NOW, applied, member, node, pool

MODELS = ("H100-80GB", "A100-80GB", "L4", "MI300X")
ZONES = ("a", "b", "c")
ZONE = "topology.kubernetes.io/zone"
CLIQUES = ("fabric.1", "fabric.2")
NVLINK_MODELS = ("H100-80GB", "A100-80GB")
"""The models whose nodes carry a clique label (GFD labels NVLink-fabric-attached GPUs only)."""
EXAMPLES = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def scenario(seed: int) -> tuple[list[PoolInput], list[NodeView]]:
    """A random cluster: pools of every kind, members, free nodes, orphans."""
    rng = random.Random(seed)
    pools: list[PoolInput] = []
    for index in range(rng.randint(3, 9)):
        model = rng.choice(MODELS)
        spec: dict[str, Any] = {"accelerator": model, "nodes": rng.randint(1, 4)}
        kind = rng.random()
        if kind < 0.2:
            spec["nodeSelector"] = {ZONE: rng.choice(ZONES)}
        elif kind < 0.3 and model in ("H100-80GB", "A100-80GB"):
            spec["mig"] = {"profile": "3g.40gb"}
        elif kind < 0.4 and model == "L4":
            spec["sharing"] = {"timeSlicing": {"replicas": 2}}
        elif kind < 0.5:
            spec["provisioner"] = {"type": "karpenter"}
        elif kind < 0.55:
            spec["nodes"] = -1  # invalid: its members are held
        if rng.random() < 0.3:
            spec["health"] = {"holdDown": "15m", "maxUnavailable": rng.choice([1, 2, "50%"])}
        if rng.random() < 0.35 and model in NVLINK_MODELS:
            spec["nvlink"] = {}  # members in one nvidia.com/gpu.clique
        pools.append(
            pool(
                f"p{index}",
                spec,
                created=f"2026-10-{1 + rng.randint(0, 2):02d}T00:00:00Z",
                deleting=rng.random() < 0.08,
            )
        )
    names = [p.name for p in pools]
    nodes: list[NodeView] = []
    for index in range(rng.randint(10, 40)):
        nodes.append(_random_node(rng, f"n{index:02d}", names))
    return pools, nodes


def _random_node(rng: random.Random, name: str, pools: list[str]) -> NodeView:
    model = rng.choice(MODELS)
    labels = {ZONE: rng.choice(ZONES)}
    if model in NVLINK_MODELS and rng.random() < 0.8:
        labels[conventions.GPU_CLIQUE_LABEL] = rng.choice(CLIQUES)
    kwargs: dict[str, Any] = {
        "labels": labels,
        "ready": rng.random() > 0.1,
        "unschedulable": rng.random() < 0.05,
    }
    roll = rng.random()
    if roll < 0.4 and pools:
        owner = rng.choice(pools)
        health = rng.choice([None, ("True", "Healthy", "", "2026-11-01T00:00:00Z")])
        return member(name, owner, model, health=health, **kwargs)
    if roll < 0.45:
        return member(name, "gone", model, **kwargs)  # an orphan of a pool that no longer exists
    return node(name, model, **kwargs)


def _health(view: NodeView, status: str) -> NodeView:
    reason = {"True": "Healthy", "False": "XidError79", "Unknown": "Checking"}[status]
    return replace(view, health=HealthCondition(status=status, reason=reason, since=NOW - timedelta(hours=1)))


def mutate(rng: random.Random, pools: list[PoolInput], nodes: list[NodeView], counter: list[int]) -> list[NodeView]:
    """One random change to one node (or the node set)."""
    nodes = list(nodes)
    if not nodes:
        return [_random_node(rng, "new0", [p.name for p in pools])]
    index = rng.randrange(len(nodes))
    view = nodes[index]
    what = rng.randrange(11)
    if what <= 2:
        nodes[index] = _health(view, rng.choice(["False", "True", "False", "Unknown"]))
    elif what == 3 and rng.random() < 0.5:  # GFD relabels the clique, or the label goes
        labels = {k: v for k, v in view.labels.items() if k != conventions.GPU_CLIQUE_LABEL}
        clique = rng.choice([None, *CLIQUES])
        nodes[index] = replace(
            view, labels=labels if clique is None else {**labels, conventions.GPU_CLIQUE_LABEL: clique}
        )
    elif what == 4 and rng.random() < 0.5:
        nodes[index] = replace(view, unschedulable=not view.unschedulable)
    elif what == 4:
        nodes[index] = replace(view, ready=not view.ready)
    elif what == 5:
        quarantine = Taint(conventions.QUARANTINE_TAINT_KEY, conventions.NO_SCHEDULE, "XidError79")
        taints = tuple(t for t in view.taints if t.key != quarantine.key)
        nodes[index] = replace(view, taints=taints if view.quarantine_taint else (*taints, quarantine))
    elif what == 6:
        labels = dict(view.labels)
        target = rng.choice([None, "gone", *(p.name for p in pools)])
        if target is None:
            labels.pop(conventions.POOL_LABEL, None)
        else:
            labels[conventions.POOL_LABEL] = target
        nodes[index] = replace(view, labels=labels)
    elif what == 7:
        nodes[index] = replace(view, labels={**view.labels, ZONE: rng.choice(ZONES)})
    elif what == 8:
        nodes[index] = node(view.name, rng.choice(MODELS), labels={ZONE: rng.choice(ZONES)})
    elif what == 9:
        del nodes[index]
    else:
        counter[0] += 1
        nodes.append(_random_node(rng, f"new{counter[0]}", [p.name for p in pools]))
    return nodes


def both(memo: Memo | None, pools: list[PoolInput], nodes: list[NodeView], options: PlannerOptions) -> Memo:
    """Plans incrementally and whole; asserts they agree and returns the new memo."""
    found = replan(memo, pools, nodes, ConfigState(), options, part_limit=1.0)  # small clusters: never fall back
    expected = plan(pools, nodes, ConfigState(), options)
    assert found.plan.pools == expected.pools
    assert dict(found.plan.changes) == dict(expected.changes)
    assert found.plan.events == expected.events
    assert found.plan == replace(expected, changes=found.plan.changes)
    return found


@given(seed=st.integers(0, 10_000), steps=st.lists(st.integers(0, 2**32), min_size=1, max_size=6))
@example(  # a member released and claimed again by its pool in one pass: a free candidate though it never changed
    seed=119618,
    steps=[3743245072, 1729172020, 3093057285, 945163077, 865351769, 996536025, 984384844, 785010583, 1598537012],
)
@EXAMPLES
def test_incremental_plans_equal_whole_plans(seed: int, steps: list[int]) -> None:
    pools, nodes = scenario(seed)
    ages = {view.name: 0.0 for view in nodes}
    options = PlannerOptions(now=NOW, health_unchanged_for=ages)
    memo = both(None, pools, nodes, options)
    nodes = applied(nodes, memo.plan)  # the writes landed: the steady state every later pass starts from
    memo = both(memo, pools, nodes, options)
    counter = [0]
    incremental = 0
    for step in steps:
        rng = random.Random(step)
        for _ in range(rng.randint(1, 3)):
            nodes = mutate(rng, pools, nodes, counter)
        if rng.random() < 0.3:  # a pool's planned status becomes its previous one, as the controller passes it
            index = rng.randrange(len(pools))
            planned = memo.plan.pool(pools[index].name)
            pools = [*pools]
            pools[index] = replace(pools[index], previous=planned.status if planned else None)
        if rng.random() < 0.2:  # some agent falls silent: its condition goes stale
            silent = rng.choice([v.name for v in nodes if v.health is not None] or ["none"])
            options = replace(options, health_unchanged_for={**ages, silent: 10_000.0})
        memo = both(memo, pools, nodes, options)
        incremental += not memo.full
        if rng.random() < 0.5:
            nodes = applied(nodes, memo.plan)
            memo = both(memo, pools, nodes, options)
            incremental += not memo.full
    assert incremental >= len(steps), "most passes after a change were incremental"


def test_a_health_flip_plans_only_its_pool() -> None:
    """One member turning unhealthy replans its own pool and the nodes it could claim, not the cluster."""
    pools = [pool(f"h{i}", {"accelerator": "H100-80GB", "nodes": 2}) for i in range(5)]
    pools += [pool(f"l{i}", {"accelerator": "L4", "nodes": 2}) for i in range(5)]
    nodes = [node(f"h-{i:02d}", "H100-80GB") for i in range(12)] + [node(f"l-{i:02d}", "L4") for i in range(12)]
    options = PlannerOptions(now=NOW)
    memo = both(None, pools, nodes, options)
    nodes = applied(nodes, memo.plan)
    memo = both(memo, pools, nodes, options)
    member_of_l2 = next(v for v in nodes if v.pool == "l2")
    nodes = [_health(v, "False") if v is member_of_l2 else v for v in nodes]
    memo = both(memo, pools, nodes, options)
    assert not memo.full
    assert memo.planned_pools == 1, "only l2 lacks a member now; the H100 pools are not planned"
    assert memo.planned_nodes <= 2 + 2, "l2's members and the free L4 nodes"
    assert memo.plan.changes[member_of_l2.name].add_taints, "the member is quarantined"


def test_a_change_that_moves_no_candidate_plans_its_pool_without_the_candidates() -> None:
    """A member's agent report that changes nothing about the claims (here: its pool's planned status becoming
    its previous one, and a member's health turning True again) plans its pool and that pool's nodes only,
    not the free nodes it could claim."""
    pools = [pool(f"l{i}", {"accelerator": "L4", "nodes": 2}) for i in range(3)]
    nodes = [node(f"l-{i:02d}", "L4") for i in range(20)]
    options = PlannerOptions(now=NOW)
    memo = both(None, pools, nodes, options)
    nodes = applied(nodes, memo.plan)
    memo = both(memo, pools, nodes, options)
    planned = memo.plan.pool("l1")
    assert planned is not None
    pools = [replace(p, previous=planned.status) if p.name == "l1" else p for p in pools]
    memo = both(memo, pools, nodes, options)
    assert not memo.full and (memo.planned_pools, memo.planned_nodes) == (1, 2), "l1 and its two members"
    a_member = next(v for v in nodes if v.pool == "l2")
    nodes = [_health(v, "True") if v is a_member else v for v in nodes]
    memo = both(memo, pools, nodes, options)
    assert not memo.full and (memo.planned_pools, memo.planned_nodes) == (1, 2), "l2 and its two members"


def test_a_change_to_what_a_short_pool_counts_plans_that_pool_too() -> None:
    """A pool that lacks members says why (`NodesSelected`: how many nodes are held by other pools, how many
    do not match): a node it could not take going away changes that, though no pool reads the node."""
    pools = [pool("zonal", {"accelerator": "L4", "nodes": 3, "nodeSelector": {ZONE: "a"}})]
    nodes = [
        member("l-00", "zonal", "L4", labels={ZONE: "a"}),
        node("l-01", "L4", labels={ZONE: "b"}),  # a free node zonal does not match
        member("l-02", "gone", "L4", labels={ZONE: "a"}),  # held by a pool that is gone (orphans are kept)
        *(node(f"h-{i:02d}", "H100-80GB") for i in range(6)),
    ]
    options = PlannerOptions(now=NOW, release_orphans=False)
    memo = both(None, pools, nodes, options)
    nodes = applied(nodes, memo.plan)
    memo = both(memo, pools, nodes, options)
    for gone in ("l-01", "l-02"):
        nodes = [v for v in nodes if v.name != gone]
        memo = both(memo, pools, nodes, options)
        assert not memo.full and memo.planned_pools == 1, f"{gone} gone: zonal is planned again, and only zonal"


def test_nothing_changed_plans_nothing() -> None:
    pools = [pool("a", {"accelerator": "L4", "nodes": 2})]
    nodes = [node(f"n{i}", "L4") for i in range(3)]
    options = PlannerOptions(now=NOW)
    memo = both(None, pools, nodes, options)
    again = both(memo, pools, list(nodes), options)
    assert not again.full and again.planned_pools == 0 and again.plan == memo.plan


def test_desired_after_a_change_is_the_whole_desired_and_keeps_unchanged_renders() -> None:
    """`desired.decide` given the last pass's Desired: equal to deciding afresh; pools not planned again keep
    their rendered DaemonSet (the same object), the pool planned again gets a new one."""
    pools = [pool(f"l{i}", {"accelerator": "L4", "nodes": 1}) for i in range(3)]
    nodes = [node(f"n{i}", "L4") for i in range(4)] + [node(f"h{i}", "H100-80GB") for i in range(20)]
    options = PlannerOptions(now=NOW)

    def decide(nodes: list[NodeView], previous: desired.Desired | None) -> desired.Desired:
        return desired.decide(
            pools,
            nodes,
            ConfigState(),
            options,
            unplannable={},
            agent=render.AgentRendering(),
            current_mig_text=None,
            previous=previous,
        )

    first = decide(nodes, None)
    nodes = applied(nodes, first.plan)
    settled = decide(nodes, first)
    failing = next(v for v in nodes if v.pool == "l1")
    nodes = [_health(v, "False") if v is failing else v for v in nodes]
    after = decide(nodes, settled)
    fresh = decide(nodes, None)
    assert (after.plan, after.owned, after.configmaps) == (fresh.plan, fresh.owned, fresh.configmaps)
    assert after.memo is not None and not after.memo.full
    assert after.owned["l0"] is settled.owned["l0"] and after.owned["l2"] is settled.owned["l2"]
    assert after.owned["l1"] is not settled.owned["l1"]
