"""The burn-in gate end to end: the controller on the emulated API server, the test playing the node's agent.

A claimed node is stored with `accelpool.io/burn-in=pending` in the write that makes it a member; the
agent's completed, healthy full cycle takes it off (and posts BurnInPassed). A node that fails keeps
it, as `failed`, through its quarantine's release and for good, until someone sets it back to `pending`.
Time runs on looptime's clock: the controller's wall clock starts at `START`.
"""

from __future__ import annotations

import asyncio
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from accelpool.model.nodes import format_time
from accelpool_api import conventions

from .conftest import MIG_OFF, node_body
from .emulated import NODES, START, Cluster, Harness, pool_body

pytestmark = pytest.mark.looptime
BURN_IN = conventions.BURN_IN_TAINT_KEY
QUARANTINE = conventions.QUARANTINE_TAINT_KEY


def taints(cluster: Cluster, name: str) -> dict[str, str | None]:
    return {t["key"]: t.get("value") for t in cluster.node(name)["spec"].get("taints") or []}


async def agent_reports(
    cluster: Cluster, name: str, status: str, *, complete: bool, since: datetime | None = None
) -> None:
    """What the pool's agent writes: its health annotation and a fresh AcceleratorHealthy condition (its
    status since `since`, by default now)."""
    healthy = status == "True"
    reason = "AllChecksPassed" if healthy else "XidError79"
    report: dict[str, Any] = {
        "status": "Healthy" if healthy else "Unhealthy",
        "reason": reason,
        "message": "8 GPUs passed all checks" if healthy else "XID 79 (GPU fallen off the bus) on GPU 0",
        "pool": "p",
        "complete": complete,
    }
    await cluster.client.patch(
        f"{NODES}/{name}", {"metadata": {"annotations": {conventions.HEALTH_ANNOTATION: json.dumps(report)}}}
    )
    conditions = [c for c in cluster.node(name)["status"]["conditions"] if c["type"] != conventions.HEALTH_CONDITION]
    conditions.append(
        {
            "type": conventions.HEALTH_CONDITION,
            "status": status,
            "reason": reason,
            "message": report["message"],
            "lastTransitionTime": format_time(since or now()),
            "lastHeartbeatTime": format_time(now()),
        }
    )
    await cluster.client.patch(f"{NODES}/{name}/status", {"status": {"conditions": conditions}})


def now() -> datetime:
    """The agent's clock: the controller's (looptime's, from `START`)."""
    return START + timedelta(seconds=asyncio.get_running_loop().time())


async def pass_(harness: Harness) -> None:
    harness.catch_up()
    harness.catch_up_pools()
    result = await harness.controller.reconcile_once()
    assert result.ok


async def test_a_claimed_node_serves_only_after_its_agent_passed_a_full_cycle(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    await pass_(harness)
    assert taints(cluster, "n1")[BURN_IN] == "pending"
    assert harness.node_writes() == ["/api/v1/nodes/n1"], "one write: member and tainted at once"
    status = harness.status("p")
    assert (status["nodes"]["burnIn"], status["capacity"]["gpus"], status["capacity"]["burnInGPUs"]) == (1, 0, 8)

    await agent_reports(cluster, "n1", "True", complete=False)  # an early report: the first cycle is not done
    await pass_(harness)
    assert taints(cluster, "n1")[BURN_IN] == "pending"

    await agent_reports(cluster, "n1", "True", complete=True)
    await pass_(harness)
    assert BURN_IN not in taints(cluster, "n1")
    assert [e["involvedObject"]["name"] for e in cluster.events("BurnInPassed")] == ["n1"]
    status = harness.status("p")
    assert (status["nodes"]["burnIn"], status["capacity"]["gpus"], status["capacity"]["burnInGPUs"]) == (0, 8, 0)


async def test_a_node_failing_burn_in_keeps_its_taint_through_the_quarantines_release(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "health": {"holdDown": "10m"}})])
    await pass_(harness)
    await agent_reports(cluster, "n1", "False", complete=False)
    await pass_(harness)
    assert taints(cluster, "n1") == {"accelpool.io/pool": "p", BURN_IN: "failed", QUARANTINE: "XidError79"}
    assert [e["type"] for e in cluster.events("BurnInFailed")] == ["Warning", "Warning"]
    assert harness.status("p")["phase"] == "Degraded"

    # Healthy again, and the operator sees it so for 11 minutes (its own clock): past the 10-minute hold-down.
    days_ago = START - timedelta(days=2)  # the agent's clock may say anything
    await agent_reports(cluster, "n1", "True", complete=True, since=days_ago)
    await pass_(harness)
    assert QUARANTINE in taints(cluster, "n1"), "the hold-down counts from when the operator saw it healthy"
    for _ in range(11):
        await asyncio.sleep(60)
        await agent_reports(cluster, "n1", "True", complete=True, since=days_ago)  # heartbeats
        await pass_(harness)
    assert taints(cluster, "n1") == {"accelpool.io/pool": "p", BURN_IN: "failed"}, "the quarantine alone is lifted"
    member = harness.status("p")["members"][0]
    assert (member["health"], member["reason"], harness.status("p")["capacity"]["gpus"]) == (
        "BurnIn",
        "BurnInFailed",
        0,
    )

    await asyncio.sleep(60)
    await agent_reports(cluster, "n1", "True", complete=True, since=days_ago)
    await pass_(harness)
    assert taints(cluster, "n1") == {"accelpool.io/pool": "p", BURN_IN: "failed"}, "never lifted by accelpool"

    repaired = [{"key": "accelpool.io/pool", "value": "p", "effect": "NoSchedule"}]
    repaired.append({"key": BURN_IN, "value": "pending", "effect": "NoSchedule"})
    await cluster.client.patch("/api/v1/nodes/n1", {"spec": {"taints": repaired}})  # kubectl taint --overwrite
    await pass_(harness)
    assert taints(cluster, "n1") == {"accelpool.io/pool": "p"}, "re-armed, it burns in again and passes"
    assert harness.status("p")["capacity"]["gpus"] == 8
