"""The catalog's vocabulary: vendors, form factors, dtypes, MIG profiles, how a node shows a device,
peak figures, and `Accelerator` itself with its MIG arithmetic. No entries here (see `data`)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Vendor(enum.StrEnum):
    NVIDIA = "nvidia"
    AMD = "amd"
    AWS = "aws"
    GOOGLE = "google"


class FormFactor(enum.StrEnum):
    SXM = "SXM"
    PCIE = "PCIe"
    NVL = "NVL"
    SUPERCHIP = "Superchip"
    OAM = "OAM"
    ASIC = "ASIC"


class Dtype(enum.StrEnum):
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"


@dataclass(frozen=True)
class MigProfile:
    """One MIG GPU-instance profile: `3g.40gb` takes 3 of 7 compute and 4 of 8 memory slices."""

    name: str
    compute_slices: int
    memory_slices: int
    max_instances: int

    @property
    def resource(self) -> str:
        return mig_resource(self.name)


def mig_name(profile: str) -> str:
    """A MIG profile as the device plugin and GFD spell it: `+` becomes `.` (`1g.10gb+me` → `1g.10gb.me`).

    NVIDIA/k8s-device-plugin `internal/rm/rm.go` `AddDefaultResourcesToConfig`
    (`strings.ReplaceAll("mig-"+p.String(), "+", ".")`) and `internal/resource/nvml-mig-device.go`
    `GetName`. mig-parted's own config keeps `+me`.
    """
    return profile.replace("+", ".")


def mig_resource(profile: str) -> str:
    """The extended resource of a MIG profile under the mixed strategy: `nvidia.com/mig-1g.10gb.me`."""
    return f"nvidia.com/mig-{mig_name(profile)}"


@dataclass(frozen=True)
class Detection:
    """How nodes advertise this accelerator. Values are compared case-insensitively."""

    gfd_products: tuple[str, ...] = ()
    """`nvidia.com/gpu.product` values (GFD: NVML name, spaces → '-')."""
    gke_accelerators: tuple[str, ...] = ()
    """`cloud.google.com/gke-accelerator` or `cloud.google.com/gke-tpu-accelerator` values."""
    karpenter_names: tuple[str, ...] = ()
    """`karpenter.k8s.aws/instance-gpu-name` or `instance-accelerator-name` values."""
    karpenter_memory_mib: tuple[int, int] | None = None
    """Inclusive range of `karpenter.k8s.aws/instance-gpu-memory` that means this memory variant."""
    amd_products: tuple[str, ...] = ()
    """`amd.com/gpu.product-name` values."""
    instance_types: dict[str, int] = field(default_factory=dict)
    """`node.kubernetes.io/instance-type` → accelerators per node."""


@dataclass(frozen=True)
class Peaks:
    """Dense (no sparsity) peak TFLOPS per dtype; None where the part has no such mode.

    The catalog's only statement of dtype support: `accelpool recommend` leaves a part out for a
    dtype it has no peak for, and the agent's matmul check measures only the dtypes given here.
    """

    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None
    fp8: float | None

    def get(self, dtype: Dtype | str) -> float | None:
        value: float | None = getattr(self, Dtype(dtype).value)
        return value

    @property
    def dtypes(self) -> tuple[Dtype, ...]:
        """The dtypes the part computes in: those with a peak (the catalog's one statement of dtype support)."""
        return tuple(d for d in Dtype if self.get(d) is not None)


@dataclass(frozen=True)
class Accelerator:
    """One accelerator SKU (model + memory + form factor), described per unit a pod requests.

    The unit is what `resource` counts: one GPU, one Neuron device, one TPU chip, and on AMD MI250X
    one GCD (the device plugin advertises each of the package's two dies as one `amd.com/gpu`):
    memory, peaks, bandwidth and power are the unit's (`units_per_package` says how many a package holds).
    """

    name: str
    """Canonical name, e.g. `H100-80GB-SXM`."""
    model: str
    """Model family shared by memory and form-factor variants, e.g. `H100`."""
    vendor: Vendor
    memory_gb: int
    form_factor: FormFactor
    peaks: Peaks
    bandwidth_gbps: float
    """Memory bandwidth in GB/s (10^9 bytes per second)."""
    tdp_watts: int
    resource: str
    """Kubernetes extended resource a pod requests for one device."""
    detection: Detection
    aliases: tuple[str, ...] = ()
    mig_profiles: tuple[MigProfile, ...] = ()
    mig_table: str | None = None
    """The MIG table's name in NVIDIA's docs (`H100-80GB`), shown in errors."""
    mig_compute_slices: int = 0
    """Compute slices one GPU divides into under MIG: 7 (A100/H100/H200/B200 class), 4 on A30; 0 without MIG."""
    mig_memory_slices: int = 0
    """Memory slices one GPU divides into under MIG: 8 (A100/H100/H200/B200 class), 4 on A30; 0 without MIG."""
    compute_capability: tuple[int, int] | None = None
    """CUDA compute capability (major, minor) of NVIDIA GPUs [cc]; None for other vendors."""
    default_count: int = 8
    """Devices on the usual node of this SKU (used by the demo and the fake backend)."""
    units_per_package: int = 1
    """Units (`resource` devices) per physical package: 2 on MI250X (two GCDs per OAM), 1 elsewhere."""
    training: bool = True
    """False for parts the vendor offers for inference only (Inferentia2): no training or fine-tuning."""
    source: str = ""
    """Where the numbers come from (see the module docstring)."""

    @property
    def mig_capable(self) -> bool:
        return bool(self.mig_profiles)

    def supports(self, dtype: Dtype | str) -> bool:
        """Whether the part computes in `dtype`: it has a peak for it (`Peaks.dtypes`)."""
        return self.peaks.get(dtype) is not None

    def mig_profile(self, name: str) -> MigProfile | None:
        for profile in self.mig_profiles:
            if profile.name == name:
                return profile
        return None

    def mig_instances_that_fit(self, profile: MigProfile) -> int:
        """How many instances of one profile fill one of these GPUs: its maximum and both slice budgets."""
        return min(
            profile.max_instances,
            self.mig_compute_slices // profile.compute_slices,
            self.mig_memory_slices // profile.memory_slices,
        )

    @property
    def compute_capability_text(self) -> str | None:
        """`9.0`, as NVIDIA writes it; None for other vendors."""
        return None if self.compute_capability is None else "{}.{}".format(*self.compute_capability)

    def __post_init__(self) -> None:
        if self.mig_profiles and not (self.mig_compute_slices and self.mig_memory_slices):
            raise AssertionError(f"{self.name}: a MIG table needs the GPU's compute and memory slice budgets")
        for profile in self.mig_profiles:
            if self.mig_instances_that_fit(profile) < 1:
                raise AssertionError(f"{self.name}: MIG profile {profile.name} does not fit the GPU's slices")
