"""One `neuron-monitor` report, parsed. Pure functions.

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
  `report.neuroncore_counters.neuroncores_in_use.<core>.neuroncore_utilization` (percent; on Trn2 a
  `v3d` object beside it holds the physical cores' shares, not read),
  `report.memory_used.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage.<core>`
  (bytes by category) and `report.execution_stats.error_summary` (errors by class "for the captured
  period": generic, numerical, transient, model, runtime, hardware).

What the guide leaves open is read as AWS's own consumer of the stream reads it, the
`neuron-monitor-prometheus.py` companion script the guide ships (`process_report_entries`,
`process_neuron_hw_counters`, `process_execution_stats`):
- Every metric group carries `period` and `error`; a group whose `error` is not empty is skipped (its
  data is not read), and so is an application whose `error` is not empty. `system_data`,
  `neuron_hardware_info` and `latency_stats` values may be null.
- The hardware ECC counters, like `error_summary`, count the events of the report's period: the
  script adds each report's values to its Prometheus counters. `neuron_state.MonitorState`
  sums them over the reports.
Beyond that the parser is lenient where a real stream may surprise: a group that is not in the
documented shape (a count that is not a number, a NeuronCore key that is not an index) is skipped
and named in `Report.problems`, not the whole report; a null count reads as 0. Only a line that is
not a JSON object is refused (`ReportError`). NeuronCore `<core>` indexes are node-wide; core `c`
belongs to device `c // neuroncore_per_device_count` (the guide: cores "0"-"64" on a trn2.48xlarge).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

ERROR_CLASSES = ("generic", "numerical", "transient", "model", "runtime", "hardware")
"""`execution_stats.error_summary`'s keys, in the guide's order."""
T = TypeVar("T")
HW_COUNTERS = ("mem_ecc_corrected", "mem_ecc_uncorrected", "sram_ecc_corrected", "sram_ecc_uncorrected")


class ReportError(ValueError):
    """A line, or a group of one, that is not in neuron-monitor's shape; the message names the field."""


@dataclass(frozen=True)
class DeviceCounters:
    """One device's entry of `neuron_hw_counters.neuron_devices`: the events of one report's period."""

    index: int
    mem_ecc_corrected: int = 0
    mem_ecc_uncorrected: int = 0
    sram_ecc_corrected: int = 0
    sram_ecc_uncorrected: int = 0

    def plus(self, other: DeviceCounters) -> DeviceCounters:
        return DeviceCounters(self.index, *(getattr(self, n) + getattr(other, n) for n in HW_COUNTERS))


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
    """None when the report has no readable `neuron_hw_counters` group."""
    core_utilization: Mapping[int, float] = field(default_factory=dict)
    """NeuronCore → utilization ratio (0-1), for the cores in use."""
    core_memory_bytes: Mapping[int, int] = field(default_factory=dict)
    device_runtimes: Mapping[int, int] = field(default_factory=dict)
    """Device → number of Neuron applications using any of its NeuronCores."""
    execution_errors: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    """Device → errors by class in this report's period, for the devices of each application."""
    problems: tuple[str, ...] = ()
    """Groups (or applications) skipped: their `error`, or what was not in the documented shape."""

    @property
    def device_indexes(self) -> tuple[int, ...]:
        """The devices the report shows: those with hardware counters, else `neuron_device_count` of them."""
        if self.counters is not None:
            return tuple(sorted(c.index for c in self.counters))
        return tuple(range(self.device_count or 0))

    def device_of(self, core: int) -> int | None:
        return core // self.cores_per_device if self.cores_per_device else None


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ReportError(f"{where}: expected a JSON object, got {type(value).__name__} {value!r:.60}")
    return value


def _count(value: Any, where: str) -> int:
    """A non-negative count; null reads as 0 (no event reported)."""
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ReportError(f"{where}: expected a non-negative number, got {value!r:.60}")
    return int(value)


def _optional_count(value: Any, where: str) -> int | None:
    return None if value is None else _count(value, where)


def _index(key: str, where: str) -> int:
    if not key.isdigit():
        raise ReportError(f"{where}: expected a NeuronCore index, got key {key!r}")
    return int(key)


def _group(parent: Mapping[str, Any], name: str, where: str, problems: list[str]) -> dict[str, Any] | None:
    """A metric group, or None when it is absent, reports an `error`, or is not an object (noted)."""
    value = parent.get(name)
    if value is None:
        return None
    if not isinstance(value, dict):
        problems.append(f"{where}.{name}: expected a JSON object, got {type(value).__name__}")
        return None
    error = value.get("error")
    if error:
        problems.append(f"{where}.{name}: neuron-monitor reports an error: {str(error)[:200]}")
        return None
    return value


def _tolerant(parse: Callable[[], T], problems: list[str]) -> T | None:
    """`parse()`, or None with its problem noted when the group is not in the documented shape."""
    try:
        return parse()
    except ReportError as error:
        problems.append(str(error))
        return None


def _counters(group: dict[str, Any]) -> tuple[DeviceCounters, ...]:
    devices = group.get("neuron_devices") or []
    if not isinstance(devices, list):
        raise ReportError(f"neuron_hw_counters.neuron_devices: expected an array, got {devices!r:.60}")
    found = []
    for position, entry in enumerate(devices):
        where = f"neuron_hw_counters.neuron_devices[{position}]"
        data = _object(entry, where)
        index = data.get("neuron_device_index")
        if index is None:
            raise ReportError(f"{where}.neuron_device_index: missing")
        counts = (_count(data.get(name), f"{where}.{name}") for name in HW_COUNTERS)
        found.append(DeviceCounters(_count(index, f"{where}.neuron_device_index"), *counts))
    return tuple(found)


@dataclass
class _Runtimes:
    """The per-core and per-device sums over the report's Neuron applications (being built)."""

    utilization: dict[int, float] = field(default_factory=dict)
    memory: dict[int, int] = field(default_factory=dict)
    runtimes: dict[int, int] = field(default_factory=dict)
    errors: dict[int, dict[str, int]] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)

    def add(self, runtime: Any, where: str, cores_per_device: int | None, devices: tuple[int, ...]) -> None:
        """Add one application; `devices` take its errors when its NeuronCores are unknown."""
        entry = _tolerant(lambda: _object(runtime, where), self.problems)
        if entry is None:
            return
        if entry.get("error"):
            self.problems.append(f"{where}: neuron-monitor reports an error: {str(entry['error'])[:200]}")
            return
        report = _tolerant(lambda: _object(entry.get("report"), f"{where}.report"), self.problems) or {}
        where = f"{where}.report"
        utilization = _group(report, "neuroncore_counters", where, self.problems)
        memory = _group(report, "memory_used", where, self.problems)
        stats = _group(report, "execution_stats", where, self.problems)
        cores = _tolerant(lambda: _utilization(utilization or {}, where), self.problems) or {}
        used = _tolerant(lambda: _memory(memory or {}, where), self.problems) or {}
        errors = _tolerant(lambda: _error_summary(stats or {}, where), self.problems) or {}
        for core, ratio in cores.items():
            self.utilization[core] = min(self.utilization.get(core, 0.0) + ratio, 1.0)
        for core, amount in used.items():
            self.memory[core] = self.memory.get(core, 0) + amount
        in_use = set(cores) | set(used)
        owners = {core // cores_per_device for core in in_use} if cores_per_device and in_use else set()
        for device in owners:
            self.runtimes[device] = self.runtimes.get(device, 0) + 1
        # The guide does not say which device an error happened on: charge the application's devices,
        # or every device when the application's cores are unknown.
        for device in (owners or set(devices)) if any(errors.values()) else ():
            totals = self.errors.setdefault(device, dict.fromkeys(ERROR_CLASSES, 0))
            for name, count in errors.items():
                totals[name] += count


def _utilization(group: dict[str, Any], where: str) -> dict[int, float]:
    """NeuronCore → utilization ratio of one application's `neuroncore_counters`."""
    where = f"{where}.neuroncore_counters"
    in_use = _object(group.get("neuroncores_in_use"), f"{where}.neuroncores_in_use")
    found = {}
    for key, data in in_use.items():
        at = f"{where}.neuroncores_in_use.{key}"
        percent = _object(data, at).get("neuroncore_utilization")
        if percent is None:
            percent = 0.0
        if isinstance(percent, bool) or not isinstance(percent, int | float) or percent < 0:
            raise ReportError(f"{at}.neuroncore_utilization: expected a percentage, got {percent!r:.60}")
        found[_index(key, f"{where}.neuroncores_in_use")] = percent / 100.0
    return found


def _memory(group: dict[str, Any], where: str) -> dict[int, int]:
    """NeuronCore → device memory of one application's `memory_used`, summed over its categories."""
    where = f"{where}.memory_used.neuron_runtime_used_bytes.usage_breakdown.neuroncore_memory_usage"
    used = _object(group.get("neuron_runtime_used_bytes"), where)
    breakdown = _object(_object(used.get("usage_breakdown"), where).get("neuroncore_memory_usage"), where)
    found = {}
    for key, categories in breakdown.items():
        by_category = _object(categories, f"{where}.{key}")
        total = sum(_count(value, f"{where}.{key}.{name}") for name, value in by_category.items())
        found[_index(key, where)] = total
    return found


def _error_summary(group: dict[str, Any], where: str) -> dict[str, int]:
    """`execution_stats.error_summary` by class. The guide's example spells `numerical`, its field list
    `numeric`: either is read."""
    where = f"{where}.execution_stats.error_summary"
    summary = _object(group.get("error_summary"), where)
    if "numeric" in summary and "numerical" not in summary:
        summary = {**summary, "numerical": summary["numeric"]}
    return {name: _count(summary.get(name), f"{where}.{name}") for name in ERROR_CLASSES}


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def parse_report(line: str) -> Report:
    """A report from one line of neuron-monitor's output; ReportError when the line is no report at all."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ReportError(f"not JSON ({exc.msg} at column {exc.colno}): {line[:80]!r}") from None
    root = _object(document, "report")
    problems: list[str] = []
    hardware = _tolerant(lambda: _object(root.get("neuron_hardware_info"), "neuron_hardware_info"), problems) or {}

    def hardware_count(name: str) -> int | None:
        return _tolerant(lambda: _optional_count(hardware.get(name), f"neuron_hardware_info.{name}"), problems)

    cores_per_device = hardware_count("neuroncore_per_device_count")
    system = _tolerant(lambda: _object(root.get("system_data"), "system_data"), problems) or {}
    hw_group = _group(system, "neuron_hw_counters", "system_data", problems)
    counters = _tolerant(lambda: _counters(hw_group), problems) if hw_group is not None else None
    device_count = hardware_count("neuron_device_count")
    devices = Report(counters=counters, device_count=device_count).device_indexes
    runtimes = root.get("neuron_runtime_data") or []
    if not isinstance(runtimes, list):
        problems.append(f"neuron_runtime_data: expected an array, got {type(runtimes).__name__}")
        runtimes = []
    sums = _Runtimes(problems=problems)
    for position, runtime in enumerate(runtimes):
        sums.add(runtime, f"neuron_runtime_data[{position}]", cores_per_device, devices)
    instance = root.get("instance_info")
    return Report(
        device_type=_text(hardware.get("neuron_device_type")),
        device_count=device_count,
        device_memory_bytes=hardware_count("neuron_device_memory_size"),
        cores_per_device=cores_per_device or None,
        instance_type=_text(instance.get("instance_type")) if isinstance(instance, dict) else None,
        hardware_error=str(hardware.get("error") or "") or None,
        counters=counters,
        core_utilization=sums.utilization,
        core_memory_bytes=sums.memory,
        device_runtimes=sums.runtimes,
        execution_errors=sums.errors,
        problems=tuple(problems),
    )
