"""A planning pass's DRA part, around the node planner: `prepare` before it, `finish` after. Pure.

`prepare` decides each DRA pool's per-GPU quarantine (`accelpool.decide.dra.quarantine`) and hands the node
planner the members whose faults are answered per GPU as healthy; `finish` adds to the plan what the node
planner does not know: each DRA pool's DeviceClass and DeviceTaintRules, its capacity from the ResourceSlices
less the GPUs quarantined alone, `status.quarantine`, `status.dra` and what a pod needs (`status.scheduling`),
and the pass's GPU Events. Called by `accelpool.decide.desired`; why it sits around the node planner rather
than inside it: docs/design/dra.md.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import accelpool_api as api
from accelpool.decide.dra import classes, compute_domain
from accelpool.decide.dra.quarantine import GpuDecision, decide
from accelpool.decide.dra.rules import TaintRule
from accelpool.decide.dra.slices import NodeSlices
from accelpool.decide.dra.support import RuleSupport, pool_scope
from accelpool.decide.planning.membership import judge_health
from accelpool.decide.planning.model import Plan, PlannerOptions, PoolInput, PoolPlan
from accelpool.decide.poolstatus import ConditionHistory, Finding
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions, workloads
from accelpool_api.status import MAX_CONDITION_MESSAGE


@dataclass(frozen=True)
class DraInputs:
    """What the cluster says about DRA, as the controller read it this pass."""

    slices: Mapping[str, NodeSlices] = field(default_factory=dict)
    """Node → its `gpu.nvidia.com` pool."""
    rules: tuple[TaintRule, ...] = ()
    """accelpool's DeviceTaintRules."""
    support: RuleSupport = field(
        default_factory=lambda: RuleSupport(None, "DeviceTaintRuleNotServed", "DeviceTaintRule support not observed")
    )
    compute_domains: Mapping[tuple[str, str], Mapping[str, Any]] = field(default_factory=dict)
    """accelpool's ComputeDomains as stored ((namespace, name) → object), for their status."""


@dataclass(frozen=True)
class DraPlan:
    """What the pass writes of DRA: every accelpool rule and class that should exist (the others go)."""

    rules: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    classes: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    rule_version: str | None = None
    drains: Mapping[str, GpuDrain] = field(default_factory=dict)
    """Pool → the quarantined devices whose pods it evicts (`spec.health.drain` with a NoSchedule rule)."""
    stale_mig: Mapping[str, str] = field(default_factory=dict)
    """Node → its MIG config: the MIG manager applied it, and NVIDIA's kubelet plugin does not publish it yet."""
    compute_domains: Mapping[tuple[str, str], dict[str, Any]] = field(default_factory=dict)
    """(namespace, name) → the ComputeDomain of each pool with `spec.nvlink.computeDomain`."""


@dataclass(frozen=True)
class GpuDrain:
    devices: frozenset[tuple[str, str]]
    """(node, device name) of `gpu.nvidia.com`."""
    grace_seconds: int | None


def dra_pools(pools: Sequence[PoolInput]) -> list[PoolInput]:
    return [p for p in pools if p.valid and p.spec is not None and p.spec.allocation == "DRA" and not p.deleting]


def prepare(
    pools: Sequence[PoolInput], nodes: Sequence[NodeView], inputs: DraInputs, options: PlannerOptions
) -> tuple[list[NodeView], dict[str, GpuDecision]]:
    """The nodes as the node planner should see them, and each GPU-scoped pool's decision."""
    decisions: dict[str, GpuDecision] = {}
    wanted = {
        p.name: p for p in dra_pools(pools) if p.spec is not None and pool_scope(p.spec, inputs.support).scope == "GPU"
    }
    if not wanted:
        return list(nodes), decisions
    members: dict[str, list[NodeView]] = {name: [] for name in wanted}
    for view in nodes:
        if view.pool in members:
            judged = judge_health(view, options.now, options.health_stale_seconds, options.health_unchanged_for)
            members[view.pool].append(judged)
    by_pool: dict[str, list[TaintRule]] = {}
    for rule in inputs.rules:
        by_pool.setdefault(rule.pool, []).append(rule)
    replaced: dict[str, NodeView] = {}
    for name, pool in wanted.items():
        assert pool.spec is not None
        decision = decide(name, pool.spec, members[name], inputs.slices, by_pool.get(name, ()), options.now)
        decisions[name] = decision
        replaced.update(decision.views)
    return [replaced.get(view.name, view) for view in nodes], decisions


def finish(
    plan: Plan,
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    inputs: DraInputs,
    decisions: Mapping[str, GpuDecision],
    now: datetime,
) -> tuple[Plan, DraPlan]:
    """The plan with the DRA pools' statuses and Events, and the DRA objects to write."""
    by_name = {p.name: p for p in dra_pools(pools)}
    views = {view.name: view for view in nodes}
    rules: dict[str, dict[str, Any]] = {}
    device_classes: dict[str, dict[str, Any]] = {}
    drains: dict[str, GpuDrain] = {}
    stale: dict[str, str] = {}
    domains: dict[tuple[str, str], dict[str, Any]] = {}
    pool_plans: list[PoolPlan] = []
    events = list(plan.events)
    records = list(plan.remediations)
    requeue = plan.requeue_after
    for pool_plan in plan.pools:
        pool = by_name.get(pool_plan.name)
        if pool is None or pool.spec is None or pool_plan.status is None:
            pool_plans.append(pool_plan)
            continue
        resolved = pool.spec.resolve()
        decision = decisions.get(pool.name, GpuDecision())
        device_classes[conventions.device_class_name(pool.name)] = classes.device_class(
            pool.name, pool.uid, pool.spec, resolved
        )
        if inputs.support.version is not None:
            for name, rule in decision.rules.items():
                rules[name] = rule.body(inputs.support.version, pool.uid)
            drain = pool.spec.health.drain
            devices = frozenset((r.node, r.device) for r in decision.rules.values() if r.effect == "NoSchedule")
            if drain.enabled and devices:
                drains[pool.name] = GpuDrain(devices, drain.grace_period_seconds)
        events.extend(decision.events)
        records.extend(decision.records)
        if decision.requeue_after is not None:
            requeue = decision.requeue_after if requeue is None else min(requeue, decision.requeue_after)
        members = [views[m] for m in pool_plan.members if m in views]
        stale.update(stale_mig(pool.spec, members, inputs.slices))
        domain = None
        if pool.spec.nvlink is not None and pool.spec.nvlink.compute_domain is not None:
            body = compute_domain.desired_compute_domain(pool.name, pool.uid, pool.spec)
            key = (body["metadata"]["namespace"], body["metadata"]["name"])
            domains[key] = body
            stored = inputs.compute_domains.get(key)
            domain = (
                compute_domain.compute_domain_status(stored)
                if stored is not None
                else api.ComputeDomainStatus(name=key[1], namespace=key[0])
            )
        status = _status(pool_plan.status, pool, resolved, members, inputs, decision, domain)
        status = _healthy(status, pool, decision, now)
        pool_plans.append(replace(pool_plan, status=status))
    for pool_plan in pool_plans:  # device-plugin pools say why they quarantine nodes
        if pool_plan.status is not None and pool_plan.spec is not None and pool_plan.name not in by_name:
            scope = pool_scope(pool_plan.spec, inputs.support)
            pool_plans[pool_plans.index(pool_plan)] = replace(
                pool_plan, status=pool_plan.status.model_copy(update={"quarantine": scope})
            )
    finished = replace(
        plan, pools=tuple(pool_plans), events=tuple(events), remediations=tuple(records), requeue_after=requeue
    )
    return finished, DraPlan(rules, device_classes, inputs.support.version, drains, stale, domains)


def _healthy(
    status: api.ComputePoolStatus, pool: PoolInput, decision: GpuDecision, now: datetime
) -> api.ComputePoolStatus:
    """The Healthy condition counts GPUs quarantined alone (and a breaker that held GPUs back) where the node
    planner saw every member healthy; a quarantined or unhealthy member's own reason stands."""
    current = next((c for c in status.conditions if c.type == "Healthy"), None)
    if current is None or current.status == "False" or not (decision.quarantined or decision.breaker):
        return status
    if decision.breaker:
        finding = Finding(False, "CircuitBreakerOpen", decision.breaker)
    else:
        shown = [f"{q.node} {q.device}: {q.reason}" for q in decision.quarantined]
        message = f"{len(shown)} GPU(s) quarantined alone, their nodes serve the others: " + "; ".join(shown[:10])
        finding = Finding(False, "GpuQuarantined", message[:MAX_CONDITION_MESSAGE])
    condition = ConditionHistory(pool.previous, now, pool.generation).condition("Healthy", finding)
    conditions = [condition if c.type == "Healthy" else c for c in status.conditions]
    return status.model_copy(update={"conditions": conditions})


def stale_mig(
    spec: api.ComputePoolSpec, members: Sequence[NodeView], slices: Mapping[str, NodeSlices]
) -> dict[str, str]:
    """Members of a static-MIG DRA pool whose MIG manager reports the pool's layout applied
    (`nvidia.com/mig.config.state=success`) while NVIDIA's kubelet plugin publishes other MIG devices: the plugin
    reads MIG devices only when it starts, so it must be restarted (kubernetes-sigs/dra-driver-nvidia-gpu
    `site/content/docs/guides/gpu-allocation/mig.md`, static MIG). Node → its `nvidia.com/mig.config` value."""
    if spec.mig is None:
        return {}
    layout = sorted(spec.mig_layout())
    found: dict[str, str] = {}
    for view in members:
        config = view.labels.get(conventions.MIG_CONFIG_LABEL)
        node_slices = slices.get(view.name)
        if view.labels.get(conventions.MIG_CONFIG_STATE_LABEL) != "success" or not config or node_slices is None:
            continue
        gpus = node_slices.of_type("gpu")
        published = {
            gpu.uuid: sorted(d.profile for d in node_slices.devices_of(gpu.uuid) if d.type == "mig") for gpu in gpus
        }
        if not gpus or any(profiles != layout for profiles in published.values()):
            found[view.name] = config
    return found


def _serving(view: NodeView) -> bool:
    """Ready, schedulable, not quarantined nor in burn-in, and NVIDIA's device plugin gone from it (it would hand
    out the same GPUs: the capacity `accelpool.decide.poolstatus` counts requires the same)."""
    plugin_gone = nvidia.serving_difference(view.allocatable, view.gpus, {}) is None
    return view.ready and not view.quarantined and not view.unschedulable and not view.in_burn_in and plugin_gone


def _status(
    status: api.ComputePoolStatus,
    pool: PoolInput,
    resolved: api.ResolvedAccelerator,
    members: Sequence[NodeView],
    inputs: DraInputs,
    decision: GpuDecision,
    domain: api.ComputeDomainStatus | None = None,
) -> api.ComputePoolStatus:
    assert pool.spec is not None
    spec = pool.spec
    scope = pool_scope(spec, inputs.support)
    if decision.breaker:
        scope = scope.model_copy(update={"message": f"{scope.message}; {decision.breaker}"})
    type_, profiles = ("mig", frozenset(spec.mig_layout())) if spec.mig is not None else ("gpu", frozenset())
    out = {(q.node, q.uuid) for q in decision.quarantined}
    devices = 0
    available = 0
    alone = 0
    without: list[str] = []
    for view in members:
        slices = inputs.slices.get(view.name)
        if slices is None or not slices.complete:
            without.append(view.name)
            continue
        own = slices.of_type(type_, profiles)
        devices += len(own)
        if not _serving(view):
            continue
        tainted = {d.gpu for d in slices.devices if d.blocking_taint is not None}
        bad = {gpu for node, gpu in out if node == view.name} | tainted
        alone += len(bad)
        available += sum(1 for d in own if d.gpu not in bad)
    capacity = status.capacity
    gpus = max(0, capacity.gpus - alone)
    resource = classes.extended_resource(pool.name)
    capacity = capacity.model_copy(
        update={
            "gpus": gpus,
            "memory_gib": max(0, capacity.memory_gib - alone * resolved.entry.memory_gb),
            "quarantined_gpus": capacity.quarantined_gpus + min(alone, capacity.gpus),
            "resources": {resource: available} if resource else {},
        }
    )
    scheduling = status.scheduling.model_copy(
        update={
            "device_class_name": conventions.device_class_name(pool.name),
            "resource_claim_template": workloads.dra_claim_template(pool.name),
            "extended_resource_name": resource,
        }
    )
    dra = api.DraStatus(
        device_class=conventions.device_class_name(pool.name),
        devices=devices,
        members_without_slices=sorted(without)[:64],
        members_awaiting_plugin_restart=sorted(stale_mig(spec, members, inputs.slices))[:64],
        quarantined_devices=list(decision.quarantined),
        compute_domain=domain,
    )
    return status.model_copy(update={"capacity": capacity, "scheduling": scheduling, "quarantine": scope, "dra": dra})
