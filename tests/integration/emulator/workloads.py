"""Pods, their controllers and PodDisruptionBudgets as tests put them on the emulated API server."""

from __future__ import annotations

from typing import Any

from accelpool_core.kube import KubeClient

from .conftest import NAMESPACE

PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
BUDGETS = f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets"
APPS = f"/apis/apps/v1/namespaces/{NAMESPACE}"
READY = {"type": "Ready", "status": "True"}


def pod(
    name: str, node: str = "n1", *, owner: dict[str, Any] | None = None, grace: int | None = None, **labels: str
) -> dict[str, Any]:
    """A pod bound to `node` (owned by `owner`'s controller reference, with a grace period, when given)."""
    metadata: dict[str, Any] = {"name": name, "labels": labels or {"app": "work"}}
    if owner is not None:
        metadata["ownerReferences"] = [owner]
    spec: dict[str, Any] = {"nodeName": node, "containers": [{"name": "main", "image": "busybox"}]}
    if grace is not None:
        spec["terminationGracePeriodSeconds"] = grace
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def controlled_by(obj: dict[str, Any]) -> dict[str, Any]:
    """The controller ownerReference of a stored object."""
    metadata = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": metadata["name"],
        "uid": metadata["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


async def start(
    client: KubeClient, body: dict[str, Any], *, ready: bool = True, phase: str = "Running"
) -> dict[str, Any]:
    """Create a pod and report it as its kubelet would: the phase, and Ready when `ready`."""
    created = await client.create(PODS, body)
    conditions = [READY if ready else {**READY, "status": "False"}]
    status = {"status": {"phase": phase, "conditions": conditions}}
    return await client.patch(f"{PODS}/{created['metadata']['name']}/status", status)


def budget(name: str, **spec: Any) -> dict[str, Any]:
    """A PDB over the `app=work` pods (unless `selector` says otherwise)."""
    spec.setdefault("selector", {"matchLabels": {"app": "work"}})
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": name}, "spec": spec}


def eviction(name: str, **delete_options: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": name}}
    if delete_options:
        body["deleteOptions"] = delete_options
    return body
