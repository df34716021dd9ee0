"""What a DRA pool (`spec.allocation: DRA`) puts in a ClusterQueue, and what Kueue's own Configuration needs for it.

`accelpool.decide.kueue.plan` calls `dra_quota(status)` for each asking DRA pool, on its planned status:

- **The quota resource** is `deviceclass.resource.kubernetes.io/<the pool's DeviceClass>`
  (`accelpool_api.dra_quota_resource`, which says why), with nominal quota = the devices the class can
  allocate now: the sum of `status.capacity.resources`, which for a DRA pool counts the class's devices
  (whole GPUs, or MIG devices of the pool's profiles) on serving members, as their ResourceSlices publish
  them, less the GPUs quarantined alone (`accelpool.decide.dra.plan`, under that same name). Time-slicing
  and MPS share one device among the pods of one claim (NVIDIA's DRA driver: no node-wide replicas), so a
  DRA pool's quota counts devices, never replicas.
- **The mapping**: Kueue charges a claim's devices only to a resource its Configuration
  (`config.kueue.x-k8s.io/v1beta2`) maps the claim's DeviceClass to, `resources.deviceClassMappings`,
  which it reads once, when it starts; a claim of an unmapped class makes its workload inadmissible
  (kubernetes-sigs/kueue site/content/en/docs/tasks/manage/setup_dra.md). accelpool cannot write that
  Configuration (a ConfigMap of Kueue's installation, read at start), so the entry goes to
  `status.kueue.deviceClassMapping` and the KueueSynced message, for whoever installs Kueue.
- **Why no quota is kept**: the DeviceClass is not in the status yet (`DeviceClassPending`), or its name
  cannot be mapped by Kueue (`DeviceClassNotMappable`: longer than a label key's 63-character name part).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import accelpool_api as api
from accelpool.decide.poolstatus import Finding
from accelpool_api.kueue import LABEL_KEY_NAME_MAX

CONFIGURATION = "config.kueue.x-k8s.io/v1beta2"
"""The apiVersion of Kueue's Configuration (kubernetes-sigs/kueue apis/config/v1beta2)."""


@dataclass(frozen=True)
class DraQuota:
    """A DRA pool's quota in its ClusterQueue, the Kueue mapping it needs, or why there is none."""

    device_class: str | None
    mapping: api.KueueDeviceClassMapping | None = None
    quota: dict[str, int] = field(default_factory=dict)
    problem: Finding | None = None

    def explained(self) -> str:
        """What Kueue's Configuration needs, for a condition message ('' without a mapping)."""
        if self.mapping is None:
            return ""
        return (
            f"; Kueue counts the pool's devices once its Configuration ({CONFIGURATION}) has the "
            f"resources.deviceClassMappings entry {{name: {self.mapping.name}, deviceClassNames: "
            f"[{self.device_class}]}} (status.kueue.deviceClassMapping), which Kueue reads only when it starts: "
            "restart kueue-controller-manager after adding it"
        )


def device_class(status: api.ComputePoolStatus) -> str | None:
    """The pool's DeviceClass as its status names it (`status.dra.deviceClass`, else `status.scheduling`)."""
    if status.dra is not None:
        return status.dra.device_class
    return status.scheduling.device_class_name


def dra_quota(status: api.ComputePoolStatus) -> DraQuota:
    """The DRA pool's quota (quota resource → devices), its mapping, or the problem (see the module docstring)."""
    name = device_class(status)
    if name is None:
        return DraQuota(
            None,
            problem=Finding(
                False,
                "DeviceClassPending",
                "the pool's DeviceClass is not in its status yet (status.dra.deviceClass): accelpool sets the "
                "ClusterQueue's quota for its devices once it is",
            ),
        )
    mapping = api.KueueDeviceClassMapping.for_device_class(name)
    if mapping is None:
        return DraQuota(
            name,
            problem=Finding(
                False,
                "DeviceClassNotMappable",
                f"DeviceClass {name} cannot be mapped by Kueue: resources.deviceClassMappings takes device class "
                f"and quota names that are label keys (a name without '/' of at most {LABEL_KEY_NAME_MAX} "
                "characters); no quota is kept for the pool's devices",
            ),
        )
    return DraQuota(name, mapping, {mapping.name: sum(status.capacity.resources.values())})
