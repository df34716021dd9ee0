"""The CUDA backend: CuPy compute checks on hosts where NVML is not available.

Inventory comes from the CUDA runtime, asked in a short-lived spawned child so the agent
process never loads CUDA; there is no telemetry and there are no XID events (use `nvml` on a
real node: it runs the same CuPy checks and adds NVML's telemetry and health data).
"""

from __future__ import annotations

import logging
import multiprocessing
from collections.abc import Sequence
from pathlib import Path

from accelpool_agent.backends import Need, Registration, detect_model
from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent

log = logging.getLogger(__name__)

DeviceRow = tuple[int, str, str, str, int, str]
"""(ordinal, uuid, name, pci bus id, memory bytes, compute capability)."""


def _format_uuid(raw: bytes) -> str:
    h = raw.hex()
    return f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def query_devices() -> list[DeviceRow]:
    """Runs in a child: the CUDA runtime's view of the devices."""
    import cupy

    runtime = cupy.cuda.runtime
    rows: list[DeviceRow] = []
    for ordinal in range(runtime.getDeviceCount()):
        props = runtime.getDeviceProperties(ordinal)
        name = props.get("name", b"CUDA device")
        raw_uuid = props.get("uuid")
        rows.append(
            (
                ordinal,
                _format_uuid(bytes(raw_uuid)) if raw_uuid else str(ordinal),
                name.decode() if isinstance(name, bytes) else str(name),
                f"{props.get('pciDomainID', 0):08X}:{props.get('pciBusID', 0):02X}:{props.get('pciDeviceID', 0):02X}.0",
                int(props.get("totalGlobalMem", 0)),
                f"{props.get('major', 0)}.{props.get('minor', 0)}",
            )
        )
    return rows


class CudaBackend:
    name = "cuda"
    compute_engine: str | None = "cuda"

    def __init__(self, *, sysfs_root: Path = Path("/sys")) -> None:
        self._infiniband = SysfsInfiniband(sysfs_root)
        self._devices: list[DeviceInfo] = []
        self._error: str | None = "CUDA not queried yet"

    @property
    def error(self) -> str | None:
        return self._error

    def open(self) -> None:
        context = multiprocessing.get_context("spawn")
        try:
            with context.Pool(1) as pool:
                rows = pool.apply(query_devices)
        except Exception as error:
            self._error = f"CUDA runtime unavailable: {type(error).__name__}: {error}"
            log.warning("%s", self._error)
            return
        self._error = None
        devices = []
        for ordinal, uuid, name, bus, memory, capability in rows:
            accelerator = detect_model(name)
            devices.append(
                DeviceInfo(
                    index=ordinal,
                    uuid=uuid,
                    name=name,
                    pci_bus_id=bus,
                    memory_total_bytes=memory,
                    model=accelerator.name if accelerator else None,
                    compute_capability=capability,
                )
            )
        self._devices = devices

    def close(self) -> None:
        return None

    def inventory(self) -> list[DeviceInfo]:
        return list(self._devices)

    def telemetry(self) -> list[Telemetry]:
        return []

    def drain_xid_events(self) -> list[XidEvent]:
        return []

    def versions(self) -> DriverVersions:
        return DriverVersions()

    def infiniband(self) -> list[IbPort]:
        return self._infiniband.ports()

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        return ComputeJob(
            engine="cuda",
            gpu_index=device.index,
            tasks=tuple(tasks),
            sizes=sizes,
            seed=seed,
            visible_device=device.uuid,
        )


REGISTRATION = Registration(
    name="cuda",
    summary="CuPy only",
    factory=CudaBackend,
    needs=(Need("the cupy module (CuPy)", modules=("cupy",)),),
)
