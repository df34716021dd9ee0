"""The controller's own informer of Nodes: one list, then one watch, kept as `NodeView`s by name.

How it works and why: docs/design/node-watch.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision
from accelpool.runtime.controller.apiserver import TRANSIENT
from accelpool_core.kube import GoneError, KubeClient

log = logging.getLogger("accelpool.runtime.controller")

NODES = "/api/v1/nodes"
WATCH_TIMEOUT_SECONDS = 300
"""How long one watch request lasts before it is resumed (the API server ends it then)."""
BACKOFF_START, BACKOFF_MAX = 1.0, 30.0


class NodeWatch:
    """Every Node as a `NodeView`, kept current by a watch (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        on_change: Callable[[str, NodeView | None], None],
        on_listed: Callable[[], None],
    ) -> None:
        self._client = client
        self._on_change = on_change
        self._on_listed = on_listed
        self._views: dict[str, NodeView] = {}
        self._published: Revision[NodeView] = Revision()
        self._touched: set[str] = set()
        """Names whose views changed since `views` was last called."""
        self._version: str | None = None
        self.events = 0
        """Watch events handled (ADDED, MODIFIED, DELETED), for /metrics and the benchmarks."""

    def views(self) -> Revision[NodeView]:
        """The nodes as last seen, by name (read synchronously by a pass's snapshot): a revision of the one the
        previous call returned, so the snapshot compares only the nodes that changed in between."""
        if self._touched:
            views = self._views
            self._published = self._published.revised({name: views.get(name) for name in self._touched})
            self._touched = set()
        return self._published

    async def run(self) -> None:
        """List, then watch, until cancelled; errors are logged and retried, never raised."""
        backoff = BACKOFF_START
        while True:
            try:
                if self._version is None:
                    await self._list()
                await self._watch()
                backoff = BACKOFF_START
            except GoneError:
                log.info("the node watch's resourceVersion expired; listing the nodes again")
                self._version = None
            except TRANSIENT as error:
                log.warning("the node watch failed (%s); resuming in %.0f s", error, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    async def _list(self) -> None:
        listed = await self._client.request("GET", NODES)
        views = {view.name: view for view in map(NodeView.from_body, listed.get("items") or [])}
        gone = set(self._views) - set(views)
        self._touched.update(gone, views)
        self._views = views
        self._version = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
        for name in gone:
            self._on_change(name, None)
        for name, view in views.items():
            self._on_change(name, view)
        self._on_listed()

    async def _watch(self) -> None:
        assert self._version is not None
        async for event in self._client.watch(
            NODES, resource_version=self._version, timeout_seconds=WATCH_TIMEOUT_SECONDS
        ):
            self._handle(event)

    def _handle(self, event: dict[str, Any]) -> None:
        body = event.get("object") or {}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self._version = str(version)
        kind = event.get("type")
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only the resourceVersion moves
        self.events += 1
        name = str((body.get("metadata") or {}).get("name", ""))
        self._touched.add(name)
        if kind == "DELETED":
            self._views.pop(name, None)
            self._on_change(name, None)
            return
        view = NodeView.from_body(body, self._views.get(name))
        self._views[name] = view
        self._on_change(name, view)
