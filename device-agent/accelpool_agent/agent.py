"""The agent: keeps what it knows about the node's GPUs and turns it into reports.

Two activities feed it. A *telemetry tick* (every couple of seconds in the daemon) reads
telemetry and drains XID events from the backend and re-applies the telemetry rules. A
*compute cycle* (every `interval_seconds`) runs the compute checks on every idle GPU, each GPU in
its own child process with a per-check timeout. Each activity ends by publishing an immutable
`AgentSnapshot` (with its `NodeReport`) that /metrics, the node reporter and the CLI read.

State is per GPU UUID (a replaced GPU starts clean): the XIDs seen since start (fatal ones are
sticky until the agent restarts), the ECC baseline, and the last verdict of each compute check
kind (sanity, correctness, matmul, bandwidth). A verdict stands until a later check of the same
kind on the same GPU produces one: a check that is skipped (busy or lost GPU, an earlier check
that timed out) keeps the previous verdict in force, marked stale, so a busy bad GPU never turns
healthy. The verdicts are published in the node annotation and read back at start
(`restore_verdicts`), so this holds across agent restarts too. A GPU whose compute checks have
never produced a verdict is "not checked", never "passed" (the node is Unknown/ChecksSkipped).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from accelpool_agent import rules, xids
from accelpool_agent.backends import Backend
from accelpool_agent.clock import Clock, SystemClock
from accelpool_agent.compute import ComputeSizes, ComputeTask, split_for_tf32
from accelpool_agent.compute.child import not_run
from accelpool_agent.compute.runner import ComputeRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import (
    CHECK_ORDER,
    Check,
    CheckResult,
    CheckStatus,
    CheckVerdict,
    DeviceInfo,
    GpuReport,
    Measurement,
    NodeReport,
    Telemetry,
)
from accelpool_core import catalog
from accelpool_core.protocol import AgentConfig, HealthStatus
from accelpool_core.protocol import CheckVerdict as WireVerdict

log = logging.getLogger(__name__)

_ABORTING = {"CheckTimeout", "ComputeCrashed"}


@dataclass(frozen=True)
class ReportStats:
    """What the node reporter did (for the agent's own metrics)."""

    writes: dict[str, int] = field(default_factory=dict)
    errors: int = 0


@dataclass(frozen=True)
class AgentSnapshot:
    """Everything /metrics shows, as of the last tick or cycle. Replaced, never mutated."""

    node: str
    pool: str | None
    backend: str
    backend_error: str | None
    report: NodeReport | None
    started_at: float
    ticks_total: int = 0
    cycles_total: int = 0
    last_cycle_at: float | None = None
    last_cycle_duration_seconds: float | None = None
    compute_running: bool = False
    report_stats: ReportStats = ReportStats()


@dataclass(frozen=True)
class _ComputeState:
    outcome: rules.ComputeOutcome
    at: float


class Agent:
    def __init__(
        self,
        backend: Backend,
        config: AgentConfig,
        settings: AgentSettings,
        runner: ComputeRunner,
        *,
        clock: Clock | None = None,
    ) -> None:
        self.backend = backend
        self.config = config
        self.settings = settings
        self.runner = runner
        self.clock: Clock = clock or SystemClock()
        self.policy = rules.Policy(
            dtype=config.matmul.dtype,
            min_efficiency=config.matmul.min_efficiency,
            min_bandwidth_efficiency=config.min_bandwidth_efficiency,
            check_timeout_seconds=config.check_timeout_seconds,
        )
        engine = backend.compute_engine or "cuda"
        self.sizes = settings.sizes or ComputeSizes.for_engine(engine)
        self._lock = threading.Lock()
        self._check_waits = ThreadPoolExecutor(
            max_workers=max(1, settings.parallelism), thread_name_prefix="accelpool-check"
        )
        """Threads that wait for compute children: hung GPUs block these, never the default pool."""
        self._devices: list[DeviceInfo] = []
        self._inventory_at: float | None = None
        self._inventory_error: str | None = None
        self._telemetry: dict[str, Telemetry] = {}
        self._xids: dict[str, rules.XidRecord] = {}
        self._ecc_baseline: dict[str, int | None] = {}
        self._compute: dict[str, _ComputeState] = {}
        self._skipped: dict[str, tuple[str, str]] = {}
        self._verdicts: dict[str, dict[Check, CheckResult]] = {}
        """GPU UUID → compute check → its last non-skipped result (what stands)."""
        self._since: dict[str, dict[Check, float]] = {}
        self._ran: dict[str, dict[Check, CheckResult]] = {}
        """GPU UUID → what each compute check gave in the GPU's latest run (skips included)."""
        self._started = self.clock.time()
        self._snapshot = AgentSnapshot(
            node=settings.node_name,
            pool=config.pool,
            backend=backend.name,
            backend_error=None,
            report=None,
            started_at=self._started,
        )
        self.last_tick_monotonic: float | None = None

    # ------------------------------------------------------------------ public

    @property
    def snapshot(self) -> AgentSnapshot:
        return self._snapshot

    @property
    def report(self) -> NodeReport | None:
        return self._snapshot.report

    def open(self) -> None:
        with self._lock:
            self.backend.open()
            self._refresh_inventory()

    def stop_checks(self) -> None:
        """Kill running compute children now and run no more (the agent is stopping)."""
        self.runner.close()
        self._check_waits.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        with self._lock:
            self.backend.close()

    def tick(self) -> NodeReport:
        """Read telemetry and XID events, apply the telemetry rules, publish. Blocking (NVML calls)."""
        with self._lock:
            now = self.clock.time()
            if self._inventory_at is None or now - self._inventory_at >= self.settings.inventory_refresh_seconds:
                self._refresh_inventory()
            readings = self.backend.telemetry()
            events = self.backend.drain_xid_events()
            if (self.backend.error is None) != (self._inventory_error is None):
                self._refresh_inventory()  # the backend died or came back: its devices changed with it
            by_index = {device.index: device for device in self._devices}
            for reading in readings:
                device = by_index.get(reading.index)
                if device is None:
                    continue
                self._telemetry[device.uuid] = reading
                if device.uuid not in self._ecc_baseline and reading.ecc is not None:
                    self._ecc_baseline[device.uuid] = reading.ecc.aggregate_double
            for event in events:
                device = by_index.get(event.index)
                if device is None:
                    log.warning("XID %d on unknown GPU index %d", event.xid, event.index)
                    continue
                informational = xids.classify(event.xid) is xids.XidClass.INFORMATIONAL
                log.log(
                    logging.DEBUG if informational else logging.WARNING,
                    "GPU %d (%s): %s",
                    device.index,
                    device.uuid,
                    xids.describe(event.xid),
                )
                record = self._xids.get(device.uuid, rules.XidRecord())
                self._xids[device.uuid] = record.add(event.xid, event.timestamp or now)
            snapshot = replace(self._snapshot, ticks_total=self._snapshot.ticks_total + 1)
            self._snapshot = snapshot
            self.last_tick_monotonic = self.clock.monotonic()
            return self._publish(now)

    async def compute_cycle(self) -> NodeReport:
        """Run the compute checks on every idle, reachable GPU (in parallel), then publish."""
        started = self.clock.monotonic()
        with self._lock:
            self._refresh_inventory()
            devices = list(self._devices)
            telemetry = dict(self._telemetry)
        self._snapshot = replace(self._snapshot, compute_running=True)
        semaphore = asyncio.Semaphore(max(1, self.settings.parallelism))

        async def one(device: DeviceInfo) -> tuple[DeviceInfo, list[Measurement] | None]:
            why = self._skip_reason(device, telemetry.get(device.uuid))
            if why is not None:
                self._skipped[device.uuid] = why
                return device, None
            async with semaphore:
                loop = asyncio.get_running_loop()
                return device, await loop.run_in_executor(self._check_waits, self._run_device, device)

        try:
            results = await asyncio.gather(*(one(device) for device in devices))
        finally:
            self._snapshot = replace(self._snapshot, compute_running=False)
        now = self.clock.time()
        with self._lock:
            self._apply_compute(results, now)
            duration = self.clock.monotonic() - started
            self._snapshot = replace(
                self._snapshot,
                cycles_total=self._snapshot.cycles_total + 1,
                last_cycle_at=now,
                last_cycle_duration_seconds=duration,
            )
            return self._publish(now, cycle_duration=duration)

    async def full_cycle(self) -> NodeReport:
        """A telemetry tick followed by a compute cycle: what `accelpool-agent check` runs."""
        await asyncio.to_thread(self.tick)
        return await self.compute_cycle()

    def restore_verdicts(self, verdicts: Mapping[str, Mapping[str, WireVerdict]]) -> NodeReport:
        """Take back the compute verdicts a previous agent left on the node; fresher ones win."""
        with self._lock:
            now = self.clock.time()
            for uuid, kinds in verdicts.items():
                for name, verdict in kinds.items():
                    try:
                        check = Check(name)
                    except ValueError:
                        continue
                    if not check.is_compute or check in self._verdicts.get(uuid, {}):
                        continue
                    at = verdict.since.timestamp() if verdict.since else now
                    status = CheckStatus(verdict.status)
                    when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                    self._verdicts.setdefault(uuid, {})[check] = CheckResult(
                        check,
                        status,
                        verdict.reason,
                        f"{verdict.reason} since {when}, as recorded on the node before the agent restarted",
                        finished_at=at,
                        summary=f"{check.value} check: {verdict.reason} (recorded before the agent restarted)",
                    )
                    self._since.setdefault(uuid, {})[check] = at
            return self._publish(now)

    def record_report_stats(self, stats: ReportStats) -> None:
        self._snapshot = replace(self._snapshot, report_stats=stats)

    # ------------------------------------------------------------------ internals

    def _refresh_inventory(self) -> None:
        self._devices = self.backend.inventory()
        self._inventory_at = self.clock.time()
        self._inventory_error = self.backend.error

    def _skip_reason(self, device: DeviceInfo, telemetry: Telemetry | None) -> tuple[str, str] | None:
        if telemetry is not None and telemetry.lost:
            return "GpuLost", "the GPU does not answer"
        busy = telemetry.compute_processes if telemetry is not None else None
        if busy and not self.config.force:
            return (
                "GpuBusy",
                f"{busy} compute process(es) on the GPU; checks run only on idle GPUs (force: true overrides)",
            )
        if self.backend.compute_engine is None:
            return "ComputeUnavailable", f"the {self.backend.name} backend has no compute engine"
        if device.mig_enabled and not device.mig_devices:
            return "MigNotConfigured", "MIG is enabled but no MIG device exists to run checks on"
        return None

    def _tasks(self, device: DeviceInfo) -> list[ComputeTask]:
        policy_dtype = self.policy.dtype
        correctness = ["fp32"] + ([policy_dtype] if policy_dtype != "fp32" else [])
        tasks = [ComputeTask(Check.SANITY)] + [ComputeTask(Check.CORRECTNESS, d) for d in correctness]
        if device.mig_enabled:
            return tasks  # a MIG slice's throughput is not comparable with the full GPU's peak
        dtypes = list(dict.fromkeys([*self.settings.dtypes, policy_dtype]))
        tasks += [ComputeTask(Check.MATMUL, d) for d in dtypes]
        tasks.append(ComputeTask(Check.BANDWIDTH))
        return tasks

    def _run_device(self, device: DeviceInfo) -> list[Measurement] | None:
        tasks = self._tasks(device)
        seed = self.settings.seed * 1000 + device.index
        job = self.backend.compute_job(device, tasks, self.sizes, seed)
        if job is None:
            return None
        measurements: list[Measurement] = []
        jobs = split_for_tf32(job)
        for position, part in enumerate(jobs):
            got = self.runner.run(part, self.config.check_timeout_seconds)
            measurements.extend(got)
            if any(m.reason in _ABORTING for m in got):
                for later in jobs[position + 1 :]:
                    measurements.extend(
                        not_run(t, "not run: an earlier check of this GPU did not finish") for t in later.tasks
                    )
                break
        return measurements

    def expected(self, device: DeviceInfo) -> rules.Expected:
        accelerator: catalog.Accelerator | None = None
        for name in (device.model, self.config.accelerator):
            if name:
                try:
                    accelerator = catalog.lookup(name)
                    break
                except catalog.UnknownAcceleratorError:
                    continue
        tflops: dict[str, float] = dict(self.config.expected_tflops)
        if not tflops and accelerator is not None:
            for dtype in ("fp32", "tf32", "fp16", "bf16"):
                peak = accelerator.peaks.get(dtype)
                if peak:
                    tflops[dtype] = float(peak)
        gbps = self.config.expected_bandwidth_gbps or (accelerator.bandwidth_gbps if accelerator else None)
        return rules.Expected(tflops=tflops, bandwidth_bytes_per_second=gbps * 1e9 if gbps else None)

    def _apply_compute(self, results: Sequence[tuple[DeviceInfo, list[Measurement] | None]], now: float) -> None:
        fresh: dict[str, rules.ComputeOutcome] = {}
        for device, measurements in results:
            if measurements is None:
                if device.uuid not in self._skipped:
                    self._skipped[device.uuid] = ("ComputeUnavailable", "no compute job for this device")
                continue
            self._skipped.pop(device.uuid, None)
            fresh[device.uuid] = rules.compute_checks(
                measurements, policy=self.policy, expected=self.expected(device), now=now
            )
        policy_tflops = {
            device.index: outcome.matmul_tflops[self.policy.dtype]
            for device, _ in results
            if (outcome := fresh.get(device.uuid)) is not None and self.policy.dtype in outcome.matmul_tflops
        }
        slow = rules.peer_outliers(policy_tflops, self.policy.peer_tolerance)
        for device, _ in results:
            outcome = fresh.get(device.uuid)
            if outcome is None:
                continue
            if device.index in slow:
                checks = tuple(
                    rules.mark_slower_than_peers(c, slow[device.index], self.policy.peer_tolerance)
                    if c.check is Check.MATMUL
                    else c
                    for c in outcome.checks
                )
                outcome = replace(outcome, checks=checks)
            self._compute[device.uuid] = _ComputeState(outcome, now)
            self._record_verdicts(device.uuid, outcome.checks, now)

    def _record_verdicts(self, uuid: str, checks: Sequence[CheckResult], now: float) -> None:
        verdicts = self._verdicts.setdefault(uuid, {})
        since = self._since.setdefault(uuid, {})
        self._ran[uuid] = {c.check: c for c in checks}
        for result in checks:
            if result.status is CheckStatus.SKIP:
                continue  # not run: the previous verdict of this kind stands
            previous = verdicts.get(result.check)
            if previous is None or (previous.status, previous.reason) != (result.status, result.reason):
                since[result.check] = now
            verdicts[result.check] = result

    def _compute_checks(self, device: DeviceInfo) -> tuple[rules.ComputeOutcome | None, tuple[CheckResult, ...]]:
        state = self._compute.get(device.uuid)
        outcome = state.outcome if state else None
        verdicts = self._verdicts.get(device.uuid, {})
        ran = self._ran.get(device.uuid, {})
        skipped = self._skipped.get(device.uuid)
        results: list[CheckResult] = []
        for check in (Check.SANITY, Check.CORRECTNESS, Check.MATMUL, Check.BANDWIDTH):
            verdict = verdicts.get(check)
            latest = None if skipped else ran.get(check)
            if verdict is not None and latest is verdict:
                results.append(verdict)
            elif verdict is not None:
                why = skipped[1] if skipped else (latest.message if latest else "not run in the latest cycle")
                results.append(
                    replace(
                        verdict, stale=True, message=f"{verdict.message} (from the cycle before; not run now: {why})"
                    )
                )
            elif skipped is not None and not verdicts:
                reason, why = skipped
                results.append(CheckResult(check, CheckStatus.SKIP, reason, f"not run: {why}"))
            elif latest is not None:
                results.append(latest)
        return outcome, tuple(results)

    def _publish(self, now: float, cycle_duration: float | None = None) -> NodeReport:
        gpus: list[GpuReport] = []
        for device in self._devices:
            telemetry = self._telemetry.get(device.uuid)
            record = self._xids.get(device.uuid, rules.XidRecord())
            checks = rules.telemetry_checks(
                telemetry,
                record,
                baseline_aggregate_double=self._ecc_baseline.get(device.uuid),
                now=now,
                policy=self.policy,
            )
            outcome, compute = self._compute_checks(device)
            ordered = tuple(sorted([*checks, *compute], key=lambda c: CHECK_ORDER[c.check]))
            gpus.append(
                GpuReport(
                    device=device,
                    telemetry=telemetry,
                    checks=ordered,
                    matmul_tflops=dict(outcome.matmul_tflops) if outcome else {},
                    matmul_efficiency=dict(outcome.matmul_efficiency) if outcome else {},
                    expected_tflops=dict(self.expected(device).tflops),
                    bandwidth_bytes_per_second=outcome.bandwidth_bytes_per_second if outcome else None,
                    bandwidth_efficiency=outcome.bandwidth_efficiency if outcome else None,
                    xid_counts=dict(record.counts),
                    last_xid=record.last_xid,
                    verdicts={
                        check: CheckVerdict(result.status, result.reason, self._since[device.uuid][check])
                        for check, result in self._verdicts.get(device.uuid, {}).items()
                    },
                )
            )
        verdict = rules.node_verdict(gpus, expected_gpus=self.config.expected_gpus, backend_error=self.backend.error)
        measured = [g.matmul_tflops[self.policy.dtype] for g in gpus if self.policy.dtype in g.matmul_tflops]
        previous = self._snapshot.report
        report = NodeReport(
            node=self.settings.node_name,
            pool=self.config.pool,
            backend=self.backend.name,
            status=verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            gpus=tuple(gpus),
            bad_gpus=verdict.bad_gpus,
            dtype=self.policy.dtype,
            tflops=sum(measured) if measured else None,
            checked_at=now,
            cycle_duration_seconds=cycle_duration
            if cycle_duration is not None
            else (previous.cycle_duration_seconds if previous else None),
            complete=self._snapshot.cycles_total > 0 or cycle_duration is not None,
        )
        if previous is None or (previous.status, previous.reason) != (report.status, report.reason):
            level = logging.WARNING if report.status is HealthStatus.UNHEALTHY else logging.INFO
            log.log(level, "node %s: %s (%s) %s", report.node, report.status.value, report.reason, report.message)
        self._snapshot = replace(self._snapshot, report=report, backend_error=self.backend.error)
        return report
