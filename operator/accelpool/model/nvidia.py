"""The NVIDIA config documents accelpool writes, their names, and what a node serving them advertises.

- `device_plugin_config(spec)`: one pool's k8s-device-plugin config (NVIDIA/k8s-device-plugin
  `api/config/v1`): `version: v1`, `flags.migStrategy` (none, single, mixed) and, with sharing,
  `sharing.timeSlicing` or `sharing.mps` with the pool's replicas and `failRequestsGreaterThanOne`
  (the pool's choice; NVIDIA's default when unset: false for time-slicing, true for MPS).
- `member_configs(pool, spec)`: the names a pool's members select, named by content
  (`accelpool-<pool>-<digest>`, `conventions.config_name`): an edited pool gets new names, so the
  label values change and NVIDIA's config-manager and MIG manager act (they act on a changed value
  only: k8s-device-plugin `cmd/config-manager/main.go`, mig-parted `cmd/nvidia-mig-manager/main.go`).
- `DEFAULT_DEVICE_PLUGIN_CONFIG`: the `default` key, for GPU nodes in no pool: the GPU Operator's
  default strategy, `single`.
- `default_mig_configs()`: NVIDIA's default mig-parted entries (`all-disabled`, `all-enabled`,
  `all-<profile>`, `all-balanced`, per PCI device ID), so nodes in no pool keep their
  `nvidia.com/mig.config` working when the MIG manager reads accelpool's ConfigMap.
- `mig_parted_entry(layout)` / `mig_parted_document(entries)`: mig-parted `version: v1` with a
  `mig-configs` entry per pool (`devices: all, mig-enabled: true, mig-devices: {profile: n}`).
- `serving_difference(...)`: how what a node's device plugin advertises differs from exactly a
  pool's resources (None when it is exactly them).
- what one GPU advertises under a pool's config is `accelpool_api.workloads.resources_per_gpu`
  (the Python API requests from it too);
- `dump` / `load`: the YAML text stored in the ConfigMaps (stable key order).

Formats are in the shared reference `nvidia.md`. Pure; used by the planner, the status and the tests.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import yaml

import accelpool_api as api
from accelpool_api import conventions
from accelpool_api.workloads import mig_devices
from accelpool_core import catalog

CONFIG_VERSION = "v1"
DEFAULT_MIG_STRATEGY = "single"
"""The GPU Operator's default MIG strategy (NVIDIA/gpu-operator `deployments/gpu-operator/values.yaml`
`mig.strategy: single`): what a node in no pool ran with before the cluster pointed the device plugin at
accelpool's ConfigMap. Under `none` a MIG-enabled GPU is advertised whole (`internal/rm/device_map.go`
`buildGPUDeviceMap`), so a node labelled `all-1g.10gb` by its owner would lose its slices."""
DEFAULT_DEVICE_PLUGIN_CONFIG: dict[str, Any] = {
    "version": CONFIG_VERSION,
    "flags": {"migStrategy": DEFAULT_MIG_STRATEGY},
}
MIG_DISABLED_ENTRY: list[dict[str, Any]] = [{"devices": "all", "mig-enabled": False}]
MIG_ENABLED_CONFIG = "all-enabled"
MIG_BALANCED_CONFIG = "all-balanced"

MIG_DEVICE_IDS: dict[str, tuple[str, ...]] = {
    "A30": ("0x20B710DE",),
    "A100-40GB": ("0x20B010DE", "0x20B110DE", "0x20F110DE", "0x20F610DE"),
    "A100-80GB": ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
    "A100-80GB-PCIE": ("0x20B210DE", "0x20B510DE", "0x20F310DE", "0x20F510DE"),
    "H100-80GB": ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
    "H100-80GB-PCIE": ("0x233010DE", "0x233110DE", "0x232210DE", "0x232410DE"),
    "H100-94GB-NVL": ("0x232110DE", "0x233A10DE"),
    "H200-141GB": ("0x233510DE", "0x233B10DE"),
    "GH200-96GB": ("0x234210DE", "0x233D10DE", "0x20B610DE", "0x232910DE"),
    "GH200-144GB": ("0x234810DE",),
    "B200-180GB": ("0x290110DE",),
}
"""PCI device IDs (mig-parted's `device-filter` spelling) of each MIG-capable catalog model and its
siblings with the same MIG profiles (A800, H800, H20, PG506), as NVIDIA's default mig-parted config
groups them (NVIDIA/gpu-operator `assets/state-mig-manager/0400_configmap.yaml`, the comments above
each `device-filter`)."""

_BALANCED = {7: {1: 2, 2: 1, 3: 1}, 4: {1: 2, 2: 1}}
"""`all-balanced` per GPU: compute slices → {profile's slices: instances} (NVIDIA/mig-parted
`pkg/mig/builder/balanced.go` `balancedFormula`)."""


def device_plugin_config(spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator | None = None) -> dict[str, Any]:
    """The device plugin's config for one pool (`resolved`: the spec's accelerator, when already known)."""
    document: dict[str, Any] = {"version": CONFIG_VERSION, "flags": {"migStrategy": spec.mig_strategy()}}
    if spec.sharing is not None:
        resource = (resolved or spec.resolve()).entry.resource
        document["sharing"] = {
            spec.sharing.mode: {
                "renameByDefault": False,
                "failRequestsGreaterThanOne": _fail_requests_greater_than_one(spec.sharing),
                "resources": [{"name": resource, "replicas": spec.sharing.replicas}],
            }
        }
    return document


def _fail_requests_greater_than_one(sharing: api.SharingSpec) -> bool:
    """The pool's choice, written out either way so the document says what the plugin will do.

    Time-slicing defaults to false as NVIDIA's does (a pod that asks for 2 replicas gets the same GPU
    twice). MPS defaults to true as NVIDIA's does when the field is unset, and since v0.20.0 an
    explicit false is honoured (NVIDIA/k8s-device-plugin `api/config/v1/config.go`, which sets
    `Sharing.MPS.FailRequestsGreaterThanOne` to true only when it is nil).
    """
    if sharing.time_slicing is not None:
        return sharing.time_slicing.fail_requests_greater_than_one
    assert sharing.mps is not None
    return sharing.mps.fail_requests_greater_than_one


def mig_parted_entry(layout: Sequence[str]) -> list[dict[str, Any]]:
    """A mig-parted config that puts `layout` on every GPU of the node."""
    return [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices(layout)}]


def content_digest(document: Any) -> str:
    """A short hash of a config's content (key order and whitespace do not count)."""
    return _digest(json.dumps(document, sort_keys=True, separators=(",", ":")))


@functools.lru_cache(maxsize=4096)
def _digest(canonical: str) -> str:
    return hashlib.sha256(canonical.encode()).hexdigest()[: conventions.CONTENT_DIGEST_LENGTH]


class MemberConfigs(NamedTuple):
    """The NVIDIA configs a pool's members select (label values) and what they name."""

    device_plugin: str | None
    """The device-plugin key (NVIDIA pools), else None."""
    mig: str | None
    """The mig-parted config: the pool's layout entry, `all-disabled` for whole MIG-capable GPUs, else None."""
    device_plugin_document: dict[str, Any] | None
    mig_entry: list[dict[str, Any]] | None
    """The pool's own mig-parted entry (MIG pools), else None."""


_MEMBER_CONFIGS: dict[str, tuple[api.ComputePoolSpec, MemberConfigs]] = {}
"""Pool → its spec and `member_configs`, while it is that very (frozen) spec object: a pass asks for them
several times per pool, and the operator keeps a pool's validated spec object from pass to pass."""
_MEMBER_CONFIGS_KEPT = 65_536


def member_configs(
    pool: str, spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator | None = None
) -> MemberConfigs:
    """The content-named configs of a pool (`conventions.config_name`): a changed spec gives new names.
    `resolved`: `spec.resolve()` if already known (it depends on the spec alone). Callers do not change
    the documents returned (they are shared)."""
    cached = _MEMBER_CONFIGS.get(pool)
    if cached is not None and cached[0] is spec:
        return cached[1]
    found = _member_configs(pool, spec, resolved)
    if len(_MEMBER_CONFIGS) >= _MEMBER_CONFIGS_KEPT:
        _MEMBER_CONFIGS.clear()
    _MEMBER_CONFIGS[pool] = (spec, found)
    return found


def _member_configs(pool: str, spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator | None) -> MemberConfigs:
    resolved = resolved or spec.resolve()
    entry = resolved.entry
    if entry.vendor != catalog.Vendor.NVIDIA:
        return MemberConfigs(None, None, None, None)
    if spec.allocation == "DRA":  # the DRA driver reads no device-plugin config; static MIG still needs mig-parted
        document, key = None, None
    else:
        document = device_plugin_config(spec, resolved)
        key = conventions.config_name(pool, content_digest(document))
    if spec.mig is None:
        mig = conventions.MIG_DISABLED_CONFIG if entry.mig_capable else None
        return MemberConfigs(key, mig, document, None)
    layout = mig_parted_entry(spec.mig_layout())
    return MemberConfigs(key, conventions.config_name(pool, content_digest(layout)), document, layout)


def default_mig_configs() -> dict[str, list[dict[str, Any]]]:
    """NVIDIA's default mig-parted entries for every MIG-capable catalog model, as mig-parted's builder makes them.

    `all-disabled`, `all-enabled`, `all-balanced` and `all-<profile>` (`+` written `.`) with the
    profile's most instances per GPU, a `device-filter` per group of device IDs that share a count
    (NVIDIA/mig-parted `pkg/mig/builder/builder.go` `buildMigConfigSpec`, `balanced.go`; the GPU
    Operator ships the same set, `assets/state-mig-manager/0400_configmap.yaml`). A node whose owner
    labelled it `nvidia.com/mig.config=all-1g.10gb` keeps working when the MIG manager reads
    accelpool's ConfigMap instead of NVIDIA's.
    """
    return {name: [dict(spec) for spec in specs] for name, specs in _default_mig_configs().items()}


@functools.lru_cache(maxsize=1)
def _default_mig_configs() -> dict[str, list[dict[str, Any]]]:
    per_profile: dict[str, dict[int, set[str]]] = {}
    balanced: dict[str, tuple[dict[str, int], set[str]]] = {}
    for model, device_ids in MIG_DEVICE_IDS.items():
        entry = catalog.BY_NAME[model]
        for profile in entry.mig_profiles:
            per_profile.setdefault(profile.name, {}).setdefault(profile.max_instances, set()).update(device_ids)
        base = [p for p in entry.mig_profiles if "+" not in p.name]
        slices = max((p.compute_slices for p in base), default=0)
        formula = _BALANCED.get(slices, {})
        chosen = {
            g: max((p for p in base if p.compute_slices == g), key=lambda p: p.max_instances, default=None)
            for g in formula
        }
        if formula and all(chosen.values()):
            devices = {p.name: formula[g] for g, p in chosen.items() if p is not None}
            balanced.setdefault(json.dumps(devices), (devices, set()))[1].update(device_ids)
    configs: dict[str, list[dict[str, Any]]] = {
        conventions.MIG_DISABLED_CONFIG: MIG_DISABLED_ENTRY,
        MIG_ENABLED_CONFIG: [{"devices": "all", "mig-enabled": True, "mig-devices": {}}],
        MIG_BALANCED_CONFIG: [
            {"device-filter": sorted(ids), "devices": "all", "mig-enabled": True, "mig-devices": devices}
            for devices, ids in balanced.values()
        ],
    }
    for name in sorted(per_profile):
        configs[f"all-{catalog.mig_name(name)}"] = [
            {"device-filter": sorted(ids), "devices": "all", "mig-enabled": True, "mig-devices": {name: count}}
            for count, ids in sorted(per_profile[name].items())
        ]
    return configs


DEFAULT_MIG_CONFIG_NAMES = frozenset(_default_mig_configs())
"""The names of NVIDIA's default mig-parted entries: never accelpool's own, whoever wrote them."""


def serving_difference(advertised: Mapping[str, str], gpus: int, per_gpu: Mapping[str, int]) -> str | None:
    """How a node's advertised NVIDIA resources differ from exactly `per_gpu` on each of its `gpus`; None when equal.

    Exact, per resource: fewer (a layout not applied, a reload not done) and more (sharing replicas of
    the previous config, MIG devices left over, another profile) both differ. Resources advertised as 0
    are what the kubelet keeps of a resource no plugin serves any more: they do not count.
    """
    wanted = {name: count * gpus for name, count in per_gpu.items()}
    found = {
        name: int(value)
        for name, value in advertised.items()
        if name.startswith("nvidia.com/") and value.isdigit() and int(value) > 0
    }
    differences = [
        f"{name}={found.get(name, 0)} of {count}" for name, count in wanted.items() if found.get(name, 0) != count
    ]
    differences += [
        f"{name}={count} (not in the layout)" for name, count in sorted(found.items()) if name not in wanted
    ]
    return f"advertises {', '.join(differences)}" if differences else None


def mig_parted_document(entries: Mapping[str, Any]) -> dict[str, Any]:
    """`version: v1` with `all-disabled` first, then the given entries by name."""
    configs: dict[str, Any] = {conventions.MIG_DISABLED_CONFIG: entries.get(conventions.MIG_DISABLED_CONFIG)}
    if configs[conventions.MIG_DISABLED_CONFIG] is None:
        configs[conventions.MIG_DISABLED_CONFIG] = MIG_DISABLED_ENTRY
    for name in sorted(entries):
        if name != conventions.MIG_DISABLED_CONFIG:
            configs[name] = entries[name]
    return {"version": CONFIG_VERSION, "mig-configs": configs}


def dump(document: Any) -> str:
    """The YAML text stored in a ConfigMap: block style, keys in the order built."""
    return _dump(json.dumps(document))


@functools.lru_cache(maxsize=1024)
def _dump(canonical: str) -> str:
    """Most pools share a handful of documents: render each shape once."""
    return yaml.safe_dump(json.loads(canonical), sort_keys=False, default_flow_style=False)


def load(text: str | None) -> Any:
    if not text:
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        return None
