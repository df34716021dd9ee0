"""The real operator (`kopf run -m accelpool.runtime.handlers` under `KopfRunner`) against the emulated API server.

The API server is the demo's (`accelpool_demo.apiserver`, whose docstring lists what it emulates and
what not), with the CRD's schema and CEL but no admission webhook, as the operator here serves none
(a pool only the webhook would refuse is stored, and the operator reports it). A test reaches it as
`cluster.emulator`: its stored objects, the requests it served (`writes`, `conflicts`,
`request_count`, by User-Agent), kmock's reactions to make a request's answer fail after its write
is stored (`cluster.emulator[kmock.method.PATCH, NODES][:3] << 500`), and `before_update` hooks
that play a concurrent writer. Every request it serves wakes
`Cluster.wait_for`, so tests wait for conditions on the stored objects without sleeping.

Behind the operator, the demo's DaemonSet controller (`accelpool_demo.daemonsets`) runs as in a real
cluster: pods for the nodes each DaemonSet selects, FailedCreate Events when admission refuses them,
and `.status` written after every change (which moves the DaemonSet's resourceVersion); it is woken
by every write to what its informers watch. The cluster starts with what the chart and the GPU
Operator install: the namespace, the agents' ServiceAccount and the `nvidia` RuntimeClass. Nobody
plays the kubelet for pods unless a test does (they stay Pending). Writes are attributed by
User-Agent: the operator's own client says `accelpool`, kopf says `kopf/…`, the tests say
`accelpool-test`, the DaemonSet controller `kube-controller-manager/…`.

The operator runs in KopfRunner's thread with its own event loop; the emulator serves it from
the test's loop, so the test must keep awaiting (never block) while the operator runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import datetime
import json
import pathlib
import socket
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import aiohttp
import attrs
import kmock
import pytest
from kopf.testing import KopfRunner

import accelpool_api as api
from accelpool.model.nvidia import MemberConfigs
from accelpool_api import conventions
from accelpool_demo import daemonsets, nvidia
from accelpool_demo.apiserver import ApiServer, RunningApiServer, Served, serving
from tests.support.builders import pool_body

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
NAMESPACE = "accelpool-system"
DP_CONFIGMAP = "accelpool-device-plugin-config"
MIG_CONFIGMAP = "accelpool-mig-parted-config"
TEST_AGENT = "accelpool-test"
WAIT_GUARD_SECONDS = 90.0
"""How long `Cluster.wait_for` waits by default before failing: a guard against waiting forever (under
pytest-timeout's 120 s for the whole test), not a timing; a loaded machine only makes the wait longer."""
AGENT_SERVICE_ACCOUNT = "accelpool-agent"
RUNTIME_CLASSES = "/apis/node.k8s.io/v1/runtimeclasses"
CONTROLLER_INPUTS = frozenset({"daemonsets", "pods", "nodes", "runtimeclasses", "serviceaccounts"})
"""What the DaemonSet controller's informers watch (and what decides whether a pod can be created)."""


def _now(seconds_ago: float = 0.0) -> str:
    then = datetime.datetime.now(datetime.UTC) - datetime.timedelta(seconds=seconds_ago)
    return then.strftime("%Y-%m-%dT%H:%M:%SZ")


class TestClient:
    """The tests' own API client (plays kubectl, the MIG manager and the agents)."""

    def __init__(self, server: str) -> None:
        self.server = server
        self._session = aiohttp.ClientSession(headers={"User-Agent": TEST_AGENT})

    async def close(self) -> None:
        await self._session.close()

    async def request(self, method: str, path: str, body: Any = None, content_type: str | None = None) -> Any:
        headers = {"Content-Type": content_type or "application/merge-patch+json"} if body is not None else {}
        data = json.dumps(body) if body is not None else None
        async with self._session.request(method, f"{self.server}{path}", data=data, headers=headers) as response:
            text = await response.text()
            if response.status >= 400:
                raise AssertionError(f"{method} {path}: {response.status} {text[:300]}")
            return json.loads(text) if text else None

    async def create(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("POST", path, dict(body), "application/json")

    async def patch(self, path: str, body: Mapping[str, Any]) -> Any:
        return await self.request("PATCH", path, dict(body))

    async def delete(self, path: str) -> Any:
        return await self.request("DELETE", path)


@attrs.define
class Cluster:
    """The emulated API server the real operator runs against, as the tests read it, wait on it and write to it
    (playing kubectl, the kubelet, the agents and NVIDIA's components). The integration tier's: the unit tier's
    `Cluster` (tests/unit/operator/emulated.py) drives the controller's passes itself, without kopf or a
    thread; the two share the emulator and `tests.support.builders`, not their harness."""

    emulator: ApiServer
    server: str
    client: TestClient
    changed: asyncio.Event = attrs.field(factory=asyncio.Event)
    """Set by every request the emulator serves."""
    nvidia: nvidia.Simulation = attrs.field(factory=lambda: nvidia.Simulation(nvidia.Installation()))
    """NVIDIA's components (the demo's simulation); zero delays by default, so one settle is enough."""
    clock: Callable[[], float] = attrs.field(default=lambda: 0.0)
    """The simulation's clock: tests with delays in `nvidia.installation` move it themselves."""

    # ------------------------------------------------------------ reading the stored state

    def _get(self, resource: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return copy.deepcopy(self.emulator.store.get(kmock.resource(resource), namespace, name))

    def objects(self, resource: str) -> list[dict[str, Any]]:
        """Every stored object of a resource (`group/version/plural`), copied."""
        return self._list(resource)

    def _list(self, resource: str) -> list[dict[str, Any]]:
        return copy.deepcopy(self.emulator.store.list(kmock.resource(resource), None))

    def node(self, name: str) -> dict[str, Any]:
        found = self._get("v1/nodes", None, name)
        assert found is not None, f"node {name} does not exist"
        return found

    def nodes(self) -> list[dict[str, Any]]:
        return self._list("v1/nodes")

    def labels(self, name: str) -> dict[str, str]:
        return dict(self.node(name)["metadata"].get("labels") or {})

    def taints(self, name: str) -> list[dict[str, Any]]:
        return list((self.node(name).get("spec") or {}).get("taints") or [])

    def members(self, pool: str) -> list[str]:
        return sorted(
            n["metadata"]["name"]
            for n in self.nodes()
            if (n["metadata"].get("labels") or {}).get(conventions.POOL_LABEL) == pool
        )

    def pool(self, name: str) -> dict[str, Any] | None:
        return self._get(f"{api.GROUP}/{api.VERSION}/{api.PLURAL}", None, name)

    def finalizers(self, name: str) -> list[str]:
        return list(((self.pool(name) or {}).get("metadata") or {}).get("finalizers") or [])

    def status(self, name: str) -> dict[str, Any]:
        found = self.pool(name)
        return dict((found or {}).get("status") or {})

    def condition(self, pool: str, type_: str) -> dict[str, Any]:
        return next((c for c in self.status(pool).get("conditions") or [] if c["type"] == type_), {})

    def configmap(self, name: str) -> dict[str, Any] | None:
        return self._get("v1/configmaps", NAMESPACE, name)

    def daemonset(self, pool: str) -> dict[str, Any] | None:
        return self._get("apps/v1/daemonsets", NAMESPACE, conventions.agent_name(pool))

    def pods(self, pool: str) -> list[dict[str, Any]]:
        """The pool's agent pods (those the DaemonSet controller created)."""
        return [
            p for p in self._list("v1/pods") if (p["metadata"].get("labels") or {}).get(conventions.POOL_LABEL) == pool
        ]

    def events(self) -> list[dict[str, Any]]:
        return self._list("v1/events")

    # ------------------------------------------------------------ waiting without sleeping

    async def wait_for(self, predicate: Callable[[], Any], within: float = WAIT_GUARD_SECONDS, what: str = "") -> Any:
        """Until `predicate()` is truthy, re-checked after every request the emulator serves. `within` is a
        hang guard (the operator runs on real time, slower on a loaded machine), unless a test gives a
        deadline that is what it checks."""
        try:
            async with asyncio.timeout(within):
                while True:
                    self.changed.clear()
                    result = predicate()
                    if result:
                        return result
                    await self.changed.wait()
        except TimeoutError:
            raise AssertionError(f"timed out waiting for {what or predicate}") from None

    # ------------------------------------------------------------ writing like the others do

    async def apply_pool(self, name: str, spec: Mapping[str, Any]) -> None:
        await self.client.create(POOLS, pool_body(name, spec))

    async def patch_pool(self, name: str, spec: Mapping[str, Any]) -> None:
        await self.client.patch(f"{POOLS}/{name}", {"spec": dict(spec)})

    async def delete_pool(self, name: str) -> None:
        await self.client.delete(f"{POOLS}/{name}")

    async def add_node(self, body: Mapping[str, Any]) -> None:
        await self.client.create("/api/v1/nodes", body)

    async def set_condition(
        self, node: str, type_: str, status: str, reason: str = "", message: str = "", *, seconds_ago: float = 0.0
    ) -> None:
        """What the agent (or kubelet) does: set one node condition, keeping the others; `seconds_ago`: how long
        ago its status changed (`lastTransitionTime`), as a condition the operator hears of late says."""
        current = self.node(node)
        conditions = [c for c in (current.get("status") or {}).get("conditions") or [] if c["type"] != type_]
        since = _now(seconds_ago)
        conditions.append(
            {"type": type_, "status": status, "reason": reason, "message": message, "lastTransitionTime": since}
        )
        await self.client.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": conditions}})

    async def report_health(
        self,
        node: str,
        healthy: bool = True,
        *,
        reason: str = "",
        message: str = "",
        bad_gpus: tuple[int, ...] = (),
        uuids: dict[int, str] | None = None,
        tflops: float | None = None,
        pool: str | None = None,
        complete: bool = True,
        seconds_ago: float = 0.0,
    ) -> None:
        """The agent's report: the AcceleratorHealthy condition and the accelpool.io/health annotation, naming
        the pool whose agent writes it (`pool`, else the node's pool, as that pool's agent does), whether a
        full check cycle has completed (`complete`: a healthy verdict is published only after one) and how long
        ago the condition's status changed (`seconds_ago`); `uuids`: the bad GPUs' UUIDs (index → UUID), which a
        per-GPU quarantine needs."""
        report: dict[str, Any] = {
            "status": "Healthy" if healthy else "Unhealthy",
            "reason": reason or ("AllChecksPassed" if healthy else "XidError79"),
            "complete": complete,
        }
        writer = pool if pool is not None else self.labels(node).get(conventions.POOL_LABEL)
        if writer is not None:
            report["pool"] = writer
        if message:
            report["message"] = message
        if bad_gpus:
            report["badGpus"] = list(bad_gpus)
        if uuids:  # as an agent that names its bad GPUs (findings about those GPUs only)
            report["badDevices"] = [{"index": i, "uuid": uuids[i], "reason": report["reason"]} for i in bad_gpus]
            report["findings"] = [
                {"check": "xid", "severity": "CRITICAL", "reason": report["reason"], "gpus": list(bad_gpus)}
            ]
        if tflops is not None:
            report["tflops"], report["dtype"] = tflops, "bf16"
        await self.client.patch(
            f"/api/v1/nodes/{node}",
            {"metadata": {"annotations": {conventions.HEALTH_ANNOTATION: json.dumps(report)}}},
        )
        await self.set_condition(
            node,
            conventions.HEALTH_CONDITION,
            "True" if healthy else "False",
            report["reason"],
            message,
            seconds_ago=seconds_ago,
        )

    async def mig_manager(self, node: str, state: str = "success") -> None:
        await self.client.patch(
            f"/api/v1/nodes/{node}", {"metadata": {"labels": {conventions.MIG_CONFIG_STATE_LABEL: state}}}
        )

    async def settle_nvidia(self, names: list[str]) -> None:
        """One step of NVIDIA's components (GFD, device plugin and its sidecar, MIG manager) on these nodes."""
        now = self.clock()
        data = {
            name: None if found is None else dict(found.get("data") or {})
            for name in (DP_CONFIGMAP, MIG_CONFIGMAP)
            for found in [self.configmap(name)]
        }
        self.nvidia.observe(data[DP_CONFIGMAP], data[MIG_CONFIGMAP], now)
        for name in names:
            changes = self.nvidia.node(self.node(name), now)
            if changes.labels:
                await self.client.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": changes.labels}})
            if changes.resources:
                status = {"capacity": changes.resources, "allocatable": changes.resources}
                await self.client.patch(f"/api/v1/nodes/{name}/status", {"status": status})

    async def settle_members(self, pool: str) -> None:
        """Play NVIDIA's components and the agents for every member of a pool."""
        await self.settle_nvidia(self.members(pool))
        for name in self.members(pool):
            if conventions.HEALTH_CONDITION not in {
                c["type"] for c in (self.node(name).get("status") or {}).get("conditions") or []
            }:
                await self.report_health(name, tflops=650.0)


SEEDED = "2026-11-01T00:00:00Z"
"""The creationTimestamp of the nodes that exist before a test starts, unless a node says otherwise."""


def seed(cluster: Cluster, *nodes: Mapping[str, Any]) -> None:
    """Objects that exist before the operator starts (it lists them; no watch event needed), created at
    `SEEDED` unless a node has its own creationTimestamp."""
    for node in nodes:
        metadata = {"creationTimestamp": SEEDED, **node["metadata"]}
        cluster.emulator.store.put("v1/nodes", {**node, "metadata": metadata})


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Every test here runs the real operator: mark them `integration` (`-m "not integration"` skips them)."""
    here = pathlib.Path(__file__).parent
    for item in items:
        if here in pathlib.Path(str(item.fspath)).parents:
            item.add_marker(pytest.mark.integration)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def install_prerequisites(emulator: RunningApiServer) -> None:
    """What the chart and the GPU Operator put in a cluster: the namespace, the agents' ServiceAccount
    (charts/accelpool/templates/serviceaccounts.yaml) and the `nvidia` RuntimeClass (the GPU Operator's
    container toolkit creates it)."""
    emulator.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
    emulator.put(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": AGENT_SERVICE_ACCOUNT}})
    emulator.put(RUNTIME_CLASSES, {"metadata": {"name": "nvidia"}, "handler": "nvidia"})


def _wakes(cluster: Cluster, controller_wake: asyncio.Event) -> Callable[[Served], None]:
    def served(request: Served) -> None:
        cluster.changed.set()
        if request.is_write and request.resource is not None and request.resource.plural in CONTROLLER_INPUTS:
            controller_wake.set()

    return served


@pytest.fixture
async def cluster(request: pytest.FixtureRequest) -> AsyncIterator[Cluster]:
    """The emulated cluster, as Kubernetes 1.37 (a test parametrizes `cluster` indirectly with another release)."""
    release = getattr(request, "param", "1.37")
    async with serving(kubernetes_version=release) as emulator:  # no webhook: the operator runs with none either
        install_prerequisites(emulator)
        client = TestClient(emulator.url)
        controller_client = emulator.client(user_agent=daemonsets.USER_AGENT)
        controller = daemonsets.DaemonSetController(controller_client, NAMESPACE)
        controller_wake = asyncio.Event()
        running_cluster = Cluster(emulator.server, emulator.url, client)
        emulator.server.listeners.append(_wakes(running_cluster, controller_wake))
        running = asyncio.create_task(controller.run(controller_wake))
        try:
            yield running_cluster
        finally:
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            await controller_client.close()
            await client.close()


class Operator:
    """Starts and stops the operator in KopfRunner's thread while the test's loop keeps serving."""

    def __init__(self, cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> None:
        self.cluster = cluster
        self.metrics_port = free_port()
        self.liveness_port = free_port()
        self.outputs: list[str] = []
        self._runner: KopfRunner | None = None
        env = {
            "ACCELPOOL_SERVER": cluster.server,
            "ACCELPOOL_NAMESPACE": NAMESPACE,
            "ACCELPOOL_DEVICE_PLUGIN_CONFIGMAP": DP_CONFIGMAP,
            "ACCELPOOL_MIG_CONFIGMAP": MIG_CONFIGMAP,
            "ACCELPOOL_METRICS_ADDRESS": "127.0.0.1",
            "ACCELPOOL_METRICS_PORT": str(self.metrics_port),
            "ACCELPOOL_DEBOUNCE": "0.02",
            "ACCELPOOL_STATUS_INTERVAL": "30",
            "ACCELPOOL_STATUS_SETTLE": "0.2",
            "ACCELPOOL_AGENT_CHECK_INTERVAL": "0.3",
            "ACCELPOOL_CONFIG_SYNC": "0",  # the simulated NVIDIA components read a ConfigMap as soon as it is written
            "ACCELPOOL_NOT_READY_GRACE": "1",
            "ACCELPOOL_AGENT_IMAGE": "registry.example/accelpool-agent:test",
            "ACCELPOOL_WEBHOOK_PORT": "0",  # the emulator does not call admission webhooks
        }
        for key, value in env.items():
            monkeypatch.setenv(key, value)

    async def start(self) -> None:
        assert self._runner is None
        self._runner = KopfRunner(
            [
                "run",
                "--standalone",
                "--all-namespaces",
                "--verbose",
                f"--liveness=http://127.0.0.1:{self.liveness_port}/healthz",
                "-m",
                "accelpool.runtime.handlers",
            ],
            timeout=30,
        )
        self._runner.__enter__()

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(None, runner.__exit__, None, None, None)
        finally:
            with contextlib.suppress(Exception):
                self.outputs.append(runner.output)

    async def metrics(self) -> str:
        async with (
            aiohttp.ClientSession() as session,
            session.get(f"http://127.0.0.1:{self.metrics_port}/metrics") as response,
        ):
            return await response.text()

    async def metric(self, sample: str) -> float:
        """The value of one sample, e.g. 'accelpool_reconcile_total{result="success"}' (0 when absent)."""
        for line in (await self.metrics()).splitlines():
            if line.startswith(sample + " "):
                return float(line.rsplit(" ", 1)[1])
        return 0.0

    async def passes(self) -> float:
        """Reconcile passes of the running operator (0 while its /metrics is not up yet)."""
        try:
            return await self.metric('accelpool_reconcile_total{result="success"}') + await self.metric(
                'accelpool_reconcile_total{result="error"}'
            )
        except aiohttp.ClientConnectionError:
            return 0.0

    async def wait_passes(self, count: float, attempts: int = 1000) -> None:
        """Until the operator has finished `count` reconcile passes.

        The operator runs in another thread and a pass that changes nothing makes no request, so
        nothing can wake the test: its /metrics counter is polled (at most `attempts` x 20 ms).
        """
        for _ in range(attempts):
            if await self.passes() >= count:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"the operator did not finish {count} reconcile passes")


@pytest.fixture
async def operator(cluster: Cluster, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Operator]:
    running = Operator(cluster, monkeypatch)
    try:
        yield running
    finally:
        await running.stop()
        print("\n".join(output[-30000:] for output in running.outputs))  # shown by pytest when a test fails


def configs_of(pool: str, spec: Mapping[str, Any]) -> MemberConfigs:
    """The content-named device-plugin key and mig-parted entry of a pool with this spec."""
    from accelpool.model import nvidia as nvidia_configs
    from accelpool_api import validation

    checked, problems = validation.validate_spec(dict(spec))
    assert checked is not None, problems
    return nvidia_configs.member_configs(pool, checked)
