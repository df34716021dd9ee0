"""Dynamic Resource Allocation in the demo's simulated cluster: NVIDIA's DRA kubelet plugin on the nodes,
and the kube-scheduler and kube-controller-manager parts that allocate its devices to pods' claims.

Pure cores, each after the real component's code (cited in each module), and thin drivers:

- `plugin`: what NVIDIA's `gpu.nvidia.com` kubelet plugin discovers on a node and publishes (full GPUs
  and static MIG devices with their attributes and capacity), its health taints (XIDs), its restart;
- `nodes`: the plugin on every node it runs on (`KubeletPlugins`), and the ResourceSlice writes that keep
  each node's slice in step (`reconcile`);
- `cel`, `quantity`: DeviceClass and request selectors evaluated as the scheduler evaluates them;
- `allocator`: the scheduler's structured allocator (devices for a pod's claims on one node);
- `claims`: the resourceclaim controller (claims from templates, claims released when pods go);
- `scheduler`: node filtering, allocation, binding, and the unschedulable message;
- `components`: the drivers against the API (`DraNodeComponents`, `DraScheduler`), started with the demo's
  other simulators.

Used by the demo (`accelpool_demo.simulators`, `accelpool_demo.run`) and by the operator's tests.
"""

from accelpool_demo.dra.allocator import AllocationError, allocate, allocated_devices, gather_pools
from accelpool_demo.dra.claims import (
    DELETE_PROTECTION_FINALIZER,
    POD_CLAIM_NAME_ANNOTATION,
    claim_from_template,
    claim_release,
    pod_claims_to_create,
)
from accelpool_demo.dra.nodes import DRA_NODE_SELECTOR, Installation, KubeletPlugins, SliceWrite, reconcile
from accelpool_demo.dra.plugin import (
    DRIVER,
    GPU_LOST_TAINT,
    IGNORED_XIDS,
    XID_TAINT,
    GpuInfo,
    Plugin,
    Versions,
    discover,
    resource_slice,
)
from accelpool_demo.dra.scheduler import Bound, Cluster, Unschedulable, Waiting, schedule

__all__ = [
    "DELETE_PROTECTION_FINALIZER",
    "DRA_NODE_SELECTOR",
    "DRIVER",
    "GPU_LOST_TAINT",
    "IGNORED_XIDS",
    "POD_CLAIM_NAME_ANNOTATION",
    "XID_TAINT",
    "AllocationError",
    "Bound",
    "Cluster",
    "GpuInfo",
    "Installation",
    "KubeletPlugins",
    "Plugin",
    "SliceWrite",
    "Unschedulable",
    "Versions",
    "Waiting",
    "allocate",
    "allocated_devices",
    "claim_from_template",
    "claim_release",
    "discover",
    "gather_pools",
    "pod_claims_to_create",
    "reconcile",
    "resource_slice",
    "schedule",
]
