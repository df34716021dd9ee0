"""The host's Google TPU chips, found as tpu-info finds them: PCI functions of vendor 0x1ae0 in sysfs.

The identification follows tpu-info (github.com/AI-Hypercomputer/cloud-accelerator-diagnostics,
`tpu_info/tpu_info/device.py`): every `<sysfs>/bus/pci/devices/<address>/vendor` reading `0x1ae0`
(GOOGLE_PCI_VENDOR_ID) is a Google function; its `device` file names the generation (`0x005e` v4,
`0x0063` v5e, `0x0062` v5p, `0x006f` v6e, `0x0076` 7x; v2 and v3 share `0x0027` and differ by
`subsystem_device`, `0x004e` v2 and `0x004f` v3); a Google function with another device id is not a
TPU chip. Each generation's HBM (GiB) and devices (TensorCores the runtime reports) per chip are
tpu-info's `TpuChip` table. The chip's device file is tpu-info's `chip_path`: `/dev/vfio/<n>` for
v5e, v5p, v6e and 7x, `/dev/accel<n>` for the others, `<n>` being the chip's position.

Where sysfs shows no Google function at all (sysfs not mounted in the container) the chips are
counted from their device files instead (`/dev/accel<n>`, `/dev/vfio/<n>`), generation unknown; and
where neither shows any, from tpu-info's `TPU Chips` table (`listed`: its Chip and Type cells).
Pure reading of files; the roots are injectable so tests point them at a fake tree.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

GOOGLE_PCI_VENDOR_ID = "0x1ae0"


@dataclass(frozen=True)
class Generation:
    """One TPU generation: tpu-info's name, HBM per chip, devices per chip, and the catalog's model."""

    name: str
    hbm_gib: int
    devices_per_chip: int
    catalog_model: str | None
    """The accelpool catalog's name (`TPU-v5p`); None for generations the catalog does not list."""

    @property
    def product_name(self) -> str:
        """tpu-info's `str(TpuChip)`: `TPU v5p chip`, and `TPU7x chip` for 7x."""
        return "TPU7x chip" if self.name == "7x" else f"TPU {self.name} chip"

    @property
    def uses_vfio(self) -> bool:
        return self.name in ("v5e", "v5p", "v6e", "7x")


V2 = Generation("v2", 8, 2, None)
V3 = Generation("v3", 16, 2, None)
V4 = Generation("v4", 32, 1, None)
V5E = Generation("v5e", 16, 1, "TPU-v5e")
V5P = Generation("v5p", 95, 1, "TPU-v5p")
V6E = Generation("v6e", 32, 1, "TPU-v6e")
V7X = Generation("7x", 192, 2, None)

DEVICE_IDS: dict[str, Generation] = {"0x005e": V4, "0x0063": V5E, "0x0062": V5P, "0x006f": V6E, "0x0076": V7X}
"""PCI device id → generation (tpu-info `TpuChip.from_pci_device_id`)."""
SHARED_V2_V3 = "0x0027"
SUBSYSTEM_IDS = {"0x004e": V2, "0x004f": V3}


@dataclass(frozen=True)
class Chip:
    """One TPU chip on the host."""

    pci_address: str
    """`0000:00:04.0`; empty for a chip counted from its device file only."""
    generation: Generation | None
    device_file: str
    """tpu-info's `chip_path` for the chip's position, e.g. `/dev/vfio/0`."""


def generation_of(device_id: str, subsystem_id: str) -> Generation | None:
    """The generation of a Google PCI function, or None when it is not a TPU chip."""
    if device_id == SHARED_V2_V3:
        return SUBSYSTEM_IDS.get(subsystem_id)
    return DEVICE_IDS.get(device_id)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip().lower()
    except OSError:
        return ""


def device_file(generation: Generation | None, position: int) -> str:
    if generation is not None and not generation.uses_vfio:
        return f"/dev/accel{position}"
    return f"/dev/vfio/{position}"


def pci_chips(sysfs_root: Path) -> list[tuple[str, Generation]]:
    """(PCI address, generation) of every TPU chip under `<sysfs_root>/bus/pci/devices`, by address."""
    found: list[tuple[str, Generation]] = []
    devices = sysfs_root / "bus" / "pci" / "devices"
    for function in sorted(devices.glob("*")) if devices.is_dir() else []:
        if _read(function / "vendor") != GOOGLE_PCI_VENDOR_ID:
            continue
        generation = generation_of(_read(function / "device"), _read(function / "subsystem_device"))
        if generation is not None:
            found.append((function.name, generation))
    return found


_ACCEL = re.compile(r"^accel(\d+)$")


def device_files(dev_root: Path) -> list[str]:
    """TPU device files under `dev_root`, as `/dev/...` paths in number order: `accel<n>` and
    `vfio/<n>` (not the `vfio/vfio` container file)."""
    accel = [int(m.group(1)) for p in _listing(dev_root) if (m := _ACCEL.match(p))]
    vfio = [int(p) for p in _listing(dev_root / "vfio") if p.isdigit()]
    return [f"/dev/accel{n}" for n in sorted(accel)] + [f"/dev/vfio/{n}" for n in sorted(vfio)]


def _listing(directory: Path) -> list[str]:
    try:
        return [entry.name for entry in directory.iterdir()]
    except OSError:
        return []


GENERATIONS = {generation.product_name: generation for generation in (V2, V3, V4, V5E, V5P, V6E, V7X)}
"""tpu-info's Type cell (`str(TpuChip)`: `TPU v6e chip`, `TPU7x chip`) → generation."""


def listed(files: tuple[str, ...], types: tuple[str, ...]) -> list[Chip]:
    """The chips of tpu-info's `TPU Chips` table (its Chip and Type columns); rows without a device file
    (`N/A`) are no chip."""
    kinds = types + ("",) * (len(files) - len(types))
    return [
        Chip("", GENERATIONS.get(kind.strip()), path)
        for path, kind in zip(files, kinds, strict=False)
        if path.startswith("/dev/")
    ]


def discover(sysfs_root: Path, dev_root: Path) -> list[Chip]:
    """The host's TPU chips in PCI-address order (the runtime's accelerator order is taken to be the
    same: tpu-info pairs its chip paths and the runtime's metrics by position too)."""
    functions = pci_chips(sysfs_root)
    if functions:
        return [Chip(address, gen, device_file(gen, n)) for n, (address, gen) in enumerate(functions)]
    return [Chip("", None, path) for path in device_files(dev_root)]
