"""Kueue integration: the ResourceFlavor and ClusterQueue quota accelpool keeps for pools that ask.

- `plan`: `decide(plan, previous, observed, now)` → the plan with KueueSynced statuses and a
  `KueuePlan` (flavors to apply, ClusterQueue edits, flavors to delete); `KueueObserved` is what the
  controller read of Kueue (`accelpool.runtime.controller.kueue` reads and writes).
- `queues`: a ClusterQueue's `resourceGroups` with accelpool's flavors set or removed, the rest kept.
- `dra`: a DRA pool's quota (its devices under the resource its DeviceClass is mapped to) and the
  `deviceClassMappings` entry Kueue's own Configuration needs for it.
"""

from accelpool.decide.kueue.dra import DraQuota, dra_quota
from accelpool.decide.kueue.plan import (
    API_VERSION,
    GROUP,
    IN_USE_FINALIZER,
    VERSION,
    KueueObserved,
    KueuePlan,
    QueueEdit,
    decide,
    requestable,
    resource_flavor,
)
from accelpool.decide.kueue.queues import QueueConflict, edit_groups, nominal_quota, quantity_number, same_groups

__all__ = [
    "API_VERSION",
    "GROUP",
    "IN_USE_FINALIZER",
    "VERSION",
    "DraQuota",
    "KueueObserved",
    "KueuePlan",
    "QueueConflict",
    "QueueEdit",
    "decide",
    "dra_quota",
    "edit_groups",
    "nominal_quota",
    "quantity_number",
    "requestable",
    "resource_flavor",
    "same_groups",
]
