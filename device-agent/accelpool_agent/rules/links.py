"""Link rules: one GPU's PCIe link, its NVLinks and its NVSwitch fabric registration.

- `pcie_rule`: a link trained below its maximum width warns (PcieLinkDegraded), always; below its
  maximum generation it warns (PcieGenDegraded) only while the GPU is loaded, because NVIDIA GPUs
  lower the link generation to save power when idle (`nvidia-smi -q -d PCIE` shows an idle GPU's
  current generation below its maximum) and raise it again under load. NVML's maximum is "the
  maximum PCIe link generation possible with this device and system" (nvml.h,
  `nvmlDeviceGetMaxPcieLinkGeneration`, likewise the width), so a Gen5 GPU in a Gen4 slot is
  not degraded.
- `nvlink_rule`: a link down while the GPU's other links are up fails (NvlinkDown); no active link
  at all passes with a note (NvlinkInactive: no bridge or fabric in use, which the fabric check
  judges on NVSwitch systems). Error counters are judged on their rate per minute over the
  window (`rules.rates`), per link and counter, against `NVLINK_LIMITS`.
- `fabric_rule`: NVML's GPU fabric info (Hopper and later, with the fabric manager): a GPU not
  registered (NOT_STARTED) or whose registration failed fails; registering (IN_PROGRESS) warns;
  degraded fabric bandwidth warns.

Pure functions; the actions they ask for are `rules.actions`.
"""

from __future__ import annotations

from collections.abc import Mapping

from accelpool_agent.model import Check, CheckResult, CheckStatus, Telemetry

NVLINK_LIMITS: Mapping[str, tuple[float, float]] = {
    # counter: (warning, critical) errors per minute on one link
    # CRC errors: DCGM's health watch warns on any increase and fails at 100 per second
    # (DCGM_LIMIT_MAX_NVLINK_CRC_ERROR, "RM has informed us that CRC errors only matter at rates
    # of 100+ per second", dcgmlib/src/DcgmGpuHardwareLimits.h).
    "crc_flit": (1.0, 6000.0),
    "crc_data": (1.0, 6000.0),
    # Replays and recoveries: DCGM fails on any increase (DCGM_LIMIT_MAX_NVLINK_ERROR = 1). A replay
    # is a retransmission the link survives, so one warns; fail at 8 per minute, the replay rate
    # that RM recommends as the maximum (DCGM_LIMIT_MAX_PCIREPLAY_RATE, the same header).
    "replay": (1.0, 8.0),
    "recovery": (1.0, 8.0),
}


_result = CheckResult.of


def is_busy(telemetry: Telemetry | None, busy_utilization: float) -> bool:
    """The GPU is loaded: its utilization is at least `busy_utilization`."""
    ratio = telemetry.utilization_ratio if telemetry is not None else None
    return ratio is not None and ratio >= busy_utilization


def pcie_rule(telemetry: Telemetry | None, busy_utilization: float = 0.8) -> CheckResult:
    link = telemetry.pcie if telemetry is not None else None
    if link is None or link.width is None or link.max_width is None:
        return _result(Check.PCIE_LINK, CheckStatus.SKIP, "NoData", "no PCIe link data")
    lanes = float(link.width)
    if link.width < link.max_width:
        return _result(
            Check.PCIE_LINK,
            CheckStatus.WARN,
            "PcieLinkDegraded",
            f"PCIe link trained at x{link.width} of x{link.max_width}",
            "PCIe link below full width",
            value=lanes,
            unit="lanes",
        )
    generation, maximum = link.generation, link.max_generation
    below = generation is not None and maximum is not None and generation < maximum
    if below and is_busy(telemetry, busy_utilization):
        return _result(
            Check.PCIE_LINK,
            CheckStatus.WARN,
            "PcieGenDegraded",
            f"PCIe link at gen{generation} of gen{maximum} while the GPU is loaded",
            "PCIe link below its maximum generation under load",
            value=lanes,
            unit="lanes",
        )
    idle = f" (gen{maximum} when loaded; idle GPUs lower the link generation to save power)" if below else ""
    return _result(
        Check.PCIE_LINK,
        CheckStatus.PASS,
        "LinkAtFullWidth",
        f"PCIe gen{generation} x{link.width}{idle}",
        value=lanes,
        unit="lanes",
    )


def nvlink_rule(telemetry: Telemetry | None, rates: Mapping[str, float]) -> CheckResult:
    """`rates`: `<link>:<counter>` → errors per minute over the window (empty until two readings)."""
    links = telemetry.nvlinks if telemetry is not None else None
    if not links:
        return _result(Check.NVLINK, CheckStatus.SKIP, "NoNvlink", "no NVLink on this GPU (or NVML reports none)")
    down = [n.link for n in links if not n.active]
    active = len(links) - len(down)
    if down and active:
        names = ", ".join(map(str, down))
        return _result(
            Check.NVLINK,
            CheckStatus.FAIL,
            "NvlinkDown",
            f"NVLink {names} down while {active} of {len(links)} links are up",
            f"NVLink {names} down",
            value=float(len(down)),
            unit="links",
        )
    if not active:
        return _result(
            Check.NVLINK,
            CheckStatus.PASS,
            "NvlinkInactive",
            f"none of the {len(links)} NVLinks is active (no NVLink bridge or NVSwitch fabric in use)",
            value=0.0,
            unit="links",
            noteworthy=True,
        )
    over: dict[CheckStatus, list[tuple[str, float]]] = {CheckStatus.FAIL: [], CheckStatus.WARN: []}
    for key, rate in sorted(rates.items()):
        counter = key.partition(":")[2]
        warning, critical = NVLINK_LIMITS.get(counter, (float("inf"), float("inf")))
        if rate >= critical:
            over[CheckStatus.FAIL].append((key, rate))
        elif rate >= warning:
            over[CheckStatus.WARN].append((key, rate))
    for status, found in over.items():
        if found:
            worst = max(rate for _, rate in found)
            listed = ", ".join(f"link {key.replace(':', ' ')} {rate:.1f}/min" for key, rate in found[:6])
            limit = "critical" if status is CheckStatus.FAIL else "warning"
            return _result(
                Check.NVLINK,
                status,
                "NvlinkErrorRate",
                f"NVLink errors above the {limit} rate: {listed}",
                "NVLink error rate above the critical limit" if status is CheckStatus.FAIL else "NVLink errors rising",
                value=worst,
                unit="errors_per_minute",
            )
    return _result(
        Check.NVLINK,
        CheckStatus.PASS,
        "NvlinkHealthy",
        f"{active} NVLinks active, no error counter rising",
        value=0.0,
        unit="errors_per_minute",
    )


def fabric_rule(telemetry: Telemetry | None) -> CheckResult:
    fabric = telemetry.fabric if telemetry is not None else None
    if fabric is None or fabric.state == "not_supported":
        return _result(Check.FABRIC, CheckStatus.SKIP, "NotSupported", "no NVSwitch fabric registration on this GPU")
    if fabric.state == "not_started":
        return _result(
            Check.FABRIC,
            CheckStatus.FAIL,
            "FabricNotStarted",
            "the GPU has not registered with the NVSwitch fabric (is the fabric manager running?)",
            "not registered with the NVSwitch fabric",
        )
    if fabric.state == "in_progress":
        return _result(
            Check.FABRIC, CheckStatus.WARN, "FabricRegistering", "the GPU is registering with the NVSwitch fabric"
        )
    if fabric.status != 0:
        return _result(
            Check.FABRIC,
            CheckStatus.FAIL,
            "FabricRegistrationFailed",
            f"the GPU's NVSwitch fabric registration failed (NVML return code {fabric.status})",
            "NVSwitch fabric registration failed",
        )
    if fabric.degraded_bandwidth:
        return _result(
            Check.FABRIC,
            CheckStatus.WARN,
            "FabricDegraded",
            "the NVSwitch fabric reports degraded NVLink bandwidth for this GPU",
            "NVSwitch fabric bandwidth degraded",
        )
    return _result(Check.FABRIC, CheckStatus.PASS, "FabricRegistered", "registered with the NVSwitch fabric")
