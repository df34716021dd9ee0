"""The remediation ladder on the emulated API server: an XID quarantines a member, its pods are evicted through
the Eviction API (a PodDisruptionBudget that forbids it holds the drain, and an Event says so), the node is
handed off, and released after the hold-down. The controller runs passes by hand on looptime's clock (the
drain's visits are 10 s apart, the hold-down a minute); the emulator's disruption controller and graceful
deletion are its own (`accelpool_demo.apiserver`)."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from accelpool.model.nodes import format_time
from accelpool_api import conventions
from accelpool_core.protocol import Action, HealthReport, HealthStatus

from .conftest import member, node_body
from .emulated import START, Cluster, Harness, pool_body

NAMESPACE = "team-a"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
BUDGETS = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
XID = "XID 79 (GPU fallen off the bus) on GPU 3"
LADDER = {
    "accelerator": "H100",
    "nodes": 2,
    "health": {"drain": {"enabled": True, "timeout": "5m"}, "handOff": {"enabled": True}, "holdDown": "1m"},
}


def now() -> str:
    """The controller's wall clock (the harness's: START plus the loop's time)."""
    return format_time(START + timedelta(seconds=asyncio.get_running_loop().time()))


def reported(healthy: bool) -> dict[str, str]:
    report = (
        HealthReport(status=HealthStatus.HEALTHY, reason="AllChecksPassed", message="8 GPUs passed all checks")
        if healthy
        else HealthReport(status=HealthStatus.UNHEALTHY, reason="XidError79", message=XID, action=Action.RESET_GPU)
    )
    return {conventions.HEALTH_ANNOTATION: report.to_annotation()}


async def members(cluster: Cluster) -> None:
    for name in ("m1", "m2"):
        view = member(name, "p")
        await cluster.add_nodes(
            node_body(
                name,
                labels=view.labels,
                annotations={**view.annotations, **reported(True)},
                taints=[t.to_dict() for t in view.taints],
                health=("True", "AllChecksPassed", "8 GPUs passed all checks", START.isoformat()),
            )
        )


async def report(cluster: Cluster, node: str, *, healthy: bool, since: str) -> None:
    """The node's agent writes its condition, then its annotation."""
    status, reason, message = (
        ("True", "AllChecksPassed", "8 GPUs passed all checks") if healthy else ("False", "XidError79", XID)
    )
    condition = {
        "type": conventions.HEALTH_CONDITION,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since,
        "lastHeartbeatTime": since,
    }
    await cluster.client.patch(
        f"/api/v1/nodes/{node}/status", {"status": {"conditions": [condition]}}, patch_type="strategic"
    )
    await cluster.client.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": reported(healthy)}})


async def workload(cluster: Cluster, name: str, node: str, app: str = "trainer", **metadata: Any) -> None:
    body = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}, **metadata},
        "spec": {"nodeName": node, "containers": [{"name": "main", "image": "trainer"}]},
    }
    await cluster.client.create(PODS, body)
    ready = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    await cluster.client.patch(f"{PODS}/{name}/status", ready)


def pods_on(cluster: Cluster, node: str) -> list[str]:
    return sorted(p["metadata"]["name"] for p in cluster.api.list("/api/v1/pods") if p["spec"].get("nodeName") == node)


def node_events(cluster: Cluster, reason: str) -> list[str]:
    return [e["message"] for e in cluster.events(reason) if e["involvedObject"]["kind"] == "Node"]


async def passes(harness: Harness, seconds: float = 10.0) -> None:
    """The drain's next visit is due: the watch has caught up, a pass runs."""
    await asyncio.sleep(seconds)
    harness.catch_up()
    result = await harness.controller.reconcile_once()
    assert result.ok, result.error


@pytest.mark.looptime
async def test_an_xid_drains_the_node_past_a_budget_once_it_allows_then_hands_it_off_and_releases_it(
    cluster: Cluster, looptime: float
) -> None:
    await members(cluster)
    await workload(cluster, "trainer-0", "m1")
    await workload(cluster, "trainer-1", "m1")
    await workload(cluster, "elsewhere", "m2")
    dcgm = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "dcgm"}, "spec": {}}
    stored = await cluster.client.create(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", dcgm)
    uid = stored["metadata"]["uid"]  # a pod whose owner is not stored, the garbage collector deletes
    daemon = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "dcgm", "uid": uid, "controller": True}
    await workload(cluster, "dcgm-exporter", "m1", "dcgm", ownerReferences=[daemon])
    budget = {"selector": {"matchLabels": {"app": "trainer"}}, "minAvailable": 3}
    await cluster.client.create(
        BUDGETS,
        {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "trainer"}, "spec": budget},
    )
    harness = await cluster.harness([pool_body("p", LADDER)])
    await passes(harness, 0)

    await report(cluster, "m1", healthy=False, since=now())
    await passes(harness, 0)  # quarantined, with its cause
    taints = cluster.node("m1")["spec"]["taints"]
    assert {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"} in taints
    assert pods_on(cluster, "m1") == ["dcgm-exporter", "trainer-0", "trainer-1"], "nothing evicted before the taint"

    await passes(harness, 1)  # draining: every eviction refused by the budget
    assert pods_on(cluster, "m1") == ["dcgm-exporter", "trainer-0", "trainer-1"]
    assert harness.status("p")["nodes"]["draining"] == 1
    evictions = [path for verb, path in cluster.writes() if path.endswith("/eviction")]
    assert evictions == [f"{PODS}/trainer-0/eviction", f"{PODS}/trainer-1/eviction"]
    assert all(verb == "POST" for verb, path in cluster.writes() if path.endswith("/eviction"))
    await passes(harness)
    [blocked] = node_events(cluster, "DrainBlocked")
    assert blocked.startswith(
        f"m1: eviction of pod {NAMESPACE}/trainer-0 refused by PodDisruptionBudget {NAMESPACE}/trainer: "
    )
    assert "The disruption budget trainer needs 3 healthy pods and has 3 currently" in blocked
    assert harness.controller.metrics.drain_evictions[("p", "blocked")] == 4

    await cluster.client.patch(f"{BUDGETS}/trainer", {"spec": {"minAvailable": 1}})
    await passes(harness)  # the budget allows two: both go
    await passes(harness)  # the visit found nothing left: drained, then handed off
    assert pods_on(cluster, "m1") == ["dcgm-exporter"], "the DaemonSet's pod stays"
    assert pods_on(cluster, "m2") == ["elsewhere"]
    assert len(node_events(cluster, "DrainBlocked")) == 1, "reported once per step"
    assert node_events(cluster, "NodeDrained")
    [requested] = node_events(cluster, "RemediationRequested")
    assert requested.startswith(f"m1: reset-gpu requested for XidError79 ({XID})")
    labels = cluster.node("m1")["metadata"]["labels"]
    assert labels[conventions.REMEDIATION_ACTION_LABEL] == "reset-gpu"
    assert harness.controller.metrics.drain_evictions[("p", "evicted")] == 2
    assert harness.controller.metrics.remediations[("p", "hand_off")] == 1
    await passes(harness, 30)  # the status settles
    status = harness.status("p")
    assert (status["nodes"]["quarantined"], status["nodes"]["handedOff"], status["nodes"]["draining"]) == (1, 1, 0)
    [member] = [m for m in status["members"] if m["node"] == "m1"]
    assert (member["health"], member["reason"], member["step"], member["action"]) == (
        "Quarantined",
        "XidError79",
        "handed-off",
        "reset-gpu",
    )

    await report(cluster, "m1", healthy=True, since=now())
    await passes(harness)  # the operator sees it healthy: the hold-down counts from here
    await passes(harness, 61)
    node = cluster.node("m1")
    assert not any(t["key"] == conventions.QUARANTINE_TAINT_KEY for t in node["spec"].get("taints") or [])
    assert conventions.REMEDIATION_ACTION_LABEL not in node["metadata"]["labels"]
    assert conventions.REMEDIATION_ANNOTATION not in node["metadata"]["annotations"]
    [lifted] = node_events(cluster, "QuarantineLifted")
    assert lifted.endswith("quarantine lifted (quarantined for XidError79, handed-off)")
    assert not [path for verb, path in cluster.writes() if verb == "DELETE" and "/pods/" in path], "never a delete"
