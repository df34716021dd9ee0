"""Kueue: a pool that asks gets a ResourceFlavor, and its ClusterQueue's nominal quota follows the pool's healthy
capacity (a quarantined node's GPUs leave it and come back on release), with only the pool's entry of the queue
edited; Kueue absent, the status says so and nothing else breaks; other pools are untouched. The first test
installs Kueue's published CRDs (../shared/crds/: skipped without them, failed under REQUIRE_TOOLS=1), the
others the CRDs the demo serves (the published ones, else the demo's own minimal ones)."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.decide.kueue import IN_USE_FINALIZER
from accelpool_api import conventions
from tests.support import kueue
from tests.support.builders import node_body

from .conftest import Cluster, Operator, seed

GPU = "nvidia.com/gpu"
QUEUE = f"{kueue.QUEUES}/research"
ASKING = {"accelerator": "H100:8", "nodes": 2, "kueue": {"enabled": True, "clusterQueue": "research"}}
HEALTH = {"health": {"remediation": "taint", "holdDown": "10s"}}


def _stored(cluster: Cluster, path: str) -> dict[str, Any] | None:
    """A stored Kueue object by its API path."""
    collection, _, name = path.rpartition("/")
    return cluster._get(collection.removeprefix("/apis/"), None, name)


def _quota(cluster: Cluster, flavor: str = "train") -> dict[str, int] | None:
    queue = _stored(cluster, QUEUE)
    if queue is None:
        return None
    groups = queue["spec"].get("resourceGroups") or []
    found = [f for g in groups for f in g["flavors"] if f["name"] == flavor]
    return {r["name"]: int(r["nominalQuota"]) for r in found[0]["resources"]} if found else None


async def test_the_quota_follows_quarantine_and_the_rest_of_the_queue_is_kept(
    cluster: Cluster, operator: Operator
) -> None:
    kueue.install(cluster.emulator)
    user_queue = kueue.cluster_queue("research", [kueue.CPU_AND_MEMORY], cohortName="ml", queueingStrategy="StrictFIFO")
    await cluster.client.create(kueue.QUEUES, user_queue)
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 3)), node_body("l4-1", "L4", 1))
    await operator.start()
    await cluster.apply_pool("train", {**ASKING, **HEALTH})
    await cluster.apply_pool("plain", {"accelerator": "L4:1", "nodes": 1})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2)
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: _quota(cluster) == {GPU: 16}, what="quota of 2 healthy nodes")

    flavor = _stored(cluster, f"{kueue.FLAVORS}/train")
    assert flavor is not None
    assert flavor["spec"]["nodeLabels"] == {conventions.POOL_LABEL: "train"}
    assert flavor["spec"]["tolerations"] == [
        {"key": conventions.POOL_TAINT_KEY, "operator": "Equal", "value": "train", "effect": "NoSchedule"}
    ]
    queue = _stored(cluster, QUEUE)
    assert queue is not None
    assert queue["spec"]["resourceGroups"][0] == kueue.CPU_AND_MEMORY
    assert (queue["spec"]["cohortName"], queue["spec"]["queueingStrategy"]) == ("ml", "StrictFIFO")
    kueue_status = {"resourceFlavor": "train", "clusterQueue": "research", "nominalQuota": {GPU: 16}}
    await cluster.wait_for(lambda: cluster.status("train").get("kueue") == kueue_status, what="status.kueue")
    assert cluster.condition("train", "KueueSynced")["reason"] == "Synced"
    assert "kueue" not in cluster.status("plain")
    assert "KueueSynced" not in {c["type"] for c in cluster.status("plain")["conditions"]}
    assert [f["metadata"]["name"] for f in cluster._list(kueue.FLAVORS.removeprefix("/apis/"))] == ["train"]

    # The user edits the queue meanwhile: the operator's next edit (against the old resourceVersion) is refused,
    # re-reads the queue and keeps the user's change.
    await cluster.client.patch(QUEUE, {"spec": {"stopPolicy": "Hold"}})
    # The reports reach the operator late: failed a minute ago, healthy for 30 s (past the hold-down) below.
    await cluster.report_health("h100-1", healthy=False, reason="XidError79", message="XID 79", seconds_ago=60)
    await cluster.wait_for(lambda: _quota(cluster) == {GPU: 8}, what="quarantined GPUs out of the quota")
    queue = _stored(cluster, QUEUE)
    assert queue is not None and queue["spec"]["stopPolicy"] == "Hold"
    assert cluster.emulator.conflicts("clusterqueues", agent="accelpool") != []
    await cluster.wait_for(lambda: any(e["reason"] == "KueueQuotaUpdated" for e in cluster.events()))

    await cluster.report_health("h100-1", healthy=True, seconds_ago=30)
    await cluster.wait_for(lambda: _quota(cluster) == {GPU: 16}, what="released GPUs back in the quota")
    assert kueue.admit("ClusterQueue", _stored(cluster, QUEUE) or {}) == []


async def test_without_kueue_the_status_says_so_and_kueue_installed_later_is_found(
    cluster: Cluster, operator: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELPOOL_RESYNC_INTERVAL", "1")
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 3)))
    await operator.start()
    await cluster.apply_pool("train", ASKING)
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2)
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="Ready without Kueue")
    synced = cluster.condition("train", "KueueSynced")
    assert (synced["status"], synced["reason"]) == ("False", "KueueNotInstalled")
    assert "install Kueue" in synced["message"]

    kueue.install_as_the_demo(cluster.emulator)
    await cluster.wait_for(
        lambda: cluster.condition("train", "KueueSynced").get("reason") == "ClusterQueueNotFound",
        what="Kueue found at the next resync",
    )
    assert _stored(cluster, f"{kueue.FLAVORS}/train") is not None
    await cluster.client.create(kueue.QUEUES, kueue.cluster_queue("research", []))
    await cluster.wait_for(lambda: _quota(cluster) == {GPU: 16}, what="the queue created later gets the quota")


async def test_a_deleted_pool_leaves_the_queue_before_its_flavor_goes(cluster: Cluster, operator: Operator) -> None:
    kueue.install_as_the_demo(cluster.emulator)
    await cluster.client.create(kueue.QUEUES, kueue.cluster_queue("research", [kueue.CPU_AND_MEMORY]))
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 3)))
    await operator.start()
    await cluster.apply_pool("train", ASKING)
    await cluster.wait_for(lambda: _quota(cluster) is not None, what="the flavor in the queue")
    # Kueue's own finalizer on the flavor while a queue uses it (its resourceflavor controller).
    await cluster.client.patch(f"{kueue.FLAVORS}/train", {"metadata": {"finalizers": [IN_USE_FINALIZER]}})
    await cluster.delete_pool("train")
    await cluster.wait_for(lambda: cluster.pool("train") is None, what="the pool released")
    queue = _stored(cluster, QUEUE)
    assert queue is not None and queue["spec"]["resourceGroups"] == [kueue.CPU_AND_MEMORY]
    flavor = _stored(cluster, f"{kueue.FLAVORS}/train")
    assert flavor is not None and flavor["metadata"].get("deletionTimestamp"), "deleted, Kueue's finalizer left alone"
    assert flavor["metadata"]["finalizers"] == [IN_USE_FINALIZER]
