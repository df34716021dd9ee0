"""The remediation ladder, planned: quarantine with its cause → drain → drained → hand-off → release, the circuit
breaker over every step, and nothing evicted where the policy does not ask for it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

from accelpool.decide.planning import Plan
from accelpool.model.evictions import Answer, DrainObservation, PodRef
from accelpool.model.nodes import NodeView, format_time
from accelpool.model.remediation_record import LadderRecord, record_of
from accelpool_api import conventions
from accelpool_core.protocol import Action, HealthReport, HealthStatus

from .conftest import NOW, applied, member, pool, run

QUARANTINE = conventions.QUARANTINE_TAINT_KEY
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus) on GPU 3", "2026-11-02T11:59:00Z")
LADDER_HEALTH: dict[str, Any] = {"drain": {"enabled": True}, "handOff": {"enabled": True}}
LADDER: dict[str, Any] = {"accelerator": "H100", "nodes": 2, "health": LADDER_HEALTH}
WORKLOAD = PodRef("team-a", "trainer-0")


def report(status: HealthStatus, reason: str, message: str, action: Action = Action.NONE) -> str:
    return HealthReport(status=status, reason=reason, message=message, gpus=8, action=action).to_annotation()


def failing(name: str, action: Action = Action.RESET_GPU, **kwargs: Any) -> NodeView:
    """A member whose agent reports XID 79 in its condition and its annotation alike."""
    annotations = {conventions.HEALTH_ANNOTATION: report(HealthStatus.UNHEALTHY, "XidError79", XID79[2], action)}
    return member(name, "p", health=XID79, annotations=annotations, **kwargs)


def events(result: Plan, reason: str, kind: str = "Node") -> list[str]:
    return [e.message for e in result.events if e.reason == reason and e.kind == kind]


def record(result: Plan, nodes: list[NodeView], name: str) -> LadderRecord | None:
    view = next(v for v in applied(nodes, result) if v.name == name)
    return record_of(view)


def step(result: Plan, nodes: list[NodeView], name: str) -> str | None:
    found = record(result, nodes, name)
    return found.step if found is not None else None


def later(seconds: float) -> Any:
    return NOW + timedelta(seconds=seconds)


def visit(result: Plan, name: str, *answers: Answer, left: tuple[PodRef, ...] = ()) -> dict[str, DrainObservation]:
    """What the drain executor saw on its visit to the node the plan drains."""
    order = next(o for o in result.drains if o.node == name)
    return {name: DrainObservation(name, order.since, answers, left)}


def test_the_quarantine_names_its_cause_not_the_annotation_of_the_last_passing_cycle() -> None:
    """The agent writes its condition first and its annotation next: a pass between the two sees XID 79 in the
    condition beside the annotation of the last passing cycle (the demo's "8 GPUs passed all checks; tainted
    ...=XidError79")."""
    stale = report(HealthStatus.HEALTHY, "AllChecksPassed", "8 GPUs passed all checks")
    nodes = [member("m1", "p", health=XID79, annotations={conventions.HEALTH_ANNOTATION: stale}), member("m2", "p")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    [message] = events(result, "NodeQuarantined")
    assert message == f"m1: {XID79[2]}; tainted {QUARANTINE}=XidError79:NoSchedule"
    written = record(result, nodes, "m1")
    assert written is not None
    assert (written.step, written.cause, written.message, written.since) == ("quarantined", "XidError79", XID79[2], NOW)
    # The agent recovers and says so everywhere: the status still names what caused the quarantine.
    healthy = ("True", "AllChecksPassed", "8 GPUs passed all checks", format_time(later(10)))
    recovered = [replace(v, health=member("x", "p", health=healthy).health) for v in applied(nodes, result)]
    again = run([pool("p", {"accelerator": "H100", "nodes": 2})], recovered, now=later(20))
    found = again.pool("p")
    assert found is not None and found.status is not None
    condition = next(c for c in found.status.conditions if c.type == "Healthy")
    assert (condition.reason, condition.message) == ("NodeQuarantined", f"m1: {XID79[2]}")
    assert [(m.node, m.reason) for m in found.status.members if m.health == "Quarantined"] == [("m1", "XidError79")]


def test_nothing_is_evicted_where_the_policy_does_not_ask_for_it() -> None:
    nodes = [failing("m1"), member("m2", "p")]
    spec = {"accelerator": "H100", "nodes": 2}
    first = run([pool("p", spec)], nodes)
    second = run([pool("p", spec)], applied(nodes, first), now=later(3600))
    assert first.drains == second.drains == ()
    assert record(second, applied(nodes, first), "m1") == record(first, nodes, "m1")
    assert not [e for e in second.events if e.reason in ("DrainStarted", "RemediationRequested")]


def test_the_ladder_climbs_from_quarantine_to_hand_off_and_is_released_after_the_hold_down() -> None:
    nodes = [failing("m1"), member("m2", "p")]
    spec = [pool("p", LADDER)]
    quarantined = run(spec, nodes)
    assert quarantined.drains == (), "the taint lands before anything is evicted"
    nodes = applied(nodes, quarantined)

    draining = run(spec, nodes, now=later(15))
    assert [(o.node, o.pool, o.grace_seconds) for o in draining.drains] == [("m1", "p", None)]
    assert events(draining, "DrainStarted") == [f"m1: draining for XidError79 ({XID79[2]})"]
    assert [(r.node, r.action) for r in draining.remediations] == [("m1", "drain")]
    assert draining.requeue_after == conventions.DRAIN_RETRY_SECONDS
    nodes = applied(nodes, draining)

    refusal = "The disruption budget trainer needs 2 healthy pods and has 2 currently"
    blocked = visit(draining, "m1", Answer(WORKLOAD, "blocked", refusal, "trainer"), left=(WORKLOAD,))
    first_refusal = run(spec, nodes, now=later(30), drains=blocked)
    assert events(first_refusal, "DrainBlocked") == [
        f"m1: eviction of pod team-a/trainer-0 refused by PodDisruptionBudget team-a/trainer: {refusal}; "
        "retried every 10s, never forced"
    ]
    assert [o.node for o in first_refusal.drains] == ["m1"], "tried again on the next visit"
    nodes = applied(nodes, first_refusal)
    assert events(run(spec, nodes, now=later(40), drains=blocked), "DrainBlocked") == [], "once per step"

    drained = run(spec, nodes, now=later(50), drains=visit(draining, "m1", Answer(WORKLOAD, "evicted")))
    assert events(drained, "NodeDrained") == ["m1: drained (1 pod(s) evicted on the last visit)"]
    assert events(drained, "RemediationRequested", "ComputePool") == [
        f"m1: reset-gpu requested for XidError79 ({XID79[2]}); drained and labelled "
        f"{conventions.REMEDIATION_ACTION_LABEL}=reset-gpu"
    ]
    assert drained.changes["m1"].labels[conventions.REMEDIATION_ACTION_LABEL] == "reset-gpu"
    assert drained.drains == ()
    found = drained.pool("p")
    assert found is not None and dict(found.ladder_steps) == {"handed-off": 1} and found.status is not None
    healthy = next(c for c in found.status.conditions if c.type == "Healthy")
    assert healthy.message == f"m1: {XID79[2]} (handed off: reset-gpu)"
    nodes = applied(nodes, drained)
    handed = record_of(next(v for v in nodes if v.name == "m1"))
    assert handed is not None and (handed.step, handed.action, handed.since) == ("handed-off", Action.RESET_GPU, NOW)
    annotation = json.loads(next(v for v in nodes if v.name == "m1").annotations[conventions.REMEDIATION_ANNOTATION])
    assert {k: annotation[k] for k in ("step", "cause", "action", "since")} == {
        "step": "handed-off",
        "cause": "XidError79",
        "action": "reset-gpu",
        "since": format_time(NOW),
    }

    repaired = ("True", "AllChecksPassed", "8 GPUs passed all checks", format_time(later(100)))
    nodes = [replace(v, health=member("x", "p", health=repaired).health) if v.name == "m1" else v for v in nodes]
    waiting = run(spec, nodes, now=later(100 + 599))
    assert events(waiting, "QuarantineLifted") == []
    released = run(spec, nodes, now=later(100 + 600))
    change = released.changes["m1"]
    assert [t.key for t in change.remove_taints] == [QUARANTINE]
    assert change.annotations[conventions.REMEDIATION_ANNOTATION] is None
    assert change.labels[conventions.REMEDIATION_ACTION_LABEL] is None
    assert events(released, "QuarantineLifted") == [
        "m1: AcceleratorHealthy True for 600s; quarantine lifted (quarantined for XidError79, handed-off)"
    ]


def test_a_drain_past_its_timeout_names_the_pods_left_once_and_goes_on() -> None:
    spec = [pool("p", {**LADDER, "health": {"drain": {"enabled": True, "timeout": "5m", "gracePeriod": "30s"}}})]
    nodes = [failing("m1"), member("m2", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    assert [o.grace_seconds for o in draining.drains] == [30]
    nodes = applied(nodes, draining)
    stuck = visit(
        draining, "m1", Answer(WORKLOAD, "failed", "500: more than one PodDisruptionBudget"), left=(WORKLOAD,)
    )
    before = run(spec, nodes, now=later(1 + 299), drains=stuck)
    assert events(before, "DrainTimedOut") == []
    assert before.requeue_after == 1.0, "plan again when the timeout passes"
    timed_out = run(spec, nodes, now=later(1 + 300), drains=stuck)
    assert events(timed_out, "DrainTimedOut") == [
        "m1: drain not done after 5m; 1 pod(s) left: team-a/trainer-0 "
        "(evictions go on; a PodDisruptionBudget is never bypassed)"
    ]
    assert [o.node for o in timed_out.drains] == ["m1"]
    nodes = applied(nodes, timed_out)
    assert events(run(spec, nodes, now=later(1 + 400), drains=stuck), "DrainTimedOut") == []


def test_a_node_that_only_needs_a_drain_is_not_handed_off() -> None:
    spec = [pool("p", LADDER)]
    nodes = [failing("m1", action=Action.DRAIN), member("m2", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    nodes = applied(nodes, draining)
    drained = run(spec, nodes, now=later(2), drains=visit(draining, "m1"))
    assert events(drained, "NodeDrained") and not events(drained, "RemediationRequested")
    assert conventions.REMEDIATION_ACTION_LABEL not in drained.changes["m1"].labels
    assert step(drained, nodes, "m1") == "drained"


def test_the_open_breaker_starts_no_drain_or_hand_off_but_drains_under_way_finish() -> None:
    spec = [pool("p", {**LADDER, "nodes": 4, "health": {**LADDER_HEALTH, "maxUnavailable": 2}})]
    nodes = [failing("m1"), failing("m2"), member("m3", "p"), member("m4", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    nodes = applied(nodes, draining)
    assert [o.node for o in draining.drains] == ["m1", "m2"]
    # m2 is drained, m3 fails too: the breaker opens, m1 drains on, m2 is not handed off.
    nodes = [failing("m3") if v.name == "m3" else v for v in nodes]
    held = run(spec, nodes, now=later(2), drains=visit(draining, "m2"))
    assert [o.node for o in held.drains] == ["m1"]
    assert step(held, nodes, "m2") == "drained"
    assert events(held, "RemediationRequested", "ComputePool") == []
    [why] = events(held, "RemediationHeld", "ComputePool")
    assert why.startswith("no drain or hand-off starts while the breaker is open") and why.endswith("waiting: m2")
    found = held.pool("p")
    assert found is not None and found.breaker_open and found.status is not None
    condition = next(c for c in found.status.conditions if c.type == "Healthy")
    assert condition.reason == "CircuitBreakerOpen" and "waiting: m2" in condition.message
    # m3 recovers before it was ever quarantined: the breaker closes, and the hand-off goes ahead.
    nodes = [member("m3", "p") if v.name == "m3" else v for v in applied(nodes, held)]
    resumed = run(spec, nodes, now=later(3))
    assert [e.split(":")[0] for e in events(resumed, "RemediationRequested", "ComputePool")] == ["m2"]


def test_a_visit_of_an_earlier_drain_does_not_count() -> None:
    spec = [pool("p", LADDER)]
    nodes = [failing("m1"), member("m2", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    nodes = applied(nodes, draining)
    earlier = {"m1": DrainObservation("m1", format_time(NOW - timedelta(days=1)))}
    assert events(run(spec, nodes, now=later(2), drains=earlier), "NodeDrained") == []


def test_a_stronger_action_reported_later_is_asked_for_again() -> None:
    spec = [pool("p", LADDER)]
    nodes = [failing("m1"), member("m2", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    nodes = applied(nodes, draining)
    nodes = applied(nodes, run(spec, nodes, now=later(2), drains=visit(draining, "m1")))
    worse = report(HealthStatus.UNHEALTHY, "XidError79", XID79[2], Action.SERVICE_REQUIRED)
    nodes = [replace(v, report=HealthReport.from_annotation(worse)) if v.name == "m1" else v for v in nodes]
    escalated = run(spec, nodes, now=later(3))
    assert escalated.changes["m1"].labels[conventions.REMEDIATION_ACTION_LABEL] == "service-required"
    assert [e.split(";")[0] for e in events(escalated, "RemediationRequested")] == [
        f"m1: service-required requested for XidError79 ({XID79[2]})"
    ]


def test_a_pool_deleted_mid_ladder_takes_its_record_and_label_off() -> None:
    spec = [pool("p", LADDER)]
    nodes = [failing("m1"), member("m2", "p")]
    nodes = applied(nodes, run(spec, nodes))
    draining = run(spec, nodes, now=later(1))
    nodes = applied(nodes, draining)
    nodes = applied(nodes, run(spec, nodes, now=later(2), drains=visit(draining, "m1")))
    released = run([pool("p", LADDER, deleting=True)], nodes, now=later(3))
    change = released.changes["m1"]
    assert change.annotations[conventions.REMEDIATION_ANNOTATION] is None
    assert change.labels[conventions.REMEDIATION_ACTION_LABEL] is None
    assert released.drains == ()


def test_the_record_reads_back_what_it_wrote_and_refuses_what_it_did_not() -> None:
    written = LadderRecord("draining", "XidError79", "XID 79", Action.RESTART_OS, NOW, later(5), "ns/p", True)
    assert LadderRecord.from_annotation(written.to_annotation()) == written
    for text in ("", "[]", '{"step": "burning", "since": "2026-11-02T12:00:00Z"}', '{"step": "drained"}'):
        assert LadderRecord.from_annotation(text) is None, text


def test_a_node_quarantined_before_the_ladder_gets_a_record_naming_its_taints_cause() -> None:
    healthy = ("True", "AllChecksPassed", "8 GPUs passed all checks", "2026-11-02T11:59:00Z")
    taint = {"key": QUARANTINE, "value": "EccDoubleBit", "effect": "NoSchedule"}
    nodes = [member("m1", "p", health=healthy, taints=[taint]), member("m2", "p")]
    adopted = record(run([pool("p", LADDER)], nodes), nodes, "m1")
    assert adopted is not None and (adopted.step, adopted.cause, adopted.message) == (
        "quarantined",
        "EccDoubleBit",
        "EccDoubleBit",
    )


def test_a_step_the_policy_no_longer_asks_for_is_withdrawn() -> None:
    nodes = [failing("m1"), member("m2", "p")]
    nodes = applied(nodes, run([pool("p", LADDER)], nodes))
    draining = run([pool("p", LADDER)], nodes, now=later(1))
    nodes = applied(nodes, draining)
    stopped = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes, now=later(2))
    assert stopped.drains == () and step(stopped, nodes, "m1") == "quarantined"
    assert events(stopped, "DrainStopped") == ["m1: drain stopped: spec.health.drain is not enabled"]
    nodes = applied(nodes, stopped)
    again = run([pool("p", LADDER)], nodes, now=later(3))
    nodes = applied(nodes, again)
    handed = run([pool("p", LADDER)], nodes, now=later(4), drains=visit(again, "m1"))
    assert handed.changes["m1"].labels[conventions.REMEDIATION_ACTION_LABEL] == "reset-gpu"
    nodes = applied(nodes, handed)
    no_hand_off = {**LADDER, "health": {"drain": {"enabled": True}}}
    withdrawn = run([pool("p", no_hand_off)], nodes, now=later(5))
    assert withdrawn.changes["m1"].labels[conventions.REMEDIATION_ACTION_LABEL] is None
    assert step(withdrawn, nodes, "m1") == "drained"
