"""accelpool's Python API: ComputePools and their accelerators from Python, in the style of Skyward.

    import accelpool_sdk as ap

    pool = ap.ComputePool("llm-training", ap.Accelerator.NVIDIA.H100(count=8, mig="3g.40gb"), nodes=4)
    pool.apply().wait_until_ready(timeout=600)
    print(pool.pod_spec_fragment().as_dict())

    ap.instance_info(), ap.current_accelerator(), ap.is_nvidia()     # inside a pod

What it follows of Skyward (gabfssilva/skyward, the Python library for running on cloud accelerators):
`skyward/accelerator.py` (the nested factories `Accelerator.NVIDIA.H100(count=..., memory=...,
form_factor=..., mig=...)`, `Accelerator.AMD`, `.AWS`, `.Google`; per-GPU MIG profiles as Literal
types; literal accelerator names; `is_nvidia(acc)`, `is_trainium(acc)`, `is_tpu(acc)`, `is_amd(acc)`,
`is_gpu(acc)`, `current_accelerator()` returning None off an accelerator), `skyward/accelerators/spec.py`
(`from_name`, `with_count`), `skyward/cluster.py` (`instance_info()` / `InstanceInfo`) and
docs/accelerators.md (`ComputePool(accelerator=NVIDIA.A100)`: a factory passed uncalled). Where accelpool
differs, it follows accelpool: a ComputePool is a Kubernetes object with a name (Skyward's is a
provisioning session), the factories are generated from accelpool's catalog (one per model, its
variants chosen with `memory` and `form_factor`), `count` is devices per node, sharing is the pool's
(`sharing=ap.TimeSlicing(replicas=4)`), and `instance_info()` describes the devices this host sees
through the device agent's backends, not a cluster topology.

Modules: `accelerator` (`CatalogAccelerator`, validated through `accelpool_api.validation` as the CRD and
`accelpool validate` are), `factories` (generated: `Accelerator`, `NVIDIA`, `AMD`, `AWS`, `Google`, the
name Literal types), `pool` (`ComputePool`), `fragment` (the pod-spec fragment), `waiting` (readiness),
`cluster` (`Cluster`: the API client with a loop of its own; `Cluster.connect()` sets the default one),
`instance` (inside a pod; needs the device agent, `pip install ./device-agent`), `errors`, `generate`
(writes `factories`).

The distribution depends on accelpool-core and accelpool-api only (not the operator); importing this
package imports neither kopf nor the device agent (tests/integration/sdk/test_packaging.py).
"""

from accelpool_api import HealthSpec, MpsSpec, TimeSlicingSpec
from accelpool_core.kube import ApiError
from accelpool_sdk.accelerator import CatalogAccelerator
from accelpool_sdk.cluster import Cluster
from accelpool_sdk.errors import InvalidSpecError, PoolFailedError, PoolGoneError, PoolNotReadyError
from accelpool_sdk.factories import (
    AMD,
    AWS,
    NVIDIA,
    Accelerator,
    AcceleratorName,
    AmdName,
    AwsName,
    Google,
    GoogleName,
    NvidiaName,
)
from accelpool_sdk.fragment import PodSpecFragment
from accelpool_sdk.instance import (
    Device,
    InstanceInfo,
    current_accelerator,
    instance_info,
    is_amd,
    is_gpu,
    is_inferentia,
    is_nvidia,
    is_tpu,
    is_trainium,
)
from accelpool_sdk.pool import ComputePool
from accelpool_sdk.waiting import Progress

TimeSlicing = TimeSlicingSpec
"""`sharing=ap.TimeSlicing(replicas=4)`: pods take turns on each GPU."""
MPS = MpsSpec
"""`sharing=ap.MPS(replicas=4)`: CUDA MPS, pods share each GPU at once."""

__all__ = [
    "AMD",
    "AWS",
    "MPS",
    "NVIDIA",
    "Accelerator",
    "AcceleratorName",
    "AmdName",
    "ApiError",
    "AwsName",
    "CatalogAccelerator",
    "Cluster",
    "ComputePool",
    "Device",
    "Google",
    "GoogleName",
    "HealthSpec",
    "InstanceInfo",
    "InvalidSpecError",
    "NvidiaName",
    "PodSpecFragment",
    "PoolFailedError",
    "PoolGoneError",
    "PoolNotReadyError",
    "Progress",
    "TimeSlicing",
    "current_accelerator",
    "instance_info",
    "is_amd",
    "is_gpu",
    "is_inferentia",
    "is_nvidia",
    "is_tpu",
    "is_trainium",
]
