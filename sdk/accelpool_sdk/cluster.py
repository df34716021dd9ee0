"""The Python API's connection to a cluster: blocking calls over accelpool's asynchronous API client.

`Cluster` holds `accelpool_core.kube.KubeClient` with `accelpool_core.credentials.Credentials` (a
kubeconfig and its context, the pod's ServiceAccount in-cluster, or a plain server URL: found as
`accelpool check` finds them) and runs its coroutines on an event loop of its own, in a daemon thread,
so the calls block the caller but work from a script and from a notebook alike (Jupyter's own loop is
already running there, where `asyncio.run` would refuse).

`Cluster.connect()` also makes the cluster the default one, as `kubernetes.config.load_kube_config()` sets
the Kubernetes client's default: a pool given no `cluster=` uses the cluster connected last
(`Cluster.default()`; none connected: the environment's, connected on first use). A cluster closes its
HTTP session and stops its thread on `close()`, at the end of a `with` block, when it is garbage
collected, or when the program ends, so that a script that never calls `close()` ends without aiohttp's
"Unclosed client session" warnings.

The imperative shell of the SDK: `accelpool_sdk.pool` decides what to send and how to judge what comes
back (`accelpool_sdk.waiting`).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Coroutine
from typing import Any, Self, TypeVar

import accelpool_api as api
from accelpool_core.credentials import Credentials
from accelpool_core.kube import GoneError, JsonObject, KubeClient
from accelpool_sdk.errors import PoolGoneError

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
FIELD_MANAGER = "accelpool-sdk"
"""Server-side apply's field manager: the fields the Python API sets are its own."""
USER_AGENT = "accelpool-sdk"
T = TypeVar("T")


_default: Cluster | None = None
"""The cluster pools use when given none (`Cluster.default()`): the one `Cluster.connect()` made last."""
_default_lock = threading.Lock()


class Cluster:
    """A Kubernetes API server, spoken to with blocking calls (an event loop in a thread of its own)."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0) -> None:
        self.credentials = credentials
        self._client = KubeClient(credentials, timeout=timeout, user_agent=USER_AGENT)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="accelpool-sdk", daemon=True)
        self._thread.start()
        # Runs once: on close(), when the cluster is collected, or at exit (while the daemon thread still runs).
        self._closer = weakref.finalize(self, _shut_down, self._loop, self._thread, self._client)

    @classmethod
    def connect(cls, kubeconfig: str | None = None, *, context: str | None = None, server: str | None = None) -> Self:
        """Connect to a cluster, and make it the default one: pools given no `cluster=` use it from now on
        (as `kubernetes.config.load_kube_config()` sets the Kubernetes client's default; a later `connect()`
        takes over, and a pool given `cluster=` keeps its own).

        Where: a plain `server` URL (no authentication, e.g. `make demo`'s emulated cluster), else the
        kubeconfig's `context` (default: its current one), else in-cluster, else $KUBECONFIG or ~/.kube/config.
        The cluster closes itself when the program ends; `close()` or `with` closes it sooner."""
        global _default
        if context is not None and server is None:
            cluster = cls(Credentials.from_kubeconfig(kubeconfig, context))
        else:
            cluster = cls(Credentials.discover(kubeconfig, server))
        with _default_lock:
            _default = cluster
        return cluster

    @classmethod
    def default(cls) -> Cluster:
        """The cluster pools use when given none: the one connected last (`connect()`), else the
        environment's (in-cluster, $KUBECONFIG or ~/.kube/config), connected now and kept as the default."""
        global _default
        with _default_lock:
            if _default is None:
                _default = cls(Credentials.discover())
            return _default

    @property
    def server(self) -> str:
        return self.credentials.server

    @property
    def closed(self) -> bool:
        return not self._closer.alive

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Cluster({self.server!r}{', closed' if self.closed else ''})"

    def close(self) -> None:
        """Close the HTTP session and stop the loop's thread (again: nothing). A closed cluster refuses calls,
        as the default one too: `Cluster.connect()` again for a new default."""
        self._closer()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        if self.closed:
            coroutine.close()
            raise RuntimeError(f"{self!r} is closed: ap.Cluster.connect() again, or pass a connected cluster=")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result()

    # ------------------------------------------------------------ ComputePools

    def get_pool(self, name: str) -> JsonObject | None:
        return self._run(self._client.get_or_none(f"{POOLS}/{name}"))

    def apply_pool(self, body: JsonObject) -> JsonObject:
        """Server-side apply of the whole intent: creates the pool, or updates the fields this API set."""
        return self._run(self._client.apply(f"{POOLS}/{body['metadata']['name']}", body, field_manager=FIELD_MANAGER))

    def delete_pool(self, name: str) -> None:
        """Asks for deletion (the operator's finalizer holds the pool until it has released its nodes)."""
        self._run(self._client.delete(f"{POOLS}/{name}"))

    def next_change(self, name: str, resource_version: str, timeout_seconds: int) -> JsonObject | None:
        """The pool after its next change since `resource_version`; None when none came within the timeout."""
        return self._run(self._next_change(name, resource_version, max(1, timeout_seconds)))

    async def _next_change(self, name: str, resource_version: str, timeout_seconds: int) -> JsonObject | None:
        events = self._client.watch(
            POOLS,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            field_selector=f"metadata.name={name}",
        )
        try:
            async with contextlib.aclosing(events):  # the watch's response is released on return, not when collected
                async for event in events:
                    if event.get("type") == "DELETED":
                        raise PoolGoneError(f"ComputePool {name} was deleted")
                    if event.get("type") in ("ADDED", "MODIFIED"):
                        found: JsonObject = event["object"]
                        return found
        except GoneError:
            pass  # the resourceVersion is too old: the caller reads the pool again
        return None


def _shut_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread, client: KubeClient) -> None:
    """Close the client's HTTP session on its loop, stop the loop and its thread. Holds no reference to the
    `Cluster` (a `weakref.finalize` callback): it runs on `close()`, on collection, or at exit."""
    if threading.current_thread() is thread:
        loop.call_soon(loop.stop)  # collected on its own loop's thread: it cannot wait for itself there
        return
    if thread.is_alive():
        asyncio.run_coroutine_threadsafe(client.close(), loop).result()
        loop.call_soon_threadsafe(loop.stop)
        thread.join()
    loop.close()
