"""Watches the agent's own Node, as the kubelet watches its own, to hear of check requests at once.

One list, then one long watch of `/api/v1/nodes?fieldSelector=metadata.name=<node>`: the API
server sends an event only when this node changes, so 10,000 agents cost it 10,000 idle watches
served from its watch cache (what 10,000 kubelets already cost it), not 10,000 polls. What the
watch does, after client-go's reflector (k8s.io/client-go/tools/cache/reflector.go):

- the first list asks for `resourceVersion=0` (served from the watch cache); the watch resumes
  from the newest resourceVersion seen (the list's, an event's, or a bookmark's);
- each watch asks the server to end it after 5 to 10 minutes (`timeoutSeconds`: the reflector's
  `minWatchTimeout` times 1 + a random fraction, so watches do not all end at once) and is
  started again from where it stopped;
- `410 Expired` (the resourceVersion is older than the server keeps) lists again, without a
  resourceVersion (a consistent read, as the reflector's relist after an expiry);
- an error, or a stream that ends without an event, waits before the next attempt: 0.8 s doubling
  to 30 s, each delay stretched by up to 100% at random (so 30-60 s at worst), back to 0.8 s
  after 2 minutes without a wait (the reflector's `NewExponentialBackoffManager(800ms, 30s, 2m,
  2.0, 1.0)`).

Every version of the node seen (listed, ADDED, MODIFIED) goes to the `on_node` callback.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import aiohttp

from accelpool_core.kube import ApiError, GoneError, KubeClient

log = logging.getLogger(__name__)

NODES = "/api/v1/nodes"
MIN_WATCH_TIMEOUT_SECONDS = 300.0
"""client-go's reflector `minWatchTimeout`: each watch lasts this long times 1 to 2."""


@dataclass
class Backoff:
    """Jittered exponential delays, reset after a quiet spell: client-go's `exponentialBackoffManagerImpl`
    (k8s.io/apimachinery/pkg/util/wait/backoff.go)."""

    initial: float = 0.8
    cap: float = 30.0
    reset_after: float = 120.0
    factor: float = 2.0
    jitter: float = 1.0
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    _delay: float = field(default=0.0, init=False)
    _last: float | None = field(default=None, init=False)

    def next(self) -> float:
        """The next delay in seconds."""
        now = self.clock()
        if self._last is None or now - self._last > self.reset_after:
            self._delay = self.initial
        self._last = now
        delay = self._delay
        self._delay = min(self._delay * self.factor, self.cap)
        return delay + self.rng.random() * self.jitter * delay


class NodeWatch:
    """List-then-watch of one Node by name; runs until cancelled."""

    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        *,
        min_timeout_seconds: float = MIN_WATCH_TIMEOUT_SECONDS,
        backoff: Backoff | None = None,
        rng: random.Random | None = None,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.min_timeout_seconds = min_timeout_seconds
        self.backoff = backoff or Backoff()
        self._rng = rng or random.Random()
        self._selector = f"metadata.name={node_name}"
        self.lists = 0
        """Lists made so far (the first, and one after each expiry)."""
        self.watches = 0
        """Watch requests made so far."""

    async def run(self, on_node: Callable[[Mapping[str, Any]], None]) -> None:
        version: str | None = None
        consistent = False
        while True:
            try:
                if version is None:
                    version = await self._list(on_node, consistent=consistent)
                version, events = await self._watch(version, on_node)
            except GoneError as error:
                log.info("watch of node %s expired, listing it again: %s", self.node_name, error.message)
                version, consistent = None, True
            except (ApiError, aiohttp.ClientError, TimeoutError, ValueError) as error:
                log.warning("watching node %s failed, trying again: %s", self.node_name, error)
            else:
                if events:
                    continue  # ended by its timeout (or the server): watch again from where it stopped
            await asyncio.sleep(self.backoff.next())

    async def _list(self, on_node: Callable[[Mapping[str, Any]], None], *, consistent: bool) -> str:
        params = {"fieldSelector": self._selector}
        if not consistent:
            params["resourceVersion"] = "0"
        listed = await self.client.request("GET", NODES, params=params)
        self.lists += 1
        for node in listed.get("items") or []:
            on_node(node)
        return str((listed.get("metadata") or {}).get("resourceVersion") or "0")

    async def _watch(self, version: str, on_node: Callable[[Mapping[str, Any]], None]) -> tuple[str, int]:
        """Watch from `version` until the stream ends; the newest version seen and the events read."""
        timeout = int(self.min_timeout_seconds * (1.0 + self._rng.random()))
        self.watches += 1
        events = 0
        async for event in self.client.watch(
            NODES, resource_version=version, timeout_seconds=timeout, field_selector=self._selector
        ):
            events += 1
            node = event.get("object") or {}
            version = str((node.get("metadata") or {}).get("resourceVersion") or version)
            if event.get("type") in ("ADDED", "MODIFIED"):
                on_node(node)
        return version, events
