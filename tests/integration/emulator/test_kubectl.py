"""The emulated API server as kubectl and kopf meet it: discovery, server-side tables, OpenAPI, peering."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import RunningApiServer
from tests.conftest import require_tool

POOLS = "/apis/accelpool.io/v1alpha1/computepools"
PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"


async def kubectl(api: RunningApiServer, *args: str) -> str:
    done = await asyncio.to_thread(
        subprocess.run,
        [require_tool("kubectl"), "--server", api.url, *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


async def test_kubectl_get_nodes_prints_the_node_columns(api: RunningApiServer, client: KubeClient) -> None:
    ready = {"type": "Ready", "status": "True"}
    labels = {"node-role.kubernetes.io/worker": ""}
    info = {"kubeletVersion": "v1.35.0"}
    await client.create(
        "/api/v1/nodes",
        {"metadata": {"name": "gpu-1", "labels": labels}, "status": {"conditions": [ready], "nodeInfo": info}},
    )
    await client.create(
        "/api/v1/nodes",
        {
            "metadata": {"name": "gpu-2"},
            "spec": {"unschedulable": True},
            "status": {"conditions": [{**ready, "status": "False"}]},
        },
    )
    table = rows(await kubectl(api, "get", "nodes"))
    assert table[0] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert table[1][:3] == ["gpu-1", "Ready", "worker"] and table[1][4] == "v1.35.0"
    assert table[2][:3] == ["gpu-2", "NotReady,SchedulingDisabled", "<none>"]
    assert rows(await kubectl(api, "get", "nodes", "-o", "wide"))[0][5:] == [
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]


async def test_kubectl_get_cpool_prints_the_printer_columns(api: RunningApiServer, client: KubeClient) -> None:
    pool = {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool", "metadata": {"name": "train"}}
    await client.create(POOLS, {**pool, "spec": {"accelerator": "H100"}})
    status = {
        "accelerator": "H100-80GB",
        "nodes": {"summary": "2/2", "ready": 2},
        "capacity": {"gpus": 16},
        "phase": "Ready",
    }
    await client.patch(f"{POOLS}/train/status", {"status": status})
    table = rows(await kubectl(api, "get", "cpool"))
    assert table[0] == ["NAME", "ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE"]
    assert table[1][:6] == ["train", "H100-80GB", "2/2", "2", "16", "Ready"]


async def test_kubectl_explain_reads_the_crd_schema(api: RunningApiServer) -> None:
    explained = await kubectl(api, "explain", "cpool.spec")
    assert "KIND:       ComputePool" in explained and "VERSION:    v1alpha1" in explained
    assert "accelerator\t<Object> -required-" in explained and "nodes\t<integer>" in explained


async def test_kubectl_create_asks_for_strict_validation_of_every_kind(api: RunningApiServer, tmp_path: Path) -> None:
    manifest = tmp_path / "node.yaml"
    manifest.write_text("apiVersion: v1\nkind: Node\nmetadata:\n  name: gpu-3\n")
    assert (await kubectl(api, "create", "-f", str(manifest))).strip() == "node/gpu-3 created"
    assert any(s.path == "/api/v1/nodes" and s.method == "POST" for s in api.served)


async def test_kopf_peering_resources_are_served(api: RunningApiServer, client: KubeClient) -> None:
    """What kopf's peering does (kopf/_core/engines/peering.py): find the resource by discovery, watch
    it, and keep its identity alive in `.status` with merge patches (null when it leaves)."""
    discovered = await client.get("/apis/kopf.dev/v1")
    assert {(r["name"], r["namespaced"]) for r in discovered["resources"]} == {
        ("clusterkopfpeerings", False),
        ("kopfpeerings", True),
    }
    peering: dict[str, Any] = {
        "apiVersion": "kopf.dev/v1",
        "kind": "ClusterKopfPeering",
        "metadata": {"name": "accelpool"},
    }
    await client.create(PEERINGS, peering)
    alive = {"priority": 100, "lifetime": 60, "lastseen": "2026-11-22T00:00:00", "id": "leader@host"}
    await client.patch(f"{PEERINGS}/accelpool", {"status": {"leader@host": alive}})
    await client.patch(f"{PEERINGS}/accelpool", {"status": {"standby@host": {**alive, "priority": 0}}})
    assert set((await client.get(f"{PEERINGS}/accelpool"))["status"]) == {"leader@host", "standby@host"}
    await client.patch(f"{PEERINGS}/accelpool", {"status": {"leader@host": None}})
    assert set((await client.get(f"{PEERINGS}/accelpool"))["status"]) == {"standby@host"}
    assert await kubectl(api, "get", "clusterkopfpeerings", "-o", "name") == "clusterkopfpeering.kopf.dev/accelpool\n"
