"""`KueueSpec`: whether the operator keeps a Kueue ResourceFlavor for the pool, and which ClusterQueue's
quota follows the pool's healthy capacity (off by default; `accelpool.decide.kueue` does the work).

For a DRA pool, `dra_quota_resource` names the quota resource its devices count against and
`KueueDeviceClassMapping` is the entry Kueue's own Configuration needs for it (`status.kueue.deviceClassMapping`).
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import Field

from accelpool_api.names import DNS1123_SUBDOMAIN, QUALIFIED_NAME
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
        "accelpool keeps equal to the pool's healthy, requestable capacity (status.capacity.resources; for "
        "allocation DRA, the pool's devices as deviceclass.resource.kubernetes.io/<DeviceClass>, which Kueue "
        "counts once its Configuration maps the class: status.kueue.deviceClassMapping).",
    )

    def flavor_name(self, pool: str) -> str:
        """The ResourceFlavor's name: `resourceFlavor`, else the pool's name."""
        return self.resource_flavor or pool


DRA_QUOTA_PREFIX = "deviceclass.resource.kubernetes.io/"
"""Kubernetes' implicit extended resource of every DeviceClass (`deviceclass.resource.kubernetes.io/<class>`,
KEP-5004 DRA extended resources, beta on 1.36, GA on 1.37)."""
LABEL_KEY_NAME_MAX = 63
"""The name part of a label key (after an optional `prefix/`) has at most 63 characters."""


def dra_quota_resource(device_class: str) -> str | None:
    """The Kueue quota resource a DRA pool's devices count against: `deviceclass.resource.kubernetes.io/<class>`.

    The one definition of the name. It is the extended resource Kubernetes serves for the class, so a pod
    asking for the pool's devices either way draws on one quota: a ResourceClaimTemplate naming the class is
    charged to the name `resources.deviceClassMappings` maps the class to (kubernetes-sigs/kueue
    pkg/dra/claims.go `countDevicesPerClass`: the request's `count`), and a request for the implicit extended
    resource is charged under its own name (Kueue resolves extended resources only through a class's explicit
    `spec.extendedResourceName`, pkg/dra/extended_resources.go `resolveQuotaKey`, so it counts this one as a
    plain resource).

    None when Kueue cannot map the class: it takes mapping names, device class names and a ClusterQueue's
    covered resources only as label keys (pkg/config/validation.go `validateDeviceClassMappings`,
    pkg/webhooks/common.go `validateResourceName`: `content.IsLabelKey`), so a class name without a `/` must
    be a label key's name part, at most 63 characters. That is also when a pod can request the implicit
    extended resource (k8s.io/api resource/v1 `ResourceDeviceClassPrefix`: a longer class needs an explicit
    `extendedResourceName`).
    """
    if len(device_class) > LABEL_KEY_NAME_MAX or not re.fullmatch(QUALIFIED_NAME, device_class):
        return None
    return DRA_QUOTA_PREFIX + device_class


class KueueDeviceClassMapping(Model):
    """One entry of Kueue's `resources.deviceClassMappings` (its Configuration, `config.kueue.x-k8s.io/v1beta2`)."""

    name: str = Field(
        description="The quota resource the class's devices count against: deviceclass.resource.kubernetes.io/"
        "<class>, the resource the ClusterQueue's nominalQuota names.",
    )
    device_class_names: list[str] = Field(description="The pool's DeviceClass.")

    @classmethod
    def for_device_class(cls, device_class: str) -> KueueDeviceClassMapping | None:
        """The entry for a pool's DeviceClass; None when Kueue cannot map it (`dra_quota_resource`)."""
        name = dra_quota_resource(device_class)
        return None if name is None else cls(name=name, device_class_names=[device_class])
