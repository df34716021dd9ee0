"""Both versions of the NVIDIA ConfigMaps a pass writes (staged before the node patches, final after).

The golden file holds both versions for the rendering fixture's pools against ConfigMaps that
still hold a deleted pool's key and entry and an administrator's own ones; refresh it with
`UPDATE_GOLDENS=1` after an intended change.
"""

from __future__ import annotations

from typing import Any

import yaml

from accelpool import configmaps, conventions, inputs, nvidia
from accelpool.planning import ConfigState

from .conftest import fixture_nodes, node, pool, run
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
    result = run(
        [pool("train", {"accelerator": "H100"}), pool("slices", {"accelerator": "A100", "mig": {"profile": "1g.5gb"}})],
        [node("n1")],
        state,
    )
    versions = configmaps.versions(result, state, MIG_TEXT)

    staged, final = versions.staged, versions.final
    assert set(staged.device_plugin.data) == {"default", OLD, "admin-config", "accelpool-train", "accelpool-slices"}
    assert staged.device_plugin.managed == {"default", OLD, "accelpool-train", "accelpool-slices"}
    assert mig_entries(staged.mig) == {"all-disabled", OLD, "admin-layout", "accelpool-slices"}
    assert staged.mig.managed == {"all-disabled", OLD, "accelpool-slices"}

    assert final.device_plugin.data == dict(result.device_plugin)
    assert OLD not in final.device_plugin.data and "admin-config" in final.device_plugin.data
    assert final.device_plugin.managed == result.device_plugin_managed
    assert mig_entries(final.mig) == {"all-disabled", "admin-layout", "accelpool-slices"}
    assert final.mig.managed == result.mig_managed


def test_a_mig_document_that_says_the_same_keeps_its_stored_text() -> None:
    state = current()
    result = run([], [], state)  # the retired pool's entry goes; nothing is added
    staged = configmaps.versions(result, state, MIG_TEXT).staged
    assert staged.mig.data == {conventions.MIG_CONFIG_DATA_KEY: MIG_TEXT}, "hand-written flow style is kept"

    same = nvidia.dump(result.mig_document).replace("\n", "\n\n")  # the final document, spaced out by hand
    after = stored({}, "", same, "all-disabled")
    final = configmaps.versions(result, after, same).final
    assert final.mig.data == {conventions.MIG_CONFIG_DATA_KEY: same}


def test_missing_configmaps_get_the_plan_in_both_versions() -> None:
    result = run([pool("train", {"accelerator": "H100"})], [node("n1")])
    versions = configmaps.versions(result, ConfigState(), None)
    assert versions.staged == versions.final
    assert versions.final.device_plugin.data == dict(result.device_plugin)
    assert versions.final.mig.data == {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(result.mig_document)}
