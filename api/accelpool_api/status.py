"""`ComputePoolStatus`: what the operator reports of a pool, written by the operator only."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator

from accelpool_api.kueue import KueueDeviceClassMapping
from accelpool_api.rules import Model

MAX_CONDITION_MESSAGE = 4096
"""The longest condition message accelpool writes; a longer one is cut and ends with `… (cut)`."""


class Condition(Model):
    """The standard metav1.Condition shape."""

    type: str = Field(
        description=(
            "Valid, NodesSelected, MigConfigured, DevicePluginConfigured, AgentReady, Healthy, DriversConsistent, "
            "Ready; KueueSynced for a pool with spec.kueue.enabled."
        )
    )
    status: Literal["True", "False", "Unknown"] = Field(
        description="Whether the condition holds; Unknown: not known yet."
    )
    reason: str = Field("", description="Why, in one CamelCase word (e.g. NotAdvertised, CircuitBreakerOpen).")
    message: str = Field("", description="What is wrong and what to do about it, for a person.")
    last_transition_time: str | None = Field(None, description="RFC 3339 time the status last changed.")
    observed_generation: int | None = Field(None, description="The spec generation the condition describes.")

    @field_validator("message")
    @classmethod
    def _bounded(cls, message: str) -> str:
        mark = " … (cut)"
        return message if len(message) <= MAX_CONDITION_MESSAGE else message[: MAX_CONDITION_MESSAGE - len(mark)] + mark


class NodeCounts(Model):
    """Member counts."""

    desired: int = Field(0, description="Member nodes wanted: spec.nodes.")
    members: int = Field(0, description="Nodes that carry the pool's label now.")
    ready: int = Field(
        0,
        description="Members that serve: node Ready, schedulable, healthy, not in burn-in, on the NVIDIA config.",
    )
    quarantined: int = Field(0, description="Members quarantined (tainted or cordoned by accelpool).")
    burn_in: int = Field(0, description="Members in burn-in (tainted accelpool.io/burn-in), failed ones included.")
    draining: int = Field(0, description="Quarantined members whose pods are being evicted (remediation ladder).")
    handed_off: int = Field(
        0, description="Quarantined members handed off to a break-fix step (label accelpool.io/remediation-action)."
    )
    summary: str = Field("0/0", description="members/desired, for `kubectl get`.")


class Capacity(Model):
    """What the pool really offers pods now, and the devices of members that cannot serve them.

    Serving members are Ready, schedulable, not quarantined, not in burn-in and, in an NVIDIA pool,
    serve exactly the pool's MIG layout and device-plugin config; the devices of the others are
    counted apart by why (a member counts under the first of quarantined, burn-in, unschedulable,
    unconfigured), so the five GPU counts add up to the devices on all members.
    """

    gpus: int = Field(0, description="Devices on serving members: what pods can use now.")
    memory_gib: int = Field(0, alias="memoryGiB", description="Device memory on serving members, GiB.")
    resources: dict[str, int] = Field(
        default_factory=dict,
        description="What pods can request on serving members (as their device plugins advertise), "
        "e.g. nvidia.com/mig-3g.40gb.",
    )
    measured_tflops: float | None = Field(
        None,
        alias="measuredTFLOPS",
        description="Sum of the serving members' latest matmul results in the policy's dtype.",
    )
    quarantined_gpus: int = Field(
        0,
        alias="quarantinedGPUs",
        description="Devices on quarantined members (tainted or cordoned by accelpool), and GPUs quarantined alone "
        "(a DeviceTaintRule, or NVIDIA's DRA driver's own NoSchedule or NoExecute device taint) on serving members.",
    )
    burn_in_gpus: int = Field(
        0, alias="burnInGPUs", description="Devices on members in burn-in that are not quarantined."
    )
    unschedulable_gpus: int = Field(
        0,
        alias="unschedulableGPUs",
        description="Devices on members that are NotReady or cordoned by someone else (and neither of the above).",
    )
    unconfigured_gpus: int = Field(
        0,
        alias="unconfiguredGPUs",
        description="Devices on members that could serve but do not serve the pool's NVIDIA config exactly yet "
        "(a MIG layout or a device-plugin config on its way, or a MIG manager that reported success for nothing).",
    )


class Toleration(Model):
    """A pod toleration, as in a pod spec."""

    key: str = Field(description="Taint key, e.g. accelpool.io/pool.")
    operator: Literal["Equal", "Exists"] = Field("Equal", description="Equal: key and value match; Exists: key only.")
    value: str | None = Field(None, description="Taint value (with operator Equal).")
    effect: str | None = Field(None, description="NoSchedule, PreferNoSchedule or NoExecute.")


class Scheduling(Model):
    """Copy into a pod spec to land on the pool."""

    node_selector: dict[str, str] = Field(default_factory=dict, description="Labels every member carries.")
    tolerations: list[Toleration] = Field(default_factory=list, description="Taints every member carries.")
    device_class_name: str | None = Field(
        None,
        description="allocation DRA: the DeviceClass a ResourceClaim's request names to get the pool's devices "
        "(device selectors cannot name nodes: the node selector and tolerations above are still needed).",
    )
    resource_claim_template: dict[str, Any] | None = Field(
        None,
        description="allocation DRA: the spec of a ResourceClaimTemplate asking for one of the pool's devices, to "
        "copy into the pods' namespace (set count for more).",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )
    extended_resource_name: str | None = Field(
        None,
        description="allocation DRA: the extended resource a pod may request instead of a claim "
        "(deviceclass.resource.kubernetes.io/<class>, Kubernetes 1.37+); the claim the scheduler makes for it "
        "tolerates no device taint.",
    )


class QuarantineScope(Model):
    """How a bad device takes the pool's capacity out of service: the node, or the GPU alone."""

    scope: Literal["Node", "GPU"] = Field(
        "Node", description="GPU: a DeviceTaintRule on the bad GPU; Node: the member is quarantined."
    )
    reason: str = Field(
        "DevicePlugin",
        description="Why: DeviceTaintRules (GPU scope), DevicePlugin (the device plugin cannot withhold one GPU), "
        "DeviceTaintRuleNotServed, OptInRequired (Kubernetes 1.36) or Disabled (the operator's setting).",
    )
    message: str = Field("", description="The same, for a person, with what would change it.")


class DeviceQuarantine(Model):
    """One GPU out of service on a member that keeps serving its others."""

    node: str = Field(description="The member.")
    device: str = Field(description="The device's name in the node's ResourceSlice (e.g. gpu-3).")
    uuid: str = Field(description="The GPU's UUID (a MIG device's parent).")
    reason: str = Field(description="Why, e.g. XidError79, or the driver's taint gpu.nvidia.com/xid=79.")
    source: Literal["agent", "driver"] = Field(
        "agent",
        description="agent: accelpool's DeviceTaintRule, lifted after the hold-down; driver: NVIDIA's own "
        "device taint, cleared only when its kubelet plugin restarts.",
    )
    since: str | None = Field(None, description="RFC 3339 time the quarantine began.")
    healthy_since: str | None = Field(
        None, description="RFC 3339 time the agent first reported the GPU healthy again (the hold-down counts from it)."
    )


class ComputeDomainStatus(Model):
    """The pool's ComputeDomain (spec.nvlink.computeDomain), as NVIDIA's controller reports it."""

    name: str = Field(description="The ComputeDomain's name (the pool's).")
    namespace: str = Field(description="Its namespace (spec.nvlink.computeDomain.namespace).")
    status: str | None = Field(None, description="Ready or NotReady (its status.status); None: not yet reported.")
    channel_template: str | None = Field(
        None, description="The ResourceClaimTemplate of IMEX channels pods name (created by NVIDIA's controller)."
    )


class DraStatus(Model):
    """allocation DRA: the pool's DRA objects and what the ResourceSlices say."""

    device_class: str = Field(description="The DeviceClass accelpool owns for the pool.")
    devices: int = Field(0, description="The pool's devices on members, as their ResourceSlices publish them.")
    members_without_slices: list[str] = Field(
        default_factory=list,
        description="Members whose ResourceSlices (driver gpu.nvidia.com, pool = node name) are missing or "
        "incomplete: NVIDIA's DRA kubelet plugin does not run there yet.",
    )
    members_awaiting_plugin_restart: list[str] = Field(
        default_factory=list,
        description="Static MIG: members whose MIG layout is applied but whose ResourceSlices do not show it yet "
        "(NVIDIA's kubelet plugin reads MIG devices when it starts; the operator restarts it where the chart's "
        "dra.kubeletPluginNamespace is set).",
    )
    quarantined_devices: list[DeviceQuarantine] = Field(
        default_factory=list, description="GPUs out of service on members that keep serving (at most 64)."
    )
    compute_domain: ComputeDomainStatus | None = Field(None, description="spec.nvlink.computeDomain: its state.")


class Member(Model):
    """One member node as the operator sees it."""

    node: str = Field(description="The node's name.")
    gpus: int = Field(0, description="Devices the node has: whole GPUs or accelerators, before MIG or sharing.")
    health: Literal["Healthy", "Unhealthy", "Unknown", "Quarantined", "BurnIn"] = Field(
        "Unknown",
        description="Quarantined, Unhealthy, BurnIn (joined and not yet passed burn-in: reason BurnInPending or "
        "BurnInFailed), Healthy or Unknown, the first that applies.",
    )
    reason: str | None = Field(None, description="Why the node is not Healthy.")
    since: str | None = Field(None, description="RFC 3339 time the health last changed.")
    mig: str | None = Field(None, description="nvidia.com/mig.config.state: pending, success, failed.")
    tflops: float | None = Field(None, description="The node's latest matmul result, summed over its GPUs.")
    step: Literal["quarantined", "draining", "drained", "handed-off"] | None = Field(
        None, description="Where a quarantined member stands on the remediation ladder."
    )
    action: str | None = Field(
        None,
        description="A quarantined member's recommended action: none, drain, reset-gpu, restart-os or "
        "service-required (what a hand-off asks for).",
    )


class KueueStatus(Model):
    """What accelpool keeps in Kueue for the pool (spec.kueue.enabled)."""

    resource_flavor: str = Field(description="The kueue.x-k8s.io ResourceFlavor accelpool keeps for the pool.")
    cluster_queue: str | None = Field(None, description="The ClusterQueue whose quota for the flavor follows the pool.")
    nominal_quota: dict[str, int] = Field(
        default_factory=dict,
        description="The nominal quota per resource the flavor has in the ClusterQueue: the pool's healthy, "
        "requestable capacity (capacity.resources).",
    )
    device_class_mapping: KueueDeviceClassMapping | None = Field(
        None,
        description="allocation DRA: the resources.deviceClassMappings entry Kueue's Configuration "
        "(config.kueue.x-k8s.io/v1beta2) needs so that claims for the pool's DeviceClass count against the "
        "quota; Kueue reads it only when it starts.",
    )


MAX_STATUS_MEMBERS = 100


class ComputePoolStatus(Model):
    """Written by the operator only."""

    observed_generation: int | None = Field(None, description="The spec generation this status describes.")
    phase: Literal["Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed"] = Field(
        "Pending",
        description="Pending (no members yet), Provisioning (a Karpenter pool short of nodes), Degraded (members "
        "unhealthy, quarantined, not ready or too few), Configuring (MIG, device plugin, agents or burn-in not there "
        "yet), Ready, or Failed (an invalid spec): the first that applies.",
    )
    accelerator: str | None = Field(None, description="The resolved accelerator, e.g. 'H100-80GB x8'.")
    selector: str | None = Field(None, description="Label selector of member nodes (for the scale subresource).")
    nodes: NodeCounts = Field(default_factory=NodeCounts)
    capacity: Capacity = Field(default_factory=Capacity)
    scheduling: Scheduling = Field(default_factory=Scheduling)
    members: list[Member] = Field(
        default_factory=list,
        max_length=MAX_STATUS_MEMBERS,
        description=(
            f"At most {MAX_STATUS_MEMBERS} members, by name: those that are not Healthy before the others when there "
            "are more (membersOmitted counts the rest; nodes counts them all)."
        ),
    )
    members_omitted: int | None = Field(
        None,
        ge=0,
        description=f"Members left out of members (which lists at most {MAX_STATUS_MEMBERS}); absent when none are.",
    )
    conditions: list[Condition] = Field(
        default_factory=list, description="The standard conditions; Ready sums them up (see the Condition type)."
    )
    kueue: KueueStatus | None = Field(None, description="The pool's Kueue objects (spec.kueue.enabled).")
    quarantine: QuarantineScope | None = Field(
        None, description="Whether a bad GPU quarantines its node or only itself, and why."
    )
    dra: DraStatus | None = Field(None, description="allocation DRA: the DeviceClass, slices and quarantined GPUs.")


_STATUS_FIELDS = frozenset((info.alias or name) for name, info in ComputePoolStatus.model_fields.items()) | frozenset(
    ComputePoolStatus.model_fields
)


def read_status(raw: Any) -> ComputePoolStatus | None:
    """A stored pool's `status` as the model: the fields this version knows, so that a newer operator's
    additions do not break an older reader; None when there is no status yet or it cannot be read. The
    operator reads its previous statuses with it, the Python API the statuses it waits on."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    try:
        return ComputePoolStatus.model_validate({k: v for k, v in raw.items() if k in _STATUS_FIELDS})
    except ValidationError:
        return None
