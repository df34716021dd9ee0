"""Kueue integration: the ResourceFlavor and ClusterQueue quota accelpool keeps for pools that ask.

- `plan`: `decide(plan, previous, observed, now)` → the plan with KueueSynced statuses and a
  `KueuePlan` (flavors to apply, ClusterQueue edits, flavors to delete); `KueueObserved` is what the
  controller read of Kueue (`accelpool.runtime.controller.kueue` reads and writes).
- `queues`: a ClusterQueue's `resourceGroups` with accelpool's flavors set or removed, the rest kept.
"""

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
    "KueueObserved",
    "KueuePlan",
    "QueueConflict",
    "QueueEdit",
    "decide",
    "edit_groups",
    "nominal_quota",
    "quantity_number",
    "requestable",
    "resource_flavor",
    "same_groups",
]
