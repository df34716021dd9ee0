"""A stand-in for AMD's `amdsmi` Python module: N scripted Instinct GPUs (MI300X by default).

Modelled on ROCm/amdsmi's py-interface: it raises amdsmi's exception classes with amdsmi.h's status
codes and takes amdsmi's enums (`amdsmi_api`), and every function returns the dict shape
py-interface/amdsmi_interface.py builds, with "N/A" where the library has no value.
`amdsmi_get_gpu_event_notification` answers AMDSMI_STATUS_NO_DATA when no event is waiting, as
rocm_smi's event API does.

Scripting: `errors[(function, gpu or None)] = code` makes that call raise; `GpuScript` holds each
GPU's readings; `lose(gpu)` makes a GPU vanish from `amdsmi_get_processor_handles` and answer
AMDSMI_STATUS_NOT_FOUND; `events` queues (gpu, event name, message). `from_script` builds the same
from a JSON document, for the stand-in module that subprocesses import (tests/fixtures/agent/amdsmi/).
"""

from __future__ import annotations

import enum
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stand-in is also imported outside pytest, by tests/fixtures/agent/amdsmi/amdsmi.py
    import pytest

from .amdsmi_api import (
    STATUS_NO_DATA,
    STATUS_NOT_FOUND,
    STATUS_NOT_INIT,
    STATUS_NOT_SUPPORTED,
    AmdSmiClkType,
    AmdSmiEvtNotificationType,
    AmdSmiException,
    AmdSmiGpuBlock,
    AmdSmiInitFlags,
    AmdSmiLibraryException,
    AmdSmiParameterException,
    AmdSmiRetCode,
    AmdSmiRetryException,
    AmdSmiTemperatureMetric,
    AmdSmiTemperatureType,
    AmdSmiTimeoutException,
)


@dataclass(frozen=True)
class Handle:
    """A processor handle (the real one is an opaque `amdsmi_processor_handle` pointer)."""

    gpu: int


@dataclass
class GpuScript:
    """One GPU's readings, in amdsmi's units."""

    market_name: str = "AMD Instinct MI300X"
    product_name: str = "AMD Instinct MI300X OAM"
    vram_total_mb: int = 196_592
    vram_used_mb: int = 1_024
    gfx_activity: int | str = 35
    umc_activity: int | str = 10
    hotspot_c: int = 48
    hotspot_critical_c: int = 105
    socket_power_w: int | str = 320
    power_cap_uw: int = 750_000_000
    gfx_clk_mhz: int = 2_100
    gfx_max_mhz: int = 2_100
    mem_clk_mhz: int = 1_300
    pcie_speed_mts: int = 32_000
    pcie_width: int = 16
    correctable: int = 0
    uncorrectable: int = 0
    blocks: dict[str, tuple[int, int]] = field(default_factory=lambda: {"UMC": (0, 0), "XGMI_WAFL": (0, 0)})
    """RAS block → (correctable, uncorrectable); other blocks answer NOT_SUPPORTED."""
    xgmi: list[str] = field(default_factory=lambda: ["U"] * 7 + ["X"])
    """One of U / D / X / N/A per link (MI300X: 7 links to its peers on the OAM baseboard)."""
    violations: dict[str, bool] = field(default_factory=dict)
    """`active_*` violation flags that are set (the others are False)."""
    bad_pages: list[int] = field(default_factory=list)
    """The AMDSMI_MEM_PAGE_STATUS_* of each retired VRAM page (0 reserved, 1 pending, 2 unreservable)."""
    bad_page_threshold: int = 128
    throttlers: int = 0
    """The GPU metrics' `indep_throttle_status` (SMU_THROTTLER_*_BIT mask)."""


@dataclass
class FakeAmdSmi:
    gpus: int = 8
    init_error: int | None = None
    errors: dict[tuple[str, int | None], int] = field(default_factory=dict)
    scripts: dict[int, GpuScript] = field(default_factory=dict)
    events: list[tuple[int, str, str]] = field(default_factory=list)
    gone: set[int] = field(default_factory=set)
    initialised: bool = False
    ret_codes: type[enum.IntEnum] = AmdSmiRetCode
    """The module's `AmdSmiRetCode` (its status numbering)."""
    no_event: type[AmdSmiTimeoutException] | None = None
    """What reading events raises when none waits: NO_DATA (None), or `AmdSmiTimeoutException`."""

    def __post_init__(self) -> None:
        for gpu in range(self.gpus):
            self.scripts.setdefault(gpu, GpuScript())

    def lose(self, gpu: int) -> None:
        self.gone.add(gpu)

    @classmethod
    def from_script(cls, script: Mapping[str, Any]) -> FakeAmdSmi:
        """A stand-in from a JSON document: `gpus`; `gpu` (GPU index → `GpuScript` fields, e.g.
        `{"3": {"uncorrectable": 2, "blocks": {"UMC": [0, 2]}}}`); `errors` (`[function, GPU or null,
        status]` triples); `events` (`[GPU, event name, message]`); `lost` (GPU indexes); `init_error`."""
        known = {f.name for f in fields(GpuScript)}
        fake = cls(gpus=int(script.get("gpus", 8)), init_error=script.get("init_error"))
        for gpu, values in (script.get("gpu") or {}).items():
            unknown = set(values) - known
            if unknown:
                raise ValueError(
                    f"fake amdsmi script, GPU {gpu}: unknown fields {sorted(unknown)}; valid: {sorted(known)}"
                )
            settings = dict(values)
            if "blocks" in settings:
                settings["blocks"] = {block: tuple(counts) for block, counts in settings["blocks"].items()}
            fake.scripts[int(gpu)] = GpuScript(**settings)
        for function, gpu, status in script.get("errors") or []:
            fake.errors[(function, gpu)] = int(status)
        fake.events.extend((int(gpu), str(name), str(message)) for gpu, name, message in script.get("events") or [])
        fake.gone.update(int(gpu) for gpu in script.get("lost") or [])
        return fake

    def install(self, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
        """Install the stand-in under the name `amdsmi`, as `import amdsmi` would find it."""
        module = self.module()
        monkeypatch.setitem(sys.modules, "amdsmi", module)
        return module

    def module(self) -> types.ModuleType:
        module = types.ModuleType("amdsmi")
        module.AmdSmiRetCode = self.ret_codes  # type: ignore[attr-defined]
        for value in (
            AmdSmiException,
            AmdSmiLibraryException,
            AmdSmiRetryException,
            AmdSmiTimeoutException,
            AmdSmiParameterException,
            AmdSmiInitFlags,
            AmdSmiClkType,
            AmdSmiTemperatureType,
            AmdSmiTemperatureMetric,
            AmdSmiGpuBlock,
            AmdSmiEvtNotificationType,
        ):
            setattr(module, value.__name__, value)
        module.AmdSmiEventReader = self._event_reader()  # type: ignore[attr-defined]
        for name in dir(self):
            if name.startswith("amdsmi_"):
                setattr(module, name, getattr(self, name))
        return module

    # ------------------------------------------------------------------ lifecycle

    def amdsmi_init(self, flag: AmdSmiInitFlags = AmdSmiInitFlags.INIT_AMD_GPUS) -> None:
        if not isinstance(flag, AmdSmiInitFlags):
            raise AmdSmiParameterException(flag, AmdSmiInitFlags)
        if self.init_error is not None:
            raise AmdSmiLibraryException(self.init_error)
        self.initialised = True

    def amdsmi_shut_down(self) -> None:
        self.initialised = False

    def amdsmi_get_processor_handles(self) -> list[Handle]:
        self._check("amdsmi_get_processor_handles", None)
        return [Handle(gpu) for gpu in range(self.gpus) if gpu not in self.gone]

    # ------------------------------------------------------------------ identity

    def amdsmi_get_gpu_asic_info(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_asic_info", handle)
        return {
            "market_name": script.market_name,
            "vendor_id": "0x1002",
            "vendor_name": "Advanced Micro Devices Inc. [AMD/ATI]",
            "subvendor_id": "0x1002",
            "device_id": "0x74a1",
            "rev_id": "0x00",
            "asic_serial": f"0x{handle.gpu:016X}",
            "oam_id": handle.gpu,
            "num_compute_units": 304,
            "target_graphics_version": "gfx942",
        }

    def amdsmi_get_gpu_board_info(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_board_info", handle)
        return {
            "model_number": "102-G30211-0C",
            "product_serial": f"PCB0{handle.gpu:04d}",
            "fru_id": "N/A",
            "product_name": script.product_name,
            "manufacturer_name": "AMD",
        }

    def amdsmi_get_gpu_device_uuid(self, handle: Handle) -> str:
        self._gpu("amdsmi_get_gpu_device_uuid", handle)
        return f"{handle.gpu:02x}ff74a1-0000-1000-80c4-a5ce0e1e{handle.gpu:04x}"

    def amdsmi_get_gpu_device_bdf(self, handle: Handle) -> str:
        self._gpu("amdsmi_get_gpu_device_bdf", handle)
        return f"0000:{0x05 + 0x20 * handle.gpu:02x}:00.0"

    def amdsmi_get_gpu_enumeration_info(self, handle: Handle) -> dict[str, Any]:
        self._gpu("amdsmi_get_gpu_enumeration_info", handle)
        return {"drm_render": 128 + handle.gpu, "drm_card": handle.gpu, "hsa_id": handle.gpu, "hip_id": handle.gpu}

    def amdsmi_get_gpu_driver_info(self, handle: Handle) -> dict[str, Any]:
        self._gpu("amdsmi_get_gpu_driver_info", handle)
        return {"driver_name": "amdgpu", "driver_version": "6.10.5", "driver_date": "2015/01/01 00:00"}

    # ------------------------------------------------------------------ readings

    def amdsmi_get_gpu_vram_usage(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_vram_usage", handle)
        return {"vram_total": script.vram_total_mb, "vram_used": script.vram_used_mb}

    def amdsmi_get_gpu_activity(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_activity", handle)
        return {"gfx_activity": script.gfx_activity, "umc_activity": script.umc_activity, "mm_activity": "N/A"}

    def amdsmi_get_temp_metric(
        self, handle: Handle, sensor: AmdSmiTemperatureType, metric: AmdSmiTemperatureMetric
    ) -> int:
        if not isinstance(sensor, AmdSmiTemperatureType):
            raise AmdSmiParameterException(sensor, AmdSmiTemperatureType)
        script = self._gpu("amdsmi_get_temp_metric", handle)
        if sensor is not AmdSmiTemperatureType.HOTSPOT:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)  # MI300X reports no edge sensor
        if metric is AmdSmiTemperatureMetric.CURRENT:
            return script.hotspot_c
        if metric is AmdSmiTemperatureMetric.CRITICAL:
            return script.hotspot_critical_c
        raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)

    def amdsmi_get_power_info(self, handle: Handle, sensor_ind: int = 0) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_power_info", handle)
        return {
            "current_socket_power": script.socket_power_w,
            "average_socket_power": "N/A",
            "gfx_voltage": "N/A",
            "soc_voltage": "N/A",
            "mem_voltage": "N/A",
            "power_limit": script.power_cap_uw // 1_000_000,
        }

    def amdsmi_get_power_cap_info(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_power_cap_info", handle)
        return {
            "power_cap": script.power_cap_uw,
            "default_power_cap": script.power_cap_uw,
            "dpm_cap": 0,
            "min_power_cap": 0,
            "max_power_cap": script.power_cap_uw,
        }

    def amdsmi_get_energy_count(self, handle: Handle) -> dict[str, Any]:
        self._gpu("amdsmi_get_energy_count", handle)
        return {"energy_accumulator": 1_000_000, "counter_resolution": 15.3, "timestamp": 0}

    def amdsmi_get_clock_info(self, handle: Handle, clock_type: AmdSmiClkType) -> dict[str, Any]:
        if not isinstance(clock_type, AmdSmiClkType):
            raise AmdSmiParameterException(clock_type, AmdSmiClkType)
        script = self._gpu("amdsmi_get_clock_info", handle)
        if clock_type is AmdSmiClkType.GFX:
            clk, top = script.gfx_clk_mhz, script.gfx_max_mhz
        elif clock_type is AmdSmiClkType.MEM:
            clk, top = script.mem_clk_mhz, script.mem_clk_mhz
        else:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)
        return {"clk": clk, "min_clk": 500, "max_clk": top, "clk_locked": False, "clk_deep_sleep": False}

    def amdsmi_get_pcie_info(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_pcie_info", handle)
        return {
            "pcie_static": {
                "max_pcie_width": 16,
                "max_pcie_speed": 32_000,
                "pcie_interface_version": 5,
                "slot_type": "OAM",
            },
            "pcie_metric": {
                "pcie_width": script.pcie_width,
                "pcie_speed": script.pcie_speed_mts,
                "pcie_bandwidth": "N/A",
                "pcie_replay_count": 0,
                "pcie_l0_to_recovery_count": 0,
                "pcie_replay_roll_over_count": 0,
                "pcie_nak_sent_count": 0,
                "pcie_nak_received_count": 0,
                "pcie_lc_perf_other_end_recovery_count": 0,
            },
        }

    def amdsmi_get_gpu_total_ecc_count(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_total_ecc_count", handle)
        return {
            "correctable_count": script.correctable,
            "uncorrectable_count": script.uncorrectable,
            "deferred_count": 0,
        }

    def amdsmi_get_gpu_ecc_count(self, handle: Handle, block: AmdSmiGpuBlock) -> dict[str, Any]:
        if not isinstance(block, AmdSmiGpuBlock):
            raise AmdSmiParameterException(block, AmdSmiGpuBlock)
        script = self._gpu("amdsmi_get_gpu_ecc_count", handle)
        if block.name not in script.blocks:
            raise AmdSmiLibraryException(STATUS_NOT_SUPPORTED)
        correctable, uncorrectable = script.blocks[block.name]
        return {"correctable_count": correctable, "uncorrectable_count": uncorrectable, "deferred_count": 0}

    def amdsmi_get_violation_status(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_violation_status", handle)
        flags = ("prochot_thrm", "ppt_pwr", "socket_thrm", "vr_thrm", "hbm_thrm", "gfx_clk_below_host_limit")
        status: dict[str, Any] = {"reference_timestamp": 0, "violation_timestamp": 0}
        for flag in flags:
            active = script.violations.get(f"active_{flag}", False)
            status[f"acc_{flag}"] = 0
            status[f"per_{flag}"] = 100 if active else 0
            status[f"active_{flag}"] = active
        return status

    def amdsmi_get_gpu_xgmi_link_status(self, handle: Handle) -> dict[str, Any]:
        script = self._gpu("amdsmi_get_gpu_xgmi_link_status", handle)
        return {"status": list(script.xgmi), "total_links": len(script.xgmi)}

    def amdsmi_get_gpu_metrics_info(self, handle: Handle) -> dict[str, Any]:
        """A few of the metrics table's fields (the real table has some seventy)."""
        script = self._gpu("amdsmi_get_gpu_metrics_info", handle)
        return {
            "temperature_edge": "N/A",
            "temperature_hotspot": script.hotspot_c,
            "average_gfx_activity": script.gfx_activity,
            "average_umc_activity": script.umc_activity,
            "throttle_status": "N/A",
            "indep_throttle_status": script.throttlers,
            "current_socket_power": script.socket_power_w,
        }

    def amdsmi_get_gpu_bad_page_info(self, handle: Handle) -> list[dict[str, Any]]:
        script = self._gpu("amdsmi_get_gpu_bad_page_info", handle)
        return [
            {"value": i, "page_address": 0x1000 * (i + 1), "page_size": 4096, "status": status}
            for i, status in enumerate(script.bad_pages)
        ]

    def amdsmi_get_gpu_bad_page_threshold(self, handle: Handle) -> int:
        return self._gpu("amdsmi_get_gpu_bad_page_threshold", handle).bad_page_threshold

    def amdsmi_get_gpu_process_list(self, handle: Handle) -> list[dict[str, Any]]:
        self._gpu("amdsmi_get_gpu_process_list", handle)
        return []

    # ------------------------------------------------------------------ events

    def _event_reader(self) -> type:
        fake = self

        class AmdSmiEventReader:
            """Reads the events of every initialised GPU (amdsmi_get_gpu_event_notification is global)."""

            def __init__(self, processor_handle: Handle, event_types: list[AmdSmiEvtNotificationType]) -> None:
                for event_type in event_types:
                    if not isinstance(event_type, AmdSmiEvtNotificationType):
                        raise AmdSmiParameterException(event_type, AmdSmiEvtNotificationType)
                fake._gpu("amdsmi_init_gpu_event_notification", processor_handle)
                self.processor_handle = processor_handle
                self.mask = sum(1 << (int(t) - 1) for t in event_types if t is not AmdSmiEvtNotificationType.NONE)

            def read(self, timestamp: int, num_elem: int = 10) -> list[dict[str, Any]]:
                if not fake.events:
                    raise fake.no_event() if fake.no_event else AmdSmiLibraryException(STATUS_NO_DATA)
                taken, fake.events = fake.events[:num_elem], fake.events[num_elem:]
                return [
                    {"processor_handle": Handle(gpu), "event": name, "message": message}
                    for gpu, name, message in taken
                    if self.mask & (1 << (int(AmdSmiEvtNotificationType[name]) - 1))
                ]

            def stop(self) -> None:
                return None

        return AmdSmiEventReader

    # ------------------------------------------------------------------ errors

    def _check(self, function: str, gpu: int | None) -> None:
        if not self.initialised:
            raise AmdSmiLibraryException(STATUS_NOT_INIT)
        for key in ((function, gpu), (function, None)):
            if key in self.errors:
                raise AmdSmiLibraryException(self.errors[key])

    def _gpu(self, function: str, handle: Handle) -> GpuScript:
        if not isinstance(handle, Handle):
            raise AmdSmiParameterException(handle, Handle)
        self._check(function, handle.gpu)
        if handle.gpu in self.gone:
            raise AmdSmiLibraryException(STATUS_NOT_FOUND)
        return self.scripts[handle.gpu]
