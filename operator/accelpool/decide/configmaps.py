"""The two NVIDIA ConfigMaps a reconcile pass writes, each in two versions.

A node selects its config by name (`nvidia.com/device-plugin.config`, `nvidia.com/mig.config`),
so a pass must never leave a node pointing at a key that is not there. It writes the ConfigMaps
twice, around its node patches:

- **staged** (before the node patches): add and update only. The current data with the plan's
  keys added or updated, and the managed set the union of both: a key nodes still select (a pool
  being deleted, a node about to move) stays until the nodes have moved.
- **final** (after every node patch succeeded): exactly what the plan wants, so keys of deleted
  pools are removed and entries accelpool never wrote are kept (the planner carries them over).

Each version is the ConfigMaps' full desired `data` and the keys accelpool owns (written into the
`accelpool.io/managed-keys` / `managed-entries` annotation); `accelpool.decide.patches.configmap_patch`
turns it into the smallest write against what is stored when it is applied. The MIG ConfigMap
holds one mig-parted document: it is compared parsed, so a document edited by hand that says the
same thing keeps its text (no rewrite for whitespace or order).

Callers: `accelpool.decide.desired` (the pass's desired state) and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelpool.decide.planning import ConfigState, Plan
from accelpool.model import nvidia
from accelpool_api import conventions


@dataclass(frozen=True)
class ConfigMapContent:
    """One ConfigMap as a pass wants it: its whole `data` and the keys accelpool owns in it."""

    data: Mapping[str, str]
    managed: frozenset[str]


@dataclass(frozen=True)
class ConfigMapsVersion:
    device_plugin: ConfigMapContent
    mig: ConfigMapContent


@dataclass(frozen=True)
class ConfigMapVersions:
    staged: ConfigMapsVersion
    """Written before the node patches: the current keys plus the plan's (add and update only)."""
    final: ConfigMapsVersion
    """Written after every node patch succeeded: exactly the plan's."""


def versions(plan: Plan, current: ConfigState, current_mig_text: str | None) -> ConfigMapVersions:
    """Both versions of both ConfigMaps, from the plan and what the ConfigMaps hold now.

    `current` is the parsed state the plan was made from (`accelpool.decide.inputs.config_state`);
    `current_mig_text` the MIG ConfigMap's document as stored (None when it has none).
    """
    final_entries = dict(plan.mig_document.get("mig-configs") or {})
    current_entries = dict((current.mig or {}).get("mig-configs") or {})
    staged = ConfigMapsVersion(
        device_plugin=ConfigMapContent(
            data={**dict(current.device_plugin or {}), **dict(plan.device_plugin)},
            managed=plan.device_plugin_managed | current.device_plugin_managed,
        ),
        mig=ConfigMapContent(
            data=_mig_data({**current_entries, **final_entries}, current, current_mig_text),
            managed=plan.mig_managed | current.mig_managed,
        ),
    )
    final = ConfigMapsVersion(
        device_plugin=ConfigMapContent(data=dict(plan.device_plugin), managed=plan.device_plugin_managed),
        mig=ConfigMapContent(data=_mig_data(final_entries, current, current_mig_text), managed=plan.mig_managed),
    )
    return ConfigMapVersions(staged=staged, final=final)


def _mig_data(entries: Mapping[str, Any], current: ConfigState, current_text: str | None) -> dict[str, str]:
    """The MIG ConfigMap's data for these entries: the stored text when it already says the same."""
    document = nvidia.mig_parted_document(dict(entries))
    if current.mig is not None and current_text is not None and current.mig == document:
        return {conventions.MIG_CONFIG_DATA_KEY: current_text}
    return {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(document)}
