"""Nodes that others reserved are not claimed: control-plane nodes and nodes tainted for someone else.

Taints that merely mark an accelerator node (GKE's `nvidia.com/gpu=present`, AKS's `sku=gpu`) do
not stop a claim; any other NoSchedule/NoExecute taint does, unless the operator lists it in
`--tolerated-taints`. Control-plane nodes are never claimed.
"""

from __future__ import annotations

import pytest

from accelpool.runtime.settings import OperatorConfig
from accelpool_api import conventions

from .conftest import conditions, members, node, pool, run

TEAM_A = {"key": "dedicated", "value": "team-a", "effect": "NoSchedule"}
CONTROL_PLANE = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}


def test_a_node_dedicated_to_another_team_is_not_claimed_and_the_shortfall_says_why() -> None:
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], [node("a", taints=[TEAM_A]), node("b")])
    assert members(result, "p") == ["b"]
    assert "a" not in result.changes
    status, reason = conditions(result, "p")["NodesSelected"]
    assert (status, reason) == ("False", "InsufficientNodes")
    found = result.pool("p")
    assert found is not None and found.status is not None
    message = next(c.message for c in found.status.conditions if c.type == "NodesSelected")
    assert "tainted dedicated" in message
    tolerations = [t.key for t in found.status.scheduling.tolerations]
    assert "dedicated" not in tolerations, "the pool's pods are never told to tolerate another team's taint"


@pytest.mark.parametrize(
    ("labels", "taints"),
    [
        ({"node-role.kubernetes.io/control-plane": ""}, []),
        ({}, [CONTROL_PLANE]),
        ({"node-role.kubernetes.io/master": ""}, []),
    ],
    ids=["role-label", "role-taint", "legacy-master-label"],
)
def test_control_plane_nodes_are_never_claimed(labels: dict[str, str], taints: list[dict[str, str]]) -> None:
    result = run(
        [pool("p", {"accelerator": "H100"})],
        [node("cp", labels=labels, taints=taints)],
        tolerated_taints=(*conventions.ACCELERATOR_TAINTS, CONTROL_PLANE["key"]),
    )
    assert members(result, "p") == []


@pytest.mark.parametrize(
    "taint",
    [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "sku", "value": "gpu", "effect": "NoSchedule"},
        {"key": "example.com/soft", "value": "x", "effect": "PreferNoSchedule"},
    ],
    ids=["gke-gpu", "aks-sku", "prefer-no-schedule"],
)
def test_taints_that_only_mark_an_accelerator_node_do_not_stop_a_claim(taint: dict[str, str]) -> None:
    result = run([pool("p", {"accelerator": "H100"})], [node("a", taints=[taint])])
    assert members(result, "p") == ["a"]


def test_the_operator_can_tolerate_more_taints() -> None:
    config = OperatorConfig.from_env({"ACCELPOOL_TOLERATED_TAINTS": "nvidia.com/gpu, dedicated=team-a"})
    assert config.tolerated_taints == ("nvidia.com/gpu", "dedicated=team-a")
    team_b = {**TEAM_A, "value": "team-b"}
    result = run(
        [pool("p", {"accelerator": "H100", "nodes": 2})],
        [node("a", taints=[TEAM_A]), node("b", taints=[team_b])],
        tolerated_taints=config.tolerated_taints,
    )
    assert members(result, "p") == ["a"], "key=value patterns match that value only"
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert any(t.key == "dedicated" and t.value == "team-a" for t in found.status.scheduling.tolerations)
