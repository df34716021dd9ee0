"""A stand-in for libtpu's monitoring SDK (`from libtpu.sdk import tpumonitoring`), and a fake host.

`FakeTpuMonitoring` answers as the TPU Monitoring Library documents it
(cloud.google.com/tpu/docs/tpu-monitoring-library): `list_supported_metrics()` gives metric
names, `get_metric(name)` a metric whose `data()` is a list of strings, one per accelerator
(`duty_cycle_pct` → `['45.32', ...]`, `hbm_capacity_total` / `hbm_capacity_usage` → bytes as
strings), and whose `description()` is text. A metric can be scripted to raise, as tpu-info's
CLI expects the SDK to (`RuntimeError`, `AttributeError`). `install` puts it in `sys.modules` under
`libtpu`, `libtpu.sdk` and `libtpu.sdk.tpumonitoring`, so the backend's real import path runs.

`FakeHost` writes the files tpu-info reads (`tpu_info/tpu_info/device.py`): per PCI function
`<sysfs>/bus/pci/devices/<address>/{vendor,device,subsystem_device}`, and the chips' device files.
"""

from __future__ import annotations

import shutil
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the stand-in is also imported outside pytest, by tests/fixtures/agent/libtpu/
    import pytest

GIB = 1 << 30

DESCRIPTIONS = {
    "duty_cycle_pct": "Duty cycle percentage of each accelerator over the sampling window.",
    "tensorcore_util": "TensorCore utilization percentage of each accelerator.",
    "hbm_capacity_total": "Total HBM capacity of each accelerator, in bytes.",
    "hbm_capacity_usage": "HBM in use on each accelerator, in bytes.",
}


@dataclass
class FakeMetric:
    name: str
    values: list[str]

    def data(self) -> list[str]:
        return list(self.values)

    def description(self) -> str:
        return DESCRIPTIONS.get(self.name, self.name)


@dataclass
class FakeTpuMonitoring:
    """Scripted metric values per accelerator; `raises` makes a call raise (name → exception)."""

    values: dict[str, list[str]] = field(default_factory=dict)
    raises: dict[str, Exception] = field(default_factory=dict)
    supported: list[str] | None = None
    """What list_supported_metrics() names; None: every scripted metric."""
    list_error: Exception | None = None

    def list_supported_metrics(self) -> list[str]:
        if self.list_error is not None:
            raise self.list_error
        return list(self.supported if self.supported is not None else self.values)

    def get_metric(self, name: str) -> FakeMetric:
        if name in self.raises:
            raise self.raises[name]
        return FakeMetric(name, self.values.get(name, []))

    @classmethod
    def busy(cls, chips: int, *, hbm_gib: int, used_gib: float = 10.0) -> FakeTpuMonitoring:
        """A runtime with a workload: every chip busy, `used_gib` of `hbm_gib` in use."""
        return cls(
            values={
                "duty_cycle_pct": [f"{45.0 + n:.2f}" for n in range(chips)],
                "tensorcore_util": [f"{30.0 + n:.2f}" for n in range(chips)],
                "hbm_capacity_total": [str(hbm_gib * GIB)] * chips,
                "hbm_capacity_usage": [str(int(used_gib * GIB))] * chips,
            }
        )


def install(monkeypatch: pytest.MonkeyPatch, monitoring: Any, *, version: str = "0.0.17") -> None:
    """Make `from libtpu.sdk import tpumonitoring` give `monitoring`, and `libtpu.__version__` `version`."""
    libtpu = types.ModuleType("libtpu")
    libtpu.__version__ = version  # type: ignore[attr-defined]
    sdk = types.ModuleType("libtpu.sdk")
    sdk.tpumonitoring = monitoring  # type: ignore[attr-defined]
    libtpu.sdk = sdk  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "libtpu", libtpu)
    monkeypatch.setitem(sys.modules, "libtpu.sdk", sdk)
    monkeypatch.setitem(sys.modules, "libtpu.sdk.tpumonitoring", monitoring)


def uninstall(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `import libtpu` fail as on a host without it (a None entry in sys.modules raises ImportError)."""
    for name in ("libtpu", "libtpu.sdk", "libtpu.sdk.tpumonitoring"):
        monkeypatch.setitem(sys.modules, name, None)


PCI_IDS = {"v4": ("0x005e", "0x0000"), "v5e": ("0x0063", "0x0000"), "v5p": ("0x0062", "0x0000")}
PCI_IDS |= {"v6e": ("0x006f", "0x0000"), "v3": ("0x0027", "0x004f"), "7x": ("0x0076", "0x0000")}


@dataclass
class FakeHost:
    root: Path

    @property
    def sysfs(self) -> Path:
        return self.root / "sys"

    @property
    def dev(self) -> Path:
        return self.root / "dev"

    def address(self, n: int) -> str:
        return f"0000:00:{4 + n:02x}.0"

    def add_function(self, address: str, vendor: str, device: str, subsystem: str = "0x0000") -> None:
        function = self.sysfs / "bus" / "pci" / "devices" / address
        function.mkdir(parents=True, exist_ok=True)
        (function / "vendor").write_text(f"{vendor}\n")
        (function / "device").write_text(f"{device}\n")
        (function / "subsystem_device").write_text(f"{subsystem}\n")

    def add_chips(self, generation: str, count: int) -> None:
        device, subsystem = PCI_IDS[generation]
        vfio = generation in ("v5e", "v5p", "v6e", "7x")
        for n in range(count):
            self.add_function(self.address(n), "0x1ae0", device, subsystem)
            path = self.dev / "vfio" / str(n) if vfio else self.dev / f"accel{n}"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()

    def remove_chip(self, n: int) -> None:
        """The chip's PCI function vanishes (it fell off the bus)."""
        shutil.rmtree(self.sysfs / "bus" / "pci" / "devices" / self.address(n))
