"""The emulated cluster the operator benchmarks run: an API server, N GPU nodes, the real operator, NVIDIA's
components and the agents played through the API.

`running(nodes)` starts the demo's emulated API server (`accelpool_demo.apiserver`) on a local port,
seeds N GPU nodes of mixed models (GFD, GKE, Karpenter and AMD labels: `node`), starts `accelpool run`
against it as a subprocess (under cProfile with `profile`), and a `Simulator` that plays NVIDIA's
components on every NVIDIA node (the demo's simulation, `accelpool_demo.nvidia`, with no delays: GFD
labels, the device plugin's resources, the MIG manager's `nvidia.com/mig.config.state`) and the
agents (`AcceleratorHealthy=True` and the health annotation on every member) as soon as the
operator's writes show up. `pools(nodes, count)` are the ComputePools the benchmarks apply.
`ProcessStats` reads the operator's CPU time and memory from /proc.

The emulator, the simulator and the benchmark share one process and event loop; the operator has its
own. The emulator answers writes without kmock's routing, and the simulator follows the emulator's
events rather than re-reading every node and stores its writes without HTTP (see their docstrings), so
that at 10,000 nodes it is the operator that is measured, not the emulator.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import functools
import json
import os
import socket
import sys
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import kmock

import accelpool_api as api
from accelpool_api import conventions, crd
from accelpool_core import catalog
from accelpool_demo import nvidia
from accelpool_demo.apiserver import ApiServer, Served, writes

BIN = Path(sys.executable).parent
POOLS_PATH = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
SIMULATOR = "simulator"
OPERATOR_AGENTS = ("accelpool", "kopf/")
# (catalog entry, labeller, devices): the fleet cycles through these.
FLEET = [
    ("H100-80GB", "gfd", 8),
    ("A100-40GB", "gfd", 8),
    ("H200-141GB", "gfd", 8),
    ("L4", "gke", 1),
    ("MI300X", "amd", 8),
    ("T4", "karpenter", 1),
    ("L40S", "gfd", 4),
    ("A100-80GB", "gke", 8),
]


REQUESTS_REMEMBERED = 10_000_000
"""Every request of a run is kept in the emulator's log (its writes are counted from it)."""
POOLS_KEY = f"{api.GROUP}/{api.VERSION}/{api.PLURAL}"
NODES = kmock.resource("v1/nodes")
CONFIGMAPS = kmock.resource("v1/configmaps")
SWEEP_SECONDS = 2.0
"""How often the simulator settles every node, not only those that changed (a backstop)."""


def live(emulator: ApiServer, resource: str) -> list[dict[str, Any]]:
    return emulator.store.list(kmock.resource(resource), None)


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def node(index: int) -> dict[str, Any]:
    name, labeller, count = FLEET[index % len(FLEET)]
    entry = catalog.BY_NAME[name]
    node_name = f"{name.lower()}-{index:05d}"
    labels = {"kubernetes.io/hostname": node_name, "topology.kubernetes.io/zone": f"zone-{index % 3}"}
    if labeller == "gfd":
        labels |= {
            "nvidia.com/gpu.product": entry.detection.gfd_products[0],
            "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.memory": str(entry.memory_gb * 1024),
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
        }
    elif labeller == "gke":
        labels |= {
            "cloud.google.com/gke-accelerator": entry.detection.gke_accelerators[0],
            "cloud.google.com/gke-accelerator-count": str(count),
        }
    elif labeller == "karpenter":
        labels |= {
            "karpenter.k8s.aws/instance-gpu-name": entry.detection.karpenter_names[0],
            "karpenter.k8s.aws/instance-gpu-count": str(count),
        }
    else:
        labels["amd.com/gpu.product-name"] = entry.detection.amd_products[0]
    spec = (
        {"taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]} if labeller == "gke" else {}
    )
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": node_name,
            "uid": str(uuid.uuid4()),
            "resourceVersion": "1",
            "creationTimestamp": "2026-11-01T00:00:00Z",
            "labels": labels,
        },
        "spec": spec,
        "status": {
            "capacity": {entry.resource: str(count)},
            "allocatable": {entry.resource: str(count)},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"}],
        },
    }


def pools(node_count: int, pool_count: int) -> list[dict[str, Any]]:
    """P pools over the fleet's models, asking for 80% of each model's nodes between them."""
    per_model_nodes = Counter(FLEET[i % len(FLEET)][0] for i in range(node_count))
    per_model_pools = Counter(FLEET[i % len(FLEET)][0] for i in range(pool_count))
    result = []
    for index in range(pool_count):
        model, _, _ = FLEET[index % len(FLEET)]
        wanted = max(1, int(per_model_nodes[model] * 0.8) // per_model_pools[model])
        spec: dict[str, Any] = {"accelerator": model, "nodes": wanted, "health": {"holdDown": "1m"}}
        if model == "A100-40GB":
            spec["mig"] = {"profile": "1g.5gb"} if index % 2 else {"profiles": ["4g.20gb", "3g.20gb"]}
        elif model == "H200-141GB" and index % 2:
            spec["mig"] = {"profile": "3g.71gb"}
        elif model in ("L4", "T4"):
            spec["sharing"] = {"timeSlicing": {"replicas": 4}}
        result.append(
            {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": f"pool-{index:03d}"}, "spec": spec}
        )
    return result


class Simulator:
    """Plays NVIDIA's components on every NVIDIA node and the agents on every member, through the API."""

    def __init__(self, emulator: ApiServer) -> None:
        self.emulator = emulator
        self.writes = 0
        self.nvidia = nvidia.Simulation(nvidia.Installation())

    async def run(self) -> None:
        """Settles the nodes that changed since the last round (all of them when a ConfigMap changed,
        and every `SWEEP_SECONDS`): following the emulator's events rather than re-reading every node
        each round keeps the simulator's own cost out of what is measured at 10,000 nodes."""
        events = self.emulator.store.events
        cursor, swept = 0, 0.0
        while True:
            changed, latest = events.after(cursor, NODES)
            configs, _ = events.after(cursor, CONFIGMAPS)
            everything = cursor < events.forgotten or bool(configs) or time.monotonic() - swept > SWEEP_SECONDS
            cursor = latest
            if everything:
                self._observe_config_maps()
                bodies = live(self.emulator, "v1/nodes")
                swept = time.monotonic()
            else:
                names = {e.object["metadata"]["name"] for e in changed if e.type != "DELETED"}
                found = (self.emulator.store.get(NODES, None, name) for name in sorted(names))
                bodies = [b for b in found if b is not None]
            jobs = [self._settle(n) for n in bodies]
            await asyncio.gather(*[j for j in jobs if j is not None])
            await asyncio.sleep(0.05)

    def _observe_config_maps(self) -> None:
        found = {c["metadata"]["name"]: c.get("data") or {} for c in live(self.emulator, "v1/configmaps")}
        device_plugin = found.get(conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP)
        mig = found.get(conventions.DEFAULT_MIG_CONFIGMAP)
        self.nvidia.observe(device_plugin, mig, time.monotonic())

    def _settle(self, body: dict[str, Any]) -> Any:
        labels = body["metadata"].get("labels") or {}
        name = body["metadata"]["name"]
        patches: list[tuple[str, dict[str, Any]]] = []
        changes = self.nvidia.node(body, time.monotonic())
        if changes.labels:
            patches.append((f"/api/v1/nodes/{name}", {"metadata": {"labels": changes.labels}}))
        if changes.resources:
            status = {"capacity": changes.resources, "allocatable": changes.resources}
            patches.append((f"/api/v1/nodes/{name}/status", {"status": status}))
        conditions = (body.get("status") or {}).get("conditions") or []
        if conventions.POOL_LABEL in labels and not any(
            c.get("type") == conventions.HEALTH_CONDITION for c in conditions
        ):
            report = {
                "status": "Healthy",
                "reason": "AllChecksPassed",
                "tflops": 700.0,
                "dtype": "bf16",
                "pool": labels[conventions.POOL_LABEL],
                "complete": True,  # published after a full check cycle, as the agent does
            }
            patches.append(
                (
                    f"/api/v1/nodes/{name}",
                    {"metadata": {"annotations": {conventions.HEALTH_ANNOTATION: json.dumps(report)}}},
                )
            )
            healthy = {"type": conventions.HEALTH_CONDITION, "status": "True", "reason": "AllChecksPassed",
                       "lastTransitionTime": _now()}  # fmt: skip
            patches.append((f"/api/v1/nodes/{name}/status", {"status": {"conditions": [*conditions, healthy]}}))
        if not patches:
            return None
        return self._send(patches)

    async def _send(self, patches: list[tuple[str, dict[str, Any]]]) -> None:
        """Each merge patch stored as the API server stores it (`Store.update`: a new resourceVersion, a watch
        event), without HTTP: over HTTP, the simulator's writes (more than the operator's) cost the
        emulator's process, which shares the 2 cores with the operator, twice (the client's and the
        server's side) and made it, not the operator, the bottleneck at 10,000 nodes."""
        for path, body in patches:
            name, _, subresource = path.removeprefix("/api/v1/nodes/").partition("/")
            with contextlib.suppress(kmock.KubernetesError):  # the node is gone
                await self.emulator.store.update(
                    NODES,
                    None,
                    name,
                    functools.partial(writes.merge_patch, patch=body),
                    subresource=subresource or None,
                )
                self.writes += 1


def _described(write: Served) -> str:
    json_patch = write.headers.get("Content-Type", "").startswith("application/json-patch+json")
    return f"{write.method.value} {write.plural}{' (kopf finalizer)' if json_patch else ''}"


def operator_writes(emulator: ApiServer, since: int = 0, *, refused: bool = False) -> Counter[str]:
    """The operator's writes the API server accepted (or, with `refused`, those it refused: 409s)."""
    counts: Counter[str] = Counter()
    for write in emulator.writes(since=since):
        ours = write.user_agent.startswith(OPERATOR_AGENTS) and not write.user_agent.startswith(SIMULATOR)
        if ours and write.refused == refused:
            counts[_described(write)] += 1
    return counts


def operator_command(profile: Path | None) -> list[str]:
    """`accelpool run`, under cProfile (its stats written to `profile` when it exits) when asked."""
    if profile is None:
        return [str(BIN / "accelpool")]
    return [sys.executable, "-m", "cProfile", "-o", str(profile), "-m", "accelpool.cli"]


async def _metric(session: aiohttp.ClientSession, port: int, sample: str) -> float:
    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
        for line in (await response.text()).splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def _wait_for_operator(session: aiohttp.ClientSession, port: int) -> None:
    for _ in range(600):
        with contextlib.suppress(aiohttp.ClientError):
            await _metric(session, port, "accelpool_pools")
            return
        await asyncio.sleep(0.1)
    raise RuntimeError("the operator did not start (see its log)")


async def _until_ready(emulator: ApiServer, names: list[str], started: float, within: float = 600) -> float:
    """Seconds from `started` until every pool named says Ready at once. Each pool's phase is read once, then
    kept current from the emulator's events for pools (reading every pending pool 20 times a second cost the
    benchmark's process more CPU than the operator's node watch at 10,000 nodes)."""
    resource = kmock.resource(POOLS_KEY)
    events = emulator.store.events

    def phase(body: dict[str, Any] | None) -> str | None:
        return None if body is None else (body.get("status") or {}).get("phase")

    cursor = events.latest()
    phases = {name: phase(emulator.store.get(resource, None, name)) for name in names}
    while time.monotonic() - started < within:
        if all(p == "Ready" for p in phases.values()):
            return time.monotonic() - started
        await asyncio.sleep(0.05)
        if cursor < events.forgotten:  # events were dropped unseen: read every pool again
            cursor = events.latest()
            phases = {name: phase(emulator.store.get(resource, None, name)) for name in names}
            continue
        changed, cursor = events.after(cursor, resource)
        for event in changed:
            name = event.object["metadata"]["name"]
            if name in phases:
                phases[name] = None if event.type == "DELETED" else phase(event.object)
    raise TimeoutError("not every pool became Ready")


@dataclass(frozen=True)
class ProcessStats:
    """A process's CPU seconds (user + system) and memory (resident now, and its peak) from /proc."""

    cpu_seconds: float
    rss_mb: float
    peak_rss_mb: float

    @classmethod
    def of(cls, pid: int) -> ProcessStats:
        ticks = os.sysconf("SC_CLK_TCK")
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = dict(
            line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
        )
        return cls(
            cpu_seconds=(int(fields[11]) + int(fields[12])) / ticks,
            rss_mb=int(status["VmRSS"].split()[0]) / 1024,
            peak_rss_mb=int(status["VmHWM"].split()[0]) / 1024,
        )


@dataclass
class Running:
    """A running emulated cluster (see the module docstring)."""

    emulator: ApiServer
    server: str
    session: aiohttp.ClientSession
    metrics_port: int
    operator: asyncio.subprocess.Process
    simulator: Simulator

    async def metric(self, sample: str) -> float:
        return await _metric(self.session, self.metrics_port, sample)

    async def metrics(self) -> str:
        """The operator's /metrics, as text."""
        async with self.session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as response:
            return await response.text()

    def stats(self) -> ProcessStats:
        return ProcessStats.of(self.operator.pid)

    async def apply(self, bodies: list[dict[str, Any]]) -> None:
        for body in bodies:
            async with self.session.post(f"{self.server}{POOLS_PATH}", json=body) as response:
                assert response.status < 300, await response.text()

    async def patch(self, path: str, body: dict[str, Any]) -> None:
        headers = {"Content-Type": "application/merge-patch+json"}
        async with self.session.patch(f"{self.server}{path}", data=json.dumps(body), headers=headers) as response:
            await response.read()
            assert response.status < 300, f"PATCH {path}: {response.status}"

    async def until_ready(self, bodies: list[dict[str, Any]], started: float, within: float = 600) -> float:
        """Seconds from `started` until every pool of `bodies` is Ready."""
        return await _until_ready(self.emulator, [b["metadata"]["name"] for b in bodies], started, within)


@contextlib.asynccontextmanager
async def running(node_count: int, log: Path, profile: Path | None = None) -> AsyncIterator[Running]:
    """The emulated cluster with `node_count` nodes and the operator started (its output in `log`)."""
    emulator = ApiServer(remember=REQUESTS_REMEMBERED)
    async with emulator, kmock.Server(emulator) as http:
        server = str(http.url).rstrip("/")
        emulator.store.put("apiextensions.k8s.io/v1/customresourcedefinitions", crd.custom_resource_definition())
        for index in range(node_count):
            emulator.store.put("v1/nodes", node(index))
        metrics_port = free_port()
        with log.open("wb") as log_file:
            operator = await asyncio.create_subprocess_exec(
                *operator_command(profile),
                "run",
                "--server",
                server,
                "--metrics-port",
                str(metrics_port),
                "--metrics-address",
                "127.0.0.1",
                "--liveness-port",
                str(free_port()),
                "--log-level",
                "quiet",
                "--webhook-port=0",
                stdout=log_file,
                stderr=log_file,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        simulator = Simulator(emulator)
        simulation = asyncio.create_task(simulator.run())
        try:
            async with aiohttp.ClientSession(headers={"User-Agent": "benchmark"}) as session:
                await _wait_for_operator(session, metrics_port)
                yield Running(emulator, server, session, metrics_port, operator, simulator)
        finally:
            simulation.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await simulation
            operator.terminate()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(operator.wait(), 15)
            if operator.returncode is None:
                operator.kill()
