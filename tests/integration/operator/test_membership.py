"""Who gets which node: competing pools, replacements, cordoned and NotReady nodes, other pools' nodes."""

from __future__ import annotations

from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import Cluster, Operator, seed


async def test_two_pools_never_share_a_node(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 5)))
    await operator.start()
    await cluster.apply_pool("first", {"accelerator": "H100:8", "nodes": 3})
    await cluster.wait_for(lambda: len(cluster.members("first")) == 3)
    await cluster.apply_pool("second", {"accelerator": "H100:8", "nodes": 3})
    await cluster.wait_for(lambda: cluster.condition("second", "NodesSelected").get("reason") == "InsufficientNodes")
    assert cluster.members("first") == ["h100-1", "h100-2", "h100-3"]
    assert cluster.members("second") == ["h100-4"]
    message = cluster.condition("second", "NodesSelected")["message"]
    assert message.startswith("1 of 3: only 1 free nodes match H100-80GB x8")
    assert "held by other pools" in message
    assert cluster.status("second")["phase"] == "Degraded"

    await cluster.delete_pool("first")
    await cluster.wait_for(lambda: len(cluster.members("second")) == 3, what="second takes the freed nodes")
    await cluster.wait_for(lambda: cluster.condition("second", "NodesSelected").get("status") == "True")


async def test_a_removed_member_is_replaced(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2"])
    await cluster.client.delete("/api/v1/nodes/h100-1")
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-2", "h100-3"], what="replacement")
    await cluster.wait_for(
        lambda: [m["node"] for m in cluster.status("train").get("members", [])] == ["h100-2", "h100-3"]
    )


async def test_cordoned_and_not_ready_nodes_are_not_claimed(cluster: Cluster, operator: Operator) -> None:
    seed(
        cluster,
        node_body("h100-1", unschedulable=True),
        node_body("h100-2", ready=False),
        node_body("h100-3"),
        node_body("h100-4", labels={conventions.POOL_LABEL: "someone-else"}),
        node_body("l4-1", "L4", 1),
    )
    await cluster.apply_pool("someone-else", {"accelerator": "H100:8", "nodes": 1})
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 3})
    await cluster.wait_for(lambda: cluster.condition("train", "NodesSelected").get("reason") == "InsufficientNodes")
    assert cluster.members("train") == ["h100-3"]
    assert cluster.members("someone-else") == ["h100-4"], "another pool's node is never taken"
    message = cluster.condition("train", "NodesSelected")["message"]
    assert "1 cordoned" in message and "1 not Ready" in message


async def test_a_not_ready_member_is_kept_then_replaced_after_the_grace_period(
    cluster: Cluster, operator: Operator
) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2"])
    await cluster.set_condition("h100-1", "Ready", "False", "KubeletNotReady")
    # Reported at once, kept as a member; replaced only after the grace period (1 s in these tests).
    await cluster.wait_for(lambda: "not Ready" in cluster.condition("train", "Ready").get("message", ""))
    assert "h100-1" in cluster.members("train")
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2", "h100-3"], what="spare")
    assert cluster.status("train")["phase"] == "Degraded"
    # It comes back: the spare (the most recent member) leaves again.
    await cluster.set_condition("h100-1", "Ready", "True", "KubeletReady")
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-1", "h100-2"], what="spare released")


async def test_a_node_that_stops_matching_is_released(cluster: Cluster, operator: Operator) -> None:
    zone = "topology.kubernetes.io/zone"
    seed(
        cluster,
        node_body("h100-1", labels={zone: "a"}),
        node_body("h100-2", labels={zone: "a"}),
        node_body("h100-3", labels={zone: "b"}),
    )
    await operator.start()
    await cluster.apply_pool("zonal", {"accelerator": "H100", "nodes": 2, "nodeSelector": {zone: "a"}})
    await cluster.wait_for(lambda: cluster.members("zonal") == ["h100-1", "h100-2"])
    await cluster.client.patch("/api/v1/nodes/h100-2", {"metadata": {"labels": {zone: "b"}}})
    await cluster.wait_for(lambda: cluster.members("zonal") == ["h100-1"], what="release")
    assert cluster.taints("h100-2") == []
    await cluster.wait_for(lambda: cluster.condition("zonal", "NodesSelected").get("reason") == "InsufficientNodes")
