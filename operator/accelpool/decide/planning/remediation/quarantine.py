"""Remediation: which unhealthy members to quarantine, which quarantines to lift, when to refuse.

A member whose `AcceleratorHealthy` is False is quarantined per the pool's policy (taint
`accelpool.io/quarantined=<reason>:NoSchedule`, or cordon remembered in `accelpool.io/cordoned`),
unless that would quarantine more than `maxUnavailable` nodes: the circuit breaker then opens
(a Warning, a `circuit_breaker` record and the Healthy condition say so) and the member is left
serving. Members in burn-in (`accelpool.decide.planning.remediation.burnin`) serve nothing, so quarantining them costs
no capacity: they are always quarantined and never count against `maxUnavailable`. The
quarantine is written with the node's ladder record (`accelpool.io/remediation`,
`accelpool.model.remediation_record`), which keeps its cause; quarantined members then climb the rest of the ladder,
drain and hand-off, as the policy asks and the breaker allows (`accelpool.decide.planning.remediation.ladder`). A
quarantine is lifted once the condition has been True for its hold-down, with its record and
hand-off label. `remediation: none` only reports. A node someone else cordoned is not ours to
cordon (or uncordon) again.

Flapping is damped: every quarantine is added to the node's history
(`accelpool.io/quarantine-history`, `accelpool.model.remediation_record.QuarantineHistory`), which outlives the
quarantine, and a quarantine's hold-down is `holdDown` doubled for each of the node's quarantines in
the `api.FLAP_MEMORY` before it, at most `api.FLAP_DOUBLINGS` times (the record's `earlier`; the
back-off of the kubelet's crash loops, or BGP's route-flap damping). So a GPU that fails again
whenever it is released goes out of service for 1, 2, 4, ... 32 hold-downs, and its
`NodeQuarantined` and `QuarantineLifted` Events say so. Histories older than that are pruned on
any pass that sees them.

`remediate` decides for one pool from its members, the drain executor's last visits and the time;
`apply_quarantine` puts one member's part of the decision on its node edit. Called by the
planning pass.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import accelpool_api as api
from accelpool.decide.planning.ledger import NodeEdit
from accelpool.decide.planning.model import EventIntent, Remediation
from accelpool.decide.planning.remediation.ladder import Ladder, reported_action, start
from accelpool.decide.poolstatus import MESSAGE_NODES, Breaker, describe_health, health_reason
from accelpool.model.evictions import DrainObservation, DrainOrder
from accelpool.model.nodes import NodeView, Taint
from accelpool.model.remediation_record import LadderRecord, QuarantineHistory, history_of, record_of
from accelpool_api import conventions
from accelpool_core.protocol import Action

NO_BREAKER = Breaker()


@dataclass(frozen=True)
class RemediationDecision:
    """One pool's remediation this pass."""

    quarantine: Mapping[str, str] = field(default_factory=dict)
    """Node → `taint` or `cordon`: quarantined this pass."""
    lift: frozenset[str] = frozenset()
    """Quarantined nodes whose hold-down has passed."""
    held: frozenset[str] = frozenset()
    """Quarantined nodes that stay quarantined."""
    breaker: Breaker = NO_BREAKER
    records: tuple[Remediation, ...] = ()
    events: tuple[EventIntent, ...] = ()
    requeue_after: float | None = None
    """Seconds until the next time-based decision: a hold-down passing, a drain's next visit or timeout."""
    ladder: Mapping[str, LadderRecord] = field(default_factory=dict)
    """Node → its ladder record after this pass (every member quarantined after it)."""
    drains: tuple[DrainOrder, ...] = ()
    """The members to drain after this pass's writes."""
    histories: Mapping[str, str | None] = field(default_factory=dict)
    """Node → its `accelpool.io/quarantine-history` text after this pass (None: removed), where it changes."""

    @property
    def steps(self) -> dict[str, int]:
        """Members quarantined after this pass, by ladder step."""
        return dict(Counter(record.step for record in self.ladder.values()))

    def quarantined_after(self, view: NodeView) -> bool:
        """Whether the member is quarantined once this decision is written."""
        return view.name in self.held or view.name in self.quarantine


NO_REMEDIATION = RemediationDecision()


def remediate(
    pool: str,
    uid: str,
    health: api.HealthSpec,
    desired: int,
    members: Sequence[NodeView],
    *,
    now: datetime,
    healthy_since: Mapping[str, datetime],
    drains: Mapping[str, DrainObservation] | None = None,
) -> RemediationDecision:
    """Lift the quarantines whose hold-down has passed, quarantine unhealthy members within the limit, and
    move the members still quarantined up the ladder.

    `healthy_since`: when the operator first saw a node's condition True (on its own clock; the
    condition's `lastTransitionTime` counts only for nodes it has not seen).
    `drains`: node → the drain executor's last visit.
    """
    quarantined: list[NodeView] = []
    unhealthy: list[NodeView] = []
    remembered: list[NodeView] = []
    for view in members:
        if view.quarantined:
            quarantined.append(view)
        elif view.health is not None and view.health.unhealthy:
            unhealthy.append(view)
        if conventions.QUARANTINE_HISTORY_ANNOTATION in view.annotations:
            remembered.append(view)
    if not quarantined and not unhealthy and not remembered:
        return NO_REMEDIATION  # the common case, decided for every pool and pass
    records: list[Remediation] = []
    events: list[EventIntent] = []
    pasts = {view.name: history_of(view).pruned(now) for view in (*remembered, *unhealthy)}
    lift, held, waits = _hold_downs(pool, uid, quarantined, health, now, healthy_since, records, events)
    serving_held = sum(1 for view in quarantined if view.name in held and not view.in_burn_in)
    earlier = {view.name: pasts[view.name].recent(now) for view in unhealthy}
    quarantine, breaker = _quarantines(pool, uid, unhealthy, health, desired, serving_held, earlier, records, events)
    ladder = Ladder(pool, uid, health, breaker.open, now)
    for view in quarantined:
        if view.name in held:
            ladder.climb(view, (drains or {}).get(view.name))
    for view in unhealthy:
        if view.name in quarantine:
            ladder.records[view.name] = start(view, now, earlier[view.name])
            pasts[view.name] = pasts[view.name].added(now)
    held_message = ladder.held_message()
    if held_message:
        breaker = Breaker(open=True, message=f"{breaker.message}; {held_message}")
        events.append(EventIntent("ComputePool", pool, uid, "Warning", "RemediationHeld", held_message))
    waits += ladder.waits
    return RemediationDecision(
        quarantine=quarantine,
        lift=frozenset(lift),
        held=frozenset(held),
        breaker=breaker,
        records=(*records, *ladder.remediations),
        events=(*events, *ladder.events),
        requeue_after=min(waits) if waits else None,
        ladder=ladder.records,
        drains=tuple(ladder.drains),
        histories=_changed_histories(members, pasts),
    )


def _changed_histories(members: Sequence[NodeView], pasts: Mapping[str, QuarantineHistory]) -> dict[str, str | None]:
    """The histories whose text changes this pass: a quarantine added, old ones pruned, a hand-made one bounded."""
    changed: dict[str, str | None] = {}
    for view in members:
        past = pasts.get(view.name)
        if past is None:
            continue
        text = past.to_annotation()
        if text != view.annotations.get(conventions.QUARANTINE_HISTORY_ANNOTATION):
            changed[view.name] = text
    return changed


def _hold_downs(
    pool: str,
    uid: str,
    quarantined: Sequence[NodeView],
    health: api.HealthSpec,
    now: datetime,
    healthy_since: Mapping[str, datetime],
    records: list[Remediation],
    events: list[EventIntent],
) -> tuple[set[str], set[str], list[float]]:
    """The quarantines lifted (healthy for their hold-down) and held, and how long until each held healthy one
    lifts. A quarantine's hold-down is `holdDown` doubled for each of the node's quarantines before it that its
    record counts (`earlier`)."""
    lift: set[str] = set()
    held: set[str] = set()
    waits: list[float] = []
    for view in quarantined:
        record = record_of(view)
        earlier = record.earlier if record is not None else 0
        hold = health.damped_hold_down_seconds(earlier)
        healthy_for = healthy_seconds(view, now, healthy_since)
        if healthy_for is not None and healthy_for >= hold:
            lift.add(view.name)
            action = "uncordon" if view.cordoned_by_us and view.quarantine_taint is None else "untaint"
            records.append(Remediation(pool, view.name, action, "HoldDownPassed"))
            cause = f" (quarantined for {record.cause}, {record.step})" if record is not None else ""
            damped = (
                f"; its hold-down was {api.format_duration(hold)}: {_earlier(earlier, 'before it')}, "
                f"{_doubling(health)}"
                if earlier
                else ""
            )
            message = (
                f"{view.name}: {conventions.HEALTH_CONDITION} True for {int(healthy_for)}s; "
                f"quarantine lifted{cause}{damped}"
            )
            events.append(EventIntent("Node", view.name, view.uid, "Normal", "QuarantineLifted", message))
            events.append(EventIntent("ComputePool", pool, uid, "Normal", "QuarantineLifted", message))
        else:
            held.add(view.name)
            if healthy_for is not None:
                waits.append(hold - healthy_for)
    return lift, held, waits


def _quarantines(
    pool: str,
    uid: str,
    unhealthy: Sequence[NodeView],
    health: api.HealthSpec,
    desired: int,
    still_quarantined: int,
    earlier: Mapping[str, int],
    records: list[Remediation],
    events: list[EventIntent],
) -> tuple[dict[str, str], Breaker]:
    """Unhealthy members quarantined per the policy while `maxUnavailable` allows (members in burn-in always,
    uncounted), and the breaker. `still_quarantined`: members outside burn-in that stay quarantined; `earlier`:
    each member's recent quarantines (its hold-down doubles for each)."""
    policy = health.remediation
    limit = health.max_unavailable_nodes(desired)
    breaker = NO_BREAKER
    quarantine: dict[str, str] = {}
    refused: list[str] = []
    for view in unhealthy:
        reason, why = health_reason(view), describe_health(view)
        if policy == "none":
            message = f"{view.name}: {why} (remediation none: reported only)"
            events.append(EventIntent("ComputePool", pool, uid, "Warning", "NodeUnhealthy", message))
        elif policy == "cordon" and view.cordoned_by_others:
            continue  # already unschedulable; not ours to uncordon later
        elif still_quarantined >= limit and not view.in_burn_in:
            refused.append(f"{view.name} ({why})")
            records.append(Remediation(pool, view.name, "circuit_breaker", reason))
        else:
            still_quarantined += 0 if view.in_burn_in else 1
            quarantine[view.name] = policy
            what = (
                f"tainted {conventions.QUARANTINE_TAINT_KEY}={reason}:{conventions.NO_SCHEDULE}"
                if policy == "taint"
                else "cordoned"
            )
            advice = reported_action(view)
            recommended = f"; recommended action: {advice.value}" if advice != Action.NONE else ""
            before = earlier.get(view.name, 0)
            damped = (
                f"; {_earlier(before, 'before')}: released once healthy for "
                f"{api.format_duration(health.damped_hold_down_seconds(before))}, {_doubling(health)}"
                if before
                else ""
            )
            message = f"{view.name}: {why}; {what}{recommended}{damped}"
            records.append(Remediation(pool, view.name, policy, reason))
            events.append(EventIntent("Node", view.name, view.uid, "Warning", "NodeQuarantined", message))
            events.append(EventIntent("ComputePool", pool, uid, "Warning", "NodeQuarantined", message))
    if refused:
        # One Warning for all the refused (a fleet-wide fault refuses thousands at once), naming the first that fit.
        why = (
            f": {still_quarantined} of {desired} nodes already quarantined and maxUnavailable "
            f"{health.max_unavailable} allows {limit}"
        )
        head = "not quarantining "
        shown = conventions.some_of(refused, conventions.MAX_MESSAGE - len(head) - len(why), most=MESSAGE_NODES)
        message = f"{head}{shown}{why}"
        breaker = Breaker(open=True, message=message)
        events.append(EventIntent("ComputePool", pool, uid, "Warning", "CircuitBreakerOpen", message))
    return quarantine, breaker


def _earlier(count: int, when: str) -> str:
    """`quarantined 2 times in the 24h before`: the quarantines that doubled a hold-down."""
    return f"quarantined {count} time{'s' if count != 1 else ''} in the {api.FLAP_MEMORY} {when}"


def _doubling(health: api.HealthSpec) -> str:
    return f"holdDown {health.hold_down} doubled for each (at most {2**api.FLAP_DOUBLINGS}x, {api.MAX_HOLD_DOWN})"


def healthy_seconds(view: NodeView, now: datetime, healthy_since: Mapping[str, datetime]) -> float | None:
    """How long the node's condition has been True (0 when nobody knows since when); None if it is not True.

    By the operator's clock (`healthy_since`, when it first saw the condition True) where it has one;
    the condition's own `lastTransitionTime` only without (`accelpool plan` of a snapshot).
    """
    health = view.health
    if health is None or not health.healthy:
        return None
    since = healthy_since.get(view.name) or health.since
    if since is None:
        return 0.0
    return max(0.0, (now - since).total_seconds())


def apply_quarantine(decision: RemediationDecision, view: NodeView, edit: NodeEdit) -> None:
    """The member's quarantine taint or cordon as decided: lifted, put on, or kept as it is; its ladder record
    and hand-off label with it."""
    decided = decision.quarantine.get(view.name)
    if view.name in decision.lift:
        edit.drop_taints(conventions.QUARANTINE_TAINT_KEY)
        if view.cordoned_by_us:
            edit.annotations[conventions.CORDONED_ANNOTATION] = None
            if view.unschedulable:
                edit.unschedulable = False
    elif decided == "taint":
        edit.put_taint(Taint(conventions.QUARANTINE_TAINT_KEY, conventions.NO_SCHEDULE, health_reason(view)))
    elif decided == "cordon":
        edit.unschedulable = True
        edit.annotations[conventions.CORDONED_ANNOTATION] = "true"
    elif view.name in decision.held and view.quarantine_taint is not None:
        edit.put_taint(view.quarantine_taint)  # the quarantine holds
    _put_ladder(decision.ladder.get(view.name), view, edit)
    if view.name in decision.histories:
        edit.annotations[conventions.QUARANTINE_HISTORY_ANNOTATION] = decision.histories[view.name]


def _put_ladder(record: LadderRecord | None, view: NodeView, edit: NodeEdit) -> None:
    """The ladder record and hand-off label the member carries after the pass (none once it is not quarantined)."""
    text = record.to_annotation() if record is not None else None
    if text != view.annotations.get(conventions.REMEDIATION_ANNOTATION):
        edit.annotations[conventions.REMEDIATION_ANNOTATION] = text
    action = record.hand_off_action if record is not None and record.step == "handed-off" else None
    label = action.value if action is not None else None
    if label != view.labels.get(conventions.REMEDIATION_ACTION_LABEL):
        edit.labels[conventions.REMEDIATION_ACTION_LABEL] = label
