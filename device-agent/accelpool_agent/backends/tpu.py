"""The Google TPU backend: chips from sysfs, their readings from libtpu's monitoring SDK.

Inventory: the host's TPU chips as tpu-info finds them (`tpu_chips`: PCI functions of vendor
0x1ae0 and their device ids, or the `/dev/accel<n>` and `/dev/vfio/<n>` device files). A chip seen
once stays in the inventory: when its PCI function vanishes it reads as lost (`Telemetry.lost`),
as a GPU that fell off the bus does under NVML.

Telemetry: libtpu's TPU Monitoring Library (`libtpu` on PyPI; cloud.google.com/tpu/docs/
tpu-monitoring-library): `tpumonitoring.list_supported_metrics()` names the metrics this libtpu
has, and `tpumonitoring.get_metric(name).data()` returns one value per accelerator, as strings
(the page's examples: `duty_cycle_pct` → `['10.00', '20.00', ...]`, percent of time the
accelerator was busy over a 5 s window; `tensorcore_util` → percent TensorCore usage;
`hbm_capacity_total` and `hbm_capacity_usage` → bytes). Values are paired with the chips by
position, as tpu-info pairs its chip paths with the runtime's metrics (`tpu_info/cli.py`); a
generation with two devices per chip (v2, v3, 7x) reports memory per device, summed per chip here
(tpu-info `metrics.py`: "Duty cycle is always measured per-chip, while memory is measured
per-core"). A list whose length fits neither the chips nor their devices cannot be attributed
and reads as no data. The runtime serves these metrics only while a framework (JAX, PyTorch/XLA)
uses the TPU (tpu-info's README; its CLI prints "Libtpu metrics unavailable. Is there a
framework using the TPU?"): with no workload every reading is None and the telemetry says so.

Errors: `error` is set, and inventory and telemetry are empty, when libtpu cannot be imported,
when `list_supported_metrics()` fails (the runtime is broken), or when the host has no TPU chip
at all; opening is retried every `retry_seconds`. tpu-info's CLI catches ImportError (no libtpu),
AttributeError (an older libtpu without the metric) and RuntimeError from the SDK; the SDK's
documentation does not say which exception a failing `get_metric` raises, so any exception from
one metric makes that metric no data for this reading, never an error of the backend.

No XID equivalent: the monitoring SDK's metrics are utilization, memory, latency and queue
gauges, with no error or event stream, so `drain_xid_events` returns nothing. Compute: none.
The agent's compute children run CuPy or NumPy kernels; a TPU needs JAX or PyTorch/XLA, which
this agent does not carry, so `compute_job` returns None. `versions` gives libtpu's version
(`libtpu.__version__`) as the driver. The SDK module is injectable for tests.
"""

from __future__ import annotations

import importlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.backends.tpu_chips import Chip, discover
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent

log = logging.getLogger(__name__)

HBM_USAGE = "hbm_capacity_usage"
HBM_TOTAL = "hbm_capacity_total"
DUTY_CYCLE = "duty_cycle_pct"
TENSORCORE = "tensorcore_util"
METRICS = (HBM_USAGE, HBM_TOTAL, DUTY_CYCLE, TENSORCORE)
"""The TPU Monitoring Library metrics read every telemetry tick."""
PER_DEVICE_SUMMED = frozenset({HBM_USAGE, HBM_TOTAL})
"""Metrics reported per device (TensorCore) and summed per chip; the others are per chip or averaged."""


def load_monitoring() -> Any:
    """libtpu's monitoring module: `from libtpu.sdk import tpumonitoring` (the TPU Monitoring Library
    page), or `sdk.monitoring` in the older libtpu tpu-info's CLI also reads. Whether `tpumonitoring`
    is a submodule or an attribute of `libtpu.sdk` the sources do not say: both are tried."""
    sdk = importlib.import_module("libtpu.sdk")
    module = getattr(sdk, "tpumonitoring", None)
    if module is None:
        try:
            module = importlib.import_module("libtpu.sdk.tpumonitoring")
        except ImportError:
            module = getattr(sdk, "monitoring", None)
    if module is None:
        raise ImportError("libtpu.sdk has no tpumonitoring (nor monitoring) module: libtpu is too old")
    return module


def libtpu_version() -> str | None:
    try:
        version = getattr(importlib.import_module("libtpu"), "__version__", None)
    except ImportError:
        return None
    return str(version) if version is not None else None


@dataclass(frozen=True)
class MetricReading:
    """One metric's values per chip (None: no data), or why there are none."""

    values: tuple[float, ...] | None
    why: str | None = None

    def at(self, position: int) -> float | None:
        return self.values[position] if self.values is not None else None


def per_chip(raw: Sequence[Any], chips: int, devices_per_chip: int, *, summed: bool) -> tuple[float, ...] | None:
    """The SDK's per-accelerator strings as one number per chip: as many values as chips are taken as
    they are; `chips x devices_per_chip` values are combined per chip (summed, or averaged); any other
    length, or a value that is not a number, is no data."""
    try:
        values = [float(str(value).strip().rstrip("%")) for value in raw]
    except ValueError:
        return None
    if chips and len(values) == chips:
        return tuple(values)
    if chips and devices_per_chip > 1 and len(values) == chips * devices_per_chip:
        groups = [values[i : i + devices_per_chip] for i in range(0, len(values), devices_per_chip)]
        return tuple(sum(group) if summed else sum(group) / len(group) for group in groups)
    return None


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


def describe(index: int, chip: Chip) -> DeviceInfo:
    generation = chip.generation
    identity = chip.pci_address or chip.device_file
    return DeviceInfo(
        index=index,
        uuid=f"TPU-{identity}",
        name=generation.product_name if generation is not None else "TPU chip",
        pci_bus_id=chip.pci_address,
        memory_total_bytes=generation.hbm_gib << 30 if generation is not None else None,
        model=generation.catalog_model if generation is not None else None,
    )


def _key(chip: Chip) -> str:
    return chip.pci_address or chip.device_file


class TpuBackend:
    name = "tpu"
    compute_engine: str | None = None
    """None: the agent's compute engines are CuPy and NumPy; a TPU computes through JAX, not carried."""

    def __init__(
        self,
        monitoring: Any | None = None,
        *,
        sysfs_root: Path = Path("/sys"),
        dev_root: Path = Path("/dev"),
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._injected = monitoring
        self._monitoring: Any = None
        self._sysfs_root = sysfs_root
        self._dev_root = dev_root
        self._infiniband = SysfsInfiniband(sysfs_root)
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._error: str | None = "libtpu not initialised"
        self._opened_at: float | None = None
        self._supported: frozenset[str] = frozenset()
        self._chips: dict[str, tuple[int, Chip]] = {}
        """Every chip seen since the backend opened, by PCI address (or device file), with its index."""
        self._present: list[str] = []
        self._version: str | None = None

    @property
    def error(self) -> str | None:
        return self._error

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        self._opened_at = self._clock()
        try:
            monitoring = self._injected if self._injected is not None else load_monitoring()
        except Exception as error:
            why = f"{type(error).__name__}: {error}"
            self._fail(f"libtpu's monitoring SDK cannot be loaded ({why}); the agent's image needs libtpu")
            return
        try:
            supported = frozenset(str(name) for name in monitoring.list_supported_metrics() or ())
        except Exception as error:
            self._fail(f"libtpu runtime unavailable: list_supported_metrics() failed: {error}")
            return
        self._monitoring, self._supported = monitoring, supported
        self._version = libtpu_version()
        self._error = None
        self._scan()
        if not self._chips:
            self._fail(
                f"no TPU chip found: no PCI function of vendor 0x1ae0 under {self._sysfs_root}/bus/pci/devices"
                f" and no accel<n> or vfio/<n> device file under {self._dev_root}"
            )

    def close(self) -> None:
        self._monitoring = None

    def _fail(self, why: str) -> None:
        self._error = why
        log.warning("TPU backend unavailable: %s", why)

    def _ensure_open(self) -> bool:
        if self._error is None:
            return True
        if self._opened_at is None or self._clock() - self._opened_at >= self._retry_seconds:
            self.open()
        return self._error is None

    # ------------------------------------------------------------------ inventory

    def _scan(self) -> None:
        present = discover(self._sysfs_root, self._dev_root)
        for chip in present:
            self._chips.setdefault(_key(chip), (len(self._chips), chip))
        self._present = [_key(chip) for chip in present]

    def inventory(self) -> list[DeviceInfo]:
        if not self._ensure_open():
            return []
        self._scan()
        return [describe(index, chip) for index, chip in self._chips.values()]

    # ------------------------------------------------------------------ telemetry

    def _devices_per_chip(self) -> int:
        generations = {chip.generation for _, chip in self._chips.values() if chip.generation is not None}
        return max((g.devices_per_chip for g in generations), default=1)

    def _read(self, name: str) -> MetricReading:
        if name not in self._supported:
            return MetricReading(None, f"this libtpu does not support {name}")
        try:
            raw = self._monitoring.get_metric(name).data()
        except Exception as error:
            return MetricReading(None, f"get_metric({name!r}) failed: {type(error).__name__}: {error}")
        if not raw:
            return MetricReading(None, f"{name} has no data (is a framework using the TPU?)")
        values = per_chip(list(raw), len(self._present), self._devices_per_chip(), summed=name in PER_DEVICE_SUMMED)
        if values is None:
            shown = list(raw)[:8]
            return MetricReading(None, f"{name} gave {len(raw)} value(s) for {len(self._present)} chip(s): {shown}")
        return MetricReading(values)

    def telemetry(self) -> list[Telemetry]:
        if not self._ensure_open():
            return []
        self._scan()
        readings = {name: self._read(name) for name in METRICS}
        position = {key: n for n, key in enumerate(self._present)}
        result = []
        for key, (index, chip) in self._chips.items():
            if key not in position:
                gone = f"TPU chip {chip.pci_address or chip.device_file} is gone from the host"
                result.append(Telemetry(index=index, lost=True, error=gone))
                continue
            result.append(chip_telemetry(index, position[key], readings))
        return result

    def drain_xid_events(self) -> list[XidEvent]:
        return []

    def versions(self) -> DriverVersions:
        return DriverVersions(driver=self._version)

    def infiniband(self) -> list[IbPort]:
        return self._infiniband.ports()

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        return None
