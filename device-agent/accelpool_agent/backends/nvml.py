"""The NVML backend: inventory, telemetry and XID events of NVIDIA GPUs through nvidia-ml-py.

Every NVML call is guarded. NVML_ERROR_NOT_SUPPORTED (and a function missing from an older
driver) means "no data" and yields None, never an error. NVML_ERROR_GPU_IS_LOST marks that GPU
lost for this reading. A dead NVML (library missing, driver not loaded, init failing, or
NVML_ERROR_UNINITIALIZED mid-run) is survived: `error` says why, telemetry is empty, and
initialisation is retried every `retry_seconds`. Other errors count into `call_errors` and
read as no data.

XID errors arrive through an NVML event set registered for `nvmlEventTypeXidCriticalError`
on every GPU and drained without blocking. Compute checks run in CuPy children pinned to the
GPU (or its first MIG device) by UUID. The `nvml` module is injectable so tests can drive
this code without a GPU.
"""

from __future__ import annotations

import importlib
import logging
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from accelpool_agent.backends import detect_model
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import (
    THROTTLE_REASONS,
    DeviceInfo,
    EccCounts,
    MigDevice,
    PcieLink,
    RetiredPages,
    RowRemap,
    Telemetry,
    XidEvent,
)

log = logging.getLogger(__name__)

# NVML constants (nvml.h); read from the module when present, these are the documented values.
_NOT_SUPPORTED = 3
_NOT_FOUND = 6
_DRIVER_NOT_LOADED = 9
_TIMEOUT = 10
_LIBRARY_NOT_FOUND = 12
_FUNCTION_NOT_FOUND = 13
_GPU_IS_LOST = 15
_UNINITIALIZED = 1
_LIB_RM_VERSION_MISMATCH = 18
_XID_CRITICAL_ERROR_EVENT = 0x8
_NO_DATA = {_NOT_SUPPORTED, _FUNCTION_NOT_FOUND, _NOT_FOUND}
_DEAD = {_UNINITIALIZED, _DRIVER_NOT_LOADED, _LIBRARY_NOT_FOUND, _LIB_RM_VERSION_MISMATCH}
_MIG_PROFILE = re.compile(r"MIG\s+(\S+)\s*$")


class GpuLostError(Exception):
    """NVML_ERROR_GPU_IS_LOST from a device call."""


class NvmlDeadError(Exception):
    """NVML itself stopped working (uninitialised, driver unloaded)."""


class NvmlBackend:
    name = "nvml"

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        compute_engine: str | None = "cuda",
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._module = nvml
        self._nvml: Any = None
        self.compute_engine = compute_engine
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._error: str | None = "NVML not initialised"
        self._opened_at: float | None = None
        self._handles: list[Any] = []
        self._devices: list[DeviceInfo] = []
        self._event_set: Any = None
        self.call_errors: Counter[str] = Counter()
        self.driver_version: str | None = None

    @property
    def error(self) -> str | None:
        return self._error

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        self._opened_at = self._clock()
        try:
            self._nvml = self._module if self._module is not None else importlib.import_module("pynvml")
            self._nvml.nvmlInit()
        except Exception as error:
            self._error = f"NVML initialisation failed: {error}"
            self._handles, self._devices = [], []
            log.warning("%s", self._error)
            return
        self._error = None
        try:
            self.driver_version = self._get("nvmlSystemGetDriverVersion")
            self._scan()
            self._register_events()
        except (NvmlDeadError, GpuLostError) as error:
            self._fail(str(error))

    def close(self) -> None:
        if self._nvml is None or self._error is not None:
            return
        if self._event_set is not None:
            self._get("nvmlEventSetFree", self._event_set)
            self._event_set = None
        try:
            self._nvml.nvmlShutdown()
        except Exception as error:
            log.debug("nvmlShutdown: %s", error)

    def _fail(self, why: str) -> None:
        self._error = why
        self._handles, self._devices, self._event_set = [], [], None
        log.warning("NVML stopped working: %s", why)

    def _ensure_open(self) -> bool:
        if self._error is None:
            return True
        if self._opened_at is None or self._clock() - self._opened_at >= self._retry_seconds:
            self.open()
        return self._error is None

    # ------------------------------------------------------------------ guarded calls

    def _code(self, error: Exception) -> int | None:
        value = getattr(error, "value", None)
        return value if isinstance(value, int) else None

    def _get(self, function: str, *args: Any) -> Any:
        """Call an NVML function: None for "no data", GpuLostError / NvmlDeadError for the serious cases."""
        fn = getattr(self._nvml, function, None)
        if fn is None:
            return None
        try:
            return fn(*args)
        except self._nvml.NVMLError as error:
            code = self._code(error)
            if code in _NO_DATA:
                return None
            if code == _GPU_IS_LOST:
                raise GpuLostError(f"{function}: {error}") from error
            if code in _DEAD:
                raise NvmlDeadError(f"{function}: {error}") from error
            self.call_errors[function] += 1
            log.debug("%s failed: %s", function, error)
            return None

    # ------------------------------------------------------------------ inventory

    def _scan(self) -> None:
        count = self._get("nvmlDeviceGetCount") or 0
        previous = {device.index: device for device in self._devices}
        handles: list[Any] = []
        devices: list[DeviceInfo] = []
        for index in range(count):
            try:
                handle = self._get("nvmlDeviceGetHandleByIndex", index)
                device = self._describe(index, handle) if handle is not None else None
            except GpuLostError as error:
                handle, device = None, previous.get(index) or _lost_device(index, str(error))
            if device is None:
                continue
            handles.append(handle)
            devices.append(device)
        self._handles, self._devices = handles, devices

    def _describe(self, index: int, handle: Any) -> DeviceInfo:
        name = _text(self._get("nvmlDeviceGetName", handle)) or "NVIDIA GPU"
        pci = self._get("nvmlDeviceGetPciInfo", handle)
        memory = self._get("nvmlDeviceGetMemoryInfo", handle)
        capability = self._get("nvmlDeviceGetCudaComputeCapability", handle)
        mig_mode = self._get("nvmlDeviceGetMigMode", handle)
        mig_enabled = bool(mig_mode and int(mig_mode[0]) == 1)
        accelerator = detect_model(name)
        return DeviceInfo(
            index=index,
            uuid=_text(self._get("nvmlDeviceGetUUID", handle)) or f"GPU-unknown-{index}",
            name=name,
            pci_bus_id=_text(getattr(pci, "busId", None)) or "",
            memory_total_bytes=int(memory.total) if memory is not None else None,
            model=accelerator.name if accelerator else None,
            compute_capability=f"{capability[0]}.{capability[1]}" if capability else None,
            serial=_text(self._get("nvmlDeviceGetSerial", handle)),
            mig_enabled=mig_enabled,
            mig_devices=self._mig_devices(handle) if mig_enabled else (),
        )

    def _mig_devices(self, handle: Any) -> tuple[MigDevice, ...]:
        found: list[MigDevice] = []
        for slot in range(self._get("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
            mig = self._get("nvmlDeviceGetMigDeviceHandleByIndex", handle, slot)
            if mig is None:
                continue
            name = _text(self._get("nvmlDeviceGetName", mig)) or ""
            match = _MIG_PROFILE.search(name)
            memory = self._get("nvmlDeviceGetMemoryInfo", mig)
            found.append(
                MigDevice(
                    index=slot,
                    uuid=_text(self._get("nvmlDeviceGetUUID", mig)) or f"MIG-unknown-{slot}",
                    profile=match.group(1) if match else None,
                    memory_total_bytes=int(memory.total) if memory is not None else None,
                    gpu_instance_id=self._get("nvmlDeviceGetGpuInstanceId", mig),
                    compute_instance_id=self._get("nvmlDeviceGetComputeInstanceId", mig),
                )
            )
        return tuple(found)

    def inventory(self) -> list[DeviceInfo]:
        if not self._ensure_open():
            return []
        try:
            self._scan()
        except NvmlDeadError as error:
            self._fail(str(error))
        return list(self._devices)

    # ------------------------------------------------------------------ telemetry

    def telemetry(self) -> list[Telemetry]:
        if not self._ensure_open():
            return []
        readings = []
        try:
            for device, handle in zip(self._devices, self._handles, strict=True):
                index = device.index
                if handle is None:
                    readings.append(Telemetry(index=index, lost=True, error="GPU is lost (no NVML handle)"))
                    continue
                try:
                    readings.append(self._read(index, handle))
                except GpuLostError as error:
                    readings.append(Telemetry(index=index, lost=True, error=str(error)))
        except NvmlDeadError as error:
            self._fail(str(error))
            return []
        return readings

    def _read(self, index: int, handle: Any) -> Telemetry:
        nvml, get = self._nvml, self._get
        memory = get("nvmlDeviceGetMemoryInfo", handle)
        utilization = get("nvmlDeviceGetUtilizationRates", handle)
        power = get("nvmlDeviceGetPowerUsage", handle)
        limit = get("nvmlDeviceGetEnforcedPowerLimit", handle)
        energy = get("nvmlDeviceGetTotalEnergyConsumption", handle)
        sm_clock = get("nvmlDeviceGetClockInfo", handle, _const(nvml, "NVML_CLOCK_SM", 1))
        sm_max = get("nvmlDeviceGetMaxClockInfo", handle, _const(nvml, "NVML_CLOCK_SM", 1))
        mem_clock = get("nvmlDeviceGetClockInfo", handle, _const(nvml, "NVML_CLOCK_MEM", 2))
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
            temperature_celsius=_float(
                get("nvmlDeviceGetTemperature", handle, _const(nvml, "NVML_TEMPERATURE_GPU", 0))
            ),
            slowdown_temperature_celsius=_float(
                get(
                    "nvmlDeviceGetTemperatureThreshold",
                    handle,
                    _const(nvml, "NVML_TEMPERATURE_THRESHOLD_SLOWDOWN", 1),
                )
            ),
            power_watts=power / 1000.0 if power is not None else None,
            power_limit_watts=limit / 1000.0 if limit is not None else None,
            energy_joules=energy / 1000.0 if energy is not None else None,
            sm_clock_hertz=sm_clock * 1e6 if sm_clock is not None else None,
            sm_clock_max_hertz=sm_max * 1e6 if sm_max is not None else None,
            memory_clock_hertz=mem_clock * 1e6 if mem_clock is not None else None,
            throttle_reasons=_throttle_reasons(int(reasons)) if reasons is not None else None,
            ecc=self._ecc(handle),
            retired_pages=self._retired_pages(handle),
            row_remap=self._row_remap(handle),
            pcie=PcieLink(
                generation=get("nvmlDeviceGetCurrPcieLinkGeneration", handle),
                width=get("nvmlDeviceGetCurrPcieLinkWidth", handle),
                max_generation=get("nvmlDeviceGetMaxPcieLinkGeneration", handle),
                max_width=get("nvmlDeviceGetMaxPcieLinkWidth", handle),
            ),
            compute_processes=len(processes) if processes is not None else None,
        )

    def _ecc(self, handle: Any) -> EccCounts | None:
        mode = self._get("nvmlDeviceGetEccMode", handle)
        if not mode or int(mode[0]) != 1:
            return None  # ECC off or not supported: no counters to read
        nvml = self._nvml
        corrected = _const(nvml, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
        uncorrected = _const(nvml, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
        volatile = _const(nvml, "NVML_VOLATILE_ECC", 0)
        aggregate = _const(nvml, "NVML_AGGREGATE_ECC", 1)

        def count(kind: int, counter: int) -> int | None:
            value = self._get("nvmlDeviceGetTotalEccErrors", handle, kind, counter)
            return int(value) if value is not None else None

        return EccCounts(
            volatile_single=count(corrected, volatile),
            volatile_double=count(uncorrected, volatile),
            aggregate_single=count(corrected, aggregate),
            aggregate_double=count(uncorrected, aggregate),
        )

    def _retired_pages(self, handle: Any) -> RetiredPages | None:
        nvml = self._nvml
        single = self._get(
            "nvmlDeviceGetRetiredPages",
            handle,
            _const(nvml, "NVML_PAGE_RETIREMENT_CAUSE_MULTIPLE_SINGLE_BIT_ECC_ERRORS", 0),
        )
        double = self._get(
            "nvmlDeviceGetRetiredPages", handle, _const(nvml, "NVML_PAGE_RETIREMENT_CAUSE_DOUBLE_BIT_ECC_ERROR", 1)
        )
        pending = self._get("nvmlDeviceGetRetiredPagesPendingStatus", handle)
        if single is None and double is None and pending is None:
            return None
        return RetiredPages(
            single_bit=len(single) if single is not None else None,
            double_bit=len(double) if double is not None else None,
            pending=bool(pending) if pending is not None else None,
        )

    def _row_remap(self, handle: Any) -> RowRemap | None:
        rows = self._get("nvmlDeviceGetRemappedRows", handle)
        if rows is None:
            return None
        correctable, uncorrectable, pending, failure = rows
        return RowRemap(
            correctable=int(correctable),
            uncorrectable=int(uncorrectable),
            pending=bool(pending),
            failure=bool(failure),
        )

    # ------------------------------------------------------------------ XID events

    def _register_events(self) -> None:
        self._event_set = self._get("nvmlEventSetCreate")
        if self._event_set is None:
            return
        mask = _const(self._nvml, "nvmlEventTypeXidCriticalError", _XID_CRITICAL_ERROR_EVENT)
        for index, handle in enumerate(self._handles):
            if handle is None:
                continue
            try:
                self._nvml.nvmlDeviceRegisterEvents(handle, mask, self._event_set)
            except self._nvml.NVMLError as error:
                log.warning("GPU %d: cannot watch XID events: %s", index, error)

    def drain_xid_events(self) -> list[XidEvent]:
        if self._event_set is None or self._error is not None:
            return []
        mask = _const(self._nvml, "nvmlEventTypeXidCriticalError", _XID_CRITICAL_ERROR_EVENT)
        events: list[XidEvent] = []
        for _ in range(10_000):  # bounded: a storm must not stall the telemetry loop
            try:
                data = self._nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except self._nvml.NVMLError as error:
                if self._code(error) != _TIMEOUT:
                    log.warning("reading NVML events: %s", error)
                break
            if not int(data.eventType) & mask:
                continue
            events.append(
                XidEvent(
                    index=self._index_of(data.device),
                    xid=int(data.eventData),
                    timestamp=self._clock(),
                    gpu_instance_id=_instance(getattr(data, "gpuInstanceId", None)),
                    compute_instance_id=_instance(getattr(data, "computeInstanceId", None)),
                )
            )
        return events

    def _index_of(self, handle: Any) -> int:
        try:
            index = self._get("nvmlDeviceGetIndex", handle)
        except (GpuLostError, NvmlDeadError):
            index = None
        if isinstance(index, int):
            return index
        for device, known in zip(self._devices, self._handles, strict=True):
            if known is not None and (known is handle or known == handle):
                return device.index
        return -1

    # ------------------------------------------------------------------ compute

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        if self.compute_engine is None:
            return None
        target = device.mig_devices[0].uuid if device.mig_enabled and device.mig_devices else device.uuid
        return ComputeJob(
            engine=self.compute_engine,
            gpu_index=device.index,
            tasks=tuple(tasks),
            sizes=sizes,
            seed=seed,
            visible_device=target,
        )


def _lost_device(index: int, why: str) -> DeviceInfo:
    return DeviceInfo(
        index=index, uuid=f"GPU-lost-{index}", name=f"lost GPU ({why})", pci_bus_id="", memory_total_bytes=None
    )


def _const(module: Any, name: str, default: int) -> int:
    value = getattr(module, name, default)
    return value if isinstance(value, int) else default


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode(errors="replace").rstrip("\x00")
    return str(value)


def _float(value: Any) -> float | None:
    return float(value) if value is not None else None


def _instance(value: Any) -> int | None:
    if value is None or int(value) >= 0xFFFFFFFF:
        return None
    return int(value)


def _throttle_reasons(mask: int) -> frozenset[str]:
    return frozenset(name for bit, name in enumerate(THROTTLE_REASONS) if mask & (1 << bit))
