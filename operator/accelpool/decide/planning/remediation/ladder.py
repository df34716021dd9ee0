"""The remediation ladder after the quarantine: drain, then hand-off, for one pool's quarantined members.

Each quarantined member carries a `LadderRecord` (`accelpool.model.remediation_record`), written with its quarantine
(`start`). Every pass, `Ladder.climb` moves a member at most as far as its pool's policy and the
facts allow, one step after another:

- **quarantined → draining** when `health.drain.enabled`: the drain executor evicts its pods
  (`DrainOrder`s, `accelpool.runtime.controller.drain`). Event `DrainStarted`.
- **draining**: each executor visit (`DrainObservation`) is read; the first PodDisruptionBudget
  refusal of the step is reported as a Warning `DrainBlocked` naming the pod, the budget and its
  message (refused evictions are retried every visit, never forced); past `drain.timeout`, a
  Warning `DrainTimedOut` names the pods left, once (the drain goes on). A visit with nothing
  left → **drained**, Event `NodeDrained`.
- **drained → handed-off** when `health.handOff.enabled` and the recommended action is reset-gpu,
  restart-os or service-required: label `accelpool.io/remediation-action=<action>` and a Warning
  `RemediationRequested` for the break-fix step. A node that only needs a drain stays drained.
- A step the policy no longer asks for is withdrawn: a drain stops (Event `DrainStopped`), a
  hand-off's label goes.

The circuit breaker bounds every step: while it is open (the pool refused a quarantine), no drain
or hand-off starts, and the pool's breaker message and a `RemediationHeld` Warning say which nodes
wait; drains under way finish. A member that reports healthy again starts no new step (its
quarantine is lifted after the hold-down, `accelpool.decide.planning.remediation.quarantine`). The recommended
action rises when a later report asks for more (a handed-off node's label follows, with a new
`RemediationRequested`). Called by `accelpool.decide.planning.remediation.quarantine.remediate`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

import accelpool_api as api
from accelpool.decide.planning.model import EventIntent, Remediation
from accelpool.decide.poolstatus import describe_health, health_reason
from accelpool.model.evictions import DrainObservation, DrainOrder, pod_list
from accelpool.model.nodes import NodeView, format_time
from accelpool.model.remediation_record import LadderRecord, record_of
from accelpool_api import conventions
from accelpool_core.protocol import Action


def reported_action(view: NodeView) -> Action:
    """The agent's recommended action, when its report is about the failure the condition states."""
    report, health = view.report, view.health
    if report is None or health is None or not health.unhealthy or report.status.condition_status != "False":
        return Action.NONE
    return report.action


def start(view: NodeView, now: datetime, earlier: int = 0) -> LadderRecord:
    """The record written with a quarantine: the cause is what the agent reports now, consistently; `earlier`:
    the node's quarantines in the `api.FLAP_MEMORY` before (its hold-down doubles for each)."""
    return LadderRecord(
        step="quarantined",
        cause=health_reason(view),
        message=describe_health(view),
        action=reported_action(view),
        since=now,
        step_since=now,
        earlier=earlier,
    )


def adopt(view: NodeView, now: datetime) -> LadderRecord:
    """The record of a member quarantined without one (by an operator before the ladder): its taint names the cause."""
    taint = view.quarantine_taint
    cause = taint.value if taint is not None and taint.value else health_reason(view)
    unhealthy = view.health is not None and view.health.unhealthy
    return replace(start(view, now), cause=cause, message=describe_health(view) if unhealthy else cause)


@dataclass
class Ladder:
    """One pool's ladder this pass: what `climb` decided for each quarantined member."""

    pool: str
    uid: str
    health: api.HealthSpec
    breaker_open: bool
    now: datetime
    records: dict[str, LadderRecord] = field(default_factory=dict)
    """Node → its record after this pass."""
    drains: list[DrainOrder] = field(default_factory=list)
    held_back: list[str] = field(default_factory=list)
    """Nodes whose next step waits for the breaker to close."""
    remediations: list[Remediation] = field(default_factory=list)
    events: list[EventIntent] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    """Seconds until a draining node needs another look (the executor's next visit, a timeout)."""

    def climb(self, view: NodeView, observation: DrainObservation | None) -> None:
        """Move a member quarantined before this pass up its ladder as far as it may go now."""
        record = self._withdrawn(view, self._escalated(view, record_of(view) or adopt(view, self.now)))
        if record.step == "quarantined":
            record = self._drain(view, record)
        if record.step == "draining":
            record = self._draining(view, record, observation)
        if record.step == "drained":
            record = self._hand_off(view, record)
        self.records[view.name] = record

    # ------------------------------------------------------------ the steps

    def _may_start(self, view: NodeView) -> bool:
        """Whether a new step may start on the member: it is still unhealthy and the breaker is closed."""
        if view.health is not None and view.health.healthy:
            return False
        if self.breaker_open:
            self.held_back.append(view.name)
            return False
        return True

    def _drain(self, view: NodeView, record: LadderRecord) -> LadderRecord:
        if not self.health.drain.enabled or not self._may_start(view):
            return record
        self._both(view, "Normal", "DrainStarted", f"{view.name}: draining for {record.cause} ({record.message})")
        self.remediations.append(Remediation(self.pool, view.name, "drain", record.cause))
        return record.at("draining", self.now)

    def _draining(self, view: NodeView, record: LadderRecord, seen: DrainObservation | None) -> LadderRecord:
        since = format_time(record.step_since)
        visit = seen if seen is not None and seen.since == since else None  # a visit of this drain
        if visit is not None and visit.done:
            message = f"{view.name}: drained ({len(visit.evicted)} pod(s) evicted on the last visit)"
            self._both(view, "Normal", "NodeDrained", message)
            return record.at("drained", self.now)
        self.drains.append(DrainOrder(view.name, self.pool, since, self.health.drain.grace_period_seconds))
        self.waits.append(conventions.DRAIN_RETRY_SECONDS)
        if visit is not None and visit.blocked and not record.blocked:
            first = visit.blocked[0]
            budget = f"PodDisruptionBudget {first.pod.namespace}/{first.budget}" if first.budget else "its budget"
            message = (
                f"{view.name}: eviction of pod {first.pod} refused by {budget}: {first.message}; "
                f"retried every {conventions.DRAIN_RETRY_SECONDS:.0f}s, never forced"
            )
            self._both(view, "Warning", "DrainBlocked", message)
            record = replace(record, blocked=str(first.pod))
        elapsed = (self.now - record.step_since).total_seconds()
        timeout = self.health.drain.timeout_seconds
        if elapsed < timeout:
            self.waits.append(timeout - elapsed)
        elif not record.timed_out:
            left = (
                f"{len(visit.remaining)} pod(s) left: {pod_list(visit.remaining)}"
                if visit is not None
                else "its pods could not be listed"
            )
            message = (
                f"{view.name}: drain not done after {self.health.drain.timeout}; {left} "
                "(evictions go on; a PodDisruptionBudget is never bypassed)"
            )
            self._both(view, "Warning", "DrainTimedOut", message)
            record = replace(record, timed_out=True)
        return record

    def _hand_off(self, view: NodeView, record: LadderRecord) -> LadderRecord:
        action = record.hand_off_action
        if not self.health.hand_off.enabled or action is None or not self._may_start(view):
            return record
        self._request(view, record)
        self.remediations.append(Remediation(self.pool, view.name, "hand_off", record.cause))
        return record.at("handed-off", self.now)

    def _withdrawn(self, view: NodeView, record: LadderRecord) -> LadderRecord:
        """The record back down a step the policy no longer asks for (a drain stops; a hand-off's label goes)."""
        if record.step == "draining" and not self.health.drain.enabled:
            self._both(view, "Normal", "DrainStopped", f"{view.name}: drain stopped: spec.health.drain is not enabled")
            return record.at("quarantined", self.now)
        if record.step == "handed-off" and not self.health.hand_off.enabled:
            return record.at("drained", self.now)
        return record

    def _escalated(self, view: NodeView, record: LadderRecord) -> LadderRecord:
        """The record with the recommended action raised to what the agent asks for now, if that is more."""
        asked = reported_action(view)
        if asked.rank <= record.action.rank:
            return record
        raised = replace(record, action=asked)
        if record.step == "handed-off" and raised.hand_off_action is not None:
            self._request(view, raised)
        return raised

    # ------------------------------------------------------------ Events

    def _request(self, view: NodeView, record: LadderRecord) -> None:
        message = (
            f"{view.name}: {record.action.value} requested for {record.cause} ({record.message}); drained and "
            f"labelled {conventions.REMEDIATION_ACTION_LABEL}={record.action.value}"
        )
        self._both(view, "Warning", "RemediationRequested", message)

    def _both(self, view: NodeView, type_: str, reason: str, message: str) -> None:
        self.events.append(EventIntent("Node", view.name, view.uid, type_, reason, message))
        self.events.append(EventIntent("ComputePool", self.pool, self.uid, type_, reason, message))

    def held_message(self) -> str:
        """What the breaker holds back, for its message and a `RemediationHeld` Warning ('' when nothing)."""
        if not self.held_back:
            return ""
        head = (
            "no drain or hand-off starts while the breaker is open (many failures at once are more likely "
            "systemic: a driver rollout, the fabric); waiting: "
        )
        names = conventions.some_of(sorted(self.held_back), conventions.MAX_MESSAGE - len(head), most=5)
        return head + names
