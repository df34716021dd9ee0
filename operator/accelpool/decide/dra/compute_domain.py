"""The ComputeDomain a pool with `spec.nvlink.computeDomain` owns, and what NVIDIA's controller reports of it. Pure.

A ComputeDomain (`resource.nvidia.com/v1beta1`, namespaced, kubernetes-sigs/dra-driver-nvidia-gpu
`api/nvidia.com/resource/v1beta1/computedomain.go`) makes NVIDIA's compute-domain controller create a
ResourceClaimTemplate of IMEX channels (`spec.channel.resourceClaimTemplate.name`, in the ComputeDomain's
namespace) that the pool's multi-node pods name; the controller names its own objects after the
ComputeDomain's UID (`cmd/compute-domain-controller/daemonset.go`, `resourceclaimtemplate.go`), never its
name. `desired_compute_domain` is what the operator writes; `compute_domain_status` reads the object back
for `status.dra.computeDomain`. For the operator's writer of a DRA pool's objects.

The spec is immutable (the CRD's rule `self == oldSelf`): it depends on the pool's name only, and every
field the CRD defaults is written out, so writing it again never changes it. A changed namespace is
another object: the old one stays owned by the live pool, so the garbage collector keeps it, and the
writer must delete it (found by its `accelpool.io/pool` label).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import accelpool_api as api
from accelpool.decide import render
from accelpool.model.nodes import mapping
from accelpool_api import conventions

API_VERSION = "resource.nvidia.com/v1beta1"
KIND = "ComputeDomain"
PLURAL = "computedomains"
CHANNEL_SUFFIX = "-channel"
STATUS_VALUE_MAX = conventions.LABEL_VALUE_MAX


def compute_domain_name(pool: str) -> str:
    """The pool's ComputeDomain: the pool's name.

    A pool's name is a DNS-1123 subdomain of at most 63 characters (`api.MAX_POOL_NAME`), which is what the
    API server asks of a custom object's name (253 at most): it fits as it is.
    """
    _check_pool_name(pool)
    return pool


def channel_template_name(pool: str) -> str:
    """The ResourceClaimTemplate NVIDIA's controller makes for the pool's ComputeDomain: `<pool>-channel`.

    At most 71 characters: a DNS-1123 subdomain (253 at most), as a ResourceClaimTemplate's name must be.
    """
    _check_pool_name(pool)
    return pool + CHANNEL_SUFFIX


def _check_pool_name(pool: str) -> None:
    problems = api.name_problems(pool)
    if problems:
        raise ValueError(f"pool name {pool!r} cannot name a ComputeDomain: " + "; ".join(p.message for p in problems))


def desired_compute_domain(pool_name: str, pool_uid: str, spec: api.ComputePoolSpec) -> dict[str, Any]:
    """The ComputeDomain of a pool with `spec.nvlink.computeDomain`, owned by the ComputePool.

    `numNodes: 0` (NVIDIA's recommendation with `IMEXDaemonsWithDNSNames`, on by default: IMEX daemons start
    as nodes join, the workload counts its peers) and one IMEX channel per claim (`allocationMode: Single`).
    A cluster-scoped owner of a namespaced object is allowed; the garbage collector deletes the
    ComputeDomain with its pool (the reference blocks the pool's foreground deletion, as the agent
    DaemonSet's does: `render.owner_reference`). Raises ValueError when the spec asks for no ComputeDomain.
    """
    domain = spec.nvlink.compute_domain if spec.nvlink is not None else None
    if domain is None:
        raise ValueError(f"pool {pool_name!r}: spec.nvlink.computeDomain is not set: the pool has no ComputeDomain")
    metadata: dict[str, Any] = {
        "name": compute_domain_name(pool_name),
        "namespace": domain.namespace,
        "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: pool_name},
    }
    if pool_uid:  # an offline plan knows no UID; the API server refuses an owner reference without one
        metadata["ownerReferences"] = [render.owner_reference(pool_name, pool_uid)]
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "numNodes": 0,
            "channel": {
                "resourceClaimTemplate": {"name": channel_template_name(pool_name)},
                "allocationMode": "Single",
            },
        },
    }


def compute_domain_status(obj: Mapping[str, Any]) -> api.ComputeDomainStatus:
    """`status.dra.computeDomain` from the ComputeDomain as read from the cluster.

    `status` is its `status.status` (Ready, NotReady), None until NVIDIA's controller first writes it. The
    controller writes it only after making the channel ResourceClaimTemplate (`cmd/compute-domain-controller/
    computedomain.go` `onAddOrUpdateDriverManaged`, `onAddOrUpdateHostManaged`), so `channel_template` is
    named once the status is there, None before. Values of the wrong type read as absent.
    """
    metadata = mapping(obj.get("metadata"))
    spec = mapping(obj.get("spec"))
    reported = mapping(obj.get("status")).get("status")
    state = conventions.cut(reported, STATUS_VALUE_MAX) if isinstance(reported, str) and reported else None
    template = mapping(mapping(spec.get("channel")).get("resourceClaimTemplate")).get("name")
    return api.ComputeDomainStatus(
        name=_text(metadata.get("name")),
        namespace=_text(metadata.get("namespace")),
        status=state,
        channel_template=template if state is not None and isinstance(template, str) and template else None,
    )


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""
