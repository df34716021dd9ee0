"""Health rules: telemetry and measurements in, pass / warn / fail with a reason out.

Pure functions, the agent's functional core; every rule has unit tests on the fake backend.

Telemetry rules (per GPU): a lost GPU fails (GpuLost); XIDs are judged by NVIDIA's XID catalog
(`accelpool_agent.xids`): a fatal XID seen since the agent started fails (XidError<n>); a warning,
unexpected, unknown or application XID (13, 31, ...) seen within the warning window warns, and an
application XID repeating `xid_repeat_limit` times within it fails; informational XIDs (43, 45,
...) pass with a note. A double-bit ECC error since the driver loaded, or an increase of the
lifetime count since the agent started, fails (EccDoubleBitError); a failed row remap fails
(RowRemapFailure), a pending one warns; too many retired pages fails, a pending retirement warns;
thermal throttling (ThermalThrottle) and power-brake / hardware slowdown (PowerThrottle) warn; a
PCIe link below its maximum width warns.

Compute rules: sanity and correctness keep the child's verdict; matmul in the policy dtype fails
below `min_efficiency` of the expected dense peak (SlowMatmul) and warns when well below the
node's other GPUs (SlowerThanPeers); bandwidth fails below `min_bandwidth_efficiency` of spec
(LowBandwidth). A timed-out or crashed check fails (CheckTimeout, ComputeCrashed).

The node is Unhealthy if any GPU fails (or a working backend sees fewer GPUs than expected:
GpuMissing), Unknown when the backend itself is unavailable (BackendUnavailable: NVML library
missing, driver not loaded, init failing; never GpuMissing), when nothing could be checked
(NothingChecked), or when a GPU's compute checks have never produced a verdict (ChecksSkipped:
e.g. a GPU kept busy since the agent started, with no verdict left on the node by an earlier
agent), Healthy otherwise. Condition messages use stable summaries, never measured numbers,
so a noisy TFLOPS reading does not rewrite the node.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

from accelpool_agent import xids
from accelpool_agent.model import Check, CheckResult, CheckStatus, GpuReport, Measurement, Telemetry
from accelpool_core.protocol import HealthStatus

RETIRED_PAGES_LIMIT = 60
"""Retired pages at which NVIDIA considers a (pre-Ampere) GPU for replacement."""
RECENT_XIDS_KEPT = 64
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
POWER_REASONS = frozenset({"hw_slowdown", "hw_power_brake_slowdown"})


@dataclass(frozen=True)
class Policy:
    """The thresholds the rules apply (from AgentConfig)."""

    dtype: str = "bf16"
    min_efficiency: float = 0.6
    min_bandwidth_efficiency: float = 0.6
    peer_tolerance: float = 0.85
    """Warn when a GPU's matmul is below this fraction of the node's median (3+ GPUs)."""
    check_timeout_seconds: float = 120.0
    xid_warning_window_seconds: float = 3600.0
    """How long a warning, unexpected, unknown or application XID keeps the GPU in `warn`."""
    xid_repeat_limit: int = 10
    """An application XID (13, 31, ...) seen this often within the warning window fails the GPU."""


@dataclass(frozen=True)
class XidRecord:
    """The XIDs one GPU reported since the agent started."""

    counts: Mapping[int, int] = field(default_factory=dict)
    last_seen: Mapping[int, float] = field(default_factory=dict)
    last_xid: int | None = None

    recent: Mapping[int, tuple[float, ...]] = field(default_factory=dict)
    """The latest `RECENT_XIDS_KEPT` times of each XID (for the repeat limit)."""

    def add(self, xid: int, at: float) -> XidRecord:
        counts = dict(self.counts)
        counts[xid] = counts.get(xid, 0) + 1
        last_seen = dict(self.last_seen)
        last_seen[xid] = at
        recent = dict(self.recent)
        recent[xid] = (*recent.get(xid, ()), at)[-RECENT_XIDS_KEPT:]
        return XidRecord(counts=counts, last_seen=last_seen, last_xid=xid, recent=recent)

    def recent_count(self, xid: int, now: float, window_seconds: float) -> int:
        return sum(1 for at in self.recent.get(xid, ()) if now - at <= window_seconds)


@dataclass(frozen=True)
class Expected:
    """What a healthy GPU of this model should reach."""

    tflops: Mapping[str, float] = field(default_factory=dict)
    bandwidth_bytes_per_second: float | None = None


def _result(
    check: Check,
    status: CheckStatus,
    reason: str,
    message: str,
    summary: str = "",
    *,
    value: float | None = None,
    unit: str | None = None,
) -> CheckResult:
    return CheckResult(check, status, reason, message, value=value, unit=unit, summary=summary or message)


# ---------------------------------------------------------------------------- telemetry rules


def device_rule(telemetry: Telemetry | None) -> CheckResult:
    if telemetry is None:
        return _result(Check.DEVICE, CheckStatus.SKIP, "NoTelemetry", "this backend reports no telemetry")
    if telemetry.lost:
        return _result(
            Check.DEVICE,
            CheckStatus.FAIL,
            "GpuLost",
            f"the GPU does not answer: {telemetry.error or 'GPU is lost'}",
            "GPU lost (not answering)",
        )
    return _result(Check.DEVICE, CheckStatus.PASS, "Responding", "the GPU answers")


def xid_rule(record: XidRecord, now: float, window_seconds: float, repeat_limit: int = 10) -> CheckResult:
    """Fatal XIDs fail (sticky); recent warning, unexpected, unknown and application XIDs warn; an
    application XID repeating `repeat_limit` times within the window fails; informational ones pass."""
    total = float(sum(record.counts.values()))
    by_class: dict[xids.XidClass, list[int]] = {}
    for xid in sorted(record.counts, key=lambda x: record.last_seen.get(x, 0.0), reverse=True):
        by_class.setdefault(xids.classify(xid), []).append(xid)

    def result(status: CheckStatus, xid: int, message: str, summary: str) -> CheckResult:
        return _result(Check.XID, status, xids.reason(xid), message, summary, value=total, unit="count")

    fatal = by_class.get(xids.XidClass.FATAL, [])
    if fatal:
        xid = fatal[0]
        also = f"; also XID {', '.join(map(str, fatal[1:]))}" if fatal[1:] else ""
        advice = f" (NVIDIA: {xids.action(xid)})"
        return result(
            CheckStatus.FAIL,
            xid,
            f"{xids.describe(xid)} reported {record.counts[xid]} time(s){advice}{also}",
            xids.describe(xid),
        )
    window = f"in the last {window_seconds:g} s"
    for xid in by_class.get(xids.XidClass.APPLICATION, []):
        repeats = record.recent_count(xid, now, window_seconds)
        if repeats >= repeat_limit:
            return result(
                CheckStatus.FAIL,
                xid,
                f"{xids.describe(xid)} reported {repeats} times {window} (limit {repeat_limit}): usually an "
                "application fault, but this often it may be the GPU (NVIDIA: in rare cases a hardware failure "
                "shows up as an application XID)",
                f"{xids.describe(xid)} repeating",
            )
    notes = {
        xids.XidClass.WARNING: "",
        xids.XidClass.UNEXPECTED: ": not expected on this GPU (NVIDIA: contact support if it persists)",
        xids.XidClass.UNKNOWN: ": an XID this agent cannot classify, severity unknown",
        xids.XidClass.APPLICATION: ": usually an application fault (NVIDIA: restart the application)",
    }
    for cls, note in notes.items():
        recent = [x for x in by_class.get(cls, []) if now - record.last_seen.get(x, now) <= window_seconds]
        if recent:
            xid = recent[0]
            return result(
                CheckStatus.WARN,
                xid,
                f"{xids.describe(xid)} reported {record.counts[xid]} time(s), last {window}{note}",
                xids.describe(xid),
            )
    informational = by_class.get(xids.XidClass.INFORMATIONAL, [])
    if informational:
        return _result(
            Check.XID,
            CheckStatus.PASS,
            "InformationalXid",
            f"only informational XIDs ({', '.join(map(str, informational))}): no action needed",
            value=total,
            unit="count",
        )
    if record.counts:
        return _result(
            Check.XID, CheckStatus.PASS, "NoRecentXidErrors", f"no XID errors {window}", value=total, unit="count"
        )
    return _result(Check.XID, CheckStatus.PASS, "NoXidErrors", "no XID errors", value=total, unit="count")


def ecc_rule(telemetry: Telemetry | None, baseline_aggregate_double: int | None) -> CheckResult:
    ecc = telemetry.ecc if telemetry is not None else None
    if ecc is None:
        return _result(Check.ECC, CheckStatus.SKIP, "EccUnavailable", "ECC is off or not reported")
    volatile = ecc.volatile_double or 0
    aggregate = ecc.aggregate_double
    grew = aggregate is not None and baseline_aggregate_double is not None and aggregate > baseline_aggregate_double
    if volatile > 0 or grew:
        detail = f"{volatile} since the driver loaded"
        if grew:
            detail += f", lifetime count rose from {baseline_aggregate_double} to {aggregate}"
        return _result(
            Check.ECC,
            CheckStatus.FAIL,
            "EccDoubleBitError",
            f"uncorrectable (double-bit) ECC errors: {detail}",
            "uncorrectable (double-bit) ECC errors",
            value=float(volatile),
            unit="count",
        )
    return _result(
        Check.ECC,
        CheckStatus.PASS,
        "NoUncorrectableErrors",
        f"no uncorrectable ECC errors ({ecc.volatile_single or 0} corrected since the driver loaded)",
        value=0.0,
        unit="count",
    )


def row_remap_rule(telemetry: Telemetry | None) -> CheckResult:
    remap = telemetry.row_remap if telemetry is not None else None
    if remap is None:
        return _result(Check.ROW_REMAP, CheckStatus.SKIP, "NotSupported", "no row remapping on this GPU")
    value = float(remap.uncorrectable or 0)
    if remap.failure:
        return _result(
            Check.ROW_REMAP,
            CheckStatus.FAIL,
            "RowRemapFailure",
            f"a memory row could not be remapped ({remap.uncorrectable} uncorrectable rows remapped)",
            "row remapping failed",
            value=value,
            unit="rows",
        )
    if remap.pending:
        return _result(
            Check.ROW_REMAP,
            CheckStatus.WARN,
            "RowRemapPending",
            "a row remap is pending: the GPU needs a reset",
            "row remap pending (reset needed)",
            value=value,
            unit="rows",
        )
    return _result(
        Check.ROW_REMAP,
        CheckStatus.PASS,
        "NoRowRemapIssues",
        "no pending or failed row remaps",
        value=value,
        unit="rows",
    )


def retired_pages_rule(telemetry: Telemetry | None) -> CheckResult:
    pages = telemetry.retired_pages if telemetry is not None else None
    if pages is None:
        return _result(Check.RETIRED_PAGES, CheckStatus.SKIP, "NotSupported", "no page retirement on this GPU")
    total = (pages.single_bit or 0) + (pages.double_bit or 0)
    if total >= RETIRED_PAGES_LIMIT:
        return _result(
            Check.RETIRED_PAGES,
            CheckStatus.FAIL,
            "RetiredPagesLimit",
            f"{total} retired pages (limit {RETIRED_PAGES_LIMIT})",
            "too many retired memory pages",
            value=float(total),
            unit="pages",
        )
    if pages.pending:
        return _result(
            Check.RETIRED_PAGES,
            CheckStatus.WARN,
            "RetiredPagesPending",
            "a page retirement is pending: the GPU needs a reset",
            "page retirement pending (reset needed)",
            value=float(total),
            unit="pages",
        )
    return _result(
        Check.RETIRED_PAGES,
        CheckStatus.PASS,
        "NoPendingRetirement",
        f"{total} retired pages",
        value=float(total),
        unit="pages",
    )


def thermal_rule(telemetry: Telemetry | None) -> CheckResult:
    if telemetry is None or (telemetry.throttle_reasons is None and telemetry.temperature_celsius is None):
        return _result(Check.THERMAL, CheckStatus.SKIP, "NoData", "no temperature or throttle data")
    reasons = telemetry.throttle_reasons or frozenset()
    temperature = telemetry.temperature_celsius
    slowdown = telemetry.slowdown_temperature_celsius
    hot = temperature is not None and slowdown is not None and temperature >= slowdown
    thermal = sorted(reasons & THERMAL_REASONS)
    if thermal or hot:
        where = f" at {temperature:g} °C (slowdown {slowdown:g} °C)" if temperature is not None and slowdown else ""
        return _result(
            Check.THERMAL,
            CheckStatus.WARN,
            "ThermalThrottle",
            f"clocks throttled for temperature{where}: {', '.join(thermal) or 'at slowdown temperature'}",
            "thermal throttling",
            value=temperature,
            unit="celsius",
        )
    power = sorted(reasons & POWER_REASONS)
    if power:
        return _result(
            Check.THERMAL,
            CheckStatus.WARN,
            "PowerThrottle",
            f"clocks throttled by hardware: {', '.join(power)}",
            "hardware slowdown / power-brake throttling",
            value=temperature,
            unit="celsius",
        )
    return _result(
        Check.THERMAL,
        CheckStatus.PASS,
        "NotThrottled",
        "no thermal or hardware throttling",
        value=temperature,
        unit="celsius",
    )


def pcie_rule(telemetry: Telemetry | None) -> CheckResult:
    link = telemetry.pcie if telemetry is not None else None
    if link is None or link.width is None or link.max_width is None:
        return _result(Check.PCIE_LINK, CheckStatus.SKIP, "NoData", "no PCIe link data")
    if link.width < link.max_width:
        return _result(
            Check.PCIE_LINK,
            CheckStatus.WARN,
            "PcieLinkDegraded",
            f"PCIe link trained at x{link.width} of x{link.max_width}",
            "PCIe link below full width",
            value=float(link.width),
            unit="lanes",
        )
    return _result(
        Check.PCIE_LINK,
        CheckStatus.PASS,
        "LinkAtFullWidth",
        f"PCIe gen{link.generation} x{link.width}",
        value=float(link.width),
        unit="lanes",
    )


def telemetry_checks(
    telemetry: Telemetry | None,
    record: XidRecord,
    *,
    baseline_aggregate_double: int | None,
    now: float,
    policy: Policy,
) -> list[CheckResult]:
    results = [
        device_rule(telemetry),
        xid_rule(record, now, policy.xid_warning_window_seconds, policy.xid_repeat_limit),
        ecc_rule(telemetry, baseline_aggregate_double),
        row_remap_rule(telemetry),
        retired_pages_rule(telemetry),
        thermal_rule(telemetry),
        pcie_rule(telemetry),
    ]
    return [replace(r, finished_at=now) for r in results]


# ---------------------------------------------------------------------------- compute rules


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


# ---------------------------------------------------------------------------- node verdict


@dataclass(frozen=True)
class Verdict:
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
    gpus: Sequence[GpuReport], *, expected_gpus: int | None = None, backend_error: str | None = None
) -> Verdict:
    failing = [g for g in gpus if g.status is CheckStatus.FAIL]
    bad = tuple(g.device.index for g in failing)
    missing = expected_gpus is not None and len(gpus) < expected_gpus
    if missing and not backend_error:  # only a working backend can say that devices are missing
        found = f"found {len(gpus)} of {expected_gpus} GPUs"
        more = f"; {_group(failing, CheckStatus.FAIL)}" if failing else ""
        return Verdict(HealthStatus.UNHEALTHY, "GpuMissing", f"{found}{more}", bad)
    if failing:
        first = failing[0]
        return Verdict(HealthStatus.UNHEALTHY, first.reason, _group(failing, CheckStatus.FAIL), bad)
    if backend_error and (missing or not gpus):
        # NVML missing, driver not loaded, init failing: a runtime problem, not missing GPUs.
        return Verdict(HealthStatus.UNKNOWN, "BackendUnavailable", backend_error[:_MESSAGE_LIMIT], ())
    if not gpus:
        return Verdict(HealthStatus.UNKNOWN, "NoDevices", "no accelerators found on this node", ())
    if all(g.status is CheckStatus.SKIP for g in gpus):
        return Verdict(HealthStatus.UNKNOWN, "NothingChecked", "no check could run on any GPU", ())
    unchecked = [g for g in gpus if g.compute_unchecked]
    if unchecked:  # not checked is never "passed": no verdict yet, and none left by an earlier agent
        why: dict[str, list[int]] = {}
        for unchecked_gpu in unchecked:
            skip = next(c for c in unchecked_gpu.checks if c.check.is_compute)
            why.setdefault(skip.reason, []).append(unchecked_gpu.device.index)
        parts = [f"{reason} on GPU{'s' if len(ix) > 1 else ''} {', '.join(map(str, ix))}" for reason, ix in why.items()]
        text = "compute checks not run: " + "; ".join(parts)
        return Verdict(HealthStatus.UNKNOWN, "ChecksSkipped", text[:_MESSAGE_LIMIT], ())
    warning = [g for g in gpus if g.status is CheckStatus.WARN]
    if warning:
        return Verdict(HealthStatus.HEALTHY, "ChecksPassedWithWarnings", _group(warning, CheckStatus.WARN), ())
    count = len(gpus)
    return Verdict(
        HealthStatus.HEALTHY, "AllChecksPassed", f"{count} GPU{'s' if count != 1 else ''} passed all checks", ()
    )
