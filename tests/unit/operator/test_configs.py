"""The NVIDIA ConfigMaps on their own (`accelpool.decide.planning.configs`): ours rewritten, others' kept."""

from __future__ import annotations

from accelpool.decide.planning import ConfigState
from accelpool.decide.planning.configs import device_plugin_config, foreign_config_keys, mig_config
from accelpool.decide.planning.pools import pool_works
from accelpool.model import nvidia
from accelpool_api import conventions

from .conftest import device_plugin_key, mig_entry_name, pool

MIG = {"accelerator": "A100-40GB", "mig": {"profile": "3g.20gb"}}


def test_device_plugin_keys_per_nvidia_pool_others_carried_over_old_ones_kept_while_selected() -> None:
    pools = [
        pool("a", {"accelerator": "H100"}),
        pool("amd", {"accelerator": "MI300X"}),
        pool("bad", {"accelerator": "x"}),
    ]
    current = ConfigState(
        device_plugin={"theirs": "t: 1\n", "accelpool-bad": "version: v1\n", "accelpool-old": "version: v1\n"},
        device_plugin_managed=frozenset({"accelpool-bad", "accelpool-old"}),
    )
    key = device_plugin_key("a", {"accelerator": "H100"})
    found = device_plugin_config(pools, pool_works(pools), current, frozenset({"accelpool-bad", "theirs"}))
    assert sorted(found.data) == sorted([key, "accelpool-bad", "default", "theirs"]), "old: no node selects it"
    assert found.data["theirs"] == "t: 1\n" and found.data["accelpool-bad"] == "version: v1\n"
    assert found.managed == {key, "accelpool-bad", "default"}
    assert found.documents[key]["version"] == "v1"
    nobody = device_plugin_config(pools, pool_works(pools), current, frozenset())
    assert sorted(nobody.data) == sorted([key, "default", "theirs"])


def test_an_edited_pool_gets_a_new_key_and_its_old_one_stays_while_a_node_selects_it() -> None:
    before = [pool("ts", {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 2}}})]
    after = [pool("ts", {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}})]
    first = device_plugin_config(before, pool_works(before), ConfigState(), frozenset())
    (old,) = set(first.documents) - {"default"}
    current = ConfigState(device_plugin=first.data, device_plugin_managed=first.managed)
    edited = device_plugin_config(after, pool_works(after), current, frozenset({old}))
    (new,) = set(edited.documents) - {"default", old}
    assert old.startswith("accelpool-ts-") and new.startswith("accelpool-ts-") and old != new
    assert edited.data[old] == first.data[old], "the old content is left as it was"
    assert edited.documents[new]["sharing"]["timeSlicing"]["resources"][0]["replicas"] == 4
    moved = device_plugin_config(after, pool_works(after), current, frozenset({new}))
    assert old not in moved.data and old not in moved.managed


def test_mig_entries_per_mig_pool_and_nvidias_defaults() -> None:
    pools = [pool("m", MIG), pool("whole", {"accelerator": "H100"})]
    current = ConfigState(mig={"version": "v1", "mig-configs": {"theirs": [{"devices": "all", "mig-enabled": False}]}})
    document, managed = mig_config(pools, pool_works(pools), current, frozenset())
    entry = mig_entry_name("m", MIG)
    assert set(document["mig-configs"]) == {entry, "theirs"} | nvidia.DEFAULT_MIG_CONFIG_NAMES
    assert managed == {entry} | nvidia.DEFAULT_MIG_CONFIG_NAMES
    assert {"all-disabled", "all-enabled", "all-balanced", "all-1g.10gb", "all-1g.10gb.me"} <= set(managed)


def test_a_default_entry_someone_else_wrote_is_theirs() -> None:
    mine = [{"devices": [0], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    current = ConfigState(mig={"version": "v1", "mig-configs": {"all-1g.10gb": mine}})
    document, managed = mig_config([], {}, current, frozenset())
    assert document["mig-configs"]["all-1g.10gb"] == mine
    assert "all-1g.10gb" not in managed


def test_a_key_someone_else_wrote_keeps_its_pool_from_being_planned() -> None:
    pools = [pool("a", {"accelerator": "H100"}), pool("m", MIG)]
    key, entry = device_plugin_key("a", {"accelerator": "H100"}), mig_entry_name("m", MIG)
    taken = ConfigState(device_plugin={key: "x"}, mig={"mig-configs": {entry: [], "all-disabled": []}})
    found = foreign_config_keys(pools, taken)
    assert sorted(found) == ["a", "m"]
    assert "rename or remove that key, or rename the pool" in found["a"]
    ours = ConfigState(device_plugin={key: "x"}, device_plugin_managed=frozenset({key}))
    assert foreign_config_keys(pools, ours) == {}
    assert conventions.MIG_DISABLED_CONFIG not in str(found), "NVIDIA's own names are nobody's to take"
