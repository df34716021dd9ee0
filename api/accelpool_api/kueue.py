"""`KueueSpec`: whether the operator keeps a Kueue ResourceFlavor for the pool, and which ClusterQueue's
quota follows the pool's healthy capacity (off by default; `accelpool.decide.planning.kueue` does the work).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from accelpool_api.names import DNS1123_SUBDOMAIN
from accelpool_api.rules import Model

KUEUE_NAME_PATTERN = f"^{DNS1123_SUBDOMAIN}$"
"""What Kueue's CRDs require of a ResourceFlavor's and a ClusterQueue's name (a DNS-1123 subdomain)."""
KUEUE_NAME_MAX = 253

KueueName = Annotated[str, Field(min_length=1, max_length=KUEUE_NAME_MAX, pattern=KUEUE_NAME_PATTERN)]


class KueueSpec(Model):
    """Kueue integration: a ResourceFlavor for the pool and, optionally, a ClusterQueue quota that follows it."""

    enabled: bool = Field(
        False,
        description="Keep a kueue.x-k8s.io ResourceFlavor for this pool (node labels and tolerations from "
        "status.scheduling); deleted when the pool is deleted or this is turned off.",
    )
    resource_flavor: KueueName | None = Field(
        None,
        description="The ResourceFlavor's name (a DNS-1123 subdomain); the pool's name when unset.",
    )
    cluster_queue: KueueName | None = Field(
        None,
        description="A ClusterQueue (the user's: never created or deleted) whose nominal quota for the flavor "
        "accelpool keeps equal to the pool's healthy, requestable capacity (status.capacity.resources).",
    )

    def flavor_name(self, pool: str) -> str:
        """The ResourceFlavor's name: `resourceFlavor`, else the pool's name."""
        return self.resource_flavor or pool
