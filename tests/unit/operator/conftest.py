"""What the operator's unit tests share: the builders under the names they use (`node`, `pool`, `node_body`,
all from `tests.support.builders`), `member` (a node as accelpool left it in a pool), the planner's run
with its results, the shared fixture of real nodes, and the emulated API server the controller's tests
run against (`cluster`)."""

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
from tests.support.builders import node_body as node_body  # re-exported: the unit tests import it from here
from tests.support.builders import node_view, pool_input

from .emulated import Cluster, emulated_cluster

ROOT = Path(__file__).resolve().parents[3]
LOCAL_FIXTURE = ROOT / "tests" / "fixtures" / "operator" / "cluster-nodes.yaml"
NOW = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)


def fixture_text() -> str:
    """The shared realistic cluster (GFD, GKE, Karpenter, AMD labels); a copy is kept in the repository."""
    return LOCAL_FIXTURE.read_text()


def fixture_nodes() -> list[NodeView]:
    return inputs.nodes_from_yaml(fixture_text())


MIG_OFF = {conventions.MIG_CONFIG_LABEL: conventions.MIG_DISABLED_CONFIG, conventions.MIG_CONFIG_STATE_LABEL: "success"}
"""A MIG-capable node whose MIG manager has turned MIG off (what a whole-GPU pool waits for)."""


node = node_view
"""A node as the labellers label it, as the operator sees it (`tests.support.builders.node_view`)."""
pool = pool_input
"""A pool as the planner takes it (`tests.support.builders.pool_input`)."""


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
