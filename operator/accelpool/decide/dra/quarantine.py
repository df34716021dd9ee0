"""Per-GPU quarantine: which of a DRA pool's GPUs get a DeviceTaintRule, which rules go. Pure.

For a pool in GPU scope (`support.pool_scope`), a member whose agent reports it unhealthy for GPUs it names
by UUID only (`HealthReport.gpu_scoped`), all of them found in the node's complete ResourceSlices, keeps
serving: its view goes to the node planner as healthy (`GpuDecision.views`), and each device those GPUs back
(the GPU and each of its MIG devices: dra.md 6.4) gets a rule with the pool's `gpuTaintEffect`. A GPU the
driver itself tainted (`gpu.nvidia.com/xid`, `gpu-lost`, NoSchedule: its slice taint) is bad too. A finding
about the node (a missing GPU, a host check) or a GPU the slices do not show leaves the node to the node
planner (quarantined whole). The circuit breaker counts GPUs: a new GPU is quarantined only while the pool's
unavailable GPUs (those of quarantined members, and GPUs quarantined alone) stay within `maxUnavailable` of
its GPUs. A rule goes once its GPU has been reported healthy (and the driver's taint is gone) for the
hold-down; a silent agent changes nothing. Called by `accelpool.decide.dra.plan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

import accelpool_api as api
from accelpool.decide.dra.rules import TaintRule
from accelpool.decide.dra.slices import NodeSlices
from accelpool.decide.planning.model import EventIntent, Remediation
from accelpool.model.nodes import HealthCondition, NodeView, format_time
from accelpool_api import conventions

GPU_SCOPED_REASON = "GpuQuarantined"
"""The reason of the healthy view a member with only GPU-scoped findings is planned with."""


@dataclass(frozen=True)
class GpuDecision:
    """One pool's per-GPU quarantine this pass."""

    rules: Mapping[str, TaintRule] = field(default_factory=dict)
    """Every rule of the pool after this pass (name → rule); a listed rule missing here is deleted."""
    views: Mapping[str, NodeView] = field(default_factory=dict)
    """Members whose faults are all answered per GPU, as the node planner should see them (healthy)."""
    quarantined: tuple[api.DeviceQuarantine, ...] = ()
    events: tuple[EventIntent, ...] = ()
    records: tuple[Remediation, ...] = ()
    """`gpu_taint` / `gpu_untaint` decisions, one per GPU (`accelpool_remediations_total`)."""
    requeue_after: float | None = None
    breaker: str = ""
    """Why GPUs that should be quarantined were not (empty: none held back)."""


def _bad_gpus(view: NodeView, slices: NodeSlices | None) -> dict[str, str] | None:
    """GPU UUID → why, when every fault of the member can be answered per GPU (None: it cannot)."""
    bad: dict[str, str] = {}
    if slices is not None:
        for published in slices.devices:
            taint = published.blocking_taint
            if taint is not None:
                bad.setdefault(published.gpu, str(taint))
    health, report = view.health, view.report
    if health is None or not health.unhealthy:
        return bad
    if report is None or not report.gpu_scoped() or slices is None or not slices.complete:
        return None
    for device in report.bad_devices:
        if not slices.devices_of(device.uuid):
            return None
        bad[device.uuid] = device.reason or report.reason
    return bad


def _gpus_known(view: NodeView, gpu_scoped: bool) -> bool:
    """The agent's live report says which GPUs are bad: it is healthy, or unhealthy for GPUs it names (a GPU it
    does not name is then healthy). A silent agent, or a fault about the node, says nothing of one GPU."""
    health = view.health
    return health is not None and not health.silent and (health.healthy or gpu_scoped)


def decide(
    pool: str,
    spec: api.ComputePoolSpec,
    members: Sequence[NodeView],
    slices: Mapping[str, NodeSlices],
    rules: Iterable[TaintRule],
    now: datetime,
) -> GpuDecision:
    """The pool's rules after this pass (see the module docstring); `members` judged (silent agents Unknown)."""
    hold_down = spec.health.hold_down_seconds
    effect = spec.health.gpu_taint_effect
    existing: dict[tuple[str, str], TaintRule] = {(r.node, r.device): r for r in rules}
    by_node = {view.name: view for view in members}
    kept: dict[str, TaintRule] = {}
    events: list[EventIntent] = []
    records: list[Remediation] = []
    lifted: set[tuple[str, str]] = set()
    views: dict[str, NodeView] = {}
    requeue: float | None = None
    bad_by_node: dict[str, dict[str, str]] = {}
    for view in members:
        bad = _bad_gpus(view, slices.get(view.name))
        if bad is None:
            continue
        bad_by_node[view.name] = bad
        if view.health is not None and view.health.unhealthy:
            views[view.name] = replace(view, health=_served(view.health, bad))
    # 1. existing rules: keep, mark healthy, or lift
    for (node, _device), rule in sorted(existing.items()):
        member = by_node.get(node)
        if member is None:
            continue  # the node left the pool: its rules go (the pool's rules are listed by pool)
        bad = bad_by_node.get(node, {})
        if rule.gpu in bad:
            kept[rule.name] = replace(rule, healthy_since=None, effect=effect)
        elif not _gpus_known(member, node in bad_by_node):
            kept[rule.name] = replace(rule, effect=effect)  # nothing new to go by
        else:
            healthy_since = rule.healthy_since or now
            left = hold_down - (now - healthy_since).total_seconds()
            if left > 0:
                kept[rule.name] = replace(rule, healthy_since=healthy_since, effect=effect)
                requeue = left if requeue is None else min(requeue, left)
            else:
                if (node, rule.gpu) not in lifted:  # one Event and record per GPU, not per MIG device
                    lifted.add((node, rule.gpu))
                    why = f"healthy for {api.format_duration(hold_down)}"
                    events.append(_event(member, "Normal", "GpuQuarantineLifted", rule, why))
                    records.append(Remediation(pool, node, "gpu_untaint", rule.reason))
    # 2. new rules, within the breaker's limit
    total = sum(view.gpus for view in members)
    limit = spec.health.max_unavailable_nodes(total)
    out = {(r.node, r.gpu) for r in kept.values()}
    unavailable = sum(view.gpus for view in members if view.quarantined) + len(out)
    held_back: list[str] = []
    for node, bad in sorted(bad_by_node.items()):
        view = by_node[node]
        node_slices = slices.get(node)
        if node_slices is None or view.quarantined:
            continue
        for gpu_uuid, reason in sorted(bad.items()):
            if (node, gpu_uuid) in out:
                continue
            if unavailable + 1 > limit:
                held_back.append(f"{node} {gpu_uuid}")
                continue
            unavailable += 1
            out.add((node, gpu_uuid))
            added = [
                TaintRule(
                    name=conventions.device_taint_rule_name(node, backed.name),
                    pool=pool,
                    node=node,
                    device=backed.name,
                    gpu=gpu_uuid,
                    reason=reason[:63],
                    effect=effect,
                    since=now,
                )
                for backed in node_slices.devices_of(gpu_uuid)
            ]
            if not added:
                continue
            kept.update((rule.name, rule) for rule in added)
            devices = ", ".join(rule.device for rule in added)
            events.append(_event(view, "Warning", "GpuQuarantined", added[0], f"{reason}; {effect} on {devices}"))
            records.append(Remediation(pool, node, "gpu_taint", reason))
    breaker = ""
    if held_back:
        breaker = (
            f"circuit breaker open: {len(held_back)} bad GPU(s) left serving ({', '.join(held_back[:5])}), "
            f"{unavailable} of {total} GPUs already out of service (maxUnavailable {spec.health.max_unavailable})"
        )
    quarantined = tuple(_listed(rule, slices.get(rule.node)) for rule in sorted(kept.values(), key=lambda r: r.name))
    return GpuDecision(
        rules=kept,
        views=views,
        quarantined=_one_per_gpu(quarantined),
        events=tuple(events),
        records=tuple(records),
        requeue_after=requeue,
        breaker=breaker,
    )


def _served(health: HealthCondition, bad: Mapping[str, str]) -> HealthCondition:
    return HealthCondition(
        status="True",
        reason=GPU_SCOPED_REASON,
        message=f"{len(bad)} GPU(s) quarantined alone ({', '.join(sorted(set(bad.values())))}); the node serves "
        f"the others ({health.reason}: {health.message})"[:1000],
        since=health.since,
        heartbeat=health.heartbeat,
    )


def _listed(rule: TaintRule, slices: NodeSlices | None) -> api.DeviceQuarantine:
    driver = slices is not None and any(d.blocking_taint for d in slices.devices_of(rule.gpu))
    return api.DeviceQuarantine(
        node=rule.node,
        device=rule.device,
        uuid=rule.gpu,
        reason=rule.reason,
        source="driver" if driver else "agent",
        since=format_time(rule.since) if rule.since else None,
        healthy_since=format_time(rule.healthy_since) if rule.healthy_since else None,
    )


def _one_per_gpu(listed: Sequence[api.DeviceQuarantine]) -> tuple[api.DeviceQuarantine, ...]:
    """One line per GPU (its whole-GPU device when it has one), at most 64."""
    by_gpu: dict[tuple[str, str], api.DeviceQuarantine] = {}
    for item in listed:
        key = (item.node, item.uuid)
        if key not in by_gpu or "-mig-" in by_gpu[key].device:
            by_gpu[key] = item
    return tuple(by_gpu.values())[:64]


def _event(view: NodeView, type_: str, reason: str, rule: TaintRule, why: str) -> EventIntent:
    what = "quarantined alone" if reason == "GpuQuarantined" else "released"
    return EventIntent(
        "Node",
        view.name,
        view.uid,
        type_,
        reason,
        f"GPU {rule.gpu} (device {rule.device}) {what}: {why}; DeviceTaintRule {rule.name}",
    )
