"""Severity and recommended action of every check result, and the node's findings.

Each result maps to a severity in NVIDIA Health Validation's terms (`severity`): fail → CRITICAL,
warn → WARNING, skip → UNKNOWN, pass → PASS, or INFO for a pass worth noting. Each asks for a
step of the action ladder (`ACTIONS`, applied by `with_action`; an XID's own step comes from
NVIDIA's XID catalog, `xids.ladder_action`). Where a step comes from:

- GpuLost, GpuMissing → restart-os: XID 79 ("fallen off the bus") is RESTART_BM in NVIDIA's XID
  catalog; a GPU that did not enumerate needs the host to boot again (then service, if still gone).
- Recovery<...> → the step the driver itself asks for (NVML's GPU recovery action: reset, drain
  and reset, bus reset → reset-gpu; node or system reboot → restart-os; drain P2P → drain).
- EccDoubleBitError, RowRemapPending, RetiredPagesPending → reset-gpu: NVIDIA's GPU memory error
  management: the remap / retirement a DBE leaves pending takes effect at the next GPU reset.
- RowRemapFailure, RetiredPagesLimit → service-required: the same guide: a failed remap, or
  retired pages at the limit (DCGM_LIMIT_MAX_RETIRED_PAGES), means the GPU should be replaced.
- WrongResults → service-required: silent data corruption is not cured by a reset.
- CudaError, SanityMismatch, CheckTimeout, ComputeCrashed, SlowMatmul, LowBandwidth,
  ClocksStuckLow, PowerStateStuck, PCIe and NVLink error rates → reset-gpu: a reset re-initialises the
  GPU, retrains its PCIe link (secondary bus reset) and its NVLinks (XID 74's NVLink workflow).
- NvlinkDown → reset-gpu: NVIDIA Health Validation's `nvlink_active` check (no inactive link
  tolerated, CRITICAL) recommends drain, then reset_gpu → restart_os → service_required.
- FabricNotStarted, FabricRegistrationFailed → restart-os: NVIDIA's Fabric Manager guide: a GPU
  that fails to register with the fabric loses its NVLink peer-to-peer capability, and CUDA
  fails to initialise (cudaErrorSystemNotReady) until the fabric manager has initialised the
  system; the fabric manager trains the NVLinks and registers the GPUs when it starts, at boot.
- IbPortDown → restart-os: a restart reloads the HCA's driver and firmware and retrains the link;
  a port still down after it needs its cable, transceiver or switch port serviced.
- PowerAboveLimit → service-required: the board's power capping or sensor is faulty.
- Warnings that need nothing of the node (throttling, rising error counters, a slower GPU) → none.

The node's recommended action is the strongest action among its CRITICAL findings
(`NodeReport.action`). `findings` groups the results that did not simply pass over the GPUs,
worst first, with stable text (the result's summary: no measured numbers). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from accelpool_agent.model import CHECK_ORDER, Check, CheckResult, CheckStatus, GpuReport
from accelpool_core.protocol import Action, Finding, HealthStatus, Severity

ACTIONS: dict[str, Action] = {
    "GpuLost": Action.RESTART_OS,
    "RecoveryGpuReset": Action.RESET_GPU,
    "RecoveryDrainAndReset": Action.RESET_GPU,
    "RecoveryBusReset": Action.RESET_GPU,
    "RecoveryNodeReboot": Action.RESTART_OS,
    "RecoverySystemReboot": Action.RESTART_OS,
    "RecoveryDrainP2p": Action.DRAIN,
    "GpuMissing": Action.RESTART_OS,
    "EccDoubleBitError": Action.RESET_GPU,
    "RowRemapPending": Action.RESET_GPU,
    "RetiredPagesPending": Action.RESET_GPU,
    "RowRemapFailure": Action.SERVICE_REQUIRED,
    "RetiredPagesLimit": Action.SERVICE_REQUIRED,
    "WrongResults": Action.SERVICE_REQUIRED,
    "CudaError": Action.RESET_GPU,
    "SanityMismatch": Action.RESET_GPU,
    "CheckTimeout": Action.RESET_GPU,
    "ComputeCrashed": Action.RESET_GPU,
    "SlowMatmul": Action.RESET_GPU,
    "LowBandwidth": Action.RESET_GPU,
    "ClocksStuckLow": Action.RESET_GPU,
    "PowerStateStuck": Action.RESET_GPU,
    "PowerAboveLimit": Action.SERVICE_REQUIRED,
    "PcieLinkDegraded": Action.RESET_GPU,
    "PcieGenDegraded": Action.RESET_GPU,
    "NvlinkDown": Action.RESET_GPU,
    "FabricNotStarted": Action.RESTART_OS,
    "FabricRegistrationFailed": Action.RESTART_OS,
    "FabricDegraded": Action.RESET_GPU,
    "IbPortDown": Action.RESTART_OS,
}
"""Reason → the ladder step it asks for; a reason missing here asks for nothing (`none`)."""

_CRITICAL_ONLY = {"NvlinkErrorRate": Action.RESET_GPU}
"""Reasons whose warning asks for nothing but whose failure asks for this step."""

_RANK = {Severity.CRITICAL: 4, Severity.WARNING: 3, Severity.UNKNOWN: 2, Severity.INFO: 1, Severity.PASS: 0}
_DETAIL_LIMIT = 200


def severity(result: CheckResult) -> Severity:
    if result.status is CheckStatus.FAIL:
        return Severity.CRITICAL
    if result.status is CheckStatus.WARN:
        return Severity.WARNING
    if result.status is CheckStatus.SKIP:
        return Severity.UNKNOWN
    return Severity.INFO if result.noteworthy else Severity.PASS


def with_action(result: CheckResult) -> CheckResult:
    """The result with the ladder step it asks for (a rule's own choice, e.g. an XID's, stands)."""
    if result.action is not None or result.status in (CheckStatus.PASS, CheckStatus.SKIP):
        return result
    action = ACTIONS.get(result.reason)
    if action is None and result.status is CheckStatus.FAIL:
        action = _CRITICAL_ONLY.get(result.reason)
    return replace(result, action=action or Action.NONE)


def _finding(result: CheckResult, gpus: list[int]) -> Finding:
    detail = result.summary or result.reason
    return Finding(
        check=result.check.value,
        severity=severity(result),
        reason=result.reason,
        action=result.action or Action.NONE,
        gpus=gpus,
        detail=detail if len(detail) <= _DETAIL_LIMIT else detail[: _DETAIL_LIMIT - 3] + "...",
    )


def findings(
    gpus: Sequence[GpuReport],
    node_checks: Sequence[CheckResult],
    *,
    status: HealthStatus,
    reason: str,
    message: str,
) -> tuple[Finding, ...]:
    """Every result that is not a plain pass or a skip, one finding per (check, reason, detail) with
    its GPUs, worst first; plus, when the node's verdict is Unknown, why (severity UNKNOWN)."""
    grouped: dict[tuple[Check, str, str], tuple[CheckResult, list[int]]] = {}
    for gpu in gpus:
        for result in gpu.checks:
            if severity(result) in (Severity.PASS, Severity.UNKNOWN):
                continue
            key = (result.check, result.reason, result.summary)
            grouped.setdefault(key, (with_action(result), []))[1].append(gpu.device.index)
    found = [_finding(result, indexes) for result, indexes in grouped.values()]
    found += [
        _finding(with_action(result), [])
        for result in node_checks
        if severity(result) not in (Severity.PASS, Severity.UNKNOWN)
    ]
    if status is HealthStatus.UNKNOWN:
        unknown = CheckResult(Check.DEVICE, CheckStatus.SKIP, reason, message, summary=message)
        found.append(_finding(unknown, []))
    order = {check.value: position for check, position in CHECK_ORDER.items()}
    found.sort(key=lambda f: (-_RANK[f.severity], -f.action.rank, order.get(f.check, len(order)), f.gpus))
    return tuple(found)
