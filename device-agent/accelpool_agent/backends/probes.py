"""What a host shows of each vendor's devices and tools: the facts backend detection and availability read.

Each vendor's backend is recognised by what its kernel driver or tools leave on the host (the function
here that its `Registration.detector` names):

- NVIDIA (`nvidia`, for `nvml`): libnvidia-ml.so.1 loads, or the driver's control node /dev/nvidiactl exists.
- AMD (`amd`, for `amdsmi`): the ROCm compute node /dev/kfd exists (amdgpu's KFD), or `amdsmi` is importable.
- AWS (`neuron`): the Neuron driver's /dev/neuron0 exists, or `neuron-monitor` is on PATH.
- Google (`tpu`): /dev/accel* (TPU v2-v4 through the accel driver), or /dev/vfio groups with a PCI
  device of Google's vendor id 0x1ae0 in /sys/bus/pci/devices (v5e, v5p, v6e bind to vfio-pci), or
  libtpu's monitoring SDK (`libtpu`) is importable, or `tpu-info` is on PATH (the TPU image's tools,
  as for AMD and Neuron).

Every function here is pure over its `Probes` (a filesystem root and three lookups), so tests run them on
fake /dev and /sys trees; `host_probes` gives the real ones. The same lookups tell which backends lack
their library or tool on this host (`Registration.unavailable`). `backends.detect` walks the detectors.
"""

from __future__ import annotations

import ctypes
import importlib.util
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

GOOGLE_PCI_VENDOR = "0x1ae0"
NVML_LIBRARY = "libnvidia-ml.so.1"


@dataclass(frozen=True)
class Probes:
    """What detection may look at: files under `root` (`/` on a host) and three lookups."""

    root: Path
    library_loads: Callable[[str], bool]
    module_importable: Callable[[str], bool]
    on_path: Callable[[str], bool]


def nvidia(probes: Probes) -> str | None:
    if probes.library_loads(NVML_LIBRARY):
        return f"{NVML_LIBRARY} loads"
    return _exists(probes.root, "dev/nvidiactl")


def amd(probes: Probes) -> str | None:
    found = _exists(probes.root, "dev/kfd")
    if found is None and probes.module_importable("amdsmi"):
        return "the amdsmi module is importable"
    return found


def neuron(probes: Probes) -> str | None:
    found = _exists(probes.root, "dev/neuron0")
    if found is None and probes.on_path("neuron-monitor"):
        return "neuron-monitor is on PATH"
    return found


def tpu(probes: Probes) -> str | None:
    accel = sorted((probes.root / "dev").glob("accel*"))
    if accel:
        return f"/dev/{accel[0].name} exists"
    vfio = probes.root / "dev" / "vfio"
    groups = [p for p in vfio.iterdir() if p.name != "vfio"] if vfio.is_dir() else []
    google = _google_pci_devices(probes.root)
    if groups and google:
        return f"/dev/vfio groups and Google PCI device {google[0]} (vendor {GOOGLE_PCI_VENDOR})"
    if probes.module_importable("libtpu"):
        return "the libtpu module is importable"
    if probes.on_path("tpu-info"):
        return "tpu-info is on PATH"
    return None


def _google_pci_devices(root: Path) -> list[str]:
    devices = root / "sys" / "bus" / "pci" / "devices"
    if not devices.is_dir():
        return []
    return sorted(device.name for device in devices.iterdir() if _read(device / "vendor").lower() == GOOGLE_PCI_VENDOR)


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _exists(root: Path, relative: str) -> str | None:
    return f"/{relative} exists" if (root / relative).exists() else None


def host_probes(root: Path = Path("/")) -> Probes:
    """The real probes: dlopen, importlib's finder (imports nothing) and shutil.which."""
    return Probes(root=root, library_loads=_library_loads, module_importable=_importable, on_path=_on_path)


def _library_loads(name: str) -> bool:
    try:
        ctypes.CDLL(name)
    except OSError:
        return False
    return True


def _importable(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


def _on_path(name: str) -> bool:
    return shutil.which(name) is not None
