"""The operator against what NVIDIA's components really publish: strategy overrides, layouts that never
appear, MIG left on under whole-GPU pools, and a MIG manager that never retries a failed config.

Members are built as GPU Feature Discovery, the device plugin and the MIG manager leave them:
`nvidia.com/mig.strategy` (GFD's strategy), `nvidia.com/gpu.product`, `nvidia.com/mig.config.state`
and the node's `status.allocatable`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool import cli
from accelpool.decide.planning import Plan
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, conditions, device_plugin_key, members, mig_entry_name, node, node_body, pool, run

HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T00:00:00Z")
MIXED = {"accelerator": "H100:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}}
MIXED_ADVERTISED = {"nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-2g.20gb": "8", "nvidia.com/mig-1g.10gb": "16"}


def mig_node(
    name: str,
    state: str | None,
    *,
    gfd: str | None = "mixed",
    allocatable: dict[str, str] | None = None,
    product: str | None = None,
    annotations: dict[str, str] | None = None,
    spec: Mapping[str, Any] | None = None,
) -> NodeView:
    labels = {
        conventions.POOL_LABEL: "p",
        conventions.DEVICE_PLUGIN_CONFIG_LABEL: device_plugin_key("p", spec or MIXED),
        conventions.MIG_CONFIG_LABEL: mig_entry_name("p", spec or MIXED),
    }
    if state is not None:
        labels[conventions.MIG_CONFIG_STATE_LABEL] = state
    if gfd is not None:
        labels[conventions.GFD_MIG_STRATEGY_LABEL] = gfd
    body = node_body(
        name,
        labels=labels,
        annotations={conventions.JOINED_ANNOTATION: "2026-10-01T00:00:00Z", **(annotations or {})},
        taints=[{"key": conventions.POOL_TAINT_KEY, "value": "p", "effect": "NoSchedule"}],
        health=HEALTHY,
        allocatable=MIXED_ADVERTISED if allocatable is None else allocatable,
    )
    if product is not None:
        body["metadata"]["labels"][conventions.GFD_PRODUCT_LABEL] = product
    return NodeView.from_body(body)


def message(result: Plan, kind: str) -> str:
    found = result.pool("p")
    assert found is not None and found.status is not None
    return next(c.message for c in found.status.conditions if c.type == kind)


def test_a_mixed_pool_whose_nodes_run_single_names_the_cluster_wide_override() -> None:
    result = run([pool("p", MIXED)], [mig_node("n1", "success", gfd="single", allocatable={"nvidia.com/gpu": "0"})])
    assert conditions(result, "p")["MigConfigured"] == ("False", "MigStrategyOverridden")
    assert conditions(result, "p")["DevicePluginConfigured"] == ("False", "MigStrategyOverridden")
    text = message(result, "DevicePluginConfigured")
    assert "runs the single MIG strategy" in text and "sets mixed" in text
    assert "spec.mig.strategy" in text and '"path":"/spec/mig/strategy"' in text
    found = result.pool("p")
    assert found is not None and found.phase == "Degraded"


def test_an_mps_pool_under_a_cluster_wide_mixed_strategy_is_not_configured() -> None:
    mps = {"accelerator": "L4", "sharing": {"mps": {"replicas": 4}}}
    labels = {conventions.POOL_LABEL: "p", conventions.GFD_MIG_STRATEGY_LABEL: "mixed"}
    view = node("l1", "L4", 1, labels=labels, health=HEALTHY, allocatable={"nvidia.com/gpu": "4"})
    result = run([pool("p", mps)], [view])
    assert conditions(result, "p")["DevicePluginConfigured"] == ("False", "MigStrategyOverridden")


def test_success_is_not_proof_a_layout_exists_until_the_node_advertises_it() -> None:
    nothing = mig_node("n1", "success", allocatable={"nvidia.com/gpu": "0"})
    result = run([pool("p", MIXED)], [nothing])
    assert conditions(result, "p")["MigConfigured"] == ("False", "NotAdvertised")
    assert "nvidia.com/mig-3g.40gb=0 of 8" in message(result, "MigConfigured")
    found = result.pool("p")
    assert found is not None and found.phase == "Configuring" and found.status is not None
    assert found.status.nodes.ready == 0

    advertised = run([pool("p", MIXED)], [mig_node("n1", "success")])
    assert conditions(advertised, "p")["MigConfigured"] == ("True", "Configured")


def test_gfd_calling_a_single_layout_invalid_is_reported() -> None:
    single = {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}
    invalid = mig_node(
        "n1",
        "success",
        gfd="single",
        product="NVIDIA-H100-80GB-HBM3-MIG-INVALID",
        allocatable={"nvidia.com/gpu": "0"},
        spec=single,
    )
    result = run([pool("p", single)], [invalid])
    assert conditions(result, "p")["MigConfigured"] == ("False", "NotAdvertised")
    assert "MIG-INVALID" in message(result, "MigConfigured")


def test_a_whole_gpu_pool_turns_mig_off_on_mig_capable_gpus_and_gives_back_what_was_there() -> None:
    foreign = node(  # someone split it into 7 x 1g.10gb per GPU
        "n1", labels={conventions.MIG_CONFIG_LABEL: "all-1g.10gb"}, allocatable={"nvidia.com/mig-1g.10gb": "56"}
    )
    bare = node("n2")
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], [foreign, bare])
    assert members(result, "p") == ["n1", "n2"]
    for name in ("n1", "n2"):
        change = result.changes[name]
        assert change.labels[conventions.MIG_CONFIG_LABEL] == conventions.MIG_DISABLED_CONFIG
        assert change.labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    assert (
        json.loads(result.changes["n1"].annotations[conventions.PRIOR_LABELS_ANNOTATION] or "{}")[
            conventions.MIG_CONFIG_LABEL
        ]
        == "all-1g.10gb"
    )
    assert conditions(result, "p")["MigConfigured"] == ("False", "Pending")

    joined = [foreign.apply(result.changes["n1"]), bare.apply(result.changes["n2"])]
    released = run([pool("p", {"accelerator": "H100", "nodes": 2}, deleting=True)], joined)
    assert released.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] == "all-1g.10gb"
    assert released.changes["n2"].labels[conventions.MIG_CONFIG_LABEL] is None
    assert released.changes["n2"].labels[conventions.MIG_CONFIG_STATE_LABEL] is None


def test_mig_off_is_proven_only_by_the_mig_manager_whole_gpus_and_the_plain_product() -> None:
    labels = {
        conventions.POOL_LABEL: "p",
        conventions.DEVICE_PLUGIN_CONFIG_LABEL: device_plugin_key("p", {"accelerator": "H100"}),
        conventions.MIG_CONFIG_LABEL: conventions.MIG_DISABLED_CONFIG,
    }
    silent = node("n1", labels=labels, health=HEALTHY)  # whole GPUs advertised; no MIG manager has spoken
    result = run([pool("p", {"accelerator": "H100"})], [silent])
    assert conditions(result, "p")["MigConfigured"] == ("False", "Pending"), "a count alone proves nothing"
    found = result.pool("p")
    assert found is not None and found.status is not None and found.status.capacity.gpus == 0
    assert found.status.capacity.unconfigured_gpus == 8

    success = {**labels, conventions.MIG_CONFIG_STATE_LABEL: "success"}
    off = node("n1", labels=success, health=HEALTHY)
    assert conditions(run([pool("p", {"accelerator": "H100"})], [off]), "p")["MigConfigured"] == ("True", "Disabled")

    # `success` for all-disabled while MIG is still on: under single the slices are advertised as nvidia.com/gpu
    sliced = {**success, conventions.GFD_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}
    still_mig = node("n1", labels=sliced, health=HEALTHY, allocatable={"nvidia.com/gpu": "8"})
    result = run([pool("p", {"accelerator": "H100"})], [still_mig])
    assert conditions(result, "p")["MigConfigured"] == ("False", "NotAdvertised")
    assert "MIG still on" in message(result, "MigConfigured")
    mixed = node("n1", labels=success, health=HEALTHY, allocatable={"nvidia.com/mig-1g.10gb": "56"})
    result = run([pool("p", {"accelerator": "H100"})], [mixed])
    assert conditions(result, "p")["MigConfigured"] == ("False", "NotAdvertised")


def _retry(view: NodeView) -> str | None:
    return view.annotations.get(conventions.MIG_RETRY_ANNOTATION)


def _after(result: Plan, view: NodeView) -> NodeView:
    return view.apply(result.changes[view.name]) if view.name in result.changes else view


def test_a_failed_mig_config_is_set_again_with_backoff_because_the_mig_manager_never_retries() -> None:
    spec = {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}
    view = mig_node("n1", "failed", gfd=None, allocatable={}, spec=spec)
    entry = mig_entry_name("p", spec)
    first = run([pool("p", spec)], [view])
    assert first.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] == entry, "not at once"
    view = _after(first, view)
    assert _retry(view) == "0@2026-11-02T12:00:00Z"
    assert first.requeue_after == 60.0

    early = run([pool("p", spec)], [view], now=NOW + timedelta(seconds=30))
    assert early.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] == entry

    retried = run([pool("p", spec)], [view], now=NOW + timedelta(seconds=61))
    assert retried.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] is None, "taken off once"
    assert any(e.reason == "MigConfigRetried" for e in retried.events)
    view = _after(retried, view)
    assert _retry(view) == "1@2026-11-02T12:01:01Z"

    put_back = run([pool("p", spec)], [view], now=NOW + timedelta(seconds=62))
    change = put_back.changes["n1"]
    assert change.labels[conventions.MIG_CONFIG_LABEL] == entry, "and set again: a change to the MIG manager"
    assert change.labels[conventions.MIG_CONFIG_STATE_LABEL] == "pending"
    view = _after(put_back, view)

    labels = dict(view.labels) | {conventions.MIG_CONFIG_STATE_LABEL: "success"}
    serving = replace(view, labels=labels, allocatable={"nvidia.com/gpu": "16"})
    done = run([pool("p", spec)], [serving], now=NOW + timedelta(seconds=120))
    assert done.changes["n1"].annotations[conventions.MIG_RETRY_ANNOTATION] is None, "a success clears the record"


def test_retries_stop_after_the_limit_and_the_condition_says_so() -> None:
    spec = {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}
    exhausted = {conventions.MIG_RETRY_ANNOTATION: f"{conventions.MIG_RETRIES}@2026-11-02T10:00:00Z"}
    view = mig_node("n1", "failed", gfd=None, allocatable={}, annotations=exhausted, spec=spec)
    result = run([pool("p", spec)], [view])
    assert result.changes["n1"].labels[conventions.MIG_CONFIG_LABEL] == mig_entry_name("p", spec)
    assert conditions(result, "p")["MigConfigured"] == ("False", "Failed")
    assert f"gave up after {conventions.MIG_RETRIES} retries" in message(result, "MigConfigured")


def test_plan_on_a_snapshot_names_the_override(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    body = node_body(
        "n1",
        labels={
            conventions.POOL_LABEL: "p",
            conventions.DEVICE_PLUGIN_CONFIG_LABEL: device_plugin_key("p", MIXED),
            conventions.MIG_CONFIG_LABEL: mig_entry_name("p", MIXED),
            conventions.MIG_CONFIG_STATE_LABEL: "success",
            conventions.GFD_MIG_STRATEGY_LABEL: "single",
            conventions.GFD_PRODUCT_LABEL: "NVIDIA-H100-80GB-HBM3-MIG-INVALID",
            conventions.GFD_COUNT_LABEL: "0",
        },
        allocatable={"nvidia.com/gpu": "0"},
    )
    nodes = tmp_path / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [{"kind": "Node", **body}]}))
    pools = tmp_path / "pool.yaml"
    pools.write_text(
        yaml.safe_dump(
            {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool", "metadata": {"name": "p"}, "spec": MIXED}
        )
    )
    assert cli.main(["plan", "-f", str(pools), "--nodes", str(nodes), "--now", "2026-11-02T12:00:00Z"]) == 0
    out = capsys.readouterr().out
    assert "MigConfigured=False MigStrategyOverridden" in out
    assert "runs the single MIG strategy" in out and "/spec/mig/strategy" in out
