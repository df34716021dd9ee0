"""The controller's own informer of Nodes: one list, then one watch, kept as `NodeView`s by name.

How it works and why: docs/design/node-watch.md.
"""

from __future__ import annotations

from collections.abc import Callable

from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision
from accelpool.runtime.controller.informer import Informer
from accelpool_core.kube import KubeClient

NODES = "/api/v1/nodes"


class NodeWatch:
    """Every Node as a `NodeView`, kept current by a watch (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        on_change: Callable[[str, NodeView | None], None],
        on_listed: Callable[[], None],
    ) -> None:
        self._on_change = on_change
        self._informer = Informer(client, NODES, NodeView.from_body, self._changed, what="node", on_listed=on_listed)
        self._published: Revision[NodeView] = Revision()
        self._touched: set[str] = set()
        """Names whose views changed since `views` was last called."""

    @property
    def events(self) -> int:
        """Watch events handled (ADDED, MODIFIED, DELETED), for /metrics and the benchmarks."""
        return self._informer.events

    def views(self) -> Revision[NodeView]:
        """The nodes as last seen, by name (read synchronously by a pass's snapshot): a revision of the one the
        previous call returned, so the snapshot compares only the nodes that changed in between."""
        if self._touched:
            views = self._informer.items
            self._published = self._published.revised({name: views.get(name) for name in self._touched})
            self._touched = set()
        return self._published

    async def run(self) -> None:
        """List, then watch, until cancelled; errors are logged and retried, never raised."""
        await self._informer.run()

    def _changed(self, name: str, view: NodeView | None) -> None:
        self._touched.add(name)
        self._on_change(name, view)
