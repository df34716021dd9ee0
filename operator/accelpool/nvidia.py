"""The NVIDIA config documents accelpool writes: device-plugin configs and the mig-parted document.

- `device_plugin_config(spec)`: one pool's k8s-device-plugin config (NVIDIA/k8s-device-plugin
  `api/config/v1`): `version: v1`, `flags.migStrategy` (none, single, mixed) and, with sharing,
  `sharing.timeSlicing` or `sharing.mps` with the pool's replicas and `failRequestsGreaterThanOne`
  (the pool's choice under time-slicing, always true under MPS).
- `DEFAULT_DEVICE_PLUGIN_CONFIG`: the `default` key, for GPU nodes in no pool.
- `mig_parted_entry(layout)` / `mig_parted_document(entries)`: mig-parted `version: v1` with a
  `mig-configs` entry per pool (`devices: all, mig-enabled: true, mig-devices: {profile: n}`)
  and `all-disabled`.
- `dump` / `load`: the YAML text stored in the ConfigMaps (stable key order).

Formats are in the shared reference `nvidia.md`. Pure; used by the planner and the tests.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

from accelpool import api, conventions
from accelpool_core import catalog

CONFIG_VERSION = "v1"
DEFAULT_DEVICE_PLUGIN_CONFIG: dict[str, Any] = {"version": CONFIG_VERSION, "flags": {"migStrategy": "none"}}
MIG_DISABLED_ENTRY: list[dict[str, Any]] = [{"devices": "all", "mig-enabled": False}]


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
    """Written out either way, so the document says what the plugin will do.

    Time-slicing: the pool's choice (NVIDIA's default false lets a pod that asks for 2 replicas get
    the same GPU twice). MPS: always true: the device plugin forces it (NVIDIA/k8s-device-plugin
    CHANGELOG v0.15.0-rc.2, "Explicitly set sharing.mps.failRequestsGreaterThanOne = true").
    """
    if sharing.time_slicing is not None:
        return sharing.time_slicing.fail_requests_greater_than_one
    return True


def mig_devices(layout: Sequence[str]) -> dict[str, int]:
    """Per-GPU profile counts in first-appearance order: [3g.40gb, 1g.10gb, 1g.10gb] → {3g.40gb: 1, 1g.10gb: 2}."""
    counts: dict[str, int] = {}
    for profile in layout:
        counts[profile] = counts.get(profile, 0) + 1
    return counts


def mig_parted_entry(layout: Sequence[str]) -> list[dict[str, Any]]:
    """A mig-parted config that puts `layout` on every GPU of the node."""
    return [{"devices": "all", "mig-enabled": True, "mig-devices": mig_devices(layout)}]


def mig_parted_document(entries: Mapping[str, Any]) -> dict[str, Any]:
    """`version: v1` with `all-disabled` first, then the given entries by name."""
    configs: dict[str, Any] = {conventions.MIG_DISABLED_CONFIG: entries.get(conventions.MIG_DISABLED_CONFIG)}
    if configs[conventions.MIG_DISABLED_CONFIG] is None:
        configs[conventions.MIG_DISABLED_CONFIG] = MIG_DISABLED_ENTRY
    for name in sorted(entries):
        if name != conventions.MIG_DISABLED_CONFIG:
            configs[name] = entries[name]
    return {"version": CONFIG_VERSION, "mig-configs": configs}


def resources_per_gpu(spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator | None = None) -> dict[str, int]:
    """What one physical GPU of a member advertises to pods under this pool's config."""
    entry = (resolved or spec.resolve()).entry
    strategy = spec.mig_strategy()
    if strategy == "mixed":
        return {catalog.mig_resource(profile): count for profile, count in mig_devices(spec.mig_layout()).items()}
    if strategy == "single":
        return {entry.resource: len(spec.mig_layout())}
    return {entry.resource: spec.sharing.replicas if spec.sharing is not None else 1}


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
