"""The KueueSynced condition and `status.kueue` of a pool that asks for Kueue (`spec.kueue.enabled`).

`accelpool.decide.kueue` decides what the pool's Kueue objects should be and whether they can be kept
(Kueue installed, the flavor accelpool's own, the ClusterQueue there); `with_kueue` stamps its
finding into the status the composer computed, before Ready, keeping the transition time while the
condition's status holds. Pools that do not ask get neither the condition nor the block.
"""

from __future__ import annotations

from datetime import datetime

import accelpool_api as api
from accelpool.decide.poolstatus.compose import ConditionHistory
from accelpool.decide.poolstatus.conditions import Finding

KUEUE_CONDITION = "KueueSynced"


def with_kueue(
    status: api.ComputePoolStatus,
    finding: Finding,
    block: api.KueueStatus,
    previous: api.ComputePoolStatus | None,
    now: datetime,
) -> api.ComputePoolStatus:
    """`status` with the KueueSynced condition (before Ready) and `status.kueue`."""
    condition = ConditionHistory(previous, now, status.observed_generation).condition(KUEUE_CONDITION, finding)
    conditions = [c for c in status.conditions if c.type != KUEUE_CONDITION]
    at = next((i for i, c in enumerate(conditions) if c.type == "Ready"), len(conditions))
    conditions.insert(at, condition)
    return status.model_copy(update={"conditions": conditions, "kueue": block})
