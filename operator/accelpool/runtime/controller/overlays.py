"""The operator's own recent writes, standing in for the watched indexes until their watches deliver them.

Three kinds, each read by `ClusterState`: a Node as a write (or a re-read after a 409) returned it, the
pools of a fresher list where kopf's pool index disagreed with it, and a pool's status as its write
stored it. An overlay stands in only while the index still shows what it showed when the write was sent,
and at most `OVERLAY_TTL_SECONDS`: an index that caught up, or that someone else changed, wins.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from accelpool.decide.inputs import PoolRecord
from accelpool.model.nodes import NodeView

OVERLAY_TTL_SECONDS = 30.0
"""How long a write's result stands in for an object the watch has not caught up with."""
_T = TypeVar("_T")


@dataclass
class Overlay(Generic[_T]):
    before: _T | None
    """What the index held when the write was sent."""
    after: _T
    """What the write's response says."""
    at: float

    def stands_in_for(self, indexed: _T | None, now: float) -> bool:
        """Whether the index still lags behind the write (neither caught up nor changed by someone else)."""
        return indexed != self.after and indexed == self.before and now - self.at <= OVERLAY_TTL_SECONDS


def same_pool(a: PoolRecord | None, b: PoolRecord | None) -> bool:
    """Whether two records of a pool say the same to planning (None: no such pool)."""
    if a is None or b is None:
        return a is b
    return (a.uid, a.spec_key, a.deleting, a.generation) == (b.uid, b.spec_key, b.deleting, b.generation)


class Overlays:
    """The three kinds of overlay; `clock` is the controller's."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._nodes: dict[str, Overlay[NodeView]] = {}
        self._pools: dict[str, PoolRecord | None] = {}
        self._pools_at = 0.0
        self._statuses: dict[str, Overlay[Mapping[str, Any]]] = {}

    # ------------------------------------------------------------ nodes

    def written_node(self, name: str) -> NodeView | None:
        """The node as this operator last wrote it, while that overlay is kept."""
        overlay = self._nodes.get(name)
        return overlay.after if overlay is not None else None

    def node_names(self) -> set[str]:
        """The nodes a write's result may still stand in for."""
        return set(self._nodes)

    def node(self, indexed: NodeView, now: float) -> NodeView:
        """The indexed node, or the write's result while the index lags behind it."""
        overlay = self._nodes.get(indexed.name)
        if overlay is None:
            return indexed
        if overlay.stands_in_for(indexed, now):
            return overlay.after
        del self._nodes[indexed.name]
        return indexed

    def remember_node(self, before: NodeView | None, after: NodeView) -> None:
        self._nodes[after.name] = Overlay(before=before, after=after, at=self._clock())

    # ------------------------------------------------------------ pools

    def pools(self, indexed: dict[str, PoolRecord]) -> dict[str, PoolRecord]:
        """The index's pools, overlaid with a fresher list until the index agrees (or the overlay expires)."""
        if self._pools and self._clock() - self._pools_at > OVERLAY_TTL_SECONDS:
            self._pools = {}
        for name, listed in list(self._pools.items()):
            if same_pool(indexed.get(name), listed):
                del self._pools[name]
            elif listed is None:
                indexed.pop(name, None)
            else:
                indexed[name] = listed
        return indexed

    @property
    def lists_pools(self) -> bool:
        """Whether a list's pools stand in for some of the index's (`pools` changes what it is given)."""
        return bool(self._pools)

    def listed_pools(self, listed: Mapping[str, PoolRecord | None]) -> None:
        """A list found these pools (None: deleted) where the index said otherwise."""
        self._pools = dict(listed)
        self._pools_at = self._clock()

    # ------------------------------------------------------------ statuses

    def status(self, record: PoolRecord) -> Mapping[str, Any]:
        """The pool's status as stored: the one this operator wrote until the index holds it, else the index's."""
        overlay = self._statuses.get(record.name)
        if overlay is None:
            return record.status
        if overlay.stands_in_for(record.status, self._clock()):
            return overlay.after
        del self._statuses[record.name]
        return record.status

    def remember_status(self, record: PoolRecord, written: Mapping[str, Any]) -> None:
        self._statuses[record.name] = Overlay(before=record.status, after=written, at=self._clock())

    # ------------------------------------------------------------ all

    def keep(self, nodes: Collection[str], pools: Collection[str]) -> None:
        """Forget the overlays of nodes and pools that are gone."""
        self._nodes = {n: o for n, o in self._nodes.items() if n in nodes}
        self._statuses = {n: o for n, o in self._statuses.items() if n in pools}

    def clear(self) -> None:
        self._nodes.clear()
        self._pools.clear()
        self._statuses.clear()
