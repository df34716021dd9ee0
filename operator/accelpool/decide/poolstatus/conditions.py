"""One pure function per condition of a ComputePool's status, each from explicit inputs.

Each returns a `Finding` (True, False or Unknown, a CamelCase reason and a message); the
composer (`accelpool.decide.poolstatus.compose`) stamps findings into `metav1.Condition`s with their
transition times, in `CONDITION_TYPES` order. The Ready condition comes from the phase
(`accelpool.decide.poolstatus.phase`).

- Valid: `valid` (True) or `invalid` (InvalidSpec, or PlanningFailed with the error).
- NodesSelected: `nodes_selected` (InsufficientNodes naming why other nodes do not qualify;
  karpenter pools: Provisioning or KarpenterNotInstalled).
- MigConfigured: `mig_configured` (NotRequested, Disabled, Configured; MigStrategyOverridden,
  Failed, NotAdvertised, Pending naming the nodes).
- DevicePluginConfigured: `device_plugin_configured` (the pool's key written and selected by
  every member, and what the members advertise).
- AgentReady: `agent_ready`, from `accelpool.model.agents.judge`.
- Healthy: `healthy` (NodeQuarantined, NodeUnhealthy, CircuitBreakerOpen, NotReported).
- DriversConsistent: `accelpool.decide.poolstatus.drivers.drivers_consistent` (DriverVersionMismatch).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import NamedTuple

from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.facts import (
    MESSAGE_NODES,
    Breaker,
    Member,
    Selection,
    and_more,
    describe_health,
    name_list,
)
from accelpool.decide.poolstatus.layout import Layout, PoolShape
from accelpool.model import agents
from accelpool.model.remediation_record import LadderRecord
from accelpool_api import conventions, workloads
from accelpool_api.status import MAX_CONDITION_MESSAGE

CONDITION_TYPES = (
    "Valid",
    "NodesSelected",
    "MigConfigured",
    "DevicePluginConfigured",
    "AgentReady",
    "Healthy",
    "DriversConsistent",
    "Ready",
)
STRATEGY_OVERRIDE_FIX = (
    "a cluster-wide MIG strategy overrides each config's flags.migStrategy (the GPU Operator sets MIG_STRATEGY "
    "on the device plugin and GFD from ClusterPolicy spec.mig.strategy; the device-plugin chart from migStrategy). "
    "Remove it where it is rendered from, or the next helm upgrade puts it back (the GPU Operator's chart writes "
    "spec.mig.strategy from its value mig.strategy, default single): helm upgrade gpu-operator nvidia/gpu-operator "
    "-n gpu-operator --reuse-values --set mig.strategy=null (null deletes the default), and at once: kubectl patch "
    "clusterpolicies.nvidia.com/cluster-policy --type json "
    """-p '[{"op":"remove","path":"/spec/mig/strategy"}]' (with the device-plugin chart: unset migStrategy)"""
)


class Finding(NamedTuple):
    """What one condition says: `ok` True, False or None (Unknown), why (`reason`, CamelCase) and how.

    A named tuple: seven per pool and pass, so it is cheap to build."""

    ok: bool | None
    reason: str
    message: str


def valid(accelerator: str, desired: int) -> Finding:
    return Finding(True, "Valid", f"{accelerator}, {desired} node(s)")


def invalid(problems: Sequence[str], *, unplannable: bool) -> Finding:
    """Valid=False: the spec's problems, or why an admitted spec could not be planned."""
    return Finding(False, "PlanningFailed" if unplannable else "InvalidSpec", "; ".join(problems))


def nodes_selected(pool: str, selection: Selection, members: int, accelerator: str) -> Finding:
    desired = selection.desired
    enough = members >= desired
    if selection.karpenter and not selection.karpenter_available:
        return Finding(
            enough,
            "Selected" if enough else "KarpenterNotInstalled",
            f"{members} of {desired}: the karpenter.sh/v1 NodePool API is not served by this cluster",
        )
    if enough:
        return Finding(True, "Selected", f"{members} of {desired} nodes selected")
    if selection.karpenter:
        return Finding(
            False,
            "Provisioning",
            f"{members} of {desired}: waiting for Karpenter NodePool {conventions.nodepool_name(pool)}",
        )
    detail = f" ({selection.shortfall})" if selection.shortfall else ""
    return Finding(
        False, "InsufficientNodes", f"{members} of {desired}: only {members} free nodes match {accelerator}{detail}"
    )


def mig_configured(shape: PoolShape, layout: Layout, members: int) -> Finding:
    """Every member's `nvidia.com/mig.config.state` is success for the pool's config, and it shows."""
    if not shape.nvidia or not shape.uses_mig_label:
        return Finding(True, "NotRequested", "the pool does not use MIG")
    if layout.overridden:
        return Finding(False, "MigStrategyOverridden", override_message(layout, shape))
    if layout.failed:
        return Finding(False, "Failed", failed_message(layout.failed, shape.mig_config))
    if layout.not_advertised:
        return Finding(
            False,
            "NotAdvertised",
            f"{conventions.MIG_CONFIG_STATE_LABEL}=success, but {_shortfalls(layout.not_advertised)}",
        )
    if layout.pending:
        pending = layout.pending
        return Finding(
            False,
            "Pending",
            f"{len(pending)} of {members} members applying {shape.mig_config}: {name_list(pending)}",
        )
    if not shape.mig:
        return Finding(True, "Disabled", f"MIG off on {members} members (whole GPUs)")
    devices = ", ".join(f"{n}x {p}" for p, n in workloads.mig_devices(shape.spec.mig_layout()).items())
    return Finding(True, "Configured", f"{devices} per GPU on {members} members")


def device_plugin_configured(
    shape: PoolShape, layout: Layout, missing: Sequence[Member], members: int, *, written: bool
) -> Finding:
    """The pool's device-plugin key is `written` and every member selects it (none is `missing`)."""
    if not shape.nvidia:
        return Finding(True, "NotApplicable", f"{shape.entry.vendor.value} devices")
    if not shape.device_plugin:
        return Finding(
            True,
            "NotApplicable",
            f"allocation DRA: NVIDIA's DRA driver serves the GPUs; {conventions.DEVICE_PLUGIN_DEPLOY_LABEL}=false "
            "keeps the device plugin off the members",
        )
    if layout.overridden:
        return Finding(False, "MigStrategyOverridden", override_message(layout, shape))
    if not written or missing:
        return Finding(
            False,
            "Pending",
            f"{len(missing)} of {members} members do not select {shape.key} yet: {name_list(missing)}",
        )
    if layout.not_served:
        return Finding(
            False,
            "NotAdvertised",
            f"the device plugin does not serve {shape.key} yet: {_shortfalls(layout.not_served)}",
        )
    sharing = shape.spec.sharing
    return Finding(
        True,
        "Configured",
        f"{conventions.DEVICE_PLUGIN_CONFIG_LABEL}={shape.key} on {members} members "
        f"(migStrategy {shape.spec.mig_strategy()}" + (f", {sharing.mode} x{sharing.replicas})" if sharing else ")"),
    )


def agent_ready(
    observation: agents.AgentObservation | None,
    census: Census,
    now: datetime,
) -> Finding:
    """Every member's agent reports, and nothing Kubernetes says about the agents stands in the way."""
    verdict = agents.judge(
        observation,
        members=[m.name for m in census.members],
        silent=[m.name for m in census.silent],
        now=now,
        silent_text=name_list(census.silent),
    )
    return Finding(verdict.ok, verdict.reason, verdict.message)


def healthy(breaker: Breaker, census: Census) -> Finding:
    """No member is quarantined or unhealthy, and the remediation circuit breaker is closed."""
    quarantined, unhealthy = census.quarantined, census.unhealthy
    if breaker.open:
        head = f"{breaker.message}; quarantined: "
        detail = head + _health_details(quarantined, MAX_CONDITION_MESSAGE - len(head)) if quarantined else ""
        return Finding(False, "CircuitBreakerOpen", detail or breaker.message)
    if quarantined:
        return Finding(False, "NodeQuarantined", _health_details(quarantined, MAX_CONDITION_MESSAGE))
    if unhealthy:
        return Finding(False, "NodeUnhealthy", _health_details(unhealthy, MAX_CONDITION_MESSAGE))
    members = len(census.members)
    if members and not census.healthy:
        return Finding(None, "NotReported", f"none of {members} members has reported health yet")
    return Finding(True, "AllHealthy", f"{census.healthy} of {members} members healthy")


def override_message(layout: Layout, shape: PoolShape) -> str:
    found = sorted({s for _, s in layout.overridden})
    names = [m.name for m, _ in layout.overridden]
    shown = ", ".join(names[:MESSAGE_NODES]) + and_more(len(names))
    return (
        f"GFD on {shown} runs the {'/'.join(found)} MIG strategy ({conventions.GFD_MIG_STRATEGY_LABEL}), but this "
        f"pool's config sets {shape.spec.mig_strategy()}: {STRATEGY_OVERRIDE_FIX}"
    )


def failed_message(failed: Sequence[Member], config: str) -> str:
    retries = [parse_retries(m.view.annotations.get(conventions.MIG_RETRY_ANNOTATION)) for m in failed]
    note = (
        f"; gave up after {conventions.MIG_RETRIES} retries: see the MIG manager's log on the node"
        if retries and min(retries) >= conventions.MIG_RETRIES
        else f"; retried with backoff, {max(retries, default=0)} of {conventions.MIG_RETRIES} so far (the MIG "
        "manager does not retry by itself; a config it could not read yet reaches it after the kubelet's "
        "ConfigMap sync)"
    )
    return f"{conventions.MIG_CONFIG_STATE_LABEL}=failed for {config} on {name_list(list(failed))}{note}"


def parse_retries(text: str | None) -> int:
    """The retry count of an `accelpool.io/mig-retry` annotation (`3@<time>` → 3); 0 for anything else."""
    count = (text or "").partition("@")[0]
    return int(count) if count.isdigit() else 0


def _shortfalls(found: Sequence[tuple[Member, str]]) -> str:
    shown = found[:MESSAGE_NODES]
    return "; ".join(f"{m.name} {why}" for m, why in shown) + and_more(len(found))


def _health_details(members: Sequence[Member], chars: int) -> str:
    """`a: XID 79 ...; b: ...; and 7 more` within `chars` (the count of those left out is never cut off)."""
    details = [f"{m.name}: {describe_health(m.view)}{_ladder_step(m)}" for m in members[:MESSAGE_NODES]]
    return conventions.some_of(details, chars, most=MESSAGE_NODES, sep="; ", tail_sep="; ", total=len(members))


def _ladder_step(member: Member) -> str:
    """` (draining)`, ` (handed off: reset-gpu)`: a quarantined member's ladder step past the quarantine."""
    key = conventions.REMEDIATION_ANNOTATION
    change = member.change
    text = (
        change.annotations[key]
        if change is not None and key in change.annotations
        else member.view.annotations.get(key)
    )
    record = LadderRecord.from_annotation(text) if text else None
    if record is None or record.step == "quarantined":
        return ""
    return f" (handed off: {record.action.value})" if record.step == "handed-off" else f" ({record.step})"
