"""The chart's RBAC with the real helm: exactly the rules the operator's and the agent's code use,
nothing more, for default and full-featured values."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.contract.chart import (
    FULL_VALUES,
    NAMESPACE,
    Objects,
    find,
    one,
    render,
)

pytestmark = pytest.mark.contract


# ---- RBAC: exactly these rules, nothing more.

OPERATOR_CLUSTER_RULES = [
    {"apiGroups": ["accelpool.io"], "resources": ["computepools"], "verbs": ["list", "watch", "patch"]},
    {"apiGroups": ["accelpool.io"], "resources": ["computepools/status"], "verbs": ["patch"]},
    {"apiGroups": ["accelpool.io"], "resources": ["computepools/finalizers"], "verbs": ["update"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
    {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["get", "list", "create", "patch", "delete"]},
    {"apiGroups": ["resource.k8s.io"], "resources": ["resourceslices", "resourceclaims"], "verbs": ["list"]},
    {
        "apiGroups": ["resource.k8s.io"],
        "resources": ["deviceclasses", "devicetaintrules"],
        "verbs": ["list", "create", "patch", "delete"],
    },
    {"apiGroups": ["resource.nvidia.com"], "resources": ["computedomains"], "verbs": ["list", "create", "delete"]},
    {
        "apiGroups": ["kueue.x-k8s.io"],
        "resources": ["resourceflavors"],
        "verbs": ["get", "list", "create", "patch", "delete"],
    },
    {"apiGroups": ["kueue.x-k8s.io"], "resources": ["clusterqueues"], "verbs": ["get", "list", "patch"]},
]
AGENT_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
]
DAEMONSET_RULES = [
    {
        "apiGroups": ["apps"],
        "resources": ["daemonsets"],
        "verbs": ["get", "list", "watch", "create", "patch", "delete"],
    },
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list", "watch"]},
]
EVENT_RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]
UNINSTALL_RULES = [
    {"apiGroups": ["accelpool.io"], "resources": ["computepools"], "verbs": ["list", "delete"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["list"]},
]
"""The pre-delete hook's `accelpool uninstall` (operator/accelpool/cli/commands/uninstall.py): list and delete
pools, list nodes."""


def _peering_rules(name: str) -> list[dict[str, Any]]:
    """kopf's peering: list and watch every peering object (kopf lists them all), patch only ours."""
    return [
        {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": ["list", "watch"]},
        {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "resourceNames": [name], "verbs": ["patch"]},
    ]


def _config_rules(device_plugin: str, mig: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [device_plugin, mig],
            "verbs": ["get", "patch"],
        },
    ]


def _subject(objects: Objects, binding_kind: str, role: dict[str, Any]) -> list[tuple[str, str]]:
    meta = role["metadata"]
    bindings = [
        b
        for b in find(objects, binding_kind)
        if b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]}
        and b["metadata"].get("namespace") == meta.get("namespace")
    ]
    return [(s["namespace"], s["name"]) for b in bindings for s in b["subjects"] if s["kind"] == "ServiceAccount"]


@pytest.mark.parametrize(
    ("values", "names"),
    [
        (
            [],
            {
                "prefix": "accelpool",
                "agents": NAMESPACE,
                "nvidia": NAMESPACE,
                "events": "default",
                "configs": ("accelpool-device-plugin-config", "accelpool-mig-parted-config"),
            },
        ),
        (
            [FULL_VALUES],
            {
                "prefix": "gpu-pools",
                "agents": "accelpool-agents",
                "nvidia": "gpu-operator",
                "events": "accelpool-events",
                "configs": ("device-plugin-configs", "custom-mig-parted-config"),
            },
        ),
    ],
    ids=["default", "full"],
)
def test_rbac_is_exactly_least_privilege(helm: str, values: list[Path], names: dict[str, Any]) -> None:
    objects = render(helm, values)
    operator_sa = (NAMESPACE, f"{names['prefix']}-operator")
    agent_sa = (names["agents"], f"{names['prefix']}-agent")

    roles = find(objects, "ClusterRole") + find(objects, "Role")
    for role in roles:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: wildcard in {key}"
            assert not {"secrets", "pods/exec", "serviceaccounts/token"} & set(rule["resources"])
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
    assert len(roles) == 6, [r["metadata"]["name"] for r in roles]

    operator_role = one(objects, "ClusterRole", operator_sa[1])
    assert operator_role["rules"] == OPERATOR_CLUSTER_RULES + _peering_rules(names["prefix"])
    assert _subject(objects, "ClusterRoleBinding", operator_role) == [operator_sa]

    agent_role = one(objects, "ClusterRole", agent_sa[1])
    assert agent_role["rules"] == AGENT_CLUSTER_RULES
    assert _subject(objects, "ClusterRoleBinding", agent_role) == [agent_sa]

    daemonsets = one(objects, "Role", f"{operator_sa[1]}-agents")
    assert daemonsets["metadata"]["namespace"] == names["agents"]
    assert daemonsets["rules"] == DAEMONSET_RULES
    assert _subject(objects, "RoleBinding", daemonsets) == [operator_sa]

    events = one(objects, "Role", f"{operator_sa[1]}-events")
    assert events["metadata"]["namespace"] == names["events"]
    assert events["rules"] == EVENT_RULES
    assert _subject(objects, "RoleBinding", events) == [operator_sa]

    configs = one(objects, "Role", f"{operator_sa[1]}-nvidia-configs")
    assert configs["metadata"]["namespace"] == names["nvidia"]
    assert configs["rules"] == _config_rules(*names["configs"])
    assert _subject(objects, "RoleBinding", configs) == [operator_sa]

    uninstall_sa = (NAMESPACE, f"{names['prefix']}-uninstall")
    uninstall = one(objects, "ClusterRole", uninstall_sa[1])
    assert uninstall["rules"] == UNINSTALL_RULES
    assert _subject(objects, "ClusterRoleBinding", uninstall) == [uninstall_sa]

    accounts = {(sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in find(objects, "ServiceAccount")}
    assert accounts == {operator_sa, agent_sa, uninstall_sa}


def test_the_dra_driver_role_exists_only_where_its_namespace_is_given(helm: str) -> None:
    """Restarting NVIDIA's DRA kubelet plugin (static MIG) may delete pods only in the driver's namespace."""
    assert not [r for r in find(render(helm), "Role") if r["metadata"]["name"].endswith("-dra-driver")]
    objects = render(helm, set_values=["nvidia.draDriverNamespace=nvidia-dra-driver"])
    role = one(objects, "Role", "accelpool-operator-dra-driver")
    assert role["metadata"]["namespace"] == "nvidia-dra-driver"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "delete"]}]
    assert _subject(objects, "RoleBinding", role) == [(NAMESPACE, "accelpool-operator")]
