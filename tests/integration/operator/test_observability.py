"""The operator's /metrics and liveness endpoint, and Karpenter pools (NodePool rendered, owned, removed)."""

from __future__ import annotations

import aiohttp
import kmock

from accelpool_api import conventions
from accelpool_demo.apiserver import VERBS
from tests.support.builders import node_body

from .conftest import Cluster, Operator, configs_of, seed

NODEPOOLS = "karpenter.sh/v1/nodepools"


async def test_metrics_and_liveness(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 3)))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 3})
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Degraded")
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("nodes", {}).get("ready") == 2)
    text = await operator.metrics()
    for family, kind in (
        ("accelpool_pools", "gauge"),
        ("accelpool_pool_phase", "gauge"),
        ("accelpool_pool_nodes", "gauge"),
        ("accelpool_pool_gpus", "gauge"),
        ("accelpool_pool_unavailable_gpus", "gauge"),
        ("accelpool_pool_driver_versions", "gauge"),
        ("accelpool_pool_measured_tflops", "gauge"),
        ("accelpool_pool_expected_tflops", "gauge"),
        ("accelpool_pool_circuit_breaker_open", "gauge"),
        ("accelpool_reconcile_total", "counter"),
        ("accelpool_reconcile_errors_total", "counter"),
        ("accelpool_reconcile_duration_seconds", "histogram"),
        ("accelpool_reconcile_stage_seconds_total", "counter"),
        ("accelpool_reconcile_last_success_timestamp_seconds", "gauge"),
        ("accelpool_remediations_total", "counter"),
        ("accelpool_api_writes_total", "counter"),
    ):
        assert f"# TYPE {family} {kind}" in text, family
    assert await operator.metric('accelpool_pools{phase="Degraded"}') == 1
    assert await operator.metric('accelpool_pool_phase{phase="Degraded",pool="train"}') == 1
    assert await operator.metric('accelpool_pool_nodes{pool="train",state="desired"}') == 3
    assert await operator.metric('accelpool_pool_nodes{pool="train",state="members"}') == 2
    assert await operator.metric('accelpool_pool_nodes{pool="train",state="ready"}') == 2
    assert await operator.metric('accelpool_pool_gpus{pool="train"}') == 16
    assert await operator.metric('accelpool_pool_expected_tflops{pool="train"}') == 989 * 16
    assert await operator.metric('accelpool_pool_measured_tflops{pool="train"}') == 1300
    assert await operator.metric('accelpool_pool_nodes{pool="train",state="burn_in"}') == 0
    assert await operator.metric('accelpool_pool_unavailable_gpus{pool="train",reason="burn_in"}') == 0
    # Per node: the write that makes it a member (burn-in taint on), the one that lifts burn-in.
    assert await operator.metric('accelpool_api_writes_total{resource="nodes",verb="patch"}') == 4
    assert await operator.metric("accelpool_reconcile_duration_seconds_count") >= 1

    async with (
        aiohttp.ClientSession() as session,
        session.get(f"http://127.0.0.1:{operator.liveness_port}/healthz") as response,
    ):
        assert response.status == 200
        assert "reconciler" in await response.text()


async def test_karpenter_pool_gets_an_owned_nodepool(cluster: Cluster, operator: Operator) -> None:
    cluster.emulator.resources[NODEPOOLS] = kmock.ResourceInfo(kind="NodePool", namespaced=False, verbs=VERBS)
    seed(cluster, node_body("static-h200", "H200-141GB"))
    await operator.start()
    await cluster.apply_pool(
        "burst",
        {
            "accelerator": "H200:8",
            "nodes": 1,
            "maxNodes": 4,
            "provisioner": {"type": "karpenter", "nodeClass": "gpu"},
        },
    )
    await cluster.wait_for(lambda: cluster._get(NODEPOOLS, None, "accelpool-burst"), what="NodePool")
    nodepool = cluster._get(NODEPOOLS, None, "accelpool-burst")
    assert nodepool is not None
    uid = (cluster.pool("burst") or {})["metadata"]["uid"]
    assert nodepool["metadata"]["ownerReferences"][0]["uid"] == uid
    template = nodepool["spec"]["template"]
    # Only the pool label: the NVIDIA config labels are named by content, and a template that changes with
    # the layout is drift (Karpenter would replace every node at each edit). accelpool labels the nodes.
    assert template["metadata"]["labels"] == {conventions.POOL_LABEL: "burst"}
    assert template["spec"]["nodeClassRef"] == {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass", "name": "gpu"}
    assert template["spec"]["taints"] == [{"key": "accelpool.io/pool", "value": "burst", "effect": "NoSchedule"}]
    assert nodepool["spec"]["limits"] == {"nvidia.com/gpu": "32"}
    await cluster.wait_for(lambda: cluster.status("burst").get("phase") == "Provisioning")
    assert cluster.members("burst") == [], "a karpenter pool does not claim static nodes"

    # Karpenter launches a node from the NodePool's template.
    launched = node_body(
        "ip-10-0-0-1",
        "H200-141GB",
        labels={**template["metadata"]["labels"], "karpenter.sh/nodepool": "accelpool-burst"},
    )
    launched["spec"]["taints"] = template["spec"]["taints"]
    await cluster.add_node(launched)
    await cluster.wait_for(lambda: cluster.status("burst").get("nodes", {}).get("members") == 1)
    whole = configs_of("burst", {"accelerator": "H200:8"})
    await cluster.wait_for(
        lambda: cluster.labels("ip-10-0-0-1").get(conventions.DEVICE_PLUGIN_CONFIG_LABEL) == whole.device_plugin,
        what="accelpool labels the node Karpenter launched",
    )
    assert cluster.labels("ip-10-0-0-1")[conventions.MIG_CONFIG_LABEL] == "all-disabled", "H200 nodes: MIG off"
    await cluster.settle_members("burst")
    await cluster.wait_for(lambda: cluster.status("burst").get("phase") == "Ready")

    # A layout edit: the node is relabelled in place, the NodePool (which Karpenter hashes) stays as it was.
    written = nodepool["metadata"]["annotations"][conventions.SPEC_HASH_ANNOTATION]
    await cluster.patch_pool("burst", {"sharing": {"timeSlicing": {"replicas": 2}}})
    shared = configs_of("burst", {"accelerator": "H200:8", "sharing": {"timeSlicing": {"replicas": 2}}})
    await cluster.wait_for(
        lambda: cluster.labels("ip-10-0-0-1").get(conventions.DEVICE_PLUGIN_CONFIG_LABEL) == shared.device_plugin,
        what="the member relabelled with the edited config",
    )
    await cluster.wait_for(lambda: cluster.status("burst").get("observedGeneration") == 2)
    after = cluster._get(NODEPOOLS, None, "accelpool-burst")
    assert after is not None and after["spec"] == nodepool["spec"]
    assert after["metadata"]["annotations"][conventions.SPEC_HASH_ANNOTATION] == written

    await cluster.delete_pool("burst")
    await cluster.wait_for(lambda: cluster.pool("burst") is None)
    assert cluster._get(NODEPOOLS, None, "accelpool-burst") is None
    assert conventions.POOL_LABEL not in cluster.labels("ip-10-0-0-1")


async def test_karpenter_pool_without_karpenter_says_so(cluster: Cluster, operator: Operator) -> None:
    await operator.start()
    await cluster.apply_pool(
        "burst", {"accelerator": "H200:8", "nodes": 1, "maxNodes": 2, "provisioner": {"type": "karpenter"}}
    )
    await cluster.wait_for(lambda: cluster.condition("burst", "NodesSelected").get("reason") == "KarpenterNotInstalled")
