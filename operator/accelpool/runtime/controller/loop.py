"""The controller's loop: one pass at a time over the whole cluster, each pass read top to bottom here.

How it works and why: docs/design/controller-loop.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from accelpool.decide.inputs import PoolRecord
from accelpool.decide.planning import Plan
from accelpool.model.nodes import NodeView
from accelpool.runtime.controller.apiserver import TRANSIENT, Gate, Paused, Permit
from accelpool.runtime.controller.deadlines import Deadlines
from accelpool.runtime.controller.drain import DrainExecutor
from accelpool.runtime.controller.events import EventRecorder
from accelpool.runtime.controller.nodewatch import NodeWatch
from accelpool.runtime.controller.planner import Planner
from accelpool.runtime.controller.state import ClusterState, NodeSource, PoolSource
from accelpool.runtime.controller.status import StatusWriter, StatusWrites, Taken
from accelpool.runtime.controller.writes import WriteOutcome, Writer
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_core.kube import KubeClient

log = logging.getLogger("accelpool.runtime.controller")
_T = TypeVar("_T")

BACKOFF_START, BACKOFF_MAX = 0.5, 30.0
BATCH_MAX_SECONDS = 1.0
"""The longest a batching window stays open while nudges keep coming (Karpenter's BatchMaxDuration; its
default of 10 s would hold a quarantine too long). The idle duration is `--debounce`."""


@dataclass(frozen=True)
class PassResult:
    """How a pass went. `ok` is False only for errors; conflicts (409) are re-read and planned again at once."""

    number: int
    ok: bool
    failed_pools: frozenset[str] = frozenset()
    """Pools whose writes failed with an error (their statuses were not published)."""
    released_pools: frozenset[str] = frozenset()
    error: str | None = None
    writes: int = 0
    conflicts: int = 0
    paused: bool = False
    """The controller was paused: the pass stopped before its next write."""


@dataclass(frozen=True)
class _Sent:
    """What a pass's statuses and Events came to (`Controller._send`)."""

    writes: int = 0
    error: str | None = None
    """The first status write that failed (it is due again)."""


class Controller:
    """Plans and writes; see the module docstring. One per operator (kept in kopf's memo)."""

    def __init__(
        self,
        config: OperatorConfig,
        client: KubeClient,
        metrics: OperatorMetrics,
        *,
        clock: Callable[[], float] | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.client = client
        self.metrics = metrics
        self._clock = clock or _loop_time
        self._state = ClusterState(
            config, client, self._clock, on_agents_changed=lambda: self._nudge(), on_due=lambda: self._wake.set()
        )
        self._planner = Planner(config, wall_clock)
        events = EventRecorder(
            config.events_namespace, client, metrics, self._clock, wall_clock, config.write_concurrency
        )
        self._writer = Writer(config, client, self._state, events, metrics)
        self._status = StatusWriter(config, client, self._state, metrics, self._clock)
        self._drainer = DrainExecutor(config, client, self._state, metrics, self._clock)
        self.task: asyncio.Task[None] | None = None
        self.last: PassResult | None = None
        self._gate = Gate()
        self._reload = False
        self._ready = asyncio.Event()
        self._dirty = asyncio.Event()
        self._nudged = asyncio.Event()
        """Set by every nudge: a batching window stays open while they keep coming (`_gather`)."""
        self._wake = asyncio.Event()
        """Set by every nudge, and when a deadline moved while the loop waits (`_wait_for_work`)."""
        self._node_watch: NodeWatch | None = None
        self._pass_done = asyncio.Condition()
        self._exclusive = asyncio.Lock()
        self._started = 0
        self._deadlines = Deadlines()
        self._state.due_at(self._deadlines)
        self._status.due_at(self._deadlines)
        self._backoff = BACKOFF_START
        self._released: set[str] = set()
        self._breakers_seen: set[tuple[str, str]] = set()
        self._sending: asyncio.Task[_Sent] | None = None
        """The last pass's statuses and Events, still being written while the next pass runs (see `_pass`)."""

    # ------------------------------------------------------------ inputs (from the kopf handlers)

    def bind(self, nodes: Callable[[], NodeSource], pools: Callable[[], PoolSource]) -> None:
        self._state.bind(nodes, pools)

    def watch_nodes(self) -> NodeWatch:
        """The controller's own node informer (`accelpool.runtime.controller.nodewatch`), run by `run`: bind its
        `views` as the nodes; the loop starts once it has listed them, and that first pass lists the pools
        (kopf's pool index may not hold them all yet)."""
        self._node_watch = NodeWatch(self.client, self.node_changed, self._nodes_listed)
        return self._node_watch

    def indexed(self) -> None:
        """Every input is listed: the loop may start."""
        if not self._ready.is_set():
            self._ready.set()
            self._nudge()

    def _nodes_listed(self) -> None:
        self._state.list_pools_first()
        self.indexed()

    def node_changed(self, name: str, view: NodeView | None) -> None:
        relevant = self._state.node_event(name, view)
        self.metrics.node_events[relevant] += 1
        if relevant:
            self._nudge()

    def pool_changed(self, name: str, record: PoolRecord | None) -> None:
        if self._state.pool_event(name, record):
            self._nudge()

    def _nudge(self) -> None:
        self._dirty.set()
        self._nudged.set()
        self._wake.set()

    # ------------------------------------------------------------ hot standby

    @property
    def active(self) -> bool:
        """True unless paused: only an active controller writes."""
        return self._gate.open

    def pause(self) -> None:
        """Stop writing at once: no pass starts, and the pass in flight (if any) sends no further write."""
        self._gate.close()
        self.metrics.plan = None  # the leader reports the pools; a standby's last plan would go stale

    def resume(self) -> None:
        """Start writing again; the next pass first reads everything cached anew. No-op while active."""
        if self.active:
            return
        self._reload = True
        self._gate.reopen()
        self._nudge()

    # ------------------------------------------------------------ for the delete handler and the probe

    async def wait_released(self, pool: str, wait_seconds: float) -> bool:
        """Whether a pass released the deleted pool (nodes, config keys, objects) within `wait_seconds`."""
        self._nudge()
        try:
            async with asyncio.timeout(wait_seconds):
                async with self._pass_done:
                    await self._pass_done.wait_for(lambda: pool in self._released)
        except TimeoutError:
            return False
        return True

    def probe(self) -> dict[str, Any]:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            raise RuntimeError(f"the reconcile loop stopped: {self.task.exception()!r}")
        pools, nodes = self._state.planned_counts
        last = self.last
        return {
            "active": self.active,
            "passes": self._started,
            "last_ok": last.ok if last else None,
            "last_error": last.error if last else None,
            "pools": pools,
            "nodes": nodes,
        }

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        watching = [asyncio.create_task(self._state.agent_watch.run(), name="agent watch")]
        if self._node_watch is not None:
            watching.append(asyncio.create_task(self._node_watch.run(), name="node watch"))
        try:
            await self._loop()
        finally:
            if self._sending is not None:
                self._sending.cancel()
            for task in watching:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    async def _loop(self) -> None:
        await self._ready.wait()
        await self._state.agent_watch.tried()  # the first pass plans with the agents where they could be listed
        while True:
            await self._gate.wait_open()
            await self._wait_for_work()
            if not self.active:
                continue
            await self._gather()
            self._dirty.clear()
            result = await self._reconcile()
            if result.ok:
                self._backoff = BACKOFF_START
                self._deadlines.set("retry", None)
                if result.conflicts:
                    self._dirty.set()  # re-read already: plan again with the fresh objects, no backoff
            else:
                self._deadlines.set("retry", self._clock() + self._backoff)
                self._backoff = min(self._backoff * 2, BACKOFF_MAX)
                self._dirty.set()

    async def _wait_for_work(self) -> None:
        """Until a nudge or the earliest deadline (requeue, resync, an agent DaemonSet's change, stale health, a due
        status), then any backoff. A deadline that moved while it waited is waited for anew."""
        while not self._dirty.is_set():
            earliest = self._deadlines.next()
            wait = max(0.0, earliest[0] - self._clock()) if earliest is not None else None
            if wait == 0:
                break
            self._wake.clear()
            try:
                async with asyncio.timeout(wait):  # asyncio.timeout: a cancellation is never lost
                    await self._wake.wait()
            except TimeoutError:
                break
        retry = self._deadlines.at("retry")
        if retry is not None and self._clock() < retry:
            await asyncio.sleep(retry - self._clock())

    async def _gather(self) -> None:
        """The batching window (see the module docstring): until `--debounce` passes without a nudge,
        or `BATCH_MAX_SECONDS` after it opened."""
        idle = self.config.debounce_seconds
        if idle <= 0:
            return
        closes = self._clock() + max(idle, BATCH_MAX_SECONDS)
        while (left := closes - self._clock()) > 0:
            self._nudged.clear()
            try:
                async with asyncio.timeout(min(idle, left)):
                    await self._nudged.wait()
            except TimeoutError:
                return

    async def reconcile_once(self) -> PassResult:
        """One pass (see the module docstring), its statuses and Events written before it returns (the loop's passes
        leave theirs to be written while the next one runs). Never raises: errors are results. Passes never
        overlap."""
        result = await self._reconcile()
        sent = await self._sent()
        error = result.error or sent.error
        return replace(result, ok=error is None and result.ok, error=error, writes=result.writes + sent.writes)

    async def _reconcile(self) -> PassResult:
        async with self._exclusive:
            self._started += 1
            number = self._started
            if not self.active:
                return PassResult(number, True, paused=True)
            if self._reload:
                self._reload = False
                self._state.invalidate()
                self._status.forget()
            started = time.perf_counter()
            try:
                result = await self._pass(number, self._gate.permit())
            except Paused:
                log.info("reconcile pass %d stopped: the controller was paused", number)
                result = PassResult(number, True, paused=True)
            except TRANSIENT as error:
                log.warning("reconcile pass %d failed: %s", number, error)
                result = PassResult(number, False, error=str(error))
            except Exception as error:  # a bug must not kill the loop: log it, count it, retry later
                log.exception("reconcile pass %d crashed", number)
                result = PassResult(number, False, error=repr(error))
            if not result.paused:
                self.metrics.observe_pass(time.perf_counter() - started, result.ok)
            async with self._pass_done:
                self.last = result
                self._pass_done.notify_all()
            return result

    async def _pass(self, number: int, permit: Permit) -> PassResult:
        stage = self._stages()
        # 1. load
        snapshot = await self._state.snapshot()
        stage("load")
        # 2. plan (pure), with the pools listed first when the pass would write and they are due a check
        desired = self._planner.decide(snapshot, self._status.previous)
        stage("plan")
        if self._state.pool_check_due() and self._writer.would_write(desired, snapshot):
            listed_differently = await self._state.check_pools(snapshot.pools)
            stage("load")
            if listed_differently:
                snapshot = await self._state.snapshot()
                stage("load")
                desired = self._planner.decide(snapshot, self._status.previous)
                stage("plan")
        # 3. write the difference
        outcome = await self._writer.write(desired, snapshot, permit)
        if outcome.conflicts:
            self._state.write_conflicted()
        stage("write")
        if not outcome.blocked:  # the node writes went out: the drained nodes carry their ladder records
            await self._drainer.drain(desired.plan.drains, permit, skip=outcome.unwritten_nodes)
            stage("drain")
        # 4. write statuses and post Events, while the next pass runs
        unpublished = outcome.unpublished(desired.plan)
        self._status.publish(desired.plan, unpublished, snapshot.pools)
        earlier = await self._sent()  # the last pass's first (timed as theirs): one pass's at most in flight
        due = self._status.take_due(snapshot.pools)
        self._sending = asyncio.create_task(self._send(due, desired.plan, outcome, permit), name="accelpool sending")
        stage(None)
        # 5. record
        self._state.planned_with(snapshot)
        self._record(desired.plan)
        deleted = {p.name for p in desired.plan.pools if p.deleting}
        released = deleted - unpublished if outcome.complete else set()
        self._released = (self._released | released) & set(snapshot.pools)
        error = outcome.first_error or earlier.error
        stage("record")
        return PassResult(
            number,
            ok=error is None,
            failed_pools=outcome.failed_pools(desired.plan),
            released_pools=frozenset(released),
            error=error,
            writes=outcome.count + earlier.writes,
            conflicts=outcome.conflicts,
        )

    def _stages(self) -> Callable[[str | None], None]:
        """A stopwatch: each call adds the wall time since the previous one (or since this) to a stage's counter
        (None: to none, the stages in between timed themselves)."""
        seconds = self.metrics.stage_seconds
        last = time.perf_counter()

        def stage(name: str | None) -> None:
            nonlocal last
            now = time.perf_counter()
            if name is not None:
                seconds[name] += now - last
            last = now

        return stage

    async def _send(self, due: Taken, plan: Plan, outcome: WriteOutcome, permit: Permit) -> _Sent:
        """A pass's statuses (`due`: those `StatusWriter.take_due` took) and Events, written at once, after the
        writes they describe and while the next pass runs.

        Under a storm at 10,000 nodes a pass writes a hundred statuses and asks for a few hundred Events,
        half of its time; the next pass, with the next quarantines, need not wait for them. Events are
        posted apart from a controller as client-go's recorder posts them (k8s.io/client-go/tools/record/
        event.go: `Eventf` hands them to a broadcaster goroutine); a status is compared with the stored one
        again when it is sent, and the next pass sends its own only once these are written, so none is sent
        twice and a status that failed is due again for it."""
        statuses, events = await asyncio.gather(
            self._timed("status", self._status.send(due, permit)),
            self._timed("events", self._writer.post_events(plan, outcome, permit)),
            return_exceptions=True,
        )
        for result in (statuses, events):
            if isinstance(result, BaseException) and not isinstance(result, Paused):
                raise result
        written = statuses if isinstance(statuses, StatusWrites) else StatusWrites()
        posted = events if isinstance(events, int) else 0
        return _Sent(written.count + posted, written.first_error)

    async def _sent(self) -> _Sent:
        """Waits until the statuses and Events a pass left to write are written. A pause stops them (the standby
        that takes over writes statuses anew); a bug in them is logged and returned as an error, never raised."""
        sending, self._sending = self._sending, None
        if sending is None:
            return _Sent()
        try:
            return await sending
        except Exception as error:
            log.exception("writing a pass's statuses and Events failed")
            return _Sent(error=repr(error))

    async def _timed(self, stage: str, work: Awaitable[_T]) -> _T:
        """`work`'s result, its wall time added to `stage`'s counter."""
        started = time.perf_counter()
        try:
            return await work
        finally:
            self.metrics.stage_seconds[stage] += time.perf_counter() - started

    def _record(self, plan: Plan) -> None:
        """The plan for /metrics, the remediations counted (an open breaker once), when to plan again."""
        self.metrics.plan = plan
        breakers: set[tuple[str, str]] = set()
        for remediation in plan.remediations:
            key = (remediation.pool, remediation.node)
            if remediation.action == "circuit_breaker":
                breakers.add(key)
                if key in self._breakers_seen:
                    continue
            self.metrics.remediations[(remediation.pool, remediation.action)] += 1
        self._breakers_seen = breakers
        self._deadlines.set("requeue", self._clock() + plan.requeue_after if plan.requeue_after is not None else None)


def _loop_time() -> float:
    """The event loop's clock: timers, backoff and hold-down all run on it (and on a fake one in tests)."""
    return asyncio.get_running_loop().time()
