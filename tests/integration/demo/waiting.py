"""Waiting on the running demo for what a test needs to happen, never for how long it takes.

The demo is real processes on real time (the operator, an agent per node, the simulated kubelet and NVIDIA
components): on a loaded machine each step takes longer, and a deadline of a minute or two would decide
the verdict. So a wait ends when its condition holds; `SAFETY_SECONDS` only stops a wait that would
never end (a hang guard, far longer than any step takes even under load), and `HANG_GUARD` does the
same for a whole test. A state that may last only a moment is waited for on a watch (`first_version`),
which sees every version of the object, rather than by polling, which could miss it.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
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
