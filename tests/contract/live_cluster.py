"""A small live accelpool installation for the Prometheus contract test, with real faults in it.

On a background thread's event loop: the demo's emulated API server (`accelpool_demo.apiserver`),
three simulated 8-GPU H100 nodes, the real operator (`accelpool run --server ...`, a subprocess),
the demo's DaemonSet controller (a pod per node an agent DaemonSet selects), NVIDIA's node-side
components as the demo simulates them (the device plugin, GPU Feature Discovery and the MIG
manager, which a pool needs to be Ready), and the simulated kubelet, which runs one real
`accelpool-agent` process (fake backend) per pod,
restarted with `--fault` when the node carries the demo's fault annotation. `running()` yields once this is in place:

- pool `llm-training` (2 nodes, maxUnavailable 1, drain enabled): node A's agent has
  `0:xid=79,nvlink-down,ib-down` (GPU 0 fell off the bus, one of its NVLinks and its InfiniBand port
  mlx5_0 are down; A is quarantined, and drained if the breaker has not opened yet: it holds only
  DaemonSet pods), node B's has `1:slow-matmul=4,hot,pcie-degraded,nvlink-errors=6` (GPU 1 is slow,
  at its slowdown temperature, on a half-width PCIe link and counting NVLink replays at 6 a minute,
  a warning; the circuit breaker refuses to quarantine B too);
- pool `inference` (1 node, C) is healthy;
- one pool of each other vendor's accelerator (`VENDOR_POOLS`: MI300X on 2 nodes, Trainium2 and TPU v5p
  on 1; their agents simulate that vendor's devices): device 1 of the first node of each has the
  vendor-neutral `fatal` fault (the MI300X's also an XGMI link down), so each pool is Degraded with that
  node quarantined; the second MI300X node is healthy and serving.

Faults a test injects while Prometheus watches: `break_the_api()` (ConfigMap writes fail with
HTTP 500 while pool `batch` is created, so a reconcile pass really fails), `kill_agent(node)`,
`stop_operator()`. Everything listens on 127.0.0.1 and is stopped on exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import kmock

import accelpool_api as api
from accelpool_api import crd
from accelpool_core.credentials import Credentials
from accelpool_core.kube import ApiError, KubeClient
from accelpool_demo import cluster, daemonsets, nvidia
from accelpool_demo.apiserver import ApiServer
from accelpool_demo.run import DEVICE_PLUGIN_CONFIG_MAP, MIG_CONFIG_MAP, install_prerequisites
from accelpool_demo.simulators import DEMO_INSTALLATION, FAULT_ANNOTATION, Kubelet, NvidiaComponents, free_port
from tests.support.builders import pool_body

NAMESPACE = "accelpool-system"
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
TRAINING, INFERENCE, BATCH = "llm-training", "inference", "batch"
XID_FAULT = "0:xid=79,nvlink-down,ib-down"
SLOW_HOT_FAULT = "1:slow-matmul=4,hot,pcie-degraded,nvlink-errors=6"
VENDOR_POOLS = {  # vendor label → (pool, accelerator, the demo fleet's nodes, the fault of the first one's agent)
    "amd": ("mi300x", "MI300X:8", ("mi300x-1", "mi300x-2"), "1:fatal,nvlink-down"),
    "aws": ("trainium2", "Trainium2:16", ("trn2-1",), "1:fatal"),
    "google": ("tpu-v5p", "TPU-v5p:4", ("tpu-v5p-1",), "1:fatal"),
}
T = TypeVar("T")


CONFIGMAP_WRITES = tuple(f"{method} /api/v1/namespaces/{NAMESPACE}/configmaps" for method in ("POST", "PUT", "PATCH"))
"""What `break_the_api` makes fail (HTTP 500)."""


async def _terminate(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        process.terminate()
        try:
            await asyncio.wait_for(process.wait(), timeout=10)
        except TimeoutError:
            process.kill()
            await process.wait()


@dataclass
class Topology:
    """What the scenario built: where to scrape, and which node got which fault."""

    operator: str
    """host:port of the operator's /metrics."""
    agents: dict[str, tuple[str, str]] = field(default_factory=dict)
    """node → (host:port of its agent's /metrics, its pool)."""
    faulty_xid: str = ""
    faulty_slow_hot: str = ""
    healthy_inference: str = ""
    vendor_nodes: dict[str, tuple[str, str]] = field(default_factory=dict)
    """vendor label (amd, aws, google) → (its pool's faulty node, the pool): `fatal` on device 1."""
    healthy_vendor_nodes: tuple[str, ...] = ()
    """The other vendors' members without a fault."""


class LiveCluster:
    """The scenario on a background event loop. `running()` yields once the pools and the agents'
    faults are in place; `break_the_api()`, `kill_agent()` and `stop_operator()` inject the faults
    that must happen while Prometheus watches."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="live-cluster", daemon=True)
        self._stop = asyncio.Event()
        self.topology = Topology(operator="")
        self.emulator = ApiServer(remember=1000)
        self.client: KubeClient | None = None
        self.kubelet: Kubelet | None = None
        self.operator: asyncio.subprocess.Process | None = None

    @classmethod
    @contextlib.contextmanager
    def running(cls, *, timeout: float = 240.0) -> Iterator[LiveCluster]:
        workdir = Path(tempfile.mkdtemp(prefix="accelpool-live-"))
        live = cls(workdir)
        live.thread.start()
        ready: Future[None] = Future()
        done = asyncio.run_coroutine_threadsafe(live._main(ready), live.loop)
        try:
            ready.result(timeout)
            yield live
        finally:
            live.loop.call_soon_threadsafe(live._stop.set)
            with contextlib.suppress(Exception):
                done.result(60)
            live.loop.call_soon_threadsafe(live.loop.stop)
            live.thread.join(10)
            live.loop.close()
            shutil.rmtree(workdir, ignore_errors=True)

    def _call(self, factory: Callable[[], Coroutine[Any, Any, T]], timeout: float) -> T:
        return asyncio.run_coroutine_threadsafe(factory(), self.loop).result(timeout)

    async def _main(self, ready: Future[None]) -> None:
        try:
            async with self.emulator, kmock.Server(self.emulator) as http:
                server = str(http.url).rstrip("/")
                controller_client = KubeClient(Credentials(server=server), user_agent=daemonsets.USER_AGENT)
                async with KubeClient(Credentials(server=server)) as client, controller_client:
                    self.client = client
                    self.kubelet = Kubelet(client, server=server, namespace=NAMESPACE, log_dir=self.workdir)
                    operator_port = free_port()
                    self.topology.operator = f"127.0.0.1:{operator_port}"
                    self.operator = await self._seed_and_start(client, server, operator_port)
                    controller = daemonsets.DaemonSetController(controller_client, NAMESPACE)
                    components = NvidiaComponents(
                        client,
                        NAMESPACE,
                        DEVICE_PLUGIN_CONFIG_MAP,
                        MIG_CONFIG_MAP,
                        nvidia.Simulation(DEMO_INSTALLATION),
                    )
                    tasks = [
                        asyncio.create_task(controller.run()),
                        asyncio.create_task(self.kubelet.run()),
                        asyncio.create_task(components.run()),
                    ]
                    try:
                        await self._scenario()
                        ready.set_result(None)
                        await self._stop.wait()
                    finally:
                        for task in tasks:
                            task.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await asyncio.gather(*tasks)
                        await _terminate(self.operator)
        except BaseException as error:
            if not ready.done():
                ready.set_exception(RuntimeError(f"{error}\n{self.logs()}"))
            raise

    def logs(self) -> str:
        parts = []
        for path in sorted(self.workdir.glob("*.log")):
            parts.append(f"--- {path.name}\n{path.read_text(errors='replace')[-3000:]}")
        return "\n".join(parts)

    async def _seed_and_start(self, client: KubeClient, server: str, metrics_port: int) -> asyncio.subprocess.Process:
        await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", crd.custom_resource_definition())
        await install_prerequisites(client, NAMESPACE)
        fleet = cluster.nodes(cluster.parse(cluster.DEFAULT_FLEET.read_text()))
        vendor_nodes = {node for _, _, nodes, _ in VENDOR_POOLS.values() for node in nodes}
        for node in [n for n in fleet if n["metadata"]["name"].startswith("h100-")][:3] + [
            n for n in fleet if n["metadata"]["name"] in vendor_nodes
        ]:
            await client.create("/api/v1/nodes", node)
        command = [
            str(Path(sys.executable).parent / "accelpool"),
            "run",
            f"--server={server}",
            f"--namespace={NAMESPACE}",
            f"--metrics-port={metrics_port}",
            "--metrics-address=127.0.0.1",
            f"--liveness-port={free_port()}",
            "--agent-backend=fake",
            "--webhook-port=0",  # no API server here calls a webhook
        ]
        log = (self.workdir / "operator.log").open("ab")
        try:
            return await asyncio.create_subprocess_exec(*command, stdout=log, stderr=subprocess.STDOUT)
        finally:
            log.close()

    # ------------------------------------------------------------ helpers on the loop

    async def _until(self, what: str, check: Callable[[], Awaitable[bool]], within: float = 60.0) -> None:
        assert self.client is not None and self.operator is not None
        deadline = time.monotonic() + within
        last: object = None
        while time.monotonic() < deadline:
            if self.operator.returncode is not None:
                raise RuntimeError(f"the operator exited with {self.operator.returncode}")
            try:
                if await check():
                    return
            except (ApiError, OSError, KeyError, ValueError) as error:
                last = error
            await asyncio.sleep(0.25)
        pools = {p["metadata"]["name"]: p.get("status") for p in await self.client.list(POOLS)}
        raise TimeoutError(f"not within {within:.0f}s: {what} (last error: {last!r}); pools: {pools}")

    async def _status(self, pool: str) -> dict[str, Any]:
        assert self.client is not None
        found: dict[str, Any] = (await self.client.get(f"{POOLS}/{pool}")).get("status") or {}
        return found

    async def _operator_metrics(self) -> str:
        def read() -> str:
            with urllib.request.urlopen(f"http://{self.topology.operator}/metrics", timeout=5) as response:
                text: str = response.read().decode()
                return text

        return await asyncio.to_thread(read)

    # ------------------------------------------------------------ the scenario

    async def _scenario(self) -> None:
        client, kubelet = self.client, self.kubelet
        assert client is not None and kubelet is not None

        async def ready() -> bool:
            phases = [(await self._status(pool)).get("phase") for pool in (TRAINING, INFERENCE)]
            return phases == ["Ready", "Ready"]

        await client.create(
            POOLS,
            pool_body(
                TRAINING,
                {
                    "accelerator": "H100:8",
                    "nodes": 2,
                    "health": {"maxUnavailable": 1, "holdDown": "1h", "drain": {"enabled": True}},
                },
            ),
        )
        await client.create(POOLS, pool_body(INFERENCE, {"accelerator": "H100:8", "nodes": 1, "health": {}}))
        await self._until("both pools Ready", ready, within=90)

        node_a, node_b = sorted(m["node"] for m in (await self._status(TRAINING))["members"])
        node_c = (await self._status(INFERENCE))["members"][0]["node"]

        async def inject(node: str, fault: str) -> None:
            await client.patch(f"/api/v1/nodes/{node}", {"metadata": {"annotations": {FAULT_ANNOTATION: fault}}})

        async def quarantined() -> bool:
            return bool((await self._status(TRAINING))["nodes"]["quarantined"] == 1)

        async def breaker_open() -> bool:
            return f'accelpool_pool_circuit_breaker_open{{pool="{TRAINING}"}} 1.0' in await self._operator_metrics()

        async def agents_settled() -> bool:
            wanted = {node_a: XID_FAULT, node_b: SLOW_HOT_FAULT, node_c: None}
            running = kubelet.agents
            return all(
                n in running and running[n].fault == f and running[n].process.returncode is None
                for n, f in wanted.items()
            )

        await inject(node_a, XID_FAULT)
        await self._until(f"{node_a} quarantined", quarantined)
        await inject(node_b, SLOW_HOT_FAULT)
        await self._until("the circuit breaker of llm-training open", breaker_open)
        await self._until("the agents running with their faults", agents_settled)
        await self._vendor_pools(inject)
        pools = {node_a: TRAINING, node_b: TRAINING, node_c: INFERENCE}
        pools |= {node: pool for pool, _, nodes, _ in VENDOR_POOLS.values() for node in nodes}
        self.topology.agents = {n: (f"127.0.0.1:{kubelet.agents[n].port}", pool) for n, pool in pools.items()}
        self.topology.faulty_xid, self.topology.faulty_slow_hot, self.topology.healthy_inference = (
            node_a,
            node_b,
            node_c,
        )

    async def _vendor_pools(self, inject: Callable[[str, str], Awaitable[None]]) -> None:
        """Each other vendor's pool Ready, then its node's `fatal` fault, and the node quarantined."""
        assert self.client is not None
        for pool, accelerator, nodes, _ in VENDOR_POOLS.values():
            await self.client.create(
                POOLS, pool_body(pool, {"accelerator": accelerator, "nodes": len(nodes), "health": {}})
            )

        async def phases(wanted: str) -> bool:
            return all([(await self._status(pool)).get("phase") == wanted for pool, *_ in VENDOR_POOLS.values()])

        await self._until("every vendor's pool Ready", lambda: phases("Ready"), within=90)
        for _, _, (node, *_), fault in VENDOR_POOLS.values():
            await inject(node, fault)

        async def quarantined() -> bool:
            statuses = [await self._status(pool) for pool, *_ in VENDOR_POOLS.values()]
            return all(status.get("nodes", {}).get("quarantined") == 1 for status in statuses)

        await self._until("every vendor's node quarantined", quarantined, within=60)
        self.topology.vendor_nodes = {vendor: (nodes[0], pool) for vendor, (pool, _, nodes, _) in VENDOR_POOLS.items()}
        self.topology.healthy_vendor_nodes = tuple(n for _, _, nodes, _ in VENDOR_POOLS.values() for n in nodes[1:])

    # ------------------------------------------------------------ faults injected while Prometheus watches

    def break_the_api(self, timeout: float = 60.0) -> None:
        """ConfigMap writes fail (HTTP 500) while pool `batch` is created, until a reconcile pass
        fails; then the API recovers."""

        async def run() -> None:
            assert self.client is not None
            before = _counter(await self._operator_metrics(), "accelpool_reconcile_errors_total")
            faults = [self.emulator.fail(prefix, 500, times=None) for prefix in CONFIGMAP_WRITES]
            try:
                await self.client.create(POOLS, pool_body(BATCH, {"accelerator": "H100:8", "nodes": 1, "health": {}}))

                async def failed() -> bool:
                    errors = _counter(await self._operator_metrics(), "accelpool_reconcile_errors_total")
                    return errors > before

                await self._until("a failed reconcile pass", failed)
            finally:
                for fault in faults:
                    self.emulator.faults.remove(fault)

        self._call(run, timeout)

    def kill_agent(self, node: str, timeout: float = 30.0) -> None:
        """SIGKILL the node's agent (the simulated kubelet restarts it, on another port)."""

        async def run() -> None:
            assert self.kubelet is not None
            process = self.kubelet.agents[node].process
            process.kill()
            await process.wait()

        self._call(run, timeout)

    def stop_operator(self, timeout: float = 30.0) -> None:
        async def run() -> None:
            assert self.operator is not None
            await _terminate(self.operator)

        self._call(run, timeout)


def _counter(exposition: str, name: str) -> float:
    for line in exposition.splitlines():
        if line.startswith(f"{name} "):
            return float(line.split()[1])
    raise KeyError(name)
