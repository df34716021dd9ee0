"""A ComputePool's `status`, computed from its members as they will be after the planner's writes.

Called by the planner (`accelpool.decide.planning`) once per pool and pass, with a `PoolFacts`.
Everything the status says is derived from node facts (labels, taints, conditions, the agent's
report) and the plan's own decisions, so it is true as soon as the reconciler's writes land.
Each condition is computed by its own pure function; a small composer assembles them:

- `facts`: the inputs (`PoolFacts`, `Member`, `Selection`, `Breaker`) and health wording.
- `layout`: whether NVIDIA's MIG manager, device plugin and GFD serve the pool's config (`Layout`).
- `census`: the members sorted into the groups the status names (quarantined, burn-in, silent, ready...).
- `conditions`: Valid, NodesSelected, MigConfigured, DevicePluginConfigured, AgentReady, Healthy.
- `drivers`: DriversConsistent, from the driver and CUDA versions the members' agents report.
- `phase`: Pending / Provisioning > Degraded > Configuring > Ready, and the Ready condition.
- `capacity`: what serving members offer (GPUs, memory, advertised resources, TFLOPS), the GPUs
  of the others by why they do not serve, the member list (the tolerations come from
  `accelpool_api.workloads.scheduling_tolerations`, which the Python API shares).
- `compose`: `compute_status` and `invalid_status` (phase Failed), with transition times kept.
- `kueue`: `with_kueue`, the KueueSynced condition and `status.kueue` of a pool that asks for Kueue.
"""

from accelpool.decide.poolstatus.compose import ConditionHistory, compute_status, invalid_status
from accelpool.decide.poolstatus.conditions import CONDITION_TYPES, STRATEGY_OVERRIDE_FIX, Finding, parse_retries
from accelpool.decide.poolstatus.drivers import driver_versions
from accelpool.decide.poolstatus.facts import (
    MESSAGE_NODES,
    Breaker,
    ConditionStatus,
    Member,
    MemberHealth,
    Phase,
    PoolFacts,
    Selection,
    describe_health,
    health_reason,
)
from accelpool.decide.poolstatus.kueue import KUEUE_CONDITION, with_kueue

__all__ = [
    "CONDITION_TYPES",
    "KUEUE_CONDITION",
    "MESSAGE_NODES",
    "STRATEGY_OVERRIDE_FIX",
    "Breaker",
    "ConditionHistory",
    "ConditionStatus",
    "Finding",
    "Member",
    "MemberHealth",
    "Phase",
    "PoolFacts",
    "Selection",
    "compute_status",
    "describe_health",
    "driver_versions",
    "health_reason",
    "invalid_status",
    "parse_retries",
    "with_kueue",
]
