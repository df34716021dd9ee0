"""What the backends report about a GPU: its identity (`DeviceInfo`), its readings at one moment
(`Telemetry`: with its PCIe link, NVLinks and NVSwitch fabric registration), the XID errors the
driver raised (`XidEvent`), and about the host: its InfiniBand / RoCE ports (`IbPort`) and the
driver's versions (`DriverVersions`). Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
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
    event: str | None = None
    """AMD Instinct: the amdsmi event's name (`AmdSmiEvtNotificationType`: RING_HANG, GPU_PRE_RESET, ...);
    `xid` then holds that type's value (AMDSMI_EVT_NOTIF_*), not an NVIDIA XID. None for NVIDIA's XIDs."""


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


NVLINK_COUNTERS = ("replay", "recovery", "crc_flit", "crc_data")
"""NVML's NVLink data-link error counters (NVML_NVLINK_ERROR_DL_REPLAY, _RECOVERY, _CRC_FLIT, _CRC_DATA)."""


@dataclass(frozen=True)
class NvLink:
    """One NVLink of a GPU: whether it is active, and its error counters (None: not readable)."""

    link: int
    active: bool
    errors: Mapping[str, int] = field(default_factory=dict)
    """`NVLINK_COUNTERS` name → count since the driver loaded (a counter NVML does not give is absent)."""


FABRIC_STATES = ("not_supported", "not_started", "in_progress", "completed")
"""NVML_GPU_FABRIC_STATE_* in value order (nvml.h)."""


@dataclass(frozen=True)
class FabricInfo:
    """A GPU's registration with the NVSwitch fabric (NVML's GPU fabric info, Hopper and later)."""

    state: str
    """One of `FABRIC_STATES`."""
    status: int = 0
    """The registration's NVML return code once completed (0 = NVML_SUCCESS)."""
    degraded_bandwidth: bool | None = None
    """The fabric reports reduced NVLink bandwidth for this GPU (health mask, NVML fabric info v2+)."""


@dataclass(frozen=True)
class IbPort:
    """One port of an RDMA device under /sys/class/infiniband (InfiniBand, or Ethernet for RoCE)."""

    device: str
    """The HCA, e.g. `mlx5_0`."""
    port: int
    state: int
    """Logical state: 1 DOWN, 2 INIT, 3 ARMED, 4 ACTIVE, 5 ACTIVE_DEFER (the number of `4: ACTIVE`)."""
    state_name: str
    phys_state: int
    """Physical state: 1 Sleep, 2 Polling, 3 Disabled, 4 PortConfigurationTraining, 5 LinkUp, ..."""
    phys_state_name: str
    link_layer: str = "InfiniBand"
    """`InfiniBand` or `Ethernet` (RoCE)."""
    rate_gbps: float | None = None
    counters: Mapping[str, int] = field(default_factory=dict)
    """Error counter name (sysfs file) → value; a counter without a performance-management agent is absent."""

    @property
    def name(self) -> str:
        return f"{self.device}/{self.port}"

    @property
    def up(self) -> bool:
        return self.state == 4 and self.phys_state == 5

    @property
    def disabled(self) -> bool:
        """Administratively disabled (phys_state 3): not a fault, the port is not meant to be used."""
        return self.phys_state == 3


@dataclass(frozen=True)
class DriverVersions:
    """The accelerator driver's version and the CUDA version it supports (None: unknown)."""

    driver: str | None = None
    cuda: str | None = None


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
    performance_state: int | None = None
    """The P-state: 0 (maximum performance) to 15 (minimum); None when not reported."""
    nvlinks: tuple[NvLink, ...] | None = None
    """The GPU's NVLinks; None when it has none or NVML does not report them (PCIe cards)."""
    fabric: FabricInfo | None = None
    """NVSwitch fabric registration; None when not supported (no fabric, or before Hopper)."""
    recovery_action: int | None = None
    """The driver's recovery action for the GPU (NVML_GPU_RECOVERY_ACTION_*: 0 none, 1 GPU reset, 2 node
    reboot, 3 drain P2P, 4 drain and reset, 5 recover IMEX domain, 6 bus reset, 7 system reboot)."""
    xgmi_links: tuple[NvLink, ...] | None = None
    """AMD Instinct: the GPU's XGMI links (amdsmi `amdsmi_get_gpu_xgmi_link_status`), up or down; a link
    the platform disabled is not listed. None when the GPU has no XGMI or amdsmi does not report it."""
    ras_blocks: Mapping[str, EccCounts] | None = None
    """AMD Instinct: RAS error counts per GPU block (`AmdSmiGpuBlock` name, e.g. `UMC`, `XGMI_WAFL`) as
    correctable (`volatile_single`) and uncorrectable (`volatile_double`) since the driver loaded."""
    bad_page_threshold: int | None = None
    """AMD Instinct: amdgpu's bad page threshold (`amdsmi_get_gpu_bad_page_threshold`): retired VRAM pages
    beyond it put the GPU in a bad state (amdgpu's `bad_page_threshold` parameter). The pages themselves
    are in `retired_pages` (`double_bit`: retired or awaiting retirement; `pending`: some await it)."""
    core_utilization_ratios: tuple[float, ...] | None = None
    """Per-core utilization (0-1) of an accelerator with several cores (AWS Neuron: each NeuronCore of the
    device, neuron-monitor's `neuroncore_utilization`); None when the backend reports no per-core data."""
    sram_ecc: EccCounts | None = None
    """On-chip SRAM ECC counters, apart from device memory's `ecc` (AWS Neuron: neuron-monitor's
    `sram_ecc_corrected` / `sram_ecc_uncorrected` as volatile single / double); None when not reported."""
    execution_errors: Mapping[str, int] | None = None
    """Failed executions by the runtime's error class since the agent started (AWS Neuron: neuron-monitor's
    `execution_stats.error_summary`: generic, numerical, transient, model, runtime, hardware)."""
    tensorcore_utilization_ratio: float | None = None
    """Google TPU: the share of TensorCore capacity in use (libtpu's `tensorcore_util`, percent / 100);
    `utilization_ratio` is the chip's duty cycle. None on other vendors."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {}
        for name in self.__dataclass_fields__:
            if name == "index":
                continue
            value = getattr(self, name)
            if isinstance(value, frozenset):
                value = sorted(value)
            elif isinstance(value, EccCounts | RetiredPages | RowRemap | PcieLink | FabricInfo):
                value = dict(value.__dict__)
            elif name == "execution_errors" and value is not None:
                value = dict(value)
            elif name == "core_utilization_ratios" and value is not None:
                value = list(value)
            elif name in ("nvlinks", "xgmi_links") and value is not None:
                value = [{"link": n.link, "active": n.active, "errors": dict(n.errors)} for n in value]
            elif name == "ras_blocks" and value is not None:
                value = {block: dict(counts.__dict__) for block, counts in value.items()}
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
    event: str | None = None
    """AMD Instinct: the amdsmi event's name (`AmdSmiEvtNotificationType`: RING_HANG, GPU_PRE_RESET, ...);
    `xid` then holds that type's value (AMDSMI_EVT_NOTIF_*), not an NVIDIA XID. None for NVIDIA's XIDs."""
