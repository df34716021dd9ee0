"""`accelpool check` end to end on the simulated cluster: the real operator copies a pool's request to its
members, the real agents (fake backend, one process per node) run a full cycle and answer it, and the
command prints each node's verdict with its exit code."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from accelpool import cli
from accelpool_api import conventions
from accelpool_core.protocol import HealthReport
from accelpool_demo import cluster
from accelpool_demo.run import POOLS_PATH, inject, simulated_cluster
from tests.support.waiting import HANG_GUARD, SAFETY_SECONDS, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]

FLEET = """
kind: DemoCluster
groups:
  - {prefix: h100, count: 2, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
"""
POOL = {
    "apiVersion": "accelpool.io/v1alpha1",
    "kind": "ComputePool",
    "metadata": {"name": "training"},
    "spec": {"accelerator": "H100:8", "nodes": 2},
}


async def accelpool_check(capsys: pytest.CaptureFixture[str], server: str, *args: str) -> tuple[int, str, str]:
    # The command's own deadline only as a hang guard: under load the agents answer as late as they do.
    timeout = f"{SAFETY_SECONDS:g}s"
    code = await asyncio.to_thread(cli.main, ["check", "--server", server, "--timeout", timeout, *args])
    out, err = capsys.readouterr()
    return code, out, err


async def test_a_node_and_a_pool_are_checked_and_their_verdicts_shown(capsys: pytest.CaptureFixture[str]) -> None:
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo:
        await demo.client.create(POOLS_PATH, POOL)

        async def ready() -> bool:
            status: dict[str, Any] = (await demo.client.get(f"{POOLS_PATH}/training")).get("status") or {}
            return status.get("phase") == "Ready"

        await eventually(ready, "the pool Ready")

        code, out, err = await accelpool_check(capsys, demo.server, "h100-1")
        assert code == 0, err
        assert out.splitlines()[1].split()[:4] == ["h100-1", "Healthy", "AllChecksPassed", "none"]
        node = await demo.client.get("/api/v1/nodes/h100-1")
        token = node["metadata"]["annotations"][conventions.CHECK_REQUEST_ANNOTATION]
        answer = HealthReport.from_annotation(node["metadata"]["annotations"][conventions.HEALTH_ANNOTATION])
        assert answer.check_request == token and "h100-1: Healthy (AllChecksPassed) [1/1]" in err

        await inject(demo.server, "h100-2", "3:xid=79")  # its agent restarts with GPU 3 off the bus
        code, out, err = await accelpool_check(capsys, demo.server, "--pool", "training", "-o", "json")
        document = json.loads(out)
        assert code == 1, err
        pool = await demo.client.get(f"{POOLS_PATH}/training")
        assert document["token"] == pool["metadata"]["annotations"][conventions.CHECK_REQUEST_ANNOTATION]
        verdicts = {n["node"]: (n["answered"], n["status"], n["reason"]) for n in document["nodes"]}
        assert verdicts == {"h100-1": (True, "Healthy", "AllChecksPassed"), "h100-2": (True, "Unhealthy", "XidError79")}
        for name in ("h100-1", "h100-2"):  # the operator copied the pool's token to both members
            node = await demo.client.get(f"/api/v1/nodes/{name}")
            assert node["metadata"]["annotations"][conventions.CHECK_REQUEST_ANNOTATION] == document["token"]


VENDOR_FLEET = """
kind: DemoCluster
groups:
  - {prefix: mi300x, count: 1, accelerator: MI300X, gpus: 8, labels: amd, instanceType: ND96isr_MI300X_v5, zone: eastus}
  - {prefix: trn2, count: 1, accelerator: Trainium2, gpus: 16, labels: karpenter, instanceType: trn2.48xlarge,
     zone: us-east-2a}
"""


async def test_a_deep_check_of_other_vendors_pools_names_their_vendors_fatal_errors(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """`accelpool check` on an MI300X and a Trainium2 node whose agents carry the `fatal` fault: each verdict
    is its vendor's reason (amdsmi's RING_HANG, a Neuron hardware execution error) and recommended action."""
    async with simulated_cluster(cluster.nodes(cluster.parse(VENDOR_FLEET))) as demo:
        for name, accelerator in (("amd", "MI300X:8"), ("trn", "Trainium2:16")):
            pool = {**POOL, "metadata": {"name": name}, "spec": {"accelerator": accelerator, "nodes": 1}}
            await demo.client.create(POOLS_PATH, pool)

        async def ready() -> bool:
            for name in ("amd", "trn"):
                status: dict[str, Any] = (await demo.client.get(f"{POOLS_PATH}/{name}")).get("status") or {}
                if status.get("phase") != "Ready":
                    return False
            return True

        await eventually(ready, "both pools Ready")
        faults = {"mi300x-1": "3:fatal", "trn2-1": "5:fatal"}
        for node, fault in faults.items():
            await inject(demo.server, node, fault)

        async def restarted_with_their_faults() -> bool:
            agents = {node: demo.kubelet.agents.get(node) for node in faults}
            return all(
                a is not None and a.fault == faults[n] and a.process.returncode is None for n, a in agents.items()
            )

        await eventually(restarted_with_their_faults, "both agents restarted with their faults")
        code, out, err = await accelpool_check(capsys, demo.server, "mi300x-1", "trn2-1", "-o", "json")
        assert code == 1, err
        verdicts = {n["node"]: (n["answered"], n["status"], n["reason"], n["action"]) for n in json.loads(out)["nodes"]}
        assert verdicts == {
            "mi300x-1": (True, "Unhealthy", "AmdEventRingHang", "reset-gpu"),
            "trn2-1": (True, "Unhealthy", "NeuronHardwareError", "service-required"),
        }
