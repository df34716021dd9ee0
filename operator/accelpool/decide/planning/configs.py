"""The two NVIDIA ConfigMaps as the pass wants them: device-plugin configs and mig-parted entries.

- `device_plugin_config`: a key per NVIDIA pool (`accelpool-<pool>-<digest>`, named by its content:
  `accelpool.model.nvidia.member_configs`) plus `default`.
- `mig_config`: the mig-parted document, an entry per MIG pool (named by content too) plus NVIDIA's
  default entries (`all-disabled`, `all-enabled`, `all-balanced`, `all-<profile>`).

An edited pool's config gets a new name: the new key is written before its members' labels move
(the staged ConfigMaps, `accelpool.decide.configmaps`), and the old one stays while any node still selects
it, so NVIDIA's components never meet a label naming a key that is gone. Keys and entries accelpool
does not own (not in the ConfigMap's managed-keys or managed-entries annotation) are carried over
untouched. A pool whose key is already taken by someone else is not planned at all
(`foreign_config_keys`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelpool.decide.planning.model import ConfigState, PoolInput
from accelpool.decide.planning.pools import PoolWork
from accelpool.model import nvidia
from accelpool_api import conventions


@dataclass(frozen=True)
class DevicePluginConfig:
    data: dict[str, str]
    """The ConfigMap's full desired data (keys of others included, untouched)."""
    managed: frozenset[str]
    documents: dict[str, Any]
    """accelpool's own keys, parsed."""


def device_plugin_config(
    pools: Sequence[PoolInput], planned: Mapping[str, PoolWork], current: ConfigState, selected: frozenset[str]
) -> DevicePluginConfig:
    """`planned`: the pools planned this pass, by name; `selected`: the keys nodes select once the pass's
    writes land. A key of accelpool's that no planned pool renders (a pool's previous content, a deleted
    or invalid pool's) stays while a node selects it, and goes once none does."""
    present = dict(current.device_plugin or {})
    owned_before = current.device_plugin_managed
    documents: dict[str, Any] = {}
    data = {k: v for k, v in present.items() if k not in owned_before}
    managed: set[str] = set()
    if conventions.DEFAULT_DEVICE_PLUGIN_KEY not in data:
        documents[conventions.DEFAULT_DEVICE_PLUGIN_KEY] = nvidia.DEFAULT_DEVICE_PLUGIN_CONFIG
    for pool in pools:
        work = planned.get(pool.name)
        if pool.deleting or work is None:
            continue
        found = nvidia.member_configs(work.name, work.spec, work.resolved)
        if found.device_plugin is not None and found.device_plugin not in data:
            documents[found.device_plugin] = found.device_plugin_document
    for key in sorted(owned_before & selected):
        if key in present and key not in documents and key not in data:
            documents[key] = nvidia.load(present[key])  # still selected: touch nothing
            data[key] = present[key]
    for key, document in documents.items():
        if key not in data:
            data[key] = nvidia.dump(document)
        managed.add(key)
    return DevicePluginConfig(data, frozenset(managed), documents)


def mig_config(
    pools: Sequence[PoolInput], planned: Mapping[str, PoolWork], current: ConfigState, selected: frozenset[str]
) -> tuple[dict[str, Any], frozenset[str]]:
    """The mig-parted document and the entries accelpool owns in it.

    NVIDIA's default entries (`nvidia.default_mig_configs`) are written where the document lacks them,
    so nodes in no pool keep their `nvidia.com/mig.config`; an entry of the same name written by
    someone else is theirs and kept. Entries of accelpool's that no planned pool renders stay while a
    node selects them (`selected`, once the pass's writes land)."""
    current_doc = current.mig if isinstance(current.mig, Mapping) else {}
    present = dict(current_doc.get("mig-configs") or {})
    owned_before = current.mig_managed
    entries = {k: v for k, v in present.items() if k not in owned_before}
    managed: set[str] = set()
    for name, entry in nvidia.default_mig_configs().items():
        if name not in entries:
            entries[name] = entry
            managed.add(name)
    for pool in pools:
        work = planned.get(pool.name)
        if pool.deleting or work is None:
            continue
        found = nvidia.member_configs(work.name, work.spec, work.resolved)
        if found.mig_entry is not None and found.mig is not None and found.mig not in entries:
            entries[found.mig] = found.mig_entry
            managed.add(found.mig)
    for name in sorted(owned_before & selected):
        if name in present and name not in entries:
            entries[name] = present[name]
            managed.add(name)
    return nvidia.mig_parted_document(entries), frozenset(managed)


def own_config_names(pools: Sequence[PoolInput]) -> frozenset[str]:
    """The content-named configs the valid pools render now, deleting ones included (their members still
    select them until released): device-plugin keys and mig-parted entries."""
    names: set[str] = set()
    for pool in pools:
        found = _configs_of(pool, deleting=True)
        if found is not None:
            names.update(n for n in (found.device_plugin, found.mig) if n is not None)
    return frozenset(names) - nvidia.DEFAULT_MIG_CONFIG_NAMES


def _configs_of(pool: PoolInput, *, deleting: bool = False) -> nvidia.MemberConfigs | None:
    if not pool.valid or (pool.deleting and not deleting) or pool.spec is None:
        return None
    try:
        return nvidia.member_configs(pool.name, pool.spec)
    except Exception:  # an unresolvable spec: planning sets the pool aside with the error
        return None


def foreign_config_keys(pools: Sequence[PoolInput], config: ConfigState) -> dict[str, str]:
    """Pools whose config key already exists in a ConfigMap and is not accelpool's: they are not planned.

    accelpool never overwrites what it did not write, so such a pool cannot be configured until
    the key is renamed or removed (or the pool is).
    """
    mig_entries = config.mig.get("mig-configs") if isinstance(config.mig, Mapping) else None
    places = (  # (where, what is there, what accelpool owns, its annotation, the mig-parted entry?)
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
        configs = _configs_of(pool)
        if configs is None:
            continue
        for what, present, managed, annotation, mig_only in places:
            key = configs.mig if mig_only else configs.device_plugin
            if key is None or key in nvidia.DEFAULT_MIG_CONFIG_NAMES:
                continue
            if key in present and key not in managed:
                found[pool.name] = (
                    f"the {what} already holds {key!r}, which accelpool did not write (it is not in the "
                    f"ConfigMap's {conventions.DOMAIN}/{annotation} annotation); accelpool will not overwrite it: "
                    "rename or remove that key, or rename the pool"
                )
                break
    return found
