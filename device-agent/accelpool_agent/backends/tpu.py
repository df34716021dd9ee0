"""The Google TPU backend: chips from sysfs, their readings from libtpu's monitoring SDK or tpu-info.

Inventory: the host's TPU chips as tpu-info finds them (`tpu_chips`: PCI functions of vendor
0x1ae0 and their device ids, or the `/dev/accel<n>` and `/dev/vfio/<n>` device files; where the
agent's container sees neither and tpu-info is the source, the chips its `TPU Chips` table lists). A
chip seen once stays in the inventory: when its PCI function vanishes (or tpu-info no longer lists
it) it reads as lost (`Telemetry.lost`), as a GPU that fell off the bus does under NVML.

Telemetry, from libtpu's TPU Monitoring Library when it imports (`libtpu` on PyPI;
cloud.google.com/tpu/docs/tpu-monitoring-library): `tpumonitoring.list_supported_metrics()`
names the metrics this libtpu has, and `tpumonitoring.get_metric(name).data()` returns one
value per accelerator, as strings (the page's examples: `duty_cycle_pct` → `['10.00', '20.00',
...]`, percent of time the accelerator was busy over a 5 s window; `tensorcore_util` → percent
TensorCore usage; `hbm_capacity_total` and `hbm_capacity_usage` → bytes). Otherwise from the
`tpu-info` command's tables (`tpu_info`), which reads the same runtime over gRPC on
localhost:8431. How values pair with chips is `tpu_readings`. The runtime serves metrics only
while a framework (JAX, PyTorch/XLA) uses the TPU (tpu-info's README; its CLI prints "Libtpu
metrics unavailable. Is there a framework using the TPU?"): with no workload every reading is
None and the telemetry says why.

Errors: `error` is set, and inventory and telemetry are empty, when neither libtpu's SDK imports
nor a tpu-info command exists, when `list_supported_metrics()` fails (the runtime is broken), or
when the host has no TPU chip at all; opening is retried every `retry_seconds`. tpu-info's CLI
catches ImportError (no libtpu), AttributeError (an older libtpu without the metric) and
RuntimeError from the SDK; the SDK's documentation does not say which exception a failing
`get_metric` raises, so any exception from one metric (or a failing tpu-info run) makes that
reading no data, never an error of the backend.

No XID equivalent: the monitoring SDK's metrics are utilization, memory, latency and queue
gauges, with no error or event stream, so `drain_xid_events` returns nothing. Compute: none.
The agent's compute children run CuPy or NumPy kernels; a TPU needs JAX or PyTorch/XLA, which
this agent does not carry, so `compute_job` returns None. `versions` gives libtpu's version
(`libtpu.__version__`, or tpu-info's `Libtpu version:` line) as the driver. The SDK module and
the tpu-info runner are injectable for tests.
"""

from __future__ import annotations

import importlib
import logging
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from accelpool_agent.backends import Detector, Need, Registration, probes
from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.backends.tpu_chips import Chip, discover, listed
from accelpool_agent.backends.tpu_info import TpuInfoFormatError, TpuInfoReport, parse_tpu_info, run_tpu_info
from accelpool_agent.backends.tpu_readings import (
    METRICS,
    PER_DEVICE_SUMMED,
    SDK_ALIASES,
    MetricReading,
    chip_telemetry,
    from_tpu_info,
    per_chip,
)
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent

log = logging.getLogger(__name__)


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
        tpu_info: Callable[[], str] | None = None,
        sysfs_root: Path = Path("/sys"),
        dev_root: Path = Path("/dev"),
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """`monitoring`: libtpu's monitoring module (default: imported); `tpu_info`: what runs tpu-info and
        returns its output (default: the `tpu-info` on PATH), used when libtpu's SDK cannot be imported."""
        self._injected = monitoring
        self._monitoring: Any = None
        self._tpu_info = tpu_info
        self.source: str | None = None
        """`libtpu` or `tpu-info`: where the readings come from; None while unavailable."""
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
        self._noted: set[str] = set()
        """tpu-info's cells in no known format, logged once each."""
        self._listed: list[Chip] = []
        """The chips tpu-info's `TPU Chips` table listed at its latest run."""

    @property
    def error(self) -> str | None:
        return self._error

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        self._opened_at = self._clock()
        self.source = None
        try:
            monitoring = self._injected if self._injected is not None else load_monitoring()
        except Exception as error:
            self._open_tpu_info(f"libtpu's monitoring SDK cannot be loaded ({type(error).__name__}: {error})")
        else:
            self._open_sdk(monitoring)
        if self._error is not None:
            return
        if self.source == "tpu-info" and not discover(self._sysfs_root, self._dev_root):
            self._tpu_info_report()  # the chips its table lists, where the container shows none
        self._scan()
        if not self._chips:
            self._fail(
                f"no TPU chip found: no PCI function of vendor 0x1ae0 under {self._sysfs_root}/bus/pci/devices"
                f" and no accel<n> or vfio/<n> device file under {self._dev_root}"
                + (", and tpu-info lists none" if self.source == "tpu-info" else "")
            )

    def _open_sdk(self, monitoring: Any) -> None:
        try:
            supported = frozenset(str(name) for name in monitoring.list_supported_metrics() or ())
        except Exception as error:
            self._fail(f"libtpu runtime unavailable: list_supported_metrics() failed: {error}")
            return
        self._monitoring, self._supported, self.source = monitoring, supported, "libtpu"
        self._version = libtpu_version()
        self._error = None

    def _open_tpu_info(self, sdk_failure: str) -> None:
        if self._tpu_info is None and shutil.which("tpu-info") is not None:
            self._tpu_info = run_tpu_info
        if self._tpu_info is None:
            self._fail(f"{sdk_failure}, and no tpu-info command on PATH: the agent's image needs libtpu or tpu-info")
            return
        self.source, self._error = "tpu-info", None

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
        present = discover(self._sysfs_root, self._dev_root) or self._listed
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

    def _read_sdk(self, name: str) -> MetricReading:
        supported = next((alias for alias in SDK_ALIASES.get(name, (name,)) if alias in self._supported), None)
        if supported is None:
            return MetricReading(None, f"this libtpu does not support {name}")
        try:
            raw = self._monitoring.get_metric(supported).data()
        except Exception as error:
            return MetricReading(None, f"get_metric({name!r}) failed: {type(error).__name__}: {error}")
        if not raw:
            return MetricReading(None, f"{name} has no data (is a framework using the TPU?)")
        values = per_chip(list(raw), len(self._present), self._devices_per_chip(), summed=name in PER_DEVICE_SUMMED)
        if values is None:
            shown = list(raw)[:8]
            return MetricReading(None, f"{name} gave {len(raw)} value(s) for {len(self._present)} chip(s): {shown}")
        return MetricReading(values)

    def _tpu_info_report(self) -> TpuInfoReport | str:
        """tpu-info's output, parsed (its chips kept as `_listed`), or why it could not be had."""
        assert self._tpu_info is not None
        try:
            report = parse_tpu_info(self._tpu_info())
        except (OSError, subprocess.SubprocessError, TpuInfoFormatError) as error:
            stderr = str(getattr(error, "stderr", None) or "").strip()[-300:]
            return f"tpu-info failed: {type(error).__name__}: {error}" + (f" ({stderr})" if stderr else "")
        self._listed = listed(report.chip_files, report.chip_types)
        self._version = report.libtpu_version or self._version
        for problem in set(report.problems) - self._noted:
            self._noted.add(problem)
            log.warning("tpu-info: no data from %s", problem)
        return report

    def telemetry(self) -> list[Telemetry]:
        if not self._ensure_open():
            return []
        report = self._tpu_info_report() if self.source == "tpu-info" else None
        self._scan()
        if isinstance(report, str):
            readings = {name: MetricReading(None, report) for name in METRICS}
        elif report is not None:
            readings = from_tpu_info(report, len(self._present), self._devices_per_chip())
        else:
            readings = {name: self._read_sdk(name) for name in METRICS}
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


REGISTRATION = Registration(
    name="tpu",
    summary="Google TPU (libtpu or tpu-info)",
    factory=TpuBackend,
    needs=(Need("the libtpu module or tpu-info on PATH", modules=("libtpu",), commands=("tpu-info",)),),
    detector=Detector("TPU", probes.tpu),
)
