"""What the backends report about a GPU: its identity (`DeviceInfo`), its readings at one moment
(`Telemetry`), and the XID errors the driver raised (`XidEvent`). Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

THROTTLE_REASONS = (
    "gpu_idle",
    "applications_clocks_setting",
    "sw_power_cap",
    "hw_slowdown",
    "sync_boost",
    "sw_thermal_slowdown",
    "hw_thermal_slowdown",
    "hw_power_brake_slowdown",
    "display_clock_setting",
)
"""NVML clock-event ("throttle") reasons, snake_case, in NVML's bit order."""


@dataclass(frozen=True)
class MigDevice:
    """One MIG device (GPU instance + compute instance) carved out of a physical GPU."""

    index: int
    uuid: str
    profile: str | None
    memory_total_bytes: int | None = None
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None


@dataclass(frozen=True)
class DeviceInfo:
    """What a GPU is: identity and static properties (from the backend's inventory)."""

    index: int
    uuid: str
    name: str
    """The driver's product name, e.g. `NVIDIA H100 80GB HBM3`."""
    pci_bus_id: str
    memory_total_bytes: int | None
    model: str | None = None
    """Catalog name (e.g. `H100-80GB`) when the device is recognised."""
    compute_capability: str | None = None
    """`major.minor`, e.g. `9.0`."""
    serial: str | None = None
    mig_enabled: bool = False
    mig_devices: tuple[MigDevice, ...] = ()


@dataclass(frozen=True)
class EccCounts:
    """ECC error counters: volatile (since the driver loaded) and aggregate (lifetime)."""

    volatile_single: int | None = None
    volatile_double: int | None = None
    aggregate_single: int | None = None
    aggregate_double: int | None = None


@dataclass(frozen=True)
class RetiredPages:
    """Dynamic page retirement (pre-Ampere ECC handling)."""

    single_bit: int | None = None
    double_bit: int | None = None
    pending: bool | None = None


@dataclass(frozen=True)
class RowRemap:
    """Row remapping (Ampere and later): remapped rows, a pending remap, a failed remap."""

    correctable: int | None = None
    uncorrectable: int | None = None
    pending: bool | None = None
    failure: bool | None = None


@dataclass(frozen=True)
class PcieLink:
    generation: int | None = None
    width: int | None = None
    max_generation: int | None = None
    max_width: int | None = None


@dataclass(frozen=True)
class Telemetry:
    """One GPU's readings at one moment. None means "no data" (not supported, not readable)."""

    index: int
    lost: bool = False
    """The GPU stopped answering (NVML_ERROR_GPU_IS_LOST)."""
    error: str | None = None
    utilization_ratio: float | None = None
    memory_utilization_ratio: float | None = None
    memory_used_bytes: int | None = None
    memory_total_bytes: int | None = None
    temperature_celsius: float | None = None
    slowdown_temperature_celsius: float | None = None
    power_watts: float | None = None
    power_limit_watts: float | None = None
    energy_joules: float | None = None
    sm_clock_hertz: float | None = None
    sm_clock_max_hertz: float | None = None
    memory_clock_hertz: float | None = None
    throttle_reasons: frozenset[str] | None = None
    ecc: EccCounts | None = None
    retired_pages: RetiredPages | None = None
    row_remap: RowRemap | None = None
    pcie: PcieLink | None = None
    compute_processes: int | None = None

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "index":
                continue
            value = getattr(self, name)
            if isinstance(value, frozenset):
                value = sorted(value)
            elif isinstance(value, EccCounts | RetiredPages | RowRemap | PcieLink):
                value = dict(value.__dict__)
            data[name] = value
        return data


@dataclass(frozen=True)
class XidEvent:
    """A critical XID error the driver reported for a GPU."""

    index: int
    xid: int
    timestamp: float
    gpu_instance_id: int | None = None
    compute_instance_id: int | None = None
