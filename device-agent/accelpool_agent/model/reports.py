"""What the agent publishes: one `GpuReport` per GPU and the node's `NodeReport`, which /metrics,
the node reporter (condition and annotation) and `accelpool-agent check --json` read. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from accelpool_agent.model.checks import CHECK_ORDER, Check, CheckResult, CheckStatus, CheckVerdict, worst
from accelpool_agent.model.devices import DeviceInfo, IbPort, Telemetry

if TYPE_CHECKING:  # compute children unpickle the model's classes: keep pydantic out of their imports
    from accelpool_core.protocol import Action, Finding, HealthReport, HealthStatus


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
    checks: tuple[CheckResult, ...] = ()
    """Node-wide checks (GPU count, InfiniBand), beside each GPU's own."""
    findings: tuple[Finding, ...] = ()
    """Every check that did not simply pass, grouped over GPUs, worst first (`rules.findings`)."""
    driver_version: str | None = None
    cuda_version: str | None = None
    infiniband: tuple[IbPort, ...] = ()
    """The host's RDMA ports as last read (none: no /sys/class/infiniband)."""

    @property
    def healthy(self) -> bool:
        return self.status.value == "Healthy"

    @property
    def action(self) -> Action:
        """The recommended action: the strongest action among the CRITICAL findings."""
        from accelpool_core.protocol import Severity, strongest

        return strongest(f.action for f in self.findings if f.severity is Severity.CRITICAL)

    def health_report(self) -> HealthReport:
        from accelpool_core.protocol import MAX_FINDINGS, BadDevice, HealthReport, Severity
        from accelpool_core.protocol import CheckVerdict as WireVerdict

        def _worst_reason(index: int) -> str:
            """The first (worst) critical finding naming the device, else the node's reason."""
            found = next(
                (f for f in self.findings if f.severity is Severity.CRITICAL and index in f.gpus),
                None,
            )
            return (found.reason if found else self.reason)[:64]

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
            bad_devices=[
                BadDevice(index=gpu.device.index, uuid=gpu.device.uuid, reason=_worst_reason(gpu.device.index))
                for gpu in self.gpus
                if gpu.device.index in self.bad_gpus and gpu.device.uuid
            ][:64],
            tflops=self.tflops,
            dtype=self.dtype if self.tflops is not None else None,
            checked_at=datetime.fromtimestamp(self.checked_at, UTC),
            pool=self.pool,
            verdicts=verdicts,
            action=self.action,
            findings=list(self.findings[:MAX_FINDINGS]),
            complete=self.complete,
            driver_version=self.driver_version,
            cuda_version=self.cuda_version,
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
            "complete": self.complete,
            "action": self.action.value,
            "findings": [f.model_dump(mode="json") for f in self.findings],
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "checks": [c.to_json() for c in self.checks],
            "infiniband": [
                {
                    "port": p.name,
                    "state": p.state_name,
                    "phys_state": p.phys_state_name,
                    "link_layer": p.link_layer,
                    "rate_gbps": p.rate_gbps,
                    "counters": dict(p.counters),
                }
                for p in self.infiniband
            ],
            "gpus": [g.to_json() for g in self.gpus],
        }
