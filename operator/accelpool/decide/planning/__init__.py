"""The planner: from pools, nodes and the current NVIDIA configs, the whole desired state.

`plan(pools, nodes, config, options)` decides, in one pass over the cluster (`_plan_once`, below):

1. **Membership** (`membership`): which pool each node belongs to, and which nodes leave it
   (deleted or missing pools, members that no longer match); stale agent health reads Unknown.
2. **Remediation** (`remediation`, `ladder`): quarantine unhealthy members per the pool's policy
   within `maxUnavailable` (else the circuit breaker opens); drain and hand off quarantined
   members as the policy asks and the breaker allows; lift quarantines after `holdDown`.
   **Burn-in** (`burnin`): lift the burn-in taint of members that passed a full check cycle,
   mark those that failed.
3. **Sizing** (`sizing`): how many serving members a static pool lacks, or which are surplus
   (released most recently joined first; members in burn-in count, failed ones do not).
4. **Claims** (`claims`): pools, oldest first, take free nodes in name order.
5. **Node changes** (`changes`, `mig_retry`, recorded in a `ledger.Ledger`): the pool and NVIDIA
   config labels (a member moves to an edited config once its pods can read it: `ConfigSync`),
   prior labels, joined-at, the pool taint, quarantines, burn-in, MIG retries.
6. **Configs** (`configs`): the device-plugin ConfigMap data and the mig-parted document.
7. **Statuses** (`accelpool.decide.poolstatus`), Events, remediation records, and when to plan again.

`cluster_pass` runs the stages in this order. Each stage is a module with public functions over
explicit inputs; the values going in and out are in `model`. One pool can never stop the others:
`plan` sets aside a pool whose planning raises (found by bisection) and plans the rest. Deterministic for equal inputs.

Callers: the controller (`accelpool.runtime.controller`) on every pass, `accelpool plan`, the tests and
`benchmarks/planner_scale.py`.
"""

from __future__ import annotations

from accelpool.decide.planning.cluster_pass import plan
from accelpool.decide.planning.mig_retry import format_mig_retry, mig_retry_delay, parse_mig_retry
from accelpool.decide.planning.model import (
    ConfigState,
    ConfigSync,
    EventIntent,
    Plan,
    PlannerOptions,
    PoolInput,
    PoolPlan,
    Remediation,
)

__all__ = [
    "ConfigState",
    "ConfigSync",
    "EventIntent",
    "Plan",
    "PlannerOptions",
    "PoolInput",
    "PoolPlan",
    "Remediation",
    "format_mig_retry",
    "mig_retry_delay",
    "parse_mig_retry",
    "plan",
]
