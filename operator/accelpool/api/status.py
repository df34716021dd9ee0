"""`ComputePoolStatus`: what the operator reports of a pool, written by the operator only.

Pure: no I/O.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from accelpool.api.rules import Model


class Condition(Model):
    """The standard metav1.Condition shape."""

    type: str = Field(
        description="Valid, NodesSelected, MigConfigured, DevicePluginConfigured, AgentReady, Healthy, Ready."
    )
    status: Literal["True", "False", "Unknown"]
    reason: str = ""
    message: str = ""
    last_transition_time: str | None = Field(None, description="RFC 3339 time the status last changed.")
    observed_generation: int | None = Field(None, description="The spec generation the condition describes.")


class NodeCounts(Model):
    """Member counts."""

    desired: int = 0
    members: int = 0
    ready: int = 0
    quarantined: int = 0
    summary: str = Field("0/0", description="members/desired, for `kubectl get`.")


class Capacity(Model):
    """What the pool really offers now."""

    gpus: int = Field(0, description="Devices on member nodes.")
    memory_gib: int = Field(0, alias="memoryGiB", description="Device memory on member nodes, GiB.")
    resources: dict[str, int] = Field(
        default_factory=dict, description="What pods can request, e.g. nvidia.com/mig-3g.40gb."
    )
    measured_tflops: float | None = Field(
        None, alias="measuredTFLOPS", description="Sum of the latest matmul results in the policy's dtype."
    )


class Toleration(Model):
    """A pod toleration, as in a pod spec."""

    key: str
    operator: Literal["Equal", "Exists"] = "Equal"
    value: str | None = Field(None, description="Taint value (with operator Equal).")
    effect: str | None = Field(None, description="NoSchedule, PreferNoSchedule or NoExecute.")


class Scheduling(Model):
    """Copy into a pod spec to land on the pool."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="Labels every member carries.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints every member carries.")


class Member(Model):
    """One member node as the operator sees it."""

    node: str
    gpus: int = 0
    health: Literal["Healthy", "Unhealthy", "Unknown", "Quarantined"] = "Unknown"
    reason: str | None = Field(None, description="Why the node is not Healthy.")
    since: str | None = Field(None, description="RFC 3339 time the health last changed.")
    mig: str | None = Field(None, description="nvidia.com/mig.config.state: pending, success, failed.")
    tflops: float | None = Field(None, description="The node's latest matmul result, summed over its GPUs.")


MAX_STATUS_MEMBERS = 100


class ComputePoolStatus(Model):
    """Written by the operator only."""

    observed_generation: int | None = Field(None, description="The spec generation this status describes.")
    phase: Literal["Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed"] = "Pending"
    accelerator: str | None = Field(None, description="The resolved accelerator, e.g. 'H100-80GB x8'.")
    selector: str | None = Field(None, description="Label selector of member nodes (for the scale subresource).")
    nodes: NodeCounts = Field(default_factory=NodeCounts)
    capacity: Capacity = Field(default_factory=Capacity)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    members: list[Member] = Field(
        default_factory=list,
        max_length=MAX_STATUS_MEMBERS,
        description="The first 100 members; all are counted in nodes.",
    )
    conditions: list[Condition] = Field(default_factory=list)
