"""What the device agent and the operator say to each other, in one place.

The operator renders an `AgentConfig` into each pool's agent DaemonSet; the agent reports
through the node condition `AcceleratorHealthy` and the compact node annotation
`accelpool.io/health` (a `HealthReport`), which the operator reads for quarantine decisions
and the pool's status. Pure data: no I/O, importable by both sides.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Literal, get_args

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

CONDITION_TYPE = "AcceleratorHealthy"
HEALTH_ANNOTATION = "accelpool.io/health"
POOL_LABEL = "accelpool.io/pool"
"""The operator's membership label on a node; an agent reports only while its node carries its pool's."""
CONFIG_ENV = "ACCELPOOL_AGENT_CONFIG"
"""Environment variable holding the AgentConfig as JSON (the DaemonSet sets it)."""
CHECK_REQUEST_ANNOTATION = "accelpool.io/check-requested"
"""On a Node (or a ComputePool, copied to its members by the operator): an opaque token asking the
node's agent for an immediate full check cycle; the agent answers with `HealthReport.check_request`."""
AgentBackend = Literal["nvml", "amdsmi", "neuron", "tpu", "cuda", "cpu", "fake"]
"""The agent's `--backend` choices: what the operator may render into a DaemonSet and the agent accepts."""
AGENT_BACKENDS: tuple[str, ...] = get_args(AgentBackend)
VENDOR_BACKENDS: Mapping[str, str] = {"nvidia": "nvml", "amd": "amdsmi", "aws": "neuron", "google": "tpu"}
"""Each catalog vendor (`catalog.Vendor` value) → the backend that checks its devices."""
MAX_FINDINGS = 16
"""Findings kept in the health annotation (the condition message summarises the rest)."""


class _Wire(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True)


class MatmulPolicy(_Wire):
    dtype: str = Field("bf16", description="Data type of the throughput check: fp32, tf32, fp16 or bf16.")
    min_efficiency: float = Field(
        0.6, ge=0, le=1, description="Fail below this fraction of the catalog's dense peak TFLOPS."
    )


class AgentConfig(_Wire):
    """The agent's settings, rendered by the operator from a ComputePool (or given by hand)."""

    pool: str | None = Field(None, description="The ComputePool the node belongs to.")
    accelerator: str | None = Field(None, description="Catalog name of the pool's accelerator.")
    expected_tflops: dict[str, float] = Field(
        default_factory=dict, description="Dense peak TFLOPS per dtype (fp32, tf32, fp16, bf16, fp8)."
    )
    expected_bandwidth_gbps: float | None = Field(None, description="Memory bandwidth in GB/s.")
    interval_seconds: float = Field(900, gt=0, description="Seconds between full check cycles.")
    matmul: MatmulPolicy = Field(default_factory=MatmulPolicy)
    check_timeout_seconds: float = Field(120, gt=0, description="A compute check running longer is killed.")
    force: bool = Field(False, description="Run compute checks even on GPUs that have compute processes.")
    heartbeat_seconds: float = Field(
        300, gt=0, description="Rewrite the unchanged node condition this often, as a liveness signal."
    )
    expected_gpus: int | None = Field(
        None, ge=0, description="Devices a member node should have; fewer makes the node Unhealthy (GpuMissing)."
    )
    min_bandwidth_efficiency: float = Field(
        0.6, ge=0, le=1, description="Fail the bandwidth check below this fraction of the catalog's memory bandwidth."
    )


class HealthStatus(enum.StrEnum):
    HEALTHY = "Healthy"
    UNHEALTHY = "Unhealthy"
    UNKNOWN = "Unknown"

    @property
    def condition_status(self) -> str:
        return {"Healthy": "True", "Unhealthy": "False", "Unknown": "Unknown"}[self.value]


class Severity(enum.StrEnum):
    """How bad one check's finding is, in NVIDIA Health Validation's terms."""

    PASS = "PASS"
    INFO = "INFO"
    """Passed, with something worth knowing (an informational XID, a note)."""
    WARNING = "WARNING"
    CRITICAL = "CRITICAL"
    """The node must not run work: it fails `AcceleratorHealthy`."""
    UNKNOWN = "UNKNOWN"
    """The check could not run or its data is not available."""


class Action(enum.StrEnum):
    """What a finding asks for, in the order of NVIDIA Health Validation's action ladder.

    Each step includes the ones before it: a GPU reset needs the workloads drained first, an OS
    restart resets every GPU, and service (a field engineer, an RMA) comes after all of them.
    """

    NONE = "none"
    DRAIN = "drain"
    """Move the workloads off; the node needs nothing else (e.g. after an application-caused fault)."""
    RESET_GPU = "reset-gpu"
    RESTART_OS = "restart-os"
    SERVICE_REQUIRED = "service-required"

    @property
    def rank(self) -> int:
        """0 (none) to 4 (service-required): the higher, the further up the ladder."""
        return list(Action).index(self)


def strongest(actions: Iterable[Action]) -> Action:
    """The action furthest up the ladder (`none` for no actions)."""
    return max(actions, key=lambda action: action.rank, default=Action.NONE)


class Finding(_Wire):
    """One check that did not simply pass, as the health annotation lists it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    check: str = Field(description="The check's name, e.g. xid, nvlink, pcie_link, infiniband.")
    severity: Severity
    reason: str = Field(description="CamelCase cause, e.g. XidError79, NvlinkDown, PcieLinkDegraded.")
    action: Action = Field(Action.NONE, description="What the finding asks for (the ladder's step).")
    gpus: list[int] = Field(default_factory=list, description="Indexes of the devices it concerns (none: the node).")
    detail: str = Field("", max_length=200, description="A short, stable description (no measured numbers).")


class BadDevice(_Wire):
    """One failing device, named so the operator can find it in NVIDIA's DRA ResourceSlices (by UUID)."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    index: int = Field(ge=0, description="The device's index, as `bad_gpus` and the findings' `gpus` give it.")
    uuid: str = Field(max_length=96, description="The device's UUID (NVML: GPU-...; the MIG parent for MIG).")
    reason: str = Field("", max_length=64, description="CamelCase cause of its worst critical finding.")


class CheckVerdict(_Wire):
    """The last verdict of one compute check on one GPU, kept on the node across agent restarts."""

    status: Literal["pass", "warn", "fail"]
    reason: str = Field(description="CamelCase cause, e.g. ResultsCorrect, WrongResults, SlowMatmul.")
    since: datetime | None = Field(None, description="When this status and reason were first reached.")


class HealthReport(_Wire):
    """The node's verdict, written compactly to the `accelpool.io/health` annotation.

    Every field but `status` and `reason` is optional, so annotations written by older agents
    still parse; fields this version does not know are ignored, so newer agents' ones do too.
    """

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True)

    status: HealthStatus
    reason: str = Field(description="CamelCase cause, e.g. AllChecksPassed, XidError79, SlowMatmul.")
    message: str = ""
    gpus: int = Field(0, ge=0, description="Devices the agent sees.")
    bad_gpus: list[int] = Field(default_factory=list, description="Indexes of failing devices.")
    bad_devices: list[BadDevice] = Field(
        default_factory=list,
        max_length=64,
        description="The failing devices with their UUIDs (per-GPU quarantine); older agents leave it out.",
    )
    tflops: float | None = Field(None, description="Sum of the node's latest matmul results.")
    dtype: str | None = Field(None, description="Data type the TFLOPS were measured in.")
    checked_at: datetime | None = Field(None, description="When the last full cycle ended.")
    pool: str | None = Field(None, description="The ComputePool the writing agent runs for (AgentConfig.pool).")
    agent: str | None = Field(None, description="The writer: the agent's pod name ($POD_NAME), else its node name.")
    verdicts: dict[str, dict[str, CheckVerdict]] = Field(
        default_factory=dict,
        description="GPU UUID → compute check (sanity, correctness, matmul, bandwidth) → its last verdict; "
        "read back at agent start so a failure stands until a later check of the same kind passes.",
    )
    action: Action = Field(
        Action.NONE, description="The node's recommended action: the strongest of its critical findings' actions."
    )
    findings: list[Finding] = Field(
        default_factory=list,
        max_length=MAX_FINDINGS,
        description="Checks that did not simply pass (worst first, at most 16), with severity and action.",
    )
    complete: bool = Field(
        False, description="A full check cycle (compute checks included) has finished since the agent started."
    )
    driver_version: str | None = Field(None, description="The accelerator driver's version, e.g. 550.54.15.")
    cuda_version: str | None = Field(None, description="The CUDA version the driver supports, e.g. 12.4.")
    check_request: str | None = Field(
        None,
        description=f"The last `{CHECK_REQUEST_ANNOTATION}` token this report answers: written after the full "
        "cycle that the request started.",
    )

    def to_annotation(self) -> str:
        """Compact JSON without the timestamp noise that would force a rewrite on every cycle."""
        data = self.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude_defaults=True, exclude={"checked_at"}
        )
        data["status"] = self.status.value
        data["reason"] = self.reason
        return json.dumps(data, separators=(",", ":"), sort_keys=True)

    @classmethod
    def from_annotation(cls, text: str) -> HealthReport:
        return cls.model_validate_json(text)

    def gpu_scoped(self) -> bool:
        """Whether every critical finding names devices, and every named device has a UUID: the report can be
        answered by taking those devices out of service alone (a DeviceTaintRule each) instead of the node."""
        critical = [f for f in self.findings if f.severity is Severity.CRITICAL]
        named = {d.index for d in self.bad_devices}
        return (
            bool(self.bad_devices)
            and bool(critical)
            and all(f.gpus and set(f.gpus) <= named for f in critical)
            and set(self.bad_gpus) <= named
        )


MAX_CHECK_REQUEST_LENGTH = 63
"""The longest `accelpool.io/check-requested` token an agent answers (a label value's length)."""


def check_request_problem(token: str) -> str | None:
    """Why `token` cannot be a check request, naming the value and what is valid (None: it can be one).
    Any string of 1 to `MAX_CHECK_REQUEST_LENGTH` characters is a token; the empty string asks for nothing."""
    if not token or len(token) > MAX_CHECK_REQUEST_LENGTH:
        return (
            f"{CHECK_REQUEST_ANNOTATION}: invalid value {token!r} ({len(token)} characters): "
            f"a check request is a token of 1 to {MAX_CHECK_REQUEST_LENGTH} characters"
        )
    return None
