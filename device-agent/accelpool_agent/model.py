"""Value objects the device agent passes between its parts.

Pure data, no I/O. The backends produce `DeviceInfo`, `Telemetry` and `XidEvent`; the compute
children produce `Measurement`; the rules (`accelpool_agent.rules`) turn those into
`CheckResult`; the agent folds the results into `GpuReport` and `NodeReport`, which the
Prometheus exporter, the node reporter and the `check` CLI read.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # compute children unpickle these classes: keep pydantic out of their imports
    from accelpool_core.protocol import HealthReport, HealthStatus


class CheckStatus(enum.StrEnum):
    """Outcome of one check. `skip` means "not run this time" (busy GPU, unsupported dtype, ...)."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"

    @property
    def severity(self) -> int:
        """0 pass, 1 warn, 2 fail (the value of `accelpool_check_status`); -1 for skip."""
        return _SEVERITY[self.value]


_SEVERITY = {"skip": -1, "pass": 0, "warn": 1, "fail": 2}


class Check(enum.StrEnum):
    """Every check the agent runs, in the order that decides a GPU's headline reason."""

    DEVICE = "device"
    XID = "xid"
    ECC = "ecc"
    ROW_REMAP = "row_remap"
    RETIRED_PAGES = "retired_pages"
    SANITY = "sanity"
    CORRECTNESS = "correctness"
    MATMUL = "matmul"
    BANDWIDTH = "bandwidth"
    THERMAL = "thermal"
    PCIE_LINK = "pcie_link"

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_CHECKS


COMPUTE_CHECKS = frozenset({Check.SANITY, Check.CORRECTNESS, Check.MATMUL, Check.BANDWIDTH})
CHECK_ORDER = {check: position for position, check in enumerate(Check)}

DTYPES = ("fp32", "tf32", "fp16", "bf16")
"""Data types the matmul check can measure (fp8 has no portable GEMM entry point in CuPy)."""

THROTTLE_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
"""NVML clock-event ("throttle") reasons, snake_case, in NVML's bit order."""


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (GPU instance + compute instance) carved out of a physical GPU."""

    index: int
    uuid: str
    profile: str | None
    memory_total_bytes: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """What a GPU is: identity and static properties (from the backend's inventory)."""

    index: int
    uuid: str
    name: str
    """The driver's product name, e.g. `NVIDIA H100 80GB HBM3`."""
    pci_bus_id: str
    memory_total_bytes: int | None
    model: str | None = None
    """Catalog name (e.g. `H100-80GB`) when the device is recognised."""
    compute_capability: str | None = None
    """`major.minor`, e.g. `9.0`."""
    serial: str | None = None
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()


@dataclass(frozen=True)
class EccCounts:
    """ECC error counters: volatile (since the driver loaded) and aggregate (lifetime)."""

    volatile_single: int | None = None
    volatile_double: int | None = None
    aggregate_single: int | None = None
    aggregate_double: int | None = None


@dataclass(frozen=True)
class RetiredPages:
    """Dynamic page retirement (pre-Ampere ECC handling)."""

    single_bit: int | None = None
    double_bit: int | None = None
    pending: bool | None = None


@dataclass(frozen=True)
class RowRemap:
    """Row remapping (Ampere and later): remapped rows, a pending remap, a failed remap."""

    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


@dataclass(frozen=True)
class PcieLink:
    generation: int | None = None
    width: int | None = None
    max_generation: int | None = None
    max_width: int | None = None


@dataclass(frozen=True)
class Telemetry:
    """One GPU's readings at one moment. None means "no data" (not supported, not readable)."""

    index: int
    lost: bool = False
    """The GPU stopped answering (NVML_ERROR_GPU_IS_LOST)."""
    error: str | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    slowdown_temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    sm_clock_hertz: float | None = None
    sm_clock_max_hertz: float | None = None
    memory_clock_hertz: float | None = None
    throttle_reasons: frozenset[str] | None = None
    ecc: EccCounts | None = None
    retired_pages: RetiredPages | None = None
    row_remap: RowRemap | None = None
    pcie: PcieLink | None = None
    compute_processes: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "index":
                continue
            value = getattr(self, name)
            if isinstance(value, frozenset):
                value = sorted(value)
            elif isinstance(value, EccCounts | RetiredPages | RowRemap | PcieLink):
                value = dict(value.__dict__)
            data[name] = value
        return data


@dataclass(frozen=True)
class XidEvent:
    """A critical XID error the driver reported for a GPU."""

    index: int
    xid: int
    timestamp: float
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class Measurement:
    """What a compute check measured, as a compute child reports it (before policy is applied)."""

    check: Check
    status: CheckStatus
    """The child's own verdict: pass, fail (error, wrong results) or skip (unsupported)."""
    reason: str
    message: str
    value: float | None = None
    unit: str | None = None
    dtype: str | None = None
    duration_seconds: float = 0.0


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict for one GPU: status, a CamelCase reason, a value and a message."""

    check: Check
    status: CheckStatus
    reason: str
    message: str
    value: float | None = None
    unit: str | None = None
    dtype: str | None = None
    duration_seconds: float | None = None
    finished_at: float | None = None
    """Unix time the check finished."""
    summary: str = ""
    """Stable text without measured numbers, for the node condition (so it does not flap)."""
    stale: bool = False
    """Carried over from an earlier cycle (this cycle skipped the check, e.g. the GPU was busy)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.check.value,
            "status": self.status.value,
            "value": self.value,
            "unit": self.unit,
            "reason": self.reason,
            "message": self.message,
            "dtype": self.dtype,
            "duration_seconds": self.duration_seconds,
            "stale": self.stale,
        }


@dataclass(frozen=True)
class CheckVerdict:
    """The last verdict of one compute check on one GPU: what the agent persists across restarts."""

    status: CheckStatus
    """pass, warn or fail (a skipped check leaves the previous verdict in force)."""
    reason: str
    since: float
    """Unix time this status and reason were first reached (unchanged while they repeat)."""


def worst(results: tuple[CheckResult, ...] | list[CheckResult]) -> CheckResult | None:
    """The result that decides: highest severity, ties broken by `Check` order. None if all skipped."""
    ranked = [r for r in results if r.status is not CheckStatus.SKIP]
    if not ranked:
        return None
    return min(ranked, key=lambda r: (-r.status.severity, CHECK_ORDER[r.check]))


@dataclass(frozen=True)
class GpuReport:
    """Everything the agent knows about one GPU after a cycle or a telemetry tick."""

    device: DeviceInfo
    telemetry: Telemetry | None
    checks: tuple[CheckResult, ...]
    matmul_tflops: Mapping[str, float] = field(default_factory=dict)
    matmul_efficiency: Mapping[str, float] = field(default_factory=dict)
    expected_tflops: Mapping[str, float] = field(default_factory=dict)
    bandwidth_bytes_per_second: float | None = None
    bandwidth_efficiency: float | None = None
    xid_counts: Mapping[int, int] = field(default_factory=dict)
    last_xid: int | None = None
    verdicts: Mapping[Check, CheckVerdict] = field(default_factory=dict)
    """The last pass/warn/fail of each compute check (fresh, carried over, or read back at start)."""

    @property
    def compute_unchecked(self) -> bool:
        """Compute checks are due but none has a verdict: not checked, which is never "passed"."""
        compute = [c for c in self.checks if c.check.is_compute]
        return bool(compute) and all(c.status is CheckStatus.SKIP for c in compute)

    @property
    def status(self) -> CheckStatus:
        decisive = worst(self.checks)
        return CheckStatus.SKIP if decisive is None else decisive.status

    @property
    def reason(self) -> str:
        decisive = worst(self.checks)
        if decisive is None:
            return "NothingChecked"
        return "AllChecksPassed" if decisive.status is CheckStatus.PASS else decisive.reason

    def check(self, check: Check) -> CheckResult | None:
        for result in self.checks:
            if result.check is check:
                return result
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.device.index,
            "uuid": self.device.uuid,
            "model": self.device.model,
            "name": self.device.name,
            "pci_bus_id": self.device.pci_bus_id,
            "compute_capability": self.device.compute_capability,
            "mig_enabled": self.device.mig_enabled,
            "mig_devices": [
                {"index": m.index, "uuid": m.uuid, "profile": m.profile, "memory_total_bytes": m.memory_total_bytes}
                for m in self.device.mig_devices
            ],
            "status": self.status.value,
            "reason": self.reason,
            "telemetry": None if self.telemetry is None else self.telemetry.to_json(),
            "matmul_tflops": dict(self.matmul_tflops),
            "matmul_efficiency": dict(self.matmul_efficiency),
            "expected_tflops": dict(self.expected_tflops),
            "bandwidth_bytes_per_second": self.bandwidth_bytes_per_second,
            "bandwidth_efficiency": self.bandwidth_efficiency,
            "xid_counts": {str(k): v for k, v in sorted(self.xid_counts.items())},
            "checks": [c.to_json() for c in self.checks],
        }


@dataclass(frozen=True)
class NodeReport:
    """The node's verdict: what the condition, the annotation, /metrics and `check --json` say."""

    node: str
    pool: str | None
    backend: str
    status: HealthStatus
    reason: str
    message: str
    gpus: tuple[GpuReport, ...]
    bad_gpus: tuple[int, ...]
    dtype: str
    tflops: float | None
    """Sum of the GPUs' latest matmul TFLOPS in `dtype` (None when none was measured)."""
    checked_at: float
    """Unix time this report was assembled."""
    cycle_duration_seconds: float | None = None
    complete: bool = True
    """False until the first full cycle (compute checks included) has finished."""

    @property
    def healthy(self) -> bool:
        return self.status.value == "Healthy"

    def health_report(self) -> HealthReport:
        from accelpool_core.protocol import CheckVerdict as WireVerdict
        from accelpool_core.protocol import HealthReport

        verdicts = {
            gpu.device.uuid: {
                check.value: WireVerdict(
                    status=verdict.status.value, reason=verdict.reason, since=datetime.fromtimestamp(verdict.since, UTC)
                )
                for check, verdict in sorted(gpu.verdicts.items(), key=lambda item: CHECK_ORDER[item[0]])
            }
            for gpu in self.gpus
            if gpu.verdicts
        }
        return HealthReport(
            status=self.status,
            reason=self.reason,
            message=self.message,
            gpus=len(self.gpus),
            bad_gpus=list(self.bad_gpus),
            tflops=self.tflops,
            dtype=self.dtype if self.tflops is not None else None,
            checked_at=datetime.fromtimestamp(self.checked_at, UTC),
            pool=self.pool,
            verdicts=verdicts,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "pool": self.pool,
            "backend": self.backend,
            "healthy": self.healthy,
            "status": self.status.value,
            "reason": self.reason,
            "message": self.message,
            "bad_gpus": list(self.bad_gpus),
            "dtype": self.dtype,
            "tflops": self.tflops,
            "checked_at": datetime.fromtimestamp(self.checked_at, UTC).isoformat().replace("+00:00", "Z"),
            "cycle_duration_seconds": self.cycle_duration_seconds,
            "gpus": [g.to_json() for g in self.gpus],
        }
