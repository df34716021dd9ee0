"""The node's verdict from its GPUs' reports and the node-wide checks.

Unhealthy if any GPU fails, a node-wide check fails (an InfiniBand port down: IbPortDown), or a
working backend sees fewer GPUs than expected (GpuMissing); a node-wide warning (a flapping
InfiniBand link) counts like a GPU's (ChecksPassedWithWarnings). Unknown when the backend itself
is unavailable (BackendUnavailable: NVML library missing, driver not loaded, init failing; never
GpuMissing), when nothing could be checked (NothingChecked), or when a GPU's compute checks have
never produced a verdict (ChecksSkipped: e.g. a GPU kept busy since the agent started, with no
verdict left on the node by an earlier agent), Healthy otherwise. Messages use stable summaries,
never measured numbers, so a noisy TFLOPS reading does not rewrite the node. A pure function.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from accelpool_agent.model import Check, CheckResult, CheckStatus, GpuReport
from accelpool_core.protocol import HealthStatus


@dataclass(frozen=True)
class NodeVerdict:
    status: HealthStatus
    reason: str
    message: str
    bad_gpus: tuple[int, ...]


_MESSAGE_LIMIT = 1000


def _group(gpus: Sequence[GpuReport], status: CheckStatus) -> str:
    """`XID 79 (GPU has fallen off the bus) on GPU 3; ... on GPUs 1, 5` — each GPU's headline."""
    groups: dict[str, list[int]] = {}
    for gpu in gpus:
        decisive = [c for c in gpu.checks if c.status is status]
        if decisive:
            top = min(decisive, key=lambda c: list(Check).index(c.check))
            groups.setdefault(top.summary or top.reason, []).append(gpu.device.index)
    parts = [
        f"{summary} on GPU{'s' if len(indexes) > 1 else ''} {', '.join(map(str, indexes))}"
        for summary, indexes in groups.items()
    ]
    text = "; ".join(parts)
    return text if len(text) <= _MESSAGE_LIMIT else text[: _MESSAGE_LIMIT - 3] + "..."


def node_verdict(
    gpus: Sequence[GpuReport],
    *,
    expected_gpus: int | None = None,
    backend_error: str | None = None,
    node_checks: Sequence[CheckResult] = (),
) -> NodeVerdict:
    failing = [g for g in gpus if g.status is CheckStatus.FAIL]
    bad = tuple(g.device.index for g in failing)
    node_failing = [c for c in node_checks if c.status is CheckStatus.FAIL and c.check is not Check.GPU_COUNT]
    node_text = "; ".join(c.summary or c.reason for c in node_failing)
    missing = expected_gpus is not None and len(gpus) < expected_gpus
    if missing and not backend_error:  # only a working backend can say that devices are missing
        found = f"found {len(gpus)} of {expected_gpus} GPUs"
        more = "".join(f"; {text}" for text in (_group(failing, CheckStatus.FAIL), node_text) if text)
        return NodeVerdict(HealthStatus.UNHEALTHY, "GpuMissing", f"{found}{more}", bad)
    if failing:
        first = failing[0]
        text = _group(failing, CheckStatus.FAIL) + (f"; {node_text}" if node_text else "")
        return NodeVerdict(HealthStatus.UNHEALTHY, first.reason, text[:_MESSAGE_LIMIT], bad)
    if node_failing:
        return NodeVerdict(HealthStatus.UNHEALTHY, node_failing[0].reason, node_text[:_MESSAGE_LIMIT], ())
    if backend_error and (missing or not gpus):
        # NVML missing, driver not loaded, init failing: a runtime problem, not missing GPUs.
        return NodeVerdict(HealthStatus.UNKNOWN, "BackendUnavailable", backend_error[:_MESSAGE_LIMIT], ())
    if not gpus:
        return NodeVerdict(HealthStatus.UNKNOWN, "NoDevices", "no accelerators found on this node", ())
    if all(g.status is CheckStatus.SKIP for g in gpus):
        return NodeVerdict(HealthStatus.UNKNOWN, "NothingChecked", "no check could run on any GPU", ())
    unchecked = [g for g in gpus if g.compute_unchecked]
    if unchecked:  # not checked is never "passed": no verdict yet, and none left by an earlier agent
        why: dict[str, list[int]] = {}
        for unchecked_gpu in unchecked:
            skip = next(c for c in unchecked_gpu.checks if c.check.is_compute)
            why.setdefault(skip.reason, []).append(unchecked_gpu.device.index)
        parts = [f"{reason} on GPU{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))}" for reason, ix in why.items()]
        text = "compute checks not run: " + "; ".join(parts)
        return NodeVerdict(HealthStatus.UNKNOWN, "ChecksSkipped", text[:_MESSAGE_LIMIT], ())
    warning = [g for g in gpus if g.status is CheckStatus.WARN]
    node_warning = "; ".join(c.summary or c.reason for c in node_checks if c.status is CheckStatus.WARN)
    if warning or node_warning:
        text = "; ".join(t for t in (_group(warning, CheckStatus.WARN), node_warning) if t)
        return NodeVerdict(HealthStatus.HEALTHY, "ChecksPassedWithWarnings", text[:_MESSAGE_LIMIT], ())
    count = len(gpus)
    return NodeVerdict(
        HealthStatus.HEALTHY, "AllChecksPassed", f"{count} GPU{'s' if count != 1 else ''} passed all checks", ()
    )
