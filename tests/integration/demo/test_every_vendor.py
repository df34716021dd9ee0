"""Every vendor's example pool in the running demo (examples/mi300x.yaml, trainium2.yaml, tpu-v5p.yaml, and
an H100 pool beside them): each becomes Ready on its agent's healthy report (the fake backend simulating
the vendor's devices as its backend reports them, each vendor's backend rendered into its DaemonSet), shows
per-device telemetry on its agent's /metrics, goes Degraded with its node quarantined when the vendor-neutral
`fatal` fault is injected (judged by the vendor's own rules: XID 79, amdsmi RING_HANG, a Neuron hardware
execution error, a TPU chip gone), and recovers after `clear` and the hold-down."""

from __future__ import annotations

import asyncio
import json
import re
import urllib.request
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool_api import conventions
from accelpool_demo import cluster
from accelpool_demo.run import NAMESPACE, POOLS_PATH, SimulatedCluster, inject, simulated_cluster
from tests.support.waiting import HANG_GUARD, SAFETY_SECONDS, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
FLEET = """
kind: DemoCluster
groups:
  - {prefix: h100, count: 1, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
  - {prefix: mi300x, count: 1, accelerator: MI300X, gpus: 8, labels: amd, instanceType: ND96isr_MI300X_v5, zone: eastus}
  - {prefix: trn2, count: 1, accelerator: Trainium2, gpus: 16, labels: karpenter, instanceType: trn2.48xlarge,
     zone: us-east-2a}
  - {prefix: tpu-v5p, count: 1, accelerator: TPU-v5p, gpus: 4, labels: gke-tpu, instanceType: ct5p-hightpu-4t,
     zone: us-east5-a, extraLabels: {cloud.google.com/gke-tpu-topology: 2x2x1}}
"""
H100_POOL = {"metadata": {"name": "h100"}, "spec": {"accelerator": "H100:8", "nodes": 1}}


@dataclass(frozen=True)
class VendorPool:
    pool: dict[str, Any]
    node: str
    vendor: str
    """The `vendor` label of its devices' series."""
    backend: str
    """The backend the operator renders into its agents' DaemonSet."""
    devices: int
    own_series: str
    """A per-device series only this vendor's devices report (a regular expression of its sample lines)."""
    own_count: int
    fault: str
    cause: str
    """The reason the vendor's rules give the `fatal` fault, named by the quarantine."""

    @property
    def name(self) -> str:
        return str(self.pool["metadata"]["name"])


def example(file: str) -> dict[str, Any]:
    pool: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    return pool


POOLS = (
    VendorPool(
        H100_POOL, "h100-1", "nvidia", "nvml", 8, r"accelpool_gpu_fabric_registered\{", 8, "3:fatal", "XidError79"
    ),
    VendorPool(
        example("mi300x.yaml"), "mi300x-1", "amd", "amdsmi", 8, r"accelpool_gpu_nvlink_links_active\{", 8,
        "3:fatal", "AmdEventRingHang",
    ),
    VendorPool(
        example("trainium2.yaml"), "trn2-1", "aws", "neuron", 16, r"accelpool_gpu_core_utilization_ratio\{", 64,
        "5:fatal", "NeuronHardwareError",
    ),
    VendorPool(
        example("tpu-v5p.yaml"), "tpu-v5p-1", "google", "tpu", 4, r"accelpool_gpu_tensorcore_utilization_ratio\{", 4,
        "1:fatal", "TpuChipMissing",
    ),
)  # fmt: skip


def with_short_hold_down(pool: dict[str, Any]) -> dict[str, Any]:
    spec = {**pool["spec"], "health": {**pool["spec"].get("health", {}), "holdDown": "10s"}}
    return {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool", "metadata": pool["metadata"], "spec": spec}


async def metrics_of(demo: SimulatedCluster, node: str) -> str:
    """The /metrics of NODE's running agent (the demo's kubelet runs one process per node)."""
    agent = demo.kubelet.agents[node]
    url = f"http://127.0.0.1:{agent.port}/metrics"

    def scrape() -> str:
        with urllib.request.urlopen(url, timeout=SAFETY_SECONDS) as response:
            text: str = response.read().decode()
            return text

    return await asyncio.to_thread(scrape)


def samples(text: str, series: str, vendor: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(series, line) and f'vendor="{vendor}"' in line]


async def test_every_vendors_example_pool_shows_telemetry_degrades_on_a_fatal_fault_and_recovers() -> None:
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo:
        for vendor_pool in POOLS:
            await demo.client.create(POOLS_PATH, with_short_hold_down(vendor_pool.pool))

        async def status(vendor_pool: VendorPool) -> dict[str, Any]:
            found: dict[str, Any] = (await demo.client.get(f"{POOLS_PATH}/{vendor_pool.name}")).get("status") or {}
            return found

        async def every(predicate: Callable[[VendorPool], Awaitable[bool]]) -> bool:
            return all([await predicate(vendor_pool) for vendor_pool in POOLS])

        async def ready(vendor_pool: VendorPool) -> bool:
            return (await status(vendor_pool)).get("phase") == "Ready"

        await eventually(lambda: every(ready), "every vendor's pool Ready")
        for vendor_pool in POOLS:
            daemonset = await demo.client.get(
                f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{conventions.agent_name(vendor_pool.name)}"
            )
            args = daemonset["spec"]["template"]["spec"]["containers"][0]["args"]
            assert args[args.index("--backend") + 1] == vendor_pool.backend, vendor_pool.name

        async def telemetry_shown(vendor_pool: VendorPool) -> bool:
            text = await metrics_of(demo, vendor_pool.node)
            used = samples(text, r"accelpool_gpu_memory_used_bytes\{", vendor_pool.vendor)
            busy = samples(text, r"accelpool_gpu_utilization_ratio\{", vendor_pool.vendor)
            own = samples(text, vendor_pool.own_series, vendor_pool.vendor)
            counts = (len(used), len(busy), len(own))
            return counts == (vendor_pool.devices, vendor_pool.devices, vendor_pool.own_count)

        await eventually(lambda: every(telemetry_shown), "every vendor's devices on its agent's /metrics")

        for vendor_pool in POOLS:
            await inject(demo.server, vendor_pool.node, vendor_pool.fault)

        async def quarantine(vendor_pool: VendorPool) -> dict[str, Any] | None:
            node = await demo.client.get(f"/api/v1/nodes/{vendor_pool.node}")
            annotation = (node["metadata"].get("annotations") or {}).get(conventions.REMEDIATION_ANNOTATION)
            taints = {t["key"] for t in node.get("spec", {}).get("taints") or []}
            fenced = conventions.QUARANTINE_TAINT_KEY in taints or bool(node.get("spec", {}).get("unschedulable"))
            return json.loads(annotation) if annotation and fenced else None

        async def degraded_and_quarantined(vendor_pool: VendorPool) -> bool:
            found = await quarantine(vendor_pool)
            return (await status(vendor_pool)).get("phase") == "Degraded" and found is not None

        await eventually(lambda: every(degraded_and_quarantined), "every vendor's pool Degraded, node quarantined")
        for vendor_pool in POOLS:
            found = await quarantine(vendor_pool)
            assert found is not None and found["cause"] == vendor_pool.cause, (vendor_pool.name, found)

        for vendor_pool in POOLS:
            await inject(demo.server, vendor_pool.node, "clear")

        async def recovered(vendor_pool: VendorPool) -> bool:
            return await ready(vendor_pool) and await quarantine(vendor_pool) is None

        await eventually(lambda: every(recovered), "every vendor's pool Ready again, its node released")
