"""The daemon's loops on loop time (looptime), its HTTP endpoints, and what it hands the reporter."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from aiohttp.test_utils import TestClient, TestServer

from accelpool_agent.check_requests import CheckRequests
from accelpool_agent.daemon import Daemon
from accelpool_agent.metrics import build_registry
from accelpool_agent.model import NodeReport
from accelpool_agent.server import make_app, parse_listen
from accelpool_agent.snapshot import ReportStats
from accelpool_core.protocol import AgentConfig, HealthReport, HealthStatus

from .conftest import make_fake_agent


class LoopClock:
    """Wall and monotonic time that follow the event loop's (fake) time, readable from threads too."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()

    def time(self) -> float:
        return 1_767_225_600.0 + self.loop.time()

    def monotonic(self) -> float:
        return self.loop.time()


class RecordingReporter:
    loaded = True

    def __init__(self) -> None:
        self.previous: HealthReport | None = None
        self.requested: str | None = None
        self.reports: list[NodeReport] = []
        self.answers: list[str | None] = []

    async def load(self) -> bool:
        return True

    async def report(self, report: NodeReport, *, answers: str | None = None) -> list[str]:
        self.reports.append(report)
        self.answers.append(answers)
        return []

    @property
    def stats(self) -> ReportStats:
        return ReportStats(writes={"condition": len(self.reports)})


def daemon_for(*faults: str, interval: float = 120.0) -> tuple[Daemon, RecordingReporter]:
    config = AgentConfig(interval_seconds=interval, check_timeout_seconds=5, pool="p")
    agent = make_fake_agent("H100:4", faults, config=config, clock=LoopClock())
    reporter = RecordingReporter()
    return Daemon(agent, reporter=reporter, telemetry_interval=2.0), reporter


@pytest.mark.looptime
async def test_loops_follow_their_intervals() -> None:
    daemon, reporter = daemon_for()
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.sleep(610)
    stop.set()
    await task
    snapshot = daemon.agent.snapshot
    assert snapshot.cycles_total == 6  # t = 0, 120, 240, 360, 480, 600
    assert 295 <= snapshot.ticks_total <= 325  # every 2 s, plus one per cycle
    assert reporter.reports and all(r.status is HealthStatus.HEALTHY for r in reporter.reports)
    assert snapshot.report_stats.writes["condition"] == len(reporter.reports)


@pytest.mark.looptime
async def test_nothing_healthy_is_reported_before_the_first_cycle() -> None:
    daemon, reporter = daemon_for()
    report = await daemon.agent.tick()
    assert report.status is HealthStatus.HEALTHY and not report.complete
    await daemon.publish(report)
    assert reporter.reports == []
    report = await daemon.agent.full_cycle()
    assert report.complete
    await daemon.publish(report)
    assert len(reporter.reports) == 1


@pytest.mark.looptime
async def test_an_xid_is_reported_within_a_tick() -> None:
    daemon, reporter = daemon_for("2:xid=79")
    daemon.agent.backend.open()
    report = await daemon.agent.tick()
    await daemon.publish(report)
    assert [r.reason for r in reporter.reports] == ["XidError79"]  # unhealthy goes out before any cycle


@pytest.mark.looptime
async def test_nothing_is_reported_after_sigterm() -> None:
    """The checks SIGTERM kills say nothing about the GPUs, and the operator may have released the node:
    a report that arrives once the daemon is stopping is dropped."""
    daemon, reporter = daemon_for("2:xid=79")
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.sleep(1)
    stop.set()
    await task
    reported = len(reporter.reports)
    report = await daemon.agent.tick()
    assert report.status is HealthStatus.UNHEALTHY
    await daemon.publish(report)
    assert len(reporter.reports) == reported


@pytest.mark.looptime
async def test_liveness_follows_the_telemetry_loop() -> None:
    daemon, _ = daemon_for()
    assert daemon.liveness()[0]  # starting
    await asyncio.sleep(200)
    assert not daemon.liveness()[0]  # never ticked
    await daemon.agent.tick()
    assert daemon.liveness()[0]
    await asyncio.sleep(31)
    alive, why = daemon.liveness()
    assert not alive and "last telemetry tick" in why


async def test_http_endpoints() -> None:
    agent = make_fake_agent("H100:2")
    await agent.full_cycle()
    alive = {"value": True}
    app = make_app(build_registry(lambda: agent.snapshot), lambda: (alive["value"], "why"))
    async with TestClient(TestServer(app)) as client:
        response = await client.get("/metrics")
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        body = await response.text()
        assert 'accelpool_node_healthy{node="gpu-a1",pool="llm-training"} 1.0' in body
        response = await client.get("/metrics", headers={"Accept": "application/openmetrics-text; version=1.0.0"})
        assert response.headers["Content-Type"].startswith("application/openmetrics-text")
        assert (await response.text()).rstrip().endswith("# EOF")
        prometheus = "application/openmetrics-text;version=1.0.0,text/plain;version=0.0.4;q=0.5,*/*;q=0.1"
        response = await client.get("/metrics", headers={"Accept": prometheus})
        assert response.headers["Content-Type"].startswith("text/plain; version=0.0.4")
        assert (await client.get("/healthz")).status == 200
        alive["value"] = False
        assert (await client.get("/healthz")).status == 503


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0.0.0.0:9402", ("0.0.0.0", 9402)), (":9402", ("0.0.0.0", 9402)), ("[::]:9402", ("::", 9402))],
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text) == expected


def test_parse_listen_rejects_garbage() -> None:
    for text in ("9402", "host:", "host:99999", "host:-1"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_listen(text)


async def test_run_command_serves_metrics() -> None:
    """`accelpool-agent run --no-report` on a free port: /metrics answers, SIGTERM stops it."""
    import os
    import signal
    import socket
    import sys

    import aiohttp

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
        "--no-report",
        "--listen",
        f"127.0.0.1:{port}",
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    try:
        body = ""
        async with aiohttp.ClientSession() as session:
            for _ in range(100):
                with contextlib.suppress(aiohttp.ClientError):
                    async with session.get(f"http://127.0.0.1:{port}/metrics") as response:
                        body = await response.text()
                        if "accelpool_agent_cycles_total" in body and "accelpool_check_matmul_tflops" in body:
                            break
                await asyncio.sleep(0.1)
            async with session.get(f"http://127.0.0.1:{port}/healthz") as response:
                assert response.status == 200
        assert 'accelpool_gpu_info{compute_capability="8.9"' in body
    finally:
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 15) == 0


@pytest.mark.looptime
async def test_a_check_request_starts_a_full_cycle_at_once_and_its_report_answers_it() -> None:
    daemon, reporter = daemon_for(interval=3600.0)
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    await asyncio.sleep(10)
    assert daemon.agent.snapshot.cycles_total == 1  # the cycle at start
    daemon.node_seen({"metadata": {"name": "gpu-a1", "annotations": {"accelpool.io/check-requested": "req-1"}}})
    await asyncio.sleep(10)
    assert daemon.agent.snapshot.cycles_total == 2, "the request did not wait for the hour's interval"
    assert daemon.requests.answered == "req-1"
    answered = [r for r, a in zip(reporter.reports, reporter.answers, strict=True) if a == "req-1"]
    assert [r.cycle_duration_seconds is not None for r in answered] == [True], "a cycle's report"
    assert [a for a in reporter.answers if a] == ["req-1"], "only the requested cycle's report answers it"
    daemon.check_requested("req-1")  # the same token again (every later node event carries it)
    daemon.check_requested("x" * 64)  # not a token: logged and ignored
    await asyncio.sleep(100)
    assert daemon.agent.snapshot.cycles_total == 2
    stop.set()
    await task


@pytest.mark.parametrize(("on_node", "expected"), [("req-1", None), ("req-2", "req-2")])
async def test_a_request_answered_before_a_restart_is_not_run_again(on_node: str, expected: str | None) -> None:
    """The previous agent's annotation answered req-1; a token asked while no agent ran is waiting."""
    daemon, reporter = daemon_for(interval=3600.0)
    reporter.previous = HealthReport(status=HealthStatus.HEALTHY, reason="AllChecksPassed", check_request="req-1")
    reporter.requested = on_node
    await daemon.restore()
    assert daemon.requests == CheckRequests(answered="req-1", pending=expected)
