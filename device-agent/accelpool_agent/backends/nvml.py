"""The NVML backend: inventory, telemetry and XID events of NVIDIA GPUs through nvidia-ml-py.

Every NVML call is guarded (`nvml_calls`): NVML_ERROR_NOT_SUPPORTED (and a function missing
from an older driver) means "no data" and yields None, never an error. NVML_ERROR_GPU_IS_LOST
marks that GPU lost for this reading. A dead NVML (library missing, driver not loaded, init failing, or
NVML_ERROR_UNINITIALIZED mid-run) is survived: `error` says why, telemetry is empty, and
initialisation is retried every `retry_seconds`. Other errors count into `call_errors` and
read as no data. What is read from one GPU is in `nvml_device`; the lifecycle it shares with
the amdsmi backend (import at `open`, retry, a dead library, lost GPUs) is `library.LibraryBackend`'s;
this module keeps NVML's initialisation, the device handles and the XID event set.

The driver's version and the CUDA version it supports are read once at initialisation
(`nvmlSystemGetDriverVersion`, `nvmlSystemGetCudaDriverVersion_v2`: 12040 → "12.4"). The host's
InfiniBand ports come from sysfs (`backends.infiniband`), not NVML.

XID errors arrive through an NVML event set registered for `nvmlEventTypeXidCriticalError`
on every GPU and drained without blocking. Compute checks run in CuPy children pinned to the
GPU (or its first MIG device) by UUID. The `nvml` module is injectable so tests can drive
this code without a GPU.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from accelpool_agent.backends import Detector, Need, Registration, nvml_device, probes
from accelpool_agent.backends.library import DeviceLostError, LibraryBackend, LibraryDeadError
from accelpool_agent.backends.nvml_calls import (
    TIMEOUT,
    XID_CRITICAL_ERROR_EVENT,
    GpuLostError,
    NvmlCalls,
)
from accelpool_agent.model import DeviceInfo, DriverVersions, Telemetry, XidEvent

log = logging.getLogger(__name__)


class NvmlBackend(LibraryBackend):
    name = "nvml"
    library = "pynvml"
    label = "NVML"
    lost_without_handle = "GPU is lost (no NVML handle)"

    def __init__(
        self,
        nvml: Any | None = None,
        *,
        compute_engine: str | None = "cuda",
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        sysfs_root: Path = Path("/sys"),
    ) -> None:
        super().__init__(
            nvml, compute_engine=compute_engine, retry_seconds=retry_seconds, clock=clock, sysfs_root=sysfs_root
        )
        self._event_set: Any = None
        self._calls = NvmlCalls(None, self.call_errors)
        self.driver_version: str | None = None
        self.cuda_version: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def _initialise(self, module: Any) -> None:
        self._calls = NvmlCalls(module, self.call_errors)
        module.nvmlInit()

    def _init_failure(self, error: Exception) -> str:
        return f"NVML initialisation failed: {error}"

    def _start(self) -> None:
        self.driver_version = nvml_device.text(self._calls.get("nvmlSystemGetDriverVersion"))
        self.cuda_version = cuda_version(self._calls)
        self._scan()
        self._register_events()

    def _shut_down(self) -> None:
        if self._event_set is not None:
            self._calls.get("nvmlEventSetFree", self._event_set)
            self._event_set = None
        try:
            self._calls.nvml.nvmlShutdown()
        except Exception as error:
            log.debug("nvmlShutdown: %s", error)

    def _forget_events(self) -> None:
        self._event_set = None

    # ------------------------------------------------------------------ inventory

    def _scan(self) -> None:
        count = self._calls.get("nvmlDeviceGetCount") or 0
        previous = {device.index: device for device in self._devices}
        handles: list[Any] = []
        devices: list[DeviceInfo] = []
        for index in range(count):
            try:
                handle = self._calls.get("nvmlDeviceGetHandleByIndex", index)
                device = nvml_device.describe(self._calls, index, handle) if handle is not None else None
            except GpuLostError as error:
                handle, device = None, previous.get(index) or nvml_device.lost_device(index, str(error))
            if device is None:
                continue
            handles.append(handle)
            devices.append(device)
        self._handles, self._devices = handles, devices

    # ------------------------------------------------------------------ telemetry

    def _read(self, index: int, handle: Any) -> Telemetry:
        return nvml_device.read(self._calls, index, handle)

    def versions(self) -> DriverVersions:
        return DriverVersions(driver=self.driver_version, cuda=self.cuda_version)

    # ------------------------------------------------------------------ XID events

    def _register_events(self) -> None:
        self._event_set = self._calls.get("nvmlEventSetCreate")
        if self._event_set is None:
            return
        mask = self._calls.const("nvmlEventTypeXidCriticalError", XID_CRITICAL_ERROR_EVENT)
        for index, handle in enumerate(self._handles):
            if handle is None:
                continue
            try:
                self._calls.nvml.nvmlDeviceRegisterEvents(handle, mask, self._event_set)
            except self._calls.nvml.NVMLError as error:
                log.warning("GPU %d: cannot watch XID events: %s", index, error)

    def drain_xid_events(self) -> list[XidEvent]:
        if self._event_set is None or self._error is not None:
            return []
        mask = self._calls.const("nvmlEventTypeXidCriticalError", XID_CRITICAL_ERROR_EVENT)
        events: list[XidEvent] = []
        for _ in range(10_000):  # bounded: a storm must not stall the telemetry loop
            try:
                data = self._calls.nvml.nvmlEventSetWait_v2(self._event_set, 0)
            except self._calls.nvml.NVMLError as error:
                if self._calls.code(error) != TIMEOUT:
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
            index = self._calls.get("nvmlDeviceGetIndex", handle)
        except (DeviceLostError, LibraryDeadError):
            index = None
        if isinstance(index, int):
            return index
        for device, known in zip(self._devices, self._handles, strict=True):
            if known is not None and (known is handle or known == handle):
                return device.index
        return -1

    # ------------------------------------------------------------------ compute

    def _visible_device(self, device: DeviceInfo) -> str:
        """The GPU's UUID, or its first MIG device's where MIG is on."""
        return device.mig_devices[0].uuid if device.mig_enabled and device.mig_devices else device.uuid


def cuda_version(calls: NvmlCalls) -> str | None:
    """The CUDA version the driver supports, as NVML encodes it (1000 x major + 10 x minor): 12040 → "12.4"."""
    value = calls.get("nvmlSystemGetCudaDriverVersion_v2")
    if value is None:
        value = calls.get("nvmlSystemGetCudaDriverVersion")
    if value is None or int(value) <= 0:
        return None
    return f"{int(value) // 1000}.{int(value) % 1000 // 10}"


def _instance(value: Any) -> int | None:
    if value is None or int(value) >= 0xFFFFFFFF:
        return None
    return int(value)


REGISTRATION = Registration(
    name="nvml",
    summary="NVIDIA (NVML + CuPy)",
    factory=NvmlBackend,
    needs=(
        Need("the pynvml module (nvidia-ml-py)", modules=("pynvml",)),
        Need(f"{probes.NVML_LIBRARY} (NVIDIA's driver)", libraries=(probes.NVML_LIBRARY,)),
    ),
    detector=Detector("NVIDIA", probes.nvidia),
)
