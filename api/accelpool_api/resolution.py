"""A spec's accelerator resolved against the catalog, and every problem only the catalog can find.

`spec_problems` names the field path, the bad value and what would be valid: an unknown
accelerator, a memory size or form factor the model does not come in, a MIG profile or layout
the GPU does not offer, MPS beyond what old GPUs serve, Karpenter for a device AWS does not sell.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

from accelpool_api.devices import MPS_LIMIT_CAPABILITY, MPS_MAX_CLIENTS_BEFORE_7_5, AcceleratorRequest, MigSpec, MpsSpec
from accelpool_api.health import ANY_VENDOR_BACKENDS
from accelpool_api.names import GROUP
from accelpool_api.problems import Problem
from accelpool_core import catalog
from accelpool_core.protocol import VENDOR_BACKENDS

if TYPE_CHECKING:
    from accelpool_api.spec import ComputePoolSpec


@dataclass(frozen=True)
class ResolvedAccelerator:
    """A pool's accelerator resolved against the catalog.

    `entry` gives the peaks and the MIG table; `matches` are the catalog entries whose nodes
    may be members (same model and memory; narrowed to one form factor when asked for).
    """

    entry: catalog.Accelerator
    count: int | None
    matches: tuple[catalog.Accelerator, ...]

    @property
    def display(self) -> str:
        return f"{self.entry.name} x{self.count}" if self.count else self.entry.name


def resolve_accelerator(request: AcceleratorRequest) -> tuple[ResolvedAccelerator | None, list[Problem]]:
    """The catalog entry `request` names, or None and the problems that say why there is none."""
    path = "spec.accelerator"
    try:
        entry = catalog.lookup(request.name)
    except catalog.UnknownAcceleratorError as error:
        return None, [
            Problem(f"{path}.name" if request.memory or request.form_factor else path, request.name, str(error))
        ]
    memory = request.memory_gb
    form_factor = catalog.FormFactor(request.form_factor) if request.form_factor else None
    if memory is not None and memory != entry.memory_gb:
        candidates = catalog.find(entry.model, memory)
        if not candidates:
            sizes = sorted({a.memory_gb for a in catalog.find(entry.model)})
            valid = ", ".join(f"{s}GB" for s in sizes)
            return None, [
                Problem(
                    f"{path}.memory",
                    request.memory,
                    f"{entry.model} comes with {valid}, not {request.memory}",
                )
            ]
        entry = candidates[0]
    if form_factor is not None and form_factor != entry.form_factor:
        candidates = catalog.find(entry.model, entry.memory_gb, form_factor)
        if not candidates and memory is None:
            # Without a memory size the form factor picks the variant: {name: H100, formFactor: NVL} is the
            # 94 GB H100 NVL, as Skyward's H100(form_factor="NVL") is.
            candidates = catalog.find(entry.model, None, form_factor)
            sizes = sorted({a.memory_gb for a in candidates})
            if len(sizes) > 1:
                valid = ", ".join(f"{s}GB" for s in sizes)
                return None, [
                    Problem(
                        f"{path}.memory",
                        None,
                        f"{entry.model} {form_factor.value} comes with {valid}: say which with memory",
                    )
                ]
        if not candidates:
            sizes_known = catalog.find(entry.model, entry.memory_gb if memory is not None else None)
            valid = ", ".join(sorted({a.form_factor.value for a in sizes_known}))
            size = f" {entry.memory_gb}GB" if memory is not None else ""
            return None, [
                Problem(
                    f"{path}.formFactor",
                    form_factor.value,
                    f"{entry.model}{size} comes as {valid}, not {form_factor.value}",
                )
            ]
        entry = candidates[0]
    if form_factor is not None:
        matches = tuple(catalog.find(entry.model, entry.memory_gb, form_factor))
    else:
        matches = tuple(catalog.variants(entry))
    return ResolvedAccelerator(entry=entry, count=request.count, matches=matches), []


def spec_problems(spec: ComputePoolSpec) -> list[Problem]:
    """Every catalog-dependent problem of a structurally valid spec, each with its field path."""
    resolved, problems = resolve_accelerator(spec.accelerator)
    if resolved is None:
        return problems
    entry = resolved.entry
    if spec.mig is not None:
        problems += _mig_problems(spec.mig, entry)
    if spec.sharing is not None and entry.vendor != catalog.Vendor.NVIDIA:
        problems.append(
            Problem(
                f"spec.sharing.{spec.sharing.mode}",
                spec.sharing.replicas,
                f"GPU sharing is a feature of NVIDIA's device plugin; {entry.name} is a {entry.vendor.value} device",
            )
        )
    elif spec.sharing is not None and spec.sharing.mps is not None:
        problems += _mps_problems(spec.sharing.mps, resolved)
    if spec.provisioner.type == "karpenter" and not entry.detection.karpenter_names:
        problems.append(
            Problem(
                "spec.provisioner.type",
                "karpenter",
                f"Karpenter (AWS) offers no {entry.name}; use provisioner type static",
            )
        )
    problems += _backend_problems(spec.health.backend, entry)
    if entry.vendor != catalog.Vendor.NVIDIA and (spec.allocation == "DRA" or spec.nvlink is not None):
        field, value = ("spec.allocation", "DRA") if spec.allocation == "DRA" else ("spec.nvlink", "{...}")
        problems.append(
            Problem(
                field,
                value,
                f"{'allocation DRA' if spec.allocation == 'DRA' else 'nvlink'} is for NVIDIA GPUs (NVIDIA's DRA "
                f"driver, GPU Feature Discovery's nvidia.com/gpu.clique); "
                f"{entry.name} is a {entry.vendor.value} device",
            )
        )
    for key in spec.node_selector:
        if key.startswith(f"{GROUP}/"):
            problems.append(
                Problem(
                    f"spec.nodeSelector[{key}]",
                    key,
                    f"labels under {GROUP}/ are set by the operator and cannot be selected on",
                )
            )
    return problems


def _backend_problems(backend: str | None, entry: catalog.Accelerator) -> list[Problem]:
    """A pool's own agent backend must check its vendor's devices (or none: cpu, fake)."""
    vendor = entry.vendor.value
    nvidia_only = ["cuda"] if entry.vendor is catalog.Vendor.NVIDIA else []
    valid = [VENDOR_BACKENDS[vendor], *nvidia_only, *ANY_VENDOR_BACKENDS]
    if backend is None or backend in valid:
        return []
    return [
        Problem(
            "spec.health.backend",
            backend,
            f"the {backend} backend cannot check {entry.name} (vendor {vendor}); valid: {', '.join(valid)}",
        )
    ]


def _mps_problems(mps: MpsSpec, resolved: ResolvedAccelerator) -> list[Problem]:
    """MPS serves 16 clients per GPU below compute capability 7.5 (the 48 above it is in the schema)."""
    old = [a for a in resolved.matches if a.compute_capability and a.compute_capability < MPS_LIMIT_CAPABILITY]
    if old and mps.replicas > MPS_MAX_CLIENTS_BEFORE_7_5:
        gpu = old[0]
        return [
            Problem(
                "spec.sharing.mps.replicas",
                mps.replicas,
                f"MPS on {gpu.name} (compute capability {gpu.compute_capability_text}) serves at most "
                f"{MPS_MAX_CLIENTS_BEFORE_7_5} clients per GPU, got {mps.replicas}; NVIDIA's device plugin "
                f"refuses more (use at most {MPS_MAX_CLIENTS_BEFORE_7_5}, or timeSlicing)",
            )
        ]
    return []


def _mig_problems(mig: MigSpec, entry: catalog.Accelerator) -> list[Problem]:
    if not entry.mig_capable:
        capable = ", ".join(a.name for a in catalog.ACCELERATORS if a.mig_capable)
        return [
            Problem(
                "spec.mig",
                mig.profile or mig.profiles,
                f"{entry.name} does not support MIG; MIG-capable: {capable}",
            )
        ]
    table = entry.mig_table or entry.name
    valid = ", ".join(p.name for p in entry.mig_profiles)
    if mig.profile is not None:
        if entry.mig_profile(mig.profile) is None:
            return [
                Problem(
                    "spec.mig.profile",
                    mig.profile,
                    f"mig profile {mig.profile} is not offered by {table}; valid: {valid}",
                )
            ]
        return []
    assert mig.profiles is not None
    problems: list[Problem] = []
    profiles: list[catalog.MigProfile] = []
    for index, name in enumerate(mig.profiles):
        profile = entry.mig_profile(name)
        if profile is None:
            problems.append(
                Problem(
                    f"spec.mig.profiles[{index}]",
                    name,
                    f"mig profile {name} is not offered by {table}; valid: {valid}",
                )
            )
        else:
            profiles.append(profile)
    if problems:
        return problems
    for name, count in Counter(mig.profiles).items():
        profile = entry.mig_profile(name)
        assert profile is not None
        if count > profile.max_instances:
            problems.append(
                Problem(
                    "spec.mig.profiles",
                    mig.profiles,
                    f"{table} fits at most {profile.max_instances} x {name} per GPU, got {count}",
                )
            )
    compute = sum(p.compute_slices for p in profiles)
    memory = sum(p.memory_slices for p in profiles)
    if compute > entry.mig_compute_slices or memory > entry.mig_memory_slices:
        problems.append(
            Problem(
                "spec.mig.profiles",
                mig.profiles,
                f"layout does not fit one {table}: needs {compute} of {entry.mig_compute_slices} compute "
                f"and {memory} of {entry.mig_memory_slices} memory slices",
            )
        )
    return problems


def max_instances_that_fit(entry: catalog.Accelerator, profile: catalog.MigProfile) -> int:
    """How many instances of one profile fill one of `entry`'s GPUs: its maximum and the GPU's own slice budgets."""
    return entry.mig_instances_that_fit(profile)
