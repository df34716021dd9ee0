"""The amdsmi backend: inventory, telemetry and RAS events of AMD Instinct GPUs through AMD's own
Python library, `amdsmi` (PyPI; ROCm/amdsmi, py-interface/amdsmi_interface.py).

The module is imported lazily, at `open`: a host without it (or whose `amdsmi_init` fails: no amdgpu
driver) is survived, `error` says why, inventory and telemetry are empty (the agent reports the node
Unknown, BackendUnavailable: never GpuMissing), and initialisation is retried every `retry_seconds`
(the lifecycle shared with the NVML backend, `library.LibraryBackend`). Every call is guarded
(`amdsmi_device.AmdSmiCalls`): AMDSMI_STATUS_NOT_SUPPORTED (and NOT_YET_IMPLEMENTED, NO_DATA, a
function missing from an older library) is "no data", never an error; NOT_FOUND, IO and DRM_ERROR on
one GPU mark that GPU lost; NOT_INIT or INIT_ERROR mid-run mean amdsmi stopped working (`error`,
retried). A GPU that disappears from `amdsmi_get_processor_handles` stays in the inventory, lost, so
the node report names it.

Events: one `AmdSmiEventReader` per GPU watches VMFAULT, THERMAL_THROTTLE, GPU_PRE_RESET,
GPU_POST_RESET and RING_HANG (AmdSmiEvtNotificationType; AMDSMI_EVT_NOTIF_* in amdsmi.h). Its
`read(timeout_ms)` returns the events of every watched GPU (amdsmi_get_gpu_event_notification is
not per device), so the first reader drains them, without blocking. Each becomes an `XidEvent` whose
`event` is its name and whose `xid` is its code in `AMD_EVENT_CODES` (`rules.amd` judges them).

Compute checks: CuPy's ROCm build (the `cupy-rocm-*` wheels, where `cupy.cuda` runs on HIP) runs
the same CuPy engine as the CUDA backend, in a child whose CUDA_VISIBLE_DEVICES (which HIP honours)
names the GPU's HIP ordinal. Without it `compute_job` is None and `compute_unavailable` says why.
"""

from __future__ import annotations

import importlib.metadata
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from accelpool_agent.backends import Detector, Need, Registration, amdsmi_device, probes
from accelpool_agent.backends.amdsmi_device import AmdSmiCalls, GpuLostError
from accelpool_agent.backends.amdsmi_status import QUIET_STATUSES
from accelpool_agent.backends.library import LibraryBackend
from accelpool_agent.model import DeviceInfo, DriverVersions, Telemetry, XidEvent

log = logging.getLogger(__name__)

AMD_EVENT_CODES = {"VMFAULT": 1, "THERMAL_THROTTLE": 2, "GPU_PRE_RESET": 3, "GPU_POST_RESET": 4, "RING_HANG": 5}
"""The AmdSmiEvtNotificationType members the backend watches → the code it reports them under
(`XidEvent.xid`): their AMDSMI_EVT_NOTIF_* values in amdsmi.h up to ROCm 6.x. Events are matched by
name, because amdsmi 7 renumbered the types past GPU_POST_RESET (5 became MIGRATE_START, RING_HANG
went away), so a library's own value would not mean the same event on every host."""
EVENTS_PER_READ = 64


def cupy_rocm_installed() -> bool:
    """CuPy's ROCm build is installed (its wheels are `cupy-rocm-<version>`), without importing it."""
    return any(
        (dist.metadata["Name"] or "").lower().startswith("cupy-rocm") for dist in importlib.metadata.distributions()
    )


class AmdSmiBackend(LibraryBackend):
    name = "amdsmi"
    library = "amdsmi"
    label = "amdsmi"
    lost_without_handle = "GPU is lost (amdsmi no longer lists it)"

    def __init__(
        self,
        amdsmi: Any | None = None,
        *,
        compute_engine: str | None = None,
        retry_seconds: float = 30.0,
        clock: Callable[[], float] = time.time,
        sysfs_root: Path = Path("/sys"),
    ) -> None:
        """`amdsmi`: the module (a test's stand-in); imported at `open` when None. `compute_engine`:
        `cuda` to run compute checks with CuPy on ROCm; None detects CuPy's ROCm build."""
        rocm = compute_engine is not None or cupy_rocm_installed()
        super().__init__(
            amdsmi,
            compute_engine=compute_engine or ("cuda" if rocm else None),
            retry_seconds=retry_seconds,
            clock=clock,
            sysfs_root=sysfs_root,
        )
        self.compute_unavailable = None if self.compute_engine else "CuPy's ROCm build (cupy-rocm-*) is not installed"
        self._hip_ids: dict[int, int] = {}
        self._readers: list[Any] = []
        self._calls = AmdSmiCalls(None, self.call_errors)
        self.driver_version: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def _initialise(self, module: Any) -> None:
        self._calls = AmdSmiCalls(module, self.call_errors)
        init = module.amdsmi_init
        flags = getattr(getattr(module, "AmdSmiInitFlags", None), "INIT_AMD_GPUS", None)
        init(flags) if flags is not None else init()

    def _start(self) -> None:
        self._scan()
        if self._handles:
            self.driver_version = amdsmi_device.driver_version(self._calls, self._handles[0])
        self._watch_events()

    def _shut_down(self) -> None:
        for reader in self._readers:
            try:
                reader.stop()
            except Exception as error:
                log.debug("stopping an amdsmi event reader: %s", error)
        self._readers = []
        try:
            self._calls.module.amdsmi_shut_down()
        except Exception as error:
            log.debug("amdsmi_shut_down: %s", error)

    def _forget_events(self) -> None:
        self._readers = []

    # ------------------------------------------------------------------ inventory

    def _scan(self) -> None:
        """Describe the GPUs amdsmi lists. A GPU keeps the index it was first seen with (amdsmi's list
        closes up when one disappears); a GPU seen before and missing now stays, lost."""
        known = {device.uuid: device.index for device in self._devices}
        taken = set(known.values())
        found: dict[str, tuple[Any, DeviceInfo]] = {}
        for position, handle in enumerate(self._calls.get("amdsmi_get_processor_handles") or []):
            try:
                device = amdsmi_device.describe(self._calls, position, handle)
            except GpuLostError as error:
                log.warning("GPU %d lost while describing it: %s", position, error)
                continue
            index = known.get(device.uuid, position if position not in taken else max(taken) + 1)
            taken.add(index)
            device = replace(device, index=index)
            found[device.uuid] = (handle, device)
            self._hip_ids[index] = self._hip_id(handle, position)
        for device in self._devices:
            if device.uuid not in found:
                found[device.uuid] = (None, device)
        ordered = sorted(found.values(), key=lambda pair: pair[1].index)
        self._handles = [handle for handle, _ in ordered]
        self._devices = [device for _, device in ordered]

    def _hip_id(self, handle: Any, position: int) -> int:
        info = self._calls.get("amdsmi_get_gpu_enumeration_info", handle)
        hip = amdsmi_device.field(info, "hip_id")
        return int(hip) if hip is not None else position

    # ------------------------------------------------------------------ telemetry

    def _read(self, index: int, handle: Any) -> Telemetry:
        return amdsmi_device.read(self._calls, index, handle)

    def versions(self) -> DriverVersions:
        """The amdgpu driver's version; `cuda` stays None (ROCm has no CUDA version)."""
        return DriverVersions(driver=self.driver_version)

    # ------------------------------------------------------------------ RAS and driver events

    def _watch_events(self) -> None:
        reader_class = getattr(self._calls.module, "AmdSmiEventReader", None)
        types = getattr(self._calls.module, "AmdSmiEvtNotificationType", None)
        if reader_class is None or types is None:
            return
        watched = [getattr(types, name) for name in AMD_EVENT_CODES if hasattr(types, name)]
        for index, handle in enumerate(self._handles):
            if handle is None:
                continue
            try:
                self._readers.append(reader_class(handle, watched))
            except Exception as error:
                log.warning("GPU %d: cannot watch amdsmi events: %s", index, error)

    def drain_xid_events(self) -> list[XidEvent]:
        """The driver's events since the last call, as `XidEvent`s with `event` set (see the module)."""
        if not self._readers or self._error is not None:
            return []
        try:
            raw = self._readers[0].read(0, EVENTS_PER_READ)
        except Exception as error:
            if self._calls.status(error) not in QUIET_STATUSES:
                log.warning("reading amdsmi events: %s", error)
            return []
        events = []
        for item in raw if isinstance(raw, list) else []:
            name = str(item.get("event", "")) if isinstance(item, Mapping) else ""
            if name not in AMD_EVENT_CODES:
                continue
            events.append(
                XidEvent(
                    index=self._index_of(item.get("processor_handle")),
                    xid=AMD_EVENT_CODES[name],
                    timestamp=self._clock(),
                    event=name,
                )
            )
        return events

    def _index_of(self, handle: Any) -> int:
        wanted = getattr(handle, "value", handle)
        for device, known in zip(self._devices, self._handles, strict=True):
            if known is not None and (known is handle or getattr(known, "value", known) == wanted):
                return device.index
        return -1

    # ------------------------------------------------------------------ compute

    def _visible_device(self, device: DeviceInfo) -> str:
        """The GPU's HIP ordinal (HIP honours CUDA_VISIBLE_DEVICES)."""
        return str(self._hip_ids.get(device.index, device.index))


REGISTRATION = Registration(
    name="amdsmi",
    summary="AMD Instinct (amdsmi + CuPy ROCm)",
    factory=AmdSmiBackend,
    needs=(Need("the amdsmi module", modules=("amdsmi",)),),
    detector=Detector("AMD", probes.amd),
)
