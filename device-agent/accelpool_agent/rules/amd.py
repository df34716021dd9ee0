"""AMD Instinct rules: one GPU's amdsmi readings and driver events in, one result per check out.

`amd_checks` is the AMD counterpart of `rules.telemetry_checks`: the same `Check` names and
severities, judged by AMD's sources (README.md, "AMD Instinct (amdsmi)"):

- device: a lost GPU fails (GpuLost), as for NVIDIA (`rules.telemetry.device_rule`).
- xid: the driver's events (`XidEvent.event`, amdsmi's AmdSmiEvtNotificationType): a RING_HANG
  (a hung command ring, which amdgpu recovers from with a GPU reset) fails and asks for a GPU
  reset; within the warning window GPU_PRE_RESET / GPU_POST_RESET (the driver reset the GPU),
  THERMAL_THROTTLE and VMFAULT (a page fault, usually the application's) warn.
- ecc: any uncorrectable RAS error since the driver loaded fails (EccUncorrectableError) and asks
  for a GPU reset: amdgpu retires the faulty page and recovers from an uncorrectable error by
  resetting the GPU (Linux, Documentation/gpu/amdgpu/ras.rst, "RAS Reboot Behavior for
  Unrecoverable Errors"); correctable errors rising since the agent started warn
  (EccCorrectableRising). The message names the RAS blocks (UMC = HBM, XGMI_WAFL, GFX, ...).
- retired_pages: retired VRAM pages at amdgpu's bad page threshold fail (BadPageThreshold) and ask
  for service: beyond it the GPU enters a bad state (amdgpu_drv.c, `bad_page_threshold`: "may result
  in the GPU entering bad status when the number of total faulty pages by ECC exceeds the threshold
  value"); a page awaiting retirement warns (BadPagesPending) and asks for a GPU reset.
- nvlink (the GPU's peer links; XGMI on AMD): a link down fails (XgmiLinkDown) and asks for an OS
  restart: amdgpu trains the XGMI links and joins the GPU to its hive when the driver loads.
- thermal: amdsmi's violation status (MI300 and later) shows thermal throttling (PROCHOT, socket
  thermal "TVIOL", VR or HBM thermal) → ThermalThrottle, or power capping (package power tracking,
  "PVIOL") → PowerThrottle: warnings; a hotspot at its critical temperature warns too.
- pcie_link: `rules.links.pcie_rule`: below the maximum width warns always, below the maximum
  generation only while loaded (amdgpu's PCIe DPM lowers the link speed of an idle GPU).
- power, clocks: `rules.power` as for NVIDIA (draw above the cap, clocks stuck low under load).

Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from accelpool_agent.model import Check, CheckResult, CheckStatus, EccCounts, Telemetry
from accelpool_agent.rules.findings import with_action
from accelpool_agent.rules.links import pcie_rule
from accelpool_agent.rules.policy import Policy
from accelpool_agent.rules.power import clocks_rule, power_rule
from accelpool_agent.rules.telemetry import THERMAL_REASONS, XidRecord, device_rule
from accelpool_core.protocol import Action

AMD_EVENTS: Mapping[int, tuple[str, str, CheckStatus, Action]] = {
    # `backends.amdsmi.AMD_EVENT_CODES` code: (name, what it means, status, ladder step)
    5: ("RING_HANG", "a GPU command ring hung", CheckStatus.FAIL, Action.RESET_GPU),
    3: ("GPU_PRE_RESET", "the driver is resetting the GPU", CheckStatus.WARN, Action.NONE),
    4: ("GPU_POST_RESET", "the driver reset the GPU", CheckStatus.WARN, Action.NONE),
    2: ("THERMAL_THROTTLE", "the GPU throttled for temperature", CheckStatus.WARN, Action.NONE),
    1: ("VMFAULT", "a GPU page fault (usually the application's)", CheckStatus.WARN, Action.NONE),
}
"""amdsmi's event types (amdsmi.h, amdsmi_evt_notification_type_t) by the code the backend reports them
under (their AMDSMI_EVT_NOTIF_* values up to ROCm 6.x), worst first."""
POWER_LIMIT_REASONS = frozenset({"sw_power_cap", "hw_slowdown"})
"""Package power tracking (PVIOL) and the firmware's current limits (`backends.amdsmi_device`)."""

_result = CheckResult.of


def amd_event_rule(record: XidRecord, now: float, window_seconds: float) -> CheckResult:
    """The driver's events of one GPU since the agent started (`XidRecord` keyed by event value)."""
    for value, (name, meaning, status, action) in AMD_EVENTS.items():
        count = record.counts.get(value, 0)
        recent = now - record.last_seen.get(value, float("-inf")) <= window_seconds
        if count and (status is CheckStatus.FAIL or recent):
            found = _result(
                Check.XID,
                status,
                f"AmdEvent{''.join(part.title() for part in name.split('_'))}",
                f"amdsmi event {name}: {meaning}, {count} time(s)",
                f"amdsmi event {name}: {meaning}",
                value=float(count),
                unit="count",
            )
            return replace(found, action=action)
    total = float(sum(record.counts.values()))
    return _result(Check.XID, CheckStatus.PASS, "NoAmdEvents", "no recent amdsmi events", value=total, unit="count")


def amd_ecc_rule(telemetry: Telemetry | None, baseline: EccCounts | None) -> CheckResult:
    """`baseline`: the GPU's totals when the agent started (correctable in `volatile_single`)."""
    ecc = telemetry.ecc if telemetry is not None else None
    if ecc is None:
        return _result(Check.ECC, CheckStatus.SKIP, "EccUnavailable", "amdsmi reports no RAS error counts")
    blocks = telemetry.ras_blocks if telemetry is not None else None
    uncorrectable, correctable = ecc.volatile_double or 0, ecc.volatile_single or 0
    if uncorrectable > 0:
        found = _result(
            Check.ECC,
            CheckStatus.FAIL,
            "EccUncorrectableError",
            f"{uncorrectable} uncorrectable RAS error(s) since the driver loaded{_where(blocks, 'volatile_double')}"
            " (amdgpu retires the page and recovers with a GPU reset)",
            "uncorrectable RAS (ECC) errors",
            value=float(uncorrectable),
            unit="count",
        )
        return replace(found, action=Action.RESET_GPU)
    before = baseline.volatile_single if baseline is not None else None
    if before is not None and correctable > before:
        return _result(
            Check.ECC,
            CheckStatus.WARN,
            "EccCorrectableRising",
            f"correctable RAS errors rose from {before} to {correctable}{_where(blocks, 'volatile_single')}",
            "correctable RAS (ECC) errors rising",
            value=float(correctable),
            unit="count",
        )
    return _result(
        Check.ECC,
        CheckStatus.PASS,
        "NoUncorrectableErrors",
        f"no uncorrectable RAS errors ({correctable} corrected since the driver loaded)",
        value=0.0,
        unit="count",
    )


def bad_pages_rule(telemetry: Telemetry | None) -> CheckResult:
    """amdgpu's retired VRAM pages against its bad page threshold."""
    pages = telemetry.retired_pages if telemetry is not None else None
    if pages is None:
        return _result(Check.RETIRED_PAGES, CheckStatus.SKIP, "NotSupported", "amdsmi reports no retired pages")
    count = pages.double_bit or 0
    threshold = telemetry.bad_page_threshold if telemetry is not None else None
    if threshold and count >= threshold:
        found = _result(
            Check.RETIRED_PAGES,
            CheckStatus.FAIL,
            "BadPageThreshold",
            f"{count} retired VRAM pages, at amdgpu's bad page threshold of {threshold}",
            "retired VRAM pages at amdgpu's bad page threshold",
            value=float(count),
            unit="pages",
        )
        return replace(found, action=Action.SERVICE_REQUIRED)
    if pages.pending:
        found = _result(
            Check.RETIRED_PAGES,
            CheckStatus.WARN,
            "BadPagesPending",
            "a VRAM page awaits retirement: the GPU needs a reset",
            "VRAM page retirement pending (reset needed)",
            value=float(count),
            unit="pages",
        )
        return replace(found, action=Action.RESET_GPU)
    limit = f" (threshold {threshold})" if threshold else ""
    return _result(
        Check.RETIRED_PAGES,
        CheckStatus.PASS,
        "NoPendingRetirement",
        f"{count} retired VRAM pages{limit}",
        value=float(count),
        unit="pages",
    )


def xgmi_rule(telemetry: Telemetry | None) -> CheckResult:
    links = telemetry.xgmi_links if telemetry is not None else None
    if not links:
        return _result(Check.NVLINK, CheckStatus.SKIP, "NoXgmi", "no XGMI links on this GPU (or amdsmi reports none)")
    down = [link.link for link in links if not link.active]
    if down:
        names = ", ".join(map(str, down))
        found = _result(
            Check.NVLINK,
            CheckStatus.FAIL,
            "XgmiLinkDown",
            f"XGMI link {names} down ({len(links) - len(down)} of {len(links)} up)",
            f"XGMI link {names} down",
            value=float(len(down)),
            unit="links",
        )
        return replace(found, action=Action.RESTART_OS)
    return _result(
        Check.NVLINK, CheckStatus.PASS, "XgmiLinksUp", f"{len(links)} XGMI links up", value=0.0, unit="links"
    )


def amd_thermal_rule(telemetry: Telemetry | None) -> CheckResult:
    if telemetry is None or (telemetry.throttle_reasons is None and telemetry.temperature_celsius is None):
        return _result(Check.THERMAL, CheckStatus.SKIP, "NoData", "no temperature or violation status")
    reasons = telemetry.throttle_reasons or frozenset()
    temperature, critical = telemetry.temperature_celsius, telemetry.slowdown_temperature_celsius
    hot = temperature is not None and critical is not None and temperature >= critical
    if reasons & THERMAL_REASONS or hot:
        where = f" at {temperature:g} °C (critical {critical:g} °C)" if temperature is not None and critical else ""
        return _result(
            Check.THERMAL,
            CheckStatus.WARN,
            "ThermalThrottle",
            f"thermal throttling{where}: {', '.join(sorted(reasons & THERMAL_REASONS)) or 'at critical temperature'}",
            "thermal throttling",
            value=temperature,
            unit="celsius",
        )
    if reasons & POWER_LIMIT_REASONS:
        return _result(
            Check.THERMAL,
            CheckStatus.WARN,
            "PowerThrottle",
            f"clocks limited by power or current: {', '.join(sorted(reasons & POWER_LIMIT_REASONS))}",
            "power throttling",
            value=temperature,
            unit="celsius",
        )
    return _result(
        Check.THERMAL,
        CheckStatus.PASS,
        "NotThrottled",
        "no thermal or power throttling",
        value=temperature,
        unit="celsius",
    )


def amd_checks(
    telemetry: Telemetry | None,
    record: XidRecord,
    *,
    baseline: EccCounts | None,
    now: float,
    policy: Policy,
) -> list[CheckResult]:
    """Every AMD rule on one GPU; `record` holds its amdsmi events (`XidEvent.xid`: the event's code),
    `baseline` its RAS totals when the agent started."""
    busy = policy.busy_utilization
    results = [
        device_rule(telemetry),
        amd_event_rule(record, now, policy.xid_warning_window_seconds),
        amd_ecc_rule(telemetry, baseline),
        bad_pages_rule(telemetry),
        xgmi_rule(telemetry),
        amd_thermal_rule(telemetry),
        pcie_rule(telemetry, busy),
        power_rule(telemetry, power_margin=policy.power_margin, busy_utilization=busy),
        clocks_rule(telemetry, clocks_low_ratio=policy.clocks_low_ratio, busy_utilization=busy),
    ]
    return [with_action(replace(r, finished_at=now)) for r in results]


def _where(blocks: Mapping[str, EccCounts] | None, counter: str) -> str:
    named = [
        f"{block} {getattr(counts, counter)}" for block, counts in (blocks or {}).items() if getattr(counts, counter)
    ]
    return f" ({', '.join(named)})" if named else ""
