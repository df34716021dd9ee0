"""`accelpool_node_*` (the node's verdict, its node-wide checks, findings, recommended action and
driver versions) and `accelpool_agent_*` (the agent itself)."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import InfoMetricFamily, Metric

from accelpool_agent.metrics.families import NODE_LABELS, Families
from accelpool_agent.model import CheckStatus
from accelpool_agent.snapshot import AgentSnapshot
from accelpool_core.protocol import Action, HealthStatus, Severity


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("accelpool-agent")
    except Exception:
        return "unknown"


class NodeCollector:
    """accelpool_node_*: the node's verdict."""

    name = "node"

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]:
        report = snapshot.report
        key = [snapshot.node, snapshot.pool or ""]
        f = Families(NODE_LABELS)
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
        recommended = report.action
        for action in Action:
            f.gauge(
                "accelpool_node_recommended_action",
                "The node's recommended action as a state set (1 for the current one): the strongest action "
                "of its CRITICAL findings, on the ladder none, drain, reset-gpu, restart-os, service-required.",
                key,
                float(action is recommended),
                [("action", action.value)],
            )
        for severity in (Severity.CRITICAL, Severity.WARNING, Severity.UNKNOWN, Severity.INFO):
            f.gauge(
                "accelpool_node_findings",
                "Findings (checks that did not simply pass, grouped over GPUs) by severity.",
                key,
                float(sum(finding.severity is severity for finding in report.findings)),
                [("severity", severity.value)],
            )
        f.gauge(
            "accelpool_node_check_status",
            "Latest result of a node-wide check (gpu_count, infiniband): 0 pass, 1 warn, 2 fail (skipped: absent).",
            key,
            None,
            [("check", ""), ("reason", "")],
        )
        for check in report.checks:
            if check.status is not CheckStatus.SKIP:
                f.gauge(
                    "accelpool_node_check_status",
                    "",
                    key,
                    float(check.status.severity),
                    [("check", check.check.value), ("reason", check.reason)],
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
        driver = InfoMetricFamily(
            "accelpool_node_driver",
            "The accelerator driver's version and the CUDA version it supports; value 1.",
            labels=[*NODE_LABELS, "driver_version", "cuda_version"],
        )
        if report.driver_version or report.cuda_version:
            driver.add_metric(
                key, {"driver_version": report.driver_version or "", "cuda_version": report.cuda_version or ""}
            )
        return [*f.families.values(), driver]


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
        f = Families(NODE_LABELS)
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
