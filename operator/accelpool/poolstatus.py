"""A ComputePool's `status`, computed from its members as they will be after the planner's writes.

Called by the planner once per pool and pass. Everything the status says is derived from node
facts (labels, taints, conditions, the agent's report) and the plan's own decisions, so it is
true as soon as the reconciler's writes land. Conditions, in order:

- Valid: the spec passes `accelpool validate` (False: InvalidSpec, the operator touches nothing;
  PlanningFailed when an admitted spec could not be planned or rendered, with the error).
- NodesSelected: members/desired (False: InsufficientNodes, with why other nodes do not qualify;
  karpenter pools: Provisioning or KarpenterNotInstalled).
- MigConfigured: every member's `nvidia.com/mig.config.state` is success for the pool's config
  (False: Pending or Failed naming the nodes; True/NotRequested without MIG).
- DevicePluginConfigured: the pool's device-plugin key is written and every member selects it.
- AgentReady: every member's agent reports (`AcceleratorHealthy` present and live), and nothing
  Kubernetes says about the agents stands in the way (`accelpool.agents.judge`: the DaemonSet
  controller's FailedCreate Events naming a missing RuntimeClass or ServiceAccount, image pulls,
  crash loops); False names the obstacle and the setting that removes it.
- Healthy: no member is quarantined or unhealthy (False: NodeQuarantined naming node, GPU and why;
  NodeUnhealthy when remediation is off; CircuitBreakerOpen when quarantine was refused).
- Ready: the phase is Ready.

Phase: Failed (invalid) > Pending (no members) / Provisioning (karpenter short of min) >
Degraded (unhealthy, quarantined, MIG failed, not Ready, short of nodes, or agents that cannot
run) > Configuring (MIG, device plugin or agents not there yet) > Ready. `lastTransitionTime` is
carried over from the previous status while a condition's status does not change. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from accelpool import agents, api, conventions, nvidia
from accelpool.nodes import NodeChange, NodeView, Taint, format_time
from accelpool_core import catalog

ConditionStatus = Literal["True", "False", "Unknown"]
MemberHealth = Literal["Healthy", "Unhealthy", "Unknown", "Quarantined"]
Phase = Literal["Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed"]
CONDITION_TYPES = (
    "Valid",
    "NodesSelected",
    "MigConfigured",
    "DevicePluginConfigured",
    "AgentReady",
    "Healthy",
    "Ready",
)
MESSAGE_NODES = 5
"""Nodes named in a condition message before the rest are counted."""

# Taints that come and go with a node's lifecycle or mark it bad: pods should not tolerate them.
_TRANSIENT_TAINT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "karpenter.sh/",
    "karpenter.k8s.aws/",
    "cluster-autoscaler.kubernetes.io/",
    "nvidia.com/gpu-xid",
    f"{conventions.DOMAIN}/",
)
_TRANSIENT_TAINT_KEYS = frozenset({"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"})


@dataclass(frozen=True)
class Member:
    """A member node as it will be after the planner's writes (derived facts computed once, at creation)."""

    view: NodeView
    change: NodeChange | None = None
    taints: tuple[Taint, ...] = field(init=False, compare=False)
    unschedulable: bool = field(init=False, compare=False)
    quarantined: bool = field(init=False, compare=False)
    mig_state: str | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # Eager and plain: a status pass reads these for every member (functools.cached_property
        # takes a lock per first access on Python 3.11, which a 10,000-node pass notices).
        view, change = self.view, self.change
        taints = view.taints_after(change)
        unschedulable = view.unschedulable_after(change)
        cordon_note = view.annotations.get(conventions.CORDONED_ANNOTATION)
        if change is not None and conventions.CORDONED_ANNOTATION in change.annotations:
            cordon_note = change.annotations[conventions.CORDONED_ANNOTATION]
        tainted = any(t.key == conventions.QUARANTINE_TAINT_KEY for t in taints)
        set_field = object.__setattr__
        set_field(self, "taints", taints)
        set_field(self, "unschedulable", unschedulable)
        set_field(self, "quarantined", tainted or (cordon_note == "true" and unschedulable))
        set_field(self, "mig_state", view.label_after(change, conventions.MIG_CONFIG_STATE_LABEL))

    @property
    def name(self) -> str:
        return self.view.name

    def label(self, key: str) -> str | None:
        return self.view.label_after(self.change, key)


@dataclass(frozen=True)
class Selection:
    """How membership went for the pool this pass."""

    desired: int
    provisioner: str = "static"
    shortfall: str = ""
    """Why other nodes do not qualify (filled when members < desired)."""
    karpenter_available: bool = True


@dataclass(frozen=True)
class Breaker:
    open: bool = False
    message: str = ""


@dataclass(frozen=True)
class PoolFacts:
    """What the status of one pool is computed from."""

    name: str
    spec: api.ComputePoolSpec | None
    problems: tuple[str, ...]
    generation: int | None
    previous: api.ComputePoolStatus | None
    now: datetime
    members: tuple[Member, ...] = ()
    selection: Selection = Selection(desired=0)
    breaker: Breaker = Breaker()
    agent_verifies: bool = True
    """Whether the agent's backend can check this vendor's devices (health True required to be ready)."""
    device_plugin_written: bool = True
    resolved: api.ResolvedAccelerator | None = None
    """The spec's accelerator, when the caller has resolved it already."""
    unplannable: bool = False
    """The spec passed validation but planning or rendering the pool failed (`problems` says how)."""
    agents: agents.AgentObservation | None = None
    """What Kubernetes says about the pool's agent DaemonSet and pods; None when it was not observed."""


def describe_health(view: NodeView) -> str:
    """`XID 79 (GPU fallen off the bus) on GPU 3`: the agent's message and failing devices."""
    report = view.report
    health = view.health
    text = (report.message if report and report.message else "") or (health.message if health else "")
    reason = (report.reason if report else "") or (health.reason if health else "")
    text = text or reason or "AcceleratorHealthy is False"
    bad = list(report.bad_gpus) if report else []
    if bad and not re.search(r"\bGPUs? \d", text):
        text += f" on GPU {bad[0]}" if len(bad) == 1 else f" on GPUs {', '.join(str(b) for b in bad)}"
    return text


def health_reason(view: NodeView) -> str:
    reason = (view.health.reason if view.health else "") or (view.report.reason if view.report else "")
    return conventions.label_value(reason or "Unhealthy", fallback="Unhealthy")


def _names(members: Sequence[Member]) -> str:
    names = [m.name for m in members[:MESSAGE_NODES]]
    extra = len(members) - len(names)
    return ", ".join(names) + (f" and {extra} more" if extra > 0 else "")


def scheduling_tolerations(pool: str, dedicated: bool, members: Sequence[Member]) -> list[api.Toleration]:
    """Tolerations a pod needs on every member: the pool taint plus other controllers' lasting taints."""
    found: dict[tuple[str, str | None, str], Taint] = {}
    for member in members:
        for taint in member.taints:
            if taint.effect not in ("NoSchedule", "NoExecute") or taint.key in _TRANSIENT_TAINT_KEYS:
                continue
            if taint.key.startswith(_TRANSIENT_TAINT_PREFIXES):
                continue
            found[(taint.key, taint.value, taint.effect)] = taint
    tolerations: list[api.Toleration] = []
    if dedicated:
        tolerations.append(
            api.Toleration(key=conventions.POOL_TAINT_KEY, operator="Equal", value=pool, effect=conventions.NO_SCHEDULE)
        )
    for key, value, effect in sorted(found, key=lambda k: (k[0], k[1] or "", k[2])):
        if value is None:
            tolerations.append(api.Toleration(key=key, operator="Exists", effect=effect))
        else:
            tolerations.append(api.Toleration(key=key, operator="Equal", value=value, effect=effect))
    return tolerations


class _Conditions:
    """Builds the condition list, keeping lastTransitionTime while a status holds."""

    def __init__(self, previous: api.ComputePoolStatus | None, now: datetime, generation: int | None) -> None:
        self._previous = {c.type: c for c in (previous.conditions if previous else [])}
        self._now = format_time(now)
        self._generation = generation
        self.items: list[api.Condition] = []

    def add(self, type_: str, ok: bool | None, reason: str, message: str) -> None:
        status: ConditionStatus = "Unknown" if ok is None else "True" if ok else "False"
        before = self._previous.get(type_)
        since = before.last_transition_time if before and before.status == status else None
        self.items.append(
            api.Condition(
                type=type_,
                status=status,
                reason=reason,
                message=message,
                last_transition_time=since or self._now,
                observed_generation=self._generation,
            )
        )


def invalid_status(facts: PoolFacts) -> api.ComputePoolStatus:
    conditions = _Conditions(facts.previous, facts.now, facts.generation)
    if facts.unplannable:
        conditions.add("Valid", False, "PlanningFailed", "; ".join(facts.problems))
        conditions.add("Ready", False, "Failed", "the pool cannot be planned; the operator changes nothing for it")
    else:
        conditions.add("Valid", False, "InvalidSpec", "; ".join(facts.problems))
        conditions.add("Ready", False, "Failed", "the spec is invalid; the operator changes nothing for this pool")
    members = [api.Member(node=m.name, gpus=m.view.gpus) for m in facts.members[: api.MAX_STATUS_MEMBERS]]
    return api.ComputePoolStatus(
        observed_generation=facts.generation,
        phase="Failed",
        selector=f"{conventions.POOL_LABEL}={facts.name}",
        nodes=api.NodeCounts(members=len(facts.members), summary=f"{len(facts.members)}/0"),
        members=members,
        conditions=conditions.items,
    )


def _member_health(member: Member) -> tuple[MemberHealth, str | None, str | None]:
    view = member.view
    since = format_time(view.health.since) if view.health and view.health.since else None
    if member.quarantined:
        return "Quarantined", health_reason(view), since
    if view.health is not None and view.health.unhealthy:
        return "Unhealthy", health_reason(view), since
    if view.health is not None and view.health.healthy:
        return "Healthy", None, since
    return "Unknown", (view.health.reason or None) if view.health else "NotReported", since


def compute_status(facts: PoolFacts) -> api.ComputePoolStatus:
    """The status of a valid pool."""
    spec = facts.spec
    if spec is None or facts.problems:
        return invalid_status(facts)
    resolved = facts.resolved or spec.resolve()
    entry = resolved.entry
    members = sorted(facts.members, key=lambda m: m.name)
    mig_pool = spec.mig is not None
    nvidia_pool = entry.vendor == catalog.Vendor.NVIDIA
    key = conventions.config_name(facts.name)
    selection = facts.selection
    desired = selection.desired

    # ---------------------------------------------------------------- per-member facts
    quarantined = [m for m in members if m.quarantined]
    unhealthy = [m for m in members if not m.quarantined and m.view.health is not None and m.view.health.unhealthy]
    not_ready = [m for m in members if not m.view.ready]
    cordoned = [m for m in members if m.unschedulable and not m.quarantined]
    silent = [m for m in members if m.view.health is None or m.view.health.silent]
    per_gpu = nvidia.resources_per_gpu(spec, resolved)
    layout = _layout(members, spec, entry, key, per_gpu) if nvidia_pool else _Layout()
    mig_failed, mig_pending = list(layout.failed), list(layout.pending)
    dp_missing = [m for m in members if nvidia_pool and m.label(conventions.DEVICE_PLUGIN_CONFIG_LABEL) != key]

    def member_ready(m: Member) -> bool:
        if not m.view.ready or m.unschedulable or m.quarantined:
            return False
        if nvidia_pool and m.name not in layout.done:
            return False
        health = m.view.health
        if health is None:
            return False
        return health.healthy if facts.agent_verifies else not health.unhealthy

    ready = [m for m in members if member_ready(m)]
    serving = [m for m in members if m.view.ready and not m.unschedulable and not m.quarantined]

    # ---------------------------------------------------------------- capacity
    gpus = sum(m.view.gpus for m in members)
    memory_gib = 0.0
    for m in members:
        detected = m.view.detected
        if detected is None:
            continue
        per_device = detected.memory_mib / 1024 if detected.memory_mib else entry.memory_gb
        memory_gib += detected.count * per_device
    resources = {name: sum(_advertised(m, name) for m in serving) for name in per_gpu}
    dtype = spec.health.matmul.dtype
    measured = [
        m.view.report.tflops
        for m in members
        if m.view.report is not None
        and m.view.report.tflops is not None
        and (m.view.report.dtype in (None, dtype))
        and not m.quarantined
    ]
    measured_tflops = round(sum(measured), 1) if measured else None

    # ---------------------------------------------------------------- conditions
    conditions = _Conditions(facts.previous, facts.now, facts.generation)
    conditions.add("Valid", True, "Valid", f"{resolved.display}, {desired} node(s)")

    enough = len(members) >= desired
    if selection.provisioner == "karpenter" and not selection.karpenter_available:
        conditions.add(
            "NodesSelected",
            enough,
            "Selected" if enough else "KarpenterNotInstalled",
            f"{len(members)} of {desired}: the karpenter.sh/v1 NodePool API is not served by this cluster",
        )
    elif enough:
        conditions.add("NodesSelected", True, "Selected", f"{len(members)} of {desired} nodes selected")
    elif selection.provisioner == "karpenter":
        conditions.add(
            "NodesSelected",
            False,
            "Provisioning",
            f"{len(members)} of {desired}: waiting for Karpenter NodePool {conventions.nodepool_name(facts.name)}",
        )
    else:
        detail = f" ({selection.shortfall})" if selection.shortfall else ""
        conditions.add(
            "NodesSelected",
            False,
            "InsufficientNodes",
            f"{len(members)} of {desired}: only {len(members)} free nodes match {resolved.display}{detail}",
        )

    mig_config = key if mig_pool else conventions.MIG_DISABLED_CONFIG
    if not nvidia_pool or not (mig_pool or entry.mig_capable):
        conditions.add("MigConfigured", True, "NotRequested", "the pool does not use MIG")
    elif layout.overridden:
        conditions.add("MigConfigured", False, "MigStrategyOverridden", _override_message(layout, spec))
    elif mig_failed:
        conditions.add("MigConfigured", False, "Failed", _failed_message(mig_failed, mig_config))
    elif layout.not_advertised:
        conditions.add(
            "MigConfigured",
            False,
            "NotAdvertised",
            f"{conventions.MIG_CONFIG_STATE_LABEL}=success, but "
            + "; ".join(f"{m.name} {why}" for m, why in layout.not_advertised[:MESSAGE_NODES])
            + _more(len(layout.not_advertised)),
        )
    elif mig_pending:
        conditions.add(
            "MigConfigured",
            False,
            "Pending",
            f"{len(mig_pending)} of {len(members)} members applying {mig_config}: {_names(mig_pending)}",
        )
    elif not mig_pool:
        conditions.add("MigConfigured", True, "Disabled", f"MIG off on {len(members)} members (whole GPUs)")
    else:
        devices = ", ".join(f"{n}x {p}" for p, n in nvidia.mig_devices(spec.mig_layout()).items())
        conditions.add("MigConfigured", True, "Configured", f"{devices} per GPU on {len(members)} members")

    if not nvidia_pool:
        conditions.add("DevicePluginConfigured", True, "NotApplicable", f"{entry.vendor.value} devices")
    elif layout.overridden:
        conditions.add("DevicePluginConfigured", False, "MigStrategyOverridden", _override_message(layout, spec))
    elif not facts.device_plugin_written or dp_missing:
        conditions.add(
            "DevicePluginConfigured",
            False,
            "Pending",
            f"{len(dp_missing)} of {len(members)} members do not select {key} yet: {_names(dp_missing)}",
        )
    elif layout.not_advertised and not (mig_pool or entry.mig_capable):
        conditions.add(
            "DevicePluginConfigured",
            False,
            "NotAdvertised",
            "the device plugin has not applied "
            + key
            + ": "
            + "; ".join(f"{m.name} {why}" for m, why in layout.not_advertised[:MESSAGE_NODES])
            + _more(len(layout.not_advertised)),
        )
    else:
        conditions.add(
            "DevicePluginConfigured",
            True,
            "Configured",
            f"{conventions.DEVICE_PLUGIN_CONFIG_LABEL}={key} on {len(members)} members "
            f"(migStrategy {spec.mig_strategy()}"
            + (f", {spec.sharing.mode} x{spec.sharing.replicas})" if spec.sharing else ")"),
        )

    agent_verdict = agents.judge(
        facts.agents,
        members=[m.name for m in members],
        silent=[m.name for m in silent],
        now=facts.now,
        silent_text=_names(silent),
        reporting_note="" if facts.agent_verifies else f" (the agent cannot verify {entry.vendor.value} devices)",
    )
    agents_blocked = not agent_verdict.ok and agent_verdict.reason != "WaitingForAgents"
    conditions.add("AgentReady", agent_verdict.ok, agent_verdict.reason, agent_verdict.message)

    quarantine_details = "; ".join(f"{m.name}: {describe_health(m.view)}" for m in quarantined[:MESSAGE_NODES])
    if len(quarantined) > MESSAGE_NODES:
        quarantine_details += f"; and {len(quarantined) - MESSAGE_NODES} more"
    if facts.breaker.open:
        detail = f"; quarantined: {quarantine_details}" if quarantined else ""
        conditions.add("Healthy", False, "CircuitBreakerOpen", facts.breaker.message + detail)
    elif quarantined:
        conditions.add("Healthy", False, "NodeQuarantined", quarantine_details)
    elif unhealthy:
        conditions.add(
            "Healthy",
            False,
            "NodeUnhealthy",
            "; ".join(f"{m.name}: {describe_health(m.view)}" for m in unhealthy[:MESSAGE_NODES]),
        )
    else:
        healthy = sum(1 for m in members if m.view.health is not None and m.view.health.healthy)
        if members and not healthy:
            conditions.add("Healthy", None, "NotReported", f"none of {len(members)} members has reported health yet")
        else:
            conditions.add("Healthy", True, "AllHealthy", f"{healthy} of {len(members)} members healthy")

    # ---------------------------------------------------------------- phase
    degraded: list[str] = []
    if layout.overridden:
        degraded.append(f"MIG strategy overridden on {len(layout.overridden)}")
    if quarantined:
        degraded.append(f"{len(quarantined)} quarantined")
    if unhealthy:
        degraded.append(f"{len(unhealthy)} unhealthy")
    if mig_failed:
        degraded.append(f"MIG failed on {len(mig_failed)}")
    if not_ready:
        degraded.append(f"{len(not_ready)} not Ready ({_names(not_ready)})")
    if cordoned:
        degraded.append(f"{len(cordoned)} cordoned ({_names(cordoned)})")
    if agents_blocked and members:
        degraded.append(f"agents cannot run ({agent_verdict.reason})")
    configuring: list[str] = []
    if mig_pending:
        configuring.append(f"MIG pending on {len(mig_pending)}")
    if layout.not_advertised:
        configuring.append(f"layout not advertised on {len(layout.not_advertised)}")
    if nvidia_pool and (dp_missing or not facts.device_plugin_written):
        configuring.append("device plugin config pending")
    if silent:
        configuring.append(f"{len(silent)} agents not reporting")
    waiting_health = [m for m in members if facts.agent_verifies and m.view.health and not m.view.health.healthy]
    waiting_health = [m for m in waiting_health if not m.view.health or not m.view.health.unhealthy]
    if waiting_health:
        configuring.append(f"{len(waiting_health)} health Unknown")

    phase: Phase
    if desired > 0 and not members:
        phase = "Provisioning" if selection.provisioner == "karpenter" else "Pending"
        why = conditions.items[1].message
    elif selection.provisioner == "karpenter" and not enough:
        phase, why = "Provisioning", conditions.items[1].message
    elif degraded or not enough:
        phase = "Degraded"
        why = "; ".join(degraded) if degraded else conditions.items[1].message
    elif configuring:
        phase, why = "Configuring", "; ".join(configuring)
    else:
        phase, why = "Ready", f"{len(ready)} of {desired} nodes ready"
    conditions.add("Ready", phase == "Ready", "Ready" if phase == "Ready" else phase, why)

    # ---------------------------------------------------------------- the rest
    status_members = []
    for m in members[: api.MAX_STATUS_MEMBERS]:
        health, reason, since = _member_health(m)
        report = m.view.report
        status_members.append(
            api.Member(
                node=m.name,
                gpus=m.view.gpus,
                health=health,
                reason=reason,
                since=since,
                mig=m.mig_state if mig_pool else None,
                tflops=report.tflops if report is not None else None,
            )
        )
    return api.ComputePoolStatus(
        observed_generation=facts.generation,
        phase=phase,
        accelerator=resolved.display,
        selector=f"{conventions.POOL_LABEL}={facts.name}",
        nodes=api.NodeCounts(
            desired=desired,
            members=len(members),
            ready=len(ready),
            quarantined=len(quarantined),
            summary=f"{len(members)}/{desired}",
        ),
        capacity=api.Capacity(
            gpus=gpus, memory_gib=round(memory_gib), resources=resources, measured_tflops=measured_tflops
        ),
        scheduling=api.Scheduling(
            node_selector={conventions.POOL_LABEL: facts.name},
            tolerations=scheduling_tolerations(facts.name, spec.dedicated, members),
        ),
        members=status_members,
        conditions=conditions.items,
    )


@dataclass(frozen=True)
class _Layout:
    """How NVIDIA's components serve an NVIDIA pool on its members, judged from what the members publish."""

    done: frozenset[str] = frozenset()
    """Members whose MIG config (the pool's layout, or MIG off) is in place and advertised as expected."""
    failed: tuple[Member, ...] = ()
    pending: tuple[Member, ...] = ()
    overridden: tuple[tuple[Member, str], ...] = ()
    """Members whose GFD runs another MIG strategy than the pool's config sets (member, GFD's strategy)."""
    not_advertised: tuple[tuple[Member, str], ...] = ()
    """Members the MIG manager reports `success` for, but whose advertised devices say otherwise (member, why)."""


STRATEGY_OVERRIDE_FIX = (
    "a cluster-wide MIG strategy overrides each config's flags.migStrategy (the GPU Operator sets MIG_STRATEGY "
    "on the device plugin and GFD from ClusterPolicy spec.mig.strategy; the device-plugin chart from migStrategy). "
    "Remove it: kubectl patch clusterpolicies.nvidia.com/cluster-policy --type json "
    """-p '[{"op":"remove","path":"/spec/mig/strategy"}]' (or unset migStrategy in the device-plugin chart)"""
)


def _layout(
    members: Sequence[Member], spec: api.ComputePoolSpec, entry: catalog.Accelerator, key: str, per_gpu: dict[str, int]
) -> _Layout:
    """Per member: is the pool's MIG config (or MIG off) applied, and does the node advertise what it should?

    `nvidia.com/mig.config.state=success` alone does not prove a layout exists: mig-parted reports
    success for an entry that creates nothing, and a label changed mid-run can get `success` for
    the previous config. So a member is done only when the device plugin advertises the pool's
    resources (`status.allocatable`), GFD does not call the layout `-MIG-INVALID`, and GFD runs the
    strategy the pool's config sets (`nvidia.com/mig.strategy`).
    """
    strategy = spec.mig_strategy()
    mig_pool = spec.mig is not None
    wanted = key if mig_pool else conventions.MIG_DISABLED_CONFIG
    done: set[str] = set()
    failed: list[Member] = []
    pending: list[Member] = []
    overridden: list[tuple[Member, str]] = []
    not_advertised: list[tuple[Member, str]] = []
    mps = spec.sharing is not None and spec.sharing.mode == "mps"
    uses_mig_label = mig_pool or entry.mig_capable
    for m in members:
        # GFD's label says the strategy it and the plugin run with; judged once the layout is applied (during a
        # change it may still describe the previous config). Whole GPUs are served alike by none, single, mixed.
        gfd_strategy = m.label(conventions.GFD_MIG_STRATEGY_LABEL)
        config = m.label(conventions.MIG_CONFIG_LABEL) if uses_mig_label else None
        state = m.mig_state if config == wanted else None
        if gfd_strategy is not None and (
            (mig_pool and state == "success" and gfd_strategy != strategy) or (mps and gfd_strategy == "mixed")
        ):
            overridden.append((m, gfd_strategy))
            continue
        missing = _advertised_shortfall(m, per_gpu)
        if not uses_mig_label:
            if missing is None:
                done.add(m.name)
            else:
                not_advertised.append((m, missing))
            continue
        product = (m.label(conventions.GFD_PRODUCT_LABEL) or "") if mig_pool else ""
        if state == "failed":
            failed.append(m)
        elif product.endswith(conventions.GFD_MIG_INVALID_SUFFIX):
            not_advertised.append((m, f"is labelled {conventions.GFD_PRODUCT_LABEL}={product} by GFD"))
        elif state == "success" and missing is not None:
            not_advertised.append((m, missing))
        elif state == "success" or (not mig_pool and config == wanted and missing is None):
            done.add(m.name)  # MIG off is also proven by whole GPUs advertised without a MIG manager's word
        else:
            pending.append(m)
    return _Layout(frozenset(done), tuple(failed), tuple(pending), tuple(overridden), tuple(not_advertised))


def _advertised(member: Member, resource: str) -> int:
    """What the member's device plugin advertises of a resource now (`status.allocatable`)."""
    value = member.view.allocatable.get(resource, "")
    return int(value) if value.isdigit() else 0


def _advertised_shortfall(member: Member, per_gpu: dict[str, int]) -> str | None:
    """What the member's device plugin advertises short of the pool's config, or None when all is there."""
    gpus = member.view.gpus
    if not gpus:
        return None  # the node's GPU count is unknown: nothing to compare with
    short = []
    for resource, count in per_gpu.items():
        have, want = _advertised(member, resource), count * gpus
        if have < want:
            short.append(f"{resource}={have} of {want}")
    return f"advertises {', '.join(short)}" if short else None


def _override_message(layout: _Layout, spec: api.ComputePoolSpec) -> str:
    found = sorted({s for _, s in layout.overridden})
    names = [m.name for m, _ in layout.overridden]
    shown = ", ".join(names[:MESSAGE_NODES]) + _more(len(names))
    return (
        f"GFD on {shown} runs the {'/'.join(found)} MIG strategy ({conventions.GFD_MIG_STRATEGY_LABEL}), but this "
        f"pool's config sets {spec.mig_strategy()}: {STRATEGY_OVERRIDE_FIX}"
    )


def _failed_message(failed: Sequence[Member], config: str) -> str:
    retries = [parse_retries(m.view.annotations.get(conventions.MIG_RETRY_ANNOTATION)) for m in failed]
    note = (
        f"; gave up after {conventions.MIG_RETRIES} retries: see the MIG manager's log on the node"
        if retries and min(retries) >= conventions.MIG_RETRIES
        else f"; retried with backoff, {max(retries, default=0)} of {conventions.MIG_RETRIES} so far (the MIG "
        "manager does not retry by itself; a config it could not read yet reaches it after the kubelet's "
        "ConfigMap sync)"
    )
    return f"{conventions.MIG_CONFIG_STATE_LABEL}=failed for {config} on {_names(list(failed))}{note}"


def parse_retries(text: str | None) -> int:
    count = (text or "").partition("@")[0]
    return int(count) if count.isdigit() else 0


def _more(count: int) -> str:
    return f"; and {count - MESSAGE_NODES} more" if count > MESSAGE_NODES else ""
