"""The NVIDIA ConfigMaps on their own (`accelpool.planning.configs`): ours rewritten, others' kept."""

from __future__ import annotations

from accelpool import conventions
from accelpool.planning import ConfigState
from accelpool.planning.configs import device_plugin_config, foreign_config_keys, mig_config
from accelpool.planning.pools import pool_works

from .conftest import pool

MIG = {"accelerator": "A100-40GB", "mig": {"profile": "3g.20gb"}}


def test_device_plugin_keys_per_nvidia_pool_others_carried_over_invalid_pools_kept() -> None:
    pools = [
        pool("a", {"accelerator": "H100"}),
        pool("amd", {"accelerator": "MI300X"}),
        pool("bad", {"accelerator": "x"}),
    ]
    current = ConfigState(
        device_plugin={"theirs": "t: 1\n", "accelpool-bad": "version: v1\n", "accelpool-old": "version: v1\n"},
        device_plugin_managed=frozenset({"accelpool-bad", "accelpool-old"}),
    )
    found = device_plugin_config(pools, pool_works(pools), current)
    assert sorted(found.data) == ["accelpool-a", "accelpool-bad", "default", "theirs"]
    assert found.data["theirs"] == "t: 1\n" and found.data["accelpool-bad"] == "version: v1\n"
    assert found.managed == {"accelpool-a", "accelpool-bad", "default"}
    assert found.documents["accelpool-a"]["version"] == "v1"


def test_mig_entries_per_mig_pool_and_all_disabled() -> None:
    pools = [pool("m", MIG), pool("whole", {"accelerator": "H100"})]
    current = ConfigState(mig={"version": "v1", "mig-configs": {"theirs": [{"devices": "all", "mig-enabled": False}]}})
    document, managed = mig_config(pools, pool_works(pools), current)
    assert sorted(document["mig-configs"]) == ["accelpool-m", "all-disabled", "theirs"]
    assert managed == {"accelpool-m", conventions.MIG_DISABLED_CONFIG}


def test_a_key_someone_else_wrote_keeps_its_pool_from_being_planned() -> None:
    pools = [pool("a", {"accelerator": "H100"}), pool("m", MIG)]
    taken = ConfigState(device_plugin={"accelpool-a": "x"}, mig={"mig-configs": {"accelpool-m": []}})
    found = foreign_config_keys(pools, taken)
    assert sorted(found) == ["a", "m"]
    assert "rename or remove that key, or rename the pool" in found["a"]
    ours = ConfigState(device_plugin={"accelpool-a": "x"}, device_plugin_managed=frozenset({"accelpool-a"}))
    assert foreign_config_keys(pools, ours) == {}
