"""What the amdsmi backend reads from one AMD Instinct GPU, every call guarded (`AmdSmiCalls`).

The shapes are those of AMD's Python interface, `amdsmi` on PyPI (ROCm/amdsmi,
py-interface/amdsmi_interface.py): functions return dicts whose unreadable fields hold the string
"N/A", and raise `AmdSmiLibraryException` (py-interface/amdsmi_exception.py) whose
`get_error_code()` is an `amdsmi_status_t` (include/amd_smi/amdsmi.h). Units, as that interface
returns them:

- `amdsmi_get_gpu_vram_usage` → `vram_total` / `vram_used` in MB (MiB);
- `amdsmi_get_gpu_activity` → `gfx_activity` / `umc_activity` in percent;
- `amdsmi_get_temp_metric(h, AmdSmiTemperatureType, AmdSmiTemperatureMetric)` → °C. Instinct parts
  report no EDGE sensor (MI300X: NOT_SUPPORTED); HOTSPOT (= JUNCTION) is the sensor the firmware
  throttles on, so its CRITICAL metric is the slowdown limit. EDGE is the fallback for parts
  without a hotspot sensor;
- `amdsmi_get_power_info` → `socket_power` (amdsmi 7), `current_socket_power` (MI300) or
  `average_socket_power` (MI200) in W;
  `amdsmi_get_power_cap_info` → `power_cap` in µW; `amdsmi_get_energy_count` → the accumulator in
  units of `counter_resolution` µJ;
- `amdsmi_get_clock_info(h, AmdSmiClkType)` → `clk` / `max_clk` in MHz (`cur_clk` in amdsmi's first
  releases, whose interface also passed 0xFFFF, "no value", through unfiltered: such a reading, and an
  activity above 100%, is no data, as today's `_validate_if_max_uint` makes it "N/A");
- `amdsmi_get_pcie_info` → `pcie_metric.pcie_speed` (current, MT/s), `pcie_width`,
  `pcie_static.max_pcie_speed` (MT/s), `max_pcie_width`; the generation follows from the rate;
- `amdsmi_get_gpu_total_ecc_count` and `amdsmi_get_gpu_ecc_count(h, AmdSmiGpuBlock)` →
  `correctable_count`, `uncorrectable_count` (and `deferred_count`) since the driver loaded;
- `amdsmi_get_violation_status` (MI300 and later) → `active_*` flags: PROCHOT, PPT (package power,
  "PVIOL"), socket thermal ("TVIOL"), voltage-regulator thermal and HBM thermal throttling;
- `amdsmi_get_gpu_bad_page_info` → one record per retired (or pending) VRAM page, `status`
  AMDSMI_MEM_PAGE_STATUS_*; `amdsmi_get_gpu_bad_page_threshold` → amdgpu's threshold;
- `amdsmi_get_gpu_metrics_info` (the SMU firmware's metrics table) is the fallback for activity,
  temperature and throttling where the dedicated calls answer nothing (`indep_throttle_status`);
- `amdsmi_get_gpu_xgmi_link_status` → `status`: one of "U" (up), "D" (down), "X" (disabled) or
  "N/A" per link.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

from accelpool_agent.backends.amdsmi_status import DEAD_STATUSES, LOST_STATUSES, NO_DATA_STATUSES, status_name
from accelpool_agent.backends.library import DeviceLostError, LibraryDeadError
from accelpool_agent.model import DeviceInfo, EccCounts, NvLink, PcieLink, RetiredPages, Telemetry
from accelpool_core import catalog

log = logging.getLogger(__name__)

_NA = "N/A"
UINT16_NO_VALUE = 0xFFFF
PAGE_PENDING = 1
"""AMDSMI_MEM_PAGE_STATUS_PENDING (amdsmi.h): a bad page not yet retired (0 RESERVED, 2 UNRESERVABLE)."""
_MIB = 2**20
PCIE_GENERATIONS = {2500: 1, 5000: 2, 8000: 3, 16000: 4, 32000: 5, 64000: 6}
"""PCIe transfer rate per lane (MT/s) → generation."""
THROTTLE_FLAGS = {
    "active_prochot_thrm": "hw_thermal_slowdown",
    "active_socket_thrm": "sw_thermal_slowdown",
    "active_vr_thrm": "hw_thermal_slowdown",
    "active_hbm_thrm": "hw_thermal_slowdown",
    "active_ppt_pwr": "sw_power_cap",
}
"""amdsmi violation flag → the throttle reason it means (`model.THROTTLE_REASONS`): PROCHOT, voltage
regulator and HBM over temperature are hardware thermal slowdowns; the socket thermal limit (TVIOL)
is the firmware's thermal control; package power tracking (PVIOL) is the power cap."""


_THROTTLER_GROUPS = ((0, "sw_power_cap"), (16, "hw_slowdown"), (32, "hw_thermal_slowdown"))
"""(first bit, throttle reason) of the SMU throttler groups: power limits, current limits, temperatures."""


class GpuLostError(DeviceLostError):
    """An amdsmi call on one GPU answered NOT_FOUND, IO or DRM_ERROR."""


class AmdSmiDeadError(LibraryDeadError):
    """amdsmi answered NOT_INIT or INIT_ERROR: the library stopped working."""


class AmdSmiCalls:
    """One `amdsmi` module (the real one, or a test stand-in), every call guarded."""

    def __init__(self, module: Any, errors: Counter[str]) -> None:
        self.module = module
        self.errors = errors
        """Calls that failed for another reason, by amdsmi function name."""

    def status(self, error: BaseException) -> str | None:
        """The `AmdSmiRetCode` name of an amdsmi exception's status (`amdsmi_status.status_name`)."""
        return status_name(self.module, error)

    def get(self, function: str, *args: Any) -> Any:
        """Call an amdsmi function: None for "no data" (and for a function this version lacks);
        GpuLostError / AmdSmiDeadError for the serious cases; any other failure (another status, an
        `AmdSmiParameterException`, an exception of the library's own code) counted, read as None."""
        fn = getattr(self.module, function, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except Exception as error:  # the library's own, and its ctypes or lookup failures: never ours to raise
            status = self.status(error)
            if status in NO_DATA_STATUSES:
                return None
            if status in LOST_STATUSES:
                raise GpuLostError(f"{function}: {error}") from error
            if status in DEAD_STATUSES:
                raise AmdSmiDeadError(f"{function}: {error}") from error
            self.errors[function] += 1
            log.debug("%s failed: %s: %s", function, type(error).__name__, error)
            return None

    def enum(self, name: str, member: str) -> Any:
        """`amdsmi.<name>.<member>` (e.g. AmdSmiClkType.GFX), or None when this version lacks it."""
        return getattr(getattr(self.module, name, None), member, None)


def number(value: Any) -> float | None:
    """A reading as a number; None for amdsmi's "N/A" (or anything else that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def field(data: Any, *keys: str) -> float | None:
    """The first of `keys` in an amdsmi dict that holds a number."""
    if not isinstance(data, Mapping):
        return None
    for key in keys:
        value = number(data.get(key))
        if value is not None:
            return value
    return None


def percent(data: Any, key: str) -> float | None:
    """An activity in percent; None above 100 (amdsmi's `_validate_if_max_uint(isActivity=True)` rule)."""
    value = field(data, key)
    return value if value is not None and value <= 100 else None


def _not_sentinel(value: float | None) -> float | None:
    """None for 0xFFFF, the "no value" of a 16-bit reading that amdsmi's first releases passed through."""
    return None if value == UINT16_NO_VALUE else value


def detect_model(*names: str | None) -> catalog.Accelerator | None:
    """The catalog entry for amdsmi's product names, matched as `amd.com/gpu.product-name` values:
    words joined by `_`, without the `AMD_` prefix (`AMD Instinct MI300X OAM` → `Instinct_MI300X_OAM`,
    `AMD Instinct MI250X / MI250` → `Instinct_MI250X_MI250`)."""
    for name in names:
        if not name or name == _NA:
            continue
        key = _product_key(name).removeprefix("amd_")
        for accelerator in catalog.ACCELERATORS:
            if key in (_product_key(p) for p in accelerator.detection.amd_products):
                return accelerator
    return None


def _product_key(name: str) -> str:
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def describe(calls: AmdSmiCalls, index: int, handle: Any) -> DeviceInfo:
    asic = calls.get("amdsmi_get_gpu_asic_info", handle) or {}
    board = calls.get("amdsmi_get_gpu_board_info", handle) or {}
    vram = calls.get("amdsmi_get_gpu_vram_usage", handle)
    market, product = _text(asic.get("market_name")), _text(board.get("product_name"))
    accelerator = detect_model(product, market)
    total = field(vram, "vram_total")
    return DeviceInfo(
        index=index,
        uuid=_text(calls.get("amdsmi_get_gpu_device_uuid", handle)) or f"GPU-unknown-{index}",
        name=market or product or "AMD GPU",
        pci_bus_id=_text(calls.get("amdsmi_get_gpu_device_bdf", handle)) or "",
        memory_total_bytes=int(total) * _MIB if total is not None else None,
        model=accelerator.name if accelerator else None,
        compute_capability=_text(asic.get("target_graphics_version")),
        serial=_text(board.get("product_serial")) or _text(asic.get("asic_serial")),
    )


def read(calls: AmdSmiCalls, index: int, handle: Any) -> Telemetry:
    get = calls.get
    metrics = get("amdsmi_get_gpu_metrics_info", handle)
    activity = get("amdsmi_get_gpu_activity", handle) or _renamed(
        metrics, gfx_activity="average_gfx_activity", umc_activity="average_umc_activity"
    )
    vram = get("amdsmi_get_gpu_vram_usage", handle)
    power = get("amdsmi_get_power_info", handle)
    cap = field(get("amdsmi_get_power_cap_info", handle), "power_cap")
    gfx = get("amdsmi_get_clock_info", handle, calls.enum("AmdSmiClkType", "GFX"))
    mem = get("amdsmi_get_clock_info", handle, calls.enum("AmdSmiClkType", "MEM"))
    temperature, slowdown = _temperature(calls, handle)
    if temperature is None:
        temperature = field(metrics, "temperature_hotspot", "temperature_edge")
    used, total = field(vram, "vram_used"), field(vram, "vram_total")
    gfx_activity, umc_activity = percent(activity, "gfx_activity"), percent(activity, "umc_activity")
    return Telemetry(
        index=index,
        utilization_ratio=gfx_activity / 100.0 if gfx_activity is not None else None,
        memory_utilization_ratio=umc_activity / 100.0 if umc_activity is not None else None,
        memory_used_bytes=int(used) * _MIB if used is not None else None,
        memory_total_bytes=int(total) * _MIB if total is not None else None,
        temperature_celsius=temperature,
        slowdown_temperature_celsius=slowdown,
        power_watts=_not_sentinel(field(power, "socket_power", "current_socket_power", "average_socket_power")),
        power_limit_watts=cap / 1e6 if cap else None,
        energy_joules=_energy(calls, handle),
        sm_clock_hertz=_mhz(field(gfx, "clk", "cur_clk")),
        sm_clock_max_hertz=_mhz(field(gfx, "max_clk")),
        memory_clock_hertz=_mhz(field(mem, "clk", "cur_clk")),
        throttle_reasons=throttle_reasons(get("amdsmi_get_violation_status", handle)) or firmware_throttlers(metrics),
        ecc=_total_ecc(calls, handle),
        retired_pages=bad_pages(get("amdsmi_get_gpu_bad_page_info", handle)),
        pcie=pcie_link(get("amdsmi_get_pcie_info", handle)),
        compute_processes=_count(get("amdsmi_get_gpu_process_list", handle)),
        xgmi_links=xgmi_links(get("amdsmi_get_gpu_xgmi_link_status", handle)),
        ras_blocks=ras_blocks(calls, handle),
        bad_page_threshold=_integer(get("amdsmi_get_gpu_bad_page_threshold", handle)),
    )


def throttle_reasons(violations: Any) -> frozenset[str] | None:
    """The throttle reasons amdsmi's violation status shows as active now; None when not reported."""
    if not isinstance(violations, Mapping):
        return None
    flags = [key for key in THROTTLE_FLAGS if isinstance(violations.get(key), bool | int)]
    if not flags:
        return None
    return frozenset(THROTTLE_FLAGS[key] for key in flags if violations[key] is True or violations[key] == 1)


def bad_pages(records: Any) -> RetiredPages | None:
    """amdgpu's retired VRAM pages (`amdsmi_get_gpu_bad_page_info`): every record is a page retired
    for ECC errors or awaiting it (`status` PENDING, AMDSMI_MEM_PAGE_STATUS_*)."""
    if not isinstance(records, list):
        return None
    statuses = [record.get("status") for record in records if isinstance(record, Mapping)]
    return RetiredPages(double_bit=len(statuses), pending=PAGE_PENDING in statuses)


def firmware_throttlers(metrics: Any) -> frozenset[str] | None:
    """The throttle reasons in the GPU metrics' `indep_throttle_status`, the SMU firmware's throttler
    bits (Linux, drivers/gpu/drm/amd/pm/swsmu/inc/amdgpu_smu.h, SMU_THROTTLER_*_BIT: 0-15 power,
    16-31 current, 32-47 temperature, PROCHOT and VR-hot included): for GPUs without violation status."""
    mask = field(metrics, "indep_throttle_status")
    if mask is None:
        return None
    bits = int(mask)
    return frozenset(reason for shift, reason in _THROTTLER_GROUPS if (bits >> shift) & 0xFFFF)


def pcie_link(info: Any) -> PcieLink | None:
    if not isinstance(info, Mapping):
        return None
    metric, static = info.get("pcie_metric") or {}, info.get("pcie_static") or {}
    width, max_width = field(metric, "pcie_width"), field(static, "max_pcie_width")
    speed, max_speed = field(metric, "pcie_speed"), field(static, "max_pcie_speed")
    max_generation = PCIE_GENERATIONS.get(int(max_speed)) if max_speed is not None else None
    version = field(static, "pcie_interface_version")
    return PcieLink(
        generation=PCIE_GENERATIONS.get(int(speed)) if speed is not None else None,
        width=int(width) if width is not None else None,
        max_generation=max_generation or (int(version) if version is not None else None),
        max_width=int(max_width) if max_width is not None else None,
    )


def xgmi_links(status: Any) -> tuple[NvLink, ...] | None:
    """Links "U" (up) and "D" (down); "X" (disabled by the platform) and "N/A" are not links in use."""
    if not isinstance(status, Mapping) or not isinstance(status.get("status"), list):
        return None
    links = tuple(
        NvLink(link=link, active=state == "U") for link, state in enumerate(status["status"]) if state in ("U", "D")
    )
    return links or None


def ras_blocks(calls: AmdSmiCalls, handle: Any) -> dict[str, EccCounts] | None:
    """RAS counts of every block that reports them (a block without RAS answers NOT_SUPPORTED)."""
    blocks = getattr(calls.module, "AmdSmiGpuBlock", None)
    if blocks is None:
        return None
    found: dict[str, EccCounts] = {}
    for block in blocks:
        if block.name in ("INVALID", "RESERVED"):
            continue
        counts = _ecc_counts(calls.get("amdsmi_get_gpu_ecc_count", handle, block))
        if counts is not None:
            found[block.name] = counts
    return found or None


def driver_version(calls: AmdSmiCalls, handle: Any) -> str | None:
    info = calls.get("amdsmi_get_gpu_driver_info", handle)
    return _text(info.get("driver_version")) if isinstance(info, Mapping) else None


def lost_device(index: int, why: str) -> DeviceInfo:
    return DeviceInfo(
        index=index, uuid=f"GPU-lost-{index}", name=f"lost GPU ({why})", pci_bus_id="", memory_total_bytes=None
    )


def _temperature(calls: AmdSmiCalls, handle: Any) -> tuple[float | None, float | None]:
    current, critical = (
        calls.enum("AmdSmiTemperatureMetric", "CURRENT"),
        calls.enum("AmdSmiTemperatureMetric", "CRITICAL"),
    )
    for sensor in ("HOTSPOT", "EDGE"):
        kind = calls.enum("AmdSmiTemperatureType", sensor)
        reading = number(calls.get("amdsmi_get_temp_metric", handle, kind, current)) if kind is not None else None
        if reading is not None:
            return reading, number(calls.get("amdsmi_get_temp_metric", handle, kind, critical))
    return None, None


def _total_ecc(calls: AmdSmiCalls, handle: Any) -> EccCounts | None:
    return _ecc_counts(calls.get("amdsmi_get_gpu_total_ecc_count", handle))


def _ecc_counts(counts: Any) -> EccCounts | None:
    correctable, uncorrectable = field(counts, "correctable_count"), field(counts, "uncorrectable_count")
    if correctable is None and uncorrectable is None:
        return None
    return EccCounts(
        volatile_single=int(correctable) if correctable is not None else None,
        volatile_double=int(uncorrectable) if uncorrectable is not None else None,
    )


def _energy(calls: AmdSmiCalls, handle: Any) -> float | None:
    energy = calls.get("amdsmi_get_energy_count", handle)
    accumulator, resolution = field(energy, "energy_accumulator"), field(energy, "counter_resolution")
    if accumulator is None or resolution is None:
        return None
    return accumulator * resolution / 1e6


def _renamed(data: Any, **names: str) -> dict[str, Any] | None:
    """`data`'s fields under other names (the GPU metrics' averages as `amdsmi_get_gpu_activity` names them)."""
    if not isinstance(data, Mapping):
        return None
    return {name: data.get(source) for name, source in names.items()}


def _integer(value: Any) -> int | None:
    reading = number(value)
    return int(reading) if reading is not None else None


def _mhz(value: float | None) -> float | None:
    return value * 1e6 if value is not None else None


def _count(processes: Any) -> int | None:
    return len(processes) if isinstance(processes, list) else None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    text = value.decode(errors="replace").rstrip("\x00") if isinstance(value, bytes) else str(value)
    return text.strip() if text.strip() and text.strip() != _NA else None
