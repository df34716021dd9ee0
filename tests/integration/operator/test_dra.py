"""allocation DRA, with the operator running for real against the emulated API server (Kubernetes 1.37, and 1.36
where DeviceTaintRule is not served): an XID on one GPU of an 8-GPU member becomes one DeviceTaintRule on that
device, the node keeps serving, the pool's capacity drops by one GPU, and the rule goes after the hold-down."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from accelpool_api import conventions
from tests.support.builders import gpu_uuid, node_body, resource_slice
from tests.support.environment import require_shared

from .conftest import Cluster, Operator, seed

RULES = "/apis/resource.k8s.io/v1/devicetaintrules"
SPEC = {"accelerator": "H100:8", "nodes": 2, "allocation": "DRA", "health": {"holdDown": "10s"}}
RULE = "accelpool-h100-1-gpu-3"


def rules(cluster: Cluster) -> dict[str, dict[str, Any]]:
    return {r["metadata"]["name"]: r for r in cluster.objects("resource.k8s.io/v1/devicetaintrules")}


async def dra_pool(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in (1, 2)))
    for i in (1, 2):
        await cluster.client.create("/apis/resource.k8s.io/v1/resourceslices", resource_slice(f"h100-{i}"))
    await operator.start()
    await cluster.apply_pool("train", SPEC)
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2, what="members")
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="Ready")


async def test_one_bad_gpu_is_quarantined_alone_and_released_after_the_hold_down(
    cluster: Cluster, operator: Operator
) -> None:
    await dra_pool(cluster, operator)
    labels = cluster.labels("h100-1")
    assert labels[conventions.DEVICE_PLUGIN_DEPLOY_LABEL] == "false"
    assert conventions.DEVICE_PLUGIN_CONFIG_LABEL not in labels
    assert cluster.status("train")["capacity"]["gpus"] == 16
    await cluster.report_health(
        "h100-1", healthy=False, reason="XidError79", bad_gpus=(3,), uuids={3: gpu_uuid("h100-1", 3)}
    )
    await cluster.wait_for(lambda: RULE in rules(cluster), what="DeviceTaintRule")
    assert list(rules(cluster)) == [RULE]
    spec = rules(cluster)[RULE]["spec"]
    assert spec["taint"].pop("timeAdded")  # the API server's
    assert spec == {
        "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "h100-1", "device": "gpu-3"},
        "taint": {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"},
    }
    await cluster.wait_for(lambda: cluster.status("train")["capacity"]["gpus"] == 15, what="capacity 15")
    status = cluster.status("train")
    assert not [t for t in cluster.taints("h100-1") if t["key"] == conventions.QUARANTINE_TAINT_KEY]
    assert status["quarantine"]["scope"] == "GPU"
    assert [d["device"] for d in status["dra"]["quarantinedDevices"]] == ["gpu-3"]
    assert status["capacity"]["quarantinedGPUs"] == 1
    assert cluster.members("train") == ["h100-1", "h100-2"]  # no spare needed: the node still serves seven
    await cluster.report_health("h100-1", healthy=True)
    await cluster.wait_for(lambda: not rules(cluster), what="the rule lifted after the hold-down")
    await cluster.wait_for(lambda: cluster.status("train")["capacity"]["gpus"] == 16, what="capacity 16")


@pytest.mark.parametrize("cluster", ["1.36"], indirect=True)
async def test_where_device_taint_rules_are_not_served_the_node_is_quarantined_and_the_status_says_why(
    cluster: Cluster, operator: Operator
) -> None:
    await dra_pool(cluster, operator)
    await cluster.report_health(
        "h100-1", healthy=False, reason="XidError79", bad_gpus=(3,), uuids={3: gpu_uuid("h100-1", 3)}
    )
    quarantined = [conventions.QUARANTINE_TAINT_KEY]
    await cluster.wait_for(
        lambda: (
            [t["key"] for t in cluster.taints("h100-1") if t["key"] == conventions.QUARANTINE_TAINT_KEY] == quarantined
        ),
        what="node quarantine",
    )
    await cluster.wait_for(lambda: cluster.status("train").get("quarantine", {}).get("reason"), what="scope")
    scope = cluster.status("train")["quarantine"]
    assert (scope["scope"], scope["reason"]) == ("Node", "DeviceTaintRuleNotServed")


async def test_a_pool_that_asks_gets_its_compute_domain_with_nvidia_s_crd_installed(
    cluster: Cluster, operator: Operator
) -> None:
    crd = yaml.safe_load(require_shared("crds/resource.nvidia.com_computedomains.yaml").read_text())
    await cluster.client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd)
    seed(cluster, *(node_body(f"h100-{i}") for i in (1, 2)))
    await operator.start()
    spec = {**SPEC, "nvlink": {"sameClique": False, "computeDomain": {"namespace": "team-a"}}}
    await cluster.apply_pool("train", spec)
    domains = "resource.nvidia.com/v1beta1/computedomains"
    await cluster.wait_for(lambda: cluster.objects(domains), what="ComputeDomain")
    [domain] = cluster.objects(domains)
    assert (domain["metadata"]["namespace"], domain["metadata"]["name"]) == ("team-a", "train")
    assert domain["spec"]["channel"]["resourceClaimTemplate"]["name"] == "train-channel"
    assert domain["metadata"]["ownerReferences"][0]["name"] == "train"
    await cluster.wait_for(lambda: (cluster.status("train").get("dra") or {}).get("computeDomain"), what="status")
    assert cluster.status("train")["dra"]["computeDomain"] == {"name": "train", "namespace": "team-a"}
