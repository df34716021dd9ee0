"""One `neuron-monitor` report, parsed, and what it says about each Neuron device. Pure functions.

`neuron-monitor` (AWS Neuron tools, `aws-neuron-tools`) writes one complete JSON report per line
to stdout. Its schema is AWS's "Neuron Monitor User Guide" (aws-neuron-sdk,
tools/neuron-sys-tools/neuron-monitor-user-guide.rst); the fields read here:

- `neuron_hardware_info` (always present): `neuron_device_type` (e.g. `trainium2`),
  `neuron_device_count`, `neuron_device_memory_size` (bytes per device),
  `neuroncore_per_device_count`, `error` (set when the Neuron driver is missing or not running).
- `instance_info` (always present): `instance_type` (e.g. `trn2.48xlarge`).
- `system_data.neuron_hw_counters.neuron_devices[]`: `neuron_device_index`, `mem_ecc_corrected`,
  `mem_ecc_uncorrected` (device DRAM, i.e. HBM), `sram_ecc_corrected`, `sram_ecc_uncorrected`.
- `neuron_runtime_data[]`, one entry per running Neuron application (none when nothing runs), with
  `report.neuroncore_counters.neuroncores_in_use.<core>.neuroncore_utilization` (percent),
  `report.memory_used.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage.<core>`
  (bytes by category) and `report.execution_stats.error_summary` (errors by class "for the captured
  period": generic, numerical, transient, model, runtime, hardware).

Where the guide is silent, this module assumes, and says so:
- NeuronCore `<core>` indexes are node-wide; core `c` belongs to device `c // neuroncore_per_device_count`.
- The hardware counters count since the Neuron driver loaded (they are reported as `EccCounts`'
  volatile counts); they are not reset per period.
- The guide gives no per-device serial or PCI address: a device is named by its index.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelpool_agent.model import DeviceInfo, EccCounts, Telemetry
from accelpool_core import catalog

ERROR_CLASSES = ("generic", "numerical", "transient", "model", "runtime", "hardware")
"""`execution_stats.error_summary`'s keys, in the guide's order."""

DEVICE_TYPES: Mapping[str, str] = {"trainium": "Trainium", "trainium2": "Trainium2", "inferentia2": "Inferentia2"}
"""`neuron_device_type` → catalog name (the guide's example says `trainium2`; the others follow its spelling)."""


class ReportError(ValueError):
    """A line that is not a neuron-monitor report; the message names the field and what was found."""


@dataclass(frozen=True)
class DeviceCounters:
    """One device's entry of `neuron_hw_counters.neuron_devices`."""

    index: int
    mem_ecc_corrected: int = 0
    mem_ecc_uncorrected: int = 0
    sram_ecc_corrected: int = 0
    sram_ecc_uncorrected: int = 0


@dataclass(frozen=True)
class Report:
    """What one report says, by device and NeuronCore index."""

    device_type: str | None = None
    device_count: int | None = None
    device_memory_bytes: int | None = None
    cores_per_device: int | None = None
    instance_type: str | None = None
    hardware_error: str | None = None
    """`neuron_hardware_info.error`: set when the Neuron driver is not installed or not running."""
    counters: tuple[DeviceCounters, ...] | None = None
    """None when the report has no `neuron_hw_counters` group."""
    core_utilization: Mapping[int, float] = field(default_factory=dict)
    """NeuronCore → utilization ratio (0-1), for the cores in use."""
    core_memory_bytes: Mapping[int, int] = field(default_factory=dict)
    device_runtimes: Mapping[int, int] = field(default_factory=dict)
    """Device → number of Neuron applications using any of its NeuronCores."""
    execution_errors: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Device → errors by class in this report's period, for the devices of each application."""

    @property
    def device_indexes(self) -> tuple[int, ...]:
        return _device_indexes(self.counters, self.device_count)

    def device_of(self, core: int) -> int | None:
        return core // self.cores_per_device if self.cores_per_device else None


def _device_indexes(counters: tuple[DeviceCounters, ...] | None, device_count: int | None) -> tuple[int, ...]:
    """The devices a report shows: those with hardware counters, else `neuron_device_count` of them."""
    if counters is not None:
        return tuple(sorted(c.index for c in counters))
    return tuple(range(device_count or 0))


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReportError(f"{where}: expected a JSON object, got {type(value).__name__} {value!r:.60}")
    return value


def _count(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ReportError(f"{where}: expected a non-negative number, got {value!r:.60}")
    return int(value)


def _optional_count(value: Any, where: str) -> int | None:
    return None if value is None else _count(value, where)


def _index(key: str, where: str) -> int:
    if not key.isdigit():
        raise ReportError(f"{where}: expected a NeuronCore index, got key {key!r}")
    return int(key)


def _counters(group: dict[str, Any]) -> tuple[DeviceCounters, ...]:
    devices = group.get("neuron_devices") or []
    if not isinstance(devices, list):
        raise ReportError(f"neuron_hw_counters.neuron_devices: expected an array, got {devices!r:.60}")
    found = []
    for position, entry in enumerate(devices):
        where = f"neuron_hw_counters.neuron_devices[{position}]"
        data = _object(entry, where)
        found.append(
            DeviceCounters(
                index=_count(data.get("neuron_device_index"), f"{where}.neuron_device_index"),
                **{
                    name: _count(data.get(name, 0), f"{where}.{name}")
                    for name in (
                        "mem_ecc_corrected",
                        "mem_ecc_uncorrected",
                        "sram_ecc_corrected",
                        "sram_ecc_uncorrected",
                    )
                },
            )
        )
    return tuple(found)


@dataclass
class _Runtimes:
    """The per-core and per-device sums over the report's Neuron applications (being built)."""

    utilization: dict[int, float] = field(default_factory=dict)
    memory: dict[int, int] = field(default_factory=dict)
    runtimes: dict[int, int] = field(default_factory=dict)
    errors: dict[int, dict[str, int]] = field(default_factory=dict)

    def add(self, report: dict[str, Any], where: str, cores_per_device: int | None, devices: tuple[int, ...]) -> None:
        """Add one application's `report`; `devices` take its errors when its NeuronCores are unknown."""
        cores = self._add_utilization(report, where) | self._add_memory(report, where)
        owners = {core // cores_per_device for core in cores} if cores_per_device and cores else set()
        for device in owners:
            self.runtimes[device] = self.runtimes.get(device, 0) + 1
        errors = _error_summary(report, where)
        # The guide does not say which device an error happened on: charge the application's devices,
        # or every device when the application's cores are unknown.
        for device in (owners or set(devices)) if any(errors.values()) else ():
            totals = self.errors.setdefault(device, dict.fromkeys(ERROR_CLASSES, 0))
            for name, count in errors.items():
                totals[name] += count

    def _add_utilization(self, report: dict[str, Any], where: str) -> set[int]:
        where = f"{where}.report.neuroncore_counters"
        in_use = _object(_object(report.get("neuroncore_counters"), where).get("neuroncores_in_use"), where)
        for key, data in in_use.items():
            at = f"{where}.neuroncores_in_use.{key}"
            percent = _object(data, at).get("neuroncore_utilization", 0.0)
            if isinstance(percent, bool) or not isinstance(percent, int | float) or percent < 0:
                raise ReportError(f"{at}.neuroncore_utilization: expected a percentage, got {percent!r:.60}")
            core = _index(key, f"{where}.neuroncores_in_use")
            self.utilization[core] = min(self.utilization.get(core, 0.0) + percent / 100.0, 1.0)
        return {_index(key, where) for key in in_use}

    def _add_memory(self, report: dict[str, Any], where: str) -> set[int]:
        where = f"{where}.report.memory_used.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage"
        used = _object(_object(report.get("memory_used"), where).get("neuron_runtime_used_bytes"), where)
        breakdown = _object(_object(used.get("usage_breakdown"), where).get("neuroncore_memory_usage"), where)
        for key, categories in breakdown.items():
            core = _index(key, where)
            by_category = _object(categories, f"{where}.{key}")
            total = sum(_count(value, f"{where}.{key}.{name}") for name, value in by_category.items())
            self.memory[core] = self.memory.get(core, 0) + total
        return {_index(key, where) for key in breakdown}


def _error_summary(report: dict[str, Any], where: str) -> dict[str, int]:
    """`execution_stats.error_summary` by class. The guide's example spells `numerical`, its field list
    `numeric`: either is read."""
    where = f"{where}.report.execution_stats.error_summary"
    summary = _object(_object(report.get("execution_stats"), where).get("error_summary"), where)
    if "numeric" in summary and "numerical" not in summary:
        summary = {**summary, "numerical": summary["numeric"]}
    return {name: _count(summary.get(name, 0), f"{where}.{name}") for name in ERROR_CLASSES}


def parse_report(line: str) -> Report:
    """A report from one line of neuron-monitor's output; ReportError names what is wrong."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ReportError(f"not JSON ({exc.msg} at column {exc.colno}): {line[:80]!r}") from None
    root = _object(document, "report")
    hardware = _object(root.get("neuron_hardware_info"), "neuron_hardware_info")
    cores_per_device = _optional_count(hardware.get("neuroncore_per_device_count"), "neuroncore_per_device_count")
    system = _object(root.get("system_data"), "system_data")
    hw_counters = system.get("neuron_hw_counters")
    counters = None if hw_counters is None else _counters(_object(hw_counters, "neuron_hw_counters"))
    device_count = _optional_count(hardware.get("neuron_device_count"), "neuron_hardware_info.neuron_device_count")
    devices = _device_indexes(counters, device_count)
    runtimes = root.get("neuron_runtime_data") or []
    if not isinstance(runtimes, list):
        raise ReportError(f"neuron_runtime_data: expected an array, got {runtimes!r:.60}")
    sums = _Runtimes()
    for position, runtime in enumerate(runtimes):
        where = f"neuron_runtime_data[{position}]"
        sums.add(_object(_object(runtime, where).get("report"), f"{where}.report"), where, cores_per_device, devices)
    device_type = hardware.get("neuron_device_type")
    instance_type = _object(root.get("instance_info"), "instance_info").get("instance_type")
    return Report(
        device_type=device_type if isinstance(device_type, str) and device_type else None,
        device_count=device_count,
        device_memory_bytes=_optional_count(hardware.get("neuron_device_memory_size"), "neuron_device_memory_size"),
        cores_per_device=cores_per_device,
        instance_type=instance_type if isinstance(instance_type, str) and instance_type else None,
        hardware_error=str(hardware.get("error") or "") or None,
        counters=counters,
        core_utilization=sums.utilization,
        core_memory_bytes=sums.memory,
        device_runtimes=sums.runtimes,
        execution_errors=sums.errors,
    )


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


def device_telemetry(report: Report, index: int, execution_errors: Mapping[str, int] | None) -> Telemetry:
    """One device's readings. A NeuronCore the report does not list as in use was idle (0%)."""
    per_device = report.cores_per_device
    cores = range(index * per_device, (index + 1) * per_device) if per_device else range(0)
    ratios = tuple(report.core_utilization.get(core, 0.0) for core in cores) if per_device else None
    counters = next((c for c in report.counters or () if c.index == index), None)
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
    """What the reports so far say: the latest one, every device ever seen, execution errors since the start."""

    report: Report | None = None
    seen: frozenset[int] = frozenset()
    """Every device index a report showed (a device missing from a later report is lost, not gone)."""
    errors: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Device → execution errors by class, summed over every report's period."""
    reports: int = 0

    def with_report(self, report: Report) -> MonitorState:
        errors = {device: dict(counts) for device, counts in self.errors.items()}
        for device, counts in report.execution_errors.items():
            totals = errors.setdefault(device, dict.fromkeys(ERROR_CLASSES, 0))
            for name, count in counts.items():
                totals[name] = totals.get(name, 0) + count
        seen = self.seen | set(report.device_indexes) | set(range(report.device_count or 0))
        return MonitorState(report=report, seen=frozenset(seen), errors=errors, reports=self.reports + 1)

    def telemetry(self) -> list[Telemetry]:
        """Every device seen: its readings, or lost when the latest report no longer shows it."""
        if self.report is None:
            return []
        shown = set(self.report.device_indexes)
        return [
            device_telemetry(self.report, index, self.errors.get(index, dict.fromkeys(ERROR_CLASSES, 0)))
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
