"""What the nvml backend reads from one GPU: its identity and MIG devices (`describe`) and its
readings at one moment (`read`), its NVLinks and NVSwitch fabric registration included. Every
call goes through `NvmlCalls`, so an unsupported reading is None and a lost GPU raises
`GpuLostError`.

NVLinks are probed from link 0 up to NVML_NVLINK_MAX_LINKS: `nvmlDeviceGetNvLinkState` answers
NVML_ERROR_INVALID_ARGUMENT past the GPU's last link and NVML_ERROR_NOT_SUPPORTED on GPUs without
NVLink (PCIe cards such as L4 and T4), so neither is a link. Each link's data-link error counters
come from `nvmlDeviceGetNvLinkErrorCounter` (NVML_NVLINK_ERROR_DL_REPLAY, _RECOVERY, _CRC_FLIT,
_CRC_DATA); a counter NVML does not give (NVLink 5 moved them to field values) is absent. The
fabric registration comes from `nvmlDeviceGetGpuFabricInfoV` (v2: with the health mask), else
`nvmlDeviceGetGpuFabricInfo`; both are Hopper and later, NOT_SUPPORTED before. pynvml's wrappers of
the two hand their second argument to the C function as it is (nvidia-ml-py's pynvml.py declares no
argtypes), so it must be a pointer, `ctypes.byref(info)`: a structure passed itself is copied onto
the stack and NVML writes through whatever lies there (a segfault, seen on an H200, driver 580.159). The driver's
recovery action for the GPU is the field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION, whose own return
code says whether this driver and GPU report it.
"""

from __future__ import annotations

import ctypes
import re
from typing import Any

from accelpool_agent.backends import detect_model
from accelpool_agent.backends.nvml_calls import BEYOND, NvmlCalls
from accelpool_agent.model import (
    FABRIC_STATES,
    NVLINK_COUNTERS,
    THROTTLE_REASONS,
    DeviceInfo,
    EccCounts,
    FabricInfo,
    MigDevice,
    NvLink,
    PcieLink,
    RetiredPages,
    RowRemap,
    Telemetry,
)

_MIG_PROFILE = re.compile(r"MIG\s+(\S+)\s*$")


def describe(calls: NvmlCalls, index: int, handle: Any) -> DeviceInfo:
    name = text(calls.get("nvmlDeviceGetName", handle)) or "NVIDIA GPU"
    pci = calls.get("nvmlDeviceGetPciInfo", handle)
    memory = calls.get("nvmlDeviceGetMemoryInfo", handle)
    capability = calls.get("nvmlDeviceGetCudaComputeCapability", handle)
    mig_mode = calls.get("nvmlDeviceGetMigMode", handle)
    mig_enabled = bool(mig_mode and int(mig_mode[0]) == 1)
    accelerator = detect_model(name)
    return DeviceInfo(
        index=index,
        uuid=text(calls.get("nvmlDeviceGetUUID", handle)) or f"GPU-unknown-{index}",
        name=name,
        pci_bus_id=text(getattr(pci, "busId", None)) or "",
        memory_total_bytes=int(memory.total) if memory is not None else None,
        model=accelerator.name if accelerator else None,
        compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
        serial=text(calls.get("nvmlDeviceGetSerial", handle)),
        mig_enabled=mig_enabled,
        mig_devices=mig_devices(calls, handle) if mig_enabled else (),
    )


def mig_devices(calls: NvmlCalls, handle: Any) -> tuple[MigDevice, ...]:
    found: list[MigDevice] = []
    for slot in range(calls.get("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        mig = calls.get("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
        if mig is None:
            continue
        name = text(calls.get("nvmlDeviceGetName", mig)) or ""
        match = _MIG_PROFILE.search(name)
        memory = calls.get("nvmlDeviceGetMemoryInfo", mig)
        found.append(
            MigDevice(
                index=slot,
                uuid=text(calls.get("nvmlDeviceGetUUID", mig)) or f"MIG-unknown-{slot}",
                profile=match.group(1) if match else None,
                memory_total_bytes=int(memory.total) if memory is not None else None,
                gpu_instance_id=calls.get("nvmlDeviceGetGpuInstanceId", mig),
                compute_instance_id=calls.get("nvmlDeviceGetComputeInstanceId", mig),
            )
        )
    return tuple(found)


def read(calls: NvmlCalls, index: int, handle: Any) -> Telemetry:
    get = calls.get
    memory = get("nvmlDeviceGetMemoryInfo", handle)
    utilization = get("nvmlDeviceGetUtilizationRates", handle)
    power = get("nvmlDeviceGetPowerUsage", handle)
    limit = get("nvmlDeviceGetEnforcedPowerLimit", handle)
    energy = get("nvmlDeviceGetTotalEnergyConsumption", handle)
    sm_clock = get("nvmlDeviceGetClockInfo", handle, calls.const("NVML_CLOCK_SM", 1))
    sm_max = get("nvmlDeviceGetMaxClockInfo", handle, calls.const("NVML_CLOCK_SM", 1))
    mem_clock = get("nvmlDeviceGetClockInfo", handle, calls.const("NVML_CLOCK_MEM", 2))
    reasons = get("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:
        reasons = get("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    processes = get("nvmlDeviceGetComputeRunningProcesses", handle)
    return Telemetry(
        index=index,
        utilization_ratio=utilization.gpu / 100.0 if utilization is not None else None,
        memory_utilization_ratio=utilization.memory / 100.0 if utilization is not None else None,
        memory_used_bytes=int(memory.used) if memory is not None else None,
        memory_total_bytes=int(memory.total) if memory is not None else None,
        temperature_celsius=_float(get("nvmlDeviceGetTemperature", handle, calls.const("NVML_TEMPERATURE_GPU", 0))),
        slowdown_temperature_celsius=_float(
            get(
                "nvmlDeviceGetTemperatureThreshold",
                handle,
                calls.const("NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
            )
        ),
        power_watts=power / 1000.0 if power is not None else None,
        power_limit_watts=limit / 1000.0 if limit is not None else None,
        energy_joules=energy / 1000.0 if energy is not None else None,
        sm_clock_hertz=sm_clock * 1e6 if sm_clock is not None else None,
        sm_clock_max_hertz=sm_max * 1e6 if sm_max is not None else None,
        memory_clock_hertz=mem_clock * 1e6 if mem_clock is not None else None,
        throttle_reasons=_throttle_reasons(int(reasons)) if reasons is not None else None,
        ecc=_ecc(calls, handle),
        retired_pages=_retired_pages(calls, handle),
        row_remap=_row_remap(calls, handle),
        pcie=PcieLink(
            generation=get("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            width=get("nvmlDeviceGetCurrPcieLinkWidth", handle),
            max_generation=get("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            max_width=get("nvmlDeviceGetMaxPcieLinkWidth", handle),
        ),
        compute_processes=len(processes) if processes is not None else None,
        performance_state=_performance_state(calls, handle),
        nvlinks=nvlinks(calls, handle),
        fabric=fabric(calls, handle),
        recovery_action=recovery_action(calls, handle),
    )


def recovery_action(calls: NvmlCalls, handle: Any) -> int | None:
    """The driver's recovery action (field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION); None where the driver or
    GPU does not report it (the field's own return code is not NVML_SUCCESS)."""
    field = calls.const("NVML_FI_DEV_GET_GPU_RECOVERY_ACTION", 230)
    values = calls.get("nvmlDeviceGetFieldValues", handle, [field])
    if not values or int(values[0].nvmlReturn) != 0:
        return None
    return int(values[0].value.uiVal)


_NVLINK_ERROR_CONSTANTS = {
    "replay": ("NVML_NVLINK_ERROR_DL_REPLAY", 0),
    "recovery": ("NVML_NVLINK_ERROR_DL_RECOVERY", 1),
    "crc_flit": ("NVML_NVLINK_ERROR_DL_CRC_FLIT", 2),
    "crc_data": ("NVML_NVLINK_ERROR_DL_CRC_DATA", 3),
}
_PSTATE_UNKNOWN = 32
_DEGRADED_BW_TRUE = 1


def nvlinks(calls: NvmlCalls, handle: Any) -> tuple[NvLink, ...] | None:
    """The GPU's NVLinks, or None when it has none (or NVML reports none)."""
    counters = {name: calls.const(*_NVLINK_ERROR_CONSTANTS[name]) for name in NVLINK_COUNTERS}
    found: list[NvLink] = []
    for link in range(calls.const("NVML_NVLINK_MAX_LINKS", 18)):
        state = calls.get("nvmlDeviceGetNvLinkState", handle, link, no_data=BEYOND)
        if state is None:
            break  # past the last link (INVALID_ARGUMENT), or no NVLink at all (NOT_SUPPORTED)
        errors = {
            name: int(value)
            for name, counter in counters.items()
            if (value := calls.get("nvmlDeviceGetNvLinkErrorCounter", handle, link, counter)) is not None
        }
        found.append(NvLink(link=link, active=int(state) == 1, errors=errors))
    return tuple(found) or None


def fabric(calls: NvmlCalls, handle: Any) -> FabricInfo | None:
    """The GPU's NVSwitch fabric registration, or None when NVML does not report one."""
    for function, struct in (
        ("nvmlDeviceGetGpuFabricInfoV", "c_nvmlGpuFabricInfoV_t"),
        ("nvmlDeviceGetGpuFabricInfo", "c_nvmlGpuFabricInfo_t"),
    ):
        make = getattr(calls.nvml, struct, None)
        if make is None or getattr(calls.nvml, function, None) is None:
            continue
        info = make()
        if calls.get(function, handle, ctypes.byref(info)) is None:
            return None  # NOT_SUPPORTED: no fabric (or before Hopper)
        state = int(info.state)
        mask = getattr(info, "healthMask", None)
        degraded = None
        if mask is not None:
            shift = calls.const("NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_DEGRADED_BW", 0)
            width = calls.const("NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_DEGRADED_BW", 0x3)
            bits = (int(mask) >> shift) & width
            degraded = None if bits == 0 else bits == _DEGRADED_BW_TRUE
        return FabricInfo(
            state=FABRIC_STATES[state] if 0 <= state < len(FABRIC_STATES) else "not_supported",
            status=int(info.status),
            degraded_bandwidth=degraded,
        )
    return None


def _performance_state(calls: NvmlCalls, handle: Any) -> int | None:
    value = calls.get("nvmlDeviceGetPerformanceState", handle)
    if value is None:
        value = calls.get("nvmlDeviceGetPowerState", handle)  # the older name of the same call
    return None if value is None or int(value) >= _PSTATE_UNKNOWN else int(value)


def _ecc(calls: NvmlCalls, handle: Any) -> EccCounts | None:
    mode = calls.get("nvmlDeviceGetEccMode", handle)
    if not mode or int(mode[0]) != 1:
        return None  # ECC off or not supported: no counters to read
    corrected = calls.const("NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    uncorrected = calls.const("NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = calls.const("NVML_VOLATILE_ECC", 0)
    aggregate = calls.const("NVML_AGGREGATE_ECC", 1)

    def count(kind: int, counter: int) -> int | None:
        value = calls.get("nvmlDeviceGetTotalEccErrors", handle, kind, counter)
        return int(value) if value is not None else None

    return EccCounts(
        volatile_single=count(corrected, volatile),
        volatile_double=count(uncorrected, volatile),
        aggregate_single=count(corrected, aggregate),
        aggregate_double=count(uncorrected, aggregate),
    )


def _retired_pages(calls: NvmlCalls, handle: Any) -> RetiredPages | None:
    single = calls.get(
        "nvmlDeviceGetRetiredPages",
        handle,
        calls.const("NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
    )
    double = calls.get(
        "nvmlDeviceGetRetiredPages", handle, calls.const("NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
    )
    pending = calls.get("nvmlDeviceGetRetiredPagesPendingStatus", handle)
    if single is None and double is None and pending is None:
        return None
    return RetiredPages(
        single_bit=len(single) if single is not None else None,
        double_bit=len(double) if double is not None else None,
        pending=bool(pending) if pending is not None else None,
    )


def _row_remap(calls: NvmlCalls, handle: Any) -> RowRemap | None:
    rows = calls.get("nvmlDeviceGetRemappedRows", handle)
    if rows is None:
        return None
    correctable, uncorrectable, pending, failure = rows
    return RowRemap(
        correctable=int(correctable),
        uncorrectable=int(uncorrectable),
        pending=bool(pending),
        failure=bool(failure),
    )


def lost_device(index: int, why: str) -> DeviceInfo:
    return DeviceInfo(
        index=index, uuid=f"GPU-lost-{index}", name=f"lost GPU ({why})", pci_bus_id="", memory_total_bytes=None
    )


def text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace").rstrip("\x00")
    return str(value)


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None


def _throttle_reasons(mask: int) -> frozenset[str]:
    return frozenset(name for bit, name in enumerate(THROTTLE_REASONS) if mask & (1 << bit))
