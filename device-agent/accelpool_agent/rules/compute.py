"""Compute rules: one GPU's measurements (from its compute child) in, judged results out.

Sanity and correctness keep the child's verdict; matmul in the policy dtype fails below
`min_efficiency` of the expected dense peak (SlowMatmul) and warns when well below the node's
other GPUs (SlowerThanPeers); bandwidth fails below `min_bandwidth_efficiency` of spec
(LowBandwidth). A timed-out or crashed check fails (CheckTimeout, ComputeCrashed). Pure functions.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from accelpool_agent.model import Check, CheckResult, CheckStatus, Measurement
from accelpool_agent.rules.policy import Expected, Policy


@dataclass(frozen=True)
class ComputeOutcome:
    """The compute checks of one GPU after policy, with the raw numbers for metrics."""

    checks: tuple[CheckResult, ...]
    matmul_tflops: Mapping[str, float]
    matmul_efficiency: Mapping[str, float]
    bandwidth_bytes_per_second: float | None
    bandwidth_efficiency: float | None


def _failure_summary(m: Measurement, policy: Policy) -> str:
    what = f"{m.check.value}[{m.dtype}]" if m.dtype and m.check is not Check.SANITY else m.check.value
    if m.reason == "CheckTimeout":
        return f"{what} check timed out after {policy.check_timeout_seconds:g} s"
    if m.reason == "ComputeCrashed":
        return f"{what} check crashed"
    if m.reason == "WrongResults":
        return f"wrong {m.dtype or ''} matmul results (silent data corruption)".replace("  ", " ")
    return f"{what} check failed ({m.reason})"


def _from_measurement(m: Measurement, policy: Policy, now: float) -> CheckResult:
    return CheckResult(
        check=m.check,
        status=m.status,
        reason=m.reason,
        message=m.message,
        value=m.value,
        unit=m.unit,
        dtype=m.dtype,
        duration_seconds=m.duration_seconds,
        finished_at=now,
        summary=_failure_summary(m, policy) if m.status is CheckStatus.FAIL else m.message,
    )


def _combine(check: Check, results: Sequence[CheckResult]) -> CheckResult | None:
    """Several measurements of one check (one per dtype) → the one that decides, durations added."""
    if not results:
        return None
    ranked = sorted(results, key=lambda r: -r.status.severity)
    decisive = ranked[0]
    total = sum(r.duration_seconds or 0.0 for r in results)
    if len(results) > 1 and decisive.status is CheckStatus.PASS and check is Check.CORRECTNESS:
        worst_error = max((r for r in results if r.value is not None), key=lambda r: r.value or 0.0, default=decisive)
        decisive = replace(
            worst_error,
            message="; ".join(r.message for r in results),
            summary="matmul results match the CPU reference",
        )
    return replace(decisive, duration_seconds=total)


def compute_checks(
    measurements: Sequence[Measurement], *, policy: Policy, expected: Expected, now: float
) -> ComputeOutcome:
    """Apply the policy to one GPU's measurements."""
    by_check: dict[Check, list[Measurement]] = {}
    for m in measurements:
        by_check.setdefault(m.check, []).append(m)
    checks: list[CheckResult] = []
    tflops: dict[str, float] = {}
    efficiency: dict[str, float] = {}

    for check in (Check.SANITY, Check.CORRECTNESS):
        combined = _combine(check, [_from_measurement(m, policy, now) for m in by_check.get(check, [])])
        if combined is not None:
            checks.append(combined)

    matmul_results: list[CheckResult] = []
    for m in by_check.get(Check.MATMUL, []):
        if m.status is CheckStatus.PASS and m.value is not None and m.dtype:
            tflops[m.dtype] = m.value
            peak = expected.tflops.get(m.dtype)
            if peak:
                efficiency[m.dtype] = m.value / peak
        if m.dtype == policy.dtype:
            matmul_results.append(_judge_matmul(m, policy, expected, now))
        elif m.status is CheckStatus.FAIL:
            matmul_results.append(_from_measurement(m, policy, now))
    if by_check.get(Check.MATMUL) and not any(r.dtype == policy.dtype for r in matmul_results):
        matmul_results.append(
            CheckResult(
                Check.MATMUL,
                CheckStatus.SKIP,
                "DtypeUnsupported",
                f"the policy dtype {policy.dtype} was not measured",
                dtype=policy.dtype,
                finished_at=now,
            )
        )
    combined = _combine(Check.MATMUL, matmul_results)
    if combined is not None:
        checks.append(combined)

    bandwidth = bandwidth_efficiency = None
    for m in by_check.get(Check.BANDWIDTH, []):
        result = _judge_bandwidth(m, policy, expected, now)
        checks.append(result)
        if m.status is CheckStatus.PASS and m.value is not None:
            bandwidth = m.value
            if expected.bandwidth_bytes_per_second:
                bandwidth_efficiency = m.value / expected.bandwidth_bytes_per_second
    return ComputeOutcome(tuple(checks), tflops, efficiency, bandwidth, bandwidth_efficiency)


def _judge_matmul(m: Measurement, policy: Policy, expected: Expected, now: float) -> CheckResult:
    base = _from_measurement(m, policy, now)
    if m.status is not CheckStatus.PASS or m.value is None:
        return base
    peak = expected.tflops.get(m.dtype or "")
    if not peak:
        return replace(
            base, reason="NoExpectedPeak", message=f"{m.message}; no expected {m.dtype} peak to compare with"
        )
    ratio = m.value / peak
    text = f"{m.dtype} matmul {m.value:.1f} TFLOPS = {ratio:.0%} of the {peak:g} TFLOPS dense peak"
    if ratio < policy.min_efficiency:
        return replace(
            base,
            status=CheckStatus.FAIL,
            reason="SlowMatmul",
            message=f"{text}, below the policy minimum {policy.min_efficiency:.0%}",
            summary=f"{m.dtype} matmul below {policy.min_efficiency:.0%} of peak",
        )
    return replace(base, reason="EfficiencyOk", message=f"{text} (policy minimum {policy.min_efficiency:.0%})")


def _judge_bandwidth(m: Measurement, policy: Policy, expected: Expected, now: float) -> CheckResult:
    base = _from_measurement(m, policy, now)
    if m.status is not CheckStatus.PASS or m.value is None:
        return base
    spec = expected.bandwidth_bytes_per_second
    if not spec:
        return replace(base, reason="NoExpectedBandwidth", message=f"{m.message}; no spec bandwidth to compare with")
    ratio = m.value / spec
    text = f"copy bandwidth {m.value / 1e9:.0f} GB/s = {ratio:.0%} of the {spec / 1e9:g} GB/s spec"
    if ratio < policy.min_bandwidth_efficiency:
        return replace(
            base,
            status=CheckStatus.FAIL,
            reason="LowBandwidth",
            message=f"{text}, below the minimum {policy.min_bandwidth_efficiency:.0%}",
            summary=f"memory bandwidth below {policy.min_bandwidth_efficiency:.0%} of spec",
        )
    return replace(base, reason="BandwidthOk", message=text)


def peer_outliers(tflops_by_gpu: Mapping[int, float], tolerance: float) -> dict[int, float]:
    """GPUs whose policy-dtype TFLOPS are below `tolerance` x the node median (3+ GPUs): index → median."""
    if len(tflops_by_gpu) < 3:
        return {}
    median = statistics.median(tflops_by_gpu.values())
    return {index: median for index, value in tflops_by_gpu.items() if value < tolerance * median}


def mark_slower_than_peers(result: CheckResult, median: float, tolerance: float) -> CheckResult:
    if result.status is not CheckStatus.PASS:
        return result
    return replace(
        result,
        status=CheckStatus.WARN,
        reason="SlowerThanPeers",
        message=f"{result.message}; below {tolerance:.0%} of the node's median {median:.1f} TFLOPS",
        summary="matmul slower than the node's other GPUs",
    )
