"""Value objects the device agent passes between its parts.

Pure data, no I/O. The backends produce `DeviceInfo`, `Telemetry` and `XidEvent`; the compute
children produce `Measurement`; the rules (`accelpool_agent.rules`) turn those into
`CheckResult`; the agent folds the results into `GpuReport` and `NodeReport`, which the
Prometheus exporter, the node reporter and the `check` CLI read.

Three modules, one per stage: `model.devices` (what the backends report), `model.checks` (what
is measured and concluded), `model.reports` (what the agent publishes). Import from here.
"""

from __future__ import annotations

from accelpool_agent.model.checks import (
    CHECK_ORDER,
    COMPUTE_CHECKS,
    DTYPES,
    NODE_CHECKS,
    Check,
    CheckResult,
    CheckStatus,
    CheckVerdict,
    Measurement,
    worst,
)
from accelpool_agent.model.devices import (
    FABRIC_STATES,
    NVLINK_COUNTERS,
    THROTTLE_REASONS,
    DeviceInfo,
    DriverVersions,
    EccCounts,
    FabricInfo,
    IbPort,
    MigDevice,
    NvLink,
    PcieLink,
    RetiredPages,
    RowRemap,
    Telemetry,
    XidEvent,
)
from accelpool_agent.model.reports import GpuReport, NodeReport

__all__ = [
    "CHECK_ORDER",
    "COMPUTE_CHECKS",
    "DTYPES",
    "FABRIC_STATES",
    "NODE_CHECKS",
    "NVLINK_COUNTERS",
    "THROTTLE_REASONS",
    "Check",
    "CheckResult",
    "CheckStatus",
    "CheckVerdict",
    "DeviceInfo",
    "DriverVersions",
    "EccCounts",
    "FabricInfo",
    "GpuReport",
    "IbPort",
    "Measurement",
    "MigDevice",
    "NodeReport",
    "NvLink",
    "PcieLink",
    "RetiredPages",
    "RowRemap",
    "Telemetry",
    "XidEvent",
    "worst",
]
