"""The demo's simulated fleet: a compact cluster description → realistic Node objects.

Each group is labelled the way its vendor's discovery labels real nodes (NVIDIA GFD, GKE,
the AMD node labeller, Karpenter on AWS), with capacity for the accelerator's resource, a
Ready condition, and the kubelet facts `kubectl get nodes -o wide` shows. Pure.

`DEFAULT_FLEET` is the fleet `accelpool demo` simulates: package data (`demo-cluster.yaml` next to
this module), so the demo finds it from any working directory. Its `workloads` are pods already running
on some nodes when the demo starts, each set guarded by a PodDisruptionBudget (what a drain must honour):
`workload_objects`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from accelpool_core import catalog

LabelStyle = Literal["gfd", "gke", "gke-tpu", "amd", "karpenter", "none"]
_STYLES = ("gfd", "gke", "gke-tpu", "amd", "karpenter", "none")
_CREATED = "2026-11-01T00:00:00Z"
DEFAULT_FLEET = Path(__file__).with_name("demo-cluster.yaml")


@dataclass(frozen=True)
class NodeGroup:
    prefix: str
    count: int
    labels: LabelStyle
    instance_type: str
    zone: str
    accelerator: str | None = None
    gpus: int = 0
    extra_labels: dict[str, str] = field(default_factory=dict)


def parse(text: str) -> list[NodeGroup]:
    """Read a DemoCluster document; errors name the group and the field."""
    document = yaml.safe_load(text) or {}
    if document.get("kind") != "DemoCluster":
        raise ValueError(f"expected kind DemoCluster, got {document.get('kind')!r}")
    groups: list[NodeGroup] = []
    for index, raw in enumerate(document.get("groups") or []):
        where = f"groups[{index}]"
        style = raw.get("labels", "none")
        if style not in _STYLES:
            raise ValueError(f"{where}.labels: {style!r} is not one of {', '.join(_STYLES)}")
        accelerator = raw.get("accelerator")
        if accelerator is not None:
            try:
                accelerator = catalog.lookup(accelerator).name
            except catalog.UnknownAcceleratorError as error:
                raise ValueError(f"{where}.accelerator: {error}") from None
        groups.append(
            NodeGroup(
                prefix=str(raw["prefix"]),
                count=int(raw.get("count", 1)),
                labels=style,
                instance_type=str(raw.get("instanceType", "")),
                zone=str(raw.get("zone", "zone-a")),
                accelerator=accelerator,
                gpus=int(raw.get("gpus", 0)),
                extra_labels={str(k): str(v) for k, v in (raw.get("extraLabels") or {}).items()},
            )
        )
    return groups


def _accelerator_labels(group: NodeGroup, entry: catalog.Accelerator) -> dict[str, str]:
    detection = entry.detection
    gpus = str(group.gpus)
    if group.labels == "gfd":
        return {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": detection.gfd_products[0],
            "nvidia.com/gpu.count": gpus,
            "nvidia.com/gpu.memory": str(entry.memory_gb * 1024 - 361),
            "nvidia.com/gpu.replicas": "1",
            "nvidia.com/gpu.sharing-strategy": "none",
            "nvidia.com/mig.capable": str(entry.mig_capable).lower(),
            "nvidia.com/cuda.driver-version.full": "580.95.05",
        }
    if group.labels == "gke":
        return {
            "cloud.google.com/gke-accelerator": detection.gke_accelerators[0],
            "cloud.google.com/gke-accelerator-count": gpus,
            "cloud.google.com/gke-nodepool": f"{group.prefix}-pool",
        }
    if group.labels == "gke-tpu":
        return {"cloud.google.com/gke-tpu-accelerator": detection.gke_accelerators[0]}
    if group.labels == "amd":
        return {
            "amd.com/gpu.product-name": detection.amd_products[0],
            "amd.com/gpu.vram": f"{entry.memory_gb}G",
            "amd.com/gpu.family": "AI",
        }
    if group.labels == "karpenter":
        name_key = "gpu" if entry.vendor == catalog.Vendor.NVIDIA else "accelerator"
        return {
            "karpenter.sh/nodepool": "default",
            f"karpenter.k8s.aws/instance-{name_key}-name": detection.karpenter_names[0],
            f"karpenter.k8s.aws/instance-{name_key}-count": gpus,
            f"karpenter.k8s.aws/instance-{name_key}-manufacturer": entry.vendor.value,
        }
    return {}


def _taints(group: NodeGroup, entry: catalog.Accelerator | None) -> list[dict[str, str]]:
    """GKE taints its accelerator nodes; accelpool must live with other controllers' taints."""
    if entry is None:
        return []
    if group.labels == "gke":
        return [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if group.labels == "gke-tpu":
        return [{"key": "google.com/tpu", "value": "present", "effect": "NoSchedule"}]
    return []


def nodes(groups: list[NodeGroup]) -> list[dict[str, Any]]:
    """Node objects for every group, named `<prefix>-<n>`."""
    result: list[dict[str, Any]] = []
    for group in groups:
        entry = catalog.BY_NAME[group.accelerator] if group.accelerator else None
        for number in range(1, group.count + 1):
            name = f"{group.prefix}-{number}"
            labels = {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": group.instance_type,
                "topology.kubernetes.io/zone": group.zone,
                **(_accelerator_labels(group, entry) if entry else {}),
                **group.extra_labels,
            }
            capacity = {"cpu": "96", "memory": "1048576Mi", "pods": "110"}
            if entry is not None:
                capacity[entry.resource] = str(group.gpus)
            spec: dict[str, Any] = {}
            if taints := _taints(group, entry):
                spec["taints"] = taints
            result.append(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {"name": name, "labels": labels, "annotations": {}, "creationTimestamp": _CREATED},
                    "spec": spec,
                    "status": {
                        "capacity": capacity,
                        "allocatable": dict(capacity),
                        "conditions": [
                            {
                                "type": "Ready",
                                "status": "True",
                                "reason": "KubeletReady",
                                "message": "kubelet is posting ready status",
                                "lastHeartbeatTime": _CREATED,
                                "lastTransitionTime": _CREATED,
                            }
                        ],
                        "addresses": [{"type": "Hostname", "address": name}],
                        "nodeInfo": {
                            "kubeletVersion": "v1.33.4",
                            "osImage": "Ubuntu 22.04.5 LTS",
                            "containerRuntimeVersion": "containerd://1.7.27",
                            "architecture": "amd64",
                            "operatingSystem": "linux",
                        },
                    },
                }
            )
    return result


WORKLOAD_NAMESPACE = "default"
WORKLOAD_IMAGE = "registry.k8s.io/pause:3.10"


@dataclass(frozen=True)
class Workload:
    """Pods named `<name>-<n>`, one on each of `nodes`, and a PDB over them (`app: <name>`)."""

    name: str
    nodes: tuple[str, ...]
    min_available: int | str | None = None
    max_unavailable: int | str | None = None
    grace_seconds: int = 30


def parse_workloads(text: str) -> list[Workload]:
    """The `workloads` of a DemoCluster document; errors name the workload and the field."""
    workloads: list[Workload] = []
    for index, raw in enumerate((yaml.safe_load(text) or {}).get("workloads") or []):
        where = f"workloads[{index}]"
        nodes = raw.get("nodes")
        if not isinstance(nodes, list) or not nodes:
            raise ValueError(f"{where}.nodes: {nodes!r} is not a list of node names")
        workloads.append(
            Workload(
                name=str(raw["name"]),
                nodes=tuple(str(node) for node in nodes),
                min_available=raw.get("minAvailable"),
                max_unavailable=raw.get("maxUnavailable"),
                grace_seconds=int(raw.get("terminationGracePeriodSeconds", 30)),
            )
        )
    return workloads


def workload_objects(workload: Workload) -> list[dict[str, Any]]:
    """The workload's pods, bound, Running and Ready (as their kubelet reports them), then its PDB."""
    labels = {"app": workload.name}
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": _CREATED}
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{workload.name}-{number}", "namespace": WORKLOAD_NAMESPACE, "labels": labels},
            "spec": {
                "nodeName": node,
                "terminationGracePeriodSeconds": workload.grace_seconds,
                "containers": [{"name": "main", "image": WORKLOAD_IMAGE}],
            },
            "status": {"phase": "Running", "conditions": [ready]},
        }
        for number, node in enumerate(workload.nodes)
    ]
    spec: dict[str, Any] = {"selector": {"matchLabels": labels}}
    if workload.min_available is not None:
        spec["minAvailable"] = workload.min_available
    if workload.max_unavailable is not None:
        spec["maxUnavailable"] = workload.max_unavailable
    budget = {"name": workload.name, "namespace": WORKLOAD_NAMESPACE}
    objects.append({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": budget, "spec": spec})
    return objects
