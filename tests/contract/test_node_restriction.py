"""The agents' NodeRestriction (charts/accelpool/templates/agent-node-restriction.yaml), rendered by the
real helm and evaluated the way kube-apiserver evaluates a ValidatingAdmissionPolicy
(accelpool_demo.apiserver.policies, on what tests/contract/admission_policy.py models of a Node PATCH,
and stored in the emulated API server, which applies it to requests with the agent's token): an agent
may change its own Node only, and there only the `accelpool.io/health` annotation and the
`AcceleratorHealthy` condition; it may not create or delete Nodes; nobody else is affected. The writes
of the real NodeReporter are admitted.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import aiohttp
import pytest

from accelpool_agent.clock import ManualClock
from accelpool_agent.model import NodeReport
from accelpool_agent.reporter import NodeReporter
from accelpool_core.kube import KubeClient, PatchType
from accelpool_core.protocol import CONDITION_TYPE, HEALTH_ANNOTATION, HealthStatus
from accelpool_demo.apiserver import serving
from accelpool_demo.apiserver.webhooks import Attributes, UserInfo
from tests.contract.admission_policy import admit, as_user, node_write, patched_node
from tests.contract.chart import FULL_VALUES, NAMESPACE, HelmFailed, Objects, find, one, render
from tests.contract.node_restriction import (
    AGENT,
    OPERATOR,
    OTHER,
    OWN,
    POLICY,
    denied,
    health_annotation,
    health_condition,
    node_object,
    patch,
    pod_token,
    stored,
)

pytestmark = pytest.mark.contract


@pytest.fixture(scope="module")
def policy(default_objects: Objects) -> dict[str, Any]:
    return one(default_objects, "ValidatingAdmissionPolicy", POLICY)


@pytest.fixture(scope="module")
def binding(default_objects: Objects) -> dict[str, Any]:
    return one(default_objects, "ValidatingAdmissionPolicyBinding", POLICY)


# ---- The chart ships it.


@pytest.mark.parametrize(
    ("values", "username"),
    [([], AGENT), ([FULL_VALUES], "system:serviceaccount:accelpool-agents:gpu-pools-agent")],
    ids=["default", "full"],
)
def test_the_policy_matches_the_agents_service_account_on_node_writes(
    helm: str, values: list[Any], username: str
) -> None:
    objects = render(helm, values)
    (policy,) = find(objects, "ValidatingAdmissionPolicy")
    (binding,) = find(objects, "ValidatingAdmissionPolicyBinding")
    name = policy["metadata"]["name"]
    assert binding["spec"] == {"policyName": name, "validationActions": ["Deny"]}
    spec = policy["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": [""],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE", "DELETE"],
            "resources": ["nodes", "nodes/status"],
        }
    ]
    assert [c["expression"] for c in spec["matchConditions"]] == [f"request.userInfo.username == '{username}'"]
    # the account the chart creates and the operator runs every agent DaemonSet as
    agent_sa = [sa for sa in find(objects, "ServiceAccount") if sa["metadata"]["name"].endswith("-agent")]
    assert [f"system:serviceaccount:{sa['metadata']['namespace']}:{sa['metadata']['name']}" for sa in agent_sa] == [
        username
    ]


def test_turned_off_the_chart_renders_no_policy(helm: str) -> None:
    objects = render(helm, set_values=["agent.nodeRestriction.enabled=false"])
    assert not find(objects, "ValidatingAdmissionPolicy")
    assert not find(objects, "ValidatingAdmissionPolicyBinding")


def test_values_from_before_the_switch_keep_the_policy_on(helm: str) -> None:
    """`helm upgrade --reuse-values` of a release installed before agent.nodeRestriction existed."""
    objects = render(helm, set_values=["agent.nodeRestriction=null"])
    assert [o["metadata"]["name"] for o in find(objects, "ValidatingAdmissionPolicy")] == [POLICY]


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("agent.nodeRestriction.enabled=yes", "/agent/nodeRestriction/enabled"),
        ("agent.nodeRestriction.mode=audit", "additional properties 'mode'"),
    ],
)
def test_schema_rejects_bad_switches(helm: str, assignment: str, says: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        render(helm, set_values=[assignment])
    assert says in str(refused.value)


# ---- What the agent writes on its own node is admitted.


class RecordingClient(KubeClient):
    """The NodeReporter's API client, answering from one Node, storing each patch as the API server
    would, and recording each write with the node it was applied to."""

    def __init__(self, node: dict[str, Any]) -> None:  # no connection: nothing leaves the process
        self.node = node
        self.writes: list[tuple[str, Any, PatchType, dict[str, Any]]] = []

    async def get(self, path: str) -> dict[str, Any]:
        assert path == f"/api/v1/nodes/{self.node['metadata']['name']}", path
        return copy.deepcopy(self.node)

    async def patch(self, path: str, body: Any, *, patch_type: PatchType = "merge") -> dict[str, Any]:
        subresource = "status" if path.endswith("/status") else ""
        self.writes.append((path, copy.deepcopy(body), patch_type, copy.deepcopy(self.node)))
        self.node = patched_node(self.node, body, patch_type, subresource=subresource)
        return copy.deepcopy(self.node)


def test_every_write_of_the_real_reporter_is_admitted(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    """The reporter runs as the agent does (a verdict change, then a heartbeat rewrite); each write
    it makes is applied the way the API server applies it and must pass the policy."""
    node = node_object(OWN)
    client = RecordingClient(node)
    clock = ManualClock(1_767_225_600.0)
    reporter = NodeReporter(client, OWN, heartbeat_seconds=300, clock=clock, agent_name="agent-pod")

    def report(status: HealthStatus, reason: str) -> NodeReport:
        bad = (3,) if status == HealthStatus.UNHEALTHY else ()
        return NodeReport(
            node=OWN,
            pool="llm-training",
            backend="fake",
            status=status,
            reason=reason,
            message=reason,
            gpus=(),
            bad_gpus=bad,
            dtype="bf16",
            tflops=6345.4,
            checked_at=clock.time(),
        )

    asyncio.run(reporter.report(report(HealthStatus.UNHEALTHY, "XidError")))
    clock.advance(600)
    asyncio.run(reporter.report(report(HealthStatus.UNHEALTHY, "XidError")))
    clock.advance(600)
    asyncio.run(reporter.report(report(HealthStatus.HEALTHY, "AllChecksPassed")))

    # The reporter guards each write with a JSON patch `test` of the node's pool label (a node released
    # meanwhile refuses it); where the node has no condition list yet, the first is a strategic merge.
    kinds = {(path, patch_type) for path, _, patch_type, _ in client.writes}
    assert (f"/api/v1/nodes/{OWN}", "json") in kinds and (f"/api/v1/nodes/{OWN}/status", "json") in kinds, kinds
    assert len(client.writes) >= 4
    for path, body, patch_type, old in client.writes:
        subresource = "status" if path.endswith("/status") else ""
        decision = admit(policy, binding, patch(body, subresource=subresource, patch_type=patch_type, old=old))
        assert decision.matched and decision.allowed, (path, body, decision.message)


def test_agent_updates_its_own_health_annotation(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    decision = admit(policy, binding, patch(health_annotation()))
    assert decision.matched and decision.allowed, decision.message
    added = node_object(OWN)
    del added["metadata"]["annotations"][HEALTH_ANNOTATION]
    decision = admit(policy, binding, patch(health_annotation(), old=added))
    assert decision.allowed, decision.message
    assert admit(policy, binding, patch({"metadata": {"annotations": {HEALTH_ANNOTATION: None}}})).allowed


def test_agent_updates_its_own_condition_on_node_status(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    request = patch(health_condition(), subresource="status", patch_type="strategic")
    assert [c["type"] for c in stored(request)["status"]["conditions"]] == ["MemoryPressure", "Ready", CONDITION_TYPE]
    decision = admit(policy, binding, request)
    assert decision.matched and decision.allowed, decision.message
    first = node_object(OWN)
    first["status"]["conditions"].pop()  # the agent's first report adds the condition
    decision = admit(
        policy, binding, patch(health_condition(), subresource="status", patch_type="strategic", old=first)
    )
    assert decision.allowed, decision.message


# ---- Another node, or no node in the token: denied, saying why.


@pytest.mark.parametrize(
    ("body", "subresource", "patch_type"),
    [(health_annotation(), "", "merge"), (health_condition(), "status", "strategic")],
    ids=["annotation", "condition"],
)
def test_agent_may_not_touch_another_node(
    policy: dict[str, Any], binding: dict[str, Any], body: dict[str, Any], subresource: str, patch_type: str
) -> None:
    decision = admit(policy, binding, patch(body, node=OTHER, subresource=subresource, patch_type=patch_type))
    denied(decision, f"the accelpool agent on node {OWN} may not change node {OTHER}", "only its own node")


@pytest.mark.parametrize("extra", [pod_token(None), {}], ids=["pod-token-without-node", "no-extra"])
def test_a_token_not_bound_to_a_node_is_denied(
    policy: dict[str, Any], binding: dict[str, Any], extra: dict[str, list[str]]
) -> None:
    request = as_user(patch(health_annotation()), extra=extra)
    denied(admit(policy, binding, request), f"may not change node {OWN}: its token is not bound to a node")


# ---- Its own node: nothing but the annotation and the condition.


def _with(path: list[str], value: Any) -> dict[str, Any]:
    body: dict[str, Any] = {}
    cursor = body
    for key in path[:-1]:
        cursor = cursor.setdefault(key, {})
    cursor[path[-1]] = value
    return body


def _combine(*bodies: dict[str, Any]) -> dict[str, Any]:
    """One patch body carrying all of `bodies` (nulls kept: they delete)."""
    result: dict[str, Any] = {}
    for body in bodies:
        for key, value in body.items():
            if isinstance(value, dict) and isinstance(result.get(key), dict):
                result[key] = _combine(result[key], value)
            else:
                result[key] = copy.deepcopy(value)
    return result


def _ready_false() -> dict[str, Any]:
    body = health_condition()
    body["status"]["conditions"][0] = {**body["status"]["conditions"][0], "type": "Ready", "reason": "KubeletNotReady"}
    return body


TAINTS = node_object(OWN)["spec"]["taints"]
# id: (patch body, subresource, patch type, what the refusal says)
FORBIDDEN: dict[str, tuple[dict[str, Any], str, str, str]] = {
    "label-changed": (
        _with(["metadata", "labels", "nvidia.com/gpu.count"], "16"),
        "",
        "merge",
        "labels of node gpu-a1: nvidia.com/gpu.count",
    ),
    "label-added": (
        _with(["metadata", "labels", "node-role.kubernetes.io/infra"], ""),
        "",
        "merge",
        "labels of node gpu-a1: node-role.kubernetes.io/infra",
    ),
    "label-removed": (
        _with(["metadata", "labels", "accelpool.io/pool"], None),
        "",
        "merge",
        "labels of node gpu-a1: accelpool.io/pool",
    ),
    "label-via-status": (
        _combine(health_condition(), _with(["metadata", "labels", "accelpool.io/pool"], "other")),
        "status",
        "strategic",
        "labels of node gpu-a1: accelpool.io/pool",
    ),
    "taint-removed": (_with(["spec", "taints"], None), "", "merge", "may not change spec.taints of node gpu-a1"),
    "taint-added": (
        _with(["spec", "taints"], [*TAINTS, {"key": "x", "effect": "NoExecute"}]),
        "",
        "merge",
        "may not change spec.taints of node gpu-a1",
    ),
    "cordon": (_with(["spec", "unschedulable"], True), "", "merge", "may not change spec.unschedulable of node gpu-a1"),
    "other-annotation": (
        _with(["metadata", "annotations", "node.alpha.kubernetes.io/ttl"], "30"),
        "",
        "merge",
        "only the accelpool.io/health annotation of node gpu-a1, not: node.alpha.kubernetes.io/ttl",
    ),
    "annotation-added": (
        _with(["metadata", "annotations", "cluster-autoscaler.kubernetes.io/scale-down-disabled"], "true"),
        "",
        "merge",
        "not: cluster-autoscaler.kubernetes.io/scale-down-disabled",
    ),
    "annotation-removed": (
        _with(["metadata", "annotations", "volumes.kubernetes.io/controller-managed-attach-detach"], None),
        "",
        "merge",
        "not: volumes.kubernetes.io/controller-managed-attach-detach",
    ),
    "owner-reference": (
        _with(["metadata", "ownerReferences"], [{"apiVersion": "v1", "kind": "Pod", "name": "x", "uid": "u"}]),
        "",
        "merge",
        "may not change metadata.ownerReferences of node gpu-a1",
    ),
    "finalizer": (
        _with(["metadata", "finalizers"], ["example.com/keep"]),
        "",
        "merge",
        "may not change metadata.finalizers of node gpu-a1",
    ),
    "ready-condition": (
        _ready_false(),
        "status",
        "strategic",
        "only the AcceleratorHealthy condition of node gpu-a1, not: Ready",
    ),
    "conditions-replaced": (
        health_condition(),
        "status",
        "merge",
        "only the AcceleratorHealthy condition of node gpu-a1, not: MemoryPressure, Ready",
    ),
    "gpu-capacity": (
        _combine(health_condition(), _with(["status", "allocatable", "nvidia.com/gpu"], "16")),
        "status",
        "strategic",
        "may not change status.allocatable of node gpu-a1",
    ),
}


@pytest.mark.parametrize(("body", "subresource", "patch_type", "says"), FORBIDDEN.values(), ids=FORBIDDEN.keys())
def test_on_its_own_node_the_agent_may_change_nothing_else(
    policy: dict[str, Any], binding: dict[str, Any], body: dict[str, Any], subresource: str, patch_type: str, says: str
) -> None:
    """Alone, or next to an allowed change: the health annotation rides along on the node patches."""
    if subresource == "":
        body = _combine(body, health_annotation())
    request = patch(body, subresource=subresource, patch_type=patch_type)
    assert request.object != patched_node(node_object(OWN), {}, "merge", subresource=subresource)
    denied(admit(policy, binding, request), says)


def test_status_changes_through_the_node_resource_never_reach_the_policy(
    policy: dict[str, Any], binding: dict[str, Any]
) -> None:
    """The node registry drops status from an update of `nodes` (and spec from one of `nodes/status`)
    before admission: the agent's condition must go to nodes/status, as the reporter does."""
    request = patch(_combine(health_condition(), health_annotation()))
    assert stored(request)["status"] == node_object(OWN)["status"]
    assert admit(policy, binding, request).allowed


@pytest.mark.parametrize(
    ("operation", "obj", "old"),
    [("CREATE", node_object("gpu-new"), None), ("DELETE", None, node_object(OWN))],
    ids=["create", "delete"],
)
def test_the_agent_may_not_create_or_delete_nodes(
    policy: dict[str, Any], binding: dict[str, Any], operation: str, obj: Any, old: Any
) -> None:
    name = (obj or old)["metadata"]["name"]
    for subresource in ("", "status"):
        request = node_write(
            operation=operation,
            resource="nodes",
            subresource=subresource,
            name=name,
            username=AGENT,
            extra=pod_token(name),
            object=obj,
            old_object=old,
        )
        denied(admit(policy, binding, request), f"the accelpool agent may not {operation} node {name}")


# ---- Nobody else is affected.


@pytest.mark.parametrize(
    ("user", "extra"),
    [
        (OPERATOR, {}),
        ("system:node:gpu-a1", {}),
        ("kubernetes-admin", {}),
        ("system:serviceaccount:other-namespace:accelpool-agent", pod_token()),
        (f"system:serviceaccount:{NAMESPACE}:accelpool-agent-extra", pod_token()),
    ],
    ids=["operator", "kubelet", "admin", "same-name-elsewhere", "longer-name"],
)
def test_other_users_are_not_matched(
    policy: dict[str, Any], binding: dict[str, Any], user: str, extra: dict[str, list[str]]
) -> None:
    body = _combine(_with(["metadata", "labels", "accelpool.io/pool"], "other"), _with(["spec", "taints"], None))
    request = as_user(patch(body, node=OTHER), username=user, extra=extra)
    decision = admit(policy, binding, request)
    assert decision.allowed and not decision.matched, decision.message
    delete = node_write(operation="DELETE", resource="nodes", name=OTHER, username=user, old_object=node_object(OTHER))
    assert admit(policy, binding, delete).allowed


def test_other_resources_are_not_matched(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NAMESPACE}}
    request = node_write(
        operation="UPDATE",
        resource="pods",
        kind="Pod",
        name="p",
        namespace=NAMESPACE,
        username=AGENT,
        extra=pod_token(),
        object=pod,
        old_object=pod,
    )
    assert not admit(policy, binding, request).matched


# ---- Every validation is needed: without any one of them, some request above gets through.


def _refused_requests() -> dict[str, Attributes]:
    requests = {key: patch(body, subresource=sub, patch_type=kind) for key, (body, sub, kind, _) in FORBIDDEN.items()}
    requests["another-node"] = patch(health_annotation(), node=OTHER)
    requests["no-node"] = as_user(patch(health_annotation()), extra=pod_token(None))
    requests["delete"] = node_write(
        operation="DELETE", resource="nodes", name=OWN, username=AGENT, extra=pod_token(), old_object=node_object(OWN)
    )
    return requests


def test_every_validation_is_load_bearing(policy: dict[str, Any], binding: dict[str, Any]) -> None:
    requests = _refused_requests()
    assert all(not admit(policy, binding, r).allowed for r in requests.values())
    validations = policy["spec"]["validations"]
    for index, validation in enumerate(validations):
        loosened = copy.deepcopy(policy)
        del loosened["spec"]["validations"][index]
        through = [key for key, r in requests.items() if admit(loosened, binding, r).allowed]
        assert through, f"nothing here needs validation {index} ({validation['expression']})"


# ---- In the emulated API server, as a cluster holds the policy.


async def test_the_emulated_api_server_applies_the_policy_to_the_agents_writes(
    policy: dict[str, Any], binding: dict[str, Any]
) -> None:
    """The chart's policy and binding stored in the emulated API server: a request with the agent's pod-bound
    token may write its own node's health annotation and nothing else; another user's writes pass."""
    async with serving() as api, api.client() as admin:
        api.put("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies", policy)
        api.put("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings", binding)
        for name in (OWN, OTHER):
            obj = node_object(name)
            del obj["metadata"]["resourceVersion"], obj["metadata"]["managedFields"]
            await admin.create("/api/v1/nodes", obj)
        api.server.store.users["agent-token"] = UserInfo(AGENT, ("system:serviceaccounts",), pod_token(OWN))
        merge = {"Authorization": "Bearer agent-token", "Content-Type": "application/merge-patch+json"}
        async with aiohttp.ClientSession(headers=merge) as agent:

            async def patch(node: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
                async with agent.patch(f"{api.url}/api/v1/nodes/{node}", data=json.dumps(body)) as answer:
                    found: dict[str, Any] = await answer.json()
                    return answer.status, found

            assert (await patch(OWN, health_annotation()))[0] == 200
            status, refused = await patch(OTHER, health_annotation())
            relabelled = await patch(OWN, {"metadata": {"labels": {"accelpool.io/pool": "other"}}})
        assert (status, refused["reason"]) == (403, "Forbidden")
        prefix = (
            f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
            f"'{binding['metadata']['name']}' denied request: "
        )
        assert refused["message"] == prefix + f"the accelpool agent on node {OWN} may not change node {OTHER}: " + (
            "an agent may change only its own node"
        )
        assert relabelled[0] == 403 and "may not change the labels of node" in relabelled[1]["message"]
        changed = await admin.patch(f"/api/v1/nodes/{OTHER}", {"metadata": {"labels": {"accelpool.io/pool": "x"}}})
        assert changed["metadata"]["labels"]["accelpool.io/pool"] == "x"
