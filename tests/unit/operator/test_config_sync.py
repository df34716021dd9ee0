"""An edited pool's members move to its new NVIDIA configs once NVIDIA's pods can read them (`ConfigSync`).

The kubelet projects a ConfigMap's update into the pods that mount it up to about a minute later. A member
moved at once to a key its config-manager cannot read yet makes the sidecar exit (and crash-loop, backing
off); moved to an entry the MIG manager cannot read yet, it goes `failed` and waits for a retry. So the
pass writes the new config and keeps the member in the one it serves until the new one has been stored for
`--config-sync`. A joining node, which serves nothing yet, gets its device-plugin key at once (the sidecar
that exits reads the label again when it restarts) but its MIG entry only once the MIG manager can read it: it
would fail, and never look again until a retry a backoff later changes the label.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from accelpool.decide.planning import ConfigState, ConfigSync, Plan
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, conditions, device_plugin_key, member, mig_entry_name, node, node_body, pool, run
from .emulated import Cluster, pool_body

NAMESPACE = conventions.DEFAULT_NAMESPACE
DP_CONFIGMAP = conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP

DP = conventions.DEVICE_PLUGIN_CONFIG_LABEL
MIG = conventions.MIG_CONFIG_LABEL
STATE = conventions.MIG_CONFIG_STATE_LABEL
TWO = {"accelerator": "L4", "nodes": 1, "sharing": {"timeSlicing": {"replicas": 2}}}
FOUR = {"accelerator": "L4", "nodes": 1, "sharing": {"timeSlicing": {"replicas": 4}}}
SMALL = {"accelerator": "H100:8", "nodes": 1, "mig": {"profile": "1g.10gb"}}
LARGE = {"accelerator": "H100:8", "nodes": 1, "mig": {"profile": "3g.40gb"}}


def sync(
    seconds: float = 60.0, *, dp: dict[str, float] | None = None, mig: dict[str, float] | None = None
) -> ConfigSync:
    """First seen `age` seconds before NOW, per key or entry."""
    return ConfigSync(
        seconds,
        {k: NOW - timedelta(seconds=age) for k, age in (dp or {}).items()},
        {k: NOW - timedelta(seconds=age) for k, age in (mig or {}).items()},
    )


def stored(*specs: tuple[str, dict[str, Any]]) -> ConfigState:
    """The ConfigMaps holding these pools' configs, written by accelpool."""
    keys: dict[str, str] = {}
    entries: dict[str, Any] = dict(nvidia.default_mig_configs())
    for name, spec in specs:
        keys[device_plugin_key(name, spec)] = "version: v1\n"
        if "mig" in spec:
            entries[mig_entry_name(name, spec)] = [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]
    return ConfigState(
        device_plugin=keys,
        device_plugin_managed=frozenset(keys),
        mig=nvidia.mig_parted_document(entries),
        mig_managed=frozenset(entries) - nvidia.DEFAULT_MIG_CONFIG_NAMES,
    )


def l4_member(spec: dict[str, Any]) -> NodeView:
    return member("l4-1", "p", "L4", labels={DP: device_plugin_key("p", spec)})


def h100_member(spec: dict[str, Any]) -> NodeView:
    labels = {DP: device_plugin_key("p", spec), MIG: mig_entry_name("p", spec), STATE: "success"}
    return member("h100-1", "p", labels=labels)


def labels_after(result: Plan, view: NodeView) -> dict[str, str]:
    change = result.changes.get(view.name)
    return dict(view.apply(change).labels) if change is not None else dict(view.labels)


def test_a_member_keeps_its_key_until_the_new_one_can_be_read() -> None:
    view = l4_member(TWO)
    new_key = device_plugin_key("p", FOUR)
    first = run([pool("p", FOUR, generation=2)], [view], stored(("p", TWO)), config_sync=sync())
    assert new_key in first.device_plugin, "the new key is written this pass"
    assert device_plugin_key("p", TWO) in first.device_plugin, "the old one stays: the member still selects it"
    assert labels_after(first, view)[DP] == device_plugin_key("p", TWO)
    assert first.requeue_after is not None and first.requeue_after <= 60
    assert conditions(first, "p")["DevicePluginConfigured"] == ("False", "Pending")

    config = stored(("p", TWO), ("p", FOUR))
    waiting = run([pool("p", FOUR, generation=2)], [view], config, config_sync=sync(dp={new_key: 45}))
    assert labels_after(waiting, view)[DP] == device_plugin_key("p", TWO)
    assert waiting.requeue_after is not None and waiting.requeue_after <= 15

    moved = run([pool("p", FOUR, generation=2)], [view], config, config_sync=sync(dp={new_key: 60}))
    assert labels_after(moved, view)[DP] == new_key


def test_a_mig_member_keeps_its_entry_until_the_mig_manager_can_read_the_new_one() -> None:
    view = h100_member(SMALL)
    new_entry = mig_entry_name("p", LARGE)
    config = stored(("p", SMALL), ("p", LARGE))
    held = run([pool("p", LARGE, generation=2)], [view], config, config_sync=sync(mig={new_entry: 10}))
    after = labels_after(held, view)
    assert (after[MIG], after[STATE]) == (mig_entry_name("p", SMALL), "success"), "no pending, no failure"
    assert held.requeue_after is not None and held.requeue_after <= 50
    assert new_entry in held.mig_document["mig-configs"]

    moved = run([pool("p", LARGE, generation=2)], [view], config, config_sync=sync(mig={new_entry: 60}))
    after = labels_after(moved, view)
    assert (after[MIG], after[STATE]) == (new_entry, "pending")


def test_mig_off_and_on_wait_for_what_is_new_only() -> None:
    """MIG off: `all-disabled` has been there all along, the new key has not; MIG on: the new entry has not."""
    whole = {"accelerator": "H100:8", "nodes": 1}
    view = h100_member(SMALL)
    config = stored(("p", SMALL), ("p", whole))
    seen = {name: 3600.0 for name in nvidia.DEFAULT_MIG_CONFIG_NAMES}
    off = run([pool("p", whole, generation=2)], [view], config, config_sync=sync(mig=seen))
    after = labels_after(off, view)
    assert after[MIG] == conventions.MIG_DISABLED_CONFIG, "NVIDIA's default entry: no wait"
    assert after[DP] == device_plugin_key("p", SMALL), "the new key waits"

    plain = member("h100-1", "p")  # whole GPUs, MIG off
    on = run([pool("p", SMALL, generation=2)], [plain], config, config_sync=sync(mig=seen))
    assert labels_after(on, plain)[MIG] == conventions.MIG_DISABLED_CONFIG


def test_a_joining_node_is_labelled_at_once_and_offline_plans_never_wait() -> None:
    fresh = node("l4-1", "L4")
    joined = run([pool("p", FOUR)], [fresh], ConfigState(), config_sync=sync())
    assert labels_after(joined, fresh)[DP] == device_plugin_key("p", FOUR), "it serves nothing of the pool yet"

    view = l4_member(TWO)
    offline = run([pool("p", FOUR, generation=2)], [view], stored(("p", TWO)))
    assert labels_after(offline, view)[DP] == device_plugin_key("p", FOUR)


def test_a_joining_node_waits_for_its_mig_entry_and_keeps_what_it_had() -> None:
    """A pool created while the MIG ConfigMap exists: its entry is new, and the MIG manager of a node labelled
    with it now would report `failed` and wait for the label to change (a retry, 60 s later)."""
    entry = mig_entry_name("p", SMALL)
    fresh = node("h100-1")
    first = run([pool("p", SMALL)], [fresh], stored(), config_sync=sync())
    after = labels_after(first, fresh)
    assert after[conventions.POOL_LABEL] == "p" and after[DP] == device_plugin_key("p", SMALL), "joined at once"
    assert MIG not in after and STATE not in after, "no entry the MIG manager cannot read yet"
    assert entry in first.mig_document["mig-configs"], "the entry is written this pass"
    assert first.requeue_after is not None and first.requeue_after <= 60
    assert conditions(first, "p")["MigConfigured"] == ("False", "Pending")

    joined = NodeView.from_body(node_body("h100-1")).apply(first.changes["h100-1"])
    config = stored(("p", SMALL))
    waiting = run([pool("p", SMALL)], [joined], config, config_sync=sync(mig={entry: 30}))
    assert MIG not in labels_after(waiting, joined)
    labelled = run([pool("p", SMALL)], [joined], config, config_sync=sync(mig={entry: 60}))
    assert (labels_after(labelled, joined)[MIG], labels_after(labelled, joined)[STATE]) == (entry, "pending")

    owned = node("h100-2", labels={MIG: "all-1g.10gb", STATE: "success"})  # its owner's NVIDIA default entry
    held = run([pool("p", SMALL)], [owned], stored(), config_sync=sync())
    after = labels_after(held, owned)
    assert (after[MIG], after[STATE]) == ("all-1g.10gb", "success"), "what it had, until the entry can be read"
    prior = owned.apply(held.changes["h100-2"]).annotations[conventions.PRIOR_LABELS_ANNOTATION]
    assert "all-1g.10gb" in prior, "and given back when it leaves"


@pytest.mark.looptime
async def test_the_controller_counts_the_sync_from_when_it_first_saw_the_new_key(
    cluster: Cluster, looptime: float
) -> None:
    """`--config-sync 30`: the pass after the edit writes the new key and keeps the member where it is; the
    member moves on the first pass 30 s after the controller first saw the key stored."""
    await cluster.add_nodes(node_body("l4-1", "L4", 1))
    harness = await cluster.harness([pool_body("p", TWO)], config_sync_seconds=30.0)
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    assert cluster.node("l4-1")["metadata"]["labels"][DP] == device_plugin_key("p", TWO), "joining: at once"

    await harness.set_pools(pool_body("p", FOUR))
    start = asyncio.get_running_loop().time()
    moved_at: float | None = None
    while moved_at is None:
        assert (await harness.controller.reconcile_once()).ok
        harness.catch_up()
        elapsed = asyncio.get_running_loop().time() - start
        stored_keys = (cluster.api.get(f"/api/v1/namespaces/{NAMESPACE}/configmaps/{DP_CONFIGMAP}") or {})["data"]
        assert device_plugin_key("p", FOUR) in stored_keys, "written by the first pass after the edit"
        if cluster.node("l4-1")["metadata"]["labels"][DP] == device_plugin_key("p", FOUR):
            moved_at = elapsed
        else:
            await asyncio.sleep(5)
    assert 30 <= moved_at <= 40, "first seen by the pass after the one that wrote it, moved 30 s later"
