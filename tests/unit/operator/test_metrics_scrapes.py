"""The operator's /metrics: a crowd of scrapers costs one render, made off the event loop.

The collector is held in its render until released, so "one render" and "the loop serves others
meanwhile" follow from events, not timings; the timeouts only keep a broken build from hanging.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import aiohttp
import pytest
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client.core import Metric

from accelpool.runtime import metrics

HANG_GUARD_SECONDS = 60.0
SCRAPERS = 50


class HeldCollect:
    """`OperatorCollector.collect` held in its thread until released; notes calls on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.entered = asyncio.Event()
        self.release = threading.Event()
        self.calls = 0
        self.on_loop = 0
        self._collect = metrics.OperatorCollector.collect

    def __call__(self, collector: metrics.OperatorCollector) -> Iterator[Metric]:
        self.calls += 1
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.loop.call_soon_threadsafe(self.entered.set)
            self.release.wait(HANG_GUARD_SECONDS)
        else:
            self.on_loop += 1  # waiting here would block the loop for good: note it and go on
            self.entered.set()
        yield from self._collect(collector)


async def test_concurrent_scrapes_share_one_render_made_off_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    held = HeldCollect(asyncio.get_running_loop())
    monkeypatch.setattr(metrics.OperatorCollector, "collect", lambda collector: held(collector))
    state = metrics.OperatorMetrics()
    state.observe_pass(0.2, ok=True)
    # A cache window longer than the test: scrapers whose connections land after the render are
    # served from it on a loaded machine too, so "one render" does not depend on timing.
    app = metrics.application(state, cache_seconds=3600)
    scrapers = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))  # one connection each
    async with TestClient(TestServer(app)) as client, scrapers:
        try:
            scrapes = [asyncio.create_task(scrapers.get(client.make_url("/metrics"))) for _ in range(SCRAPERS)]
            await asyncio.wait_for(held.entered.wait(), HANG_GUARD_SECONDS)
            assert held.on_loop == 0, "rendered on the event loop"

            # While the render is held, the loop goes on: a coroutine runs, the counters move.
            other = asyncio.Event()
            asyncio.get_running_loop().call_soon(other.set)
            await asyncio.wait_for(other.wait(), HANG_GUARD_SECONDS)
            state.observe_pass(0.3, ok=False)  # after the snapshot: not in this render
            assert not any(scrape.done() for scrape in scrapes)
        finally:
            held.release.set()
        responses: list[Any] = await asyncio.wait_for(asyncio.gather(*scrapes), HANG_GUARD_SECONDS)
        assert {response.status for response in responses} == {200}
        bodies = {await response.text() for response in responses}
        assert len(bodies) == 1
        assert 'accelpool_reconcile_total{result="success"} 1.0' in bodies.pop()
        assert held.calls == 1  # one render for every scraper


def test_a_snapshot_does_not_move_with_the_counters() -> None:
    state = metrics.OperatorMetrics()
    state.remediations[("p", "taint")] += 1
    snapshot = state.snapshot()
    state.remediations[("p", "taint")] += 1
    state.remediations[("q", "cordon")] += 1
    state.observe_pass(0.1, ok=True)
    assert snapshot.remediations == {("p", "taint"): 1}
    assert snapshot.duration_count == 0
    assert sum(snapshot.duration_buckets) == 0
