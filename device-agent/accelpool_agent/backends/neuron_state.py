"""What neuron-monitor's reports so far say about each Neuron device: the inventory and its telemetry. Pure.

`MonitorState` folds the reports (`neuron_report.Report`) one by one: the latest report says which
devices are there now and what they do; every device a report ever showed stays in the inventory (one
missing from the latest report is lost, not gone); the per-period counts (the hardware ECC counters and
the execution errors by class) are summed over the reports, so a device's counts are those since the
agent started reading, and an uncorrected error stays counted after its period (see `neuron_report`
for why these are per period).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from accelpool_agent.backends.neuron_report import ERROR_CLASSES, DeviceCounters, Report
from accelpool_agent.model import DeviceInfo, EccCounts, Telemetry
from accelpool_core import catalog

DEVICE_TYPES: Mapping[str, str] = {"trainium": "Trainium", "trainium2": "Trainium2", "inferentia2": "Inferentia2"}
"""`neuron_device_type` → catalog name (the guide's example says `trainium2`; the others follow its spelling)."""


def model_for(report: Report) -> catalog.Accelerator | None:
    """The catalog entry: from `neuron_device_type`, else from the instance type (`trn2.48xlarge`)."""
    name = DEVICE_TYPES.get((report.device_type or "").lower())
    if name is not None:
        return catalog.lookup(name)
    instance_type = (report.instance_type or "").lower()
    for accelerator in catalog.ACCELERATORS:
        if instance_type in (t.lower() for t in accelerator.detection.instance_types):
            return accelerator
    return None


def device_info(report: Report, index: int) -> DeviceInfo:
    """A Neuron device as the inventory shows it (named by index: the report has no serial or PCI address)."""
    accelerator = model_for(report)
    kind = report.device_type or (accelerator.model.lower() if accelerator else "neuron")
    return DeviceInfo(
        index=index,
        uuid=f"neuron-device-{index}",
        name=f"AWS {kind}",
        pci_bus_id="",
        memory_total_bytes=report.device_memory_bytes,
        model=accelerator.name if accelerator else None,
    )


def device_telemetry(
    report: Report, index: int, counters: DeviceCounters | None, execution_errors: Mapping[str, int] | None
) -> Telemetry:
    """One device's readings; `counters` and `execution_errors` summed since the agent started. A NeuronCore
    the report does not list as in use was idle (0%)."""
    per_device = report.cores_per_device
    cores = range(index * per_device, (index + 1) * per_device) if per_device else range(0)
    ratios = tuple(report.core_utilization.get(core, 0.0) for core in cores) if per_device else None
    return Telemetry(
        index=index,
        utilization_ratio=round(sum(ratios) / len(ratios), 4) if ratios else None,
        memory_used_bytes=sum(report.core_memory_bytes.get(core, 0) for core in cores) if per_device else None,
        memory_total_bytes=report.device_memory_bytes,
        compute_processes=report.device_runtimes.get(index, 0) if per_device else None,
        ecc=EccCounts(volatile_single=counters.mem_ecc_corrected, volatile_double=counters.mem_ecc_uncorrected)
        if counters
        else None,
        core_utilization_ratios=ratios,
        sram_ecc=EccCounts(volatile_single=counters.sram_ecc_corrected, volatile_double=counters.sram_ecc_uncorrected)
        if counters
        else None,
        execution_errors=execution_errors,
    )


@dataclass(frozen=True)
class MonitorState:
    """What the reports so far say: the latest one, every device ever seen, counts summed since the start."""

    report: Report | None = None
    seen: frozenset[int] = frozenset()
    """Every device index a report showed (a device missing from a later report is lost, not gone)."""
    errors: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Device → execution errors by class, summed over every report's period."""
    counters: Mapping[int, DeviceCounters] = field(default_factory=dict)
    """Device → hardware ECC events, summed over every report's period."""
    reports: int = 0

    def with_report(self, report: Report) -> MonitorState:
        errors = {device: dict(counts) for device, counts in self.errors.items()}
        for device, counts in report.execution_errors.items():
            totals = errors.setdefault(device, dict.fromkeys(ERROR_CLASSES, 0))
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        counters = dict(self.counters)
        for period in report.counters or ():
            counters[period.index] = counters[period.index].plus(period) if period.index in counters else period
        seen = self.seen | set(report.device_indexes) | set(range(report.device_count or 0))
        return MonitorState(
            report=report, seen=frozenset(seen), errors=errors, counters=counters, reports=self.reports + 1
        )

    def without_report(self) -> MonitorState:
        """The state while neuron-monitor is down: no latest report, everything counted so far kept."""
        return MonitorState(seen=self.seen, errors=self.errors, counters=self.counters, reports=self.reports)

    def telemetry(self) -> list[Telemetry]:
        """Every device seen: its readings, or lost when the latest report no longer shows it."""
        if self.report is None:
            return []
        shown = set(self.report.device_indexes)
        counted = self.report.counters is not None or bool(self.counters)
        return [
            device_telemetry(
                self.report,
                index,
                self.counters.get(index, DeviceCounters(index)) if counted else None,
                self.errors.get(index, dict.fromkeys(ERROR_CLASSES, 0)),
            )
            if index in shown
            else Telemetry(
                index=index, lost=True, error=f"Neuron device {index} is missing from neuron-monitor's report"
            )
            for index in sorted(self.seen)
        ]

    def inventory(self) -> list[DeviceInfo]:
        if self.report is None:
            return []
        return [device_info(self.report, index) for index in sorted(self.seen)]
