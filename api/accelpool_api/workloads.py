"""What a workload needs to land on a pool and use its devices: the tolerations and the resources.

- `scheduling_tolerations(pool, dedicated, taints)`: the tolerations a pod needs on every member (the pool
  taint of a dedicated pool, plus other controllers' lasting taints; transient ones are left out). The
  operator writes them into `status.scheduling` (`accelpool.decide.poolstatus.compose`); the Python API
  computes them for a pool that has no status yet (`accelpool_sdk.fragment`).
- `resources_per_gpu(spec)`: what one physical GPU of a member advertises to pods under the pool's
  device-plugin config (NVIDIA/k8s-device-plugin: whole devices under the catalog's resource, MIG devices
  under `nvidia.com/gpu` with the single strategy or `nvidia.com/mig-<profile>` with mixed, shared
  replicas under `nvidia.com/gpu`). The operator's status, planner and `accelpool recommend` count with
  it; the Python API's pod-spec fragment requests from it.
- `mig_devices(layout)`: a per-GPU MIG layout as profile counts (also the mig-parted entry's `mig-devices`).

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from accelpool_api import conventions
from accelpool_api.resolution import ResolvedAccelerator
from accelpool_api.spec import ComputePoolSpec
from accelpool_api.status import Toleration
from accelpool_core import catalog

TRANSIENT_TAINT_PREFIXES = (
    "node.kubernetes.io/",
    "node.cloudprovider.kubernetes.io/",
    "karpenter.sh/",
    "karpenter.k8s.aws/",
    "cluster-autoscaler.kubernetes.io/",
    "nvidia.com/gpu-xid",
    f"{conventions.DOMAIN}/",
)
"""Taints that come and go with a node's lifecycle or mark it bad: pods should not tolerate them."""
TRANSIENT_TAINT_KEYS = frozenset({"ToBeDeletedByClusterAutoscaler", "DeletionCandidateOfClusterAutoscaler"})


class NodeTaint(Protocol):
    """A taint on a member node, as the operator's `accelpool.model.nodes.Taint` carries it."""

    @property
    def key(self) -> str: ...
    @property
    def value(self) -> str | None: ...
    @property
    def effect(self) -> str: ...


def scheduling_tolerations(pool: str, dedicated: bool, taints: Iterable[NodeTaint]) -> list[Toleration]:
    """Tolerations a pod needs on every member: the pool taint plus other controllers' lasting taints
    (`taints`: those of every member; none for a pool without members)."""
    found: set[tuple[str, str | None, str]] = set()
    for taint in taints:
        if taint.effect not in ("NoSchedule", "NoExecute") or taint.key in TRANSIENT_TAINT_KEYS:
            continue
        if taint.key.startswith(TRANSIENT_TAINT_PREFIXES):
            continue
        found.add((taint.key, taint.value, taint.effect))
    tolerations: list[Toleration] = []
    if dedicated:
        tolerations.append(
            Toleration(key=conventions.POOL_TAINT_KEY, operator="Equal", value=pool, effect=conventions.NO_SCHEDULE)
        )
    for key, value, effect in sorted(found, key=lambda k: (k[0], k[1] or "", k[2])):
        if value is None:
            tolerations.append(Toleration(key=key, operator="Exists", effect=effect))
        else:
            tolerations.append(Toleration(key=key, operator="Equal", value=value, effect=effect))
    return tolerations


def mig_devices(layout: Sequence[str]) -> dict[str, int]:
    """Per-GPU profile counts in first-appearance order: [3g.40gb, 1g.10gb, 1g.10gb] → {3g.40gb: 1, 1g.10gb: 2}."""
    counts: dict[str, int] = {}
    for profile in layout:
        counts[profile] = counts.get(profile, 0) + 1
    return counts


def resources_per_gpu(spec: ComputePoolSpec, resolved: ResolvedAccelerator | None = None) -> dict[str, int]:
    """What one physical GPU of a member advertises to pods under this pool's config."""
    if spec.allocation == "DRA":
        return {}  # NVIDIA's DRA driver publishes ResourceSlices: no extended resource is advertised
    entry = (resolved or spec.resolve()).entry
    strategy = spec.mig_strategy()
    if strategy == "mixed":
        return {catalog.mig_resource(profile): count for profile, count in mig_devices(spec.mig_layout()).items()}
    if strategy == "single":
        return {entry.resource: len(spec.mig_layout())}
    return {entry.resource: spec.sharing.replicas if spec.sharing is not None else 1}


DRA_CLAIM_REQUEST = "gpu"
"""The request name in a DRA pool's ResourceClaimTemplate (`dra_claim_template`)."""


def dra_claim_template_name(pool: str) -> str:
    """What a DRA pool's users name the ResourceClaimTemplate in their namespace, by convention: `<pool>-gpus`."""
    return f"{pool}-gpus"


def dra_claim_template(pool: str, count: int = 1) -> dict[str, Any]:
    """The spec of a ResourceClaimTemplate asking for `count` of a DRA pool's devices (through its DeviceClass,
    `conventions.device_class_name`): what `status.scheduling.resourceClaimTemplate` offers and the SDK's pod-spec
    fragment names."""
    return {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": DRA_CLAIM_REQUEST,
                        "exactly": {
                            "deviceClassName": conventions.device_class_name(pool),
                            "allocationMode": "ExactCount",
                            "count": count,
                        },
                    }
                ]
            }
        }
    }
