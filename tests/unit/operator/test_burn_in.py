"""The burn-in gate (`accelpool.decide.planning.remediation.burnin`): a joining node serves only after its agent
passed a full cycle.

Planner passes over `NodeView`s: the taint goes on in the write that makes a node a member, comes
off after a completed full cycle with AcceleratorHealthy True from this pool's agent, turns `failed`
when the node fails, and stays through the quarantine's release and for good (accelpool never lifts
a `failed` taint: whoever repaired the node sets it back to `pending`). The controller's side, on
the emulated API server, is in `test_burn_in_controller.py`.
"""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

from accelpool.decide import render
from accelpool.decide.planning import Plan
from accelpool.model.nodes import NodeView, Taint, format_time
from accelpool_api import conventions

from .conftest import NOW, applied, member, members, node, pool, run

BURN_IN = conventions.BURN_IN_TAINT_KEY
QUARANTINE = conventions.QUARANTINE_TAINT_KEY
PENDING = Taint(BURN_IN, "NoSchedule", "pending")
FAILED = Taint(BURN_IN, "NoSchedule", "failed")
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus)", "2026-11-02T11:59:00Z")


def report(pool_name: str = "p", *, complete: bool = True, status: str = "Healthy", **extra: Any) -> str:
    reason = "AllChecksPassed" if status == "Healthy" else "XidError79"
    body = {"status": status, "reason": reason, "pool": pool_name, "complete": complete, **extra}
    return json.dumps(body)


def healthy(seconds: float = 60) -> tuple[str, str, str, str]:
    """AcceleratorHealthy True for `seconds` (a fresh condition: no heartbeat to age)."""
    return ("True", "AllChecksPassed", "8 GPUs passed all checks", format_time(NOW - timedelta(seconds=seconds)))


def in_burn_in(name: str, *, value: str = "pending", text: str | None = None, **kwargs: Any) -> NodeView:
    """A member of pool p that joined with the burn-in taint; its agent's report `text` (None: none yet)."""
    taints = [{"key": BURN_IN, "value": value, "effect": "NoSchedule"}, *kwargs.pop("taints", ())]
    annotations = {} if text is None else {conventions.HEALTH_ANNOTATION: text}
    return member(name, "p", taints=taints, annotations=annotations, **kwargs)


def status_of(result: Plan, name: str = "p") -> Any:
    found = result.pool(name)
    assert found is not None and found.status is not None
    return found.status


def condition(result: Plan, type_: str, name: str = "p") -> tuple[str, str, str]:
    found = next(c for c in status_of(result, name).conditions if c.type == type_)
    return found.status, found.reason, found.message


def reasons(result: Plan) -> set[tuple[str, str, str]]:
    return {(e.kind, e.name, e.reason) for e in result.events}


def test_a_claimed_node_joins_with_the_burn_in_taint_and_serves_nothing_yet() -> None:
    result = run([pool("p", {"accelerator": "H100"})], [node("n1", health=healthy())])
    assert members(result, "p") == ["n1"]
    assert PENDING in result.changes["n1"].add_taints, "in the same write that makes it a member"
    status = status_of(result)
    assert (status.phase, status.nodes.burn_in, status.nodes.ready) == ("Configuring", 1, 0)
    assert (status.capacity.gpus, status.capacity.burn_in_gpus, status.capacity.resources) == (
        0,
        8,
        {"nvidia.com/gpu": 0},
    )
    assert (status.members[0].health, status.members[0].reason) == ("BurnIn", "BurnInPending")
    assert "1 in burn-in (n1)" in condition(result, "Ready")[2]


def test_members_at_the_time_burn_in_is_on_are_not_tainted() -> None:
    result = run([pool("p", {"accelerator": "H100"})], [member("m1", "p", health=healthy())])
    assert not [t for t in result.changes["m1"].add_taints if t.key == BURN_IN]
    assert status_of(result).capacity.gpus == 8


def test_a_completed_full_cycle_from_this_pools_agent_lifts_the_taint() -> None:
    nodes = [in_burn_in("m1", health=healthy(), text=report())]
    result = run([pool("p", {"accelerator": "H100"})], nodes)
    assert PENDING in result.changes["m1"].remove_taints
    assert [(e.kind, e.name) for e in result.events if e.reason == "BurnInPassed"] == [("Node", "m1")]
    status = status_of(result)
    assert (status.nodes.burn_in, status.capacity.gpus, status.capacity.burn_in_gpus) == (0, 8, 0)
    assert status.members[0].health == "Healthy"
    again = run([pool("p", {"accelerator": "H100"})], applied(nodes, result))
    assert not [t for t in again.changes["m1"].add_taints if t.key == BURN_IN], "lifted once, never put back"
    assert "BurnInPassed" not in {e.reason for e in again.events}


def test_no_lift_without_a_complete_cycle_a_healthy_report_this_pools_agent_or_a_fresh_condition() -> None:
    stale = (*healthy()[:3], format_time(NOW - timedelta(hours=2)))
    cases = {
        "first cycle not done": in_burn_in("a", health=healthy(), text=report(complete=False)),
        "no report": in_burn_in("b", health=healthy()),
        "another pool's agent": in_burn_in("c", health=healthy(), text=report("other")),
        "condition Unknown": in_burn_in("d", health=("Unknown", "ChecksSkipped", "", "2026-11-02T11:00:00Z")),
    }
    result = run([pool("p", {"accelerator": "H100", "nodes": 4})], list(cases.values()))
    for why, view in cases.items():
        assert PENDING in result.changes[view.name].add_taints, why
        assert PENDING not in result.changes[view.name].remove_taints, why
    assert status_of(result).nodes.burn_in == 4
    body = in_burn_in("e", health=healthy(), text=report())
    silent = NodeView.from_body(
        {
            "metadata": {"name": "e", "labels": body.labels, "annotations": body.annotations},
            "spec": {"taints": [t.to_dict() for t in body.taints]},
            "status": {
                "conditions": [
                    {"type": "Ready", "status": "True"},
                    {
                        "type": conventions.HEALTH_CONDITION,
                        "status": "True",
                        "reason": "AllChecksPassed",
                        "lastTransitionTime": stale[3],
                        "lastHeartbeatTime": stale[3],  # its agent stopped two hours ago
                    },
                ]
            },
        }
    )
    result = run([pool("p", {"accelerator": "H100"})], [silent])
    assert PENDING in result.changes["e"].add_taints, "a stale True is read as Unknown/AgentSilent"


def test_a_node_failing_burn_in_keeps_the_taint_as_failed_and_is_quarantined_and_replaced() -> None:
    nodes = [member("m1", "p", health=healthy()), in_burn_in("m2", health=XID79, text=report(status="Unhealthy"))]
    nodes.append(node("spare", health=healthy()))
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    change = result.changes["m2"]
    assert FAILED in change.add_taints
    assert Taint(QUARANTINE, "NoSchedule", "XidError79") in change.add_taints
    assert {("Node", "m2", "BurnInFailed"), ("ComputePool", "p", "BurnInFailed")} <= reasons(result)
    failed = next(e for e in result.events if e.reason == "BurnInFailed" and e.kind == "Node")
    assert failed.message == (
        "m2: failed burn-in: XID 79 (GPU fallen off the bus); it keeps accelpool.io/burn-in=failed:NoSchedule "
        "and serves nothing; once repaired, set the taint back to pending to burn it in again"
    )
    assert members(result, "p") == ["m1", "m2", "spare"], "a spare replaces the failed node"
    status = status_of(result)
    assert status.phase == "Degraded"
    assert "1 failed burn-in (m2)" in condition(result, "Ready")[2]
    assert (status.capacity.gpus, status.capacity.quarantined_gpus, status.capacity.burn_in_gpus) == (8, 8, 8)


def test_nodes_in_burn_in_are_quarantined_past_the_circuit_breaker_and_do_not_count_against_it() -> None:
    """They serve nothing, so their quarantine costs no capacity: a serving member that fails still gets one."""
    quarantined = Taint(QUARANTINE, "NoSchedule", "XidError79")
    nodes = [
        in_burn_in("b1", health=XID79, text=report(status="Unhealthy")),
        in_burn_in("b2", health=XID79, text=report(status="Unhealthy")),
        member("m1", "p", health=XID79, annotations={conventions.HEALTH_ANNOTATION: report(status="Unhealthy")}),
        member("m2", "p", health=healthy()),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 4, "health": {"maxUnavailable": 1}})], nodes)
    for name in ("b1", "b2", "m1"):
        assert quarantined in result.changes[name].add_taints, name
    assert not [r for r in result.remediations if r.action == "circuit_breaker"]
    assert condition(result, "Healthy")[1] != "CircuitBreakerOpen"


def test_a_failed_node_never_loses_its_burn_in_taint_until_someone_sets_it_back_to_pending() -> None:
    quarantine = [{"key": QUARANTINE, "value": "XidError79", "effect": "NoSchedule"}]
    spec = {"accelerator": "H100", "health": {"holdDown": "10m", "interval": "15m"}}
    eleven = [in_burn_in("m1", value="failed", taints=quarantine, health=healthy(660), text=report())]
    result = run([pool("p", spec)], eleven)
    change = result.changes["m1"]
    assert Taint(QUARANTINE, "NoSchedule", "XidError79") in change.remove_taints, "the hold-down has passed"
    assert FAILED in change.add_taints and FAILED not in change.remove_taints, "burn-in holds"
    status = status_of(result)
    assert (status.members[0].health, status.members[0].reason) == ("BurnIn", "BurnInFailed")
    assert (status.phase, status.capacity.gpus) == ("Degraded", 0)
    a_week = [in_burn_in("m1", value="failed", health=healthy(7 * 24 * 3600), text=report())]
    held = run([pool("p", spec)], a_week)
    assert FAILED in held.changes["m1"].add_taints and FAILED not in held.changes["m1"].remove_taints
    assert held.requeue_after is None, "nothing to wait for: only a person re-arms it"
    rearmed = [in_burn_in("m1", value="pending", health=healthy(60), text=report())]
    lifted = run([pool("p", spec)], rearmed)
    assert PENDING in lifted.changes["m1"].remove_taints, "re-armed, it burns in again and passes"
    assert "BurnInPassed" in {e.reason for e in lifted.events}


def test_a_failed_node_unhealthy_again_stays_failed_without_a_second_event() -> None:
    result = run([pool("p", {"accelerator": "H100"})], [in_burn_in("m1", value="failed", health=XID79)])
    assert FAILED in result.changes["m1"].add_taints
    assert "BurnInFailed" not in {e.reason for e in result.events}


def test_members_in_burn_in_count_towards_the_pools_size() -> None:
    nodes = [member("m1", "p", health=healthy()), in_burn_in("m2", health=healthy()), node("spare")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    assert members(result, "p") == ["m1", "m2"], "no spare for a node on its way in"


def test_burn_in_off_taints_no_joining_node_and_lifts_the_taints_there_are() -> None:
    off = {"accelerator": "H100", "nodes": 2, "health": {"burnIn": False}}
    result = run([pool("p", off)], [in_burn_in("m1", health=healthy()), node("n2")])
    assert PENDING in result.changes["m1"].remove_taints
    assert not [t for t in result.changes["n2"].add_taints if t.key == BURN_IN]
    cancelled = next(e for e in result.events if e.reason == "BurnInCancelled" and e.kind == "Node")
    assert cancelled.message == "m1: burn-in taint lifted: burn-in is off for this pool (spec.health.burnIn)"


def test_every_vendors_joining_nodes_burn_in() -> None:
    for accelerator in ("MI300X", "Trainium2", "TPU-v5p"):
        result = run([pool("p", {"accelerator": accelerator})], [node("n1", accelerator)])
        assert Taint(BURN_IN, "NoSchedule", "pending") in result.changes["n1"].add_taints, accelerator


def test_release_takes_the_burn_in_taint_off() -> None:
    result = run([], [in_burn_in("m1", value="failed")])
    assert FAILED in result.changes["m1"].remove_taints


def test_a_karpenter_pools_nodes_start_with_the_burn_in_taint_when_it_asks_for_burn_in() -> None:
    karpenter = {"type": "karpenter", "nodeClass": "gpu"}
    unset = run([pool("k", {"accelerator": "H100", "provisioner": karpenter})], []).pool("k")
    assert unset is not None and not unset.burn_in, "unset: off, so an upgrade does not drift the NodePool"
    spec = {"accelerator": "H100", "provisioner": karpenter, "health": {"burnIn": True}}
    result = run([pool("k", spec)], [])
    plan = result.pool("k")
    assert plan is not None and plan.burn_in and plan.spec is not None
    nodepool = render.nodepool("k", "uid-k", plan.spec, burn_in=plan.burn_in)
    assert nodepool["spec"]["template"]["spec"]["startupTaints"] == [
        {"key": BURN_IN, "value": "pending", "effect": "NoSchedule"}
    ]
    off = render.nodepool("k", "uid-k", plan.spec, burn_in=False)
    assert "startupTaints" not in off["spec"]["template"]["spec"]
