"""Checks and their results: what a compute child measures and what the rules conclude.

`Check` names every check the agent runs (in the order that decides a GPU's headline reason);
a compute child reports a `Measurement` per task, the rules turn measurements and telemetry into
`CheckResult`s, and the last pass/warn/fail of each compute check is kept as a `CheckVerdict`.
Pure data.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # compute children unpickle this module's classes: keep pydantic out of their imports
    from accelpool_core.protocol import Action


class CheckStatus(enum.StrEnum):
    """Outcome of one check. `skip` means "not run this time" (busy GPU, unsupported dtype, ...)."""

    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"

    @property
    def severity(self) -> int:
        """0 pass, 1 warn, 2 fail (the value of `accelpool_check_status`); -1 for skip."""
        return _SEVERITY[self.value]


_SEVERITY = {"skip": -1, "pass": 0, "warn": 1, "fail": 2}


class Check(enum.StrEnum):
    """Every check the agent runs, in the order that decides a GPU's headline reason."""

    GPU_COUNT = "gpu_count"
    """Node-wide: the backend sees as many GPUs as the pool expects."""
    DEVICE = "device"
    RECOVERY = "recovery"
    """The driver's own recovery action for the GPU (NVML_FI_DEV_GET_GPU_RECOVERY_ACTION)."""
    XID = "xid"
    ECC = "ecc"
    ROW_REMAP = "row_remap"
    RETIRED_PAGES = "retired_pages"
    FABRIC = "fabric"
    NVLINK = "nvlink"
    SANITY = "sanity"
    CORRECTNESS = "correctness"
    MATMUL = "matmul"
    BANDWIDTH = "bandwidth"
    THERMAL = "thermal"
    PCIE_LINK = "pcie_link"
    POWER = "power"
    CLOCKS = "clocks"
    INFINIBAND = "infiniband"
    """Node-wide: the host's InfiniBand / RoCE ports (sysfs)."""

    @property
    def is_compute(self) -> bool:
        return self in COMPUTE_CHECKS

    @property
    def is_node_wide(self) -> bool:
        """A check of the node (GPU count, InfiniBand), not of one GPU."""
        return self in NODE_CHECKS


COMPUTE_CHECKS = frozenset({Check.SANITY, Check.CORRECTNESS, Check.MATMUL, Check.BANDWIDTH})
NODE_CHECKS = frozenset({Check.GPU_COUNT, Check.INFINIBAND})
CHECK_ORDER = {check: position for position, check in enumerate(Check)}

DTYPES = ("fp32", "tf32", "fp16", "bf16")
"""Data types the matmul check can measure (fp8 has no portable GEMM entry point in CuPy)."""


@dataclass(frozen=True)
class Measurement:
    """What a compute check measured, as a compute child reports it (before policy is applied)."""

    check: Check
    status: CheckStatus
    """The child's own verdict: pass, fail (error, wrong results) or skip (unsupported)."""
    reason: str
    message: str
    value: float | None = None
    unit: str | None = None
    dtype: str | None = None
    duration_seconds: float = 0.0


@dataclass(frozen=True)
class CheckResult:
    """One check's verdict for one GPU: status, a CamelCase reason, a value and a message."""

    check: Check
    status: CheckStatus
    reason: str
    message: str
    value: float | None = None
    unit: str | None = None
    dtype: str | None = None
    duration_seconds: float | None = None
    finished_at: float | None = None
    """Unix time the check finished."""
    summary: str = ""
    """Stable text without measured numbers, for the node condition (so it does not flap)."""
    stale: bool = False
    """Carried over from an earlier cycle (this cycle skipped the check, e.g. the GPU was busy)."""
    action: Action | None = None
    """The step of the action ladder this result asks for (None: nothing; `rules.findings` says why)."""
    noteworthy: bool = False
    """A pass with something worth knowing (an informational XID, no active NVLink): severity INFO."""

    @classmethod
    def of(
        cls,
        check: Check,
        status: CheckStatus,
        reason: str,
        message: str,
        summary: str = "",
        *,
        value: float | None = None,
        unit: str | None = None,
        noteworthy: bool = False,
    ) -> CheckResult:
        """A rule's result; the stable `summary` defaults to the message (for messages without numbers)."""
        return cls(
            check, status, reason, message, value=value, unit=unit, summary=summary or message, noteworthy=noteworthy
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.check.value,
            "status": self.status.value,
            "value": self.value,
            "unit": self.unit,
            "reason": self.reason,
            "message": self.message,
            "dtype": self.dtype,
            "duration_seconds": self.duration_seconds,
            "stale": self.stale,
            "action": self.action.value if self.action is not None else "none",
        }


@dataclass(frozen=True)
class CheckVerdict:
    """The last verdict of one compute check on one GPU: what the agent persists across restarts."""

    status: CheckStatus
    """pass, warn or fail (a skipped check leaves the previous verdict in force)."""
    reason: str
    since: float
    """Unix time this status and reason were first reached (unchanged while they repeat)."""


def worst(results: tuple[CheckResult, ...] | list[CheckResult]) -> CheckResult | None:
    """The result that decides: highest severity, ties broken by `Check` order. None if all skipped."""
    ranked = [r for r in results if r.status is not CheckStatus.SKIP]
    if not ranked:
        return None
    return min(ranked, key=lambda r: (-r.status.severity, CHECK_ORDER[r.check]))
