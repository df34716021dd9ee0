"""What NVIDIA's DRA kubelet plugin publishes about a node's GPUs, read from its ResourceSlices. Pure.

The `gpu.nvidia.com` plugin publishes one pool per node, named after the node, owned by the Node
(kubernetes-sigs/dra-driver-nvidia-gpu `cmd/gpu-kubelet-plugin/driver.go`), with a device per GPU
(`gpu-<minor>`, attributes `type: gpu`, `uuid`, `productName`, ...) and, under static MIG, one per MIG
device (`type: mig`, `parentUUID`, `profile`) (`deviceinfo.go`, `mig.go`). A consumer uses only the pool's
highest `pool.generation`, and only once all `pool.resourceSliceCount` slices of it are seen (k8s.io/api
`resource/v1/types.go` `ResourcePool`). Device taints in a slice are the driver's own
(`device_health.go`: `gpu.nvidia.com/xid`, `gpu.nvidia.com/gpu-lost`; reference dra.md 4.8).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from accelpool.model.nodes import mapping

DRIVER = "gpu.nvidia.com"
BLOCKING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})
"""Taint effects that keep a device from new claims; `None` only informs (k8s.io/api `DeviceTaintEffect`)."""


@dataclass(frozen=True)
class SliceTaint:
    key: str
    value: str
    effect: str

    def __str__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}" if self.value else f"{self.key}:{self.effect}"


@dataclass(frozen=True)
class SliceDevice:
    """One device of a node's pool: a whole GPU or a MIG device."""

    name: str
    type: str
    uuid: str
    parent_uuid: str = ""
    profile: str = ""
    product: str = ""
    memory: str = ""
    taints: tuple[SliceTaint, ...] = ()

    @property
    def gpu(self) -> str:
        """The physical GPU's UUID: a MIG device's parent, a GPU's own."""
        return self.parent_uuid or self.uuid

    @property
    def blocking_taint(self) -> SliceTaint | None:
        return next((t for t in self.taints if t.effect in BLOCKING_EFFECTS), None)


@dataclass(frozen=True)
class NodeSlices:
    """A node's pool at its newest generation."""

    node: str
    devices: tuple[SliceDevice, ...]
    complete: bool
    """Every slice of the generation was seen (`resourceSliceCount`)."""

    def devices_of(self, gpu_uuid: str) -> tuple[SliceDevice, ...]:
        """The devices a GPU backs: the GPU itself and each of its MIG devices."""
        return tuple(d for d in self.devices if d.gpu == gpu_uuid)

    def of_type(self, type_: str, profiles: frozenset[str] = frozenset()) -> tuple[SliceDevice, ...]:
        return tuple(d for d in self.devices if d.type == type_ and (not profiles or d.profile in profiles))


def _string(attributes: Mapping[str, Any], name: str) -> str:
    value = attributes.get(name) or attributes.get(f"{DRIVER}/{name}")
    if isinstance(value, Mapping):
        found = value.get("string")
        return found if isinstance(found, str) else ""
    return ""


def _device(raw: Mapping[str, Any]) -> SliceDevice | None:
    name = raw.get("name")
    if not isinstance(name, str) or not name:
        return None
    attributes, capacity = mapping(raw.get("attributes")), mapping(raw.get("capacity"))
    memory = capacity.get("memory")
    taints = tuple(
        SliceTaint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in (raw.get("taints") or [])
        if isinstance(t, Mapping)
    )
    return SliceDevice(
        name=name,
        type=_string(attributes, "type"),
        uuid=_string(attributes, "uuid"),
        parent_uuid=_string(attributes, "parentUUID"),
        profile=_string(attributes, "profile"),
        product=_string(attributes, "productName"),
        memory=str(memory.get("value", "")) if isinstance(memory, Mapping) else "",
        taints=taints,
    )


def read_slices(slices: Iterable[Mapping[str, Any]]) -> dict[str, NodeSlices]:
    """Node → its `gpu.nvidia.com` pool, from ResourceSlices of any drivers (others are skipped)."""
    newest: dict[str, int] = {}
    kept: dict[str, list[Mapping[str, Any]]] = defaultdict(list)
    counts: dict[str, int] = {}
    for item in slices:
        spec = mapping(item.get("spec"))
        if spec.get("driver") != DRIVER:
            continue
        pool = mapping(spec.get("pool"))
        name, generation = pool.get("name"), pool.get("generation", 0)
        if not isinstance(name, str) or not isinstance(generation, int):
            continue
        if generation > newest.get(name, -1):
            newest[name], kept[name] = generation, []
        if generation == newest[name]:
            kept[name].append(spec)
            count = pool.get("resourceSliceCount")
            counts[name] = count if isinstance(count, int) else 1
    found: dict[str, NodeSlices] = {}
    for pool_name, specs in kept.items():
        devices = tuple(
            device
            for spec in specs
            for raw in (spec.get("devices") or [])
            if isinstance(raw, Mapping) and (device := _device(raw)) is not None
        )
        found[pool_name] = NodeSlices(pool_name, devices, complete=len(specs) >= counts.get(pool_name, 1))
    return found
