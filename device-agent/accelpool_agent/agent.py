"""The agent: does the device work and keeps what it learns, for the daemon, /metrics and the CLI.

Two activities feed it. A *telemetry tick* (every couple of seconds in the daemon) reads
telemetry and drains XID events from the backend and re-applies the telemetry rules. A
*compute cycle* (every `interval_seconds`) runs the compute checks on every idle GPU, each GPU in
its own child process with a per-check timeout. Each activity ends by publishing an immutable
`AgentSnapshot` (with its `NodeReport`) that /metrics, the node reporter and the CLI read.

One owner: what the agent knows (`AgentState`, `accelpool_agent.state`) and its snapshot change
only in the agent's coroutines, on the event loop, by the pure steps of `AgentState`. Blocking
work runs in threads that only return values: every backend call (NVML) in the agent's one
backend thread, so calls never overlap; the waits for compute children in its check threads,
one per GPU checked in parallel, so a hung GPU delays neither the telemetry nor the loop. There
is no lock, and a reader on any thread holds one consistent snapshot.

The compute verdicts are published in the node annotation and read back when the agent starts
(`restore_verdicts`), so a failure stands across agent restarts.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from typing import TypeVar

from accelpool_agent import rules, xids
from accelpool_agent.backends import Backend
from accelpool_agent.clock import Clock, SystemClock
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask, split_for_tf32
from accelpool_agent.compute.child import not_run
from accelpool_agent.compute.runner import ComputeRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, DeviceInfo, Measurement, NodeReport, Telemetry, XidEvent
from accelpool_agent.rules import vendor
from accelpool_agent.snapshot import AgentSnapshot, ReportStats
from accelpool_agent.state import AgentState, Inventory, Readings, Skipped
from accelpool_core.protocol import AgentConfig, HealthStatus
from accelpool_core.protocol import CheckVerdict as WireVerdict

log = logging.getLogger(__name__)

T = TypeVar("T")

_ABORTING = {"CheckTimeout", "ComputeCrashed"}


def take_inventory(backend: Backend, clock: Clock) -> Inventory:
    """The backend's devices and driver versions now. Blocking: runs in the backend thread."""
    devices = tuple(backend.inventory())
    return Inventory(devices, backend.error, clock.time(), backend.versions())


def read_devices(backend: Backend, clock: Clock, *, inventory_due: bool, inventory_error: str | None) -> Readings:
    """One telemetry pass. Blocking: runs in the backend thread. The inventory is taken when due, and
    again when the backend died or came back during the pass (its devices changed with it)."""
    inventory = take_inventory(backend, clock) if inventory_due else None
    telemetry = tuple(backend.telemetry())
    events = tuple(backend.drain_xid_events())
    ports = tuple(backend.infiniband())
    known_error = inventory.error if inventory is not None else inventory_error
    if (backend.error is None) != (known_error is None):
        inventory = take_inventory(backend, clock)
    return Readings(telemetry, events, backend.error, inventory, ports)


def run_checks(runner: ComputeRunner, job: ComputeJob, timeout_seconds: float) -> list[Measurement]:
    """One GPU's compute checks (tf32 in a child of its own). Blocking: runs in a check thread.
    A check that timed out or crashed leaves the GPU's later checks not run."""
    measurements: list[Measurement] = []
    jobs = split_for_tf32(job)
    for position, part in enumerate(jobs):
        got = runner.run(part, timeout_seconds)
        measurements.extend(got)
        if any(m.reason in _ABORTING for m in got):
            for later in jobs[position + 1 :]:
                measurements.extend(
                    not_run(t, "not run: an earlier check of this GPU did not finish") for t in later.tasks
                )
            break
    return measurements


class Agent:
    """One node's agent: its backend, its compute runner, what it knows, and the snapshot it shows."""

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
        self.policy = rules.Policy.from_config(config)
        self.expected: Callable[[DeviceInfo], rules.Expected] = functools.partial(rules.expected_for, config=config)
        self.sizes = settings.sizes or ComputeSizes.for_engine(backend.compute_engine or "cuda")
        self.vendor_rules = vendor.for_backend(getattr(backend, "judged_as", backend.name))
        """The backend's vendor rules beside the generic ones (`accelpool_agent.rules.vendor`), or None; the
        fake backend names the vendor backend whose rules judge its simulated devices (`judged_as`)."""
        self.compute_applies = self.vendor_rules is None or self.vendor_rules.compute
        """False where the vendor's verdict rests on its counters alone (Neuron, TPU): no compute step runs."""
        self._backend_calls = ThreadPoolExecutor(max_workers=1, thread_name_prefix="accelpool-backend")
        """The one thread every backend call runs in, one call at a time."""
        self._check_waits = ThreadPoolExecutor(
            max_workers=max(1, settings.parallelism), thread_name_prefix="accelpool-check"
        )
        """Threads that wait for compute children: hung GPUs block these, never the backend thread."""
        self._state = AgentState()
        self._snapshot = AgentSnapshot(
            node=settings.node_name,
            pool=config.pool,
            backend=backend.name,
            backend_error=None,
            report=None,
            started_at=self.clock.time(),
        )
        self.last_tick_monotonic: float | None = None

    # ------------------------------------------------------------------ what it shows

    @property
    def snapshot(self) -> AgentSnapshot:
        return self._snapshot

    @property
    def report(self) -> NodeReport | None:
        return self._snapshot.report

    # ------------------------------------------------------------------ lifecycle (blocking)

    def open(self) -> None:
        """Open the backend. Blocking: call before the loops start (`await asyncio.to_thread(agent.open)`)."""
        self._backend_calls.submit(self.backend.open).result()

    def stop_checks(self) -> None:
        """Kill running compute children now and run no more (the agent is stopping)."""
        self.runner.close()
        self._check_waits.shutdown(wait=False, cancel_futures=True)

    def close(self) -> None:
        """Close the backend once the loops have stopped. Blocking."""
        self._backend_calls.submit(self.backend.close).result()

    # ------------------------------------------------------------------ activities (on the event loop)

    async def tick(self) -> NodeReport:
        """Read telemetry and XID events, apply the telemetry rules, publish."""
        now = self.clock.time()
        due = self._state.inventory_due(now, self.settings.inventory_refresh_seconds)
        readings = await self._on_backend(
            functools.partial(
                read_devices,
                self.backend,
                self.clock,
                inventory_due=due,
                inventory_error=self._state.inventory_error,
            )
        )
        self._state = self._state.with_readings(
            readings, now, window_seconds=self.policy.counter_window_seconds, vendor=self.vendor_rules
        )
        self._log_xids(readings.xid_events)
        self._snapshot = replace(self._snapshot, ticks_total=self._snapshot.ticks_total + 1)
        self.last_tick_monotonic = self.clock.monotonic()
        return self._publish(now)

    async def compute_cycle(self) -> NodeReport:
        """Run the compute checks on every idle, reachable GPU (in parallel), then publish."""
        started = self.clock.monotonic()
        inventory = await self._on_backend(functools.partial(take_inventory, self.backend, self.clock))
        self._state = self._state.with_inventory(inventory)
        devices = self._state.devices if self.compute_applies else ()
        skipped = {
            device.uuid: why
            for device in devices
            if (why := self._skip_reason(device, self._state.gpu(device.uuid).telemetry)) is not None
        }
        self._state = self._state.with_skipped(skipped)
        self._snapshot = replace(self._snapshot, compute_running=True)
        semaphore = asyncio.Semaphore(max(1, self.settings.parallelism))
        loop = asyncio.get_running_loop()

        async def check(device: DeviceInfo) -> tuple[DeviceInfo, list[Measurement] | None]:
            job = None if device.uuid in skipped else self.cycle_job(device)
            if job is None:
                return device, None
            async with semaphore:
                wait = functools.partial(run_checks, self.runner, job, self.config.check_timeout_seconds)
                return device, await loop.run_in_executor(self._check_waits, wait)

        try:
            results = await asyncio.gather(*(check(device) for device in devices))
        finally:
            self._snapshot = replace(self._snapshot, compute_running=False)
        now = self.clock.time()
        self._state = self._state.with_checks(results, now=now, policy=self.policy, expected=self.expected)
        duration = self.clock.monotonic() - started
        self._snapshot = replace(
            self._snapshot,
            cycles_total=self._snapshot.cycles_total + 1,
            last_cycle_at=now,
            last_cycle_duration_seconds=duration,
        )
        return self._publish(now, cycle_duration=duration)

    async def full_cycle(self) -> NodeReport:
        """A telemetry tick, a compute cycle, and a telemetry tick after it (so error counters have
        two readings, across the load of the checks, to give rates): what `accelpool-agent check` runs."""
        await self.tick()
        await self.compute_cycle()
        return await self.tick()

    async def restore_verdicts(self, recorded: Mapping[str, Mapping[str, WireVerdict]]) -> NodeReport:
        """Take back the compute verdicts a previous agent left on the node; fresher ones win."""
        if self._state.inventory_at is None:
            inventory = await self._on_backend(functools.partial(take_inventory, self.backend, self.clock))
            self._state = self._state.with_inventory(inventory)
        now = self.clock.time()
        self._state = self._state.with_restored(recorded, now)
        return self._publish(now)

    def record_report_stats(self, stats: ReportStats) -> None:
        self._snapshot = replace(self._snapshot, report_stats=stats)

    # ------------------------------------------------------------------ internals

    async def _on_backend(self, call: Callable[[], T]) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._backend_calls, call)

    def _skip_reason(self, device: DeviceInfo, telemetry: Telemetry | None) -> Skipped | None:
        if telemetry is not None and telemetry.lost:
            return Skipped("GpuLost", "the GPU does not answer")
        busy = telemetry.compute_processes if telemetry is not None else None
        if busy and not self.config.force:
            return Skipped(
                "GpuBusy",
                f"{busy} compute process(es) on the GPU; checks run only on idle GPUs (force: true overrides)",
            )
        if self.backend.compute_engine is None:
            return Skipped("ComputeUnavailable", f"the {self.backend.name} backend has no compute engine")
        if device.mig_enabled and not device.mig_devices:
            return Skipped("MigNotConfigured", "MIG is enabled but no MIG device exists to run checks on")
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

    def cycle_job(self, device: DeviceInfo) -> ComputeJob | None:
        """The compute job one cycle runs on `device`: its checks in order, sizes and seed (building one is pure: no
        device is touched); None where the backend cannot compute."""
        return self.backend.compute_job(
            device, self._tasks(device), self.sizes, self.settings.seed * 1000 + device.index
        )

    def _log_xids(self, events: Sequence[XidEvent]) -> None:
        for event in events:
            device = self._state.device_at(event.index)
            if device is None:
                log.warning("XID %d on unknown GPU index %d", event.xid, event.index)
                continue
            informational = xids.classify(event.xid) is xids.XidClass.INFORMATIONAL
            level = logging.DEBUG if informational else logging.WARNING
            log.log(level, "GPU %d (%s): %s", device.index, device.uuid, xids.describe(event.xid))

    def _publish(self, now: float, cycle_duration: float | None = None) -> NodeReport:
        """Judge the node from the state and replace the snapshot with the new report."""
        state = self._state
        gpus = state.gpu_reports(now=now, policy=self.policy, expected=self.expected, vendor=self.vendor_rules)
        node_checks = state.node_checks(expected_gpus=self.config.expected_gpus, now=now)
        verdict = rules.node_verdict(
            gpus, expected_gpus=self.config.expected_gpus, backend_error=state.backend_error, node_checks=node_checks
        )
        measured = [g.matmul_tflops[self.policy.dtype] for g in gpus if self.policy.dtype in g.matmul_tflops]
        previous = self._snapshot.report
        report = NodeReport(
            node=self.settings.node_name,
            pool=self.config.pool,
            backend=self.backend.name,
            status=verdict.status,
            reason=verdict.reason,
            message=verdict.message,
            gpus=gpus,
            bad_gpus=verdict.bad_gpus,
            dtype=self.policy.dtype,
            tflops=sum(measured) if measured else None,
            checked_at=now,
            cycle_duration_seconds=cycle_duration
            if cycle_duration is not None
            else (previous.cycle_duration_seconds if previous else None),
            complete=self._snapshot.cycles_total > 0 or cycle_duration is not None,
            checks=node_checks,
            findings=rules.findings(
                gpus, node_checks, status=verdict.status, reason=verdict.reason, message=verdict.message
            ),
            driver_version=state.versions.driver,
            cuda_version=state.versions.cuda,
            infiniband=state.infiniband,
        )
        if previous is None or (previous.status, previous.reason) != (report.status, report.reason):
            level = logging.WARNING if report.status is HealthStatus.UNHEALTHY else logging.INFO
            log.log(level, "node %s: %s (%s) %s", report.node, report.status.value, report.reason, report.message)
        self._snapshot = replace(self._snapshot, report=report, backend_error=state.backend_error)
        return report
