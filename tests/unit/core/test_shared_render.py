"""`SharedRender`: callers that arrive during a render share it; it runs off the event loop."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from accelpool_core.shared_render import SharedRender

HANG_GUARD_SECONDS = 60.0


async def test_concurrent_callers_share_one_render_in_its_thread() -> None:
    loop = asyncio.get_running_loop()
    entered = asyncio.Event()
    release = threading.Event()
    threads: list[str] = []
    prepared = 0

    def render() -> bytes:
        threads.append(threading.current_thread().name)
        loop.call_soon_threadsafe(entered.set)
        release.wait(HANG_GUARD_SECONDS)
        return b"rendered"

    def prepare() -> Callable[[], bytes]:
        nonlocal prepared
        prepared += 1
        return render

    shared = SharedRender[bytes](cache_seconds=0.0, thread_name="test-render")
    try:
        callers = [asyncio.create_task(shared.get("text", prepare)) for _ in range(20)]
        await asyncio.wait_for(entered.wait(), HANG_GUARD_SECONDS)  # every caller has joined by now
        assert not any(caller.done() for caller in callers)
        callers[0].cancel()  # a caller giving up does not cancel the others' render
        release.set()
        results = await asyncio.gather(*callers[1:])
        assert results == [b"rendered"] * 19
        assert (prepared, shared.renders) == (1, 1)
        assert threads[0].startswith("test-render")

        # With no cache, a caller after the render gets a new one.
        assert await shared.get("text", prepare) == b"rendered"
        assert (prepared, shared.renders) == (2, 2)
    finally:
        release.set()
        shared.close()
