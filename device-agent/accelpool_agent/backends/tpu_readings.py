"""One reading of a host's TPU chips: the metrics per chip, from libtpu's SDK or from tpu-info.

Both sources give one value per accelerator (the runtime's devices, in the runtime's order); they
are paired with the host's chips by position, as tpu-info pairs its chip paths with the runtime's
metrics (`tpu_info/cli.py`). A generation with two devices per chip (v2, v3, 7x) reports memory per
device, summed per chip here, and its duty cycle per chip (tpu-info `metrics.py`: "Duty cycle is
always measured per-chip, while memory is measured per-core"). A list whose length fits neither
the chips nor their devices cannot be attributed and reads as no data. Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelpool_agent.backends.tpu_info import TpuInfoReport
from accelpool_agent.model import Telemetry

HBM_USAGE = "hbm_capacity_usage"
HBM_TOTAL = "hbm_capacity_total"
DUTY_CYCLE = "duty_cycle_pct"
TENSORCORE = "tensorcore_util"
METRICS = (HBM_USAGE, HBM_TOTAL, DUTY_CYCLE, TENSORCORE)
"""The TPU Monitoring Library metrics read every telemetry tick."""
SDK_ALIASES: Mapping[str, tuple[str, ...]] = {TENSORCORE: (TENSORCORE, "tensorcore_utilization")}
"""The names a metric may have in libtpu's SDK, preferred first. tpu-info's cli_helper.py reads
`tensorcore_util`; `tensorcore_utilization` is tpu-info's own name for the metric (`--list_metrics`), and
other SDK clients accept it from `list_supported_metrics()` as well, so both are tried."""
PER_DEVICE_SUMMED = frozenset({HBM_USAGE, HBM_TOTAL})
"""Metrics reported per device (TensorCore) and summed per chip; the others are per chip or averaged."""


@dataclass(frozen=True)
class MetricReading:
    """One metric's values per chip (None: no data), or why there are none."""

    values: tuple[float | None, ...] | None
    why: str | None = None

    def at(self, position: int) -> float | None:
        return self.values[position] if self.values is not None else None


def per_chip(raw: Sequence[Any], chips: int, devices_per_chip: int, *, summed: bool) -> tuple[float | None, ...] | None:
    """Per-accelerator values (the SDK's strings, or tpu-info's numbers; None: not available) as one
    number per chip: as many values as chips are taken as they are; `chips x devices_per_chip` values
    are combined per chip (summed, or averaged; a chip with a missing value has none); any other
    length, or a value that is not a number, is no data."""
    try:
        values = [None if value is None else float(str(value).strip().rstrip("%")) for value in raw]
    except ValueError:
        return None
    if chips and len(values) == chips:
        return tuple(values)
    if chips and devices_per_chip > 1 and len(values) == chips * devices_per_chip:
        groups = [values[i : i + devices_per_chip] for i in range(0, len(values), devices_per_chip)]
        return tuple(_combine(group, summed=summed) for group in groups)
    return None


def _combine(group: list[float | None], *, summed: bool) -> float | None:
    numbers = [value for value in group if value is not None]
    if len(numbers) != len(group):
        return None
    return sum(numbers) if summed else sum(numbers) / len(numbers)


def chip_telemetry(index: int, position: int, readings: dict[str, MetricReading]) -> Telemetry:
    """One present chip's readings; `error` says why HBM or every reading is missing."""
    used, total = readings[HBM_USAGE].at(position), readings[HBM_TOTAL].at(position)
    duty, tensorcore = readings[DUTY_CYCLE].at(position), readings[TENSORCORE].at(position)
    error = None
    if used is None or total is None:
        why = readings[HBM_USAGE].why or readings[HBM_TOTAL].why or "no value for this chip"
        error = f"HBM reading unavailable: {why}"
    return Telemetry(
        index=index,
        error=error,
        utilization_ratio=round(duty / 100.0, 4) if duty is not None else None,
        memory_used_bytes=int(used) if used is not None else None,
        memory_total_bytes=int(total) if total is not None else None,
        tensorcore_utilization_ratio=round(tensorcore / 100.0, 4) if tensorcore is not None else None,
    )


def from_tpu_info(report: TpuInfoReport, chips: int, devices_per_chip: int) -> dict[str, MetricReading]:
    """tpu-info's tables as the SDK's metrics (its duty cycle, on a chip's first device, taken per chip)."""
    why = "tpu-info: libtpu metrics unavailable (is a framework using the TPU?)"
    if report.metrics_unavailable:
        return {name: MetricReading(None, why) for name in METRICS}
    duty: Sequence[float | None] = report.duty_cycle_pct
    if devices_per_chip > 1 and len(duty) == chips * devices_per_chip:
        duty = duty[::devices_per_chip]
    columns: Mapping[str, Sequence[float | int | None]] = {
        HBM_USAGE: report.hbm_used_bytes,
        HBM_TOTAL: report.hbm_total_bytes,
        DUTY_CYCLE: duty,
        TENSORCORE: report.tensorcore_pct,
    }
    return {name: _reading(name, values, chips, devices_per_chip, report.problems) for name, values in columns.items()}


def _reading(
    name: str, values: Sequence[float | int | None], chips: int, devices_per_chip: int, problems: Sequence[str]
) -> MetricReading:
    if not values or all(value is None for value in values):
        return MetricReading(None, f"tpu-info printed no {name}" + (f" ({problems[0]})" if problems else ""))
    per = per_chip(list(values), chips, devices_per_chip, summed=name in PER_DEVICE_SUMMED)
    if per is None:
        return MetricReading(None, f"tpu-info printed {len(values)} {name} value(s) for {chips} chip(s)")
    return MetricReading(per)
