"""Health and telemetry stay responsive whatever the checks and the scrapers do.

- Every GPU hung and a crowd of slow scrapers: /healthz and /readyz still answer, the telemetry
  tick still runs, check waits run in the agent's own threads, and the scrapers share one render
  made off the event loop.
- SIGTERM during a hung check: the agent exits and its compute children are gone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import aiohttp
from aiohttp.test_utils import TestClient, TestServer
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from accelpool_agent.compute import ComputeJob
from accelpool_agent.compute.runner import timed_out
from accelpool_agent.daemon import Daemon
from accelpool_agent.model import Measurement
from accelpool_agent.server import MetricsRenderer, make_app
from accelpool_core.protocol import AgentConfig

from .conftest import make_fake_agent


class HungRunner:
    """Compute children that never answer: each run blocks its thread until released."""

    def __init__(self, loop: asyncio.AbstractEventLoop, gpus: int) -> None:
        self.loop = loop
        self.release = threading.Event()
        self.threads: list[str] = []
        self.all_hung: asyncio.Future[None] = loop.create_future()
        self.gpus = gpus

    def run(self, job: ComputeJob, timeout_seconds: float) -> list[Measurement]:
        self.threads.append(threading.current_thread().name)
        if len(self.threads) == self.gpus:
            self.loop.call_soon_threadsafe(self.all_hung.set_result, None)
        self.release.wait()
        return [timed_out(task, timeout_seconds) for task in job.tasks]

    def close(self) -> None:
        self.release.set()


class SlowCollector(Collector):
    """A collector that blocks until released, and notes whether it was called on the event loop."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.release = threading.Event()
        self.calls = 0
        self.on_loop = 0
        self.entered: asyncio.Future[None] = loop.create_future()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.calls += 1
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self.loop.call_soon_threadsafe(self._entered)
            self.release.wait()
        else:
            self.on_loop += 1  # rendering on the loop would block every endpoint: do not wait here
        yield GaugeMetricFamily("accelpool_test_slow", "a slow collector", value=1.0)

    def _entered(self) -> None:
        if not self.entered.done():
            self.entered.set_result(None)


async def test_health_answers_while_every_gpu_hangs_and_scrapers_pile_up() -> None:
    loop = asyncio.get_running_loop()
    config = AgentConfig(pool="p", check_timeout_seconds=600)
    agent = make_fake_agent("H100:8", config=config)
    runner = HungRunner(loop, gpus=8)
    agent.runner = runner
    daemon = Daemon(agent, reporter=None, telemetry_interval=2.0)
    registry = CollectorRegistry()
    collector = SlowCollector(loop)
    registry.register(collector)
    # A cache window longer than the test: scrapers whose connections land after the render are
    # served from it on a loaded machine too, so "one render" does not depend on timing.
    renderer = MetricsRenderer(registry, cache_seconds=3600)
    app = make_app(registry, daemon.liveness, daemon.readiness, renderer=renderer)
    scrapers = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0))  # one connection each
    async with TestClient(TestServer(app)) as client, scrapers:
        cycle = asyncio.create_task(agent.compute_cycle())
        await asyncio.wait_for(asyncio.shield(runner.all_hung), 60)  # a hang guard, not a timing
        assert all(name.startswith("accelpool-check") for name in runner.threads), runner.threads
        scrapes = [asyncio.create_task(scrapers.get(client.make_url("/metrics"))) for _ in range(200)]
        await asyncio.wait_for(asyncio.shield(collector.entered), 60)
        assert collector.on_loop == 0  # rendered off the loop

        report = await daemon.tick()  # the telemetry tick is not starved by the hung checks
        assert len(report.gpus) == 8
        health = await client.get("/healthz")
        ready = await client.get("/readyz")
        assert (health.status, ready.status) == (200, 200)
        assert not any(scrape.done() for scrape in scrapes)  # answered while every scrape waits

        collector.release.set()
        responses = await asyncio.gather(*scrapes)
        assert {r.status for r in responses} == {200}
        assert "accelpool_test_slow 1.0" in await responses[0].text()
        assert collector.calls == 1  # one render shared by all 200 scrapers

        runner.release.set()
        await cycle
        agent.stop_checks()


def children_of(pid: int) -> set[int]:
    found: set[int] = set()
    for task in Path(f"/proc/{pid}/task").iterdir():
        text = (task / "children").read_text().split()
        found.update(int(child) for child in text)
    return found


def compute_child(pid: int) -> bool:
    try:
        return "resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_text()
    except FileNotFoundError:
        return False


def running(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    state = next(line for line in status.splitlines() if line.startswith("State:"))
    return "Z" not in state.split()[1]  # a zombie is dead; its parent is gone and cannot reap it


async def test_sigterm_during_a_hung_check_stops_the_agent_and_its_children() -> None:
    """The hung checks would run for 10 minutes; SIGTERM must not wait for them."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "accelpool_agent",
        "run",
        "--backend",
        "fake",
        "--fake-gpus",
        "L4:2",
        "--fault",
        "all:hang",
        "--check-timeout",
        "600",
        "--no-report",
        "--listen",
        f"127.0.0.1:{port}",
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    try:
        children: set[int] = set()
        async with aiohttp.ClientSession() as session:
            for _ in range(300):  # wait for both compute children to be up and hanging
                children = {c for c in children_of(process.pid) if running(c) and compute_child(c)}
                if len(children) >= 2:
                    async with session.get(f"http://127.0.0.1:{port}/readyz") as response:
                        if response.status == 200:
                            break
                await asyncio.sleep(0.1)
        assert len(children) >= 2, children
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 25) == 0
        assert not [c for c in children if running(c)]
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
