"""Waiting on the running demo for what a test needs to happen, never for how long it takes.

The demo is real processes on real time (the operator, an agent per node, the simulated kubelet and NVIDIA
components): on a loaded machine each step takes longer, and a deadline of a minute or two would decide
the verdict. So a wait ends when its condition holds; `SAFETY_SECONDS` only stops a wait that would
never end (a hang guard, far longer than any step takes even under load), and `HANG_GUARD` does the
same for a whole test. A state that may last only a moment is waited for on a watch (`first_version`),
which sees every version of the object, rather than by polling, which could miss it; `recorded` keeps every
version of a whole collection, so what an object was when another was written can be told afterwards.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from accelpool_core.kube import GoneError, KubeClient

SAFETY_SECONDS = 300.0
"""How long one wait may take before the test fails: not a timing, a guard against waiting forever."""
HANG_GUARD = pytest.mark.timeout(1200)
"""A demo test's pytest-timeout: several waits, each bounded by `SAFETY_SECONDS`."""
POLL_SECONDS = 0.25


@contextlib.asynccontextmanager
async def hang_guard(what: str) -> AsyncIterator[None]:
    try:
        async with asyncio.timeout(SAFETY_SECONDS):
            yield
    except TimeoutError:
        raise AssertionError(f"still waiting after {SAFETY_SECONDS:g} s (a hang guard): {what}") from None


async def eventually(check: Callable[[], Awaitable[bool]], what: str) -> None:
    """Until `check()` is true (it reads the cluster's state anew each time)."""
    async with hang_guard(what):
        while not await check():  # noqa: ASYNC110 (read over HTTP and from processes: no event to wait on)
            await asyncio.sleep(POLL_SECONDS)


async def first_version(
    client: KubeClient,
    collection: str,
    name: str,
    check: Callable[[dict[str, Any]], bool],
    what: str,
    *,
    after: str | None = None,
) -> dict[str, Any]:
    """The first version of `collection`/`name` that `check` accepts: the one stored now or any later one, or
    (`after`: a resourceVersion) any one stored after that. Every version the API server stores is seen (a
    watch, resumed from the last version seen), so a state that lasts only a moment is not missed."""
    path = f"{collection}/{name}"
    async with hang_guard(what):
        if after is None:
            current = await client.get(path)
            if check(current):
                return current
            after = str(current["metadata"]["resourceVersion"])
        while True:
            try:
                async for event in client.watch(
                    collection, resource_version=after, timeout_seconds=60, field_selector=f"metadata.name={name}"
                ):
                    obj: dict[str, Any] = event["object"]
                    after = str(obj["metadata"]["resourceVersion"])
                    if event["type"] in ("ADDED", "MODIFIED") and obj["metadata"].get("name") == name and check(obj):
                        return obj
            except GoneError:  # too far behind the watch cache: on from the object as stored now
                current = await client.get(path)
                if check(current):
                    return current
                after = str(current["metadata"]["resourceVersion"])


Version = tuple[int, dict[str, Any] | None]
"""(resourceVersion, the object as stored then; None once deleted)."""


@dataclass
class History:
    """Every version of a collection's objects the API server stored from a list onward, by name, in order.

    The demo's API server gives resourceVersions from one counter for every kind (as etcd's revision does),
    so the versions of two collections can be interleaved: `as_of(name, version)` is what an object was when
    some other object got `version`. A watch resumed from the last version seen keeps it up to date;
    `gaps` counts the times it fell behind what the API server keeps (410), each time listed again.
    """

    collection: str
    versions: dict[str, list[Version]] = field(default_factory=dict)
    gaps: int = 0
    _changed: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, obj: dict[str, Any], *, deleted: bool = False) -> None:
        name = str(obj["metadata"]["name"])
        version = int(obj["metadata"]["resourceVersion"])
        known = self.versions.setdefault(name, [])
        if not known or known[-1][0] < version:
            known.append((version, None if deleted else obj))
        self._changed.set()
        self._changed = asyncio.Event()

    def latest(self, name: str) -> dict[str, Any] | None:
        known = self.versions.get(name) or []
        return known[-1][1] if known else None

    def as_of(self, name: str, version: int) -> dict[str, Any] | None:
        """The object as stored when the API server was at `version` (None: not there then)."""
        found: dict[str, Any] | None = None
        for stored, obj in self.versions.get(name) or []:
            if stored > version:
                break
            found = obj
        return found

    def all(self, name: str) -> list[Version]:
        return list(self.versions.get(name) or [])

    async def until(self, check: Callable[[History], bool], what: str) -> None:
        """Until `check(self)` holds, looked at after every version the watch brings."""
        async with hang_guard(what):
            while not check(self):
                await self._changed.wait()

    async def complete(self, client: KubeClient) -> int:
        """A resourceVersion up to which this history holds every version of every object: a fresh list's,
        once the watch has brought each listed object's version."""
        listed = await client.request("GET", self.collection)
        version = int(listed["metadata"]["resourceVersion"])
        wanted = {str(o["metadata"]["name"]): int(o["metadata"]["resourceVersion"]) for o in listed["items"]}

        def caught_up(history: History) -> bool:
            return all((history.versions.get(n) or [(0, None)])[-1][0] >= v for n, v in wanted.items())

        await self.until(caught_up, f"the watch of {self.collection} brings what a list shows")
        return version


@contextlib.asynccontextmanager
async def recorded(client: KubeClient, collection: str) -> AsyncIterator[History]:
    """A `History` of `collection` from now on, kept by a watch until the block ends."""
    history = History(collection)
    listed = await client.request("GET", collection)
    for obj in listed["items"]:
        history.record(obj)
    after = str(listed["metadata"]["resourceVersion"])

    async def follow() -> None:
        nonlocal after
        while True:
            try:
                async for event in client.watch(collection, resource_version=after, timeout_seconds=60):
                    obj: dict[str, Any] = event["object"]
                    after = str(obj["metadata"]["resourceVersion"])
                    if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                        history.record(obj, deleted=event["type"] == "DELETED")
            except GoneError:  # fell behind the API server's window: list again, and say so
                history.gaps += 1
                again = await client.request("GET", collection)
                for obj in again["items"]:
                    history.record(obj)
                after = str(again["metadata"]["resourceVersion"])

    task = asyncio.create_task(follow())
    try:
        yield history
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
