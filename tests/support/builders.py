"""The Kubernetes objects the tests build, in one place: Nodes (`node_body`, with `ready_condition` for a
node's own list of conditions) and ComputePools (`pool_body`), as dicts a test stores in the emulated API
server, sends to a client or hands to a decoder; and the operator's typed inputs made from them
(`node_view`: a `NodeView`, `pool_input`: a checked `PoolInput`) for the planner's and controller's tests.

Every tier uses them: the operator's unit and integration tests, the agent's, the demo's, the emulator's
and the contract tests. A test that relies on a label, a condition or a field passes it explicitly.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import accelpool_api as api
from accelpool.decide.planning import PoolInput
from accelpool.model.nodes import NodeView
from accelpool_api import conventions, validation
from accelpool_core import catalog

READY_SINCE = "2026-11-01T00:00:00Z"
"""When the nodes' Ready condition last changed, unless a test says otherwise (the day before the tests' clock)."""


def ready_condition(ready: bool = True, *, since: str = READY_SINCE, heartbeat: str | None = None) -> dict[str, str]:
    """The node's Ready condition; with `heartbeat`, as the kubelet posts it (reason, message and
    lastHeartbeatTime: kubernetes pkg/kubelet/nodestatus/setters.go, ReadyCondition)."""
    condition = {"type": "Ready", "status": "True" if ready else "False"}
    if heartbeat is not None:
        condition["reason"] = "KubeletReady" if ready else "KubeletNotReady"
        condition["message"] = (
            "kubelet is posting ready status" if ready else "container runtime network not ready: NetworkReady=false"
        )
        condition["lastHeartbeatTime"] = heartbeat
    condition["lastTransitionTime"] = since
    return condition


def node_body(
    name: str,
    accelerator: str | None = "H100-80GB",
    count: int | None = None,
    *,
    labels: Mapping[str, str] | None = None,
    annotations: Mapping[str, str] | None = None,
    taints: Sequence[Mapping[str, str]] = (),
    ready: bool = True,
    ready_since: str = READY_SINCE,
    heartbeat: str | None = None,
    unschedulable: bool = False,
    health: tuple[str, str, str, str] | None = None,
    conditions: Sequence[Mapping[str, str]] | None = None,
    stored: bool = True,
    resource_version: str = "1",
    created: str | None = None,
    capacity: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
    metadata: Mapping[str, Any] | None = None,
    spec: Mapping[str, Any] | None = None,
    status: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Node labelled by GPU Feature Discovery (or the accelerator's own labeller for non-NVIDIA ones: AMD's,
    GKE's TPU label, the instance type), with `count` devices (the catalog's default count) in its capacity
    and allocatable; `accelerator=None`: a node of no accelerator, labelled with `labels` only.

    `labels` and `annotations` add to (and override) the labeller's. Its conditions are Ready (`ready`,
    `ready_since`; `heartbeat`: as the kubelet posts it) and, with `health` (status, reason, message,
    lastTransitionTime), the agent's AcceleratorHealthy; `conditions` replaces both with a list of its own.
    `stored`: as the API server stores it, with a uid and `resource_version` (False: the body a client
    sends to create it); `created`: its creationTimestamp. `capacity` and `allocatable` replace the device
    counts. `metadata`, `spec` and `status` add fields no option names (managedFields, addresses...).
    """
    node_labels: dict[str, str] = {}
    resources: dict[str, str] = {}
    if accelerator is not None:
        entry = catalog.BY_NAME[accelerator]
        devices = count if count is not None else entry.default_count
        resources[entry.resource] = str(devices)
        node_labels["kubernetes.io/hostname"] = name
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
    if conditions is None:
        node_conditions = [ready_condition(ready, since=ready_since, heartbeat=heartbeat)]
        if health is not None:
            health_status, reason, message, since = health
            node_conditions.append(
                {
                    "type": conventions.HEALTH_CONDITION,
                    "status": health_status,
                    "reason": reason,
                    "message": message,
                    "lastTransitionTime": since,
                }
            )
    else:
        node_conditions = [dict(c) for c in conditions]
    node_metadata: dict[str, Any] = {"name": name}
    if stored:
        node_metadata.update(uid=f"uid-{name}", resourceVersion=resource_version)
    if created is not None:
        node_metadata["creationTimestamp"] = created
    node_metadata.update(labels=node_labels, annotations=dict(annotations or {}))
    node_metadata.update(metadata or {})
    node_spec: dict[str, Any] = {}
    if unschedulable:
        node_spec["unschedulable"] = True
    if taints:
        node_spec["taints"] = [dict(t) for t in taints]
    node_spec.update(spec or {})
    node_status: dict[str, Any] = {}
    if capacity is not None or resources:
        node_status["capacity"] = dict(capacity) if capacity is not None else dict(resources)
    if allocatable is not None or resources:
        node_status["allocatable"] = dict(allocatable) if allocatable is not None else dict(resources)
    node_status["conditions"] = node_conditions
    node_status.update(status or {})
    return {"apiVersion": "v1", "kind": "Node", "metadata": node_metadata, "spec": node_spec, "status": node_status}


def node_view(name: str, accelerator: str | None = "H100-80GB", count: int | None = None, **options: Any) -> NodeView:
    """The operator's view of `node_body(name, accelerator, count, **options)`."""
    return NodeView.from_body(node_body(name, accelerator, count, **options))


def pool_body(
    name: str, spec: Mapping[str, Any], *, deleting: bool = False, finalizers: Sequence[str] = ()
) -> dict[str, Any]:
    """A ComputePool with this spec, as a client sends it (`deleting`: with a deletionTimestamp, as a pool
    held by a finalizer after its deletion is stored; `finalizers`: the finalizers it carries)."""
    metadata: dict[str, Any] = {"name": name}
    if finalizers:
        metadata["finalizers"] = list(finalizers)
    if deleting:
        metadata["deletionTimestamp"] = "2026-11-02T12:00:00Z"
    return {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": metadata, "spec": dict(spec)}


def pool_input(
    name: str,
    spec: Mapping[str, Any],
    *,
    created: str | None = None,
    deleting: bool = False,
    uid: str | None = None,
    generation: int = 1,
) -> PoolInput:
    """A ComputePool as the planner takes it: its spec checked (`problems` says why it is not valid)."""
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


def gpu_uuid(node: str, index: int) -> str:
    """A made-up GPU UUID, unique per node and index."""
    return f"GPU-{node}-{index}"


def resource_slice(
    node: str, gpus: int = 8, *, mig: dict[int, list[str]] | None = None, taints: dict[int, str] | None = None
) -> dict[str, Any]:
    """A ResourceSlice shaped like NVIDIA's kubelet plugin's (dra.md 4.4)."""
    devices: list[dict[str, Any]] = []
    for index in range(gpus):
        device: dict[str, Any] = {
            "name": f"gpu-{index}",
            "attributes": {
                "type": {"string": "gpu"},
                "uuid": {"string": gpu_uuid(node, index)},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
            },
            "capacity": {"memory": {"value": "81559Mi"}},
        }
        if taints and index in taints:
            device["taints"] = [{"key": "gpu.nvidia.com/xid", "value": taints[index], "effect": "NoSchedule"}]
        devices.append(device)
        for n, profile in enumerate((mig or {}).get(index, [])):
            devices.append(
                {
                    "name": f"gpu-{index}-mig-{profile.replace('.', '')}-{n}",
                    "attributes": {
                        "type": {"string": "mig"},
                        "parentUUID": {"string": gpu_uuid(node, index)},
                        "profile": {"string": profile},
                    },
                }
            )
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


NVIDIA_GPU_CLASS: dict[str, Any] = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "DeviceClass",
    "metadata": {"name": "gpu.nvidia.com"},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": "device.driver == 'gpu.nvidia.com' && "
                    "device.attributes['gpu.nvidia.com'].type == 'gpu'"
                }
            }
        ]
    },
}
"""The DeviceClass NVIDIA's DRA chart installs for whole GPUs (dra.md 4.2)."""
