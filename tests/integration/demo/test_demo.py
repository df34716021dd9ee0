"""The demo as a user meets it: every example pool Ready on the simulated cluster, real kubectl
against its API server, and an injected XID quarantining a node that a spare then replaces."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from accelpool.demo.run import POOLS_PATH, all_ready, example_pools, inject, load_fleet, simulated_cluster
from tests.conftest import require_tool

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]
ROOT = Path(__file__).resolve().parents[3]


async def eventually(check: Callable[[], Awaitable[bool]], within: float, what: str) -> None:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if await check():
            return
        await asyncio.sleep(0.25)
    raise AssertionError(f"not within {within} s: {what}")


def kubectl(kubectl_bin: str, server: str, *args: str) -> str:
    return subprocess.run(
        [kubectl_bin, "--server", server, *args], capture_output=True, text=True, check=True, timeout=30
    ).stdout


async def test_examples_become_ready_kubectl_sees_them_and_a_fault_quarantines() -> None:
    kubectl_bin = require_tool("kubectl")
    pools = example_pools((ROOT / "examples",))
    assert len(pools) == 7
    async with simulated_cluster(load_fleet(ROOT / "examples" / "demo-cluster.yaml")) as demo:
        for pool in pools:
            await demo.client.create(POOLS_PATH, pool)

        async def every_pool_ready() -> bool:
            return all_ready(await demo.client.list(POOLS_PATH))

        await eventually(every_pool_ready, 90, "every example pool Ready")

        table = await asyncio.to_thread(kubectl, kubectl_bin, demo.server, "get", "cpool")
        header, *rows = table.splitlines()
        assert header.split() == ["NAME", "ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE"]
        assert {row.split()[0] for row in rows} == {p["metadata"]["name"] for p in pools}
        training = next(row.split() for row in rows if row.startswith("llm-training"))
        assert training[1:6] == ["H100-80GB", "x8", "2/2", "2", "16"]
        labels = await asyncio.to_thread(kubectl, kubectl_bin, demo.server, "get", "nodes", "--show-labels")
        assert "accelpool.io/pool=llm-training" in labels
        assert "nvidia.com/mig.config=accelpool-h100-mixed" in labels

        training_pool: dict[str, Any] = await demo.client.get(f"{POOLS_PATH}/llm-training")
        victim = sorted(m["node"] for m in training_pool["status"]["members"])[0]
        await inject(demo.server, victim, "xid=79")

        async def quarantined_and_replaced() -> bool:
            node = await demo.client.get(f"/api/v1/nodes/{victim}")
            taints = {t["key"]: t.get("value") for t in node.get("spec", {}).get("taints") or []}
            status = (await demo.client.get(f"{POOLS_PATH}/llm-training")).get("status") or {}
            counts = status.get("nodes") or {}
            return (
                taints.get("accelpool.io/quarantined") == "XidError79"
                and counts.get("quarantined") == 1
                and counts.get("ready") == 2
            )

        await eventually(quarantined_and_replaced, 30, f"{victim} quarantined and replaced by a spare")
