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

One module per subsystem: `metrics.gpu` (`accelpool_gpu_*`), `metrics.links` (NVLink, NVSwitch
fabric and InfiniBand: `accelpool_gpu_nvlink_*`, `accelpool_gpu_fabric_*`, `accelpool_ib_port_*`),
`metrics.checks` (`accelpool_check_*`), `metrics.node` (`accelpool_node_*`, `accelpool_agent_*`);
`metrics.families` holds what they share. This module runs them (`Exporter`) in a registry of its own.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Protocol

from prometheus_client import CollectorRegistry
from prometheus_client.metrics_core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from accelpool_agent.metrics.checks import CheckCollector
from accelpool_agent.metrics.families import NODE_LABELS
from accelpool_agent.metrics.gpu import GpuCollector
from accelpool_agent.metrics.links import LinkCollector
from accelpool_agent.metrics.node import AgentCollector, NodeCollector
from accelpool_agent.snapshot import AgentSnapshot

__all__ = [
    "DEFAULT_COLLECTORS",
    "AgentCollector",
    "CheckCollector",
    "Exporter",
    "GpuCollector",
    "LinkCollector",
    "NodeCollector",
    "SubCollector",
    "build_registry",
]

log = logging.getLogger(__name__)


class SubCollector(Protocol):
    name: str

    def collect(self, snapshot: AgentSnapshot) -> Iterable[Metric]: ...


DEFAULT_COLLECTORS: tuple[type[SubCollector], ...] = (
    GpuCollector,
    LinkCollector,
    CheckCollector,
    NodeCollector,
    AgentCollector,
)


class Exporter(Collector):
    """Runs the sub-collectors on the current snapshot, timing and guarding each like node_exporter."""

    def __init__(
        self,
        source: Callable[[], AgentSnapshot],
        collectors: Sequence[SubCollector] | None = None,
        *,
        timer: Callable[[], float] | None = None,
    ) -> None:
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
