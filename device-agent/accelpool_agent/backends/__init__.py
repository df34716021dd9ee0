"""Device backends behind one small interface, and the factory the CLI uses.

A backend answers which devices are there (`inventory`), how are they now (`telemetry`), which
XID errors happened since the last call (`drain_xid_events`), how to run compute checks on one
of them (`compute_job`, a picklable job for a child process), which driver runs them
(`versions`), and what the host's InfiniBand / RoCE ports say (`infiniband`: sysfs, read by
`backends.infiniband` for the real backends, simulated by the fake one).

- `nvml`: NVIDIA's management library for inventory, telemetry and XID events; compute checks
  with CuPy in child processes. What a real GPU node runs.
- `cuda`: CuPy only (inventory from the CUDA runtime, no telemetry): for hosts without NVML.
- `cpu`: the host CPU as one device, NumPy compute checks: development without a GPU.
- `amdsmi`: AMD Instinct GPUs through AMD's `amdsmi` library; compute checks with CuPy's ROCm build.
- `neuron`: AWS Trainium / Inferentia through `neuron-monitor`'s JSON report stream.
- `tpu`: Google TPUs through libtpu's monitoring SDK or `tpu-info`.
- `fake`: N simulated devices of any catalog model (any vendor), with injectable faults: tests and demos.

The operator picks a pool's backend from its catalog vendor (`VENDOR_BACKENDS`); `accelpool-agent check`
without `--backend` asks `backends.detect`. A vendor backend lives in `accelpool_agent.backends.<name>` and
is imported only when chosen (its vendor library need not be installed for the others).

Backends never raise from these calls for device trouble: a dead NVML is reported through
`error`, a lost GPU through `Telemetry.lost`.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.faults import Fault
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent
from accelpool_core import catalog
from accelpool_core.protocol import AGENT_BACKENDS, VENDOR_BACKENDS

BACKENDS = AGENT_BACKENDS
"""The `--backend` choices (`accelpool_core.protocol`: the operator renders one of them per pool)."""
VENDOR_MODULES: Mapping[str, tuple[str, str]] = {
    "amdsmi": ("accelpool_agent.backends.amdsmi", "AmdSmiBackend"),
    "neuron": ("accelpool_agent.backends.neuron", "NeuronBackend"),
    "tpu": ("accelpool_agent.backends.tpu", "TpuBackend"),
}
"""Backend name → (module, class) of the non-NVIDIA vendor backends. Each class implements `Backend`,
has `name` equal to its key, and is built as `Class(sysfs_root=Path)`; its module imports the vendor's
library lazily (inside `open`), so importing the module never fails on a host without it."""


class Backend(Protocol):
    name: str
    compute_engine: str | None
    """`cuda`, `cpu` or `fake`: the engine of this backend's compute children; None when it has none."""

    @property
    def error(self) -> str | None:
        """Why the backend cannot see devices right now (e.g. NVML failed to initialise), or None."""

    def open(self) -> None:
        """Initialise; never raises for device trouble (see `error`)."""

    def inventory(self) -> list[DeviceInfo]: ...

    def telemetry(self) -> list[Telemetry]: ...

    def drain_xid_events(self) -> list[XidEvent]: ...

    def versions(self) -> DriverVersions:
        """The driver's and CUDA's versions (fields None where unknown)."""

    def infiniband(self) -> list[IbPort]:
        """The host's RDMA ports; none when the host has no /sys/class/infiniband."""

    def compute_job(
        self, device: DeviceInfo, tasks: Sequence[ComputeTask], sizes: ComputeSizes, seed: int
    ) -> ComputeJob | None:
        """A job running `tasks` on `device`, or None when this backend cannot compute."""

    def close(self) -> None: ...


class BackendError(ValueError):
    """Bad backend options (unknown backend, bad --fake-gpus); the message says what is valid."""


def device_vendor(model: str | None, backend: str) -> str:
    """The catalog vendor (`nvidia`, `amd`, `aws`, `google`) of a device: its catalog model's, else the
    backend's (`cuda` is NVIDIA's); "" for the host CPU."""
    entry = catalog.BY_NAME.get(model) if model else None
    if entry is not None:
        return entry.vendor.value
    by_backend = {backend_name: vendor for vendor, backend_name in VENDOR_BACKENDS.items()}
    return by_backend.get(backend, catalog.Vendor.NVIDIA.value if backend == "cuda" else "")


def detect_model(product_name: str) -> catalog.Accelerator | None:
    """The catalog entry for a driver product name (`NVIDIA H100 80GB HBM3`), matched as GFD does."""
    key = "-".join(product_name.split()).lower()
    for accelerator in catalog.ACCELERATORS:
        if key in (p.lower() for p in accelerator.detection.gfd_products):
            return accelerator
    return None


def create_backend(
    name: str,
    *,
    fake_gpus: str | None = None,
    faults: Mapping[int, tuple[Fault, ...]] | None = None,
    seed: int = 0,
    sysfs_root: Path = Path("/sys"),
) -> Backend:
    """Build a backend by name. `fake_gpus` and `faults` apply to the fake backend only; the others
    read the host's InfiniBand ports under `sysfs_root`."""
    if name == "fake":
        from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus

        accelerator, count = parse_fake_gpus(fake_gpus or "H100")
        return FakeBackend(accelerator, count, faults=faults or {}, seed=seed)
    if fake_gpus is not None or faults:
        raise BackendError(f"--fake-gpus and --fault need --backend fake (got --backend {name})")
    if name == "nvml":
        from accelpool_agent.backends.nvml import NvmlBackend

        return NvmlBackend(sysfs_root=sysfs_root)
    if name in VENDOR_MODULES:
        return _vendor_backend(name, sysfs_root)
    if name == "cuda":
        from accelpool_agent.backends.cuda import CudaBackend

        return CudaBackend(sysfs_root=sysfs_root)
    if name == "cpu":
        from accelpool_agent.backends.cpu import CpuBackend

        return CpuBackend(sysfs_root=sysfs_root)
    raise BackendError(f"unknown backend {name!r}; valid: {', '.join(BACKENDS)}")


def _vendor_backend(name: str, sysfs_root: Path) -> Backend:
    """Import a vendor backend's module only now (its library is in that vendor's agent image alone)."""
    module_name, class_name = VENDOR_MODULES[name]
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        raise BackendError(f"backend {name!r} is not part of this agent build (no module {module_name})") from None
    backend: Backend = getattr(module, class_name)(sysfs_root=sysfs_root)
    return backend
