"""Device backends behind one small interface, and the registry that lists, picks and builds them.

A backend answers which devices are there (`inventory`), how are they now (`telemetry`), which
XID errors happened since the last call (`drain_xid_events`), how to run compute checks on one
of them (`compute_job`, a picklable job for a child process), which driver runs them
(`versions`), and what the host's InfiniBand / RoCE ports say (`infiniband`: sysfs, read by
`backends.infiniband` for the real backends, simulated by the fake one).

The registry works as node_exporter's collector registry (collector/collector.go `registerCollector`:
factories kept by name): each backend module `accelpool_agent.backends.<name>` registers itself with a
module-level `REGISTRATION` (a `Registration`) saying its name, its `--backend` help, its factory and the
options it takes, what it needs on the host (`Need`) and how it is detected (`Detector`). The names are
`BACKENDS`, the protocol's (`accelpool_core.protocol.AGENT_BACKENDS`: the operator renders one per pool,
from its catalog vendor through `VENDOR_BACKENDS`). Everything that picks a backend goes through the
registry: `create_backend` by name (`--backend`, the SDK), `backends.detect.detect_backend` by what the
host shows, `backend_choices` for `--backend`'s help and errors (every name, and why one cannot run
here). A backend's module is imported only when it is built, detected or listed, never when the CLI
starts (its compute children re-import it), and it imports its vendor's library only inside `open`, so
every module imports on every host; an agent build without one says so (`BackendError`).

Backends never raise from these calls for device trouble: a dead NVML is reported through
`error`, a lost GPU through `Telemetry.lost`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from accelpool_agent.backends.probes import Probes, host_probes
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.faults import Fault
from accelpool_agent.model import DeviceInfo, DriverVersions, IbPort, Telemetry, XidEvent
from accelpool_core import catalog
from accelpool_core.protocol import AGENT_BACKENDS, VENDOR_BACKENDS

BACKENDS = AGENT_BACKENDS
"""The `--backend` choices, in registry order (`accelpool_core.protocol`: the operator renders one of them per
pool); backend `name` registers itself in the module `accelpool_agent.backends.<name>`."""


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


@dataclass(frozen=True)
class Need:
    """Something a backend needs on the host to see devices, met when any one of its Python `modules`
    imports, its `commands` is on PATH or its shared `libraries` loads. Unmet, the backend is still built (it
    reports why through `error` and retries); `--backend`'s help and errors say it is missing."""

    what: str
    """How help names it: `the amdsmi module`."""
    modules: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()

    def met(self, probes: Probes) -> bool:
        return (
            any(probes.module_importable(name) for name in self.modules)
            or any(probes.on_path(name) for name in self.commands)
            or any(probes.library_loads(name) for name in self.libraries)
        )


@dataclass(frozen=True)
class Detector:
    """How `check` without `--backend` recognises a backend's host (`backends.detect`)."""

    devices: str
    """Whose devices it finds, as the CPU fallback's evidence names them: `NVIDIA`."""
    evidence: Callable[[Probes], str | None]
    """What on the host shows them (`/dev/kfd exists`), or None (`backends.probes`)."""


@dataclass(frozen=True)
class Registration:
    """A backend as its module registers it (`REGISTRATION`)."""

    name: str
    """The `--backend` name; the module is `accelpool_agent.backends.<name>`."""
    summary: str
    """What `--backend`'s help says of it: `NVIDIA (NVML + CuPy)`."""
    factory: Callable[..., Backend]
    """Builds the backend from the options named in `takes`, passed as keywords."""
    takes: tuple[str, ...] = ("sysfs_root",)
    """Which of `create_backend`'s options the factory takes: the host's sysfs root, or the fake's
    `fake_gpus`, `faults` and `seed`."""
    needs: tuple[Need, ...] = ()
    detector: Detector | None = None
    """None: never detected, only chosen by name."""

    def unavailable(self, probes: Probes) -> str | None:
        """Why this backend would see no devices on the probed host (what it needs and lacks), or None."""
        missing = [need.what for need in self.needs if not need.met(probes)]
        return f"needs {' and '.join(missing)}" if missing else None


def registration(name: str) -> Registration:
    """The registration of backend `name`, importing its module (not its vendor's library).

    Raises BackendError for a name no backend has (listing the backends and which cannot run on this host),
    or a backend whose module this build lacks."""
    if name not in BACKENDS:
        raise BackendError(f"unknown backend {name!r}; {backend_choices(host_probes())}")
    found = _load(name)
    if isinstance(found, str):
        raise BackendError(f"backend {name!r} is {found}")
    return found


def registrations() -> list[Registration]:
    """Every backend this build has, in `BACKENDS` order."""
    return [found for found in map(_load, BACKENDS) if isinstance(found, Registration)]


def backend_choices(probes: Probes) -> str:
    """`valid: nvml, amdsmi, ...`: every backend name, then why each that cannot run on the probed host
    cannot (not part of this build, or what it needs and lacks)."""
    valid = f"valid: {', '.join(BACKENDS)}"
    why = {name: _unavailable(name, probes) for name in BACKENDS}
    lacking = [f"{name}: {reason}" for name, reason in why.items() if reason is not None]
    return f"{valid} (unavailable here: {'; '.join(lacking)})" if lacking else valid


def backend_help(probes: Probes) -> str:
    """`--backend`'s help: each backend's summary, marked where it cannot run on the probed host."""
    parts = []
    for name in BACKENDS:
        found = _load(name)
        text = f"{name}: {found.summary}" if isinstance(found, Registration) else name
        reason = found.unavailable(probes) if isinstance(found, Registration) else found
        parts.append(text + (f" [unavailable here: {reason}]" if reason else ""))
    return "; ".join(parts)


def _load(name: str) -> Registration | str:
    """The registration in backend `name`'s module, or why this build has none."""
    module_name = f"{__name__}.{name}"
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise
        return f"not part of this agent build (no module {module_name})"
    registered: Registration = module.REGISTRATION
    return registered


def _unavailable(name: str, probes: Probes) -> str | None:
    found = _load(name)
    return found if isinstance(found, str) else found.unavailable(probes)


def create_backend(
    name: str,
    *,
    fake_gpus: str | None = None,
    faults: Mapping[int, tuple[Fault, ...]] | None = None,
    seed: int = 0,
    sysfs_root: Path = Path("/sys"),
) -> Backend:
    """Build a backend by name through its registration. `fake_gpus` and `faults` apply to the fake
    backend only; the others read the host's InfiniBand ports under `sysfs_root`."""
    registered = registration(name)
    options = {"fake_gpus": fake_gpus, "faults": faults, "seed": seed, "sysfs_root": sysfs_root}
    if (fake_gpus is not None or faults) and "fake_gpus" not in registered.takes:
        raise BackendError(f"--fake-gpus and --fault need --backend fake (got --backend {name})")
    return registered.factory(**{option: options[option] for option in registered.takes})


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
