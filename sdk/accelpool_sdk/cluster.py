"""The Python API's connection to a cluster: blocking calls over accelpool's asynchronous API client.

`Cluster` holds `accelpool_core.kube.KubeClient` with `accelpool_core.credentials.Credentials` (a
kubeconfig and its context, the pod's ServiceAccount in-cluster, or a plain server URL: found as
`accelpool check` finds them) and runs its coroutines on an event loop of its own, in a daemon thread,
so the calls block the caller but work from a script and from a notebook alike (Jupyter's own loop is
already running there, where `asyncio.run` would refuse).

The imperative shell of the SDK: `accelpool_sdk.pool` decides what to send and how to judge what comes
back (`accelpool_sdk.waiting`).
"""

from __future__ import annotations

import asyncio
import threading
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


class Cluster:
    """A Kubernetes API server, spoken to with blocking calls (an event loop in a thread of its own)."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0) -> None:
        self.credentials = credentials
        self._client = KubeClient(credentials, timeout=timeout, user_agent=USER_AGENT)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="accelpool-sdk", daemon=True)
        self._thread.start()

    @classmethod
    def connect(cls, kubeconfig: str | None = None, *, context: str | None = None, server: str | None = None) -> Self:
        """A plain `server` URL, else the kubeconfig's `context` (default: its current one), else in-cluster,
        else $KUBECONFIG or ~/.kube/config."""
        if context is not None and server is None:
            return cls(Credentials.from_kubeconfig(kubeconfig, context))
        return cls(Credentials.discover(kubeconfig, server))

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the HTTP session and stop the loop's thread."""
        if self._loop.is_closed():
            return
        self._run(self._client.close())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
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
        try:
            async for event in self._client.watch(
                POOLS,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                field_selector=f"metadata.name={name}",
            ):
                if event.get("type") == "DELETED":
                    raise PoolGoneError(f"ComputePool {name} was deleted")
                if event.get("type") in ("ADDED", "MODIFIED"):
                    found: JsonObject = event["object"]
                    return found
        except GoneError:
            pass  # the resourceVersion is too old: the caller reads the pool again
        return None
