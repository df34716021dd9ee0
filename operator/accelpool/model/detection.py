"""Which accelerator a node has, read from whatever labelled it: GFD, GKE, Karpenter, AMD, instance type.

`detect(labels, capacity)` returns the catalog entry (with its memory variant and form factor),
the number of devices and where that came from, or None for a node without accelerators.
Sources, most trusted first (the first that names a catalog entry wins; a later one may still
supply a count the first lacks):

1. NVIDIA GPU Feature Discovery: `nvidia.com/gpu.product` (the `-SHARED` suffix of shared GPUs,
   the `-MIG-<profile>` suffix of the single MIG strategy, with `+` written `.` as in `-MIG-1g.10gb.me`,
   and `-MIG-INVALID` are understood), `nvidia.com/gpu.count` (MIG devices under the single strategy:
   the GPUs are recovered with the GPU's own slice budgets), `nvidia.com/gpu.memory` (MiB, picks the
   memory variant when the product name leaves it open).
2. AMD node labeller: `amd.com/gpu.product-name` or `beta.amd.com/gpu.product-name`.
3. GKE: `cloud.google.com/gke-accelerator` (+ `-count`), `cloud.google.com/gke-tpu-accelerator`.
4. Karpenter on AWS: `karpenter.k8s.aws/instance-gpu-name` (+ `-count`, `-memory` for the variant),
   `karpenter.k8s.aws/instance-accelerator-name` (+ `-count`) for Neuron devices.
5. `node.kubernetes.io/instance-type` (and the legacy beta label) from the catalog's instance table.

Pure: lookup tables are built once from `accelpool_core.catalog` at import. Called when the operator
indexes a Node and by `accelpool plan`.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass

from accelpool_core import catalog

GFD_PRODUCT = "nvidia.com/gpu.product"
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"
GKE_ACCELERATOR = "cloud.google.com/gke-accelerator"
GKE_ACCELERATOR_COUNT = "cloud.google.com/gke-accelerator-count"
GKE_PARTITION_SIZE = "cloud.google.com/gke-gpu-partition-size"
GKE_TPU_ACCELERATOR = "cloud.google.com/gke-tpu-accelerator"
KARPENTER_GPU_NAME = "karpenter.k8s.aws/instance-gpu-name"
KARPENTER_GPU_COUNT = "karpenter.k8s.aws/instance-gpu-count"
KARPENTER_GPU_MEMORY = "karpenter.k8s.aws/instance-gpu-memory"
KARPENTER_ACCELERATOR_NAME = "karpenter.k8s.aws/instance-accelerator-name"
KARPENTER_ACCELERATOR_COUNT = "karpenter.k8s.aws/instance-accelerator-count"
AMD_PRODUCT_LABELS = ("amd.com/gpu.product-name", "beta.amd.com/gpu.product-name")
AMD_COUNT_LABELS = ("amd.com/gpu.count", "beta.amd.com/gpu.count")
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type")

_SHARED_SUFFIX = "-SHARED"
_MIG_SUFFIX = re.compile(r"-MIG-([1-7]g\.[0-9]+gb)([.+]me)?$", re.IGNORECASE)
"""GFD writes the profile as the device plugin names it, `+` replaced by `.` (`-MIG-1g.10gb.me`:
NVIDIA/k8s-device-plugin `internal/resource/nvml-mig-device.go` `GetName`; its `sanitise` would drop a
`+` anyway). `+me` is accepted too; `Detected.mig_profile` spells it as the catalog does (`1g.10gb+me`)."""
_MIG_INVALID_SUFFIX = "-MIG-INVALID"
"""The single strategy meeting a layout it cannot serve: `<model>-MIG-INVALID`, count 0, memory 0
(NVIDIA/k8s-device-plugin `internal/lm/mig-strategy.go` `newInvalidMigStrategyLabeler`)."""
_TPU_CHIPS = re.compile(r"-(\d+)t$")


@dataclass(frozen=True)
class Detected:
    """What a node carries: the catalog entry, devices per node, and the evidence."""

    accelerator: catalog.Accelerator
    count: int
    """Physical devices on the node; 0 when no source says."""
    source: str
    """gfd, amd, gke, gke-tpu, karpenter or instance-type: the label family that named the model."""
    memory_mib: int | None = None
    """Per-device memory as reported (whole GPUs only; None under a MIG single strategy)."""
    mig_profile: str | None = None
    """The profile of the `-MIG-<profile>` product suffix (GFD, single strategy; catalog spelling, `+me`)
    or GKE partition size."""
    shared: bool = False
    """GFD reports `-SHARED` (time-slicing or MPS with renameByDefault=false)."""
    mig_devices: int | None = None
    """Under GFD's single strategy: the MIG devices the node advertises as `nvidia.com/gpu` (GFD's count)."""
    mig_invalid: bool = False
    """GFD reports `<model>-MIG-INVALID`: the single strategy met a MIG layout it cannot serve (mixed
    profiles, or MIG enabled without instances). The model is known; `count` is 0 unless the instance
    type says, and the node offers nothing until its layout is fixed."""


def _table(pick: str) -> dict[str, tuple[catalog.Accelerator, ...]]:
    table: dict[str, list[catalog.Accelerator]] = {}
    for entry in catalog.ACCELERATORS:
        for value in getattr(entry.detection, pick):
            table.setdefault(value.lower(), []).append(entry)
    return {key: tuple(entries) for key, entries in table.items()}


def _instance_table() -> dict[str, tuple[catalog.Accelerator, int]]:
    table: dict[str, tuple[catalog.Accelerator, int]] = {}
    for entry in catalog.ACCELERATORS:
        for instance_type, count in entry.detection.instance_types.items():
            table.setdefault(instance_type.lower(), (entry, count))
    return table


_GFD = _table("gfd_products")
_GKE = _table("gke_accelerators")
_KARPENTER = _table("karpenter_names")
_AMD = _table("amd_products")
_INSTANCES = _instance_table()
_MODELS = sorted({entry.model.lower() for entry in catalog.ACCELERATORS}, key=len, reverse=True)
_FORM_FACTOR_TOKENS = {
    "pcie": catalog.FormFactor.PCIE,
    "sxm": catalog.FormFactor.SXM,
    "sxm2": catalog.FormFactor.SXM,
    "sxm4": catalog.FormFactor.SXM,
    "sxm5": catalog.FormFactor.SXM,
    "nvl": catalog.FormFactor.NVL,
}


MAX_DEVICES_PER_NODE = 64
"""More devices than any node the catalog knows (16 Trainium2 on trn2.48xlarge, 8 GPUs on the rest)."""
MAX_MIG_DEVICES_PER_NODE = MAX_DEVICES_PER_NODE * 7
"""Under the single MIG strategy `nvidia.com/gpu.count` counts MIG devices: up to 7 per GPU."""
MAX_SHARED_DEVICES_PER_NODE = 65536
"""Advertised devices with time-slicing or MPS replicas (64 devices x 256 replicas is 16384)."""
MAX_MEMORY_MIB = 4 * 1024 * 1024
"""4 TiB per device: far above any accelerator's memory."""
_BOUNDED_LABELS: dict[str, int] = {
    GFD_COUNT: MAX_MIG_DEVICES_PER_NODE,
    GFD_MEMORY: MAX_MEMORY_MIB,
    GKE_ACCELERATOR_COUNT: MAX_DEVICES_PER_NODE,
    KARPENTER_GPU_COUNT: MAX_DEVICES_PER_NODE,
    KARPENTER_GPU_MEMORY: MAX_MEMORY_MIB,
    KARPENTER_ACCELERATOR_COUNT: MAX_DEVICES_PER_NODE,
    **dict.fromkeys(AMD_COUNT_LABELS, MAX_DEVICES_PER_NODE),
}
_RESOURCES = frozenset(a.resource for a in catalog.ACCELERATORS)


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.fullmatch(r"\s*(\d{1,12})\s*", str(value))
    return int(match.group(1)) if match else None


def label_problems(labels: Mapping[str, str], capacity: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """Numeric labels (and device capacities) that no real node carries: such a node is not recognised.

    A 20-digit `nvidia.com/gpu.count` would otherwise become a pool capacity beyond int64.
    """
    problems = []
    for key, bound in _BOUNDED_LABELS.items():
        value = labels.get(key)
        if value is None:
            continue
        number = _int(value)
        if number is None or number > bound:
            problems.append(f"label {key}={_shown(value)} is not a whole number from 0 to {bound}")
    for resource, value in (capacity or {}).items():
        if resource in _RESOURCES:
            number = _int(value)
            if number is None or number > MAX_SHARED_DEVICES_PER_NODE:
                problems.append(f"capacity {resource}={_shown(value)} is not a whole number from 0 to 65536")
    return tuple(problems)


def _shown(value: str) -> str:
    return repr(value if len(value) <= 40 else value[:40] + "...")


def _by_memory(entries: tuple[catalog.Accelerator, ...], memory_mib: int | None) -> catalog.Accelerator:
    """The entry whose memory is closest to what the node reports (MiB → GiB); the first without a report."""
    if memory_mib is None or len(entries) == 1:
        return entries[0]
    gib = memory_mib / 1024
    return min(entries, key=lambda e: abs(e.memory_gb - gib))


def _fuzzy_gfd(product: str, memory_mib: int | None) -> catalog.Accelerator | None:
    """A GFD product string the catalog does not list verbatim: find the model, form factor and memory in it."""
    tokens = [t for t in re.split(r"[-_ ]+", product.lower()) if t]
    model = next((m for m in _MODELS if m in tokens), None)
    if model is None:
        return None
    entries = [e for e in catalog.ACCELERATORS if e.model.lower() == model and e.vendor == catalog.Vendor.NVIDIA]
    form_factors = {_FORM_FACTOR_TOKENS[t] for t in tokens if t in _FORM_FACTOR_TOKENS}
    if form_factors:
        entries = [e for e in entries if e.form_factor in form_factors] or entries
    sizes = [int(m.group(1)) for t in tokens if (m := re.fullmatch(r"(\d+)gb?", t))]
    if sizes:
        entries = [e for e in entries if e.memory_gb in sizes] or entries
    return _by_memory(tuple(entries), memory_mib) if entries else None


def _physical_count_under_mig(
    entry: catalog.Accelerator, mig_devices: int, profile: str, instance_count: int | None
) -> int:
    """GFD's single strategy counts MIG devices; recover the GPUs from the instance type or the full layout.

    Without an instance type, each GPU is taken to hold as many instances as fit its own slice
    budgets (`-MIG-3g.40gb` with count 8 is 4 H100s; `-MIG-1g.6gb` with count 8 is 2 A30s). A layout
    that leaves GPUs partly empty makes this a lower bound (rounded up: 9 devices are at least 2 GPUs).
    """
    if instance_count:
        return instance_count
    mig = entry.mig_profile(profile)
    if mig is None or mig_devices <= 0:
        return mig_devices
    per_gpu = max(1, entry.mig_instances_that_fit(mig))
    return -(-mig_devices // per_gpu)


def _catalog_profile(entry: catalog.Accelerator, gfd_name: str) -> str:
    """A GFD profile name (`1g.10gb.me`) in the catalog's spelling (`1g.10gb+me`)."""
    for profile in entry.mig_profiles:
        if catalog.mig_name(profile.name) == gfd_name:
            return profile.name
    return gfd_name


def _instance(labels: Mapping[str, str]) -> tuple[catalog.Accelerator, int] | None:
    for key in INSTANCE_TYPE_LABELS:
        value = labels.get(key)
        if value and value.lower() in _INSTANCES:
            return _INSTANCES[value.lower()]
    return None


def _capacity_count(entry: catalog.Accelerator, capacity: Mapping[str, str] | None) -> int:
    return _int((capacity or {}).get(entry.resource)) or 0


def _gfd(labels: Mapping[str, str], instance: tuple[catalog.Accelerator, int] | None) -> Detected | None:
    product = labels.get(GFD_PRODUCT)
    if not product:
        return None
    shared = product.upper().endswith(_SHARED_SUFFIX)
    if shared:
        product = product[: -len(_SHARED_SUFFIX)]
    mig_invalid = product.upper().endswith(_MIG_INVALID_SUFFIX)
    if mig_invalid:
        product = product[: -len(_MIG_INVALID_SUFFIX)]
    mig_match = _MIG_SUFFIX.search(product)
    gfd_profile = None
    if mig_match:
        gfd_profile = mig_match.group(1).lower() + (".me" if mig_match.group(2) else "")
        product = product[: mig_match.start()]
    # Under MIG, gpu.memory is one MIG device's memory (0 with -MIG-INVALID): it says nothing of the variant.
    memory = None if gfd_profile or mig_invalid else _int(labels.get(GFD_MEMORY))
    entries = _GFD.get(product.lower())
    entry = _by_memory(entries, memory) if entries else _fuzzy_gfd(product, memory)
    if entry is None:
        return None
    count = _int(labels.get(GFD_COUNT)) or 0
    instance_count = instance[1] if instance and instance[0].model == entry.model else None
    mig_profile = _catalog_profile(entry, gfd_profile) if gfd_profile else None
    mig_devices = None
    if mig_invalid:
        count = instance_count or 0
    elif mig_profile:
        mig_devices = count
        count = _physical_count_under_mig(entry, count, mig_profile, instance_count)
    elif not count and instance_count:
        count = instance_count
    return Detected(
        entry,
        count,
        "gfd",
        memory_mib=memory,
        mig_profile=mig_profile,
        shared=shared,
        mig_devices=mig_devices,
        mig_invalid=mig_invalid,
    )


def _amd(labels: Mapping[str, str], capacity: Mapping[str, str] | None) -> Detected | None:
    for key in AMD_PRODUCT_LABELS:
        value = labels.get(key)
        entries = _AMD.get(value.lower()) if value else None
        if entries:
            entry = entries[0]
            count = next((c for k in AMD_COUNT_LABELS if (c := _int(labels.get(k)))), None)
            return Detected(entry, count or _capacity_count(entry, capacity), "amd")
    return None


def _gke(labels: Mapping[str, str], capacity: Mapping[str, str] | None) -> Detected | None:
    value = labels.get(GKE_ACCELERATOR)
    entries = _GKE.get(value.lower()) if value else None
    if entries:
        entry = entries[0]
        count = _int(labels.get(GKE_ACCELERATOR_COUNT)) or _capacity_count(entry, capacity)
        partition = labels.get(GKE_PARTITION_SIZE) or None
        return Detected(entry, count, "gke", mig_profile=partition)
    value = labels.get(GKE_TPU_ACCELERATOR)
    entries = _GKE.get(value.lower()) if value else None
    if entries:
        entry = entries[0]
        count = _capacity_count(entry, capacity) or _int(labels.get(GKE_ACCELERATOR_COUNT)) or 0
        if not count:
            for key in INSTANCE_TYPE_LABELS:
                chips = _TPU_CHIPS.search(labels.get(key, ""))
                if chips:
                    count = int(chips.group(1))
                    break
        return Detected(entry, count, "gke-tpu")
    return None


def _karpenter(labels: Mapping[str, str], instance: tuple[catalog.Accelerator, int] | None) -> Detected | None:
    for name_key, count_key in (
        (KARPENTER_GPU_NAME, KARPENTER_GPU_COUNT),
        (KARPENTER_ACCELERATOR_NAME, KARPENTER_ACCELERATOR_COUNT),
    ):
        value = labels.get(name_key)
        entries = _KARPENTER.get(value.lower()) if value else None
        if not entries:
            continue
        memory = _int(labels.get(KARPENTER_GPU_MEMORY)) if name_key == KARPENTER_GPU_NAME else None
        entry = None
        if instance is not None and _same_family(instance[0], entries):
            entry = instance[0]
        elif memory is not None:
            ranged = [
                e
                for e in entries
                if e.detection.karpenter_memory_mib
                and e.detection.karpenter_memory_mib[0] <= memory <= e.detection.karpenter_memory_mib[1]
            ]
            entry = ranged[0] if ranged else _by_memory(entries, memory)
        else:
            entry = entries[0]
        count = _int(labels.get(count_key)) or (instance[1] if instance and instance[0] is entry else 0)
        return Detected(entry, count, "karpenter", memory_mib=memory)
    return None


def _same_family(candidate: catalog.Accelerator, entries: tuple[catalog.Accelerator, ...]) -> bool:
    """The instance type's entry refines the Karpenter name (a100 → A100-80GB on p4de; trainium → Trainium2 on trn2)."""
    return candidate in entries or any(
        candidate.vendor == e.vendor and candidate.model.lower().startswith(e.model.lower()) for e in entries
    )


def detect(labels: Mapping[str, str], capacity: Mapping[str, str] | None = None) -> Detected | None:
    """The accelerator a node advertises through its labels (and, for counts only, its capacity).

    None for a node without accelerators, and for one whose numeric labels are out of any real
    range (`label_problems` says which).
    """
    if label_problems(labels, capacity):
        return None
    instance = _instance(labels)
    found = _gfd(labels, instance) or _amd(labels, capacity) or _gke(labels, capacity) or _karpenter(labels, instance)
    if found is None and instance is not None:
        found = Detected(instance[0], instance[1], "instance-type")
    # A count from capacity, except under MIG: there `nvidia.com/gpu` counts MIG devices (single strategy),
    # and a -MIG-INVALID node's device plugin serves nothing it could be read from.
    if found is not None and not found.count and not (found.mig_profile or found.mig_invalid):
        count = _capacity_count(found.accelerator, capacity)
        if count:
            found = dataclasses.replace(found, count=count)
    return found
