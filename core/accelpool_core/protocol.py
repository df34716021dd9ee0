"""What the device agent and the operator say to each other, in one place.

The operator renders an `AgentConfig` into each pool's agent DaemonSet; the agent reports
through the node condition `AcceleratorHealthy` and the compact node annotation
`accelpool.io/health` (a `HealthReport`), which the operator reads for quarantine decisions
and the pool's status. Pure data: no I/O, importable by both sides.
"""

from __future__ import annotations

import enum
import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel

CONDITION_TYPE = "AcceleratorHealthy"
HEALTH_ANNOTATION = "accelpool.io/health"
POOL_LABEL = "accelpool.io/pool"
"""The operator's membership label on a node; an agent reports only while its node carries its pool's."""
CONFIG_ENV = "ACCELPOOL_AGENT_CONFIG"
"""Environment variable holding the AgentConfig as JSON (the DaemonSet sets it)."""


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
