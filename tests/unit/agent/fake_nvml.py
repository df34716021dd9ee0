"""A stand-in for the `pynvml` module: two H100s (one optionally in MIG mode), scriptable errors.

It raises the real `pynvml.NVMLError` subclasses, so the backend's error handling is exercised
exactly as against a driver. Handles are plain values: ints for GPUs, tuples for MIG devices.

NVLink calls answer as the driver does: NVML_ERROR_NOT_SUPPORTED on a GPU without NVLink
(`nvlinks=0`, a PCIe card) and NVML_ERROR_INVALID_ARGUMENT for a link number past the GPU's last
link. The fabric info fills pynvml's own `c_nvmlGpuFabricInfoV_t` structure through the pointer
the caller passes, as NVML does: pynvml's wrapper hands its argument to the C function untouched, so
a structure passed by value (not `ctypes.byref`) crashes the real driver, and fails here.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import pynvml


@dataclass
class FakeNvml:
    gpus: int = 2
    mig_gpu: int | None = None
    init_error: int | type[pynvml.NVMLError] | None = None
    """Raised by nvmlInit: an NVML error code, or one of pynvml's error classes."""
    errors: dict[tuple[str, Any], int] = field(default_factory=dict)
    """(function name, handle) → NVML error code raised by that call (handle None: any handle)."""
    events: list[tuple[int, int]] = field(default_factory=list)
    """(gpu index, xid) waiting in the event set."""
    processes: dict[int, int] = field(default_factory=dict)
    calls: int = 0
    nvlinks: int = 18
    """NVLinks per GPU; 0: a PCIe card (NOT_SUPPORTED)."""
    nvlink_down: set[tuple[int, int]] = field(default_factory=set)
    """(gpu, link) pairs that are inactive."""
    nvlink_errors: dict[tuple[int, int, int], int] = field(default_factory=dict)
    """(gpu, link, NVML_NVLINK_ERROR_DL_*) → count."""
    fabric_state: int = pynvml.NVML_GPU_FABRIC_STATE_COMPLETED
    fabric_status: int = pynvml.NVML_SUCCESS
    fabric_health_mask: int = pynvml.NVML_GPU_FABRIC_HEALTH_MASK_DEGRADED_BW_FALSE
    performance_state: int = 0
    recovery_action: int | None = pynvml.NVML_GPU_RECOVERY_ACTION_NONE
    """The field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION; None: the field answers NOT_SUPPORTED."""

    NVMLError = pynvml.NVMLError
    c_nvmlGpuFabricInfoV_t = pynvml.c_nvmlGpuFabricInfoV_t
    c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t

    def __getattr__(self, name: str) -> Any:
        if name.startswith(("NVML_", "nvmlEventType", "nvmlClocks")):
            return getattr(pynvml, name)
        raise AttributeError(name)

    def _check(self, name: str, handle: Any = None) -> None:
        self.calls += 1
        code = self.errors.get((name, handle), self.errors.get((name, None)))
        if code is not None:
            raise pynvml.NVMLError(code)

    # lifecycle
    def nvmlInit(self) -> None:
        if isinstance(self.init_error, int):
            raise pynvml.NVMLError(self.init_error)
        if self.init_error is not None:
            raise self.init_error()

    def nvmlShutdown(self) -> None:
        return None

    def nvmlSystemGetDriverVersion(self) -> str:
        return "580.65.06"

    def nvmlSystemGetCudaDriverVersion_v2(self) -> int:
        self._check("nvmlSystemGetCudaDriverVersion_v2")
        return 13000

    # inventory
    def nvmlDeviceGetCount(self) -> int:
        self._check("nvmlDeviceGetCount")
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, index: int) -> int:
        self._check("nvmlDeviceGetHandleByIndex", index)
        return index

    def nvmlDeviceGetIndex(self, handle: int) -> int:
        return handle

    def nvmlDeviceGetName(self, handle: Any) -> str:
        self._check("nvmlDeviceGetName", handle)
        if isinstance(handle, tuple):
            return "NVIDIA H100 80GB HBM3 MIG 3g.40gb"
        return "NVIDIA H100 80GB HBM3"

    def nvmlDeviceGetUUID(self, handle: Any) -> str:
        self._check("nvmlDeviceGetUUID", handle)
        if isinstance(handle, tuple):
            return f"MIG-0000000{handle[1]}-0000-0000-0000-00000000000{handle[2]}"
        return f"GPU-0000000{handle}-1111-2222-3333-444444444444"

    def nvmlDeviceGetPciInfo(self, handle: int) -> Any:
        self._check("nvmlDeviceGetPciInfo", handle)
        return SimpleNamespace(busId=f"00000000:{0x18 + handle:02X}:00.0".encode())

    def nvmlDeviceGetMemoryInfo(self, handle: Any) -> Any:
        self._check("nvmlDeviceGetMemoryInfo", handle)
        if isinstance(handle, tuple):
            return SimpleNamespace(total=40 * 2**30, used=2**20, free=40 * 2**30 - 2**20)
        return SimpleNamespace(total=81559 * 2**20, used=530 * 2**20, free=81029 * 2**20)

    def nvmlDeviceGetCudaComputeCapability(self, handle: int) -> tuple[int, int]:
        return (9, 0)

    def nvmlDeviceGetSerial(self, handle: int) -> str:
        self._check("nvmlDeviceGetSerial", handle)
        return f"165000000000{handle}"

    def nvmlDeviceGetMigMode(self, handle: int) -> list[int]:
        self._check("nvmlDeviceGetMigMode", handle)
        return [1, 1] if handle == self.mig_gpu else [0, 0]

    def nvmlDeviceGetMaxMigDeviceCount(self, handle: int) -> int:
        return 7

    def nvmlDeviceGetMigDeviceHandleByIndex(self, handle: int, slot: int) -> tuple[str, int, int]:
        if slot >= 2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_FOUND)
        return ("mig", handle, slot)

    def nvmlDeviceGetGpuInstanceId(self, handle: tuple[str, int, int]) -> int:
        return 1 + handle[2]

    def nvmlDeviceGetComputeInstanceId(self, handle: tuple[str, int, int]) -> int:
        return 0

    # telemetry
    def nvmlDeviceGetUtilizationRates(self, handle: int) -> Any:
        self._check("nvmlDeviceGetUtilizationRates", handle)
        return SimpleNamespace(gpu=37, memory=12)

    def nvmlDeviceGetTemperature(self, handle: int, sensor: int) -> int:
        self._check("nvmlDeviceGetTemperature", handle)
        return 41 + handle

    def nvmlDeviceGetTemperatureThreshold(self, handle: int, threshold: int) -> int:
        self._check("nvmlDeviceGetTemperatureThreshold", handle)
        assert threshold == pynvml.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN
        return 87

    def nvmlDeviceGetPowerUsage(self, handle: int) -> int:
        self._check("nvmlDeviceGetPowerUsage", handle)
        return 123_456

    def nvmlDeviceGetEnforcedPowerLimit(self, handle: int) -> int:
        return 700_000

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: int) -> int:
        return 5_000_000

    def nvmlDeviceGetClockInfo(self, handle: int, clock: int) -> int:
        self._check("nvmlDeviceGetClockInfo", handle)
        return 1755 if clock == pynvml.NVML_CLOCK_SM else 2619

    def nvmlDeviceGetMaxClockInfo(self, handle: int, clock: int) -> int:
        return 1980

    def nvmlDeviceGetCurrentClocksEventReasons(self, handle: int) -> int:
        self._check("nvmlDeviceGetCurrentClocksEventReasons", handle)
        return int(pynvml.nvmlClocksEventReasonSwPowerCap | pynvml.nvmlClocksEventReasonHwThermalSlowdown)

    def nvmlDeviceGetEccMode(self, handle: int) -> list[int]:
        self._check("nvmlDeviceGetEccMode", handle)
        return [1, 1]

    def nvmlDeviceGetTotalEccErrors(self, handle: int, error_type: int, counter: int) -> int:
        self._check("nvmlDeviceGetTotalEccErrors", handle)
        table = {(0, 0): 3, (1, 0): 0, (0, 1): 10, (1, 1): 1}
        return table[(error_type, counter)]

    def nvmlDeviceGetRetiredPages(self, handle: int, cause: int) -> list[int]:
        self._check("nvmlDeviceGetRetiredPages", handle)
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)  # Hopper: row remapping instead

    def nvmlDeviceGetRetiredPagesPendingStatus(self, handle: int) -> int:
        raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)

    def nvmlDeviceGetRemappedRows(self, handle: int) -> tuple[int, int, int, int]:
        self._check("nvmlDeviceGetRemappedRows", handle)
        return (2, 0, 0, 0)

    def nvmlDeviceGetCurrPcieLinkGeneration(self, handle: int) -> int:
        return 5

    def nvmlDeviceGetCurrPcieLinkWidth(self, handle: int) -> int:
        return 16

    def nvmlDeviceGetMaxPcieLinkGeneration(self, handle: int) -> int:
        return 5

    def nvmlDeviceGetMaxPcieLinkWidth(self, handle: int) -> int:
        return 16

    def nvmlDeviceGetComputeRunningProcesses(self, handle: int) -> list[Any]:
        self._check("nvmlDeviceGetComputeRunningProcesses", handle)
        return [SimpleNamespace(pid=1000 + i, usedGpuMemory=2**30) for i in range(self.processes.get(handle, 0))]

    def nvmlDeviceGetPerformanceState(self, handle: int) -> int:
        self._check("nvmlDeviceGetPerformanceState", handle)
        return self.performance_state

    def nvmlDeviceGetFieldValues(self, handle: int, field_ids: list[int]) -> Any:
        """pynvml's own structures: each field carries its own return code, as in NVML."""
        self._check("nvmlDeviceGetFieldValues", handle)
        values = (pynvml.c_nvmlFieldValue_t * len(field_ids))()
        for value, field_id in zip(values, field_ids, strict=True):
            value.fieldId = field_id
            if field_id != pynvml.NVML_FI_DEV_GET_GPU_RECOVERY_ACTION or self.recovery_action is None:
                value.nvmlReturn = pynvml.NVML_ERROR_NOT_SUPPORTED
                continue
            value.nvmlReturn = pynvml.NVML_SUCCESS
            value.value.uiVal = self.recovery_action
        return values

    # NVLink and fabric
    def nvmlDeviceGetNvLinkState(self, handle: int, link: int) -> int:
        self._check("nvmlDeviceGetNvLinkState", handle)
        if not self.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < self.nvlinks:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_INVALID_ARGUMENT)
        return int((handle, link) not in self.nvlink_down)

    def nvmlDeviceGetNvLinkErrorCounter(self, handle: int, link: int, counter: int) -> int:
        self._check("nvmlDeviceGetNvLinkErrorCounter", handle)
        return self.nvlink_errors.get((handle, link, counter), 0)

    def nvmlDeviceGetGpuFabricInfoV(self, handle: int, pointer: Any) -> int:
        self._check("nvmlDeviceGetGpuFabricInfoV", handle)
        info = _pointee(pointer, pynvml.c_nvmlGpuFabricInfoV_t)
        if info.version != pynvml.nvmlGpuFabricInfo_v2:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_ARGUMENT_VERSION_MISMATCH)
        info.state = self.fabric_state
        info.status = self.fabric_status
        info.healthMask = self.fabric_health_mask << pynvml.NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW
        return int(pynvml.NVML_SUCCESS)

    # events
    def nvmlEventSetCreate(self) -> str:
        return "event-set"

    def nvmlDeviceRegisterEvents(self, handle: int, mask: int, event_set: str) -> None:
        assert mask == pynvml.nvmlEventTypeXidCriticalError

    def nvmlEventSetWait_v2(self, event_set: str, timeout_ms: int) -> Any:
        assert timeout_ms == 0
        if not self.events:
            raise pynvml.NVMLError(pynvml.NVML_ERROR_TIMEOUT)
        gpu, xid = self.events.pop(0)
        return SimpleNamespace(
            device=gpu,
            eventType=pynvml.nvmlEventTypeXidCriticalError,
            eventData=xid,
            gpuInstanceId=0xFFFFFFFF,
            computeInstanceId=0xFFFFFFFF,
        )

    def nvmlEventSetFree(self, event_set: str) -> None:
        return None


def _pointee(pointer: Any, struct: type[ctypes.Structure]) -> Any:
    """The structure behind `ctypes.byref(info)`; anything else is what crashes the real NVML."""
    info = getattr(pointer, "_obj", None)
    if type(pointer).__name__ != "CArgObject" or not isinstance(info, struct):
        raise TypeError(
            f"NVML writes the answer through a pointer: pass ctypes.byref({struct.__name__}()), not {pointer!r}"
            " (pynvml hands the argument to the C function as it is; the driver would crash)"
        )
    return info
