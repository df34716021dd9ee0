"""NVIDIA's node-side components, simulated: what they would write on a node, given what they would see.

One simulation for the demo, the operator's integration tests and the convergence benchmark. The
core is pure (no I/O, no clock of its own: every step takes `now`); `Simulation` keeps the
per-node state between steps; the drivers (`accelpool_demo.simulators.NvidiaComponents`, the
integration tests' conftest, benchmarks/operator_convergence.py) read nodes and ConfigMaps,
call `Simulation.node`, and send the `NodeChanges` it returns.

Modelled, each after NVIDIA's own code (paths inside the public repositories):

- GPU Feature Discovery labels, `gfd_labels` (NVIDIA/k8s-device-plugin `internal/lm/resource.go`,
  `internal/lm/mig-strategy.go`, `internal/lm/strategy.go`): `nvidia.com/gpu.{product,count,
  replicas,sharing-strategy,memory}`; `nvidia.com/mig.strategy` under single and mixed;
  `<model>-MIG-<profile>` (single), `<model>-MIG-INVALID` with count, replicas and memory 0 for
  a layout single cannot serve, `nvidia.com/mig-<profile>.*` per profile (mixed); `+` written `.`.
- The device plugin's advertised resources, `advertise` (`internal/rm/device_map.go`,
  `internal/rm/rm.go`): whole GPUs, MIG devices as `nvidia.com/gpu` (single) or
  `nvidia.com/mig-<profile>` (mixed), times sharing replicas; the errors that stop the plugin
  (an empty MIG-enabled GPU, more than one MIG device type under single, MIG and non-MIG GPUs
  under single, MPS on MIG devices, `internal/plugin/mps.go`): nothing advertised, the kubelet
  then reports 0.
- The effective strategy, `plugin_config`: env `MIG_STRATEGY` (the GPU Operator sets it from
  ClusterPolicy `spec.mig.strategy`) beats the file's `flags.migStrategy`
  (`api/config/v1/flags.go` `updateFromCLIFlag`).
- The config-manager sidecar, `ConfigManager` (`cmd/config-manager/main.go`): follows the
  `nvidia.com/device-plugin.config` label; an unset label takes the fallback (`empty` in the GPU
  Operator, `named` = the `default` key in the standalone chart); a key missing from the mounted
  ConfigMap makes it exit (crash loop: the plugin keeps the config it runs with; retried at each
  restart); it signals the plugin only when the selected key changes, so an edit of that key's
  content is not loaded until the plugin restarts.
- The kubelet's ConfigMap projection, `Projection`: pods see a ConfigMap's update only after a
  sync delay (up to about a minute in real clusters).
- The MIG manager, `MigManager` (NVIDIA/mig-parted `cmd/nvidia-mig-manager/main.go`,
  `pkg/mig/reconfigure/reconfigure.go`): reacts to changes of `nvidia.com/mig.config`
  (`SyncableMigConfig`: values coalesce, a removed label wakes nothing); an entry missing from
  the mounted file → `failed`, not retried until the label changes; an entry already applied
  → `success`; otherwise `pending` → (`rebooting`, when a MIG mode change needs a reboot) →
  apply → `success`, restarting the plugin and GFD. A profile the GPU does not offer creates
  nothing and still ends in `success`; a label changed mid-run lets the run finish (and
  write `success` for the old value) before the new value is applied.

Not modelled: the `nvidia.com/gpu.deploy.*` pause labels, `device-filter` in mig-parted entries,
per-GPU validation of MIG budgets (accelpool validates layouts before writing them), GFD's
architecture and attribute labels other than memory.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from accelpool import conventions, detection
from accelpool import nvidia as nvidia_configs
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
    fallback: Fallback = "empty"
    """Config-manager `FALLBACK_STRATEGIES` for an unset label: `empty` (GPU Operator) or `named` (standalone chart)."""
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


@dataclass(frozen=True)
class Gpu:
    """One physical GPU: its catalog model, memory, and MIG layout (profiles as mig-parted spells them)."""

    model: str
    memory_mib: int
    mig_enabled: bool = False
    mig_devices: tuple[str, ...] = ()


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


def plugin_config(document: str | None, strategy_override: Strategy | None = None) -> PluginConfig:
    """The config the plugin loads from a config file's text (None: the empty config), env beating the file."""
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
                replicas=int(r.get("replicas") or 0),
                rename=f"{r.get('name')}.shared" if rename_by_default else "",
            )
            for r in section["resources"]
            if isinstance(r, dict)
        )
        return PluginConfig(strategy=_strategy(strategy), sharing=mode, replicated=replicated)  # type: ignore[arg-type]
    return PluginConfig(strategy=_strategy(strategy))


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
            labels |= {
                conventions.GFD_PRODUCT_LABEL: product + conventions.GFD_MIG_INVALID_SUFFIX,
                conventions.GFD_COUNT_LABEL: "0",
                f"{NVIDIA_GPU}.replicas": "0",
                f"{NVIDIA_GPU}.memory": "0",
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


def _is_gfd_label(key: str) -> bool:
    return key in _GFD_GPU_KEYS or key == conventions.GFD_MIG_STRATEGY_LABEL or key.startswith(_MIG_PREFIX)


@dataclass(frozen=True)
class Advertised:
    """What the device plugin advertises to the kubelet; `error` when it fails to start (nothing then)."""

    resources: dict[str, int] = field(default_factory=dict)
    error: str = ""


def advertise(gpus: tuple[Gpu, ...], config: PluginConfig) -> Advertised:
    """The device plugin's resources for these GPUs under this config (`rm.NewDeviceMap`)."""
    devices: Counter[str] = Counter()
    full = [g for g in gpus if not g.mig_enabled]
    migs = [g for g in gpus if g.mig_enabled]
    if config.strategy == "none":
        devices[NVIDIA_GPU] = len(gpus)  # MIG-enabled GPUs too: the none strategy ignores MIG
    else:
        if full:
            devices[NVIDIA_GPU] = len(full)
        if any(not g.mig_devices for g in migs):
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


@dataclass
class Projection:
    """A ConfigMap's data as mounted in pods: an update shows `delay` seconds after it was observed."""

    delay: float = 0.0
    parse: Callable[[Mapping[str, str]], Any] = dict
    _history: list[tuple[float, int, Any]] = field(default_factory=list)
    _last: Mapping[str, str] | None = None
    _versions: int = 0

    def observe(self, data: Mapping[str, str] | None, now: float) -> None:
        """The ConfigMap's data in the API now (None while it does not exist: the pods keep what they have)."""
        if data is None or data == self._last:
            return
        self._last = dict(data)
        self._versions += 1
        self._history.append((now, self._versions, self.parse(self._last)))

    def mounted(self, now: float) -> tuple[int, Any]:
        """(version, parsed data) the pods see now; (0, None) before anything reached them."""
        visible = [i for i, (t, _, _) in enumerate(self._history) if t <= now - self.delay]
        if not visible:
            return 0, None
        del self._history[: visible[-1]]  # older versions can no longer be seen
        _, version, parsed = self._history[0]
        return version, parsed


def mig_configs(data: Mapping[str, str]) -> dict[str, Any]:
    """The `mig-configs` entries of a mig-parted ConfigMap's documents."""
    configs: dict[str, Any] = {}
    for text in data.values():
        document = nvidia_configs.load(text)
        if isinstance(document, dict) and isinstance(document.get("mig-configs"), dict):
            configs.update(document["mig-configs"])
    return configs


# ---------------------------------------------------------------- the config-manager sidecar


@dataclass(frozen=True)
class ConfigManager:
    """The device plugin's (and GFD's) config-manager sidecar, and the config the plugin runs with."""

    started: bool = False
    label: str = ""
    selected: str | None = None
    """The key the plugin's config symlink points to ("" = the empty config); None before the first."""
    document: str | None = None
    """The config text the plugin and GFD loaded (None: the empty config)."""
    error: str = ""
    restart_at: float = 0.0

    def step(
        self, label: str | None, mounted: Mapping[str, str] | None, now: float, installation: Installation
    ) -> tuple[ConfigManager, tuple[str, ...]]:
        if mounted is None:  # the ConfigMap has not reached the node: the pod is not running yet
            return self, ()
        value = label or ""
        if not self.started:
            return replace(self, started=True, label=value)._select(value, mounted, now, installation)
        if self.error:  # exited: the kubelet restarts it after a back-off; it reads the label afresh
            if now < self.restart_at:
                return self, ()
            return replace(self, label=value)._select(value, mounted, now, installation)
        if value != self.label:
            return replace(self, label=value)._select(value, mounted, now, installation)
        return self, ()

    def _select(
        self, value: str, mounted: Mapping[str, str], now: float, installation: Installation
    ) -> tuple[ConfigManager, tuple[str, ...]]:
        key: str | None = value
        if not value:
            named = NAMED_FALLBACK if NAMED_FALLBACK in mounted else None
            key = "" if installation.fallback == "empty" else named
        if key is None or (key and key not in mounted):
            error = (
                f"specified config {key} does not exist"
                if key
                else "no config was set, no default was provided, and all fallbacks failed"
            )
            failed = replace(self, error=error, restart_at=now + installation.restart_seconds)
            return failed, (f"config-manager exited: {error}; the device plugin keeps its current config",)
        if key == self.selected:  # "Already configured. Skipping update..." (no signal)
            return replace(self, error=""), ()
        loaded = replace(self, selected=key, document=mounted[key] if key else None, error="")
        return loaded, (f"device plugin and GFD reloaded with config {key or '(empty)'}",)

    def reloaded(self, mounted: Mapping[str, str] | None) -> ConfigManager:
        """The plugin and GFD restarted: they read the selected key's mounted content again."""
        if not self.selected or mounted is None or self.selected not in mounted:
            return self
        return replace(self, document=mounted[self.selected])


# ---------------------------------------------------------------- the MIG manager


def apply_entry(entry: Any, gpus: tuple[Gpu, ...], *, broken: bool = False) -> tuple[Gpu, ...]:
    """mig-parted `apply`: each GPU takes the first device spec that selects it (`devices: all` or its index).

    A profile the GPU does not offer creates nothing; `broken` (a demo fault) creates nothing at all.
    GPUs that are not MIG-capable are left alone.
    """
    specs = entry if isinstance(entry, list) else []
    result = []
    for index, gpu in enumerate(gpus):
        spec = next(
            (
                s
                for s in specs
                if isinstance(s, dict)
                and (s.get("devices") == "all" or (isinstance(s.get("devices"), list) and index in s["devices"]))
            ),
            None,
        )
        model = catalog.BY_NAME[gpu.model]
        if spec is None or not model.mig_capable:
            result.append(gpu)
            continue
        if not spec.get("mig-enabled"):
            result.append(replace(gpu, mig_enabled=False, mig_devices=()))
            continue
        wanted = spec.get("mig-devices") if isinstance(spec.get("mig-devices"), dict) else {}
        devices = tuple(
            str(profile)
            for profile, count in (wanted or {}).items()
            if model.mig_profile(str(profile)) is not None
            for _ in range(int(count or 0))
        )
        result.append(replace(gpu, mig_enabled=True, mig_devices=() if broken else devices))
    return tuple(result)


@dataclass(frozen=True)
class MigStep:
    """One MIG manager step: its new state and GPUs, the states it wrote, whether it restarted the plugin and GFD."""

    manager: MigManager
    gpus: tuple[Gpu, ...]
    states: tuple[str, ...] = ()
    events: tuple[str, ...] = ()
    restarted_clients: bool = False


@dataclass(frozen=True)
class MigManager:
    """NVIDIA's MIG manager on one node: `SyncableMigConfig` fed by the node informer, and the reconfigure loop."""

    started: bool = False
    label: str = ""
    """The informer's last value of `nvidia.com/mig.config` ("" when absent)."""
    current: str = ""
    last_read: str = ""
    waiting: bool = False
    """Blocked in `Get()` until a broadcast (only a non-empty `Set` broadcasts)."""
    woken: bool = False
    running: str | None = None
    phase: str = ""
    due: float = 0.0

    def _set(self, value: str) -> MigManager:
        return replace(self, current=value, woken=self.woken or (self.waiting and value != ""))

    def step(
        self,
        label: str | None,
        configs: Mapping[str, Any] | None,
        gpus: tuple[Gpu, ...],
        now: float,
        installation: Installation,
        *,
        broken: bool = False,
    ) -> MigStep:
        if configs is None:  # the ConfigMap has not reached the node: the pod is not running yet
            return MigStep(self, gpus)
        value = label or ""
        manager = self
        if not manager.started:  # the informer's AddFunc
            manager = replace(manager, started=True, label=value)._set(value)
        elif value != manager.label:  # UpdateFunc: only a changed value
            manager = replace(manager, label=value)._set(value)
        states: list[str] = []
        events: list[str] = []
        restarted = False
        for _ in range(16):  # bounded: every pass either blocks or finishes a run
            if manager.running is None:
                if manager.waiting:
                    if not manager.woken:
                        break
                    manager = replace(manager, waiting=False, woken=False)
                elif manager.last_read == manager.current:
                    manager = replace(manager, waiting=True, woken=False)
                    break
                selected = manager.current
                manager = replace(manager, last_read=selected)
                if selected not in configs:
                    states.append("failed")
                    events.append(f"mig-manager: config {selected!r} is not in the mounted mig-parted file: failed")
                    continue
                target = apply_entry(configs[selected], gpus, broken=broken)
                if target == gpus:
                    states.append("success")
                    continue
                states.append("pending")
                manager = replace(manager, running=selected, phase="pending", due=now + installation.apply_seconds)
            if now < manager.due:
                break
            running = manager.running or ""
            if running not in configs:  # the file changed under the run: mig-parted apply fails
                states.append("failed")
                events.append(f"mig-manager: config {running!r} left the mounted mig-parted file: failed")
                manager = replace(manager, running=None, phase="", due=0.0)
                continue
            target = apply_entry(configs[running], gpus, broken=broken)
            mode_change = any(g.mig_enabled != t.mig_enabled for g, t in zip(gpus, target, strict=True))
            if manager.phase == "pending" and installation.with_reboot and mode_change:
                states.append("rebooting")
                gpus = tuple(replace(g, mig_enabled=t.mig_enabled) for g, t in zip(gpus, target, strict=True))
                manager = replace(manager, phase="rebooting", due=now + installation.reboot_seconds)
                continue
            if manager.phase == "rebooting":  # back from the reboot: a new MIG manager reads the label afresh
                events.append("mig-manager: node rebooted")
                manager = replace(MigManager(), started=True, label=manager.label)._set(manager.label)
                continue
            gpus = target
            states.append("success")
            events.append(f"mig-manager: applied {running}")
            restarted = True
            manager = replace(manager, running=None, phase="", due=0.0)
        return MigStep(manager, gpus, tuple(states), tuple(events), restarted)


# ---------------------------------------------------------------- one node


@dataclass(frozen=True)
class NodeState:
    """Everything NVIDIA's components keep about one node."""

    gpus: tuple[Gpu, ...]
    config_manager: ConfigManager = ConfigManager()
    mig_manager: MigManager = MigManager()

    @property
    def busy(self) -> bool:
        """A timer runs: a MIG reconfiguration, or a sidecar waiting to restart."""
        return self.mig_manager.running is not None or bool(self.config_manager.error)


@dataclass(frozen=True)
class Mounted:
    """The two ConfigMaps as the node's pods see them (None: not there yet)."""

    device_plugin: Mapping[str, str] | None = None
    """Keys → config text."""
    mig_configs: Mapping[str, Any] | None = None
    """mig-parted `mig-configs` entries."""


@dataclass(frozen=True)
class NodeChanges:
    """What to write: node labels (None removes), resources for `status.capacity` and `status.allocatable`."""

    labels: dict[str, str | None] = field(default_factory=dict)
    resources: dict[str, str] = field(default_factory=dict)
    events: tuple[str, ...] = ()
    plugin_error: str = ""

    def __bool__(self) -> bool:
        return bool(self.labels or self.resources)


def inventory(labels: Mapping[str, str], capacity: Mapping[str, str] | None = None) -> tuple[Gpu, ...] | None:
    """An NVIDIA node's GPUs, MIG disabled, however it was labelled (GFD, GKE, Karpenter, instance type):
    the GPU Operator runs GFD and the device plugin on every NVIDIA node. None for any other node."""
    found = detection.detect(labels, capacity)
    if found is None or found.accelerator.vendor != catalog.Vendor.NVIDIA or not found.count:
        return None
    memory = found.memory_mib or found.accelerator.memory_gb * 1024
    return tuple(Gpu(found.accelerator.name, memory) for _ in range(found.count))


def node_step(
    state: NodeState,
    labels: Mapping[str, str],
    resources: Mapping[str, str],
    mounted: Mounted,
    now: float,
    installation: Installation,
    *,
    broken: bool = False,
) -> tuple[NodeState, NodeChanges]:
    """One step of every NVIDIA component on a node: the MIG manager, the sidecar, then GFD and the plugin.

    `resources` is the node's current `status.capacity`; the changes hold only what differs.
    """
    mig = state.mig_manager.step(
        labels.get(conventions.MIG_CONFIG_LABEL), mounted.mig_configs, state.gpus, now, installation, broken=broken
    )
    manager = state.config_manager
    if mig.restarted_clients:
        manager = manager.reloaded(mounted.device_plugin)
    manager, sidecar_events = manager.step(
        labels.get(conventions.DEVICE_PLUGIN_CONFIG_LABEL), mounted.device_plugin, now, installation
    )
    new_state = NodeState(gpus=mig.gpus, config_manager=manager, mig_manager=mig.manager)
    label_changes: dict[str, str | None] = {}
    if mig.states and labels.get(conventions.MIG_CONFIG_STATE_LABEL) != mig.states[-1]:
        label_changes[conventions.MIG_CONFIG_STATE_LABEL] = mig.states[-1]
    resource_changes: dict[str, str] = {}
    error = ""
    if manager.started:
        config = plugin_config(manager.document, installation.strategy_override)
        desired = gfd_labels(new_state.gpus, config)
        label_changes |= {k: v for k, v in desired.items() if labels.get(k) != v}
        label_changes |= {k: None for k in labels if _is_gfd_label(k) and k not in desired}
        advertised = advertise(new_state.gpus, config)
        error = advertised.error
        wanted = {k: str(v) for k, v in advertised.resources.items()}
        for key in {*wanted, *(k for k in resources if k.startswith("nvidia.com/"))}:
            value = wanted.get(key, "0")  # the kubelet reports 0 for what no plugin advertises
            if resources.get(key) != value:
                resource_changes[key] = value
    return new_state, NodeChanges(label_changes, resource_changes, (*mig.events, *sidecar_events), error)


# ---------------------------------------------------------------- the cluster


@dataclass
class Simulation:
    """NVIDIA's components on every NVIDIA node: per-node state and the two projected ConfigMaps."""

    installation: Installation = Installation()
    nodes: dict[str, NodeState] = field(default_factory=dict)
    device_plugin: Projection = field(init=False)
    mig: Projection = field(init=False)
    _seen: dict[str, tuple[Any, ...]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.device_plugin = Projection(self.installation.propagation_seconds)
        self.mig = Projection(self.installation.propagation_seconds, mig_configs)

    def observe(self, device_plugin: Mapping[str, str] | None, mig: Mapping[str, str] | None, now: float) -> None:
        """The two ConfigMaps' `data` in the API now (None when a ConfigMap does not exist)."""
        self.device_plugin.observe(device_plugin, now)
        self.mig.observe(mig, now)

    def set_strategy_override(self, strategy: Strategy | None, now: float) -> None:
        """ClusterPolicy `spec.mig.strategy` changed: the GPU Operator restarts the plugin and GFD with the new env."""
        if strategy == self.installation.strategy_override:
            return
        self.installation = replace(self.installation, strategy_override=strategy)
        _, mounted = self.device_plugin.mounted(now)
        self.nodes = {
            name: replace(state, config_manager=state.config_manager.reloaded(mounted))
            for name, state in self.nodes.items()
        }
        self._seen.clear()

    def node(self, node: Mapping[str, Any], now: float, *, broken: bool = False) -> NodeChanges:
        """What NVIDIA's components would write on this Node object now."""
        metadata = node.get("metadata") or {}
        name = str(metadata.get("name"))
        labels: Mapping[str, str] = metadata.get("labels") or {}
        capacity: Mapping[str, str] = (node.get("status") or {}).get("capacity") or {}
        state = self.nodes.get(name)
        if state is None:
            gpus = inventory(labels, capacity)
            if gpus is None:
                return NodeChanges()
            state = NodeState(gpus)
        dp_version, dp = self.device_plugin.mounted(now)
        mig_version, mig = self.mig.mounted(now)
        seen = (metadata.get("resourceVersion"), dp_version, mig_version, broken)
        if name in self.nodes and not state.busy and self._seen.get(name) == seen:
            return NodeChanges()  # nothing it watches changed since its last step
        state, changes = node_step(state, labels, capacity, Mounted(dp, mig), now, self.installation, broken=broken)
        self.nodes[name] = state
        self._seen[name] = seen
        return changes
