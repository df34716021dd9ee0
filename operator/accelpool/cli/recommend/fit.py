"""Where an estimate fits: catalog accelerators, counts, MIG slices and time-sliced shares, ranked.

First, what the part supports: an accelerator is left out (`Unfit`, reason `unsupported`) when
the catalog gives it no peak in any dtype the request's matmuls can run in (`Precision.compute`:
bf16 leaves out T4 and V100, fp8 every part before Hopper/Ada and MI300X; the catalog's `Peaks`
is the one statement of dtype support), or when the workload trains (LoRA, full fine-tuning,
pre-training) and the catalog marks the part inference-only (Inferentia2).

For each accelerator that remains, the smallest placement that holds the workload:

- **whole devices**: 1, 2, 4, … up to the node's device count (tensor parallelism within a node),
  then whole nodes (2, 4, … up to `MAX_NODES`): training across nodes shards weights, gradients and
  optimizer states over every device (ZeRO-3/FSDP). The KV cache is divided among the devices too;
  tensor parallelism beyond the model's KV heads replicates them in practice (vLLM), not modelled.
  The node's count is the largest node of the catalog's instance types, else the catalog's usual node.
- **a MIG slice** (MIG-capable GPUs): the smallest profile whose memory (its name's `…gb`) holds the
  workload on one instance; a process sees one MIG device, so only one-device placements.
- **a time-sliced share**, on NVIDIA GPUs where no MIG slice holds it (a MIG slice isolates memory
  and faults; NVIDIA's device plugin time-slices, other vendors' plugins do not): for a workload
  that needs at most half a device, the most replicas (8, 4 or 2) one GPU can be shared by with
  every replica's need held at once (time-slicing isolates no memory: the replicas' needs add up).

A unit holds a placement when its share (`Estimate.bytes_per_device`) is at most `USABLE` of its
memory (the catalog's nominal size, taken as GiB as nvidia-smi reports it).

Ranking: first the fewest nodes (one node before many), isolated units (whole devices, MIG)
before time-sliced shares (which isolate neither memory nor faults), then the tightest memory fit
(least accelerator memory taken: devices x unit memory), then speed. The speed estimate and its
basis are shown with each placement:

- inference is memory-bandwidth bound at decode: every step reads the weights and the batch's KV
  cache once, so tokens/s ≈ batch x bandwidth / bytes per step (a ceiling: no efficiency factor);
- training is compute bound: tokens/s ≈ devices x peak TFLOPS x MFU / FLOPs per token (6P; 4P for
  LoRA; P the active parameters), the peak in the first of the request's matmul dtypes the part
  has, MFU 0.4 by default (large runs report 0.35-0.55).

A MIG slice gets the GPU's bandwidth in proportion to its memory slices and its peak in proportion
to its compute slices; a time-sliced share a 1/k turn of both.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from accelpool.cli.recommend.memory import Estimate, GiB, Workload
from accelpool_core import catalog

USABLE = 0.9
MAX_NODES = 64
SHARES = (8, 4, 2)
DEFAULT_MFU = 0.4


class Kind(enum.StrEnum):
    DEVICES = "devices"
    MIG = "mig"
    SHARED = "time-sliced"


@dataclass(frozen=True)
class Placement:
    """One way to hold the workload on one accelerator model."""

    accelerator: catalog.Accelerator
    kind: Kind
    devices: int
    """Whole devices (1 for a MIG slice or a share)."""
    nodes: int
    unit_bytes: float
    """Memory of one unit: a device, a MIG slice, or a device's 1/shares."""
    need_bytes: float
    """What the workload needs on each unit."""
    mig_profile: str | None = None
    shares: int = 1
    tokens_per_second: float = 0.0
    basis: str = ""
    parallelism: str = "TP"
    """How several devices share the work: TP (tensor parallel, inference) or FSDP (sharded data parallel)."""

    @property
    def allocated_bytes(self) -> float:
        """Accelerator memory the placement takes: the ranking's first key."""
        return self.devices * self.unit_bytes

    @property
    def label(self) -> str:
        if self.kind is Kind.MIG:
            return f"1 x MIG {self.mig_profile}"
        if self.kind is Kind.SHARED:
            return f"1/{self.shares} of 1 (time-sliced x{self.shares})"
        if self.nodes > 1:
            return f"{self.devices} ({self.nodes} nodes x {self.devices // self.nodes})"
        return f"{self.devices}" + (f" ({self.parallelism}={self.devices})" if self.devices > 1 else "")


class Reason(enum.StrEnum):
    MEMORY = "memory"
    """Nothing up to the most nodes tried holds it."""
    UNSUPPORTED = "unsupported"
    """The part lacks the dtype, or is inference-only and the workload trains."""


@dataclass(frozen=True)
class Unfit:
    accelerator: catalog.Accelerator
    why: str
    reason: Reason = Reason.MEMORY


def unsupported(estimate: Estimate, accelerator: catalog.Accelerator) -> str | None:
    """Why the part cannot run the request at all (see the module docstring), or None."""
    request = estimate.request
    if request.workload is not Workload.INFERENCE and not accelerator.training:
        return f"inference only: no {request.workload.value} (training) workloads"
    if not any(accelerator.supports(d) for d in request.precision.compute):
        has = ", ".join(d.value for d in accelerator.peaks.dtypes)
        wanted = " or ".join(request.precision.compute)
        return f"no {wanted} mode; computes in {has}"
    return None


def node_devices(accelerator: catalog.Accelerator) -> int:
    """Devices on the largest node the catalog knows for this accelerator."""
    return max(accelerator.detection.instance_types.values(), default=accelerator.default_count)


def mig_memory_bytes(profile: str) -> float:
    """`3g.40gb` → 40 GiB: the memory a profile's name promises."""
    match = re.search(r"\.(\d+)gb", profile)
    return int(match.group(1)) * GiB if match else 0.0


def device_counts(per_node: int) -> list[tuple[int, int]]:
    """(devices, nodes) to try in order: powers of two within a node, then whole nodes by powers of two."""
    counts = []
    n = 1
    while n <= per_node:
        counts.append((n, 1))
        n *= 2
    nodes = 2
    while nodes <= MAX_NODES:
        counts.append((per_node * nodes, nodes))
        nodes *= 2
    return counts


def fits(need: float, unit: float) -> bool:
    return need <= USABLE * unit


def whole_devices(estimate: Estimate, accelerator: catalog.Accelerator, mfu: float) -> Placement | None:
    """The fewest devices (see `device_counts`) that hold the workload, or None."""
    unit = accelerator.memory_gb * GiB
    for devices, nodes in device_counts(node_devices(accelerator)):
        need = estimate.bytes_per_device(devices)
        if fits(need, unit):
            speed, basis = throughput(estimate, accelerator, devices, 1.0, 1.0, mfu)
            parallelism = "TP" if estimate.request.workload is Workload.INFERENCE else "FSDP"
            return Placement(accelerator, Kind.DEVICES, devices, nodes, unit, need, None, 1, speed, basis, parallelism)
    return None


def mig_slice(estimate: Estimate, accelerator: catalog.Accelerator, mfu: float) -> Placement | None:
    """The smallest MIG profile of this GPU that holds the workload on one instance, or None."""
    need = estimate.bytes_per_device(1)
    candidates = [
        p
        for p in accelerator.mig_profiles
        if "+me" not in p.name
        and p.memory_slices < accelerator.mig_memory_slices
        and fits(need, mig_memory_bytes(p.name))
    ]
    if not candidates:
        return None
    best = min(candidates, key=lambda p: (mig_memory_bytes(p.name), p.compute_slices))
    bandwidth = best.memory_slices / accelerator.mig_memory_slices
    compute = best.compute_slices / accelerator.mig_compute_slices
    speed, basis = throughput(estimate, accelerator, 1, bandwidth, compute, mfu)
    return Placement(accelerator, Kind.MIG, 1, 1, mig_memory_bytes(best.name), need, best.name, 1, speed, basis)


def time_sliced(estimate: Estimate, accelerator: catalog.Accelerator, mfu: float) -> Placement | None:
    """The most shares (8, 4, 2) of one NVIDIA device whose replicas all fit at once, or None."""
    if accelerator.vendor is not catalog.Vendor.NVIDIA:
        return None
    need = estimate.bytes_per_device(1)
    device = accelerator.memory_gb * GiB
    for shares in SHARES:
        if fits(need * shares, device):
            speed, basis = throughput(estimate, accelerator, 1, 1 / shares, 1 / shares, mfu)
            return Placement(accelerator, Kind.SHARED, 1, 1, device / shares, need, None, shares, speed, basis)
    return None


def throughput(
    estimate: Estimate,
    accelerator: catalog.Accelerator,
    devices: int,
    bandwidth_share: float,
    compute_share: float,
    mfu: float,
) -> tuple[float, str]:
    """Tokens/s and how it was reckoned (see the module docstring)."""
    request = estimate.request
    if request.workload is Workload.INFERENCE:
        bandwidth = accelerator.bandwidth_gbps * 1e9 * devices * bandwidth_share
        tokens = request.batch * bandwidth / estimate.bytes_per_step
        basis = f"decode ≤ {request.batch} x {bandwidth / 1e9:,.0f} GB/s ÷ {estimate.bytes_per_step / 1e9:,.1f} GB/step"
        return tokens, basis
    dtype, peak = peak_tflops(accelerator, request.precision.compute)
    flops = peak * 1e12 * devices * compute_share * mfu
    per_device = f"{peak * compute_share:g} TFLOPS {dtype}"
    basis = f"{devices} x {per_device} x MFU {mfu:g} ÷ {estimate.flops_per_token / 1e9:,.0f} GFLOP/token"
    return flops / estimate.flops_per_token, basis


def peak_tflops(accelerator: catalog.Accelerator, dtypes: Sequence[str]) -> tuple[str, float]:
    """The catalog's dense peak in the first of `dtypes` the part has; ValueError where it has none
    (`placements` leaves such parts out first: see `unsupported`)."""
    for name in dtypes:
        value = accelerator.peaks.get(name)
        if value is not None:
            return name, value
    raise ValueError(f"{accelerator.name} has no peak in {', '.join(dtypes)}")


def placements(
    estimate: Estimate, accelerators: Iterable[catalog.Accelerator] = catalog.ACCELERATORS, mfu: float = DEFAULT_MFU
) -> tuple[list[Placement], list[Unfit]]:
    """Every accelerator's fitting placements, ranked, and the accelerators left out or where nothing fits."""
    found: list[Placement] = []
    unfit: list[Unfit] = []
    for accelerator in accelerators:
        why = unsupported(estimate, accelerator)
        if why is not None:
            unfit.append(Unfit(accelerator, why, Reason.UNSUPPORTED))
            continue
        mig = mig_slice(estimate, accelerator, mfu)
        shared = time_sliced(estimate, accelerator, mfu) if mig is None else None
        options = [p for p in (mig, shared, whole_devices(estimate, accelerator, mfu)) if p is not None]
        if options:
            found += options
        else:
            most = device_counts(node_devices(accelerator))[-1][0]
            need = estimate.bytes_per_device(most) / GiB
            unfit.append(
                Unfit(
                    accelerator,
                    f"needs {need:,.1f} GiB per device even on {most} devices ({accelerator.memory_gb} GiB each)",
                )
            )
    return rank(found), unfit


def rank(found: Sequence[Placement]) -> list[Placement]:
    """Fewest nodes, isolated before shared, tightest memory fit, faster, then by name."""
    return sorted(
        found,
        key=lambda p: (p.nodes, p.kind is Kind.SHARED, p.allocated_bytes, -p.tokens_per_second, p.accelerator.name),
    )
