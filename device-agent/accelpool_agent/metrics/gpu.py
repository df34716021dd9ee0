"""`accelpool_gpu_*`: the inventory and telemetry of every GPU, from the snapshot's report.

`GpuCollector.collect` walks the GPUs; one small function per metric family group adds a GPU's samples:
its facts (`_facts`), its health and XIDs (`_health`, for every GPU, lost or not), then, for a GPU with a
reading, each family of `READINGS` in turn. Families are created on first use (`Families`), so the order
the functions run in is the order of the exposition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.metrics_core import InfoMetricFamily, Metric

from accelpool_agent.metrics.families import GPU_LABELS, Families, as_float, gpu_key
from accelpool_agent.model import THROTTLE_REASONS, CheckStatus, DeviceInfo, GpuReport, Telemetry
from accelpool_agent.snapshot import AgentSnapshot

Key = list[str]
"""A GPU's values of `GPU_LABELS`."""


class GpuCollector:
    """accelpool_gpu_*: inventory and telemetry of every GPU."""

    name = "gpu"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        if report is None:
            return []
        info = InfoMetricFamily(
            "accelpool_gpu",
            "Static facts about a GPU; value 1.",
            labels=[*GPU_LABELS, "model", "name", "pci_bus_id", "compute_capability", "mig_enabled"],
        )
        mig = InfoMetricFamily(
            "accelpool_gpu_mig_device",
            "A MIG device carved out of a GPU; value 1.",
            labels=[*GPU_LABELS, "mig_uuid", "profile"],
        )
        f = Families(GPU_LABELS)
        for gpu in report.gpus:
            key = gpu_key(snapshot, gpu)
            _facts(info, mig, key, gpu.device)
            _health(f, key, gpu)
            t = gpu.telemetry
            if t is None or t.lost:
                continue
            for add in READINGS:
                add(f, key, t)
        return [info, mig, *f.families.values()]


def _facts(info: InfoMetricFamily, mig: InfoMetricFamily, key: Key, device: DeviceInfo) -> None:
    info.add_metric(
        key,
        {
            "model": device.model or "",
            "name": device.name,
            "pci_bus_id": device.pci_bus_id,
            "compute_capability": device.compute_capability or "",
            "mig_enabled": str(device.mig_enabled).lower(),
        },
    )
    for m in device.mig_devices:
        mig.add_metric(key, {"mig_uuid": m.uuid, "profile": m.profile or ""})


def _health(f: Families, key: Key, gpu: GpuReport) -> None:
    t = gpu.telemetry
    f.gauge(
        "accelpool_gpu_healthy",
        "1 unless a check fails on this GPU, 0 when one does.",
        key,
        float(gpu.status is not CheckStatus.FAIL),
    )
    f.gauge(
        "accelpool_gpu_lost",
        "1 when the GPU stopped answering (fallen off the bus).",
        key,
        as_float(t.lost) if t else None,
    )
    f.counter(
        "accelpool_gpu_xid_errors_total",
        "Critical XID errors seen since the agent started, by XID.",
        key,
        None,
        [("xid", "")],
    )
    for xid, count in sorted(gpu.xid_counts.items()):
        f.counter("accelpool_gpu_xid_errors_total", "", key, float(count), [("xid", str(xid))])
    f.gauge(
        "accelpool_gpu_last_xid",
        "The most recent critical XID since the agent started (0: none).",
        key,
        float(gpu.last_xid or 0),
    )


def _usage(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge("accelpool_gpu_utilization_ratio", "Fraction of time a kernel ran (0-1).", key, t.utilization_ratio)
    f.gauge(
        "accelpool_gpu_memory_utilization_ratio",
        "Fraction of time device memory was read or written (0-1).",
        key,
        t.memory_utilization_ratio,
    )
    f.gauge("accelpool_gpu_memory_used_bytes", "Device memory in use.", key, t.memory_used_bytes)
    f.gauge("accelpool_gpu_memory_total_bytes", "Device memory in total.", key, t.memory_total_bytes)


def _temperature(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge("accelpool_gpu_temperature_celsius", "GPU core temperature.", key, t.temperature_celsius)
    f.gauge(
        "accelpool_gpu_slowdown_temperature_celsius",
        "Temperature at which the GPU slows its clocks.",
        key,
        t.slowdown_temperature_celsius,
    )


def _power(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge("accelpool_gpu_power_watts", "Power draw.", key, t.power_watts)
    f.gauge("accelpool_gpu_power_limit_watts", "Enforced power limit.", key, t.power_limit_watts)
    f.counter("accelpool_gpu_energy_joules_total", "Energy consumed since the driver loaded.", key, t.energy_joules)


def _clocks(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge("accelpool_gpu_sm_clock_hertz", "Current SM clock.", key, t.sm_clock_hertz)
    f.gauge("accelpool_gpu_sm_clock_max_hertz", "Maximum SM clock.", key, t.sm_clock_max_hertz)
    f.gauge("accelpool_gpu_memory_clock_hertz", "Current memory clock.", key, t.memory_clock_hertz)
    if t.throttle_reasons is None:
        return
    for reason in THROTTLE_REASONS:
        f.gauge(
            "accelpool_gpu_clock_throttle",
            "1 while clocks are held back for this reason (NVML clock event reasons).",
            key,
            float(reason in t.throttle_reasons),
            [("reason", reason)],
        )


def _ecc(f: Families, key: Key, t: Telemetry) -> None:
    if t.ecc is None:
        return
    for scope in ("volatile", "aggregate"):
        for kind in ("single", "double"):
            f.counter(
                "accelpool_gpu_ecc_errors_total",
                "ECC errors: scope volatile (since the driver loaded) or aggregate (lifetime); "
                "error_type single_bit (corrected) or double_bit (uncorrected).",
                key,
                getattr(t.ecc, f"{scope}_{kind}"),
                [("scope", scope), ("error_type", f"{kind}_bit")],
            )


def _retired_pages(f: Families, key: Key, t: Telemetry) -> None:
    if t.retired_pages is None:
        return
    for cause in ("single_bit", "double_bit"):
        f.gauge(
            "accelpool_gpu_retired_pages",
            "Memory pages retired, by cause.",
            key,
            getattr(t.retired_pages, cause),
            [("cause", cause)],
        )
    f.gauge(
        "accelpool_gpu_retired_pages_pending",
        "1 while a page retirement waits for a reset.",
        key,
        as_float(t.retired_pages.pending),
    )


def _row_remap(f: Families, key: Key, t: Telemetry) -> None:
    if t.row_remap is None:
        return
    for kind in ("correctable", "uncorrectable"):
        f.gauge(
            "accelpool_gpu_remapped_rows",
            "Memory rows remapped, by error type.",
            key,
            getattr(t.row_remap, kind),
            [("error_type", kind)],
        )
    f.gauge(
        "accelpool_gpu_row_remap_pending", "1 while a row remap waits for a reset.", key, as_float(t.row_remap.pending)
    )
    f.gauge("accelpool_gpu_row_remap_failure", "1 when a row remap failed.", key, as_float(t.row_remap.failure))


def _pcie(f: Families, key: Key, t: Telemetry) -> None:
    if t.pcie is None:
        return
    f.gauge("accelpool_gpu_pcie_link_generation", "Current PCIe link generation.", key, t.pcie.generation)
    f.gauge("accelpool_gpu_pcie_link_width", "Current PCIe link width (lanes).", key, t.pcie.width)
    f.gauge("accelpool_gpu_pcie_link_max_generation", "Maximum PCIe link generation.", key, t.pcie.max_generation)
    f.gauge("accelpool_gpu_pcie_link_max_width", "Maximum PCIe link width (lanes).", key, t.pcie.max_width)


def _activity(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge("accelpool_gpu_compute_processes", "Compute processes running on the GPU.", key, t.compute_processes)
    for core, ratio in enumerate(t.core_utilization_ratios or ()):
        f.gauge(
            "accelpool_gpu_core_utilization_ratio",
            "Utilization of each core of a many-core device (0-1): an AWS Neuron device's NeuronCores "
            "(neuron-monitor's neuroncore_utilization).",
            key,
            ratio,
            [("core", str(core))],
        )
    if t.tensorcore_utilization_ratio is not None:
        f.gauge(
            "accelpool_gpu_tensorcore_utilization_ratio",
            "Share of a TPU chip's TensorCore capacity in use (0-1; libtpu's tensorcore_util).",
            key,
            t.tensorcore_utilization_ratio,
        )


def _state(f: Families, key: Key, t: Telemetry) -> None:
    f.gauge(
        "accelpool_gpu_recovery_action",
        "The driver's recovery action: 0 none, 1 GPU reset, 2 node reboot, 3 drain P2P, 4 drain and reset, "
        "5 recover IMEX domain, 6 bus reset, 7 system reboot (NVML_GPU_RECOVERY_ACTION_*).",
        key,
        t.recovery_action,
    )
    f.gauge(
        "accelpool_gpu_power_state",
        "Performance state: 0 (P0, maximum performance) to 15 (P15, minimum).",
        key,
        t.performance_state,
    )


READINGS: tuple[Callable[[Families, Key, Telemetry], None], ...] = (
    _usage,
    _temperature,
    _power,
    _clocks,
    _ecc,
    _retired_pages,
    _row_remap,
    _pcie,
    _activity,
    _state,
)
"""The families of a GPU that has a reading, in exposition order."""
