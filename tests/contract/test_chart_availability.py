"""The chart's high availability with the real helm: replicas, kopf peering, the disruption budget
and the spread over nodes."""

from __future__ import annotations

from typing import Any

import pytest

from tests.contract.chart import (
    RELEASE,
    Objects,
    find,
    one,
    operator_config,
    operator_deployment,
    render,
)
from tests.contract.test_chart_rbac import OPERATOR_CLUSTER_RULES

pytestmark = pytest.mark.contract


# ---- High availability: replicas, kopf peering, disruption budget, spread.


def _spread(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = deployment["spec"]["template"]["spec"].get("affinity") or {}
    return list((affinity.get("podAntiAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or [])


def test_two_replicas_with_peering_by_default(default_objects: Objects) -> None:
    """One leads, one stands by: both in the peering object the chart creates, on different nodes
    when the scheduler can, never both evicted at once, and upgraded one at a time with no gap."""
    deployment, container = operator_deployment(default_objects)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    config = operator_config(default_objects)
    peering = one(default_objects, "ClusterKopfPeering")
    assert config.peering == peering["metadata"]["name"] == RELEASE
    assert config.peering_lifetime == 60 and config.priority is None  # each replica derives its own
    assert {"name": "POD_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]

    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = one(default_objects, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (preference,) = _spread(deployment)
    term = preference["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod_labels.items()


def test_the_spread_joins_the_users_affinity(full_objects: Objects) -> None:
    deployment, _ = operator_deployment(full_objects)
    assert deployment["spec"]["replicas"] == 3
    affinity = deployment["spec"]["template"]["spec"]["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # values-full.yaml's
    assert len(_spread(deployment)) == 1
    config = operator_config(full_objects)
    assert (config.peering, config.peering_lifetime) == ("gpu-pools", 30)
    assert one(full_objects, "ClusterKopfPeering")["metadata"]["name"] == "gpu-pools"


def test_one_replica_with_peering_still_upgrades_without_a_gap(helm: str) -> None:
    """The new pod stands by until the old one leaves; no disruption budget (it would block every drain)."""
    objects = render(helm, set_values=["operator.replicas=1"])
    deployment, _ = operator_deployment(objects)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert not find(objects, "PodDisruptionBudget") and not _spread(deployment)
    assert operator_config(objects).peering == RELEASE


def test_a_standalone_operator_is_recreated_and_needs_no_peering(helm: str) -> None:
    """For clusters where kopf's peering CRD cannot be installed."""
    objects = render(helm, set_values=["operator.replicas=1", "operator.peering.enabled=false"], include_crds=True)
    deployment, container = operator_deployment(objects)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert operator_config(objects).peering is None
    assert not [a for a in container["args"] if a.startswith("--peering")]
    assert not find(objects, "ClusterKopfPeering") and not find(objects, "PodDisruptionBudget")
    rules = one(objects, "ClusterRole", f"{RELEASE}-operator")["rules"]
    assert rules == OPERATOR_CLUSTER_RULES
