"""Quarantine decisions: taint or cordon, circuit breaker, hold-down, remediation none, spares."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from accelpool.decide.planning.ledger import NodeEdit
from accelpool.decide.planning.remediation.quarantine import RemediationDecision, apply_quarantine, remediate
from accelpool.model.nodes import NodeView, Taint
from accelpool_api import conventions

from .conftest import NOW, applied, conditions, member, members, node, pool, run

QUARANTINE = conventions.QUARANTINE_TAINT_KEY
FALSE_SINCE = "2026-11-02T11:00:00Z"
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus)", FALSE_SINCE)


def healthy_since(seconds_ago: float) -> tuple[str, str, str, str]:
    return ("True", "AllChecksPassed", "", (NOW - timedelta(seconds=seconds_ago)).isoformat())


def quarantined(name: str, pool_name: str, **kwargs: Any) -> NodeView:
    return member(
        name, pool_name, taints=[{"key": QUARANTINE, "value": "XidError79", "effect": "NoSchedule"}], **kwargs
    )


def test_unhealthy_member_is_tainted_with_its_reason_and_a_spare_joins() -> None:
    nodes = [member("m1", "p", health=XID79), member("m2", "p"), node("spare")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    assert Taint(QUARANTINE, "NoSchedule", "XidError79") in result.changes["m1"].add_taints
    assert members(result, "p") == ["m1", "m2", "spare"]
    assert [(r.node, r.action, r.reason) for r in result.remediations] == [("m1", "taint", "XidError79")]
    reasons = {(e.kind, e.name, e.reason) for e in result.events}
    assert {("Node", "m1", "NodeQuarantined"), ("ComputePool", "p", "NodeQuarantined")} <= reasons
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.status.nodes.quarantined == 1
    healthy = next(c for c in found.status.conditions if c.type == "Healthy")
    assert (healthy.status, healthy.reason, healthy.message) == (
        "False",
        "NodeQuarantined",
        "m1: XID 79 (GPU fallen off the bus)",
    )
    # The next pass sees the taint: no second decision, no second event.
    again = run([pool("p", {"accelerator": "H100", "nodes": 2})], applied(nodes, result))
    assert again.remediations == ()
    assert not [e for e in again.events if e.reason == "NodeQuarantined"]
    assert Taint(QUARANTINE, "NoSchedule", "XidError79") in again.changes["m1"].add_taints


def test_cordon_policy_remembers_that_it_cordoned() -> None:
    nodes = [member("m1", "p", health=XID79)]
    result = run([pool("p", {"accelerator": "H100", "health": {"remediation": "cordon"}})], nodes)
    change = result.changes["m1"]
    assert change.unschedulable is True
    assert change.annotations[conventions.CORDONED_ANNOTATION] == "true"
    assert not any(t.key == QUARANTINE for t in change.add_taints)


def test_a_node_cordoned_by_someone_else_is_never_uncordoned() -> None:
    drained = member("m1", "p", unschedulable=True, health=healthy_since(3600))
    result = run([pool("p", {"accelerator": "H100", "health": {"remediation": "cordon"}})], [drained])
    assert result.changes["m1"].unschedulable is None
    released = run([pool("p", {"accelerator": "H100"}, deleting=True)], [drained])
    assert released.changes["m1"].unschedulable is None


def test_circuit_breaker_refuses_more_than_max_unavailable() -> None:
    nodes = [
        quarantined("m1", "p"),
        member("m2", "p", health=XID79),
        member("m3", "p"),
        member("m4", "p"),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 4, "health": {"maxUnavailable": "25%"}})], nodes)
    assert not any(t.key == QUARANTINE for t in result.changes["m2"].add_taints)
    found = result.pool("p")
    assert found is not None and found.breaker_open
    assert conditions(result, "p")["Healthy"] == ("False", "CircuitBreakerOpen")
    assert [(r.node, r.action) for r in result.remediations] == [("m2", "circuit_breaker")]
    message = next(e.message for e in result.events if e.reason == "CircuitBreakerOpen")
    assert message.startswith("not quarantining m2 (XID 79 (GPU fallen off the bus)): 1 of 4 nodes already quarantined")


def test_breaker_limit_counts_decisions_of_the_same_pass() -> None:
    nodes = [member(f"m{i}", "p", health=XID79) for i in range(1, 5)]
    result = run([pool("p", {"accelerator": "H100", "nodes": 4, "health": {"maxUnavailable": 2}})], nodes)
    tainted = [n for n, c in result.changes.items() if any(t.key == QUARANTINE for t in c.add_taints)]
    assert tainted == ["m1", "m2"]


def test_quarantine_lifts_only_after_hold_down() -> None:
    spec = {"accelerator": "H100", "health": {"holdDown": "10m"}}
    too_soon = run([pool("p", spec)], [quarantined("m1", "p", health=healthy_since(120))])
    assert any(t.key == QUARANTINE for t in too_soon.changes["m1"].add_taints)
    assert too_soon.requeue_after == 480, "plan again when the hold-down ends"
    long_enough = run([pool("p", spec)], [quarantined("m1", "p", health=healthy_since(601))])
    assert [t.key for t in long_enough.changes["m1"].remove_taints] == [QUARANTINE]
    assert [(r.node, r.action) for r in long_enough.remediations] == [("m1", "untaint")]
    still_bad = run([pool("p", spec)], [quarantined("m1", "p", health=XID79)])
    assert any(t.key == QUARANTINE for t in still_bad.changes["m1"].add_taints)
    assert still_bad.requeue_after is None


def test_hold_down_without_a_transition_time_uses_when_the_operator_first_saw_it_healthy() -> None:
    spec = {"accelerator": "H100", "health": {"holdDown": "1m"}}
    view = quarantined("m1", "p", health=("True", "AllChecksPassed", "", ""))
    result = run([pool("p", spec)], [view], healthy_since={"m1": NOW - timedelta(minutes=2)})
    assert [t.key for t in result.changes["m1"].remove_taints] == [QUARANTINE]


def test_uncordon_after_hold_down_only_for_our_cordon() -> None:
    ours = member(
        "m1",
        "p",
        unschedulable=True,
        annotations={conventions.CORDONED_ANNOTATION: "true"},
        health=healthy_since(3600),
    )
    result = run([pool("p", {"accelerator": "H100", "health": {"remediation": "cordon"}})], [ours])
    change = result.changes["m1"]
    assert change.unschedulable is False
    assert change.annotations[conventions.CORDONED_ANNOTATION] is None


def test_remediation_none_reports_only() -> None:
    result = run(
        [pool("p", {"accelerator": "H100", "health": {"remediation": "none"}})], [member("m1", "p", health=XID79)]
    )
    assert result.changes["m1"].add_taints == (Taint(conventions.POOL_TAINT_KEY, "NoSchedule", "p"),)
    assert result.remediations == ()
    assert conditions(result, "p")["Healthy"] == ("False", "NodeUnhealthy")
    found = result.pool("p")
    assert found is not None and found.phase == "Degraded"


def test_a_lifted_node_makes_the_spare_surplus_again() -> None:
    nodes = [
        quarantined("m1", "p", health=healthy_since(3600), joined="2026-10-01T00:00:00Z"),
        member("m2", "p", joined="2026-10-01T00:00:00Z"),
        member("spare", "p", joined="2026-11-02T00:00:00Z"),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    assert members(result, "p") == ["m1", "m2"]
    assert result.changes["spare"].pool is None


def test_deleting_a_pool_releases_a_quarantined_node_with_a_warning() -> None:
    result = run([pool("p", {"accelerator": "H100"}, deleting=True)], [quarantined("m1", "p", health=XID79)])
    assert {t.key for t in result.changes["m1"].remove_taints} == {QUARANTINE, conventions.POOL_TAINT_KEY}
    warning = next(e for e in result.events if e.reason == "QuarantineReleased")
    assert (warning.kind, warning.name, warning.type) == ("Node", "m1", "Warning")


# ---------------------------------------------------------------- the strategy on its own


def decide(spec: dict[str, Any], members_: list[NodeView], **kwargs: Any) -> RemediationDecision:
    checked = pool("p", {"accelerator": "H100", **spec}).spec
    assert checked is not None
    return remediate(
        "p", "uid-p", checked.health, checked.nodes, members_, now=NOW, healthy_since=kwargs.get("healthy_since", {})
    )


def test_remediate_quarantines_within_max_unavailable_and_opens_the_breaker_beyond() -> None:
    nodes = [member(f"m{i}", "p", health=XID79) for i in range(3)]
    decision = decide({"nodes": 4, "health": {"maxUnavailable": "50%"}}, nodes)
    assert dict(decision.quarantine) == {"m0": "taint", "m1": "taint"}
    assert decision.breaker.open
    assert decision.breaker.message.startswith("not quarantining m2 (XID 79 (GPU fallen off the bus)): 2 of 4")
    assert [(r.node, r.action) for r in decision.records] == [
        ("m0", "taint"),
        ("m1", "taint"),
        ("m2", "circuit_breaker"),
    ]
    assert [e.reason for e in decision.events if e.kind == "ComputePool"] == [
        "NodeQuarantined",
        "NodeQuarantined",
        "CircuitBreakerOpen",
    ]


def test_remediate_lifts_after_hold_down_and_asks_to_plan_again_before() -> None:
    nodes = [
        quarantined("lifted", "p", health=healthy_since(900)),
        quarantined("waiting", "p", health=healthy_since(100)),
    ]
    decision = decide({"health": {"holdDown": "10m"}}, nodes)
    assert (decision.lift, decision.held) == (frozenset({"lifted"}), frozenset({"waiting"}))
    assert decision.requeue_after == 500.0
    assert decision.quarantined_after(nodes[1]) and not decision.quarantined_after(nodes[0])
    assert [(r.node, r.action, r.reason) for r in decision.records] == [("lifted", "untaint", "HoldDownPassed")]


def test_remediate_cordons_only_what_nobody_else_cordoned_and_none_only_reports() -> None:
    nodes = [member("m1", "p", health=XID79), member("m2", "p", health=XID79, unschedulable=True)]
    cordon = decide({"nodes": 4, "health": {"remediation": "cordon", "maxUnavailable": 4}}, nodes)
    assert dict(cordon.quarantine) == {"m1": "cordon"}
    report_only = decide({"health": {"remediation": "none"}}, nodes)
    assert report_only.quarantine == {} and report_only.records == ()
    assert [e.reason for e in report_only.events] == ["NodeUnhealthy", "NodeUnhealthy"]


def test_apply_quarantine_puts_the_decision_on_the_node() -> None:
    view = member("m1", "p", health=XID79)
    edit = NodeEdit(view)
    apply_quarantine(RemediationDecision(quarantine={"m1": "cordon"}), view, edit)
    assert (edit.unschedulable, edit.annotations) == (True, {conventions.CORDONED_ANNOTATION: "true"})
    lifted = quarantined("m2", "p")
    edit = NodeEdit(lifted)
    apply_quarantine(RemediationDecision(lift=frozenset({"m2"})), lifted, edit)
    assert edit.change().remove_taints == (Taint(QUARANTINE, "NoSchedule", "XidError79"),)
    edit = NodeEdit(lifted)
    apply_quarantine(RemediationDecision(held=frozenset({"m2"})), lifted, edit)
    assert edit.change().add_taints == (Taint(QUARANTINE, "NoSchedule", "XidError79"),)
