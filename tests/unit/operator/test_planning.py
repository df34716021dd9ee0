"""The planner on realistic clusters: selection, stability, determinism, scale-down, competition, ownership."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from datetime import timedelta

from accelpool.decide.planning import ConfigState
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView, Taint
from accelpool_api import conventions

from .conftest import (
    NOW,
    applied,
    conditions,
    device_plugin_key,
    fixture_nodes,
    member,
    members,
    mig_entry_name,
    node,
    node_body,
    pool,
    run,
)

POOL_TAINT = conventions.POOL_TAINT_KEY


# ---------------------------------------------------------------- selection on the shared fixture


def test_the_shared_fixture_cluster() -> None:
    nodes = fixture_nodes()
    result = run(
        [
            pool("train", {"accelerator": "H100:8", "nodes": 4}),
            pool(
                "slices",
                {
                    "accelerator": {"name": "A100", "memory": "40GB"},
                    "nodes": 2,
                    "mig": {"profile": "3g.20gb"},
                    "health": {"burnIn": False},  # its capacity counts the nodes it claims at once
                },
            ),
            pool(
                "inference",
                {
                    "accelerator": "L4",
                    "nodes": 3,
                    "dedicated": False,
                    "sharing": {"timeSlicing": {"replicas": 4}},
                    "health": {"burnIn": False},
                },
            ),
            pool("amd", {"accelerator": "MI300X:8", "nodes": 2}),
            pool("tpu", {"accelerator": "TPU-v5p", "nodes": 1}),
            pool("neuron", {"accelerator": "Trainium", "nodes": 1}),
            pool("t4", {"accelerator": "T4", "nodes": 2}),
            pool("h200", {"accelerator": "H200", "nodes": 3}),
        ],
        nodes,
    )
    # h100-7 is cordoned and h100-8 NotReady: never claimed.
    assert members(result, "train") == ["h100-1", "h100-2", "h100-3", "h100-4"]
    assert members(result, "slices") == ["a100-40-1", "a100-40-2"]
    assert members(result, "inference") == ["gke-l4-1", "gke-l4-2", "gke-l4-3"]
    assert members(result, "amd") == ["mi300x-1", "mi300x-2"]
    assert members(result, "tpu") == ["gke-tpu-v5p-1"]
    assert members(result, "neuron") == ["trn1-1"]
    assert members(result, "t4") == ["ip-10-0-1-11.ec2.internal", "ip-10-0-1-12.ec2.internal"]
    assert members(result, "h200") == ["h200-1", "h200-2"]
    assert conditions(result, "h200")["NodesSelected"] == ("False", "InsufficientNodes")
    h200 = result.pool("h200")
    assert h200 is not None and h200.status is not None
    assert h200.status.conditions[1].message == "2 of 3: only 2 free nodes match H200-141GB"
    # GKE taints every GPU node nvidia.com/gpu=present: it does not disqualify, and pods must tolerate it.
    inference = result.pool("inference")
    assert inference is not None and inference.status is not None
    assert [t.model_dump(exclude_none=True) for t in inference.status.scheduling.tolerations] == [
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}
    ]
    # Capacity counts what serves the pool's config: the snapshot predates the pool's time-slicing config
    # (1 nvidia.com/gpu per L4, not 4), so nothing does yet, and the condition says the plugin has not applied it.
    assert inference.status.capacity.resources == {"nvidia.com/gpu": 0}
    assert (inference.status.capacity.gpus, inference.status.capacity.unconfigured_gpus) == (0, 3)
    assert conditions(result, "inference")["DevicePluginConfigured"] == ("False", "NotAdvertised")
    message = next(c.message for c in inference.status.conditions if c.type == "DevicePluginConfigured")
    assert "advertises nvidia.com/gpu=1 of 4" in message
    slices = result.pool("slices")
    assert slices is not None and slices.status is not None
    # 16 whole GPUs advertised before the MIG manager has split them: not the pool's layout, so none counts
    assert slices.status.capacity.resources == {"nvidia.com/gpu": 0}
    assert conditions(result, "slices")["MigConfigured"] == ("False", "Pending")
    assert (slices.status.capacity.gpus, slices.status.capacity.unconfigured_gpus) == (0, 16)
    # The other pools' nodes joined this pass: they serve nothing until they pass burn-in.
    train = result.pool("train")
    assert train is not None and train.status is not None
    assert (train.status.capacity.gpus, train.status.capacity.burn_in_gpus) == (0, 32)
    assert (train.status.phase, train.status.nodes.burn_in) == ("Configuring", 4)


def test_cordoned_not_ready_unhealthy_and_quarantined_nodes_are_not_claimed() -> None:
    nodes = [
        node("n1", unschedulable=True),
        node("n2", ready=False),
        node("n3", health=("False", "XidError79", "fallen off the bus", "2026-11-01T00:00:00Z")),
        node("n4", taints=[{"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError48", "effect": "NoSchedule"}]),
        node("n5"),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 5})], nodes)
    assert members(result, "p") == ["n5"]
    found = result.pool("p")
    assert found is not None and found.status is not None
    message = found.status.conditions[1].message
    assert message == "1 of 5: only 1 free nodes match H100-80GB (1 cordoned, 1 not Ready, 1 quarantined, 1 unhealthy)"


def test_count_memory_form_factor_and_node_selector() -> None:
    nodes = [
        node("h100-4gpu", count=4),
        node("h100-8gpu", count=8, labels={"zone": "b"}),
        node("h100-8gpu-a", count=8, labels={"zone": "a"}),
        node("h100-pcie", "H100-80GB-PCIE", count=8, labels={"zone": "a"}),
        node("a100-40", "A100-40GB", count=8),
        node("a100-80", "A100-80GB", count=8),
    ]
    result = run(
        [
            pool(
                "sxm-a",
                {"accelerator": {"name": "H100", "formFactor": "SXM", "count": 8}, "nodeSelector": {"zone": "a"}},
            ),
            pool("pcie", {"accelerator": {"name": "H100", "formFactor": "PCIe"}}),
            pool("eighty", {"accelerator": {"name": "A100", "memory": "80GB"}}),
        ],
        nodes,
    )
    assert members(result, "sxm-a") == ["h100-8gpu-a"]
    assert members(result, "pcie") == ["h100-pcie"]
    assert members(result, "eighty") == ["a100-80"]


# ---------------------------------------------------------------- determinism and stability


def test_plans_are_deterministic_whatever_the_input_order() -> None:
    pools = [
        pool("a", {"accelerator": "H100", "nodes": 3}, created="2026-11-01T00:00:00Z"),
        pool("b", {"accelerator": "H100", "nodes": 3}, created="2026-11-01T00:00:01Z"),
        pool("c", {"accelerator": "A100-40GB", "mig": {"profile": "1g.5gb"}}),
    ]
    nodes = fixture_nodes()
    first = run(pools, nodes)
    shuffled_nodes, shuffled_pools = list(nodes), list(pools)
    random.Random(7).shuffle(shuffled_nodes)
    random.Random(7).shuffle(shuffled_pools)
    second = run(shuffled_pools, shuffled_nodes)
    assert first == second


def test_current_members_stay_even_when_lower_named_nodes_are_free() -> None:
    nodes = [node("aaa-free"), member("zzz-member", "p")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 1})], nodes)
    assert members(result, "p") == ["zzz-member"]
    assert "aaa-free" not in result.changes


def test_a_second_pass_over_the_written_state_changes_nothing() -> None:
    nodes = fixture_nodes()
    pools = [
        pool("train", {"accelerator": "H100:8", "nodes": 2}),
        pool("slices", {"accelerator": "A100-40GB", "mig": {"profiles": ["4g.20gb", "3g.20gb"]}}),
    ]
    first = run(pools, nodes)
    after = applied(nodes, first)
    second = run(pools, after, now=NOW + timedelta(hours=1))
    assert [p.members for p in second.pools] == [p.members for p in first.pools]
    from accelpool.decide.patches import node_patch

    by_name = {n.name: n for n in after}
    assert [name for name, change in second.changes.items() if node_patch(by_name[name], change)] == []


# ---------------------------------------------------------------- scale-down, competition


def test_scale_down_releases_the_most_recently_joined_first() -> None:
    nodes = [
        member("a", "p", joined="2026-10-03T00:00:00Z"),
        member("b", "p", joined="2026-10-01T00:00:00Z"),
        member("c", "p", joined="2026-10-05T00:00:00Z"),
        member("d", "p", joined="2026-10-02T00:00:00Z"),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    assert members(result, "p") == ["b", "d"]
    for released in ("a", "c"):
        change = result.changes[released]
        assert change.pool is None
        assert change.labels[conventions.POOL_LABEL] is None
        assert change.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] is None
        assert change.annotations[conventions.JOINED_ANNOTATION] is None
        assert [t.key for t in change.remove_taints] == [POOL_TAINT]


def test_older_pools_win_competition_and_the_other_is_told_why() -> None:
    nodes = [node(f"n{i}") for i in range(1, 5)]
    pools = [
        pool("young", {"accelerator": "H100", "nodes": 3}, created="2026-11-02T00:00:00Z"),
        pool("old", {"accelerator": "H100", "nodes": 3}, created="2026-11-01T00:00:00Z"),
    ]
    result = run(pools, nodes)
    assert members(result, "old") == ["n1", "n2", "n3"]
    assert members(result, "young") == ["n4"]
    assert conditions(result, "young")["NodesSelected"] == ("False", "InsufficientNodes")
    assert set(members(result, "old")).isdisjoint(members(result, "young"))


def test_another_pools_node_is_never_taken_and_unknown_pools_are_held_offline() -> None:
    nodes = [member("theirs", "other"), node("free")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes, release_orphans=False)
    assert members(result, "p") == ["free"]
    assert "theirs" not in result.changes
    in_cluster = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes, release_orphans=True)
    assert members(in_cluster, "p") == ["free", "theirs"], "an orphan (pool gone) is released, then free"


# ---------------------------------------------------------------- ownership


def test_other_labels_and_taints_are_never_touched() -> None:
    gke_taint = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
    foreign = node(
        "n1", "L4", 1, labels={"team": "ml", conventions.DEVICE_PLUGIN_CONFIG_LABEL: "admin"}, taints=[gke_taint]
    )
    result = run([pool("p", {"accelerator": "L4"})], [foreign])
    change = result.changes["n1"]
    assert set(change.labels) == {conventions.POOL_LABEL, conventions.DEVICE_PLUGIN_CONFIG_LABEL}
    assert change.remove_taints == ()
    assert json.loads(change.annotations[conventions.PRIOR_LABELS_ANNOTATION] or "") == {
        conventions.DEVICE_PLUGIN_CONFIG_LABEL: "admin"
    }
    claimed = foreign.apply(change)
    assert claimed.labels["team"] == "ml"
    assert Taint("nvidia.com/gpu", "NoSchedule", "present") in claimed.taints

    released = run([pool("p", {"accelerator": "L4"}, deleting=True)], [claimed])
    restored = claimed.apply(released.changes["n1"])
    assert restored.labels == foreign.labels, "the admin's device-plugin config comes back"
    assert restored.taints == foreign.taints
    assert not any(k.startswith("accelpool.io/") for k in restored.annotations)


def test_an_invalid_pool_keeps_its_nodes_and_config_untouched() -> None:
    held = member("n1", "bad", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: "accelpool-bad"})
    config = ConfigState(
        device_plugin={"accelpool-bad": "version: v1\n", "default": "x"},
        device_plugin_managed=frozenset({"accelpool-bad"}),
    )
    result = run(
        [pool("bad", {"accelerator": "L4", "mig": {"profile": "1g.5gb"}}), pool("good", {"accelerator": "H100"})],
        [held, node("n2")],
        config,
    )
    assert "n1" not in result.changes
    assert conditions(result, "bad") == {"Valid": ("False", "InvalidSpec"), "Ready": ("False", "Failed")}
    bad = result.pool("bad")
    assert bad is not None and bad.phase == "Failed" and bad.members == ("n1",)
    assert result.device_plugin["accelpool-bad"] == "version: v1\n"
    assert result.device_plugin["default"] == "x", "a default key someone else wrote is theirs"
    assert "default" not in result.device_plugin_managed


def test_deleting_a_pool_releases_everything_and_resets_mig() -> None:
    mig_member = member(
        "a1",
        "slices",
        "A100-40GB",
        labels={conventions.MIG_CONFIG_LABEL: "accelpool-slices", conventions.MIG_CONFIG_STATE_LABEL: "success"},
    )
    config = ConfigState(
        device_plugin={"accelpool-slices": "x", "other": "y"},
        device_plugin_managed=frozenset({"accelpool-slices", "default"}),
        mig={"version": "v1", "mig-configs": {"accelpool-slices": [], "custom": [], "all-disabled": []}},
        mig_managed=frozenset({"accelpool-slices", "all-disabled"}),
    )
    result = run(
        [pool("slices", {"accelerator": "A100-40GB", "mig": {"profile": "1g.5gb"}}, deleting=True)],
        [mig_member],
        config,
    )
    change = result.changes["a1"]
    assert change.labels[conventions.MIG_CONFIG_LABEL] == "all-disabled"
    assert change.labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    assert change.labels[conventions.POOL_LABEL] is None
    assert "accelpool-slices" not in result.device_plugin and result.device_plugin["other"] == "y"
    assert set(result.mig_document["mig-configs"]) == {"custom"} | nvidia.DEFAULT_MIG_CONFIG_NAMES
    deleted = result.pool("slices")
    assert deleted is not None and deleted.status is None and deleted.members == ()


def test_a_member_that_no_longer_matches_is_released_but_missing_labels_are_tolerated() -> None:
    wrong_zone = member("n1", "p", labels={"zone": "b"})
    relabelling = NodeView.from_body(
        {
            "metadata": {"name": "n2", "labels": {conventions.POOL_LABEL: "p"}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]},
        }
    )
    result = run(
        [pool("p", {"accelerator": "H100", "nodes": 2, "nodeSelector": {"zone": "a"}})], [wrong_zone, relabelling]
    )
    assert result.changes["n1"].pool is None
    assert members(result, "p") == ["n2"], "GFD labels missing for a while (MIG reconfiguration): kept"


# ---------------------------------------------------------------- NotReady members


def test_a_not_ready_member_is_reported_kept_and_replaced_only_after_the_grace_period() -> None:
    recent = (NOW - timedelta(seconds=60)).isoformat()
    nodes = [member("m1", "p", ready=False, ready_since=recent), member("m2", "p"), node("spare")]
    within = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes, not_ready_grace_seconds=300)
    assert members(within, "p") == ["m1", "m2"]
    assert within.requeue_after == 240
    found = within.pool("p")
    assert found is not None and found.phase == "Degraded"
    later = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes, not_ready_grace_seconds=30)
    assert members(later, "p") == ["m1", "m2", "spare"], "replaced, and kept so it can come back"


# ---------------------------------------------------------------- the NVIDIA configs


def test_config_documents_per_pool() -> None:
    result = run(
        [
            pool("ts", {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}}),
            pool("mps", {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}}),
            pool("mixed", {"accelerator": "H100", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}}),
            pool("amd", {"accelerator": "MI300X"}),
        ],
        [],
    )
    docs = result.device_plugin_documents
    ts = device_plugin_key("ts", {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}})
    mps = device_plugin_key("mps", {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}})
    mixed_spec = {"accelerator": "H100", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}}
    mixed, mixed_entry = device_plugin_key("mixed", mixed_spec), mig_entry_name("mixed", mixed_spec)
    assert set(docs) == {"default", ts, mps, mixed}, "no key for AMD"
    assert all(key.startswith(f"accelpool-{name}-") for key, name in ((ts, "ts"), (mps, "mps"), (mixed, "mixed")))
    assert docs[ts]["sharing"]["timeSlicing"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 4}]
    assert docs[mps]["sharing"]["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 2}]
    assert docs[mps]["sharing"]["mps"]["failRequestsGreaterThanOne"] is True, "NVIDIA's default under MPS"
    assert docs[mixed] == {"version": "v1", "flags": {"migStrategy": "mixed"}}
    assert docs["default"] == {"version": "v1", "flags": {"migStrategy": "single"}}, "the GPU Operator's default"
    assert result.mig_document["mig-configs"][mixed_entry] == [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2}}
    ]
    assert set(result.mig_document["mig-configs"]) == {mixed_entry} | nvidia.DEFAULT_MIG_CONFIG_NAMES
    assert next(iter(result.mig_document["mig-configs"])) == "all-disabled"


def test_mixed_strategy_capacity_is_per_profile() -> None:
    advertised = {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"}
    profiles = ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    applied_by_the_mig_manager = {
        conventions.MIG_CONFIG_LABEL: mig_entry_name("mixed", {"accelerator": "H100", "mig": {"profiles": profiles}}),
        conventions.MIG_CONFIG_STATE_LABEL: "success",
        conventions.GFD_MIG_STRATEGY_LABEL: "mixed",
    }
    nodes = [node("h1", count=8, allocatable=advertised, labels=applied_by_the_mig_manager)]
    result = run(
        [pool("mixed", {"accelerator": "H100", "mig": {"profiles": profiles}, "health": {"burnIn": False}})], nodes
    )
    found = result.pool("mixed")
    assert found is not None and found.status is not None
    assert found.status.capacity.resources == {
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-1g.10gb": 16,
    }


SEVEN_G_ENTRY = mig_entry_name("p", {"accelerator": "A100-40GB", "mig": {"profile": "7g.40gb"}})


def test_pool_spec_changes_move_mig_and_device_plugin_labels() -> None:
    was_mig = member(
        "n1",
        "p",
        "A100-40GB",
        labels={conventions.MIG_CONFIG_LABEL: SEVEN_G_ENTRY, conventions.MIG_CONFIG_STATE_LABEL: "success"},
    )
    result = run([pool("p", {"accelerator": "A100-40GB"})], [was_mig])
    change = result.changes["n1"]
    assert change.labels[conventions.MIG_CONFIG_LABEL] == "all-disabled"
    assert change.labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    becomes_mig = run(
        [pool("p", {"accelerator": "A100-40GB", "mig": {"profile": "7g.40gb"}})],
        [replace(was_mig, labels={**was_mig.labels, conventions.MIG_CONFIG_LABEL: "all-disabled"})],
    )
    assert becomes_mig.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] == SEVEN_G_ENTRY
    assert becomes_mig.changes["n1"].labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    unchanged = run(
        [pool("p", {"accelerator": "A100-40GB", "mig": {"profile": "7g.40gb"}})],
        [replace(was_mig, labels={**was_mig.labels})],
    )
    assert conventions.MIG_CONFIG_STATE_LABEL not in unchanged.changes["n1"].labels, "no reset without a change"


def test_dedicated_false_removes_the_pool_taint_it_set() -> None:
    result = run([pool("p", {"accelerator": "H100", "dedicated": False})], [member("n1", "p")])
    assert [t.key for t in result.changes["n1"].remove_taints] == [POOL_TAINT]
    assert result.changes["n1"].add_taints == ()


def test_a_pool_given_twice_counts_once_the_last_way() -> None:
    nodes = [node("n1"), node("n2")]
    result = run(
        [pool("p", {"accelerator": "H100", "nodes": 1}), pool("p", {"accelerator": "H100", "nodes": 2})], nodes
    )
    assert [p.name for p in result.pools] == ["p"]
    assert members(result, "p") == ["n1", "n2"]


def test_without_joined_at_the_newest_nodes_leave_first() -> None:
    def labelled(name: str, created: str) -> NodeView:
        body = node_body(name)
        body["metadata"]["labels"][conventions.POOL_LABEL] = "p"
        body["metadata"]["creationTimestamp"] = created
        return NodeView.from_body(body)

    nodes = [
        labelled("a", "2026-10-05T00:00:00Z"),
        labelled("b", "2026-10-01T00:00:00Z"),
        labelled("c", "2026-10-03T00:00:00Z"),
    ]
    result = run([pool("p", {"accelerator": "H100", "nodes": 1})], nodes)
    assert members(result, "p") == ["b"]
