"""`accelpool_check_*`: the latest result of every check on every GPU, and the compute checks' numbers."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import Metric

from accelpool_agent.metrics.families import GPU_LABELS, Families, gpu_key
from accelpool_agent.model import CheckStatus
from accelpool_agent.snapshot import AgentSnapshot


class CheckCollector:
    """accelpool_check_*: the latest result of every check on every GPU."""

    name = "check"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        if report is None:
            return []
        f = Families(GPU_LABELS)
        f.gauge(
            "accelpool_check_status",
            "Latest check result: 0 pass, 1 warn, 2 fail (skipped checks are absent).",
            [],
            None,
            [("check", ""), ("reason", "")],
        )
        for gpu in report.gpus:
            key = gpu_key(snapshot, gpu)
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
