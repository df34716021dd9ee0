"""What a pool's status is computed from: its members as they will be after the pass, and how the pass went.

The planner builds one `PoolFacts` per pool and hands it to `accelpool.decide.poolstatus.compute_status`.
`Member` is a node as it will be once the planner's writes land (the pending `NodeChange`
applied), with the facts every condition asks about computed once. Also here: how a member's
health reads in messages and taints (`describe_health`, `health_reason`, also used by the
planner's remediation) and how messages name nodes (`name_list`, `and_more`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

import accelpool_api as api
from accelpool.model import agents, remediation_record
from accelpool.model.nodes import NodeChange, NodeView, Taint
from accelpool_api import conventions
from accelpool_core.protocol import HealthReport

ConditionStatus = Literal["True", "False", "Unknown"]
MemberHealth = Literal["Healthy", "Unhealthy", "Unknown", "Quarantined", "BurnIn"]
Phase = Literal["Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed"]
MESSAGE_NODES = 5
"""Nodes named in a condition message before the rest are counted."""


@dataclass(frozen=True, slots=True)
class Member:
    """A member node as it will be after the planner's writes (derived facts computed once, at creation)."""

    view: NodeView
    change: NodeChange | None = None
    taints: tuple[Taint, ...] = field(init=False, compare=False)
    unschedulable: bool = field(init=False, compare=False)
    quarantined: bool = field(init=False, compare=False)
    burn_in: str | None = field(init=False, compare=False)
    """The value of its `accelpool.io/burn-in` taint (pending, failed), None when it is not in burn-in."""
    mig_state: str | None = field(init=False, compare=False)
    remediation: remediation_record.LadderRecord | None = field(init=False, compare=False)
    """Where a quarantined member stands on the remediation ladder (its `accelpool.io/remediation` record)."""

    def __post_init__(self) -> None:
        # Eager and plain, in one look at each input: a status pass makes one for every member (at 10,000 nodes,
        # 8,000 a pass), and functools.cached_property takes a lock per first access on Python 3.11.
        view, change = self.view, self.change
        annotations = view.annotations
        cordon_note = annotations.get(conventions.CORDONED_ANNOTATION)
        record_text = annotations.get(conventions.REMEDIATION_ANNOTATION)
        if change is None:
            taints, unschedulable = view.taints, view.unschedulable
            mig_state = view.labels.get(conventions.MIG_CONFIG_STATE_LABEL)
        else:
            taints, unschedulable = view.taints_after(change), view.unschedulable_after(change)
            mig_state = view.label_after(change, conventions.MIG_CONFIG_STATE_LABEL)
            written = change.annotations
            if conventions.CORDONED_ANNOTATION in written:
                cordon_note = written[conventions.CORDONED_ANNOTATION]
            if conventions.REMEDIATION_ANNOTATION in written:
                record_text = written[conventions.REMEDIATION_ANNOTATION]
        tainted, burn_in = False, None
        for taint in taints:
            if taint.key == conventions.QUARANTINE_TAINT_KEY:
                tainted = True
            elif taint.key == conventions.BURN_IN_TAINT_KEY and burn_in is None:
                burn_in = taint.value or conventions.BURN_IN_PENDING
        set_field = object.__setattr__
        set_field(self, "taints", taints)
        set_field(self, "unschedulable", unschedulable)
        set_field(self, "quarantined", tainted or (cordon_note == "true" and unschedulable))
        set_field(self, "burn_in", burn_in)
        set_field(self, "mig_state", mig_state)
        set_field(
            self, "remediation", remediation_record.LadderRecord.from_annotation(record_text) if record_text else None
        )

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

    @property
    def karpenter(self) -> bool:
        return self.provisioner == "karpenter"


@dataclass(frozen=True)
class Breaker:
    """The remediation circuit breaker of a pool: open when a quarantine was refused this pass."""

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
    """Whether the agent's backend can check this vendor's devices (health True required to be ready)."""
    device_plugin_written: bool = True
    resolved: api.ResolvedAccelerator | None = None
    """The spec's accelerator, when the caller has resolved it already."""
    unplannable: bool = False
    """The spec passed validation but planning or rendering the pool failed (`problems` says how)."""
    agents: agents.AgentObservation | None = None
    """What Kubernetes says about the pool's agent DaemonSet and pods; None when it was not observed."""


def describe_health(view: NodeView) -> str:
    """`XID 79 (GPU fallen off the bus) on GPU 3`: the agent's message and failing devices.

    A member accelpool quarantined is described by the cause its ladder record keeps
    (`accelpool.model.remediation_record`),
    not by what the agent says now. Otherwise the health annotation speaks only where it agrees with the
    condition: the agent writes the condition first and the annotation next, so a pass between the two
    writes sees a False condition beside the annotation of the last passing cycle.
    """
    record = remediation_record.record_of(view)
    if record is not None and view.quarantined and record.message:
        return record.message
    report = _agreeing_report(view)
    health = view.health
    text = (report.message if report and report.message else "") or (health.message if health else "")
    reason = (report.reason if report else "") or (health.reason if health else "")
    text = text or reason or "AcceleratorHealthy is False"
    bad = list(report.bad_gpus) if report else []
    if bad and not re.search(r"\bGPUs? \d", text):
        text += f" on GPU {bad[0]}" if len(bad) == 1 else f" on GPUs {', '.join(str(b) for b in bad)}"
    return text


def health_reason(view: NodeView) -> str:
    """The member's health reason as a label value (`XidError79`): the quarantine taint's value (a quarantined
    member's is the cause its ladder record keeps)."""
    record = remediation_record.record_of(view)
    if record is not None and view.quarantined:
        return record.cause
    report = _agreeing_report(view)
    reason = (view.health.reason if view.health else "") or (report.reason if report else "")
    return conventions.label_value(reason or "Unhealthy", fallback="Unhealthy")


def _agreeing_report(view: NodeView) -> HealthReport | None:
    """The health annotation, unless it says another status than the condition (it was written apart from it)."""
    report, health = view.report, view.health
    if report is None or health is None or report.status.condition_status == health.status:
        return report
    return None


def name_list(members: Sequence[Member]) -> str:
    """`a, b, c, d, e and 2 more`: the first `MESSAGE_NODES` names, the rest counted."""
    names = [m.name for m in members[:MESSAGE_NODES]]
    extra = len(members) - len(names)
    return ", ".join(names) + (f" and {extra} more" if extra > 0 else "")


def and_more(count: int) -> str:
    """`; and 2 more` after a `; `-joined list cut at `MESSAGE_NODES` items, or nothing."""
    return f"; and {count - MESSAGE_NODES} more" if count > MESSAGE_NODES else ""
