"""Every vendor's pool in the running demo: an MI300X, a Trainium2 and a TPU v5p pool become Ready on
their agents' healthy reports (the fake backend simulating each vendor's devices, with each vendor's
backend rendered into its DaemonSet), go Degraded with the faulty member quarantined on an injected
fault, and recover after `clear` and the hold-down."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool import conventions
from accelpool_demo import cluster
from accelpool_demo.run import NAMESPACE, POOLS_PATH, inject, simulated_cluster
from tests.integration.demo.test_demo import eventually

pytestmark = [pytest.mark.integration, pytest.mark.timeout(200)]

FLEET = """
kind: DemoCluster
groups:
  - {prefix: mi300x, count: 1, accelerator: MI300X, gpus: 8, labels: amd, instanceType: ND96isr_MI300X_v5, zone: eastus}
  - {prefix: trn2, count: 1, accelerator: Trainium2, gpus: 16, labels: karpenter, instanceType: trn2.48xlarge,
     zone: us-east-2a}
  - {prefix: tpu-v5p, count: 1, accelerator: TPU-v5p, gpus: 4, labels: gke-tpu, instanceType: ct5p-hightpu-4t,
     zone: us-east5-a, extraLabels: {cloud.google.com/gke-tpu-topology: 2x2x1}}
"""
VENDOR_POOLS = {  # pool → (accelerator, its only node, a fault, the backend rendered)
    "amd": ("MI300X:8", "mi300x-1", "3:ecc-dbe", "amdsmi"),
    "trn": ("Trainium2:16", "trn2-1", "5:ecc-dbe", "neuron"),
    "tpu": ("TPU-v5p:4", "tpu-v5p-1", "1:lost", "tpu"),
}


def compute_pool(name: str, accelerator: str) -> dict[str, Any]:
    return {
        "apiVersion": "accelpool.io/v1alpha1",
        "kind": "ComputePool",
        "metadata": {"name": name},
        "spec": {"accelerator": accelerator, "nodes": 1, "health": {"holdDown": "3s"}},
    }


async def test_every_vendors_pool_degrades_on_a_fault_and_recovers() -> None:
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo:
        for name, (accelerator, *_) in VENDOR_POOLS.items():
            await demo.client.create(POOLS_PATH, compute_pool(name, accelerator))

        async def phases() -> dict[str, str]:
            return {
                name: ((await demo.client.get(f"{POOLS_PATH}/{name}")).get("status") or {}).get("phase", "")
                for name in VENDOR_POOLS
            }

        async def taint(node: str) -> str | None:
            found = await demo.client.get(f"/api/v1/nodes/{node}")
            taints = {t["key"]: t.get("value") for t in found.get("spec", {}).get("taints") or []}
            return taints.get(conventions.QUARANTINE_TAINT_KEY)

        async def all_in(phase: str) -> bool:
            return set((await phases()).values()) == {phase}

        await eventually(lambda: all_in("Ready"), 90, "every vendor's pool Ready")
        for name, (*_, backend) in VENDOR_POOLS.items():
            daemonset = await demo.client.get(
                f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{conventions.agent_name(name)}"
            )
            args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
            assert args[args.index("--backend") + 1] == backend, name

        for _, node, fault, _ in VENDOR_POOLS.values():
            await inject(demo.server, node, fault)

        async def degraded_and_quarantined() -> bool:
            quarantined = [await taint(node) for _, node, _, _ in VENDOR_POOLS.values()]
            return await all_in("Degraded") and all(quarantined)

        await eventually(degraded_and_quarantined, 60, "every vendor's pool Degraded, its node quarantined")

        for _, node, _, _ in VENDOR_POOLS.values():
            await inject(demo.server, node, "clear")

        async def recovered() -> bool:
            released = [await taint(node) is None for _, node, _, _ in VENDOR_POOLS.values()]
            return await all_in("Ready") and all(released)

        await eventually(recovered, 90, "every vendor's pool Ready again, its node released")
