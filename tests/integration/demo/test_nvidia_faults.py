"""NVIDIA's simulated components in the running demo: `accelpool demo inject NODE mig-broken` leaves a
layout that never appears, and `strategy-override=...` switches every node's device plugin and GFD."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_api import conventions
from accelpool_demo import cluster, nvidia
from accelpool_demo.run import POOLS_PATH, inject, simulated_cluster
from tests.support.waiting import HANG_GUARD, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]

FLEET = """
kind: DemoCluster
groups:
  - {prefix: a100, count: 2, accelerator: A100-40GB, gpus: 8, labels: gfd, instanceType: p4d.24xlarge}
"""
POOL = {
    "apiVersion": "accelpool.io/v1alpha1",
    "kind": "ComputePool",
    "metadata": {"name": "slices"},
    "spec": {"accelerator": "A100-40GB", "nodes": 2, "mig": {"profile": "1g.5gb"}},
}


async def test_a_broken_mig_manager_and_a_cluster_wide_strategy() -> None:
    fast = nvidia.Installation(apply_seconds=0.5)
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET)), installation=fast) as demo:
        said = await inject(demo.server, "a100-1", "mig-broken")
        assert "creates nothing" in said
        await demo.client.create(POOLS_PATH, POOL)
        nodes: dict[str, dict[str, Any]] = {}

        async def configured() -> bool:
            nodes.update({n["metadata"]["name"]: n for n in await demo.client.list("/api/v1/nodes")})
            return all(
                n["metadata"]["labels"].get(conventions.MIG_CONFIG_STATE_LABEL) == "success"
                and n["metadata"]["labels"].get(conventions.GFD_MIG_STRATEGY_LABEL) == "single"
                for n in nodes.values()
            )

        await eventually(configured, "both nodes report success under the single strategy")
        broken, good = nodes["a100-1"], nodes["a100-2"]
        assert broken["metadata"]["labels"][conventions.GFD_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-40GB-MIG-INVALID"
        assert good["metadata"]["labels"][conventions.GFD_PRODUCT_LABEL] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"

        async def advertised() -> bool:
            """The device plugin writes allocatable apart from GFD's labels (two writers): wait for it too."""
            found = {n["metadata"]["name"]: n for n in await demo.client.list("/api/v1/nodes")}
            broken_gpus = found["a100-1"]["status"]["allocatable"].get("nvidia.com/gpu")
            good_gpus = found["a100-2"]["status"]["allocatable"].get("nvidia.com/gpu")
            return bool(broken_gpus == "0" and good_gpus == "56")  # the plugin fails on an empty MIG GPU

        await eventually(advertised, "the plugin advertises 0 GPUs on the broken node and 56 slices on the good one")

        said = await inject(demo.server, "a100-1", "strategy-override=mixed")
        assert "cluster-wide" in said

        async def mixed() -> bool:
            node = await demo.client.get("/api/v1/nodes/a100-2")
            return dict(node["status"]["allocatable"]).get("nvidia.com/mig-1g.5gb") == "56"

        await eventually(mixed, "a100-2 advertises nvidia.com/mig-1g.5gb under the override")
        labels = (await demo.client.get("/api/v1/nodes/a100-2"))["metadata"]["labels"]
        assert labels[conventions.GFD_MIG_STRATEGY_LABEL] == "mixed"
        assert labels["nvidia.com/mig-1g.5gb.count"] == "56"
        events = await demo.client.list("/api/v1/namespaces/default/events")
        assert any(e["involvedObject"]["name"] == "a100-2" for e in events), "what NVIDIA's components did is told"
