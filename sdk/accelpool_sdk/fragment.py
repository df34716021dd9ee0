"""The pod-spec fragment that lands a pod on a pool and requests its devices.

A pod needs three things from a pool: the pool's `nodeSelector` and `tolerations` (the operator
writes them into `status.scheduling`, from `accelpool_api.workloads.scheduling_tolerations`: the pool
taint of a dedicated pool plus other controllers' lasting taints), and a resource limit for what the
pool's devices are advertised as. That is what `accelpool_api.workloads.resources_per_gpu`, which the
operator counts with too, says one GPU advertises under the pool's device-plugin config:

- whole devices: the catalog's resource (`nvidia.com/gpu`, `amd.com/gpu`, `aws.amazon.com/neuron`,
  `google.com/tpu`), as many as `devices` (default: the pool's count per node, else 1);
- MIG, single strategy: `nvidia.com/gpu`, each one MIG device (NVIDIA/k8s-device-plugin advertises MIG
  devices under the GPU's own name with the single strategy);
- MIG, mixed strategy: `nvidia.com/mig-<profile>` (`profile`: default the layout's first);
- time-slicing or MPS: `nvidia.com/gpu: 1`, one replica (the device plugin refuses more than one
  under MPS, and under time-slicing with `failRequestsGreaterThanOne`).

- allocation DRA: no limit; the pod names a ResourceClaimTemplate (`workloads.dra_claim_template_name`,
  created in its namespace from `claim_template`: `devices` of the pool's DeviceClass) in `resourceClaims`,
  and the container uses the claim (`resources.claims`).

Extended resources are set as limits only: the API server defaults requests to them.
Before the operator has written a status, the scheduling block is the one it will write for a pool
without members (`workloads.scheduling_tolerations`, the same function). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import accelpool_api as api
from accelpool_api import conventions, workloads
from accelpool_core import catalog


@dataclass(frozen=True)
class PodSpecFragment:
    """What to merge into a pod's spec: `node_selector` and `tolerations` at the pod's level, `limits` in
    the container that uses the devices."""

    node_selector: dict[str, str]
    tolerations: list[dict[str, Any]]
    limits: dict[str, int]
    claim_template_name: str | None = None
    """allocation DRA: the ResourceClaimTemplate the pod names (create it from `claim_template` first)."""
    claim_template: dict[str, Any] | None = None
    """allocation DRA: the ResourceClaimTemplate's spec."""

    def as_dict(self) -> dict[str, Any]:
        """The fragment as a pod spec writes it (one container, without name or image)."""
        found: dict[str, Any] = {
            "nodeSelector": dict(self.node_selector),
            "tolerations": [dict(t) for t in self.tolerations],
            "containers": [{"resources": {"limits": dict(self.limits)}}],
        }
        if self.claim_template_name is not None:
            claim = workloads.DRA_CLAIM_REQUEST
            found["resourceClaims"] = [{"name": claim, "resourceClaimTemplateName": self.claim_template_name}]
            found["containers"] = [{"resources": {"claims": [{"name": claim}]}}]
        return found


def expected_scheduling(name: str, spec: api.ComputePoolSpec) -> api.Scheduling:
    """`status.scheduling` as the operator writes it for a pool that has no members yet."""
    return api.Scheduling(
        node_selector={conventions.POOL_LABEL: name},
        tolerations=workloads.scheduling_tolerations(name, spec.dedicated, []),
    )


def pod_spec_fragment(
    spec: api.ComputePoolSpec,
    scheduling: api.Scheduling,
    *,
    devices: int | None = None,
    profile: str | None = None,
    pool: str | None = None,
) -> PodSpecFragment:
    """The fragment for one container using `devices` of the pool's devices (MIG: of `profile`); `pool`, the pool's
    name, is needed for allocation DRA (its DeviceClass is named after it)."""
    if spec.allocation == "DRA":
        if pool is None:
            raise ValueError("pool: a DRA pool's fragment names its DeviceClass: give the pool's name")
        if devices is not None and devices < 1:
            raise ValueError(f"devices={devices!r}: a pod requests at least 1 device")
        count = devices or spec.accelerator.count or 1
        return PodSpecFragment(
            node_selector=dict(scheduling.node_selector),
            tolerations=[t.model_dump(by_alias=True, exclude_none=True) for t in scheduling.tolerations],
            limits={},
            claim_template_name=workloads.dra_claim_template_name(pool),
            claim_template=workloads.dra_claim_template(pool, count),
        )
    return PodSpecFragment(
        node_selector=dict(scheduling.node_selector),
        tolerations=[t.model_dump(by_alias=True, exclude_none=True) for t in scheduling.tolerations],
        limits=limits(spec, devices=devices, profile=profile),
    )


def limits(spec: api.ComputePoolSpec, *, devices: int | None = None, profile: str | None = None) -> dict[str, int]:
    """The container's resource limits for the pool's devices; ValueError names a bad `devices` or `profile`."""
    if devices is not None and devices < 1:
        raise ValueError(f"devices={devices!r}: a pod requests at least 1 device")
    per_gpu = workloads.resources_per_gpu(spec)
    strategy = spec.mig_strategy()
    if strategy == "mixed":
        layout = spec.mig_layout()
        chosen = profile or layout[0]
        resource = catalog.mig_resource(chosen)
        if resource not in per_gpu:
            raise ValueError(
                f"profile={chosen!r} is not in the pool's MIG layout; valid: {', '.join(dict.fromkeys(layout))}"
            )
        return {resource: devices or 1}
    if profile is not None and profile not in spec.mig_layout():
        valid = ", ".join(dict.fromkeys(spec.mig_layout())) or "none (the pool does not use MIG)"
        raise ValueError(f"profile={profile!r} is not in the pool's MIG layout; valid: {valid}")
    (resource,) = per_gpu
    if spec.sharing is not None:
        one_only = spec.sharing.mps is not None or (
            spec.sharing.time_slicing is not None and spec.sharing.time_slicing.fail_requests_greater_than_one
        )
        if one_only and (devices or 1) > 1:
            raise ValueError(f"devices={devices!r}: the pool's {spec.sharing.mode} gives a pod one replica; valid: 1")
        return {resource: devices or 1}
    if strategy == "single":
        return {resource: devices or 1}
    return {resource: devices or spec.accelerator.count or 1}
