"""The Prometheus exporter: custom collectors that build metric families at scrape time.

Nothing here holds device data between scrapes: each scrape reads the agent's current immutable
`AgentSnapshot` and yields fresh families (the prometheus-pve-exporter pattern; no global
gauges). Like node_exporter, every collector is timed and guarded, and each scrape reports
`accelpool_agent_scrape_collector_duration_seconds{node,pool,collector}` and
`accelpool_agent_scrape_collector_success{node,pool,collector}`; a collector that raises costs its own
families, not the scrape.

Names follow `accelpool_<subsystem>_<name>_<unit>`, counters end in `_total`, labels are
snake_case. Per-GPU series carry `node`, `pool`, `gpu` (index) and `uuid`; model, product name
and PCI address are on `accelpool_gpu_info` only (join on `gpu`/`uuid`). "No data" (a reading
the GPU does not support) is an absent series, never a zero.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from accelpool_agent.model import THROTTLE_REASONS, CheckStatus, GpuReport
from accelpool_agent.snapshot import AgentSnapshot
from accelpool_core.protocol import HealthStatus

log = logging.getLogger(__name__)

GPU_LABELS = ("node", "pool", "gpu", "uuid")
NODE_LABELS = ("node", "pool")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("accelpool")
    except Exception:
        return "unknown"


class SubCollector(Protocol):
    name: str

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]: ...


def _gpu_key(snapshot: AgentSnapshot, gpu: GpuReport) -> list[str]:
    return [snapshot.node, snapshot.pool or "", str(gpu.device.index), gpu.device.uuid]


class _Families:
    """Gauge families created on first use, in first-use order (keeps the exposition stable)."""

    def __init__(self, labels: Sequence[str]) -> None:
        self.labels = list(labels)
        self.families: dict[str, GaugeMetricFamily | CounterMetricFamily] = {}

    def gauge(
        self, name: str, doc: str, key: list[str], value: float | None, extra: Sequence[tuple[str, str]] = ()
    ) -> None:
        family = self.families.get(name)
        if not isinstance(family, GaugeMetricFamily):
            family = GaugeMetricFamily(name, doc, labels=[*self.labels, *(k for k, _ in extra)])
            self.families[name] = family
        if value is not None:
            family.add_metric([*key, *(v for _, v in extra)], float(value))

    def counter(
        self, name: str, doc: str, key: list[str], value: float | None, extra: Sequence[tuple[str, str]] = ()
    ) -> None:
        family = self.families.get(name)
        if not isinstance(family, CounterMetricFamily):
            family = CounterMetricFamily(name, doc, labels=[*self.labels, *(k for k, _ in extra)])
            self.families[name] = family
        if value is not None:
            family.add_metric([*key, *(v for _, v in extra)], float(value))


def _bool(value: bool | None) -> float | None:
    return None if value is None else float(value)


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
        f = _Families(GPU_LABELS)
        for gpu in report.gpus:
            key = _gpu_key(snapshot, gpu)
            device, t = gpu.device, gpu.telemetry
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
                _bool(t.lost) if t else None,
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
            if t is None or t.lost:
                continue
            f.gauge("accelpool_gpu_utilization_ratio", "Fraction of time a kernel ran (0-1).", key, t.utilization_ratio)
            f.gauge(
                "accelpool_gpu_memory_utilization_ratio",
                "Fraction of time device memory was read or written (0-1).",
                key,
                t.memory_utilization_ratio,
            )
            f.gauge("accelpool_gpu_memory_used_bytes", "Device memory in use.", key, t.memory_used_bytes)
            f.gauge("accelpool_gpu_memory_total_bytes", "Device memory in total.", key, t.memory_total_bytes)
            f.gauge("accelpool_gpu_temperature_celsius", "GPU core temperature.", key, t.temperature_celsius)
            f.gauge(
                "accelpool_gpu_slowdown_temperature_celsius",
                "Temperature at which the GPU slows its clocks.",
                key,
                t.slowdown_temperature_celsius,
            )
            f.gauge("accelpool_gpu_power_watts", "Power draw.", key, t.power_watts)
            f.gauge("accelpool_gpu_power_limit_watts", "Enforced power limit.", key, t.power_limit_watts)
            f.counter(
                "accelpool_gpu_energy_joules_total", "Energy consumed since the driver loaded.", key, t.energy_joules
            )
            f.gauge("accelpool_gpu_sm_clock_hertz", "Current SM clock.", key, t.sm_clock_hertz)
            f.gauge("accelpool_gpu_sm_clock_max_hertz", "Maximum SM clock.", key, t.sm_clock_max_hertz)
            f.gauge("accelpool_gpu_memory_clock_hertz", "Current memory clock.", key, t.memory_clock_hertz)
            if t.throttle_reasons is not None:
                for reason in THROTTLE_REASONS:
                    f.gauge(
                        "accelpool_gpu_clock_throttle",
                        "1 while clocks are held back for this reason (NVML clock event reasons).",
                        key,
                        float(reason in t.throttle_reasons),
                        [("reason", reason)],
                    )
            if t.ecc is not None:
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
            if t.retired_pages is not None:
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
                    _bool(t.retired_pages.pending),
                )
            if t.row_remap is not None:
                for kind in ("correctable", "uncorrectable"):
                    f.gauge(
                        "accelpool_gpu_remapped_rows",
                        "Memory rows remapped, by error type.",
                        key,
                        getattr(t.row_remap, kind),
                        [("error_type", kind)],
                    )
                f.gauge(
                    "accelpool_gpu_row_remap_pending",
                    "1 while a row remap waits for a reset.",
                    key,
                    _bool(t.row_remap.pending),
                )
                f.gauge(
                    "accelpool_gpu_row_remap_failure", "1 when a row remap failed.", key, _bool(t.row_remap.failure)
                )
            if t.pcie is not None:
                f.gauge("accelpool_gpu_pcie_link_generation", "Current PCIe link generation.", key, t.pcie.generation)
                f.gauge("accelpool_gpu_pcie_link_width", "Current PCIe link width (lanes).", key, t.pcie.width)
                f.gauge(
                    "accelpool_gpu_pcie_link_max_generation",
                    "Maximum PCIe link generation.",
                    key,
                    t.pcie.max_generation,
                )
                f.gauge("accelpool_gpu_pcie_link_max_width", "Maximum PCIe link width (lanes).", key, t.pcie.max_width)
            f.gauge(
                "accelpool_gpu_compute_processes", "Compute processes running on the GPU.", key, t.compute_processes
            )
        return [info, mig, *f.families.values()]


class CheckCollector:
    """accelpool_check_*: the latest result of every check on every GPU."""

    name = "check"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        if report is None:
            return []
        f = _Families(GPU_LABELS)
        f.gauge(
            "accelpool_check_status",
            "Latest check result: 0 pass, 1 warn, 2 fail (skipped checks are absent).",
            [],
            None,
            [("check", ""), ("reason", "")],
        )
        for gpu in report.gpus:
            key = _gpu_key(snapshot, gpu)
            for c in gpu.checks:
                if c.status is CheckStatus.SKIP:
                    continue
                f.gauge(
                    "accelpool_check_status",
                    "",
                    key,
                    float(c.status.severity),
                    [("check", c.check.value), ("reason", c.reason)],
                )
                if not c.check.is_compute:
                    continue  # telemetry rules run every tick; their numbers are accelpool_gpu_* series
                if c.value is not None:
                    f.gauge(
                        "accelpool_check_value",
                        "The number a compute check judged, in the unit named by the unit label.",
                        key,
                        c.value,
                        [("check", c.check.value), ("unit", c.unit or "")],
                    )
                f.gauge(
                    "accelpool_check_duration_seconds",
                    "How long the compute check took.",
                    key,
                    c.duration_seconds,
                    [("check", c.check.value)],
                )
                f.gauge(
                    "accelpool_check_last_run_timestamp_seconds",
                    "When the compute check last ran (Unix time).",
                    key,
                    c.finished_at,
                    [("check", c.check.value)],
                )
            for dtype, value in sorted(gpu.matmul_tflops.items()):
                f.gauge(
                    "accelpool_check_matmul_tflops",
                    "Measured dense matmul throughput (TFLOP/s), by dtype.",
                    key,
                    value,
                    [("dtype", dtype)],
                )
            for dtype, value in sorted(gpu.matmul_efficiency.items()):
                f.gauge(
                    "accelpool_check_matmul_efficiency_ratio",
                    "Measured matmul throughput / the expected dense peak.",
                    key,
                    value,
                    [("dtype", dtype)],
                )
            f.gauge(
                "accelpool_check_bandwidth_bytes_per_second",
                "Device-to-device copy bandwidth (bytes read + written per second).",
                key,
                gpu.bandwidth_bytes_per_second,
            )
            f.gauge(
                "accelpool_check_bandwidth_efficiency_ratio",
                "Measured copy bandwidth / the spec memory bandwidth.",
                key,
                gpu.bandwidth_efficiency,
            )
        return list(f.families.values())


class NodeCollector:
    """accelpool_node_*: the node's verdict."""

    name = "node"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        key = [snapshot.node, snapshot.pool or ""]
        f = _Families(NODE_LABELS)
        if report is None:
            return []
        f.gauge(
            "accelpool_node_healthy",
            "1 when the node's accelerators are healthy, 0 when unhealthy or unknown.",
            key,
            float(report.healthy),
        )
        for status in HealthStatus:
            f.gauge(
                "accelpool_node_health_status",
                "The node's verdict as a state set: 1 for the current status.",
                key,
                float(report.status is status),
                [("status", status.value)],
            )
        f.gauge("accelpool_node_gpus", "Accelerators the agent sees.", key, float(len(report.gpus)))
        f.gauge("accelpool_node_unhealthy_gpus", "Accelerators failing a check.", key, float(len(report.bad_gpus)))
        if report.tflops is not None:
            f.gauge(
                "accelpool_node_matmul_tflops",
                "Sum of the GPUs' latest matmul TFLOP/s in the policy dtype.",
                key,
                report.tflops,
                [("dtype", report.dtype)],
            )
        expected = [g.expected_tflops[report.dtype] for g in report.gpus if report.dtype in g.expected_tflops]
        if expected:
            f.gauge(
                "accelpool_node_expected_matmul_tflops",
                "Sum of the GPUs' expected dense peak TFLOP/s in the policy dtype (the catalog's or the config's).",
                key,
                sum(expected),
                [("dtype", report.dtype)],
            )
        f.gauge(
            "accelpool_node_last_cycle_timestamp_seconds",
            "When the last full check cycle ended (Unix time).",
            key,
            snapshot.last_cycle_at,
        )
        f.gauge(
            "accelpool_node_cycle_duration_seconds",
            "How long the last full check cycle took.",
            key,
            snapshot.last_cycle_duration_seconds,
        )
        return list(f.families.values())


class AgentCollector:
    """accelpool_agent_*: the agent itself."""

    name = "agent"

    def __init__(self, version: str | None = None) -> None:
        self.version = version or _version()

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        key = [snapshot.node, snapshot.pool or ""]
        info = InfoMetricFamily(
            "accelpool_agent", "The agent's version and backend; value 1.", labels=[*NODE_LABELS, "version", "backend"]
        )
        info.add_metric(key, {"version": self.version, "backend": snapshot.backend})
        f = _Families(NODE_LABELS)
        f.gauge(
            "accelpool_agent_backend_up",
            "1 while the backend can see devices (NVML initialised).",
            key,
            float(snapshot.backend_error is None),
        )
        f.gauge("accelpool_agent_start_time_seconds", "When the agent started (Unix time).", key, snapshot.started_at)
        f.counter(
            "accelpool_agent_telemetry_ticks_total", "Telemetry readings taken.", key, float(snapshot.ticks_total)
        )
        f.counter("accelpool_agent_cycles_total", "Full check cycles completed.", key, float(snapshot.cycles_total))
        f.gauge("accelpool_agent_compute_running", "1 while compute checks run.", key, float(snapshot.compute_running))
        for kind in ("condition", "annotation"):
            f.counter(
                "accelpool_agent_report_writes_total",
                "Writes of the node condition or annotation to the Kubernetes API.",
                key,
                float(snapshot.report_stats.writes.get(kind, 0)),
                [("kind", kind)],
            )
        f.counter(
            "accelpool_agent_report_errors_total",
            "Failed Kubernetes API requests of the reporter.",
            key,
            float(snapshot.report_stats.errors),
        )
        return [info, *f.families.values()]


DEFAULT_COLLECTORS: tuple[type[SubCollector], ...] = (GpuCollector, CheckCollector, NodeCollector, AgentCollector)


class Exporter(Collector):
    """Runs the sub-collectors on the current snapshot, timing and guarding each like node_exporter."""

    def __init__(
        self,
        source: Callable[[], AgentSnapshot],
        collectors: Sequence[SubCollector] | None = None,
        *,
        timer: Callable[[], float] | None = None,
    ) -> None:
        import time

        self.source = source
        self.collectors: list[SubCollector] = (
            list(collectors) if collectors is not None else [c() for c in DEFAULT_COLLECTORS]
        )
        self.timer = timer or time.perf_counter

    def describe(self) -> Iterable[Metric]:
        return []  # families depend on the devices; nothing to describe up front

    def collect(self) -> Iterator[Metric]:
        snapshot = self.source()
        labels = [*NODE_LABELS, "collector"]
        key = [snapshot.node, snapshot.pool or ""]
        duration = GaugeMetricFamily(
            "accelpool_agent_scrape_collector_duration_seconds",
            "How long a collector took in this scrape.",
            labels=labels,
        )
        success = GaugeMetricFamily(
            "accelpool_agent_scrape_collector_success", "1 when a collector succeeded in this scrape.", labels=labels
        )
        for collector in self.collectors:
            started = self.timer()
            try:
                families = list(collector.collect(snapshot))
                ok = 1.0
            except Exception:
                log.exception("collector %s failed", collector.name)
                families, ok = [], 0.0
            duration.add_metric([*key, collector.name], self.timer() - started)
            success.add_metric([*key, collector.name], ok)
            yield from families
        yield duration
        yield success


def build_registry(
    source: Callable[[], AgentSnapshot], *, timer: Callable[[], float] | None = None
) -> CollectorRegistry:
    """A registry of its own (not the process-global one) holding the agent's exporter."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(Exporter(source, timer=timer))
    return registry
