"""A render made off the event loop and shared: what the operator's and the agent's `/metrics` use.

`SharedRender.get(key, prepare)` returns the latest result for `key`: a result made less than
`cache_seconds` ago (by the event loop's clock) is returned as it is; otherwise, when no render of
`key` is running, `prepare()` is called on the loop (to take a consistent snapshot of what the
loop mutates) and the callable it returns runs in the one dedicated thread; callers that arrive
while it runs await that same render. So a crowd of scrapers costs one render, and the loop
never runs one: it stays free for reconciliation and the health endpoints.

A caller that gives up (a scraper's timeout) does not cancel the render the others wait for.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, TypeVar

T = TypeVar("T")


class SharedRender(Generic[T]):
    """Renders in one thread of its own; concurrent callers share a render, reused for `cache_seconds`."""

    def __init__(self, *, cache_seconds: float = 1.0, thread_name: str = "accelpool-render") -> None:
        self.cache_seconds = cache_seconds
        self.renders = 0
        """Renders finished (or failed) so far."""
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=thread_name)
        self._cached: dict[Hashable, tuple[float, T]] = {}
        self._pending: dict[Hashable, asyncio.Future[T]] = {}

    async def get(self, key: Hashable, prepare: Callable[[], Callable[[], T]]) -> T:
        """The result for `key`: cached, the render under way, or a new one of what `prepare()` returns."""
        loop = asyncio.get_running_loop()
        cached = self._cached.get(key)
        if cached is not None and loop.time() - cached[0] < self.cache_seconds:
            return cached[1]
        pending = self._pending.get(key)
        if pending is None:
            pending = loop.run_in_executor(self._executor, prepare())
            self._pending[key] = pending
            pending.add_done_callback(lambda done: self._finished(key, done, loop.time()))
        return await asyncio.shield(pending)

    def _finished(self, key: Hashable, done: asyncio.Future[T], at: float) -> None:
        self._pending.pop(key, None)
        self.renders += 1
        if not done.cancelled() and done.exception() is None:
            self._cached[key] = (at, done.result())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
