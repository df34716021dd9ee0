"""A DRA pool's DeviceClass, and what a pod copies to use it. Pure.

DeviceClass selectors are CEL over a device's driver, attributes and capacity only: they cannot see a node, a
node label or a pool name (k8s.io/api `resource/v1/types.go` `CELDeviceSelector`; dra.md 3 and 6.1), so the
class selects the pool's accelerator (NVIDIA's driver: `type`, `productName` as NVML names it, and the MIG
`profile`s of a MIG pool; kubernetes-sigs/dra-driver-nvidia-gpu `cmd/gpu-kubelet-plugin/deviceinfo.go`) and
the node fence stays the pool's label and taint (dra.md 6.2 option A). The class's `config` carries the
pool's sharing as NVIDIA's opaque `GpuConfig` (`api/nvidia.com/resource/v1beta1/sharing.go`: TimeSlicing needs
the driver's TimeSlicingSettings gate, MPS its MPSSupport gate); config from a claim overrides it.
"""

from __future__ import annotations

from typing import Any

import accelpool_api as api
from accelpool.decide.dra.slices import DRIVER
from accelpool_api import conventions
from accelpool_api.rules import cel_string


def _quoted(values: list[str]) -> str:
    """A CEL list literal of these strings."""
    return "[" + ", ".join(cel_string(v) for v in values) + "]"


def selector(spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator) -> str:
    """The CEL expression of the pool's devices."""
    entry = resolved.entry
    products = sorted({p.replace("-", " ") for p in entry.detection.gfd_products})
    attrs = f"device.attributes['{DRIVER}']"
    parts = [f"device.driver == '{DRIVER}'"]
    if spec.mig is not None:
        parts.append(f"{attrs}.type == 'mig'")
        parts.append(f"{attrs}.profile in {_quoted(sorted(set(spec.mig_layout())))}")
    else:
        parts.append(f"{attrs}.type == 'gpu'")
    if products:
        parts.append(f"{attrs}.productName in {_quoted(products)}")
    return " && ".join(parts)


def _sharing(spec: api.ComputePoolSpec) -> dict[str, Any] | None:
    if spec.sharing is None:
        return None
    strategy = "MPS" if spec.sharing.mps is not None else "TimeSlicing"
    return {
        "opaque": {
            "driver": DRIVER,
            "parameters": {
                "apiVersion": "resource.nvidia.com/v1beta1",
                "kind": "GpuConfig",
                "sharing": {"strategy": strategy},
            },
        }
    }


def device_class(
    pool: str, pool_uid: str, spec: api.ComputePoolSpec, resolved: api.ResolvedAccelerator
) -> dict[str, Any]:
    """The pool's DeviceClass (`conventions.device_class_name`), owned by the pool."""
    body: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {
            "name": conventions.device_class_name(pool),
            "labels": {conventions.POOL_LABEL: pool, conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY},
        },
        "spec": {"selectors": [{"cel": {"expression": selector(spec, resolved)}}]},
    }
    if pool_uid:
        body["metadata"]["ownerReferences"] = [
            {"apiVersion": api.API_VERSION, "kind": api.KIND, "name": pool, "uid": pool_uid}
        ]
    config = _sharing(spec)
    if config is not None:
        body["spec"]["config"] = [config]
    return body


def extended_resource(pool: str) -> str | None:
    """The pool's implicit extended resource (`api.dra_quota_resource`: Kueue's quota counts it too)."""
    return api.dra_quota_resource(conventions.device_class_name(pool))
