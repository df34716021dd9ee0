"""The two NVIDIA ConfigMaps as the pass wants them: device-plugin configs and mig-parted entries. Pure.

- `device_plugin_config`: a key per NVIDIA pool (`accelpool-<pool>`) plus `default`.
- `mig_config`: the mig-parted document, an entry per MIG pool plus `all-disabled`.

Keys and entries accelpool does not own (not in the ConfigMap's managed-keys or managed-entries
annotation) are carried over untouched; those of an invalid pool are kept as they are. A pool
whose key is already taken by someone else is not planned at all (`foreign_config_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelpool import conventions, nvidia
from accelpool.planning.model import ConfigState, PoolInput
from accelpool.planning.pools import PoolWork
from accelpool_core import catalog


@dataclass(frozen=True)
class DevicePluginConfig:
    data: dict[str, str]
    """The ConfigMap's full desired data (keys of others included, untouched)."""
    managed: frozenset[str]
    documents: dict[str, Any]
    """accelpool's own keys, parsed."""


def device_plugin_config(
    pools: Sequence[PoolInput], planned: Mapping[str, PoolWork], current: ConfigState
) -> DevicePluginConfig:
    """`planned`: the pools planned this pass, by name; other pools of `pools` are invalid or deleting."""
    present = dict(current.device_plugin or {})
    owned_before = current.device_plugin_managed
    documents: dict[str, Any] = {}
    data = {k: v for k, v in present.items() if k not in owned_before}
    managed: set[str] = set()
    if conventions.DEFAULT_DEVICE_PLUGIN_KEY not in data:
        documents[conventions.DEFAULT_DEVICE_PLUGIN_KEY] = nvidia.DEFAULT_DEVICE_PLUGIN_CONFIG
    for pool in pools:
        key = conventions.config_name(pool.name)
        if pool.deleting:
            continue
        work = planned.get(pool.name)
        if work is not None:
            if work.resolved.entry.vendor == catalog.Vendor.NVIDIA:
                documents[key] = nvidia.device_plugin_config(work.spec, work.resolved)
        elif key in present and key in owned_before:
            documents[key] = nvidia.load(present[key])  # invalid pool: touch nothing
            data[key] = present[key]
            managed.add(key)
    for key, document in documents.items():
        if key not in data:
            data[key] = nvidia.dump(document)
        managed.add(key)
    return DevicePluginConfig(data, frozenset(managed), documents)


def mig_config(
    pools: Sequence[PoolInput], planned: Mapping[str, PoolWork], current: ConfigState
) -> tuple[dict[str, Any], frozenset[str]]:
    """The mig-parted document and the entries accelpool owns in it."""
    current_doc = current.mig if isinstance(current.mig, Mapping) else {}
    present = dict(current_doc.get("mig-configs") or {})
    owned_before = current.mig_managed
    entries = {k: v for k, v in present.items() if k not in owned_before}
    managed: set[str] = set()
    if conventions.MIG_DISABLED_CONFIG not in entries:
        entries[conventions.MIG_DISABLED_CONFIG] = nvidia.MIG_DISABLED_ENTRY
        managed.add(conventions.MIG_DISABLED_CONFIG)
    for pool in pools:
        key = conventions.config_name(pool.name)
        if pool.deleting:
            continue
        work = planned.get(pool.name)
        if work is not None:
            if work.spec.mig is not None:
                entries[key] = nvidia.mig_parted_entry(work.spec.mig_layout())
                managed.add(key)
        elif key in present and key in owned_before:
            entries[key] = present[key]
            managed.add(key)
    return nvidia.mig_parted_document(entries), frozenset(managed)


def foreign_config_keys(pools: Sequence[PoolInput], config: ConfigState) -> dict[str, str]:
    """Pools whose config key already exists in a ConfigMap and is not accelpool's: they are not planned.

    accelpool never overwrites what it did not write, so such a pool cannot be configured until
    the key is renamed or removed (or the pool is).
    """
    mig_entries = config.mig.get("mig-configs") if isinstance(config.mig, Mapping) else None
    places = (  # (where, what is there, what accelpool owns, its annotation, only for MIG pools?)
        ("device-plugin ConfigMap", config.device_plugin or {}, config.device_plugin_managed, "managed-keys", False),
        (
            "MIG ConfigMap's mig-configs",
            mig_entries if isinstance(mig_entries, Mapping) else {},
            config.mig_managed,
            "managed-entries",
            True,
        ),
    )
    found: dict[str, str] = {}
    for pool in pools:
        if not pool.valid or pool.deleting or pool.spec is None:
            continue
        key = conventions.config_name(pool.name)
        for what, present, managed, annotation, mig_only in places:
            if key in present and key not in managed and (pool.spec.mig is not None or not mig_only):
                found[pool.name] = (
                    f"the {what} already holds {key!r}, which accelpool did not write (it is not in the "
                    f"ConfigMap's {conventions.DOMAIN}/{annotation} annotation); accelpool will not overwrite it: "
                    "rename or remove that key, or rename the pool"
                )
                break
    return found
