"""The ComputePool API (`accelpool.io/v1alpha1`): pydantic models for spec and status, and their validation.

This package is the one model everything else is generated from: the CRD schema and its CEL
rules (`accelpool_api.crd`), `accelpool validate`, and the operator's `Valid` condition all call
into it. Structural rules (types, ranges, exclusive fields) live on the models; rules that need
the catalog (is this MIG profile offered by that GPU, does the layout fit) live in
`spec_problems`, which names the field path, the bad value and what would be valid.

Callers use the names re-exported here (`import accelpool_api as api`; `api.ComputePoolSpec`); the
modules behind them, in dependency order:

- `problems`: `Problem`, a field error in the API server's words, and `go_value`/`as_sent`;
- `rules`: `Rule` (one cross-field rule in CEL and Python) and the `Model` base;
- `names`: group, version, kind, and `name_problems` for a pool's name;
- `devices`, `health`, `kueue`: the spec's parts (accelerator, MIG, sharing; health policy, durations);
- `resolution`: the accelerator resolved against the catalog, and `spec_problems`;
- `spec`, `status`, `pool`: `ComputePoolSpec`, `ComputePoolStatus`, the whole `ComputePool`.

Beside the models, in the same distribution (`accelpool-api`: pure, no kopf and no HTTP, so that the
Python API installs without the operator):

- `validation`: a pool judged in the API server's own words (schema, CEL rules, the webhook's checks);
- `crd`: the CustomResourceDefinition generated from the models;
- `conventions`: every label, taint, annotation and object name accelpool reads or writes;
- `workloads`: what a pod needs to land on a pool (its tolerations, the resources one GPU advertises).

Callers: the operator (`accelpool`: the planner, the handlers, the webhook, `accelpool validate`), the
Python API (`accelpool_sdk`) and the demo.
"""

from accelpool_api.devices import (
    ACCELERATOR_STRING_PATTERN,
    MAX_TIME_SLICING_REPLICAS,
    MEMORY_PATTERN,
    MIG_PROFILE_PATTERN,
    MPS_LIMIT_CAPABILITY,
    MPS_MAX_CLIENTS,
    MPS_MAX_CLIENTS_BEFORE_7_5,
    AcceleratorRequest,
    MigSpec,
    MpsSpec,
    SharingSpec,
    TimeSlicingSpec,
)
from accelpool_api.health import (
    ANY_VENDOR_BACKENDS,
    DURATION_PATTERN,
    FLAP_DOUBLINGS,
    FLAP_MEMORY,
    MAX_DURATION_LENGTH,
    MAX_HOLD_DOWN,
    MAX_INTERVAL,
    MIN_HOLD_DOWN,
    MIN_INTERVAL,
    PERCENT_PATTERN,
    DrainPolicy,
    HandOffPolicy,
    HealthSpec,
    MatmulPolicy,
    format_duration,
    parse_duration,
)
from accelpool_api.kueue import (
    DRA_QUOTA_PREFIX,
    KUEUE_NAME_MAX,
    KUEUE_NAME_PATTERN,
    KueueDeviceClassMapping,
    KueueSpec,
    dra_quota_resource,
)
from accelpool_api.names import (
    API_VERSION,
    CATEGORIES,
    DNS1123_SUBDOMAIN,
    DNS1123_SUBDOMAIN_MESSAGE,
    GROUP,
    KIND,
    MAX_POOL_NAME,
    PLURAL,
    SHORT_NAMES,
    SINGULAR,
    VERSION,
    metadata_problems,
    name_problems,
)
from accelpool_api.pool import ComputePool, ObjectMeta
from accelpool_api.problems import AUTO, ErrorType, Problem, as_sent, go_float, go_value
from accelpool_api.resolution import ResolvedAccelerator, max_instances_that_fit, resolve_accelerator, spec_problems
from accelpool_api.rules import Model, Rule, RuledModel
from accelpool_api.spec import MAX_NODES, ComputeDomainSpec, ComputePoolSpec, NvlinkSpec, ProvisionerSpec
from accelpool_api.status import (
    MAX_STATUS_MEMBERS,
    Capacity,
    ComputeDomainStatus,
    ComputePoolStatus,
    Condition,
    DeviceQuarantine,
    DraStatus,
    KueueStatus,
    Member,
    NodeCounts,
    QuarantineScope,
    Scheduling,
    Toleration,
    read_status,
)
from accelpool_core.protocol import VENDOR_BACKENDS, AgentBackend

__all__ = [
    "ACCELERATOR_STRING_PATTERN",
    "ANY_VENDOR_BACKENDS",
    "API_VERSION",
    "AUTO",
    "CATEGORIES",
    "DNS1123_SUBDOMAIN",
    "DNS1123_SUBDOMAIN_MESSAGE",
    "DRA_QUOTA_PREFIX",
    "DURATION_PATTERN",
    "FLAP_DOUBLINGS",
    "FLAP_MEMORY",
    "GROUP",
    "KIND",
    "KUEUE_NAME_MAX",
    "KUEUE_NAME_PATTERN",
    "MAX_DURATION_LENGTH",
    "MAX_HOLD_DOWN",
    "MAX_INTERVAL",
    "MAX_NODES",
    "MAX_POOL_NAME",
    "MAX_STATUS_MEMBERS",
    "MAX_TIME_SLICING_REPLICAS",
    "MEMORY_PATTERN",
    "MIG_PROFILE_PATTERN",
    "MIN_HOLD_DOWN",
    "MIN_INTERVAL",
    "MPS_LIMIT_CAPABILITY",
    "MPS_MAX_CLIENTS",
    "MPS_MAX_CLIENTS_BEFORE_7_5",
    "PERCENT_PATTERN",
    "PLURAL",
    "SHORT_NAMES",
    "SINGULAR",
    "VENDOR_BACKENDS",
    "VERSION",
    "AcceleratorRequest",
    "AgentBackend",
    "Capacity",
    "ComputeDomainSpec",
    "ComputeDomainStatus",
    "ComputePool",
    "ComputePoolSpec",
    "ComputePoolStatus",
    "Condition",
    "DeviceQuarantine",
    "DraStatus",
    "DrainPolicy",
    "ErrorType",
    "HandOffPolicy",
    "HealthSpec",
    "KueueDeviceClassMapping",
    "KueueSpec",
    "KueueStatus",
    "MatmulPolicy",
    "Member",
    "MigSpec",
    "Model",
    "MpsSpec",
    "NodeCounts",
    "NvlinkSpec",
    "ObjectMeta",
    "Problem",
    "ProvisionerSpec",
    "QuarantineScope",
    "ResolvedAccelerator",
    "Rule",
    "RuledModel",
    "Scheduling",
    "SharingSpec",
    "TimeSlicingSpec",
    "Toleration",
    "as_sent",
    "dra_quota_resource",
    "format_duration",
    "go_float",
    "go_value",
    "max_instances_that_fit",
    "metadata_problems",
    "name_problems",
    "parse_duration",
    "read_status",
    "resolve_accelerator",
    "spec_problems",
]
