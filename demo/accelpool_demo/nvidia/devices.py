"""The devices and what NVIDIA's plugin and GFD make of them: the GPUs a node has, the device
plugin's effective config, the GFD labels (`gfd_labels`) and the advertised resources (`advertise`)."""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from accelpool.model import nvidia as nvidia_configs
from accelpool_api import conventions
from accelpool_core import catalog

Strategy = Literal["none", "single", "mixed"]
STRATEGIES: tuple[Strategy, ...] = ("none", "single", "mixed")
SharingStrategy = Literal["none", "time-slicing", "mps"]
Fallback = Literal["empty", "named"]

NVIDIA_GPU = catalog.NVIDIA_GPU
NAMED_FALLBACK = conventions.DEFAULT_DEVICE_PLUGIN_KEY
"""The key the `named` fallback strategy selects (`default`)."""
_GFD_GPU_KEYS = tuple(
    f"{NVIDIA_GPU}.{suffix}" for suffix in ("product", "count", "replicas", "sharing-strategy", "memory")
)
_MIG_PREFIX = "nvidia.com/mig-"
_PROFILE_MEMORY = re.compile(r"(\d+)gb")


# ---------------------------------------------------------------- the installation


@dataclass(frozen=True)
class Installation:
    """How NVIDIA's components are installed and how fast things happen (seconds)."""

    strategy_override: Strategy | None = None
    """Env `MIG_STRATEGY` on the plugin and GFD: the GPU Operator sets it from ClusterPolicy
    `spec.mig.strategy` (Helm default `single`); None as in accelpool's install guide."""
    default_config: str | None = None
    """Config-manager `DEFAULT_CONFIG`: the key an unset label selects, before any fallback. The GPU Operator sets
    it from ClusterPolicy `devicePlugin.config.default` (NVIDIA/gpu-operator `controllers/object_controls.go`
    `transformConfigManagerSidecarContainer`); accelpool's install guide sets `default`."""
    fallback: Fallback = "empty"
    """Config-manager `FALLBACK_STRATEGIES` for an unset label and no `default_config`: `empty` (GPU Operator) or
    `named` (standalone chart)."""
    propagation_seconds: float = 0.0
    """The kubelet's delay before a ConfigMap update reaches the pods that mount it."""
    apply_seconds: float = 0.0
    """How long the MIG manager takes from `pending` to `success`."""
    with_reboot: bool = False
    """The MIG manager's `WITH_REBOOT`, for GPUs whose MIG mode change needs a reboot."""
    reboot_seconds: float = 0.0
    restart_seconds: float = 0.0
    """The crash-loop back-off before an exited config-manager sidecar runs again."""


# ---------------------------------------------------------------- GPUs and the plugin's config


PCI_DEVICE_IDS: dict[str, int] = {
    "A30": 0x20B7,
    "A100-40GB": 0x20B0,
    "A100-80GB": 0x20B2,
    "A100-80GB-PCIE": 0x20B5,
    "H100-80GB": 0x2330,
    "H100-80GB-PCIE": 0x2331,
    "H100-94GB-NVL": 0x2321,
    "H200-141GB": 0x2335,
    "GH200-96GB": 0x2342,
    "GH200-144GB": 0x2348,
    "B200-180GB": 0x2901,
}
"""The PCI device ID of the board each MIG-capable catalog model stands for (vendor 0x10DE): what mig-parted's
`device-filter` is matched against. From the comments of NVIDIA's default mig-parted config (NVIDIA/gpu-operator
`assets/state-mig-manager/0400_configmap.yaml`: `0x233010DE` H100-80GB, `0x20B010DE` A100-40GB, ...) and the
go-nvml mocks of the recorded answers (../shared/fidelity/nvidia/mig-parted.yaml: h100 0x233010DE, a100-40gb
0x20B010DE, a100-80gb 0x20B210DE, a30 0x20B710DE). One board per model: the SXM one where there are several."""
NVIDIA_VENDOR_ID = 0x10DE


@dataclass(frozen=True)
class Gpu:
    """One physical GPU: its catalog model, memory, and MIG layout (profiles as mig-parted spells them)."""

    model: str
    memory_mib: int
    mig_enabled: bool = False
    mig_devices: tuple[str, ...] = ()

    @property
    def device_id(self) -> int | None:
        """Its PCI device ID (`PCI_DEVICE_IDS`), None for a model without one there."""
        return PCI_DEVICE_IDS.get(self.model)


@dataclass(frozen=True)
class Replicated:
    """A shared resource: `replicas` devices per device, advertised as `rename` when set."""

    resource: str
    replicas: int
    rename: str = ""


@dataclass(frozen=True)
class PluginConfig:
    """What the device plugin and GFD run with: the strategy and the sharing replicas."""

    strategy: Strategy = "none"
    sharing: SharingStrategy = "none"
    replicated: tuple[Replicated, ...] = ()

    def replication(self, resource: str) -> Replicated | None:
        return next((r for r in self.replicated if r.resource == resource and r.replicas > 0), None)


@functools.lru_cache(maxsize=256)
def plugin_config(document: str | None, strategy_override: Strategy | None = None) -> PluginConfig:
    """The config the plugin loads from a config file's text (None: the empty config), env beating the file.
    Cached: every node of a cluster reads one of a few documents (parsing each every time cost the benchmarks'
    simulator more than the operator's planning at 5,000 nodes)."""
    parsed = nvidia_configs.load(document)
    data: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
    flags = data.get("flags") if isinstance(data.get("flags"), dict) else {}
    strategy = strategy_override or (flags or {}).get("migStrategy") or "none"
    sharing_section = data.get("sharing") if isinstance(data.get("sharing"), dict) else {}
    for mode, key in (("time-slicing", "timeSlicing"), ("mps", "mps")):
        section = (sharing_section or {}).get(key)
        if not isinstance(section, dict) or not section.get("resources"):
            continue
        rename_by_default = bool(section.get("renameByDefault"))
        replicated = tuple(
            Replicated(
                resource=str(r.get("name")),
                replicas=_count(r.get("replicas")),
                rename=f"{r.get('name')}.shared" if rename_by_default else "",
            )
            for r in section["resources"]
            if isinstance(r, dict)
        )
        return PluginConfig(strategy=_strategy(strategy), sharing=mode, replicated=replicated)  # type: ignore[arg-type]
    return PluginConfig(strategy=_strategy(strategy))


def _count(value: Any) -> int:
    """A replica count as written; anything but an integer counts as none (NVIDIA's loader refuses it)."""
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _strategy(value: Any) -> Strategy:
    return value if value in STRATEGIES else "none"


def _product(model: str) -> str:
    entry = catalog.BY_NAME[model]
    return entry.detection.gfd_products[0] if entry.detection.gfd_products else entry.name


def _profile_memory_mib(profile: str) -> int:
    match = _PROFILE_MEMORY.search(profile)
    return int(match.group(1)) * 1024 if match else 0


def _resource_labels(
    resource: str, product: str, count: int, replicas: int, config: PluginConfig | None
) -> dict[str, str]:
    """`resourceLabeler.baseLabeler`: product (`-SHARED` when replicated and not renamed), count, replicas, strategy."""
    replication = config.replication(resource) if config is not None else None
    shared = replication is not None and replication.replicas > 1
    return {
        f"{resource}.product": f"{product}-SHARED" if shared and replication and not replication.rename else product,
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": config.sharing if shared and config is not None else "none",
    }


def _replicas(resource: str, config: PluginConfig) -> int:
    replication = config.replication(resource)
    return replication.replicas if replication is not None else 1


def gfd_labels(gpus: tuple[Gpu, ...], config: PluginConfig) -> dict[str, str]:
    """The labels GPU Feature Discovery publishes for these GPUs under this config."""
    if not gpus:
        return {}
    product = _product(gpus[0].model)
    full = [g for g in gpus if not g.mig_enabled]
    migs = [g for g in gpus if g.mig_enabled]
    # newGPULabelers: MIG-enabled GPUs are labelled without sharing (replicas 0); whole GPUs of the
    # same name override them, with sharing; the count is every GPU of that name.
    if full:
        labels = _resource_labels(NVIDIA_GPU, product, len(gpus), _replicas(NVIDIA_GPU, config), config)
    else:
        labels = _resource_labels(NVIDIA_GPU, product, len(gpus), 0, None)
    labels[f"{NVIDIA_GPU}.memory"] = str(gpus[0].memory_mib)
    if config.strategy == "none":
        return labels
    labels[conventions.GFD_MIG_STRATEGY_LABEL] = config.strategy
    if config.strategy == "single":
        if not migs:
            return labels
        profiles = {p for g in migs for p in g.mig_devices}
        if any(not g.mig_devices for g in migs) or full or len(profiles) != 1:
            # `newInvalidMigStrategyLabeler` (internal/lm/mig-strategy.go): sharing-strategy is empty, not `none`
            labels |= {
                conventions.GFD_PRODUCT_LABEL: product + conventions.GFD_MIG_INVALID_SUFFIX,
                conventions.GFD_COUNT_LABEL: "0",
                f"{NVIDIA_GPU}.replicas": "0",
                f"{NVIDIA_GPU}.memory": "0",
                f"{NVIDIA_GPU}.sharing-strategy": "",
            }
            return labels
        (profile,) = profiles
        devices = sum(len(g.mig_devices) for g in migs)
        mig_product = f"{product}-MIG-{catalog.mig_name(profile)}"
        labels |= _resource_labels(NVIDIA_GPU, mig_product, devices, _replicas(NVIDIA_GPU, config), config)
        labels[f"{NVIDIA_GPU}.memory"] = str(_profile_memory_mib(profile))
        return labels
    for profile, count in Counter(p for g in migs for p in g.mig_devices).items():
        resource = catalog.mig_resource(profile)
        mig_product = f"{product}-MIG-{catalog.mig_name(profile)}"
        labels |= _resource_labels(resource, mig_product, count, _replicas(resource, config), config)
        labels[f"{resource}.memory"] = str(_profile_memory_mib(profile))
    return labels


def device_plugin_deployed(labels: Mapping[str, str]) -> bool:
    """Whether the GPU Operator runs the device plugin on a node with these labels: its DaemonSet selects
    `nvidia.com/gpu.deploy.device-plugin=true`, a value the operator writes only where the label is missing or
    empty (NVIDIA/gpu-operator `controllers/state_manager.go` `addGPUStateLabels`), so `false` keeps the plugin
    off the node and the kubelet then reports 0 of what it advertised."""
    return (labels.get(conventions.DEVICE_PLUGIN_DEPLOY_LABEL) or "true") == "true"


def is_gfd_label(key: str) -> bool:
    return key in _GFD_GPU_KEYS or key == conventions.GFD_MIG_STRATEGY_LABEL or key.startswith(_MIG_PREFIX)


@dataclass(frozen=True)
class Advertised:
    """What the device plugin advertises to the kubelet; `error` when it fails to start (nothing then)."""

    resources: dict[str, int] = field(default_factory=dict)
    error: str = ""


def advertise(gpus: tuple[Gpu, ...], config: PluginConfig) -> Advertised:
    """The device plugin's resources for these GPUs under this config (`rm.NewDeviceMap`).

    MPS under an effective `mixed` strategy: the plugin refuses to start (`cmd/nvidia-device-plugin/main.go`
    `validateFlags`: "using --mig-strategy=mixed is not supported with MPS"). A MIG-enabled GPU without MIG
    devices stops the plugin under `single` and is skipped with a warning under `mixed`, the other GPUs still
    served (`internal/rm/device_map.go` `assertAllMigDevicesAreValid`).
    """
    if config.sharing == "mps" and config.strategy == "mixed":
        return Advertised(error="unable to validate flags: using --mig-strategy=mixed is not supported with MPS")
    devices: Counter[str] = Counter()
    full = [g for g in gpus if not g.mig_enabled]
    migs = [g for g in gpus if g.mig_enabled]
    if config.strategy == "none":
        devices[NVIDIA_GPU] = len(gpus)  # MIG-enabled GPUs too: the none strategy ignores MIG
    else:
        if full:
            devices[NVIDIA_GPU] = len(full)
        if config.strategy == "single" and any(not g.mig_devices for g in migs):
            return Advertised(error="at least one device with migEnabled=true was not configured correctly")
        profiles = Counter(p for g in migs for p in g.mig_devices)
        if config.strategy == "single":
            if len(profiles) > 1:
                return Advertised(error="invalid MIG configuration: more than one MIG device type present on node")
            if full and migs:
                return Advertised(error="all devices on the node must be configured with the same migEnabled value")
            if migs:
                devices[NVIDIA_GPU] = sum(profiles.values())
        else:
            for profile, count in profiles.items():
                devices[catalog.mig_resource(profile)] = count
        if config.sharing == "mps" and migs:
            return Advertised(error="MPS sharing is not supported on MIG devices")
    resources: Counter[str] = Counter()
    for name, count in devices.items():
        replication = config.replication(name)
        if replication is None:
            resources[name] += count
        else:
            resources[replication.rename or name] += count * replication.replicas
    return Advertised(resources=dict(resources))


# ---------------------------------------------------------------- ConfigMaps as pods see them
