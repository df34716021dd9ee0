"""One node's NVIDIA components stepped together (`node_step`), and `Simulation`, which keeps each
node's state between steps for the drivers."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from accelpool.model import detection
from accelpool_api import conventions
from accelpool_core import catalog
from accelpool_demo.nvidia.config_manager import ConfigManager, Projection, mig_configs
from accelpool_demo.nvidia.devices import (
    Advertised,
    Gpu,
    Installation,
    Strategy,
    advertise,
    device_plugin_deployed,
    gfd_labels,
    is_gfd_label,
    plugin_config,
)
from accelpool_demo.nvidia.mig_manager import MigManager


@dataclass(frozen=True)
class NodeState:
    """Everything NVIDIA's components keep about one node."""

    gpus: tuple[Gpu, ...]
    config_manager: ConfigManager = field(default_factory=ConfigManager)
    mig_manager: MigManager = field(default_factory=MigManager)

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
    mig_labels: Sequence[str | None] = (),
) -> tuple[NodeState, NodeChanges]:
    """One step of every NVIDIA component on a node: the MIG manager, the sidecar, then GFD and the plugin.

    `resources` is the node's current `status.capacity`; the changes hold only what differs. `mig_labels`: the
    values of `nvidia.com/mig.config` the node's watch events carried since the last step, oldest first
    (`MigManager.step`).
    """
    mig = state.mig_manager.step(
        labels.get(conventions.MIG_CONFIG_LABEL),
        mounted.mig_configs,
        state.gpus,
        now,
        installation,
        broken=broken,
        seen=mig_labels,
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
        label_changes |= {k: None for k in labels if is_gfd_label(k) and k not in desired}
        advertised = advertise(new_state.gpus, config) if device_plugin_deployed(labels) else Advertised()
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

    installation: Installation = field(default_factory=Installation)
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

    def node(
        self, node: Mapping[str, Any], now: float, *, broken: bool = False, mig_labels: Sequence[str | None] = ()
    ) -> NodeChanges:
        """What NVIDIA's components would write on this Node object now; `mig_labels`: the values of
        `nvidia.com/mig.config` its watch events carried since the last call, oldest first (a driver that
        only lists nodes passes none, and misses a value that came and went between two calls)."""
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
        if name in self.nodes and not state.busy and not mig_labels and self._seen.get(name) == seen:
            return NodeChanges()  # nothing it watches changed since its last step
        state, changes = node_step(
            state, labels, capacity, Mounted(dp, mig), now, self.installation, broken=broken, mig_labels=mig_labels
        )
        self.nodes[name] = state
        self._seen[name] = seen
        return changes
