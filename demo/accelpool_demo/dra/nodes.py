"""NVIDIA's DRA kubelet plugin on every node it runs on, and the ResourceSlice writes that keep each node's
slice what its plugin publishes. Pure: the driver (`accelpool_demo.dra.components.DraNodeComponents`)
lists nodes and slices, calls `KubeletPlugins.node` and `reconcile`, and sends the writes.

- Where the plugin runs (`Installation.node_selector`): the NVIDIA DRA chart's kubelet-plugin DaemonSet
  runs on the nodes its `kubeletPlugin.nodeSelector`/affinity selects (kubernetes-sigs/dra-driver-nvidia-gpu
  `deployments/helm/dra-driver-nvidia-gpu/values.yaml`; the default affinity takes every NVIDIA GPU node).
  The chart refuses GPUs next to the device plugin (`templates/validation.yaml`), so the demo installs it
  with `nvidia.com/gpu.deploy.device-plugin: "false"` as node selector: the nodes accelpool moves to DRA,
  where the GPU Operator runs no device plugin (NVIDIA/gpu-operator `controllers/state_manager.go`).
  `node_selector=None` is the chart's default.
- A plugin starts when its node is selected (discovering the node's GPUs as they are then), and stops
  when it no longer is: the kubelet then deletes the driver's slices for the node (kubernetes/kubernetes
  `pkg/kubelet/cm/dra/plugin/registration.go`, after the plugin unregisters). `restart` is its pod
  deleted and recreated: rediscovery (a new static MIG layout shows only then) and no health taints.
- Slices (`reconcile`), after k8s.io/dynamic-resource-allocation `resourceslice/resourceslicecontroller.go`
  `syncPool`: one slice per node, created with `generateName: <node>-gpu.nvidia.com-`, pool generation 1;
  a changed device list is written in place with the same generation (a one-slice pool needs a single
  update call, so the controller keeps the generation); a taint's `timeAdded` that the API server
  stamped is kept when the same taint is written again (`copyTaintTimeAdded`); extra or stale-generation
  slices are deleted; no desired devices (the plugin stopped) deletes the node's slices.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from accelpool_api import conventions
from accelpool_demo.dra.plugin import DRIVER, Plugin, Versions, resource_slice
from accelpool_demo.nvidia import Gpu

DRA_NODE_SELECTOR: Mapping[str, str] = {conventions.DEVICE_PLUGIN_DEPLOY_LABEL: "false"}
DRIVER_VERSION_LABEL = "nvidia.com/cuda.driver-version.full"
"""GFD's label of the node's driver version: the plugin reads the same driver through NVML, so a node that
carries it publishes that `driverVersion` (the demo's nodes do)."""


@dataclass(frozen=True)
class Installation:
    """How the NVIDIA DRA chart is installed."""

    node_selector: Mapping[str, str] | None = field(default_factory=lambda: dict(DRA_NODE_SELECTOR))
    """`kubeletPlugin.nodeSelector`; None: the chart's default affinity, every NVIDIA GPU node."""
    health_check: bool = False
    """Driver gate NVMLDeviceHealthCheck: XIDs taint devices (off: XIDs change nothing). Off as in NVIDIA's chart
    (an alpha gate, `pkg/featuregates/featuregates.go`): a driver taint stays until the plugin restarts, so a
    cleared fault would keep its GPU out of service."""
    versions: Versions = field(default_factory=Versions)
    """The driver stack where a node has no GFD driver-version label."""
    seed: int = 0
    """The seed of the node's GPU identities; the demo's agents run with the default, 0."""
    additional_xids_to_ignore: tuple[int, ...] = ()

    def runs_on(self, labels: Mapping[str, str]) -> bool:
        if self.node_selector is None:
            return True
        return all(labels.get(key) == value for key, value in self.node_selector.items())


@dataclass
class KubeletPlugins:
    """The plugin of every node it runs on, kept between steps."""

    installation: Installation = field(default_factory=Installation)
    plugins: dict[str, Plugin] = field(default_factory=dict)

    def node(self, name: str, labels: Mapping[str, str], gpus: Sequence[Gpu] | None) -> list[dict[str, Any]] | None:
        """The devices the node's slice should hold now, or None where no plugin runs (no NVIDIA GPUs, or not
        selected): its slices go. A plugin starts on its first call on a selected node."""
        if not gpus or not self.installation.runs_on(labels):
            self.plugins.pop(name, None)
            return None
        plugin = self.plugins.get(name)
        if plugin is None:
            versions = self.installation.versions
            if labels.get(DRIVER_VERSION_LABEL):
                versions = replace(versions, driver=labels[DRIVER_VERSION_LABEL])
            plugin = Plugin.started(
                gpus,
                seed=self.installation.seed,
                versions=versions,
                additional_xids_to_ignore=self.installation.additional_xids_to_ignore,
            )
            self.plugins[name] = plugin
        return plugin.devices()

    def restart(self, name: str, gpus: Sequence[Gpu]) -> bool:
        """The node's plugin pod replaced: it rediscovers `gpus` and forgets its taints. False where none runs."""
        plugin = self.plugins.get(name)
        if plugin is None:
            return False
        self.plugins[name] = plugin.restarted(gpus)
        return True

    def xid(self, name: str, minor: int, code: int, *, mig_profile: str | None = None) -> bool:
        """NVML's XID event on the node's GPU `minor` (or a MIG device of it); False where nothing changed:
        no plugin, the health check off, or a device the plugin does not publish."""
        plugin = self.plugins.get(name)
        if plugin is None or not self.installation.health_check:
            return False
        tainted = plugin.xid(minor, code, mig_profile=mig_profile)
        self.plugins[name] = tainted
        return tainted != plugin

    def gpu_lost(self, name: str) -> bool:
        plugin = self.plugins.get(name)
        if plugin is None or not self.installation.health_check:
            return False
        self.plugins[name] = plugin.gpu_lost()
        return True


# ---------------------------------------------------------------- slice writes


@dataclass(frozen=True)
class SliceWrite:
    """One write to `/apis/resource.k8s.io/v1/resourceslices`: POST a new slice, PUT one back, DELETE one."""

    method: Literal["POST", "PUT", "DELETE"]
    name: str = ""
    body: Mapping[str, Any] | None = None


def _without_time(devices: Sequence[Mapping[str, Any]]) -> list[Any]:
    """Devices compared as `DevicesDeepEqual` does: a taint's `timeAdded` does not count."""
    plain = copy.deepcopy([dict(d) for d in devices])
    for device in plain:
        for taint in device.get("taints") or []:
            taint.pop("timeAdded", None)
    return plain


def _keep_time_added(existing: Sequence[Mapping[str, Any]], desired: Sequence[Mapping[str, Any]]) -> list[Any]:
    """`copyTaintTimeAdded`: a desired taint without `timeAdded` keeps the stored one of the same key, value
    and effect on the same device."""
    stored = {str(d.get("name")): d.get("taints") or [] for d in existing}
    result = copy.deepcopy([dict(d) for d in desired])
    for device in result:
        for taint in device.get("taints") or []:
            if "timeAdded" in taint:
                continue
            for old in stored.get(str(device.get("name")), []):
                same = all(old.get(k) == taint.get(k) for k in ("key", "value", "effect"))
                if same and old.get("timeAdded"):
                    taint["timeAdded"] = old["timeAdded"]
                    break
    return result


def node_slices(slices: Sequence[Mapping[str, Any]], node_name: str) -> list[Mapping[str, Any]]:
    """The slices of the node's pool of this driver (the controller's informer filters on driver and node)."""
    return [
        s
        for s in slices
        if (s.get("spec") or {}).get("driver") == DRIVER and (s.get("spec") or {}).get("nodeName") == node_name
    ]


def reconcile(
    node_name: str, node_uid: str, devices: Sequence[Mapping[str, Any]] | None, existing: Sequence[Mapping[str, Any]]
) -> list[SliceWrite]:
    """The writes that make the node's slices (`existing`, from `node_slices`) publish `devices`."""
    ordered = sorted(existing, key=lambda s: str(s["metadata"]["name"]))
    if devices is None:
        return [SliceWrite("DELETE", str(s["metadata"]["name"])) for s in ordered]
    generation = max((int(s["spec"]["pool"].get("generation") or 0) for s in ordered), default=0)
    current = [s for s in ordered if int(s["spec"]["pool"].get("generation") or 0) == generation]
    writes = [SliceWrite("DELETE", str(s["metadata"]["name"])) for s in ordered if s not in current[:1]]
    if not current:
        return [*writes, SliceWrite("POST", body=resource_slice(node_name, node_uid, devices, generation + 1))]
    kept = current[0]
    pool = {"name": node_name, "generation": generation, "resourceSliceCount": 1}
    spec = kept.get("spec") or {}
    if spec.get("pool") == pool and _without_time(spec.get("devices") or []) == _without_time(devices):
        return writes
    body = copy.deepcopy(dict(kept))
    body["spec"] = {**dict(spec), "pool": pool, "devices": _keep_time_added(spec.get("devices") or [], devices)}
    return [*writes, SliceWrite("PUT", str(kept["metadata"]["name"]), body)]
