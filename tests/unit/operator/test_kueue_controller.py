"""The controller's Kueue reads and writes on the emulated API server (Kueue's CRDs installed): one write per
change, a queue edit refused for a stale resourceVersion re-read and redone, RBAC that forbids listing Kueue
reported in the status while the rest of the pass goes on, and a refused flavor held against its pool only."""

from __future__ import annotations

from typing import Any

from accelpool_core.kube import KubeClient
from tests.support import kueue

from .conftest import MIG_OFF, node_body
from .emulated import CONTROLLER, Cluster, pool_body

ASKING = {
    "accelerator": "H100:8",
    "health": {"burnIn": False},
    "kueue": {"enabled": True, "clusterQueue": "research"},
}


async def _queue(client: KubeClient) -> dict[str, Any]:
    created: dict[str, Any] = await client.create(kueue.QUEUES, kueue.cluster_queue("research", [kueue.CPU_AND_MEMORY]))
    return created


def _kueue_writes(cluster: Cluster) -> list[tuple[str, str]]:
    return [(verb, path) for verb, path in cluster.writes() if "kueue.x-k8s.io" in path]


async def test_one_write_per_change_and_a_stale_queue_is_read_again(cluster: Cluster) -> None:
    kueue.install(cluster.api.server)
    await _queue(cluster.client)
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF))
    harness = await cluster.harness([pool_body("train", ASKING)])
    assert (await harness.controller.reconcile_once()).ok
    assert _kueue_writes(cluster) == [
        ("APPLY", f"{kueue.FLAVORS}/train"),
        ("PATCH", f"{kueue.QUEUES}/research"),
    ]
    order = [path for _, path in cluster.writes()]
    assert order.index("/api/v1/nodes/n1") < order.index(f"{kueue.QUEUES}/research"), "quota rises after the nodes"
    assert harness.status("train")["kueue"]["nominalQuota"] == {"nvidia.com/gpu": 8}
    harness.catch_up()
    assert (await harness.controller.reconcile_once()).ok
    assert len(_kueue_writes(cluster)) == 2, "nothing changed: nothing written"

    # Someone edits the queue and a node's GPUs go: the edit computed from the old queue meets a 409.
    await cluster.client.patch(f"{kueue.QUEUES}/research", {"spec": {"stopPolicy": "Hold"}})
    await cluster.client.patch("/api/v1/nodes/n1", {"spec": {"unschedulable": True}})
    harness.catch_up()
    result = await harness.controller.reconcile_once()
    assert result.ok and result.conflicts == 1
    assert [s.path for s in cluster.api.server.conflicts("clusterqueues", agent=CONTROLLER)] == [
        f"{kueue.QUEUES}/research"
    ]
    assert (await harness.controller.reconcile_once()).ok
    queue = cluster.api.get(f"{kueue.QUEUES}/research")
    assert queue is not None and queue["spec"]["stopPolicy"] == "Hold"
    assert queue["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["nominalQuota"] == 0


async def test_forbidden_kueue_is_reported_and_the_pool_is_planned_as_ever(cluster: Cluster) -> None:
    kueue.install(cluster.api.server)
    cluster.api.fail(f"GET {kueue.FLAVORS}", 403, times=None)
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF))
    harness = await cluster.harness([pool_body("train", ASKING)])
    assert (await harness.controller.reconcile_once()).ok
    status = harness.status("train")
    synced = next(c for c in status["conditions"] if c["type"] == "KueueSynced")
    assert (synced["status"], synced["reason"]) == ("False", "KueueUnreadable")
    assert status["nodes"]["members"] == 1
    assert _kueue_writes(cluster) == []


async def test_a_refused_flavor_fails_only_its_pool(cluster: Cluster) -> None:
    kueue.install(cluster.api.server)
    await _queue(cluster.client)
    cluster.api.fail(f"PATCH {kueue.FLAVORS}/train", 500, times=None)
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF), node_body("l1", "L4", 1))
    harness = await cluster.harness([pool_body("train", ASKING), pool_body("l4", {"accelerator": "L4"})])
    result = await harness.controller.reconcile_once()
    assert result.failed_pools == {"train"}
    assert harness.status("train") == {}, "nothing is published about writes that did not happen"
    assert harness.status("l4")["nodes"]["members"] == 1
    (warning,) = cluster.events("WriteFailed")
    assert "ResourceFlavor train" in warning["message"]


async def test_turning_kueue_off_removes_the_flavor_from_the_queue_then_deletes_it(cluster: Cluster) -> None:
    kueue.install(cluster.api.server)
    await _queue(cluster.client)
    await cluster.add_nodes(node_body("n1", labels=MIG_OFF))
    harness = await cluster.harness([pool_body("train", ASKING)])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up_pools()
    await harness.set_pools(pool_body("train", {**ASKING, "kueue": {"enabled": False, "clusterQueue": "research"}}))
    harness.catch_up()
    assert (await harness.controller.reconcile_once()).ok
    assert _kueue_writes(cluster)[2:] == [("PATCH", f"{kueue.QUEUES}/research"), ("DELETE", f"{kueue.FLAVORS}/train")]
    queue = cluster.api.get(f"{kueue.QUEUES}/research")
    assert queue is not None and queue["spec"]["resourceGroups"] == [kueue.CPU_AND_MEMORY]
    assert cluster.api.get(f"{kueue.FLAVORS}/train") is None
    status = harness.status("train")
    assert "kueue" not in status
    assert "KueueSynced" not in {c["type"] for c in status["conditions"]}


async def test_a_quarantine_lowers_the_quota_before_the_node_is_tainted(cluster: Cluster) -> None:
    kueue.install(cluster.api.server)
    await _queue(cluster.client)
    healthy = ("True", "AllChecksPassed", "", "2026-11-01T00:00:00Z")
    await cluster.add_nodes(
        node_body("n1", health=healthy, labels=MIG_OFF), node_body("n2", health=healthy, labels=MIG_OFF)
    )
    harness = await cluster.harness([pool_body("train", {**ASKING, "nodes": 2})])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    before = len(cluster.writes())
    failing = {"type": "AcceleratorHealthy", "status": "False", "reason": "XidError79", "message": "XID 79"}
    conditions = [c for c in cluster.node("n1")["status"]["conditions"] if c["type"] != "AcceleratorHealthy"]
    await cluster.client.patch("/api/v1/nodes/n1/status", {"status": {"conditions": [*conditions, failing]}})
    harness.catch_up()
    assert (await harness.controller.reconcile_once()).ok
    order = [path for _, path in cluster.writes()[before:]]
    assert order.index(f"{kueue.QUEUES}/research") < order.index("/api/v1/nodes/n1"), "quota lowered first"
    queue = cluster.api.get(f"{kueue.QUEUES}/research")
    assert queue is not None
    assert queue["spec"]["resourceGroups"][1]["flavors"][0]["resources"][0]["nominalQuota"] == 8
