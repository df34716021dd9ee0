"""`ComputePoolSpec`: what a platform engineer asks for, checked structurally and against the catalog.

The spec's own fields and cross-field rules are here; its parts are in `accelpool_api.devices`
(accelerator, MIG, sharing) and `accelpool_api.health`; the catalog-dependent checks are in
`accelpool_api.resolution`, which the spec runs after its fields unless validated with the
`structural_only` context.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from accelpool_api.devices import AcceleratorRequest, MigSpec, SharingSpec
from accelpool_api.health import HealthSpec
from accelpool_api.kueue import KueueSpec
from accelpool_api.resolution import ResolvedAccelerator, max_instances_that_fit, resolve_accelerator, spec_problems
from accelpool_api.rules import Model, Rule, RuledModel

MAX_NODES = 10_000


class ProvisionerSpec(Model):
    """Where member nodes come from."""

    type: Literal["static", "karpenter"] = Field(
        "static", description="static claims existing nodes; karpenter renders a karpenter.sh/v1 NodePool."
    )
    node_class: str = Field(
        "default",
        min_length=1,
        max_length=253,
        description="karpenter only: the EC2NodeClass the NodePool's nodes use.",
    )


class ComputeDomainSpec(RuledModel):
    """A ComputeDomain (`resource.nvidia.com/v1beta1`, NVIDIA's DRA driver) the operator keeps for the pool."""

    namespace: str = Field(
        min_length=1,
        max_length=63,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        description=(
            "Namespace of the ComputeDomain and of the channel ResourceClaimTemplate NVIDIA's controller makes "
            "for it (ComputeDomains are namespaced): where the pool's multi-node jobs run."
        ),
    )


class NvlinkSpec(RuledModel):
    """Keep the pool inside one NVLink domain (GB200/GB300 NVL72 racks, HGX with NVSwitch fabrics)."""

    same_clique: bool = Field(
        True,
        description=(
            "Members share one nvidia.com/gpu.clique (GPU Feature Discovery's label: <fabric cluster UUID>.<clique "
            "ID>): the operator claims nodes of a single clique, and replaces a quarantined member from the same "
            "clique. Nodes without the label are never claimed."
        ),
    )
    compute_domain: ComputeDomainSpec | None = Field(
        None,
        description=(
            "allocation DRA only: a ComputeDomain named after the pool, owned by it, whose IMEX channels give the "
            "pool's pods multi-node NVLink memory sharing; its status is copied to status.dra.computeDomain."
        ),
    )


class ComputePoolSpec(RuledModel):
    """What a platform engineer asks for: an accelerator, a node count, a layout, a health policy."""

    accelerator: AcceleratorRequest = Field(
        description=(
            "The accelerator, as a string NAME[:COUNT] ('H100', 'H100:8', 'a100-80gb:4') "
            "or typed {name, memory, formFactor, count}."
        ),
        json_schema_extra={"x-accelpool-union": "accelerator"},
    )
    nodes: int = Field(
        1,
        ge=0,
        le=MAX_NODES,
        description=(
            "Desired member nodes; the fewest for provisioner karpenter, which may grow the pool to maxNodes. "
            "`kubectl scale cpool NAME --replicas=N` sets it."
        ),
    )
    max_nodes: int | None = Field(
        None,
        ge=1,
        le=MAX_NODES,
        description="provisioner karpenter only: the most member nodes (the NodePool's limits); nodes when unset.",
    )
    mig: MigSpec | None = Field(None, description="MIG layout of every GPU (MIG-capable NVIDIA GPUs only).")
    sharing: SharingSpec | None = Field(None, description="Time-slicing or MPS (exclusive with mig).")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Extra label constraints on member nodes.")
    dedicated: bool = Field(True, description="Taint members accelpool.io/pool=<name>:NoSchedule.")
    provisioner: ProvisionerSpec = Field(default_factory=ProvisionerSpec)
    allocation: Literal["DevicePlugin", "DRA"] = Field(
        "DevicePlugin",
        description=(
            "Who hands the GPUs to pods. DevicePlugin: NVIDIA's device plugin (nvidia.com/gpu resources, "
            "configured through the device-plugin ConfigMap). DRA: NVIDIA's DRA driver (gpu.nvidia.com "
            "ResourceSlices; the operator keeps the device plugin off the members with the GPU Operator's "
            "nvidia.com/gpu.deploy.device-plugin=false, and owns a DeviceClass <pool>.accelpool.io); a bad GPU "
            "is then quarantined alone with a DeviceTaintRule where the cluster serves them. NVIDIA GPUs only."
        ),
    )
    nvlink: NvlinkSpec | None = Field(None, description="Keep the members in one NVLink domain (clique).")
    health: HealthSpec = Field(default_factory=HealthSpec)
    kueue: KueueSpec | None = Field(
        None, description="Kueue integration (off by default): a ResourceFlavor and a ClusterQueue quota."
    )

    @field_validator("accelerator", mode="before")
    @classmethod
    def _accelerator_string(cls, value: Any) -> Any:
        return AcceleratorRequest.parse(value) if isinstance(value, str) else value

    # MPS on MIG is refused by the device plugin under any MIG strategy, not only mixed as the shared
    # reference says (NVIDIA/k8s-device-plugin internal/plugin/mps.go getMPSOptions: "sharing using MPS
    # is not supported for MIG devices"); the code wins.
    rules = (
        Rule(
            "!(has(self.mig) && has(self.sharing))",
            lambda s: "mig" not in s or "sharing" not in s,
            "mig and sharing are mutually exclusive: partition GPUs or share them, not both "
            "(NVIDIA's device plugin refuses MPS on MIG devices; time-slicing MIG devices is not offered)",
        ),
        Rule(
            "!has(self.nvlink) || !has(self.nvlink.computeDomain)"
            " || (has(self.allocation) && self.allocation == 'DRA')",
            lambda s: "computeDomain" not in (s.get("nvlink") or {}) or s.get("allocation", "DevicePlugin") == "DRA",
            "nvlink.computeDomain needs allocation DRA: ComputeDomains are served by NVIDIA's DRA driver",
            field="nvlink",
        ),
        Rule(
            "!has(self.maxNodes) || (has(self.provisioner) && self.provisioner.type == 'karpenter')",
            lambda s: "maxNodes" not in s or (s.get("provisioner") or {}).get("type", "static") == "karpenter",
            "maxNodes needs provisioner type karpenter; a static pool claims exactly nodes nodes",
            field="maxNodes",
        ),
        Rule(
            "!has(self.maxNodes) || self.maxNodes >= (has(self.nodes) ? self.nodes : 1)",
            lambda s: "maxNodes" not in s or s["maxNodes"] >= s.get("nodes", 1),
            "maxNodes must be at least nodes (the fewest member nodes)",
            field="maxNodes",
        ),
    )

    @model_validator(mode="after")
    def _catalog(self, info: ValidationInfo) -> ComputePoolSpec:
        if not (info.context or {}).get("structural_only"):
            problems = spec_problems(self)
            if problems:
                raise ValueError("; ".join(str(p) for p in problems))
        return self

    @property
    def most_nodes(self) -> int:
        """The pool's ceiling: maxNodes for a Karpenter pool that sets it, else nodes."""
        return self.max_nodes if self.max_nodes is not None else self.nodes

    def resolve(self) -> ResolvedAccelerator:
        """The catalog entry this spec asks for; raises ValueError when spec_problems would report."""
        resolved, problems = resolve_accelerator(self.accelerator)
        if resolved is None:
            raise ValueError("; ".join(str(p) for p in problems))
        return resolved

    def mig_layout(self) -> list[str]:
        """The per-GPU MIG layout, with the `profile` shorthand expanded. Empty without MIG."""
        if self.mig is None:
            return []
        if self.mig.profiles is not None:
            return list(self.mig.profiles)
        assert self.mig.profile is not None
        entry = self.resolve().entry
        profile = entry.mig_profile(self.mig.profile)
        if profile is None:
            return [self.mig.profile]
        return [profile.name] * max_instances_that_fit(entry, profile)

    def mig_strategy(self) -> Literal["none", "single", "mixed"]:
        if self.mig is None:
            return "none"
        if self.mig.strategy is not None:
            return self.mig.strategy
        return "single" if len(set(self.mig_layout())) == 1 else "mixed"
