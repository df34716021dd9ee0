"""Writes carry only the difference: node merge patches, ConfigMap patches, status diffs."""

from __future__ import annotations

from accelpool.decide.patches import configmap_patch, merge_diff, node_patch
from accelpool.model.nodes import NodeChange, Taint
from accelpool_api import conventions

from .conftest import node

GKE = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
NO_EXECUTE = {"key": "example.com/maintenance", "effect": "NoExecute", "timeAdded": "2026-11-01T00:00:00Z"}


def test_a_claim_patch_has_only_changed_keys_the_resource_version_and_the_whole_taint_list() -> None:
    view = node("n1", labels={"team": "ml"}, taints=[GKE, NO_EXECUTE], resource_version="41")
    change = NodeChange(
        node="n1",
        pool="p",
        labels={conventions.POOL_LABEL: "p", conventions.DEVICE_PLUGIN_CONFIG_LABEL: "accelpool-p"},
        annotations={conventions.JOINED_ANNOTATION: "2026-11-02T00:00:00Z"},
        add_taints=(Taint(conventions.POOL_TAINT_KEY, "NoSchedule", "p"),),
    )
    assert node_patch(view, change) == {
        "metadata": {
            "labels": {conventions.POOL_LABEL: "p", conventions.DEVICE_PLUGIN_CONFIG_LABEL: "accelpool-p"},
            "annotations": {conventions.JOINED_ANNOTATION: "2026-11-02T00:00:00Z"},
            "resourceVersion": "41",
        },
        "spec": {"taints": [GKE, NO_EXECUTE, {"key": "accelpool.io/pool", "value": "p", "effect": "NoSchedule"}]},
    }


def test_nothing_to_change_is_no_patch() -> None:
    view = node(
        "n1",
        labels={conventions.POOL_LABEL: "p"},
        taints=[{"key": conventions.POOL_TAINT_KEY, "value": "p", "effect": "NoSchedule"}],
    )
    change = NodeChange(
        node="n1",
        pool="p",
        labels={conventions.POOL_LABEL: "p", conventions.MIG_CONFIG_LABEL: None},
        add_taints=(Taint(conventions.POOL_TAINT_KEY, "NoSchedule", "p"),),
        unschedulable=False,
    )
    assert node_patch(view, change) is None


def test_release_removes_keys_with_null_and_uncordons() -> None:
    view = node(
        "n1",
        labels={conventions.POOL_LABEL: "p"},
        annotations={conventions.CORDONED_ANNOTATION: "true"},
        taints=[GKE, {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}],
        unschedulable=True,
    )
    change = NodeChange(
        node="n1",
        pool=None,
        labels={conventions.POOL_LABEL: None},
        annotations={conventions.CORDONED_ANNOTATION: None},
        remove_taints=(Taint(conventions.QUARANTINE_TAINT_KEY, "NoSchedule", "XidError79"),),
        unschedulable=False,
    )
    patch = node_patch(view, change)
    assert patch is not None
    assert patch["metadata"]["labels"] == {conventions.POOL_LABEL: None}
    assert patch["metadata"]["annotations"] == {conventions.CORDONED_ANNOTATION: None}
    assert patch["spec"] == {"taints": [GKE], "unschedulable": None}


def test_the_last_taint_removed_clears_the_list() -> None:
    view = node("n1", taints=[{"key": conventions.POOL_TAINT_KEY, "value": "p", "effect": "NoSchedule"}])
    change = NodeChange("n1", None, remove_taints=(Taint(conventions.POOL_TAINT_KEY, "NoSchedule", "p"),))
    assert node_patch(view, change) == {"metadata": {"resourceVersion": "1"}, "spec": {"taints": None}}


def test_a_pool_taint_of_another_value_is_replaced_in_place() -> None:
    view = node("n1", taints=[GKE, {"key": conventions.POOL_TAINT_KEY, "value": "old", "effect": "NoSchedule"}])
    change = NodeChange("n1", "new", add_taints=(Taint(conventions.POOL_TAINT_KEY, "NoSchedule", "new"),))
    patch = node_patch(view, change)
    assert patch is not None
    assert patch["spec"]["taints"] == [GKE, {"key": conventions.POOL_TAINT_KEY, "value": "new", "effect": "NoSchedule"}]


def test_configmap_create_patch_and_no_op() -> None:
    created = configmap_patch(
        None, name="cm", namespace="ns", data={"default": "a"}, managed=frozenset({"default"}), annotation="k"
    )
    assert created is not None and created[0] == "create"
    assert created[1]["metadata"]["annotations"] == {"k": "default"}
    current = {
        "metadata": {"name": "cm", "resourceVersion": "7", "annotations": {"k": "accelpool-gone,default"}},
        "data": {"default": "a", "accelpool-gone": "x", "theirs": "y"},
    }
    change = configmap_patch(
        current,
        name="cm",
        namespace="ns",
        data={"default": "a", "theirs": "y", "accelpool-new": "z"},
        managed=frozenset({"default", "accelpool-new"}),
        annotation="k",
    )
    assert change == (
        "patch",
        {
            "metadata": {"annotations": {"k": "accelpool-new,default"}, "resourceVersion": "7"},
            "data": {"accelpool-new": "z", "accelpool-gone": None},
        },
    )
    same = configmap_patch(
        current,
        name="cm",
        namespace="ns",
        data=current["data"],  # type: ignore[arg-type]
        managed=frozenset({"accelpool-gone", "default"}),
        annotation="k",
    )
    assert same is None


def test_merge_diff() -> None:
    current = {"phase": "Ready", "nodes": {"ready": 2, "members": 2}, "conditions": [{"type": "Valid"}], "old": 1}
    desired = {"phase": "Degraded", "nodes": {"ready": 1, "members": 2}, "conditions": [{"type": "Valid"}]}
    assert merge_diff(current, desired) == {"phase": "Degraded", "nodes": {"ready": 1}, "old": None}
    assert merge_diff(desired, desired) is None
    assert merge_diff({}, {"a": {"b": 1}}) == {"a": {"b": 1}}
    assert merge_diff({"list": [1, 2]}, {"list": [2]}) == {"list": [2]}
