"""What the NodeRestriction contract tests share: who asks (the agent's pod-bound token, the operator),
the Node they ask about, requests as admission sees them, and how a refusal must read."""

from __future__ import annotations

from typing import Any

from accelpool_core.protocol import CONDITION_TYPE, HEALTH_ANNOTATION
from accelpool_demo.apiserver.webhooks import Attributes
from tests.contract.admission_policy import Decision, node_write, patched_node
from tests.contract.chart import NAMESPACE
from tests.support.builders import node_body, ready_condition

POLICY = "accelpool-agent-node-restriction"
AGENT = f"system:serviceaccount:{NAMESPACE}:accelpool-agent"
OPERATOR = f"system:serviceaccount:{NAMESPACE}:accelpool-operator"
NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
OWN, OTHER = "gpu-a1", "gpu-a2"


def pod_token(node: str | None = OWN) -> dict[str, list[str]]:
    """The user extra of a pod-bound ServiceAccount token (kubernetes pkg/serviceaccount/claims.go)."""
    extra = {
        "authentication.kubernetes.io/pod-name": ["accelpool-agent-llm-training-x7k2p"],
        "authentication.kubernetes.io/pod-uid": ["3f0c9a52-8f7e-4d59-b0a5-4f0f3c1e2d11"],
        "authentication.kubernetes.io/credential-id": ["JTI=0b7c8c1e-5a3f-4e0e-9d55-0c2a5d1f7b10"],
    }
    if node is not None:
        extra[NODE_NAME_EXTRA] = [node]
        extra["authentication.kubernetes.io/node-uid"] = [f"uid-{node}"]
    return extra


def node_object(name: str) -> dict[str, Any]:
    """A GPU node as the API server stores it: kubelet, GFD, accelpool's and the agent's fields."""
    return node_body(
        name,
        None,
        labels={
            "kubernetes.io/hostname": name,
            "kubernetes.io/os": "linux",
            "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
            "nvidia.com/gpu.count": "8",
            "accelpool.io/pool": "llm-training",
        },
        annotations={
            "node.alpha.kubernetes.io/ttl": "0",
            "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            HEALTH_ANNOTATION: '{"status":"Healthy"}',
        },
        taints=[{"key": "accelpool.io/pool", "value": "llm-training", "effect": "NoSchedule"}],
        resource_version="48213",
        created="2025-12-01T00:00:00Z",
        capacity={"cpu": "192", "memory": "2113389Mi", "nvidia.com/gpu": "8", "pods": "110"},
        allocatable={"cpu": "191", "memory": "2100000Mi", "nvidia.com/gpu": "8", "pods": "110"},
        conditions=[
            {
                "type": "MemoryPressure",
                "status": "False",
                "reason": "KubeletHasSufficientMemory",
                "message": "kubelet has sufficient memory available",
                "lastHeartbeatTime": "2025-12-31T23:59:00Z",
                "lastTransitionTime": "2025-12-01T00:00:00Z",
            },
            ready_condition(since="2025-12-01T00:00:00Z", heartbeat="2025-12-31T23:59:00Z"),
            {
                "type": CONDITION_TYPE,
                "status": "True",
                "reason": "AllChecksPassed",
                "message": "8 GPUs passed all checks",
                "lastHeartbeatTime": "2025-12-31T23:55:00Z",
                "lastTransitionTime": "2025-12-01T00:10:00Z",
            },
        ],
        metadata={
            "managedFields": [
                {"manager": "kubelet", "operation": "Update", "time": "2025-12-01T00:00:00Z"},
                {"manager": "accelpool-operator", "operation": "Update", "time": "2025-12-02T00:00:00Z"},
            ]
        },
        spec={"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24"], "providerID": f"aws:///us-east-1a/i-{name}"},
        status={
            "addresses": [{"type": "InternalIP", "address": "10.0.1.17"}, {"type": "Hostname", "address": name}],
            "nodeInfo": {"kubeletVersion": "v1.32.4", "containerRuntimeVersion": "containerd://1.7.27"},
        },
    )


def patch(
    body: Any,
    *,
    node: str = OWN,
    subresource: str = "",
    patch_type: str = "merge",
    user: str = AGENT,
    token_node: str | None = OWN,
    old: dict[str, Any] | None = None,
) -> Attributes:
    """A PATCH of `node` by `user`, as admission sees it."""
    old = old or node_object(node)
    return node_write(
        operation="UPDATE",
        resource="nodes",
        subresource=subresource,
        name=node,
        username=user,
        extra=pod_token(token_node) if user == AGENT else {},
        object=patched_node(old, body, patch_type, subresource=subresource),
        old_object=old,
    )


def stored(request: Attributes) -> dict[str, Any]:
    """The object a request would store (what the policy sees as `object`)."""
    assert request.object is not None
    return dict(request.object)


def health_annotation(value: str = '{"status":"Unhealthy","reason":"XidError"}') -> dict[str, Any]:
    return {"metadata": {"annotations": {HEALTH_ANNOTATION: value}}}


def health_condition(status: str = "False") -> dict[str, Any]:
    return {
        "status": {
            "conditions": [
                {
                    "type": CONDITION_TYPE,
                    "status": status,
                    "reason": "XidError",
                    "message": "GPU 3: XID 79 (fallen off the bus)",
                    "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ]
        }
    }


def denied(decision: Decision, *fragments: str) -> None:
    assert not decision.allowed, "admitted, but the policy should have refused it"
    assert decision.code == 403, decision
    assert decision.message.startswith(
        f"ValidatingAdmissionPolicy '{POLICY}' with binding '{POLICY}' denied request: "
    ), decision.message
    for fragment in fragments:
        assert fragment in decision.message, decision.message
