"""The skeleton the `nvml` and `amdsmi` backends share: a GPU vendor's management library, survived.

Both wrap a Python binding of a C management library (pynvml, amdsmi) and keep the same lifecycle, which
`LibraryBackend` holds once:

- the library is imported at `open`, not before (a test passes its stand-in instead), then initialised;
  a missing library, or an initialisation that fails (no driver), is survived: `error` says why, the
  inventory and telemetry are empty (the node reads Unknown, BackendUnavailable: never GpuMissing), and
  `open` is tried again every `retry_seconds` by the next inventory or telemetry call;
- the subclass's guarded calls raise `LibraryDeadError` when the library stops working mid-run (the
  backend fails the same way, and retries) and `DeviceLostError` when one GPU stops answering (that GPU
  reads lost, `Telemetry.lost`, for this reading; a GPU the library no longer hands out stays listed,
  lost, with `lost_without_handle` as its error);
- the host's InfiniBand ports come from sysfs (`backends.infiniband`), and compute checks run in CuPy
  children pinned to the subclass's choice of `visible_device`.

A subclass (`nvml.NvmlBackend`, `amdsmi.AmdSmiBackend`) says what differs: how the library is initialised
and shut down, what it reads at initialisation (versions, the device list, its event watch), how one GPU
is read, and its events (`drain_xid_events`). Log lines go to the subclass's module's logger.
"""

from __future__ import annotations

import importlib
import logging
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, IbPort, Telemetry


class DeviceLostError(Exception):
    """A call on one GPU says the GPU is gone (fallen off the bus, no longer found)."""


class LibraryDeadError(Exception):
    """The management library itself stopped working (uninitialised, driver unloaded)."""


class LibraryBackend(ABC):
    name: str
    library: ClassVar[str]
    """The Python module imported at `open`: `pynvml`, `amdsmi`."""
    label: ClassVar[str]
    """How messages name the library: `NVML`, `amdsmi`."""
    lost_without_handle: ClassVar[str]
    """The error of a listed GPU the library hands no handle for."""

    def __init__(
        self,
        module: Any | None,
        *,
        compute_engine: str | None,
        retry_seconds: float,
        clock: Callable[[], float],
        sysfs_root: Path,
    ) -> None:
        self._module = module
        self._infiniband = SysfsInfiniband(sysfs_root)
        self.compute_engine = compute_engine
        self._retry_seconds = retry_seconds
        self._clock = clock
        self._error: str | None = f"{self.label} not initialised"
        self._opened_at: float | None = None
        self._handles: list[Any] = []
        self._devices: list[DeviceInfo] = []
        self.call_errors: Counter[str] = Counter()
        self._log = logging.getLogger(type(self).__module__)

    @property
    def error(self) -> str | None:
        return self._error

    # ------------------------------------------------------------------ what a subclass says

    @abstractmethod
    def _initialise(self, module: Any) -> None:
        """Bind the guarded calls to `module` and initialise the library; raises when it cannot."""

    @abstractmethod
    def _start(self) -> None:
        """After initialisation: read the versions, scan the GPUs (`_scan`), watch their events."""

    @abstractmethod
    def _scan(self) -> None:
        """Set `_devices` and `_handles` (None for a listed GPU without a handle) from the library."""

    @abstractmethod
    def _read(self, index: int, handle: Any) -> Telemetry:
        """One GPU's readings; raises DeviceLostError when it is gone."""

    @abstractmethod
    def _forget_events(self) -> None:
        """Drop the event watch (the library died; `open` sets it up again)."""

    @abstractmethod
    def _shut_down(self) -> None:
        """Stop watching events and shut the library down; never raises."""

    @abstractmethod
    def _visible_device(self, device: DeviceInfo) -> str:
        """How a compute child names the GPU (`CUDA_VISIBLE_DEVICES`)."""

    def _init_failure(self, error: Exception) -> str:
        return f"{self.label} initialisation failed: {type(error).__name__}: {error}"

    # ------------------------------------------------------------------ lifecycle

    def open(self) -> None:
        self._opened_at = self._clock()
        try:
            module = self._module if self._module is not None else importlib.import_module(self.library)
            self._initialise(module)
        except Exception as error:
            self._error = self._init_failure(error)
            self._handles, self._devices = [], []
            self._log.warning("%s", self._error)
            return
        self._error = None
        try:
            self._start()
        except (LibraryDeadError, DeviceLostError) as error:
            self._fail(str(error))

    def close(self) -> None:
        if self._error is None:
            self._shut_down()

    def _fail(self, why: str) -> None:
        self._error = why
        self._handles, self._devices = [], []
        self._forget_events()
        self._log.warning("%s stopped working: %s", self.label, why)

    def _ensure_open(self) -> bool:
        if self._error is None:
            return True
        if self._opened_at is None or self._clock() - self._opened_at >= self._retry_seconds:
            self.open()
        return self._error is None

    # ------------------------------------------------------------------ inventory and telemetry

    def inventory(self) -> list[DeviceInfo]:
        if not self._ensure_open():
            return []
        try:
            self._scan()
        except LibraryDeadError as error:
            self._fail(str(error))
        return list(self._devices)

    def telemetry(self) -> list[Telemetry]:
        if not self._ensure_open():
            return []
        readings = []
        try:
            for device, handle in zip(self._devices, self._handles, strict=True):
                if handle is None:
                    readings.append(Telemetry(index=device.index, lost=True, error=self.lost_without_handle))
                    continue
                try:
                    readings.append(self._read(device.index, handle))
                except DeviceLostError as error:
                    readings.append(Telemetry(index=device.index, lost=True, error=str(error)))
        except LibraryDeadError as error:
            self._fail(str(error))
            return []
        return readings

    def infiniband(self) -> list[IbPort]:
        return self._infiniband.ports()

    # ------------------------------------------------------------------ compute

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        if self.compute_engine is None:
            return None
        return ComputeJob(
            engine=self.compute_engine,
            gpu_index=device.index,
            tasks=tuple(tasks),
            sizes=sizes,
            seed=seed,
            visible_device=self._visible_device(device),
        )
