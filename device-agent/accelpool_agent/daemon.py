"""The long-running agent (`accelpool-agent run`): two loops, a node watch and a reporter.

- the telemetry loop ticks every `telemetry_interval` seconds (telemetry, XID events, rules),
  so a fatal XID turns the node Unhealthy within one tick;
- the compute loop runs a full cycle (a fresh tick, then the compute checks on idle GPUs)
  at start and every `AgentConfig.interval_seconds`, and at once when a check is requested;
- the node watch (`accelpool_agent.node_watch`) hands every version of the agent's Node to
  `node_seen`, which notes a new `accelpool.io/check-requested` token (`accelpool_agent.check_requests`):
  the compute loop starts a full cycle now, or right after the one running, and the report of
  that cycle answers the token (`HealthReport.check_request`). A token the node's annotation
  already answers when the agent starts is not run again; an invalid one is logged and ignored.

Blocking work runs in the agent's threads (backend calls in its backend thread, the waits for
compute children in its check threads, one per GPU checked in parallel), so hung GPUs can delay
neither the telemetry nor the HTTP endpoints; the agent's state changes only on the event loop.
SIGTERM kills running compute children at once and stops within seconds, well inside the pod's
termination grace period; from then on nothing is reported (the checks it killed say nothing
about the GPUs, and the operator may have released the node).

At start, the node is read once and the compute verdicts an earlier agent recorded in the
annotation are restored, so a failure stands across restarts. After each loop step, the report
goes to the node reporter, which writes only what changed (plus its heartbeat). Until the first
full cycle has finished, only an Unhealthy verdict is written, so a restarting agent never
declares a node healthy before it has run the compute checks.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from accelpool_agent.agent import Agent
from accelpool_agent.check_requests import CheckRequests, problem
from accelpool_agent.model import NodeReport
from accelpool_agent.snapshot import ReportStats
from accelpool_core.protocol import CHECK_REQUEST_ANNOTATION, HealthReport, HealthStatus

log = logging.getLogger(__name__)


class Reporter(Protocol):
    """What the daemon needs of the node reporter (`accelpool_agent.reporter.NodeReporter`)."""

    @property
    def loaded(self) -> bool: ...

    @property
    def previous(self) -> HealthReport | None: ...

    @property
    def requested(self) -> str | None: ...

    @property
    def stats(self) -> ReportStats: ...

    async def load(self) -> bool: ...

    async def report(self, report: NodeReport, *, answers: str | None = None) -> list[str]: ...


class NodeWatcher(Protocol):
    """What the daemon needs of the node watch (`accelpool_agent.node_watch.NodeWatch`)."""

    async def run(self, on_node: Callable[[Mapping[str, Any]], None]) -> None: ...


class Daemon:
    def __init__(
        self,
        agent: Agent,
        *,
        reporter: Reporter | None,
        telemetry_interval: float,
        watch: NodeWatcher | None = None,
    ) -> None:
        self.agent = agent
        self.reporter = reporter
        self.telemetry_interval = telemetry_interval
        self.watch = watch
        self.requests = CheckRequests()
        self._ignored: str | None = None
        """The last invalid token logged (logged once, however many node events carry it)."""
        self._wake = asyncio.Event()
        self._publish_lock = asyncio.Lock()
        self._restored = reporter is None
        self.started_monotonic = agent.clock.monotonic()
        self.stopping = False

    def liveness(self) -> tuple[bool, str]:
        """Alive while telemetry ticks keep coming (or shortly after start)."""
        now = self.agent.clock.monotonic()
        limit = max(3 * self.telemetry_interval, 30.0)
        last = self.agent.last_tick_monotonic
        if last is None:
            alive = now - self.started_monotonic < max(limit, 120.0)
            return alive, "starting" if alive else "no telemetry tick since start"
        age = now - last
        return (age <= limit, f"last telemetry tick {age:.1f} s ago")

    async def restore(self) -> NodeReport | None:
        """Once: read the node and take back the compute verdicts the previous agent left there."""
        if self._restored or self.reporter is None:
            return None
        if not self.reporter.loaded and not await self.reporter.load():
            return None  # the API is not reachable yet: the next publish tries again
        self._restored = True
        previous = self.reporter.previous
        self.requests = self.requests.restored(previous.check_request if previous else None)
        self.check_requested(self.reporter.requested)
        if previous is None or not previous.verdicts:
            return None
        log.info("restoring the compute verdicts of %d GPU(s) recorded on the node", len(previous.verdicts))
        return await self.agent.restore_verdicts(previous.verdicts)

    def readiness(self) -> tuple[bool, str]:
        """Ready from the first telemetry tick until SIGTERM; a GPU's health does not matter."""
        if self.stopping:
            return False, "stopping"
        if self.agent.last_tick_monotonic is None:
            return False, "no telemetry tick yet"
        return self.liveness()

    async def tick(self) -> NodeReport:
        """One telemetry tick (its backend calls in the agent's backend thread)."""
        return await self.agent.tick()

    def node_seen(self, node: Mapping[str, Any]) -> None:
        """The node watch's callback: a version of the agent's Node, with its check request (if any)."""
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        self.check_requested(annotations.get(CHECK_REQUEST_ANNOTATION))

    def check_requested(self, token: str | None) -> None:
        """The node carries `token`: a new valid one starts a full cycle now (or right after the one running)."""
        why = problem(token)
        if why is not None:
            if token != self._ignored:
                log.warning("ignoring the check request: %s", why)
                self._ignored = token
            return
        before = self.requests
        self.requests = before.seen(token)
        if self.requests != before:
            later = "after the one running" if before.running is not None else "now"
            log.info("check requested (%s): a full cycle starts %s", token, later)
            self._wake.set()

    async def publish(self, report: NodeReport, *, answers: str | None = None) -> None:
        """Hand `report` to the reporter; `answers`: the check request this report's cycle answers."""
        if self.reporter is None or self.stopping:
            return
        if not self._restored:
            report = await self.restore() or report
        if not report.complete and report.status is not HealthStatus.UNHEALTHY:
            return
        async with self._publish_lock:
            if self.stopping:  # SIGTERM while this report waited for the one before it
                return
            try:
                await self.reporter.report(report, answers=answers)
            except Exception:  # a reporter bug must not stop the agent
                log.exception("reporting failed")
            self.agent.record_report_stats(self.reporter.stats)

    async def telemetry_loop(self) -> None:
        while True:
            try:
                report = await self.tick()
            except Exception:
                log.exception("telemetry tick failed")
            else:
                await self.publish(report)
            await asyncio.sleep(self.telemetry_interval)

    async def compute_loop(self) -> None:
        while True:
            self.requests = self.requests.starting()
            token = self.requests.running
            failed = False
            try:
                report = await self.agent.full_cycle()
            except Exception:
                log.exception("check cycle failed")
                self.requests, failed = self.requests.failed(), True
            else:
                self.requests = self.requests.finished()
                log.info(
                    "cycle done: %s (%s), %d GPU(s), %.1f s%s",
                    report.status.value,
                    report.reason,
                    len(report.gpus),
                    report.cycle_duration_seconds or 0.0,
                    f", answering check request {token}" if token else "",
                )
                await self.publish(report, answers=token)
            await self._until_next_cycle(after_failure=failed)

    async def _until_next_cycle(self, *, after_failure: bool) -> None:
        """The interval, or less: until a check request comes (one waiting already: no wait at all, unless
        the cycle just failed, when it waits for a newer request or the interval)."""
        if self.requests.wanted and not after_failure:
            return
        self._wake.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), self.agent.config.interval_seconds)

    async def run(self, stop: asyncio.Event) -> None:
        await asyncio.to_thread(self.agent.open)
        await self.restore()
        tasks = [
            asyncio.create_task(self.telemetry_loop(), name="telemetry"),
            asyncio.create_task(self.compute_loop(), name="compute"),
        ]
        if self.watch is not None:
            tasks.append(asyncio.create_task(self.watch.run(self.node_seen), name="node watch"))
        try:
            await stop.wait()
        finally:
            self.stopping = True
            self.agent.stop_checks()  # kills hung compute children now, not at their timeout
            for task in tasks:
                task.cancel()
            for task in tasks:
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            await asyncio.to_thread(self.agent.close)
            log.info("stopped")
