"""The emulated API server as kubectl and kopf meet it: discovery, server-side tables, OpenAPI, peering."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path
from typing import Any

from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import RunningApiServer
from tests.support.environment import kubectl as support_kubectl
from tests.support.environment import require_tool
from tests.support.waiting import eventually

from .conftest import NAMESPACE
from .workloads import APPS, BUDGETS, PODS, budget, controlled_by, pod, start

POOLS = "/apis/accelpool.io/v1alpha1/computepools"
PEERINGS = "/apis/kopf.dev/v1/clusterkopfpeerings"
POOL = {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool"}


async def kubectl(api: RunningApiServer, *args: str) -> str:
    return await support_kubectl(api.url, *args)


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


async def test_kubectl_get_cpool_wide_adds_the_reason_the_quarantined_and_the_measured_tflops(
    api: RunningApiServer, client: KubeClient
) -> None:
    """The CRD's priority-1 printer columns: only with `-o wide`, the Ready condition's reason found by a
    JSONPath filter."""
    await client.create(POOLS, {**POOL, "metadata": {"name": "train"}, "spec": {"accelerator": "H100"}})
    conditions = [
        {"type": "Healthy", "status": "False", "reason": "NodesQuarantined"},
        {"type": "Ready", "status": "False", "reason": "Degraded"},
    ]
    status = {
        "accelerator": "H100-80GB",
        "nodes": {"summary": "3/2", "ready": 2, "quarantined": 1},
        "capacity": {"gpus": 16, "measuredTFLOPS": 12700.5},
        "phase": "Degraded",
        "conditions": conditions,
    }
    await client.patch(f"{POOLS}/train/status", {"status": status})
    assert rows(await kubectl(api, "get", "cpool"))[0][-1] == "AGE"
    table = rows(await kubectl(api, "get", "cpool", "-o", "wide"))
    assert table[0] == [
        "NAME", "ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE", "REASON", "QUARANTINED", "TFLOPS"
    ]  # fmt: skip
    assert table[1][:6] == ["train", "H100-80GB", "3/2", "2", "16", "Degraded"]
    assert table[1][-3:] == ["Degraded", "1", "12700.5"]


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


async def drain(api: RunningApiServer, node: str, *args: str) -> subprocess.CompletedProcess[str]:
    return await asyncio.to_thread(
        subprocess.run,
        [require_tool("kubectl"), "--server", api.url, "drain", node, "--ignore-daemonsets", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


async def test_kubectl_drain_evicts_through_the_eviction_api_and_honours_the_budget(
    api: RunningApiServer, client: KubeClient
) -> None:
    """kubectl's own drain (k8s.io/kubectl/pkg/drain): cordon, the node's pods by field selector, DaemonSet
    and mirror pods left, the others evicted (found by discovery: pods/eviction), waiting until gone."""
    await client.create("/api/v1/nodes", {"metadata": {"name": "n1"}})
    daemonset = await client.create(f"{APPS}/daemonsets", {"metadata": {"name": "agent"}, "spec": {}})
    replicas = await client.create(f"{APPS}/replicasets", {"metadata": {"name": "web"}, "spec": {"replicas": 2}})
    await start(client, pod("agent-n1", owner=controlled_by(daemonset), app="agent"))
    mirror = pod("static-n1", app="static")
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "c0ffee"}
    await start(client, mirror)
    for name in ("web-a", "web-b"):
        await start(client, pod(name, owner=controlled_by(replicas)))
    await client.create(BUDGETS, budget("web", minAvailable=2))

    blocked = await drain(api, "n1", "--timeout=1s")
    assert blocked.returncode != 0
    assert "Cannot evict pod as it would violate the pod's disruption budget." in blocked.stderr
    assert (await client.get("/api/v1/nodes/n1"))["spec"]["unschedulable"] is True, "cordoned first"
    assert {p["metadata"]["name"] for p in await client.list(PODS)} == {"agent-n1", "static-n1", "web-a", "web-b"}

    table = rows(await kubectl(api, "get", "pdb", "-n", NAMESPACE))
    assert table[0] == ["NAME", "MIN", "AVAILABLE", "MAX", "UNAVAILABLE", "ALLOWED", "DISRUPTIONS", "AGE"]
    assert table[1][:4] == ["web", "2", "N/A", "0"]
    await client.patch(f"{BUDGETS}/web", {"spec": {"minAvailable": 0}})
    drained = await drain(api, "n1", "--timeout=30s")
    assert drained.returncode == 0, drained.stderr
    assert "node/n1 drained" in drained.stdout
    assert {p["metadata"]["name"] for p in await client.list(PODS)} == {"agent-n1", "static-n1"}
    evictions = [s for s in api.served if s.subresource == "eviction"]
    assert {(s.name, s.status) for s in evictions if s.status == 201} == {("web-a", 201), ("web-b", 201)}


async def test_kubectl_get_events_prints_the_event_columns(api: RunningApiServer, client: KubeClient) -> None:
    """`kubectl get events` as on a real server: what happened to which object, not just names (printEvent)."""
    event = {
        "metadata": {"name": "n1.quarantined", "namespace": "default"},
        "involvedObject": {"kind": "Node", "name": "n1"},
        "type": "Warning",
        "reason": "NodeQuarantined",
        "message": "n1: XID 79 on GPU 0; tainted",
        "count": 3,
        "firstTimestamp": "2026-11-01T00:00:00Z",
        "lastTimestamp": "2026-11-01T00:05:00Z",
        "source": {"component": "accelpool"},
    }
    await client.create("/api/v1/namespaces/default/events", event)
    table = (await kubectl(api, "get", "events", "-n", "default")).strip().splitlines()
    assert table[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    cells = table[1].split()
    assert cells[1:4] == ["(x3", "over", cells[3]] and cells[3].endswith(")"), "a repeated Event says so"
    assert cells[4:7] == ["Warning", "NodeQuarantined", "node/n1"]
    assert table[1].endswith("n1: XID 79 on GPU 0; tainted")
    wide = (await kubectl(api, "get", "events", "-n", "default", "-o", "wide")).splitlines()[0].split()
    assert wide[-4:] == ["FIRST", "SEEN", "COUNT", "NAME"]


class _Watching:
    """`kubectl ... -w` running: its output read line by line as it prints them, stopped on exit."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process

    async def line(self) -> str:
        assert self.process.stdout is not None
        async with asyncio.timeout(60):  # a guard against a kubectl that prints nothing more, not a timing
            text = (await self.process.stdout.readline()).decode()
        assert text, f"kubectl ended: {(await self.stop()).decode()}"
        return text.rstrip("\n")

    async def finish(self) -> bytes:
        """kubectl's stderr once it exits on its own."""
        assert self.process.stderr is not None
        async with asyncio.timeout(60):  # a guard, not a timing
            errors = await self.process.stderr.read()
            await self.process.wait()
        return errors

    async def stop(self) -> bytes:
        if self.process.returncode is None:
            self.process.terminate()
        assert self.process.stderr is not None
        errors = await self.process.stderr.read()
        await self.process.wait()
        return errors


async def watching(api: RunningApiServer, *args: str) -> _Watching:
    process = await asyncio.create_subprocess_exec(
        require_tool("kubectl"),
        "--server",
        api.url,
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    return _Watching(process)


async def test_kubectl_get_watch_prints_every_change_in_the_same_columns(
    api: RunningApiServer, client: KubeClient
) -> None:
    """`kubectl get -w` asks for Tables on the watch too: each event a one-row Table, headers only in the first
    (response.go `watchEmbeddedEncoder`), so the changes print as rows under the list's own header."""
    await client.create(POOLS, {**POOL, "metadata": {"name": "train"}, "spec": {"accelerator": "H100"}})
    ready = {"type": "Ready", "status": "True"}
    await client.create("/api/v1/nodes", {"metadata": {"name": "gpu-1"}, "status": {"conditions": [ready]}})
    pools = await watching(api, "get", "cpool", "-w")
    nodes = await watching(api, "get", "nodes", "-w")
    try:
        assert (await pools.line()).split() == ["NAME", "ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE"]
        assert (await pools.line()).split()[0] == "train"
        assert (await nodes.line()).split() == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
        assert (await nodes.line()).split()[:2] == ["gpu-1", "Ready"]
        nodes_status = {"summary": "1/1", "ready": 1}
        status = {"accelerator": "H100-80GB", "nodes": nodes_status, "capacity": {"gpus": 8}, "phase": "Ready"}
        await client.patch(f"{POOLS}/train/status", {"status": status})
        await client.patch("/api/v1/nodes/gpu-1", {"spec": {"unschedulable": True}})
        assert (await pools.line()).split()[:6] == ["train", "H100-80GB", "1/1", "1", "8", "Ready"]
        assert (await nodes.line()).split()[:2] == ["gpu-1", "Ready,SchedulingDisabled"]
    finally:
        pool_errors, node_errors = await pools.stop(), await nodes.stop()
    assert not pool_errors and not node_errors, (pool_errors, node_errors)


async def test_kubectl_wait_and_delete_follow_the_object_on_a_watch(api: RunningApiServer, client: KubeClient) -> None:
    """`kubectl wait --for=condition=Ready` and `kubectl delete` (which waits, on a watch by name, until the
    finalizers are lifted) against the emulator: each returns once the object changes, without errors."""
    metadata = {"name": "train", "finalizers": ["accelpool.io/cleanup"]}
    await client.create(POOLS, {**POOL, "metadata": metadata, "spec": {"accelerator": "H100"}})
    waiting = await watching(api, "wait", "--for=condition=Ready", "cpool/train", "--timeout=300s")
    ready = {"type": "Ready", "status": "True", "reason": "Ready", "lastTransitionTime": "2026-11-01T00:00:00Z"}
    await client.patch(f"{POOLS}/train/status", {"status": {"phase": "Ready", "conditions": [ready]}})
    assert await waiting.line() == "computepool.accelpool.io/train condition met"
    assert not await waiting.stop()
    assert waiting.process.returncode == 0

    deleting = await watching(api, "delete", "cpool", "train", "--timeout=300s")
    assert await deleting.line() == 'computepool.accelpool.io "train" deleted'

    async def marked() -> bool:
        return bool((await client.get(f"{POOLS}/train"))["metadata"].get("deletionTimestamp"))

    await eventually(marked, "train marked for deletion")
    assert deleting.process.returncode is None, "kubectl waits while a finalizer remains"
    await client.patch(f"{POOLS}/train", {"metadata": {"finalizers": None}})
    errors = await deleting.finish()
    assert deleting.process.returncode == 0 and not errors, errors
