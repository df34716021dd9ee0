"""Watch events, as the API server's watch cache keeps and sends them.

Every write is one event numbered by the resourceVersion it gave the object. A watch from a
resourceVersion gets every later event of its resource and namespace that its selectors let through;
an object that starts or stops matching the selectors is sent as ADDED or DELETED (with the object as it
last matched), as the API server's filtered watch does (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go).
A watch from a version older than the oldest kept is told `410 Expired` ("too old resource version"), so the
client lists again.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_demo.apiserver.selectors import Matcher

EVENTS_KEPT = 10_000
"""Events kept for watches that resume from a resourceVersion (the watch cache's capacity)."""


@dataclass(frozen=True)
class Event:
    version: int
    resource: kmock.resource
    type: str
    """ADDED, MODIFIED or DELETED."""
    object: dict[str, Any]
    previous: dict[str, Any] | None
    """The object before a MODIFIED event."""

    def seen_through(self, namespace: str | None, matches: Matcher) -> dict[str, Any] | None:
        """The event as a watch of `namespace` (None: all) with these selectors sees it, or None."""
        if namespace is not None and (self.object.get("metadata") or {}).get("namespace") != namespace:
            return None
        now = matches(self.object)
        before = self.previous is not None and matches(self.previous)
        if self.type != "MODIFIED" or now == before:
            return {"type": self.type, "object": self.object} if now else None
        if now:
            return {"type": "ADDED", "object": self.object}
        # the object as the watch last saw it, at this event's resourceVersion (cacher's `convertToWatchEvent`)
        assert self.previous is not None
        gone = {
            **self.previous,
            "metadata": {**(self.previous.get("metadata") or {}), "resourceVersion": str(self.version)},
        }
        return {"type": "DELETED", "object": gone}


def expired(version: int, oldest: int) -> dict[str, Any]:
    message = f"too old resource version: {version} ({oldest})"
    status = {"apiVersion": "v1", "kind": "Status", "metadata": {}, "status": "Failure", "message": message}
    return {"type": "ERROR", "object": {**status, "reason": "Expired", "code": 410}}


class EventLog:
    """The most recent events, and a way to wait for the next one."""

    def __init__(self, capacity: int = EVENTS_KEPT) -> None:
        self._events: collections.deque[Event] = collections.deque(maxlen=capacity)
        self._next = asyncio.Event()
        self.forgotten = 0
        """The version of the newest event no longer kept (0: none forgotten)."""

    def publish(self, event: Event) -> None:
        if len(self._events) == self._events.maxlen:
            self.forgotten = self._events[0].version
        self._events.append(event)
        self._next.set()
        self._next = asyncio.Event()

    def after(self, version: int, resource: kmock.resource) -> tuple[list[Event], int]:
        """The kept events of `resource` newer than `version`, oldest first, and the newest version
        kept (where a watcher of `resource` looks from next, whatever the events were about)."""
        newer = []
        for event in reversed(self._events):
            if event.version <= version:
                break
            if event.resource == resource:
                newer.append(event)
        return newer[::-1], max(version, self.latest())

    def until(self, version: int, resource: kmock.resource) -> list[Event] | None:
        """The kept events of `resource` up to `version`, oldest first; None when older ones were forgotten
        (what stood at `version` can no longer be told)."""
        if self.forgotten:
            return None
        return [e for e in self._events if e.version <= version and e.resource == resource]

    def latest(self) -> int:
        return self._events[-1].version if self._events else 0

    def upcoming(self) -> asyncio.Event:
        """Set when the next event is published (take it before reading `after`, so none is missed)."""
        return self._next


async def wait(published: asyncio.Event, seconds: float | None) -> None:
    """Until `published` is set (or `seconds` pass)."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(published.wait(), seconds)
