"""Builders for the operator's unit tests: nodes as the labellers label them, pools, the shared fixture, and
the emulated API server the controller's tests run against (`cluster`)."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from accelpool.decide import inputs
from accelpool.decide.planning import ConfigState, Plan, PlannerOptions, PoolInput, plan
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions, validation
from accelpool_core import catalog

from .emulated import Cluster, emulated_cluster

ROOT = Path(__file__).resolve().parents[3]
LOCAL_FIXTURE = ROOT / "tests" / "fixtures" / "operator" / "cluster-nodes.yaml"
NOW = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)


def fixture_text() -> str:
    """The shared realistic cluster (GFD, GKE, Karpenter, AMD labels); a copy is kept in the repository."""
    return LOCAL_FIXTURE.read_text()


def fixture_nodes() -> list[NodeView]:
    return inputs.nodes_from_yaml(fixture_text())


def node_body(
    name: str,
    accelerator: str = "H100-80GB",
    count: int | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    ready: bool = True,
    ready_since: str = "2026-11-01T00:00:00Z",
    unschedulable: bool = False,
    health: tuple[str, str, str, str] | None = None,
    resource_version: str = "1",
    allocatable: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Node labelled by GPU Feature Discovery (or the accelerator's own labeller for non-NVIDIA ones)."""
    entry = catalog.BY_NAME[accelerator]
    devices = count if count is not None else entry.default_count
    node_labels: dict[str, str] = {"kubernetes.io/hostname": name}
    if entry.detection.gfd_products:
        node_labels.update(
            {
                "nvidia.com/gpu.product": entry.detection.gfd_products[0],
                "nvidia.com/gpu.count": str(devices),
                "nvidia.com/gpu.memory": str(entry.memory_gb * 1024),
            }
        )
    elif entry.detection.amd_products:
        node_labels["amd.com/gpu.product-name"] = entry.detection.amd_products[0]
    elif entry.detection.gke_accelerators:
        node_labels["cloud.google.com/gke-tpu-accelerator"] = entry.detection.gke_accelerators[0]
    elif entry.detection.instance_types:
        node_labels["node.kubernetes.io/instance-type"] = next(iter(entry.detection.instance_types))
    node_labels.update(labels or {})
    conditions: list[dict[str, str]] = [
        {"type": "Ready", "status": "True" if ready else "False", "lastTransitionTime": ready_since}
    ]
    if health is not None:
        status, reason, message, since = health
        conditions.append(
            {
                "type": conventions.HEALTH_CONDITION,
                "status": status,
                "reason": reason,
                "message": message,
                "lastTransitionTime": since,
            }
        )
    spec: dict[str, Any] = {}
    if unschedulable:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = [dict(t) for t in taints]
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "resourceVersion": resource_version,
            "labels": node_labels,
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
        "status": {
            "capacity": {entry.resource: str(devices)},
            "allocatable": dict(allocatable) if allocatable is not None else {entry.resource: str(devices)},
            "conditions": conditions,
        },
    }


MIG_OFF = {conventions.MIG_CONFIG_LABEL: conventions.MIG_DISABLED_CONFIG, conventions.MIG_CONFIG_STATE_LABEL: "success"}
"""A MIG-capable node whose MIG manager has turned MIG off (what a whole-GPU pool waits for)."""


def node(name: str, accelerator: str = "H100-80GB", count: int | None = None, **kwargs: Any) -> NodeView:
    return NodeView.from_body(node_body(name, accelerator, count, **kwargs))


def member(
    name: str, pool: str, accelerator: str = "H100-80GB", *, joined: str = "2026-10-01T00:00:00Z", **kwargs: Any
) -> NodeView:
    """A node that already belongs to `pool`, as accelpool left it."""
    labels = dict(kwargs.pop("labels", {}) or {})
    labels[conventions.POOL_LABEL] = pool
    entry = catalog.BY_NAME[accelerator]
    if entry.vendor == catalog.Vendor.NVIDIA:
        labels.setdefault(conventions.DEVICE_PLUGIN_CONFIG_LABEL, device_plugin_key(pool, {"accelerator": accelerator}))
    if entry.mig_capable and conventions.MIG_CONFIG_LABEL not in labels:  # MIG off, as the MIG manager reported
        labels[conventions.MIG_CONFIG_LABEL] = conventions.MIG_DISABLED_CONFIG
        labels.setdefault(conventions.MIG_CONFIG_STATE_LABEL, "success")
    annotations = {conventions.JOINED_ANNOTATION: joined, **dict(kwargs.pop("annotations", {}) or {})}
    taints = list(kwargs.pop("taints", ()) or ())
    taints.append({"key": conventions.POOL_TAINT_KEY, "value": pool, "effect": "NoSchedule"})
    return node(name, accelerator, labels=labels, annotations=annotations, taints=taints, **kwargs)


def pool(
    name: str,
    spec: Mapping[str, Any],
    *,
    created: str | None = None,
    deleting: bool = False,
    uid: str | None = None,
    generation: int = 1,
) -> PoolInput:
    checked_spec, problems = validation.validate_spec(dict(spec))
    return PoolInput(
        name=name,
        spec=checked_spec,
        problems=tuple(str(p) for p in problems),
        uid=uid or f"uid-{name}",
        generation=generation,
        created=created,
        deleting=deleting,
    )


def run(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState | None = None,
    **options: Any,
) -> Plan:
    return plan(
        list(pools), list(nodes), config or ConfigState(), PlannerOptions(now=options.pop("now", NOW), **options)
    )


def members(result: Plan, pool_name: str) -> list[str]:
    found = result.pool(pool_name)
    assert found is not None
    return list(found.members)


def conditions(result: Plan, pool_name: str) -> dict[str, tuple[str, str]]:
    found = result.pool(pool_name)
    assert found is not None and found.status is not None
    return {c.type: (c.status, c.reason) for c in found.status.conditions}


def applied(nodes: Sequence[NodeView], result: Plan) -> list[NodeView]:
    """The nodes after the plan's changes were written (what the next pass would see)."""
    return [n.apply(result.changes[n.name]) if n.name in result.changes else n for n in nodes]


@pytest.fixture
async def cluster() -> AsyncIterator[Cluster]:
    """The emulated API server a controller test runs against (`emulated.Cluster`)."""
    async with emulated_cluster() as running:
        yield running


@pytest.fixture
def cluster_nodes() -> list[NodeView]:
    return [copy.deepcopy(n) for n in fixture_nodes()]


def device_plugin_key(pool_name: str, spec: Mapping[str, Any]) -> str:
    """The device-plugin key of a pool with this spec (named by its content)."""
    key = _configs(pool_name, spec).device_plugin
    assert key is not None
    return key


def mig_entry_name(pool_name: str, spec: Mapping[str, Any]) -> str:
    """The mig-parted entry of a MIG pool with this spec (named by its content)."""
    name = _configs(pool_name, spec).mig
    assert name is not None
    return name


def _configs(pool_name: str, spec: Mapping[str, Any]) -> nvidia.MemberConfigs:
    checked, problems = validation.validate_spec(dict(spec))
    assert checked is not None, problems
    return nvidia.member_configs(pool_name, checked)
