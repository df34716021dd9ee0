"""What each vendor's real backend reports of a simulated device: the fake backend's readings, reshaped.

The fake backend simulates a device as NVML shows one (`backends.fake`); a non-NVIDIA device is then
reported with the fields its vendor's backend fills and no others, so that its vendor's own rules
(`accelpool_agent.rules.vendor`) judge it as they judge the real one:

- AMD (`backends.amdsmi`): everything amdsmi reads, the peer links as `xgmi_links` (amdsmi's XGMI link
  status), the RAS counts per block (UMC is HBM), amdgpu's bad page threshold; no NVIDIA-only field
  (row remapping, fabric, recovery action, performance state).
- AWS Neuron (`backends.neuron`): what neuron-monitor's report gives: per-NeuronCore utilization (its
  `neuroncores_in_use`, as many cores as the device type has), device memory used, HBM and SRAM ECC
  counters, the runtime's execution errors by class, the applications using the device.
- Google TPU (`backends.tpu`): what libtpu's monitoring SDK gives: duty cycle, TensorCore utilization,
  HBM usage and capacity.

The vendor-neutral `fatal` fault becomes each vendor's fatal signal: XID 79 on NVIDIA, amdsmi's
RING_HANG event on AMD (`rules.amd`: fails, reset-gpu), a `hardware` execution error on Neuron
(`rules.neuron`: fails, service-required), and on TPU the chip stops answering and is gone (`rules.tpu`:
TpuChipMissing, restart-os; the monitoring SDK has no error event). Pure functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from accelpool_agent.model import EccCounts, RetiredPages, Telemetry, XidEvent
from accelpool_core import catalog

NVIDIA_FATAL_XID = 79
"""GPU has fallen off the bus."""
AMD_RING_HANG = 5
"""amdsmi's RING_HANG under the code the amdsmi backend reports it (`backends.amdsmi.AMD_EVENT_CODES`)."""
NEURON_ERROR_CLASSES = ("generic", "numerical", "transient", "model", "runtime", "hardware")
"""neuron-monitor's `execution_stats.error_summary` classes (`backends.neuron_report.ERROR_CLASSES`)."""
NEURONCORES_PER_DEVICE: Mapping[str, int] = {"Trainium": 2, "Trainium2": 4, "Inferentia2": 2}
"""neuron-monitor's `neuroncore_per_device_count`: trn1 and inf2 have 2 NeuronCores per device; trn2 has 8
physical cores shown as 4 logical ones at its default Logical NeuronCore config (LNC=2)."""
AMD_BAD_PAGE_THRESHOLD = 128
"""amdgpu's default `bad_page_threshold` (-1: derived from the VRAM size; 128 pages on 192 GB MI300X)."""


def fatal_event(vendor: catalog.Vendor, index: int) -> XidEvent | None:
    """The driver event a `fatal` fault raises on one device: NVIDIA's XID 79, AMD's RING_HANG; None for
    Neuron and TPU, whose fatal signals are in the telemetry (see the module's docstring)."""
    if vendor is catalog.Vendor.NVIDIA:
        return XidEvent(index=index, xid=NVIDIA_FATAL_XID, timestamp=0.0)
    if vendor is catalog.Vendor.AMD:
        return XidEvent(index=index, xid=AMD_RING_HANG, timestamp=0.0, event="RING_HANG")
    return None


def vendor_reading(accelerator: catalog.Accelerator, reading: Telemetry, *, fatal: bool) -> Telemetry:
    """`reading` (NVML's shape) as the device's vendor backend reports it; `fatal`: a `fatal` fault is on."""
    if reading.lost:
        return reading
    if accelerator.vendor is catalog.Vendor.AMD:
        return amd_reading(reading)
    if accelerator.vendor is catalog.Vendor.AWS:
        return neuron_reading(reading, NEURONCORES_PER_DEVICE.get(accelerator.model, 2), fatal=fatal)
    if accelerator.vendor is catalog.Vendor.GOOGLE:
        if fatal:
            return Telemetry(index=reading.index, lost=True, error="TPU chip stopped answering (simulated)")
        return tpu_reading(reading)
    return reading


def amd_reading(reading: Telemetry) -> Telemetry:
    ecc = reading.ecc or EccCounts()
    return replace(
        reading,
        ecc=EccCounts(volatile_single=ecc.volatile_single, volatile_double=ecc.volatile_double),
        retired_pages=RetiredPages(double_bit=0, pending=False),
        ras_blocks={
            "UMC": EccCounts(volatile_single=ecc.volatile_single, volatile_double=ecc.volatile_double),
            "XGMI_WAFL": EccCounts(volatile_single=0, volatile_double=0),
        },
        bad_page_threshold=AMD_BAD_PAGE_THRESHOLD,
        xgmi_links=reading.nvlinks,
        nvlinks=None,
        row_remap=None,
        fabric=None,
        recovery_action=None,
        performance_state=None,
    )


def neuron_reading(reading: Telemetry, cores: int, *, fatal: bool) -> Telemetry:
    """A Neuron device: its cores share the device's load (a busy device's first core runs hottest)."""
    load = reading.utilization_ratio or 0.0
    ratios = tuple(round(min(1.0, load * (1.0 + 0.02 * (cores - 1 - core))), 4) for core in range(cores))
    errors = dict.fromkeys(NEURON_ERROR_CLASSES, 0)
    errors["hardware"] = 1 if fatal else 0
    hbm_uncorrected = (reading.ecc.volatile_double or 0) if reading.ecc else 0
    return Telemetry(
        index=reading.index,
        utilization_ratio=round(sum(ratios) / cores, 4),
        memory_used_bytes=reading.memory_used_bytes,
        memory_total_bytes=reading.memory_total_bytes,
        compute_processes=reading.compute_processes,
        ecc=EccCounts(volatile_single=0, volatile_double=hbm_uncorrected),
        sram_ecc=EccCounts(volatile_single=0, volatile_double=0),
        execution_errors=errors,
        core_utilization_ratios=ratios,
    )


def tpu_reading(reading: Telemetry) -> Telemetry:
    """A TPU chip's duty cycle, TensorCore utilization and HBM (libtpu reads nothing else)."""
    duty = reading.utilization_ratio
    return Telemetry(
        index=reading.index,
        utilization_ratio=duty,
        memory_used_bytes=reading.memory_used_bytes,
        memory_total_bytes=reading.memory_total_bytes,
        tensorcore_utilization_ratio=round(duty * 0.8, 4) if duty is not None else None,
    )
