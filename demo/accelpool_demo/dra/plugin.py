"""NVIDIA's DRA kubelet plugin for GPUs (`gpu.nvidia.com`), simulated: what it discovers on a node, the
devices it publishes in the node's ResourceSlice, and the health taints it adds. Pure: no I/O, no clock.

After kubernetes-sigs/dra-driver-nvidia-gpu (v0.4.1 and main; paths under `cmd/gpu-kubelet-plugin/`):

- Discovery happens once, when the plugin starts (`nvlib.go` `GetPerGpuAllocatableDevices`): a GPU
  without MIG mode is one device `gpu-<minor>` (`deviceinfo.go` `CanonicalName`); a MIG-enabled GPU is
  its MIG devices only, `gpu-<minor>-mig-<profile>-<giProfileID>-<placementStart>` (`mig.go`
  `ToCanonicalName`: the profile without dots, `+` written `-`), and nothing when it has none (static
  MIG, the default: the plugin sees MIG devices made before it started, so a new layout needs a
  restart, `Plugin.restarted`). Dynamic MIG (gate DynamicMIG) is not modelled.
- A full GPU's attributes (`deviceinfo.go` `GpuInfo.Attributes`): `type`, `uuid`, `productName`, `brand`,
  `architecture`, versions `cudaComputeCapability`, `driverVersion`, `cudaDriverVersion` (as Masterminds
  semver writes them: `9.0` → `9.0.0`, `580.95.05` → `580.95.5`), and the standard `resource.kubernetes.io/pciBusID` and
  `resource.kubernetes.io/pcieRoot`; capacity `memory` in bytes, BinarySI (`partitions.go`
  `fullGpuCapacity`). A MIG device's (`mig.go` `CommonAttributesMig`, `deviceinfo.go`
  `MigDeviceInfo.GetDevice`): `type: mig`, `uuid` (`MIG-...`), `parentUUID`, `profile` and the parent's
  product, brand, architecture, versions and PCI attributes; capacity `multiprocessors`, `copyEngines`,
  `decoders`, `encoders`, `jpegEngines`, `ofaEngines`, `memory` (`CommonCapacitiesMig`) and
  `memorySlice<N>: 1` for each memory slice its placement covers. Not published: `addressingMode`
  (published only where NVML knows it), `numaNode`, the FabricManagerPartitioning attributes.
- The pool is the node's name, one slice (`driver.go` `publishResources`), owned by the Node.
- Health (gate NVMLDeviceHealthCheck, `device_health.go`): an XID on a device adds the taint
  `gpu.nvidia.com/xid=<code>` with effect NoSchedule, or None for the XIDs NVIDIA counts as application
  errors (13, 31, 43, 45, 68, 109 and `--additional-xids-to-ignore`, `xidsToSkip`); a lost GPU taints
  every device `gpu.nvidia.com/gpu-lost:NoSchedule`. One taint per key per device, the latest event's
  value and effect winning (`allocatable.go` `AddOrUpdateTaint`); never removed while the plugin runs,
  re-evaluated (so gone) when it restarts.

What NVML would report is taken from the node's simulated GPUs (`accelpool_demo.nvidia.Gpu`: model,
memory, MIG layout) and, for the identity of each GPU (UUID, product name, PCI bus ID, compute
capability), from the device agent's fake backend with the same seed, so the UUIDs the agent reports for
a node are the ones its slice carries. The rest is synthesized where the demo has no hardware:

- the PCIe root: `pci<domain>:<bus - 3>` (the reference note's `0000:18:00.0` under `pci0000:15`);
- the placement NVML gives a MIG device created without one: the largest profiles first, each at the
  highest free start among the profile's possible placements (`possible_placements`); that fills every
  layout NVIDIA's default mig-parted config lists;
- a MIG profile's GPU-instance profile ID (NVML's `GpuInstanceProfileInfo.Id`, as `nvidia-smi mig -lgip`
  lists it on A100/H100-class GPUs: 7g 0, 4g 5, 3g 9, 2g 14, 1g with double memory 15, 1g 19, 1g+me 20;
  on A30: 4g 0, 2g 5, 2g+me 6, 1g 14, 1g+me 21) and its engine counts (NVIDIA/go-nvml
  `pkg/nvml/mock/shared/gpus/*.go`: multiprocessors per compute slice 14 on Ampere, 16 on Hopper, 18
  on Blackwell; one copy engine per compute slice; decoders 1, 1, 2, 2, 5 for 1g, 2g, 3g, 4g, 7g; a `+me`
  profile adds one JPEG and one OFA engine);
- the driver stack (`Versions`): the reference note's 580.126.20 with CUDA 13.0 unless given.

The real plugin walks GPUs and devices in Go map order; here devices are in PCI bus order, each GPU's
devices sorted by name (the order DynamicMIG's `generateSplitResourceSlices` uses), which the scheduler
then tries first to last.

Used by `accelpool_demo.dra.nodes` (every node's plugin) and the unit tests.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from accelpool_agent.backends.fake import FakeBackend
from accelpool_core import catalog
from accelpool_demo.dra.quantity import binary_si
from accelpool_demo.nvidia import Gpu

DRIVER = "gpu.nvidia.com"
"""The driver name, its DeviceClasses' and its attributes' domain."""
STANDARD_DOMAIN = "resource.kubernetes.io"
XID_TAINT = f"{DRIVER}/xid"
GPU_LOST_TAINT = f"{DRIVER}/gpu-lost"
IGNORED_XIDS = frozenset({13, 31, 43, 45, 68, 109})
"""XIDs NVIDIA counts as application errors: their taint has effect None (`device_health.go` `xidsToSkip`)."""

TaintEffect = Literal["None", "NoSchedule", "NoExecute"]


@dataclass(frozen=True)
class Versions:
    """The node's driver stack as NVML reports it: `SystemGetDriverVersion`, `SystemGetCudaDriverVersion`."""

    driver: str = "580.126.20"
    cuda: str = "13.0"


@dataclass(frozen=True)
class MigDevice:
    """A MIG device the plugin found at start: the GPU instance's profile and placement."""

    uuid: str
    profile: str
    gi_profile_id: int
    placement_start: int
    placement_size: int
    capacity: Mapping[str, int]
    """multiprocessors, copyEngines, decoders, encoders, jpegEngines, ofaEngines, memory (bytes)."""


@dataclass(frozen=True)
class GpuInfo:
    """One physical GPU as the plugin sees it at start (`deviceinfo.go` `GpuInfo`)."""

    minor: int
    uuid: str
    product_name: str
    brand: str
    architecture: str
    cuda_compute_capability: str
    pci_bus_id: str
    pcie_root: str
    memory_bytes: int
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()

    @property
    def name(self) -> str:
        return f"gpu-{self.minor}"


# ---------------------------------------------------------------- discovery


_ARCHITECTURES = {"7.0": "Volta", "7.5": "Turing", "8.0": "Ampere", "8.6": "Ampere", "8.9": "Ada Lovelace"}
_ARCHITECTURES |= {"9.0": "Hopper", "10.0": "Blackwell"}
_SMS_PER_SLICE = {"Ampere": 14, "Hopper": 16, "Blackwell": 18}
_DECODERS = {1: 1, 2: 1, 3: 2, 4: 2, 7: 5}
_PROFILE = re.compile(r"^(\d+)g\.(\d+)gb(\+me)?$")


def _semver(version: str) -> str:
    """Masterminds semver's lenient parse, written back (`semver.MustParse(v).String()` in `deviceinfo.go`):
    missing parts are 0 and numbers lose leading zeros: `9.0` → `9.0.0`, `580.95.05` → `580.95.5`."""
    parts = [str(int(p)) if p.isdigit() else p for p in version.split(".")]
    return ".".join([*parts, "0", "0"][:3])


def _gi_profile_id(accelerator: catalog.Accelerator, profile: catalog.MigProfile) -> int:
    """NVML's GPU-instance profile ID of a catalog profile (see the module docstring)."""
    media = profile.name.endswith("+me")
    if accelerator.mig_compute_slices == 4:  # A30
        return {(4, False): 0, (2, False): 5, (2, True): 6, (1, False): 14, (1, True): 21}[
            (profile.compute_slices, media)
        ]
    if profile.compute_slices == 1:
        return 20 if media else (15 if profile.memory_slices == 2 else 19)
    return {7: 0, 4: 5, 3: 9, 2: 14}[profile.compute_slices]


def possible_placements(accelerator: catalog.Accelerator, profile: catalog.MigProfile) -> tuple[int, ...]:
    """The starts (in memory slices) NVML offers for a profile: multiples of its memory slices that fit, as
    many as the profile's maximum instances (A100/H100: 1g 0-6, 1g double memory 0/2/4/6, 2g 0/2/4, 3g 0/4)."""
    size = profile.memory_slices
    starts = tuple(range(0, accelerator.mig_memory_slices - size + 1, size))
    limit = profile.max_instances if not profile.name.endswith("+me") else accelerator.mig_compute_slices
    return starts[: max(limit, 1)]


def _capacity(accelerator: catalog.Accelerator, architecture: str, profile: catalog.MigProfile) -> dict[str, int]:
    match = _PROFILE.match(profile.name)
    memory_gb = int(match.group(2)) if match else 0
    media = 1 if profile.name.endswith("+me") else 0
    slices = profile.compute_slices
    return {
        "multiprocessors": _SMS_PER_SLICE.get(architecture, 16) * slices,
        "copyEngines": slices,
        "decoders": _DECODERS.get(slices, slices),
        "encoders": 0,
        "jpegEngines": media,
        "ofaEngines": media,
        "memory": memory_gb * 1024 * 2**20,
    }


def _mig_devices(accelerator: catalog.Accelerator, architecture: str, parent_uuid: str, gpu: Gpu) -> list[MigDevice]:
    """The MIG devices mig-parted made on this GPU, each at the placement NVML gave it (module docstring)."""
    profiles = [accelerator.mig_profile(name) for name in gpu.mig_devices]
    known = sorted((p for p in profiles if p is not None), key=lambda p: (-p.memory_slices, -p.compute_slices, p.name))
    used: set[int] = set()
    devices: list[MigDevice] = []
    for profile in known:
        for start in reversed(possible_placements(accelerator, profile)):
            span = set(range(start, start + profile.memory_slices))
            if span & used:
                continue
            used |= span
            identity = uuid.uuid5(uuid.NAMESPACE_URL, f"mig:{parent_uuid}:{profile.name}:{start}")
            devices.append(
                MigDevice(
                    uuid=f"MIG-{identity}",
                    profile=profile.name,
                    gi_profile_id=_gi_profile_id(accelerator, profile),
                    placement_start=start,
                    placement_size=profile.memory_slices,
                    capacity=_capacity(accelerator, architecture, profile),
                )
            )
            break
    return devices


def _bus_id(nvml_bus_id: str) -> tuple[str, int]:
    """NVML's `00000000:18:00.0` as the standard attribute writes it (`0000:18:00.0`), and the bus number."""
    domain, bus, rest = nvml_bus_id.split(":", 2)
    return f"{domain[-4:]}:{bus.lower()}:{rest}", int(bus, 16)


def discover(gpus: Sequence[Gpu], *, seed: int = 0) -> tuple[GpuInfo, ...]:
    """What the plugin finds at start on a node with these simulated GPUs (minor = index)."""
    if not gpus:
        return ()
    accelerator = catalog.BY_NAME[gpus[0].model]
    inventory = FakeBackend(accelerator, len(gpus), seed=seed).inventory()
    found: list[GpuInfo] = []
    for gpu, device in zip(gpus, inventory, strict=True):
        capability = device.compute_capability or accelerator.compute_capability_text or "0.0"
        architecture = _ARCHITECTURES.get(capability, "Unknown")
        bus_id, bus = _bus_id(device.pci_bus_id)
        found.append(
            GpuInfo(
                minor=device.index,
                uuid=device.uuid,
                product_name=device.name,
                brand="Tesla" if device.name.startswith("Tesla") else "Nvidia",
                architecture=architecture,
                cuda_compute_capability=capability,
                pci_bus_id=bus_id,
                pcie_root=f"pci{bus_id[:4]}:{max(bus - 3, 0):02x}",
                memory_bytes=gpu.memory_mib * 2**20,
                mig_enabled=gpu.mig_enabled,
                mig_devices=tuple(_mig_devices(accelerator, architecture, device.uuid, gpu)) if gpu.mig_enabled else (),
            )
        )
    return tuple(found)


# ---------------------------------------------------------------- the devices it publishes


def mig_device_name(parent_minor: int, profile: str, gi_profile_id: int, placement_start: int) -> str:
    """`mig.go` `ToCanonicalName`: `gpu-0-mig-1g10gb-19-0`, `gpu-0-mig-1g10gb-me-20-0`."""
    compact = re.sub(r"[^a-z0-9-.]", "-", profile.replace(".", "").lower()).strip("-")
    return f"gpu-{parent_minor}-mig-{compact}-{gi_profile_id}-{placement_start}"


def _common(gpu: GpuInfo, versions: Versions) -> dict[str, dict[str, str]]:
    return {
        "productName": {"string": gpu.product_name},
        "brand": {"string": gpu.brand},
        "architecture": {"string": gpu.architecture},
        "cudaComputeCapability": {"version": _semver(gpu.cuda_compute_capability)},
        "driverVersion": {"version": _semver(versions.driver)},
        "cudaDriverVersion": {"version": _semver(versions.cuda)},
        f"{STANDARD_DOMAIN}/pciBusID": {"string": gpu.pci_bus_id},
        f"{STANDARD_DOMAIN}/pcieRoot": {"string": gpu.pcie_root},
    }


def gpu_device(gpu: GpuInfo, versions: Versions) -> dict[str, Any]:
    """A full GPU's entry in `spec.devices` (`deviceinfo.go` `GpuInfo.GetDevice`)."""
    attributes = {"type": {"string": "gpu"}, "uuid": {"string": gpu.uuid}, **_common(gpu, versions)}
    return {
        "name": gpu.name,
        "attributes": attributes,
        "capacity": {"memory": {"value": binary_si(gpu.memory_bytes)}},
    }


def mig_device(gpu: GpuInfo, mig: MigDevice, versions: Versions) -> dict[str, Any]:
    """A static MIG device's entry (`deviceinfo.go` `MigDeviceInfo.GetDevice`)."""
    attributes = {
        "type": {"string": "mig"},
        "uuid": {"string": mig.uuid},
        "parentUUID": {"string": gpu.uuid},
        "profile": {"string": mig.profile},
        **_common(gpu, versions),
    }
    capacity: dict[str, dict[str, str]] = {
        name: {"value": binary_si(value) if name == "memory" else str(value)} for name, value in mig.capacity.items()
    }
    for index in range(mig.placement_start, mig.placement_start + mig.placement_size):
        capacity[f"memorySlice{index}"] = {"value": "1"}
    return {
        "name": mig_device_name(gpu.minor, mig.profile, mig.gi_profile_id, mig.placement_start),
        "attributes": attributes,
        "capacity": capacity,
    }


@dataclass(frozen=True)
class Taint:
    """A device taint as the plugin writes it (no `timeAdded`: the API server stamps it)."""

    key: str
    value: str
    effect: TaintEffect

    def json(self) -> dict[str, str]:
        taint = {"key": self.key, "effect": self.effect}
        return {"key": self.key, "value": self.value, "effect": self.effect} if self.value else taint


@dataclass(frozen=True)
class Plugin:
    """The kubelet plugin on one node: what it discovered when it started, and the taints its health monitor
    added since. Every change returns a new one."""

    gpus: tuple[GpuInfo, ...]
    versions: Versions = field(default_factory=Versions)
    taints: Mapping[str, tuple[Taint, ...]] = field(default_factory=dict)
    """Device name → its taints, in the order they were added."""
    ignored_xids: frozenset[int] = IGNORED_XIDS
    seed: int = 0

    @classmethod
    def started(
        cls,
        gpus: Sequence[Gpu],
        *,
        seed: int = 0,
        versions: Versions | None = None,
        additional_xids_to_ignore: Sequence[int] = (),
    ) -> Plugin:
        """The plugin as it comes up on a node with these GPUs (their MIG layout now is the one it keeps)."""
        return cls(
            discover(gpus, seed=seed),
            versions or Versions(),
            ignored_xids=IGNORED_XIDS | frozenset(additional_xids_to_ignore),
            seed=seed,
        )

    def restarted(self, gpus: Sequence[Gpu]) -> Plugin:
        """A new plugin process (its pod deleted and recreated): rediscovered, every health taint gone."""
        return replace(self, gpus=discover(gpus, seed=self.seed), taints={})

    def device_names(self) -> list[str]:
        return [d["name"] for d in self.devices()]

    def _entries(self) -> list[tuple[GpuInfo, MigDevice | None, str]]:
        entries: list[tuple[GpuInfo, MigDevice | None, str]] = []
        for gpu in sorted(self.gpus, key=lambda g: g.pci_bus_id):
            if not gpu.mig_enabled:
                entries.append((gpu, None, gpu.name))
                continue
            names = [
                (m, mig_device_name(gpu.minor, m.profile, m.gi_profile_id, m.placement_start)) for m in gpu.mig_devices
            ]
            entries.extend((gpu, m, name) for m, name in sorted(names, key=lambda entry: entry[1]))
        return entries

    def devices(self) -> list[dict[str, Any]]:
        """`spec.devices` of the node's slice: GPUs in PCI bus order, MIG devices by name, taints attached."""
        devices: list[dict[str, Any]] = []
        for gpu, mig, name in self._entries():
            device = gpu_device(gpu, self.versions) if mig is None else mig_device(gpu, mig, self.versions)
            taints = self.taints.get(name)
            if taints:
                device["taints"] = [t.json() for t in taints]
            devices.append(device)
        return devices

    def _tainted(self, names: Sequence[str], taint: Taint) -> Plugin:
        taints = dict(self.taints)
        for name in names:
            current = list(taints.get(name, ()))
            index = next((i for i, t in enumerate(current) if t.key == taint.key), None)
            if index is None:
                current.append(taint)
            else:
                current[index] = taint
            taints[name] = tuple(current)
        return replace(self, taints=taints)

    def _names_of(self, minor: int, mig_profile: str | None, placement_start: int | None) -> list[str]:
        """The device an NVML event names: the full GPU (no GPU instance), or one of its MIG devices."""
        for gpu, mig, name in self._entries():
            if gpu.minor != minor or (mig is None) != (mig_profile is None):
                continue
            if mig is None or (mig.profile == mig_profile and placement_start in (None, mig.placement_start)):
                return [name]
        return []

    def xid(
        self, minor: int, code: int, *, mig_profile: str | None = None, placement_start: int | None = None
    ) -> Plugin:
        """NVML reported XID `code` on GPU `minor`, or on one of its MIG devices (the first with `mig_profile`, at
        `placement_start` when given): `gpu.nvidia.com/xid=<code>`, NoSchedule, or None for an ignored XID.
        An event for a device the plugin does not publish (the full GPU of a MIG-enabled GPU) is ignored, as
        `device_health.go` ignores an event whose placement it finds no device for."""
        effect: TaintEffect = "None" if code in self.ignored_xids else "NoSchedule"
        return self._tainted(self._names_of(minor, mig_profile, placement_start), Taint(XID_TAINT, str(code), effect))

    def gpu_lost(self) -> Plugin:
        """NVML said the GPU is lost: every device is tainted `gpu.nvidia.com/gpu-lost:NoSchedule`."""
        return self._tainted([name for _, _, name in self._entries()], Taint(GPU_LOST_TAINT, "", "NoSchedule"))


# ---------------------------------------------------------------- the ResourceSlice


def slice_generate_name(node_name: str) -> str:
    """The slice's `generateName` as k8s.io/dynamic-resource-allocation v0.36's resourceslice controller
    (the one NVIDIA's plugin links) sets it for a node-owned pool: `<node>-<driver>-`."""
    return f"{node_name}-{DRIVER}-"


def slice_spec(node_name: str, devices: Sequence[Mapping[str, Any]], generation: int = 1) -> dict[str, Any]:
    """`spec` of the node's one slice: driver, pool named after the node, the node, the devices."""
    return {
        "driver": DRIVER,
        "pool": {"name": node_name, "generation": generation, "resourceSliceCount": 1},
        "nodeName": node_name,
        "devices": [dict(d) for d in devices],
    }


def resource_slice(
    node_name: str, node_uid: str, devices: Sequence[Mapping[str, Any]], generation: int = 1
) -> dict[str, Any]:
    """The ResourceSlice object the plugin's resourceslice controller creates for the node."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": slice_generate_name(node_name),
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid, "controller": True}
            ],
        },
        "spec": slice_spec(node_name, devices, generation),
    }
