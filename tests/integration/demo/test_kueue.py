"""Kueue in the demo: the example pool llm-training asks for it, so the demo cluster's ClusterQueue `research`
gets a ResourceFlavor `llm-training` with a nominal quota of the pool's serving GPUs, which drops by a
quarantined node's GPUs and comes back, and the demo's copies of Kueue's CRDs are the published ones."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool_demo import kueue as demo_kueue
from accelpool_demo.run import POOLS_PATH, example_pools, inject, load_fleet, simulated_cluster
from tests import kueue
from tests.integration.demo.waiting import HANG_GUARD, first_version

pytestmark = [pytest.mark.integration, HANG_GUARD]
ROOT = Path(__file__).resolve().parents[3]
GPU = "nvidia.com/gpu"


def test_the_demos_kueue_crds_are_the_published_ones() -> None:
    for name in demo_kueue.CRD_FILES:
        published = kueue.PUBLISHED_DIR / name
        if not published.exists():
            message = f"{published} is missing (the published Kueue CRD, see ../shared/crds/README.md)"
            if os.environ.get("REQUIRE_TOOLS") == "1":
                pytest.fail(message)
            pytest.skip(message)
        assert (demo_kueue.HERE / name).read_text() == published.read_text()
    for obj in yaml.safe_load_all((demo_kueue.HERE / "cluster-queue.yaml").read_text()):
        assert kueue.admit(obj["kind"], obj) == []


async def test_the_example_pools_quota_follows_quarantine() -> None:
    (training,) = [p for p in example_pools((ROOT / "examples",)) if p["metadata"]["name"] == "llm-training"]
    async with simulated_cluster(load_fleet()) as demo:
        await demo.client.create(POOLS_PATH, training)
        queue_path = f"{kueue.QUEUES}/{demo_kueue.CLUSTER_QUEUE}"

        async def until(wanted: dict[str, int], what: str, after: str | None = None) -> str:
            """Until a version of the queue (the one stored now, or one after `after`) holds `wanted` as
            llm-training's quota; its resourceVersion. Every version is seen, however briefly it lasts."""
            queue = await first_version(
                demo.client,
                kueue.QUEUES,
                demo_kueue.CLUSTER_QUEUE,
                lambda q: kueue_quota(q, "llm-training") == wanted,
                what,
                after=after,
            )
            return str(queue["metadata"]["resourceVersion"])

        full = await until({GPU: 16}, "the quota of two serving H100 nodes")
        flavor = await demo.client.get(f"{kueue.FLAVORS}/llm-training")
        assert flavor["spec"]["nodeLabels"] == {"accelpool.io/pool": "llm-training"}
        queue = await demo.client.get(queue_path)
        assert queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "default-flavor", "the user's group kept"

        pool = await demo.client.get(f"{POOLS_PATH}/llm-training")
        victim = sorted(m["node"] for m in pool["status"]["members"])[0]
        await inject(demo.server, victim, "xid=79")
        reduced = await until({GPU: 8}, f"{victim}'s GPUs out of the quota", after=full)
        await inject(demo.server, victim, "clear")
        await until({GPU: 16}, "the quota back at two serving nodes", after=reduced)


def kueue_quota(queue: dict[str, Any], flavor: str) -> dict[str, int] | None:
    for group in queue["spec"].get("resourceGroups") or []:
        for entry in group["flavors"]:
            if entry["name"] == flavor:
                return {r["name"]: int(r["nominalQuota"]) for r in entry["resources"]}
    return None
