"""An informer: one collection kept by name, current through one list and then one watch.

Used for the Nodes (`nodewatch.py`) and the agents' DaemonSets, pods and Events (`agentwatch.py`).
How it works and why: docs/design/node-watch.md.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any, Generic, TypeVar

from accelpool.runtime.controller.apiserver import TRANSIENT
from accelpool_core.kube import ApiError, GoneError, KubeClient

log = logging.getLogger("accelpool.runtime.controller")

_T = TypeVar("_T")
WATCH_TIMEOUT_SECONDS = 300
"""How long one watch request lasts before it is resumed (the API server ends it then)."""
BACKOFF_START, BACKOFF_MAX = 1.0, 30.0
FORBIDDEN = 403


class Informer(Generic[_T]):
    """The objects of one collection (`path`, narrowed by selectors) as `parse` makes them, by name.

    `parse(body, last)` is lent the object's last parsed value (None: none) and returns None for an object
    not to keep (the API server's selectors applied again, or what they cannot express). Each change is
    reported to `on_change(name, value)` (None: gone); `on_listed()` follows every list. Where the watch is
    forbidden (RBAC that grants list alone) and `poll_seconds` is given, the collection is listed again that
    often instead."""

    def __init__(
        self,
        client: KubeClient,
        path: str,
        parse: Callable[[Mapping[str, Any], _T | None], _T | None],
        on_change: Callable[[str, _T | None], None],
        *,
        what: str,
        on_listed: Callable[[], None] = lambda: None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        poll_seconds: float | None = None,
    ) -> None:
        self._client = client
        self._path = path
        self._parse = parse
        self._on_change = on_change
        self._on_listed = on_listed
        self._what = what
        self._selectors = {
            key: value for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if value
        }
        self._poll_seconds = poll_seconds
        self._polling = False
        self._version: str | None = None
        self.items: dict[str, _T] = {}
        self.listed = False
        """Whether a list has come in (`items` holds the collection)."""
        self.tried = asyncio.Event()
        """Set once the first list has come in or failed."""
        self.events = 0
        """Watch events handled (ADDED, MODIFIED, DELETED), for /metrics and the benchmarks."""

    async def run(self) -> None:
        """List, then watch (or poll), until cancelled; errors are logged and retried, never raised."""
        backoff = BACKOFF_START
        while True:
            try:
                if self._version is None:
                    await self._list()
                if self._polling:
                    assert self._poll_seconds is not None
                    await asyncio.sleep(self._poll_seconds)
                    self._version = None
                    continue
                await self._watch()
                backoff = BACKOFF_START
            except GoneError:
                self.tried.set()
                log.info("the %s watch's resourceVersion expired; listing again", self._what)
                self._version = None
            except TRANSIENT as error:
                self.tried.set()
                if self._forbidden_watch(error):
                    continue
                log.warning("the %s list or watch failed (%s); resuming in %.0f s", self._what, error, backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, BACKOFF_MAX)

    def _forbidden_watch(self, error: BaseException) -> bool:
        """A watch refused 403 after a list went through: poll instead, where a poll interval is given."""
        if not (isinstance(error, ApiError) and error.status == FORBIDDEN and self.listed):
            return False
        if self._poll_seconds is None or self._polling:
            return False
        log.warning(
            "watching %s is forbidden (%s): listing them every %.0f s instead; grant watch as the chart does",
            self._what,
            error,
            self._poll_seconds,
        )
        self._polling = True
        return True

    async def _list(self) -> None:
        listed = await self._client.request("GET", self._path, params=self._selectors or None)
        found: dict[str, _T] = {}
        for body in listed.get("items") or []:
            name = _name(body)
            value = self._parse(body, self.items.get(name))
            if value is not None:
                found[name] = value
        gone = set(self.items) - set(found)
        self.items = found
        self._version = str((listed.get("metadata") or {}).get("resourceVersion") or "0")
        self.listed = True
        self.tried.set()
        for name in gone:
            self._on_change(name, None)
        for name, value in found.items():
            self._on_change(name, value)
        self._on_listed()

    async def _watch(self) -> None:
        assert self._version is not None
        async for event in self._client.watch(
            self._path,
            resource_version=self._version,
            timeout_seconds=WATCH_TIMEOUT_SECONDS,
            label_selector=self._selectors.get("labelSelector"),
            field_selector=self._selectors.get("fieldSelector"),
        ):
            self.handle(event)

    def handle(self, event: Mapping[str, Any]) -> None:
        """One watch event: the item updated (or removed) and the change reported."""
        body = event.get("object") or {}
        version = (body.get("metadata") or {}).get("resourceVersion")
        if version:
            self._version = str(version)
        kind = event.get("type")
        if kind not in ("ADDED", "MODIFIED", "DELETED"):
            return  # BOOKMARK: only the resourceVersion moves
        self.events += 1
        name = _name(body)
        value = None if kind == "DELETED" else self._parse(body, self.items.get(name))
        if value is None:
            if self.items.pop(name, None) is None and kind != "DELETED":
                return  # never kept: nothing changed
        else:
            self.items[name] = value
        self._on_change(name, value)


def _name(body: Mapping[str, Any]) -> str:
    return str((body.get("metadata") or {}).get("name", ""))
