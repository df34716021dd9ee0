"""Google TPU rules: one chip's readings from the TPU backend in, its `device` result out.

What libtpu's TPU Monitoring Library gives (cloud.google.com/tpu/docs/tpu-monitoring-library:
duty cycle, TensorCore utilization, HBM capacity and usage, transfer latencies, HLO queues) has
no temperature, power, clock, ECC or error counter, so the TPU has no thermal, power, clocks,
ecc or xid result: those checks skip on the readings' None, and nothing here invents them.

- A chip that was on the host and is gone (its PCI function vanished: `Telemetry.lost`) fails
  (TpuChipMissing) and asks for restart-os: the chip's PCI function and its `/dev/vfio/<n>` or
  `/dev/accel<n>` file appear when the host boots, so a chip that fell off needs the host booted
  again. If it is still gone, Google's remedy is beyond the node: report the host faulty with
  `CHIP_ERROR` ("TPU errors or faults where the accelerator becomes unresponsive"; Cloud TPU
  docs, "Report and repair faulty hosts"), or let GKE's node auto-repair drain and re-create a
  node that stays unhealthy (GKE docs, "Auto-repair nodes"). Google's GKE TPU pages say nothing
  about a chip vanishing from a running node specifically.
- The runtime serves metrics (a duty-cycle or TensorCore reading arrived) but not the chip's HBM
  warns (HbmReadingUnavailable): the runtime is up, yet part of the chip does not report.
- HBM in use above the chip's capacity warns (HbmReadingInconsistent): a reading that cannot be true.
- No reading at all passes with a note (RuntimeIdle, severity INFO): the runtime publishes
  metrics only while a framework uses the TPU (tpu-info's README; its CLI's "Libtpu metrics
  unavailable. Is there a framework using the TPU?"), so an idle chip has none.

Fewer chips than the pool expects is the node-wide `gpu_count_rule` (GpuMissing, restart-os), as
for every vendor. Pure functions.
"""

from __future__ import annotations

from dataclasses import replace

from accelpool_agent.model import Check, CheckResult, CheckStatus, Telemetry
from accelpool_agent.rules.findings import with_action
from accelpool_core.protocol import Action

_result = CheckResult.of
_GIB = float(1 << 30)


def tpu_device_rule(telemetry: Telemetry | None) -> CheckResult:
    """The chip's `device` result (see the module's docstring for each reason and its source)."""
    if telemetry is None:
        return _result(Check.DEVICE, CheckStatus.SKIP, "NoTelemetry", "the TPU backend reports nothing for this chip")
    if telemetry.lost:
        result = _result(
            Check.DEVICE,
            CheckStatus.FAIL,
            "TpuChipMissing",
            f"the TPU chip is gone: {telemetry.error or 'its PCI function vanished'}",
            "TPU chip missing (gone from the host)",
        )
        return replace(result, action=Action.RESTART_OS)
    used, total = telemetry.memory_used_bytes, telemetry.memory_total_bytes
    runtime_up = telemetry.utilization_ratio is not None or telemetry.tensorcore_utilization_ratio is not None
    if used is None or total is None:
        if runtime_up:
            return _result(
                Check.DEVICE,
                CheckStatus.WARN,
                "HbmReadingUnavailable",
                f"the libtpu runtime reports the chip but not its HBM: {telemetry.error or 'no value'}",
                "TPU HBM reading unavailable while the runtime is up",
            )
        return _result(
            Check.DEVICE,
            CheckStatus.PASS,
            "RuntimeIdle",
            "the chip is present; the libtpu runtime publishes no metrics (no framework is using the TPU)",
            noteworthy=True,
        )
    if used > total:
        return _result(
            Check.DEVICE,
            CheckStatus.WARN,
            "HbmReadingInconsistent",
            f"HBM in use ({used / _GIB:.2f} GiB) exceeds the chip's capacity ({total / _GIB:.2f} GiB)",
            "TPU HBM usage above capacity",
        )
    return _result(
        Check.DEVICE,
        CheckStatus.PASS,
        "Responding",
        f"the chip reports {used / _GIB:.2f} GiB of {total / _GIB:.2f} GiB HBM in use",
        "the TPU chip reports its readings",
    )


def tpu_checks(telemetry: Telemetry | None) -> tuple[CheckResult, ...]:
    """A TPU chip's telemetry results, each with its step of the action ladder; for a TPU pool these
    take the place of the NVIDIA device, recovery, xid, ecc, row_remap and retired_pages results."""
    return (with_action(tpu_device_rule(telemetry)),)
