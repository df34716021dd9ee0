"""Health left behind by an agent that stopped is not believed: it reads as Unknown/AgentSilent.

The agent rewrites `AcceleratorHealthy` at least every heartbeat period (`lastHeartbeatTime`).
A condition the operator has seen unchanged for `HEALTH_STALE_SECONDS` (its own clock,
`PlannerOptions.health_unchanged_for`; `test_health_freshness` for agents whose clocks are off)
says nothing about the node now: a stale True does not make a pool Ready, a stale False does not
keep a repaired node out of every pool, and a released node loses the agent's health annotation.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from accelpool.decide import patches
from accelpool.model.nodes import NodeView, format_time
from accelpool_api import conventions

from .conftest import NOW, conditions, member, members, node_body, pool, run
from .emulated import Cluster


def _with_heartbeat(body: dict[str, Any], status: str, reason: str, age: timedelta) -> NodeView:
    """The node with its agent's condition, last written `age` ago by a clock in step with the operator's."""
    beat = format_time(NOW - age)
    body["status"]["conditions"].append(
        {
            "type": conventions.HEALTH_CONDITION,
            "status": status,
            "reason": reason,
            "message": reason,
            "lastTransitionTime": format_time(NOW - age - timedelta(hours=1)),
            "lastHeartbeatTime": beat,
        }
    )
    return NodeView.from_body(body)


def _ages(*views: NodeView) -> dict[str, float]:
    """`health_unchanged_for`: the operator saw each condition change when its agent wrote it."""
    return {v.name: (NOW - v.health.heartbeat).total_seconds() for v in views if v.health and v.health.heartbeat}


def _member_body(name: str, pool_name: str) -> dict[str, Any]:
    view = member(name, pool_name)
    raw = node_body(name, labels=dict(view.labels), annotations=dict(view.annotations))
    raw["spec"]["taints"] = [t.to_dict() for t in view.taints]
    return raw


def test_a_stale_false_on_a_free_node_does_not_keep_it_out_of_pools_forever() -> None:
    old = _with_heartbeat(node_body("repaired"), "False", "XidError79", timedelta(hours=2))
    result = run([pool("p", {"accelerator": "H100"})], [old], health_unchanged_for=_ages(old))
    assert members(result, "p") == ["repaired"]


def test_a_fresh_false_on_a_free_node_still_keeps_it_out() -> None:
    fresh = _with_heartbeat(node_body("broken"), "False", "XidError79", timedelta(minutes=1))
    result = run([pool("p", {"accelerator": "H100"})], [fresh], health_unchanged_for=_ages(fresh))
    assert members(result, "p") == []


def test_a_stale_true_from_a_dead_agent_does_not_make_the_pool_ready() -> None:
    stale = _with_heartbeat(_member_body("m1", "p"), "True", "AllChecksPassed", timedelta(hours=1))
    result = run([pool("p", {"accelerator": "H100"})], [stale], health_unchanged_for=_ages(stale))
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert conditions(result, "p")["AgentReady"] == ("False", "WaitingForAgents")
    assert found.status.phase != "Ready"
    assert found.status.members[0].health == "Unknown"
    assert found.status.members[0].reason == conventions.SILENT_AGENT_REASON


def test_a_fresh_true_makes_the_member_ready() -> None:
    fresh = _with_heartbeat(_member_body("m1", "p"), "True", "AllChecksPassed", timedelta(minutes=4))
    result = run([pool("p", {"accelerator": "H100"})], [fresh], health_unchanged_for=_ages(fresh))
    assert conditions(result, "p")["AgentReady"] == ("True", "Reporting")


def test_a_released_node_loses_the_agents_health_annotation() -> None:
    report = '{"reason":"XidError79","status":"Unhealthy"}'
    gone = member("m1", "deleted", annotations={conventions.HEALTH_ANNOTATION: report})
    result = run([], [gone])
    assert result.changes["m1"].annotations[conventions.HEALTH_ANNOTATION] is None


@pytest.mark.parametrize(
    ("writer", "agent_ready"),
    [("previous", ("False", "WaitingForAgents")), ("p", ("True", "Reporting"))],
    ids=["another-pools-agent", "this-pools-agent"],
)
def test_only_health_written_by_this_pools_agent_counts(writer: str, agent_ready: tuple[str, str]) -> None:
    report = f'{{"pool":"{writer}","agent":"accelpool-agent-x7k2","reason":"AllChecksPassed","status":"Healthy"}}'
    raw = _member_body("m1", "p")
    raw["metadata"]["annotations"][conventions.HEALTH_ANNOTATION] = report
    view = _with_heartbeat(raw, "True", "AllChecksPassed", timedelta(minutes=1))
    result = run([pool("p", {"accelerator": "H100"})], [view], health_unchanged_for=_ages(view))
    assert conditions(result, "p")["AgentReady"] == agent_ready


def test_a_released_node_loses_the_agents_condition_unless_it_says_the_node_is_bad() -> None:
    healthy = _with_heartbeat(_member_body("m1", "gone"), "True", "AllChecksPassed", timedelta(minutes=1))
    broken = _with_heartbeat(_member_body("m2", "gone"), "False", "XidError79", timedelta(minutes=1))
    result = run([], [healthy, broken], health_unchanged_for=_ages(healthy, broken))
    ops = patches.health_removal(healthy, result.changes["m1"])
    assert ops == [
        {"op": "test", "path": "/status/conditions/1/type", "value": conventions.HEALTH_CONDITION},
        {"op": "remove", "path": "/status/conditions/1"},
    ]
    assert healthy.apply(result.changes["m1"]).health is None
    assert patches.health_removal(broken, result.changes["m2"]) is None, "a known-bad node stays out of pools"


def test_what_an_agent_writes_on_a_node_in_no_pool_is_removed() -> None:
    """The agent of a deleted pool may write once more after the release: a free node keeps nothing."""
    report = '{"pool":"gone","agent":"accelpool-agent-gone-x7k2","reason":"AllChecksPassed","status":"Healthy"}'
    written = node_body("n1", annotations={conventions.HEALTH_ANNOTATION: report})
    rewritten = _with_heartbeat(written, "True", "AllChecksPassed", timedelta(seconds=5))
    result = run([], [rewritten], health_unchanged_for=_ages(rewritten))
    change = result.changes["n1"]
    assert change.annotations == {conventions.HEALTH_ANNOTATION: None}
    assert patches.health_removal(rewritten, change) is not None
    assert patches.node_patch(rewritten, change) == {
        "metadata": {"annotations": {conventions.HEALTH_ANNOTATION: None}, "resourceVersion": "1"}
    }
    fresh_false = _with_heartbeat(node_body("n2"), "False", "XidError79", timedelta(minutes=1))
    stale_false = _with_heartbeat(node_body("n3"), "False", "XidError79", timedelta(hours=2))
    clean = node_body("n4")
    result = run(
        [], [fresh_false, stale_false, NodeView.from_body(clean)], health_unchanged_for=_ages(fresh_false, stale_false)
    )
    assert "n2" not in result.changes, "a known-bad node keeps its False until it ages out"
    assert patches.health_removal(stale_false, result.changes["n3"]) is not None
    assert "n4" not in result.changes, "nothing to remove, nothing written"


async def test_the_reconciler_takes_the_condition_off_a_node_whose_pool_is_gone(cluster: Cluster) -> None:
    body = _member_body("m1", "gone")
    body["status"]["conditions"].append(
        {
            "type": conventions.HEALTH_CONDITION,
            "status": "True",
            "reason": "AllChecksPassed",
            "lastHeartbeatTime": format_time(NOW),
        }
    )
    await cluster.add_nodes(body)
    harness = await cluster.harness([])
    result = await harness.controller.reconcile_once()
    assert result.ok
    assert ("PATCH", "/api/v1/nodes/m1/status") in cluster.writes()
    types = [c["type"] for c in cluster.node("m1")["status"]["conditions"]]
    assert types == ["Ready"], "the kubelet's conditions stay; the agent's is gone"
    assert conventions.POOL_LABEL not in cluster.node("m1")["metadata"]["labels"]
