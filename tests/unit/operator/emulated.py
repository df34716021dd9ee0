"""The controller without kopf, bound to the emulated API server (`accelpool_demo.apiserver`) over HTTP:
the harness of the operator's unit tests that run reconcile passes.

`Cluster` is the emulator a test starts from, written to by the test as a client of its own (nodes
and pools created through the API, so they are admitted and stamped as a real API server would).
`Harness` binds a `Controller` to indexes read from the emulator's stored objects (what kopf's
watches would deliver, refreshed when the test says the watch caught up); the controller writes
through a real `KubeClient` with its own User-Agent, so what it sent is read from the server's log.
The `cluster` fixture (conftest.py) serves one per test.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from accelpool.decide.inputs import PoolRecord
from accelpool.model.nodes import NodeView
from accelpool.runtime.controller import Controller
from accelpool.runtime.controller.apiserver import POOLS
from accelpool.runtime.handlers import FINALIZER
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import RunningApiServer, serving
from tests.support.builders import pool_body as pool_body  # re-exported: the controller's tests import it from here

START = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
NODES = "/api/v1/nodes"
CONTROLLER = "accelpool-controller-test"
"""The User-Agent of the harnesses' controllers: what they sent is told from the test's own writes by it."""
APPLY = "application/apply-patch+yaml"


class Cluster:
    """The emulated API server a test starts from, written to by the test as a client of its own.

    The unit tier's: no kopf, no thread; a `Harness` runs the controller's passes when the test says. The
    integration tier's `Cluster` (tests/integration/operator/conftest.py) serves the real operator under
    kopf in another thread, with the DaemonSet controller and NVIDIA's simulated components, and waits on
    the emulator's requests; the two share the emulator and the builders, not their harness."""

    def __init__(self, api_server: RunningApiServer, client: KubeClient) -> None:
        self.api = api_server
        self.client = client
        self.clients: list[KubeClient] = []
        """The controllers' clients, closed when the test ends."""

    async def add_nodes(self, *bodies: dict[str, Any]) -> None:
        """Nodes created through the API (which assigns their uid and resourceVersion)."""
        for body in bodies:
            metadata = {k: v for k, v in body["metadata"].items() if k not in ("uid", "resourceVersion")}
            await self.client.create(NODES, {**body, "metadata": metadata})

    def node(self, name: str) -> dict[str, Any]:
        stored = self.api.get(f"{NODES}/{name}")
        assert stored is not None, f"no node {name}"
        return stored

    def node_views(self) -> list[NodeView]:
        return [NodeView.from_body(o) for o in self.api.list(NODES)]

    def pool_records(self) -> list[PoolRecord]:
        return [PoolRecord.from_body(o) for o in self.api.list(POOLS)]

    async def store_pools(self, bodies: Iterable[dict[str, Any]]) -> None:
        """Create, update (a new spec) or delete each of these pools through the API, admitted by its webhook;
        other pools stay as they are. Each is created with kopf's finalizer, as the operator would add it."""
        for body in bodies:
            path = f"{POOLS}/{body['metadata']['name']}"
            stored = self.api.get(path)
            if stored is None:
                metadata = {"name": body["metadata"]["name"], "finalizers": [FINALIZER]}  # as kopf adds it
                stored = await self.client.create(POOLS, {**body, "metadata": metadata})
            elif stored["spec"] != body["spec"]:
                stored = await self.client.replace(path, {**stored, "spec": body["spec"]})
            if body["metadata"].get("deletionTimestamp") and not stored["metadata"].get("deletionTimestamp"):
                await self.client.delete(path)

    async def harness(self, pools: Iterable[dict[str, Any]], **config: Any) -> Harness:
        """A controller over the API's nodes and `pools` (stored first), its indexes caught up."""
        await self.store_pools(pools)
        harness = Harness(self, **config)
        self.clients.append(harness.client)
        return harness

    def writes(self) -> list[tuple[str, str]]:
        """The controllers' write requests sent, answered or refused, in order: (POST, PUT, PATCH, APPLY or
        DELETE; path). The test's own writes (its client's User-Agent is another) are not among them."""
        return [
            ("APPLY" if s.headers.get("Content-Type") == APPLY else s.method.value, s.path)
            for s in self.api.served.writes(agent=CONTROLLER)
        ]

    def reads(self) -> list[str]:
        """The paths the controllers read (GET), in order."""
        return [s.path for s in self.api.served if s.by(CONTROLLER) and s.method.value == "GET"]

    def daemonset_image(self, path: str) -> str:
        """The agent image of the stored DaemonSet at `path`."""
        stored = self.api.get(path)
        assert stored is not None, f"no DaemonSet at {path}"
        image: str = stored["spec"]["template"]["spec"]["containers"][0]["image"]
        return image

    def events(self, reason: str | None = None) -> list[dict[str, Any]]:
        """The Events stored, in every namespace (those with `reason`)."""
        return [e for e in self.api.list("/api/v1/events") if reason is None or e["reason"] == reason]


class Harness:
    """The controller bound to indexes of the cluster's stored objects, writing to it over HTTP.

    Statuses are written as soon as they are planned (`--status-settle=0`), and an edited pool's members move to
    its new NVIDIA configs at once (`--config-sync=0`: nothing here plays the kubelet's ConfigMap sync), unless a
    test says otherwise.
    """

    def __init__(self, cluster: Cluster, **config: Any) -> None:
        self.cluster = cluster
        self.client = cluster.api.client(CONTROLLER)
        self.index: list[NodeView] = cluster.node_views()
        self.pools: list[PoolRecord] = cluster.pool_records()
        defaults: dict[str, Any] = {
            "debounce_seconds": 0.0,
            "resync_seconds": 3600.0,
            "status_settle_seconds": 0.0,
            "config_sync_seconds": 0.0,
        }
        self.controller = Controller(
            OperatorConfig(**{**defaults, **config}),
            self.client,
            OperatorMetrics(),
            wall_clock=lambda: START + timedelta(seconds=asyncio.get_running_loop().time()),
        )
        self.controller.bind(nodes=lambda: self.index, pools=lambda: self.pools)

    async def set_pools(self, *bodies: dict[str, Any]) -> None:
        """Someone changes the pools: the API stores them and the pool watch delivers them."""
        await self.cluster.store_pools(bodies)
        self.catch_up_pools()

    def catch_up(self) -> None:
        """The watch delivers what was written: the node index sees the API's current nodes."""
        self.index = self.cluster.node_views()

    def catch_up_pools(self) -> None:
        """The pool watch delivers what was written (statuses included)."""
        self.pools = self.cluster.pool_records()

    def node_writes(self) -> list[str]:
        return [path for verb, path in self.cluster.writes() if verb == "PATCH" and path.startswith(f"{NODES}/")]

    def status_writes(self, pool: str) -> list[str]:
        return [path for verb, path in self.cluster.writes() if verb == "PATCH" and path == f"{POOLS}/{pool}/status"]

    def status(self, pool: str) -> dict[str, Any]:
        """The pool's status as the API server stores it ({} when none was written)."""
        return dict((self.cluster.api.get(f"{POOLS}/{pool}") or {}).get("status") or {})


@contextlib.asynccontextmanager
async def emulated_cluster() -> AsyncIterator[Cluster]:
    """A fresh emulated API server (with accelpool's webhook) until the block ends."""
    async with serving() as running, running.client("accelpool-test") as client:
        cluster = Cluster(running, client)
        try:
            yield cluster
        finally:
            for controller_client in cluster.clients:
                await controller_client.close()
