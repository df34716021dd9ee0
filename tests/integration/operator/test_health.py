"""Remediation: AcceleratorHealthy=False quarantines a member, hold-down lifts it, the circuit breaker holds;
an agent that stops writing is found silent by the operator's clock, whatever its own clock says."""

from __future__ import annotations

import asyncio
import contextlib
import json
from datetime import UTC, datetime, timedelta

import pytest

from accelpool.model.nodes import format_time
from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import Cluster, Operator, seed

QUARANTINE = conventions.QUARANTINE_TAINT_KEY
FAILED_AGO, RECOVERED_AGO = 60.0, 30.0
"""The agent's reports reach the operator late (their lastTransitionTime is in the past): the node failed a
minute ago and has been healthy for 30 s, longer than a 10 s hold-down, so its quarantine is lifted without a
wait. The hold-down's timer runs on a fake clock in tests/unit/operator/test_reconciler.py."""


def quarantine_taints(cluster: Cluster, node: str) -> list[dict[str, str]]:
    return [t for t in cluster.taints(node) if t["key"] == QUARANTINE]


async def ready_pool(
    cluster: Cluster, operator: Operator, nodes: int, health: dict[str, object], spares: int = 1
) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, nodes + spares + 1)))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": nodes, "health": health})
    await cluster.wait_for(lambda: len(cluster.members("train")) == nodes)
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="Ready")


async def test_quarantine_then_release_after_hold_down(cluster: Cluster, operator: Operator) -> None:
    await ready_pool(cluster, operator, 2, {"remediation": "taint", "holdDown": "10s"})
    await cluster.report_health(
        "h100-1",
        healthy=False,
        reason="XidError79",
        message="XID 79 (GPU fallen off the bus)",
        bad_gpus=(3,),
        seconds_ago=FAILED_AGO,
    )
    await cluster.wait_for(lambda: quarantine_taints(cluster, "h100-1"), what="quarantine taint")
    assert quarantine_taints(cluster, "h100-1") == [{"key": QUARANTINE, "value": "XidError79", "effect": "NoSchedule"}]
    await cluster.wait_for(lambda: cluster.condition("train", "Healthy").get("reason") == "NodeQuarantined")
    healthy = cluster.condition("train", "Healthy")
    assert healthy["status"] == "False"
    assert healthy["message"] == "h100-1: XID 79 (GPU fallen off the bus) on GPU 3"
    assert cluster.status("train")["nodes"]["quarantined"] == 1
    # The spare replaces it, so two nodes serve again; the quarantined node stays a member.
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2", "h100-3"], what="spare")

    def events() -> set[tuple[str, str, str]]:
        return {(e["involvedObject"]["kind"], e["involvedObject"]["name"], e["reason"]) for e in cluster.events()}

    await cluster.wait_for(
        lambda: {("Node", "h100-1", "NodeQuarantined"), ("ComputePool", "train", "NodeQuarantined")} <= events()
    )
    assert await operator.metric('accelpool_remediations_total{action="taint",pool="train"}') == 1

    await cluster.report_health("h100-1", healthy=True, seconds_ago=RECOVERED_AGO)
    await cluster.wait_for(lambda: not quarantine_taints(cluster, "h100-1"), what="lifted after hold-down")
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2"], what="spare released")
    await cluster.wait_for(
        lambda: ("h100-1", "QuarantineLifted") in {(e["involvedObject"]["name"], e["reason"]) for e in cluster.events()}
    )


async def test_the_circuit_breaker_stops_quarantining(cluster: Cluster, operator: Operator) -> None:
    await ready_pool(cluster, operator, 3, {"remediation": "taint", "maxUnavailable": 1}, spares=0)
    await cluster.report_health("h100-1", healthy=False, reason="XidError48", message="double-bit ECC error")
    await cluster.wait_for(lambda: quarantine_taints(cluster, "h100-1"))
    await cluster.report_health("h100-2", healthy=False, reason="XidError79", message="GPU fallen off the bus")
    await cluster.wait_for(lambda: cluster.condition("train", "Healthy").get("reason") == "CircuitBreakerOpen")
    assert "not quarantining h100-2" in cluster.condition("train", "Healthy")["message"]
    assert quarantine_taints(cluster, "h100-2") == [], "maxUnavailable 1: the second node is not quarantined"
    assert await operator.metric('accelpool_pool_circuit_breaker_open{pool="train"}') == 1
    events = {(e["involvedObject"]["name"], e["reason"]) for e in cluster.events()}
    assert ("train", "CircuitBreakerOpen") in events


async def test_cordon_remediation_uncordons_only_what_it_cordoned(cluster: Cluster, operator: Operator) -> None:
    await ready_pool(cluster, operator, 1, {"remediation": "cordon", "holdDown": "10s"}, spares=0)
    await cluster.report_health(
        "h100-1", healthy=False, reason="SlowMatmul", message="bf16 matmul at 41% of peak", seconds_ago=FAILED_AGO
    )
    await cluster.wait_for(lambda: cluster.node("h100-1").get("spec", {}).get("unschedulable") is True)
    annotations = cluster.node("h100-1")["metadata"]["annotations"]
    assert annotations[conventions.CORDONED_ANNOTATION] == "true"
    assert quarantine_taints(cluster, "h100-1") == []
    await cluster.report_health("h100-1", healthy=True, seconds_ago=RECOVERED_AGO)
    await cluster.wait_for(lambda: not cluster.node("h100-1").get("spec", {}).get("unschedulable"), what="uncordon")
    assert conventions.CORDONED_ANNOTATION not in cluster.node("h100-1")["metadata"]["annotations"]


async def test_remediation_none_only_reports(cluster: Cluster, operator: Operator) -> None:
    await ready_pool(cluster, operator, 1, {"remediation": "none"}, spares=0)
    await cluster.report_health("h100-1", healthy=False, reason="XidError79", message="GPU fallen off the bus")
    await cluster.wait_for(lambda: cluster.condition("train", "Healthy").get("reason") == "NodeUnhealthy")
    assert quarantine_taints(cluster, "h100-1") == []
    assert not cluster.node("h100-1").get("spec", {}).get("unschedulable")
    assert cluster.status("train")["phase"] == "Degraded"


async def test_a_drain_evicts_a_quarantined_nodes_workloads_and_keeps_its_daemonset_pods(
    cluster: Cluster, operator: Operator
) -> None:
    await ready_pool(cluster, operator, 1, {"remediation": "taint", "drain": {"enabled": True}}, spares=0)
    workload = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "trainer-0", "labels": {"app": "trainer"}},
        "spec": {"nodeName": "h100-1", "containers": [{"name": "main", "image": "trainer"}]},
    }
    await cluster.client.create("/api/v1/namespaces/team-a/pods", workload)
    agents = [p["metadata"]["name"] for p in cluster.pods("train")]
    await cluster.report_health("h100-1", healthy=False, reason="XidError79", message="GPU fallen off the bus")

    def pod_names() -> set[str]:
        return {p["metadata"]["name"] for p in cluster._list("v1/pods")}

    await cluster.wait_for(lambda: "trainer-0" not in pod_names(), what="the workload evicted")
    assert set(agents) <= pod_names(), "the agent's DaemonSet pods stay"
    evictions = [s.path for s in cluster.emulator.writes(agent="accelpool") if s.path.endswith("/eviction")]
    assert evictions == ["/api/v1/namespaces/team-a/pods/trainer-0/eviction"]
    await cluster.wait_for(
        lambda: ("h100-1", "NodeDrained") in {(e["involvedObject"]["name"], e["reason"]) for e in cluster.events()},
        what="NodeDrained",
    )
    record = json.loads(cluster.node("h100-1")["metadata"]["annotations"][conventions.REMEDIATION_ANNOTATION])
    assert (record["step"], record["cause"]) == ("drained", "XidError79")
    assert await operator.metric('accelpool_drain_evictions_total{pool="train",result="evicted"}') == 1
    assert await operator.metric('accelpool_pool_nodes{pool="train",state="drained"}') == 1


async def heartbeat(cluster: Cluster, node: str, at: datetime) -> None:
    """What a live agent does every heartbeat period: rewrite its condition, unchanged but for lastHeartbeatTime."""
    conditions = (cluster.node(node).get("status") or {}).get("conditions") or []
    rewritten = [
        c | {"lastHeartbeatTime": format_time(at)} if c["type"] == conventions.HEALTH_CONDITION else c
        for c in conditions
    ]
    await cluster.client.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": rewritten}})


async def test_a_dead_agent_whose_clock_runs_a_day_ahead_is_found_silent(
    cluster: Cluster, operator: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELPOOL_AGENT_SILENT_AFTER", "2")  # the hidden setting: 2 s instead of 15 minutes
    seed(cluster, node_body("h100-1"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 1})
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1"], what="member")
    await cluster.settle_members("train")
    ahead = datetime.now(UTC) + timedelta(days=1)

    async def agent() -> None:  # alive, its clock a day ahead: a heartbeat every quarter of the period
        for beat in range(1_000_000):
            await heartbeat(cluster, "h100-1", ahead + timedelta(seconds=beat))
            await asyncio.sleep(0.5)

    alive = asyncio.create_task(agent())
    try:
        await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="Ready")
        assert cluster.status("train")["nodes"]["ready"] == 1
    finally:
        alive.cancel()  # the agent dies; its last condition says it wrote a day from now
        with contextlib.suppress(asyncio.CancelledError):
            await alive
    await cluster.wait_for(
        lambda: cluster.condition("train", "AgentReady").get("reason") == "WaitingForAgents", what="AgentSilent"
    )
    status = cluster.status("train")
    assert status["nodes"]["ready"] == 0, "the pool no longer counts the silent node"
    assert status["phase"] != "Ready"
    member = status["members"][0]
    assert (member["node"], member["health"], member["reason"]) == (
        "h100-1",
        "Unknown",
        conventions.SILENT_AGENT_REASON,
    )
    assert "h100-1" in cluster.condition("train", "AgentReady")["message"]
