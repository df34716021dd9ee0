"""Both versions of the NVIDIA ConfigMaps a pass writes (staged before the node patches, final after).

The golden file holds both versions for the rendering fixture's pools against ConfigMaps that
still hold a deleted pool's key and entry and an administrator's own ones; refresh it with
`UPDATE_GOLDENS=1` after an intended change.
"""

from __future__ import annotations

from typing import Any

import yaml

from accelpool.decide import configmaps, inputs
from accelpool.decide.planning import ConfigState
from accelpool.model import nvidia
from accelpool_api import conventions

from .conftest import device_plugin_key, fixture_nodes, mig_entry_name, node, pool, run
from .test_render import POOLS, check_golden

OLD = "accelpool-retired"
"""A pool deleted this pass: nodes may still select its key until they are patched."""
MIG_TEXT = """\
version: v1
mig-configs:
  all-disabled:
  - devices: all
    mig-enabled: false
  accelpool-retired:
  - devices: all
    mig-enabled: true
    mig-devices: {1g.10gb: 7}
  admin-layout:
  - devices: all
    mig-enabled: false
"""
"""The MIG ConfigMap as an administrator left it (flow style in one place)."""


def stored(dp: dict[str, str], dp_managed: str, mig_text: str | None, mig_managed: str) -> ConfigState:
    """The ConfigMaps as the API server holds them, parsed as a pass parses them."""
    device_plugin = {"data": dp, "metadata": {"annotations": {conventions.MANAGED_KEYS_ANNOTATION: dp_managed}}}
    mig: dict[str, Any] = {"metadata": {"annotations": {conventions.MANAGED_ENTRIES_ANNOTATION: mig_managed}}}
    if mig_text is not None:
        mig["data"] = {conventions.MIG_CONFIG_DATA_KEY: mig_text}
    return inputs.config_state(device_plugin, mig)


def current() -> ConfigState:
    return stored(
        {"default": "version: v1\n", OLD: "version: v1\n", "admin-config": "version: v1\nflags: {}\n"},
        f"default,{OLD}",
        MIG_TEXT,
        f"all-disabled,{OLD}",
    )


def mig_entries(content: configmaps.ConfigMapContent) -> set[str]:
    return set(yaml.safe_load(content.data[conventions.MIG_CONFIG_DATA_KEY])["mig-configs"])


def readable(content: configmaps.ConfigMapContent) -> dict[str, Any]:
    """A ConfigMap's content with each value parsed, as the golden file shows it."""
    return {"data": {k: yaml.safe_load(v) for k, v in sorted(content.data.items())}, "managed": sorted(content.managed)}


def test_versions_golden() -> None:
    state = current()
    result = run([pool(name, body) for name, body in POOLS.items()], fixture_nodes(), state)
    versions = configmaps.versions(result, state, MIG_TEXT)
    check_golden(
        "configmap-versions.yaml",
        {
            stage: {"device-plugin": readable(version.device_plugin), "mig": readable(version.mig)}
            for stage, version in (("staged", versions.staged), ("final", versions.final))
        },
    )


def test_the_staged_version_only_adds_and_the_final_one_is_the_plan() -> None:
    state = current()
    slices_spec = {"accelerator": "A100", "mig": {"profile": "1g.5gb"}}
    result = run([pool("train", {"accelerator": "H100"}), pool("slices", slices_spec)], [node("n1")], state)
    versions = configmaps.versions(result, state, MIG_TEXT)
    train, slices = device_plugin_key("train", {"accelerator": "H100"}), device_plugin_key("slices", slices_spec)
    slices_entry = mig_entry_name("slices", slices_spec)
    defaults = set(nvidia.DEFAULT_MIG_CONFIG_NAMES)

    staged, final = versions.staged, versions.final
    assert set(staged.device_plugin.data) == {"default", OLD, "admin-config", train, slices}
    assert staged.device_plugin.managed == {"default", OLD, train, slices}
    assert mig_entries(staged.mig) == {OLD, "admin-layout", slices_entry} | defaults
    assert staged.mig.managed == {OLD, slices_entry} | defaults

    assert final.device_plugin.data == dict(result.device_plugin)
    assert OLD not in final.device_plugin.data and "admin-config" in final.device_plugin.data
    assert final.device_plugin.managed == result.device_plugin_managed
    assert mig_entries(final.mig) == {"admin-layout", slices_entry} | defaults
    assert final.mig.managed == result.mig_managed


def test_a_mig_document_that_says_the_same_keeps_its_stored_text() -> None:
    planned = run([], [], current())  # the retired pool's entry goes; NVIDIA's defaults come
    entries = {**planned.mig_document["mig-configs"], OLD: [{"devices": "all", "mig-enabled": False}]}
    by_hand = yaml.safe_dump({"version": "v1", "mig-configs": entries}, default_flow_style=True)
    managed = ",".join(sorted({OLD} | nvidia.DEFAULT_MIG_CONFIG_NAMES))
    state = stored({"default": "version: v1\n"}, f"default,{OLD}", by_hand, managed)
    result = run([], [], state)
    staged = configmaps.versions(result, state, by_hand).staged
    assert staged.mig.data == {conventions.MIG_CONFIG_DATA_KEY: by_hand}, "hand-written flow style is kept"

    same = nvidia.dump(result.mig_document).replace("\n", "\n\n")  # the final document, spaced out by hand
    after = stored({}, "", same, ",".join(sorted(nvidia.DEFAULT_MIG_CONFIG_NAMES)))
    final = configmaps.versions(result, after, same).final
    assert final.mig.data == {conventions.MIG_CONFIG_DATA_KEY: same}


def test_missing_configmaps_get_the_plan_in_both_versions() -> None:
    result = run([pool("train", {"accelerator": "H100"})], [node("n1")])
    versions = configmaps.versions(result, ConfigState(), None)
    assert versions.staged == versions.final
    assert versions.final.device_plugin.data == dict(result.device_plugin)
    assert versions.final.mig.data == {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(result.mig_document)}
