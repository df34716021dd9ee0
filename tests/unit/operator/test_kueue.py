"""Kueue's objects for the pools that ask (`accelpool.decide.kueue`): the ResourceFlavor, the ClusterQueue's quota
following the pool's healthy requestable capacity, only accelpool's entries edited, and the statuses."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import pytest

from accelpool.decide import kueue
from accelpool.decide.kueue import KueueObserved, edit_groups
from accelpool.decide.planning import Plan
from accelpool_api import conventions
from tests.support.builders import resource_slice as slice_of
from tests.support.kueue import CPU_AND_MEMORY, as_dra, cluster_queue, configuration_problems, webhook_problems
from tests.unit.operator.conftest import NOW, member, pool, run
from tests.unit.operator.test_dra import POOL, SPEC, dra_member, inputs, run_dra

GPU = "nvidia.com/gpu"


def _flavor(name: str, pool_name: str | None, **metadata: Any) -> dict[str, Any]:
    labels = {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: pool_name}
    return {"metadata": {"name": name, "labels": labels if pool_name else {}, **metadata}, "spec": {}}


def _queue(name: str, groups: list[dict[str, Any]], version: str = "7") -> dict[str, Any]:
    queue = cluster_queue(name, copy.deepcopy(groups))
    queue["metadata"]["resourceVersion"] = version
    return queue


def _decide(result: Plan, observed: KueueObserved) -> tuple[Plan, kueue.KueuePlan]:
    return kueue.decide(result, {}, observed, NOW)


def _status(result: Plan, name: str) -> Any:
    found = result.pool(name)
    assert found is not None and found.status is not None
    return found.status


def _condition(result: Plan, name: str) -> tuple[str, str, str]:
    (found,) = [c for c in _status(result, name).conditions if c.type == "KueueSynced"]
    return found.status, found.reason, found.message


TRAINING = {"accelerator": "H100:8", "nodes": 3, "kueue": {"enabled": True, "clusterQueue": "research"}}


def _training_plan(quarantined: int = 0) -> Plan:
    """Pool `training` (3 nodes of 8 H100s, ClusterQueue research), the first `quarantined` members quarantined."""
    taint = {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}
    nodes = [member(f"h{i}", "training", taints=[taint] if i < quarantined else []) for i in range(3)]
    return run([pool("training", TRAINING)], nodes)


# ---------------------------------------------------------------- the ClusterQueue's groups


def test_a_flavor_gets_a_new_group_when_no_group_covers_its_resources() -> None:
    groups, conflicts = edit_groups([CPU_AND_MEMORY], {"h100": {GPU: 24}}, {"h100"})
    assert conflicts == []
    assert groups == [
        CPU_AND_MEMORY,
        {"coveredResources": [GPU], "flavors": [{"name": "h100", "resources": [{"name": GPU, "nominalQuota": 24}]}]},
    ]


def test_a_flavor_joins_the_group_covering_its_resources_and_keeps_its_limits() -> None:
    gpus: dict[str, Any] = {
        "coveredResources": ["cpu", GPU],
        "flavors": [
            {"name": "a100", "resources": [{"name": "cpu", "nominalQuota": 64}, {"name": GPU, "nominalQuota": 8}]}
        ],
    }
    groups, _ = edit_groups([gpus], {"h100": {GPU: 16}}, {"h100"})
    assert groups[0]["flavors"][1] == {
        "name": "h100",
        "resources": [{"name": "cpu", "nominalQuota": 0}, {"name": GPU, "nominalQuota": 16}],
    }, "every covered resource, in coveredResources order"
    limited = copy.deepcopy(groups)
    limited[0]["flavors"][1]["resources"][1]["lendingLimit"] = 4
    again, _ = edit_groups(limited, {"h100": {GPU: 8}}, {"h100"})
    assert again[0]["flavors"][1]["resources"][1] == {"name": GPU, "nominalQuota": 8, "lendingLimit": 4}
    assert again[0]["flavors"][0] == gpus["flavors"][0], "another flavor's entry is left as it was"


def test_flavors_no_pool_wants_are_removed_with_the_groups_they_empty() -> None:
    ours = {"coveredResources": [GPU], "flavors": [{"name": "old", "resources": [{"name": GPU, "nominalQuota": 8}]}]}
    groups, _ = edit_groups([CPU_AND_MEMORY, ours], {}, {"old"})
    assert groups == [CPU_AND_MEMORY]


def test_resources_split_over_groups_are_a_conflict_not_a_rewrite() -> None:
    mig = {"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 8}
    split = [
        {
            "coveredResources": ["nvidia.com/mig-3g.40gb"],
            "flavors": [{"name": "other", "resources": [{"name": "nvidia.com/mig-3g.40gb", "nominalQuota": 2}]}],
        },
    ]
    groups, conflicts = edit_groups(split, {"slices": mig}, {"slices"})
    assert groups == split
    assert [c.flavor for c in conflicts] == ["slices"]
    assert "no resource group covers all of nvidia.com/mig-1g.10gb, nvidia.com/mig-3g.40gb" in conflicts[0].message


# ---------------------------------------------------------------- decide


def test_nothing_happens_for_pools_that_do_not_ask() -> None:
    result = run([pool("plain", {"accelerator": "H100:8"})], [member("h0", "plain")])
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    after, writes = _decide(result, observed)
    assert after == result
    assert writes == kueue.KueuePlan()


def test_the_flavor_and_the_quota_of_an_asking_pool() -> None:
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    after, writes = _decide(_training_plan(), observed)
    pool_name, flavor = writes.flavors["training"]
    assert pool_name == "training"
    assert flavor["spec"] == {
        "nodeLabels": {conventions.POOL_LABEL: "training"},
        "tolerations": [
            {"key": conventions.POOL_TAINT_KEY, "operator": "Equal", "value": "training", "effect": "NoSchedule"}
        ],
    }
    assert flavor["metadata"]["ownerReferences"][0]["uid"] == "uid-training"
    (edit,) = writes.queues
    assert (edit.name, edit.resource_version, edit.pools, edit.grows) == ("research", "7", ("training",), True)
    assert edit.resource_groups[0] == CPU_AND_MEMORY
    assert edit.resource_groups[1]["flavors"] == [
        {"name": "training", "resources": [{"name": GPU, "nominalQuota": 24}]}
    ]
    status = _status(after, "training")
    assert status.kueue.model_dump(by_alias=True, exclude_none=True) == {
        "resourceFlavor": "training",
        "clusterQueue": "research",
        "nominalQuota": {GPU: 24},
    }
    assert _condition(after, "training")[:2] == ("True", "Synced")
    assert [c.type for c in status.conditions][-2:] == ["KueueSynced", "Ready"]
    assert any(e.reason == "KueueQuotaUpdated" and "none -> nvidia.com/gpu=24" in e.message for e in after.events)


def test_a_quarantined_nodes_gpus_leave_the_quota() -> None:
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    _, writes = _decide(_training_plan(), observed)
    stored = _queue("research", writes.queues[0].resource_groups, version="8")
    after, writes = _decide(_training_plan(quarantined=1), KueueObserved(True, queues={"research": stored}))
    (edit,) = writes.queues
    assert edit.resource_groups[1]["flavors"][0]["resources"] == [{"name": GPU, "nominalQuota": 16}]
    assert edit.resource_version == "8"
    assert not edit.grows, "a lower quota is written before the node writes"
    assert _status(after, "training").kueue.nominal_quota == {GPU: 16}
    settled = _queue("research", edit.resource_groups, version="9")
    _, writes = _decide(_training_plan(quarantined=1), KueueObserved(True, queues={"research": settled}))
    assert writes.queues == (), "a queue that already says it is not written"


@pytest.mark.parametrize(
    ("observed", "reason", "event_reason"),
    [
        (KueueObserved(False), "KueueNotInstalled", "KueueNotInstalled"),
        (KueueObserved(False, error="403 Forbidden"), "KueueUnreadable", "KueueUnreadable"),
        (KueueObserved(True), "ClusterQueueNotFound", "KueueClusterQueueNotFound"),
        (KueueObserved(True, flavors={"training": _flavor("training", None)}), "FlavorNotOwned", "KueueFlavorNotOwned"),
        (
            KueueObserved(True, flavors={"training": _flavor("training", "training", deletionTimestamp="t")}),
            "FlavorTerminating",
            "KueueFlavorTerminating",
        ),
    ],
)
def test_what_keeps_a_pool_out_of_kueue_is_in_its_status(
    observed: KueueObserved, reason: str, event_reason: str
) -> None:
    after, writes = _decide(_training_plan(), observed)
    status, found, message = _condition(after, "training")
    assert (status, found) == ("False", reason)
    assert writes.queues == ()
    if reason == "ClusterQueueNotFound":
        assert "ClusterQueue research does not exist: accelpool never creates one" in message
        assert "training" in writes.flavors, "the flavor is kept meanwhile"
    else:
        assert writes.flavors == {}
    # The Warning's reason names Kueue once (KueueNotInstalled, not KueueKueueNotInstalled).
    assert [e.reason for e in after.events if e.type == "Warning"] == [event_reason]


def test_a_deleted_pools_flavor_leaves_every_queue_then_goes() -> None:
    listed: dict[str, Any] = {
        "coveredResources": [GPU],
        "flavors": [
            {"name": "training", "resources": [{"name": GPU, "nominalQuota": 24}]},
            {"name": "users-own", "resources": [{"name": GPU, "nominalQuota": 4}]},
        ],
    }
    observed = KueueObserved(
        True,
        flavors={"training": _flavor("training", "training"), "users-own": _flavor("users-own", None)},
        queues={"research": _queue("research", [listed]), "other": _queue("other", [CPU_AND_MEMORY])},
    )
    result = run([pool("training", TRAINING, deleting=True)], [member("h0", "training")])
    _, writes = _decide(result, observed)
    (edit,) = writes.queues
    assert edit.name == "research"
    assert edit.resource_groups == [{"coveredResources": [GPU], "flavors": [listed["flavors"][1]]}]
    assert writes.deletions == {"training": "training"}
    assert writes.flavors == {}


def test_the_first_pool_naming_a_flavor_keeps_it() -> None:
    spec = {**TRAINING, "kueue": {"enabled": True, "resourceFlavor": "h100"}}
    result = run([pool("a", spec), pool("b", spec)], [member("h0", "a"), member("h1", "b")])
    after, writes = _decide(result, KueueObserved(True))
    assert list(writes.flavors) == ["h100"]
    assert writes.flavors["h100"][0] == "a"
    assert _condition(after, "b")[:2] == ("False", "FlavorConflict")


def test_a_group_of_accelpools_flavors_only_is_extended_to_cover_a_new_pools_resources() -> None:
    first = {"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-1g.10gb": 8}
    groups, _ = edit_groups([CPU_AND_MEMORY], {"a": first}, {"a"})
    second = {"nvidia.com/mig-3g.40gb": 4, "nvidia.com/mig-2g.20gb": 4}
    groups, conflicts = edit_groups(groups, {"a": first, "b": second}, {"a", "b"})
    assert conflicts == []
    assert groups[0] == CPU_AND_MEMORY
    covered = ["nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb"]
    assert groups[1]["coveredResources"] == covered
    assert [[r["nominalQuota"] for r in f["resources"]] for f in groups[1]["flavors"]] == [[8, 16, 0], [0, 4, 4]]
    assert webhook_problems(cluster_queue("q", groups)) == []


# ---------------------------------------------------------------- DRA pools

DRA = {**TRAINING, "allocation": "DRA"}
DRA_GPUS = "deviceclass.resource.kubernetes.io/training.accelpool.io"


def _dra_plan(resources: dict[str, int], device_class: str | None = None, spec: dict[str, Any] | None = None) -> Plan:
    """Pool `training` with allocation DRA (3 nodes, ClusterQueue research), its slices offering `resources`."""
    result = run([pool("training", spec or DRA)], [member(f"h{i}", "training") for i in range(3)])
    return as_dra(result, "training", resources, device_class)


def test_a_dra_pools_devices_are_one_quota_resource_its_device_class_maps_to() -> None:
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    after, writes = _decide(_dra_plan({DRA_GPUS: 22}), observed)
    (edit,) = writes.queues
    assert edit.resource_groups == [
        CPU_AND_MEMORY,
        {
            "coveredResources": [DRA_GPUS],
            "flavors": [{"name": "training", "resources": [{"name": DRA_GPUS, "nominalQuota": 22}]}],
        },
    ]
    assert webhook_problems(cluster_queue("research", edit.resource_groups)) == []
    assert writes.flavors["training"][1]["spec"]["nodeLabels"] == {conventions.POOL_LABEL: "training"}
    status = _status(after, "training")
    assert status.kueue.model_dump(by_alias=True, exclude_none=True) == {
        "resourceFlavor": "training",
        "clusterQueue": "research",
        "nominalQuota": {DRA_GPUS: 22},
        "deviceClassMapping": {"name": DRA_GPUS, "deviceClassNames": ["training.accelpool.io"]},
    }
    assert configuration_problems([status.kueue.device_class_mapping.model_dump(by_alias=True)]) == []
    condition, reason, message = _condition(after, "training")
    assert (condition, reason) == ("True", "Synced")
    assert (
        f"resources.deviceClassMappings entry {{name: {DRA_GPUS}, deviceClassNames: [training.accelpool.io]}}"
        in message
    )
    assert "reads only when it starts: restart kueue-controller-manager" in message


def test_a_dra_pools_quota_counts_devices_of_every_kind_its_class_selects() -> None:
    mig = {"nvidia.com/mig-3g.40gb": 12, "nvidia.com/mig-1g.10gb": 24}
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    after, _ = _decide(_dra_plan(mig), observed)
    assert _status(after, "training").kueue.nominal_quota == {DRA_GPUS: 36}


def test_a_dra_pool_without_a_queue_still_says_what_kueue_needs() -> None:
    spec = {**DRA, "kueue": {"enabled": True}}
    after, writes = _decide(_dra_plan({DRA_GPUS: 24}, spec=spec), KueueObserved(True))
    assert "training" in writes.flavors
    status, reason, message = _condition(after, "training")
    assert (status, reason) == ("True", "FlavorSynced")
    assert f"{{name: {DRA_GPUS}, deviceClassNames: [training.accelpool.io]}}" in message
    assert _status(after, "training").kueue.device_class_mapping.name == DRA_GPUS


@pytest.mark.parametrize(
    ("device_class", "reason", "said"),
    [
        (None, "DeviceClassPending", "the pool's DeviceClass is not in its status yet"),
        ("x" * 51 + ".accelpool.io", "DeviceClassNotMappable", "at most 63 characters"),
    ],
)
def test_a_dra_pool_whose_class_kueue_cannot_map_gets_no_quota(
    device_class: str | None, reason: str, said: str
) -> None:
    result = _dra_plan({DRA_GPUS: 24}, device_class)
    if device_class is None:  # the status names no class yet
        planned = _status(result, "training")
        unnamed = planned.model_copy(
            update={"dra": None, "scheduling": planned.scheduling.model_copy(update={"device_class_name": None})}
        )
        result = dataclasses.replace(result, pools=(dataclasses.replace(result.pools[0], status=unnamed),))
    held = {
        "coveredResources": [GPU],
        "flavors": [{"name": "training", "resources": [{"name": GPU, "nominalQuota": 24}]}],
    }
    observed = KueueObserved(
        True, flavors={"training": _flavor("training", "training")}, queues={"research": _queue("research", [held])}
    )
    after, writes = _decide(result, observed)
    status, found, message = _condition(after, "training")
    assert (status, found) == ("False", reason)
    assert said in message
    assert "training" in writes.flavors, "the flavor is kept"
    (edit,) = writes.queues
    assert edit.resource_groups == [], "the flavor's old quota leaves the queue"
    assert _status(after, "training").kueue.device_class_mapping is None


def test_a_pool_turning_to_dra_moves_its_quota_to_the_device_class_resource() -> None:
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    _, writes = _decide(_training_plan(), observed)
    stored = _queue("research", writes.queues[0].resource_groups, version="8")
    after, writes = _decide(_dra_plan({GPU: 24}), KueueObserved(True, queues={"research": stored}))
    (edit,) = writes.queues
    assert edit.resource_groups[1:] == [
        {
            "coveredResources": [DRA_GPUS],
            "flavors": [{"name": "training", "resources": [{"name": DRA_GPUS, "nominalQuota": 24}]}],
        }
    ], "the nvidia.com/gpu group it leaves empty goes"
    assert any(f"nvidia.com/gpu=24 -> {DRA_GPUS}=24" in e.message for e in after.events)


def test_dra_pools_sharing_a_queue_get_a_group_and_a_mapping_each() -> None:
    result = run([pool("a", DRA), pool("b", DRA)], [member("h0", "a"), member("h1", "b")])
    result = as_dra(as_dra(result, "a", {"x": 8}), "b", {"x": 4})
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    after, writes = _decide(result, observed)
    (edit,) = writes.queues
    assert [g["coveredResources"] for g in edit.resource_groups] == [
        ["cpu", "memory"],
        ["deviceclass.resource.kubernetes.io/a.accelpool.io"],
        ["deviceclass.resource.kubernetes.io/b.accelpool.io"],
    ]
    assert webhook_problems(cluster_queue("research", edit.resource_groups)) == []
    mappings = [_status(after, name).kueue.device_class_mapping.model_dump(by_alias=True) for name in ("a", "b")]
    assert configuration_problems(mappings) == []


def test_the_quota_follows_the_planners_dra_capacity_a_gpu_quarantined_alone_leaves_it() -> None:
    spec = {**SPEC, "kueue": {"enabled": True, "clusterQueue": "research"}}
    resource = f"deviceclass.resource.kubernetes.io/{POOL}.accelpool.io"
    observed = KueueObserved(True, queues={"research": _queue("research", [CPU_AND_MEMORY])})
    healthy, _ = run_dra(
        [pool(POOL, spec)], [dra_member("g0"), dra_member("g1")], inputs(slice_of("g0"), slice_of("g1"))
    )
    after, writes = _decide(healthy, observed)
    assert _status(after, POOL).kueue.nominal_quota == {resource: 16}
    assert _status(after, POOL).kueue.device_class_mapping.name == resource, "the planner's resource is Kueue's"
    stored = _queue("research", writes.queues[0].resource_groups, version="8")
    one_bad, _ = run_dra(
        [pool(POOL, spec)], [dra_member("g0", bad=[3]), dra_member("g1")], inputs(slice_of("g0"), slice_of("g1"))
    )
    after, writes = _decide(one_bad, KueueObserved(True, queues={"research": stored}))
    assert _status(after, POOL).quarantine.scope == "GPU"
    (edit,) = writes.queues
    assert edit.resource_groups[1]["flavors"][0]["resources"] == [{"name": resource, "nominalQuota": 15}]
    assert not edit.grows
