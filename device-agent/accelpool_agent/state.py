"""What the agent knows about the node's GPUs: one immutable value and the pure steps to the next.

`AgentState` holds the devices of the latest inventory and, per GPU UUID (a replaced GPU starts
clean), a `GpuHistory`: its latest telemetry, the XIDs seen since the agent started (fatal ones
are sticky until it restarts), the ECC counters of its first reading (the baseline), its NVLink
error counters over the rate window, why its compute checks did not run in the latest cycle, and
the last verdict of each compute check kind (sanity, correctness, matmul, bandwidth). A verdict
stands until a later check of the same kind on the same GPU produces one: a check that is
skipped (busy or lost GPU, an earlier check that timed out) keeps the previous verdict in force,
marked stale, so a busy bad GPU never turns healthy. A GPU whose compute checks have never
produced a verdict is "not checked", never "passed". Node-wide, it keeps the driver's versions
(from the inventory) and the host's InfiniBand ports with their error counters over the rate
window.

Each step (`with_readings`, `with_skipped`, `with_checks`, `with_restored`) returns a new state
and changes nothing; `gpu_reports` turns a state into reports. The agent (`accelpool_agent.agent`)
is the only caller: it does the I/O and applies these steps on its event loop. Pure functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from accelpool_agent import rules
from accelpool_agent.model import (
    CHECK_ORDER,
    Check,
    CheckResult,
    CheckStatus,
    CheckVerdict,
    DeviceInfo,
    DriverVersions,
    EccCounts,
    GpuReport,
    IbPort,
    Measurement,
    Telemetry,
    XidEvent,
)
from accelpool_agent.rules.vendor import DeviceFacts, VendorRules, merged
from accelpool_core.protocol import CheckVerdict as WireVerdict

COMPUTE_ORDER = (Check.SANITY, Check.CORRECTNESS, Check.MATMUL, Check.BANDWIDTH)


@dataclass(frozen=True)
class Inventory:
    """The devices the backend listed, and its error at that moment."""

    devices: tuple[DeviceInfo, ...]
    error: str | None
    taken_at: float
    versions: DriverVersions = field(default_factory=DriverVersions)


@dataclass(frozen=True)
class Readings:
    """One telemetry pass over the backend: readings, the XID events since the pass before, the
    backend's error after it, and a fresh inventory when one was taken (due, or the backend died or
    came back)."""

    telemetry: tuple[Telemetry, ...]
    xid_events: tuple[XidEvent, ...]
    backend_error: str | None
    inventory: Inventory | None = None
    infiniband: tuple[IbPort, ...] = ()


@dataclass(frozen=True)
class Skipped:
    """Why a GPU's compute checks did not run in the latest cycle: a reason and a sentence."""

    reason: str
    why: str


@dataclass(frozen=True)
class GpuHistory:
    """What the agent knows about one GPU (by UUID)."""

    telemetry: Telemetry | None = None
    xids: rules.XidRecord = field(default_factory=rules.XidRecord)
    first_ecc: EccCounts | None = None
    """The ECC counters of the first reading that had them: the lifetime double-bit baseline."""
    outcome: rules.ComputeOutcome | None = None
    """The latest compute cycle's judged results and numbers."""
    skipped: Skipped | None = None
    verdicts: Mapping[Check, CheckResult] = field(default_factory=dict)
    """Compute check → its last non-skipped result (what stands)."""
    since: Mapping[Check, float] = field(default_factory=dict)
    """Compute check → when its current status and reason were first reached."""
    ran: Mapping[Check, CheckResult] = field(default_factory=dict)
    """Compute check → what it gave in the GPU's latest run (skips included)."""
    nvlink_errors: rules.CounterWindow = field(default_factory=rules.CounterWindow)
    """NVLink error counters (`<link>:<counter>`) over the rate window."""

    vendor_counters: rules.CounterWindow = field(default_factory=rules.CounterWindow)
    """The vendor rules' counters (`VendorRules.counters`) over the rate window."""

    def with_reading(
        self, reading: Telemetry, *, at: float, window_seconds: float, vendor: VendorRules | None = None
    ) -> GpuHistory:
        vendor_counters = self.vendor_counters
        if vendor is not None and vendor.counters is not None:
            vendor_counters = vendor_counters.add(at, vendor.counters(reading), window_seconds)
        nvlink_errors = self.nvlink_errors
        if reading.nvlinks:
            counters = {f"{n.link}:{name}": value for n in reading.nvlinks for name, value in n.errors.items()}
            nvlink_errors = nvlink_errors.add(at, counters, window_seconds)
        first_ecc = self.first_ecc if self.first_ecc is not None else reading.ecc
        return replace(
            self, telemetry=reading, first_ecc=first_ecc, nvlink_errors=nvlink_errors, vendor_counters=vendor_counters
        )

    def with_outcome(self, outcome: rules.ComputeOutcome, now: float) -> GpuHistory:
        verdicts, since = dict(self.verdicts), dict(self.since)
        for result in outcome.checks:
            if result.status is CheckStatus.SKIP:
                continue  # not run: the previous verdict of this kind stands
            previous = verdicts.get(result.check)
            if previous is None or (previous.status, previous.reason) != (result.status, result.reason):
                since[result.check] = now
            verdicts[result.check] = result
        ran = {c.check: c for c in outcome.checks}
        return replace(self, outcome=outcome, verdicts=verdicts, since=since, ran=ran)

    def compute_results(self) -> tuple[CheckResult, ...]:
        """Each compute check's result as it stands: fresh, carried over (stale), or not run."""
        results: list[CheckResult] = []
        skipped = self.skipped
        for check in COMPUTE_ORDER:
            verdict = self.verdicts.get(check)
            latest = None if skipped else self.ran.get(check)
            if verdict is not None and latest is verdict:
                results.append(verdict)
            elif verdict is not None:
                why = skipped.why if skipped else (latest.message if latest else "not run in the latest cycle")
                message = f"{verdict.message} (from the cycle before; not run now: {why})"
                results.append(replace(verdict, stale=True, message=message))
            elif skipped is not None and not self.verdicts:
                results.append(CheckResult(check, CheckStatus.SKIP, skipped.reason, f"not run: {skipped.why}"))
            elif latest is not None:
                results.append(latest)
        return tuple(results)

    def report(
        self,
        device: DeviceInfo,
        *,
        now: float,
        policy: rules.Policy,
        expected: rules.Expected,
        vendor: VendorRules | None = None,
    ) -> GpuReport:
        checks = rules.telemetry_checks(
            self.telemetry,
            self.xids,
            baseline_aggregate_double=self.first_ecc.aggregate_double if self.first_ecc else None,
            now=now,
            policy=policy,
            nvlink_rates=self.nvlink_errors.per_minute(),
        )
        if vendor is not None:
            facts = DeviceFacts(
                self.telemetry, self.xids, self.first_ecc, self.vendor_counters.per_minute(), now, policy
            )
            checks = merged(checks, vendor.checks(facts))
        outcome = self.outcome
        compute = [rules.with_action(result) for result in self.compute_results()]
        return GpuReport(
            device=device,
            telemetry=self.telemetry,
            checks=tuple(sorted([*checks, *compute], key=lambda c: CHECK_ORDER[c.check])),
            matmul_tflops=dict(outcome.matmul_tflops) if outcome else {},
            matmul_efficiency=dict(outcome.matmul_efficiency) if outcome else {},
            expected_tflops=dict(expected.tflops),
            bandwidth_bytes_per_second=outcome.bandwidth_bytes_per_second if outcome else None,
            bandwidth_efficiency=outcome.bandwidth_efficiency if outcome else None,
            xid_counts=dict(self.xids.counts),
            last_xid=self.xids.last_xid,
            verdicts={
                check: CheckVerdict(result.status, result.reason, self.since[check])
                for check, result in self.verdicts.items()
            },
        )


@dataclass(frozen=True)
class AgentState:
    """The devices of the latest inventory and the history of every GPU seen. Replaced, never mutated."""

    devices: tuple[DeviceInfo, ...] = ()
    inventory_at: float | None = None
    inventory_error: str | None = None
    """The backend's error when the inventory was taken (None: it was working)."""
    backend_error: str | None = None
    """The backend's error as of the latest pass over it."""
    gpus: Mapping[str, GpuHistory] = field(default_factory=dict)
    versions: DriverVersions = field(default_factory=DriverVersions)
    """The driver's and CUDA's versions, from the latest inventory that had them."""
    infiniband: tuple[IbPort, ...] = ()
    """The host's RDMA ports as last read."""
    infiniband_errors: rules.CounterWindow = field(default_factory=rules.CounterWindow)
    """InfiniBand error counters (`<device>/<port>:<counter>`) over the rate window."""

    def gpu(self, uuid: str) -> GpuHistory:
        return self.gpus.get(uuid) or GpuHistory()

    def device_at(self, index: int) -> DeviceInfo | None:
        return next((device for device in self.devices if device.index == index), None)

    def inventory_due(self, now: float, refresh_seconds: float) -> bool:
        return self.inventory_at is None or now - self.inventory_at >= refresh_seconds

    def with_inventory(self, inventory: Inventory) -> AgentState:
        known = inventory.versions if inventory.versions != DriverVersions() else self.versions
        return replace(
            self,
            devices=inventory.devices,
            inventory_at=inventory.taken_at,
            inventory_error=inventory.error,
            backend_error=inventory.error,
            versions=known,
        )

    def with_readings(
        self, readings: Readings, now: float, *, window_seconds: float = 600.0, vendor: VendorRules | None = None
    ) -> AgentState:
        """Take a telemetry pass: the readings replace the previous ones, the XIDs add up, the error
        counters join their rate windows."""
        state = self.with_inventory(readings.inventory) if readings.inventory is not None else self
        by_index = {device.index: device for device in state.devices}
        gpus = dict(state.gpus)
        for reading in readings.telemetry:
            device = by_index.get(reading.index)
            if device is not None:
                history = state.gpu(device.uuid)
                gpus[device.uuid] = history.with_reading(reading, at=now, window_seconds=window_seconds, vendor=vendor)
        for event in readings.xid_events:
            device = by_index.get(event.index)
            if device is not None:
                history = gpus.get(device.uuid) or GpuHistory()
                gpus[device.uuid] = replace(history, xids=history.xids.add(event.xid, event.timestamp or now))
        counters = {f"{p.name}:{name}": value for p in readings.infiniband for name, value in p.counters.items()}
        infiniband_errors = (
            state.infiniband_errors.add(now, counters, window_seconds) if counters else rules.CounterWindow()
        )
        return replace(
            state,
            gpus=gpus,
            backend_error=readings.backend_error,
            infiniband=readings.infiniband,
            infiniband_errors=infiniband_errors,
        )

    def with_skipped(self, skipped: Mapping[str, Skipped]) -> AgentState:
        """Note the GPUs whose compute checks will not run in this cycle (GPU UUID → why)."""
        gpus = dict(self.gpus)
        for uuid, why in skipped.items():
            gpus[uuid] = replace(self.gpu(uuid), skipped=why)
        return replace(self, gpus=gpus)

    def with_checks(
        self,
        results: Sequence[tuple[DeviceInfo, Sequence[Measurement] | None]],
        *,
        now: float,
        policy: rules.Policy,
        expected: Callable[[DeviceInfo], rules.Expected],
    ) -> AgentState:
        """Judge a compute cycle's measurements (None: the GPU was not checked), peers included."""
        gpus = dict(self.gpus)
        fresh: dict[str, rules.ComputeOutcome] = {}
        for device, measurements in results:
            history = gpus.get(device.uuid) or GpuHistory()
            if measurements is None:
                if history.skipped is None:
                    gpus[device.uuid] = replace(
                        history, skipped=Skipped("ComputeUnavailable", "no compute job for this device")
                    )
                continue
            gpus[device.uuid] = replace(history, skipped=None)
            fresh[device.uuid] = rules.compute_checks(measurements, policy=policy, expected=expected(device), now=now)
        policy_tflops = {
            device.index: outcome.matmul_tflops[policy.dtype]
            for device, _ in results
            if (outcome := fresh.get(device.uuid)) is not None and policy.dtype in outcome.matmul_tflops
        }
        slow = rules.peer_outliers(policy_tflops, policy.peer_tolerance)
        for device, _ in results:
            outcome = fresh.get(device.uuid)
            if outcome is None:
                continue
            if device.index in slow:
                checks = tuple(
                    rules.mark_slower_than_peers(c, slow[device.index], policy.peer_tolerance)
                    if c.check is Check.MATMUL
                    else c
                    for c in outcome.checks
                )
                outcome = replace(outcome, checks=checks)
            gpus[device.uuid] = gpus[device.uuid].with_outcome(outcome, now)
        return replace(self, gpus=gpus)

    def with_restored(self, recorded: Mapping[str, Mapping[str, WireVerdict]], now: float) -> AgentState:
        """Take back the compute verdicts a previous agent left on the node; the ones known here win."""
        gpus = dict(self.gpus)
        for uuid, kinds in recorded.items():
            history = self.gpu(uuid)
            verdicts, since = dict(history.verdicts), dict(history.since)
            for name, verdict in kinds.items():
                try:
                    check = Check(name)
                except ValueError:
                    continue
                if not check.is_compute or check in verdicts:
                    continue
                at = verdict.since.timestamp() if verdict.since else now
                when = datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
                verdicts[check] = CheckResult(
                    check,
                    CheckStatus(verdict.status),
                    verdict.reason,
                    f"{verdict.reason} since {when}, as recorded on the node before the agent restarted",
                    finished_at=at,
                    summary=f"{check.value} check: {verdict.reason} (recorded before the agent restarted)",
                )
                since[check] = at
            gpus[uuid] = replace(history, verdicts=verdicts, since=since)
        return replace(self, gpus=gpus)

    def node_checks(self, *, expected_gpus: int | None, now: float) -> tuple[CheckResult, ...]:
        """The node-wide checks: GPU count and InfiniBand ports."""
        results = (
            rules.gpu_count_rule(len(self.devices), expected_gpus, self.backend_error),
            rules.infiniband_rule(self.infiniband, self.infiniband_errors.per_minute()),
        )
        return tuple(rules.with_action(replace(result, finished_at=now)) for result in results)

    def gpu_reports(
        self,
        *,
        now: float,
        policy: rules.Policy,
        expected: Callable[[DeviceInfo], rules.Expected],
        vendor: VendorRules | None = None,
    ) -> tuple[GpuReport, ...]:
        return tuple(
            self.gpu(device.uuid).report(device, now=now, policy=policy, expected=expected(device), vendor=vendor)
            for device in self.devices
        )
