"""The CPU backend: the host CPU as one "device", with NumPy compute checks, for development.

Inventory and telemetry come from /proc (the root is injectable for tests): the CPU model,
memory total and used, and utilisation between two readings. There are no XID events and no
expected peak, so the matmul check reports its TFLOPS without judging them.
"""

from __future__ import annotations

import hashlib
import os
import socket
from collections.abc import Sequence
from pathlib import Path

from accelpool_agent.backends import Registration
from accelpool_agent.backends.infiniband import SysfsInfiniband
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent


class CpuBackend:
    name = "cpu"
    compute_engine: str | None = "cpu"

    def __init__(self, proc: Path = Path("/proc"), *, sysfs_root: Path = Path("/sys")) -> None:
        self._proc = proc
        self._infiniband = SysfsInfiniband(sysfs_root)
        self._last_stat: tuple[int, int] | None = None
        self._device: DeviceInfo | None = None

    @property
    def error(self) -> str | None:
        return None

    def open(self) -> None:
        self._device = self._describe()

    def close(self) -> None:
        return None

    def _read(self, name: str) -> str:
        try:
            return (self._proc / name).read_text()
        except OSError:
            return ""

    def _meminfo(self) -> dict[str, int]:
        values: dict[str, int] = {}
        for line in self._read("meminfo").splitlines():
            key, _, rest = line.partition(":")
            parts = rest.split()
            if parts and parts[0].isdigit():
                values[key.strip()] = int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1)
        return values

    def _describe(self) -> DeviceInfo:
        model = "CPU"
        for line in self._read("cpuinfo").splitlines():
            if line.startswith("model name"):
                model = line.partition(":")[2].strip()
                break
        identity = hashlib.sha256(f"{socket.gethostname()}:{model}".encode()).hexdigest()
        return DeviceInfo(
            index=0,
            uuid=f"CPU-{identity[:8]}-{identity[8:12]}-{identity[12:16]}-{identity[16:20]}-{identity[20:32]}",
            name=f"{model} ({os.cpu_count() or 1} threads)",
            pci_bus_id="",
            memory_total_bytes=self._meminfo().get("MemTotal"),
        )

    def inventory(self) -> list[DeviceInfo]:
        if self._device is None:
            self.open()
        assert self._device is not None
        return [self._device]

    def telemetry(self) -> list[Telemetry]:
        memory = self._meminfo()
        total, available = memory.get("MemTotal"), memory.get("MemAvailable")
        return [
            Telemetry(
                index=0,
                utilization_ratio=self._utilization(),
                memory_total_bytes=total,
                memory_used_bytes=total - available if total is not None and available is not None else None,
            )
        ]

    def _utilization(self) -> float | None:
        first = self._read("stat").splitlines()[:1]
        if not first or not first[0].startswith("cpu "):
            return None
        fields = [int(x) for x in first[0].split()[1:]]
        idle, total = fields[3] + (fields[4] if len(fields) > 4 else 0), sum(fields)
        previous, self._last_stat = self._last_stat, (idle, total)
        if previous is None or total <= previous[1]:
            return None
        return round(1.0 - (idle - previous[0]) / (total - previous[1]), 4)

    def drain_xid_events(self) -> list[XidEvent]:
        return []

    def versions(self) -> DriverVersions:
        return DriverVersions()

    def infiniband(self) -> list[IbPort]:
        return self._infiniband.ports()

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        return ComputeJob(engine="cpu", gpu_index=device.index, tasks=tuple(tasks), sizes=sizes, seed=seed)


REGISTRATION = Registration(name="cpu", summary="NumPy on the host CPU", factory=CpuBackend)
