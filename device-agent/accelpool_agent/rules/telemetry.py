"""Telemetry rules: one GPU's latest readings and its XIDs in, one result per check out.

A lost GPU fails (GpuLost); the driver's own recovery action (a GPU reset, a reboot) fails, a
drain warns (`RECOVERY_ACTIONS`); XIDs are judged by NVIDIA's XID catalog (`accelpool_agent.xids`): a
fatal XID seen since the agent started fails (XidError<n>); a warning, unexpected, unknown or
application XID (13, 31, ...) seen within the warning window warns, and an application XID
repeating `xid_repeat_limit` times within it fails; informational XIDs (43, 45, ...) pass with a
note. A double-bit ECC error since the driver loaded, or an increase of the lifetime count since
the agent started, fails (EccDoubleBitError); a failed row remap fails (RowRemapFailure), a
pending one warns; too many retired pages fails, a pending retirement warns; thermal throttling
(ThermalThrottle) and power-brake / hardware slowdown (PowerThrottle) warn. `telemetry_checks`
adds the link rules (`rules.links`: PCIe, NVLink, NVSwitch fabric) and the power and clock rules
(`rules.power`), and gives every result its step of the action ladder (`rules.findings`). Pure
functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from accelpool_agent import xids
from accelpool_agent.model import Check, CheckResult, CheckStatus, Telemetry
from accelpool_agent.rules.findings import with_action
from accelpool_agent.rules.links import fabric_rule, nvlink_rule, pcie_rule
from accelpool_agent.rules.policy import Policy
from accelpool_agent.rules.power import clocks_rule, power_rule

RETIRED_PAGES_LIMIT = 60
"""Retired pages at which NVIDIA considers a (pre-Ampere) GPU for replacement."""
RECENT_XIDS_KEPT = 64
THERMAL_REASONS = frozenset({"sw_thermal_slowdown", "hw_thermal_slowdown"})
POWER_REASONS = frozenset({"hw_slowdown", "hw_power_brake_slowdown"})


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


_result = CheckResult.of


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


RECOVERY_ACTIONS: Mapping[int, tuple[str, CheckStatus, str]] = {
    # NVML_GPU_RECOVERY_ACTION_*: (reason, status, what NVIDIA's memory error management guide says to do)
    1: ("RecoveryGpuReset", CheckStatus.FAIL, "terminate the GPU's processes and reset it (nvidia-smi -r)"),
    2: ("RecoveryNodeReboot", CheckStatus.FAIL, "reboot the operating system"),
    3: ("RecoveryDrainP2p", CheckStatus.WARN, "drain peer-to-peer traffic off the GPU"),
    4: ("RecoveryDrainAndReset", CheckStatus.FAIL, "drain the GPU, then reset it"),
    5: ("RecoveryImexDomain", CheckStatus.WARN, "recover the IMEX domain"),
    6: ("RecoveryBusReset", CheckStatus.FAIL, "reset the GPU's bus"),
    7: ("RecoverySystemReboot", CheckStatus.FAIL, "reboot the system"),
}
"""The driver's recovery action → the result (NVIDIA GPU memory error management, "Recovery action flag")."""


def recovery_rule(telemetry: Telemetry | None) -> CheckResult:
    action = telemetry.recovery_action if telemetry is not None else None
    if action is None:
        return _result(Check.RECOVERY, CheckStatus.SKIP, "NotSupported", "the driver reports no recovery action")
    known = RECOVERY_ACTIONS.get(action)
    if known is None:
        return _result(
            Check.RECOVERY, CheckStatus.PASS, "NoRecoveryNeeded", "the driver asks for no recovery", value=float(action)
        )
    reason, status, advice = known
    return _result(
        Check.RECOVERY,
        status,
        reason,
        f"the driver's recovery action for the GPU: {advice}",
        f"driver asks to {advice}",
        value=float(action),
    )


def xid_rule(record: XidRecord, now: float, window_seconds: float, repeat_limit: int = 10) -> CheckResult:
    """Fatal XIDs fail (sticky); recent warning, unexpected, unknown and application XIDs warn; an
    application XID repeating `repeat_limit` times within the window fails; informational ones pass."""
    total = float(sum(record.counts.values()))
    by_class: dict[xids.XidClass, list[int]] = {}
    for xid in sorted(record.counts, key=lambda x: record.last_seen.get(x, 0.0), reverse=True):
        by_class.setdefault(xids.classify(xid), []).append(xid)

    def result(status: CheckStatus, xid: int, message: str, summary: str) -> CheckResult:
        found = _result(Check.XID, status, xids.reason(xid), message, summary, value=total, unit="count")
        return replace(found, action=xids.ladder_action(xid))

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
        noted = _result(
            Check.XID,
            CheckStatus.PASS,
            "InformationalXid",
            f"only informational XIDs ({', '.join(map(str, informational))}): no action needed",
            "informational XID (no action needed)",
            value=total,
            unit="count",
        )
        return replace(noted, noteworthy=True)
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


def telemetry_checks(
    telemetry: Telemetry | None,
    record: XidRecord,
    *,
    baseline_aggregate_double: int | None,
    now: float,
    policy: Policy,
    nvlink_rates: Mapping[str, float] | None = None,
) -> list[CheckResult]:
    """Every telemetry rule on one GPU; `nvlink_rates` as `rules.nvlink_rule` takes them."""
    busy = policy.busy_utilization
    results = [
        device_rule(telemetry),
        recovery_rule(telemetry),
        xid_rule(record, now, policy.xid_warning_window_seconds, policy.xid_repeat_limit),
        ecc_rule(telemetry, baseline_aggregate_double),
        row_remap_rule(telemetry),
        retired_pages_rule(telemetry),
        fabric_rule(telemetry),
        nvlink_rule(telemetry, nvlink_rates or {}),
        thermal_rule(telemetry),
        pcie_rule(telemetry, busy),
        power_rule(telemetry, power_margin=policy.power_margin, busy_utilization=busy),
        clocks_rule(telemetry, clocks_low_ratio=policy.clocks_low_ratio, busy_utilization=busy),
    ]
    return [with_action(replace(r, finished_at=now)) for r in results]
