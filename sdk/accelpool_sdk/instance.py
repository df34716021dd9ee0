"""Inside a pod: which accelerators this process can see, read through the device agent's backends.

    ap.instance_info()          # backend, devices (name, memory, catalog model, MIG devices), driver
    ap.current_accelerator()    # the catalog accelerator x the visible count, or None on a CPU
    ap.is_nvidia(), ap.is_amd(), ap.is_trainium(), ap.is_inferentia(), ap.is_tpu(), ap.is_gpu()

The backend is the one `accelpool-agent check` picks on this host (`accelpool_agent.backends.detect`:
NVML, amdsmi, Neuron, TPU by what the drivers leave in /dev and on PATH), so the same call works on
every vendor. When none is found, or the vendor's backend cannot see a device (its library missing,
the driver not answering), it falls back to the host CPU (`cpu`), saying why in `note`. `backend="fake"`
with `fake_gpus="H100:8"` simulates a node (tests, notebooks without a GPU); so do the environment
variables `ACCELPOOL_BACKEND=fake` and `ACCELPOOL_FAKE_GPUS=H100:8` for the calls without arguments.

The agent is its own distribution, accelpool-agent, installed beside the SDK from an accelpool checkout
(`pip install ./device-agent`: it is on no package index, so an extra of accelpool-sdk could not fetch it):
its modules are imported only when these functions run, so `import accelpool_sdk` works without it and
these functions say what to install when it is missing. The predicates also take an accelerator (a
factory's result, or a catalog name) and answer for it, as Skyward's `is_nvidia(acc)` does.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelpool_core import catalog
from accelpool_sdk.accelerator import CatalogAccelerator
from accelpool_sdk.factories import Accelerator

if TYPE_CHECKING:
    from accelpool_agent.backends import Backend
    from accelpool_agent.model import DeviceInfo

AGENT_INSTALL = "from an accelpool checkout, pip install ./device-agent"
"""How to install the device agent (accelpool-agent is on no package index)."""


@dataclass(frozen=True)
class Device:
    """One device this process sees (a MIG device is listed in its GPU's `mig_devices`)."""

    index: int
    name: str
    """The driver's product name, e.g. `NVIDIA H100 80GB HBM3`."""
    uuid: str
    memory_gb: float | None
    model: str | None
    """The catalog name (`H100-80GB`) when recognised."""
    mig_devices: tuple[str, ...] = ()
    """The MIG profiles of its MIG devices."""


@dataclass(frozen=True)
class InstanceInfo:
    """What this host's accelerators are, as the agent's backend sees them."""

    backend: str
    """`nvml`, `amdsmi`, `neuron`, `tpu`, `fake`, or `cpu` (the fallback)."""
    vendor: str | None
    """`nvidia`, `amd`, `aws` or `google`; None on the CPU fallback."""
    devices: tuple[Device, ...]
    driver: str | None
    evidence: str
    """Why this backend: what detection found (`/dev/kfd exists`), or that it was asked for."""
    note: str | None = None
    """Why the host CPU is reported although a vendor's devices were looked for."""

    @property
    def accelerators(self) -> int:
        """Visible accelerators (0 on the CPU fallback)."""
        return 0 if self.vendor is None else len(self.devices)

    @property
    def accelerator(self) -> Accelerator | None:
        """The catalog accelerator of the visible devices, `count` of them; None on a CPU or an unknown model."""
        models = {d.model for d in self.devices}
        if self.vendor is None or len(models) != 1 or None in models:
            return None
        entry = catalog.BY_NAME[str(next(iter(models)))]
        return Accelerator.from_name(entry.name, len(self.devices))


BACKEND_ENV = "ACCELPOOL_BACKEND"
FAKE_GPUS_ENV = "ACCELPOOL_FAKE_GPUS"


def instance_info(backend: str | None = None, *, fake_gpus: str | None = None) -> InstanceInfo:
    """The accelerators this process sees: through `backend` (`nvml`, `amdsmi`, `neuron`, `tpu`, `cuda`, `cpu`,
    `fake`), else $ACCELPOOL_BACKEND's, else the one detected on this host (looked up once per process)."""
    if backend is None and fake_gpus is None:
        return _host(os.environ.get(BACKEND_ENV), os.environ.get(FAKE_GPUS_ENV))
    return _read(backend or "fake", fake_gpus=fake_gpus, evidence=f"backend {backend or 'fake'} asked for")


@functools.cache
def _host(backend: str | None, fake_gpus: str | None) -> InstanceInfo:
    if backend is not None or fake_gpus is not None:
        chosen = backend or "fake"
        return _read(chosen, fake_gpus=fake_gpus, evidence=f"backend {chosen} from ${BACKEND_ENV}")
    require_agent()
    from accelpool_agent.backends.detect import detect_backend, host_probes

    found = detect_backend(host_probes())
    return _read(found.backend, fake_gpus=None, evidence=found.evidence)


def _read(name: str, *, fake_gpus: str | None, evidence: str) -> InstanceInfo:
    require_agent()
    from accelpool_agent.backends import BACKENDS, BackendError, create_backend

    try:
        backend = create_backend(name, fake_gpus=fake_gpus)
    except BackendError as error:
        if name in ("fake", "cpu") or name not in BACKENDS:
            raise ValueError(str(error)) from None
        return _cpu(evidence, note=f"the {name} backend cannot run here: {error}")
    return describe(backend, evidence)


def describe(backend: Backend, evidence: str) -> InstanceInfo:
    """Open `backend`, read its devices and driver, close it: what it sees, or the CPU when it sees no device."""
    from accelpool_agent.backends import device_vendor

    backend.open()
    try:
        devices = backend.inventory() if backend.error is None else []
        driver = backend.versions().driver
        error = backend.error
    finally:
        backend.close()
    if backend.name == "cpu":
        return InstanceInfo("cpu", None, tuple(_device(d) for d in devices), None, evidence)
    if not devices:
        why = error or "no device visible"
        return _cpu(evidence, note=f"the {backend.name} backend sees no device: {why}")
    vendor = device_vendor(devices[0].model, backend.name) or None
    return InstanceInfo(backend.name, vendor, tuple(_device(d) for d in devices), driver, evidence)


def _cpu(evidence: str, note: str | None = None) -> InstanceInfo:
    from accelpool_agent.backends.cpu import CpuBackend

    described = describe(CpuBackend(), evidence)
    return InstanceInfo("cpu", None, described.devices, None, evidence, note)


def _device(info: DeviceInfo) -> Device:
    memory = round(info.memory_total_bytes / 2**30, 1) if info.memory_total_bytes else None
    profiles = tuple(m.profile for m in info.mig_devices if m.profile)
    return Device(info.index, info.name, info.uuid, memory, info.model, profiles)


def require_agent() -> None:
    """ModuleNotFoundError saying how to install the device agent, when it is not installed."""
    if importlib.util.find_spec("accelpool_agent") is None:
        raise ModuleNotFoundError(
            f"instance_info() reads the devices through accelpool's device agent (accelpool-agent), which is not "
            f"installed: {AGENT_INSTALL}",
            name="accelpool_agent",
        )


def current_accelerator() -> Accelerator | None:
    """The accelerator this process runs on (catalog entry x visible count); None on a CPU (Skyward's shape)."""
    return instance_info().accelerator


AcceleratorRef = CatalogAccelerator | str | None


def _entry(accelerator: AcceleratorRef) -> tuple[str | None, str | None]:
    """(vendor, model) of an accelerator, a catalog name, or (None) this host's."""
    if isinstance(accelerator, CatalogAccelerator):
        return accelerator.vendor, accelerator.model
    if isinstance(accelerator, str):
        entry = catalog.lookup(accelerator)
        return entry.vendor.value, entry.model
    info = instance_info()
    found = info.accelerator
    return info.vendor, found.model if found is not None else None


def is_nvidia(accelerator: AcceleratorRef = None) -> bool:
    """An NVIDIA GPU (this host's, or `accelerator`'s)."""
    return _entry(accelerator)[0] == catalog.Vendor.NVIDIA.value


def is_amd(accelerator: AcceleratorRef = None) -> bool:
    """An AMD Instinct GPU."""
    return _entry(accelerator)[0] == catalog.Vendor.AMD.value


def is_gpu(accelerator: AcceleratorRef = None) -> bool:
    """A GPU (NVIDIA or AMD)."""
    return _entry(accelerator)[0] in (catalog.Vendor.NVIDIA.value, catalog.Vendor.AMD.value)


def is_tpu(accelerator: AcceleratorRef = None) -> bool:
    """A Google TPU."""
    return _entry(accelerator)[0] == catalog.Vendor.GOOGLE.value


def is_trainium(accelerator: AcceleratorRef = None) -> bool:
    """An AWS Trainium chip (Neuron)."""
    vendor, model = _entry(accelerator)
    return vendor == catalog.Vendor.AWS.value and (model or "").startswith("Trainium")


def is_inferentia(accelerator: AcceleratorRef = None) -> bool:
    """An AWS Inferentia chip (Neuron)."""
    vendor, model = _entry(accelerator)
    return vendor == catalog.Vendor.AWS.value and (model or "").startswith("Inferentia")
