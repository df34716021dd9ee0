"""The operator's Prometheus metrics: a custom collector reading the latest plan at scrape time.

How it works and why: docs/design/operator-metrics.md.
"""

from __future__ import annotations

import bisect
import functools
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.registry import Collector

from accelpool.decide.planning import Plan
from accelpool_core.shared_render import SharedRender

PHASES = ("Pending", "Provisioning", "Configuring", "Ready", "Degraded", "Failed")
NODE_STATES = ("desired", "members", "ready", "quarantined", "burn_in")
UNAVAILABLE_REASONS = ("quarantined", "burn_in", "unschedulable", "unconfigured")
LADDER_STATES = {"draining": "draining", "drained": "drained", "handed-off": "handed_off"}
"""Ladder step → its `accelpool_pool_nodes` state (quarantined members past the quarantine)."""
EVICTION_RESULTS = ("evicted", "blocked", "failed")
CACHE_SECONDS = 0.0
"""How long a finished render is served again. 0: concurrent scrapes share a render, and a
scrape that arrives after one finished gets a new one (never older than its request, so a value
read after a change shows it)."""
DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
PASS_STAGES = ("load", "plan", "write", "drain", "status", "events", "record")
"""The stages of a pass (`accelpool.runtime.controller.loop`), in order (status and events at once, beside the next
pass): where a slow pass spends its time."""


@dataclass
class OperatorMetrics:
    """Mutable counters of one operator process, and the latest plan."""

    plan: Plan | None = None
    reconciles: Counter[str] = field(default_factory=Counter)
    errors: int = 0
    duration_buckets: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))
    duration_sum: float = 0.0
    duration_count: int = 0
    last_success: float | None = None
    remediations: Counter[tuple[str, str]] = field(default_factory=Counter)
    writes: Counter[tuple[str, str]] = field(default_factory=Counter)
    drain_evictions: Counter[tuple[str, str]] = field(default_factory=Counter)
    """(pool, result) → evictions the drain executor sent."""
    drain_list_errors: Counter[str] = field(default_factory=Counter)
    node_events: Counter[bool] = field(default_factory=Counter)
    """Node watch events, by whether they could change a plan (`accelpool.runtime.controller.relevance`)."""
    stage_seconds: defaultdict[str, float] = field(default_factory=lambda: defaultdict(float))
    """Seconds passes spent in each of `PASS_STAGES` (wall time: a stage's API requests included)."""

    def observe_pass(self, seconds: float, ok: bool) -> None:
        self.reconciles["success" if ok else "error"] += 1
        if not ok:
            self.errors += 1
        else:
            self.last_success = time.time()
        self.duration_buckets[bisect.bisect_left(DURATION_BUCKETS, seconds)] += 1
        self.duration_sum += seconds
        self.duration_count += 1

    def write(self, verb: str, resource: str) -> None:
        self.writes[(verb, resource)] += 1

    def snapshot(self) -> OperatorMetrics:
        """A copy the loop no longer mutates, to render in another thread (the plan is immutable)."""
        return replace(
            self,
            reconciles=self.reconciles.copy(),
            duration_buckets=list(self.duration_buckets),
            remediations=self.remediations.copy(),
            writes=self.writes.copy(),
            drain_evictions=self.drain_evictions.copy(),
            drain_list_errors=self.drain_list_errors.copy(),
            node_events=self.node_events.copy(),
            stage_seconds=defaultdict(float, self.stage_seconds),
        )


class PlanCollector(Collector):
    """The pools' families, read from one plan (`plan_exposition` renders them once per plan)."""

    def __init__(self, plan: Plan | None) -> None:
        self._plan = plan

    def collect(self) -> Iterator[Metric]:
        plan = self._plan
        pools = [p for p in (plan.pools if plan else ()) if p.status is not None]

        by_phase = Counter(p.phase for p in pools)
        family = GaugeMetricFamily("accelpool_pools", "ComputePools by phase.", labels=["phase"])
        for name in PHASES:
            family.add_metric([name], by_phase.get(name, 0))
        yield family

        phases = GaugeMetricFamily("accelpool_pool_phase", "1 for the pool's current phase.", labels=["pool", "phase"])
        info = GaugeMetricFamily(
            "accelpool_pool_info",
            "One series per pool describing it.",
            labels=["pool", "accelerator", "provisioner", "mig_strategy", "sharing"],
        )
        nodes = GaugeMetricFamily("accelpool_pool_nodes", "Nodes of a pool by state.", labels=["pool", "state"])
        gpus = GaugeMetricFamily(
            "accelpool_pool_gpus",
            "Devices pods can use now (on Ready, schedulable members, not quarantined nor in burn-in).",
            labels=["pool"],
        )
        unavailable = GaugeMetricFamily(
            "accelpool_pool_unavailable_gpus",
            "Devices on members that cannot serve pods now, by why (quarantined, burn_in, unschedulable, "
            "unconfigured).",
            labels=["pool", "reason"],
        )
        drivers = GaugeMetricFamily(
            "accelpool_pool_driver_versions",
            "Distinct driver (and CUDA) versions the pool's agents report; more than 1 is a mismatch.",
            labels=["pool"],
        )
        measured = GaugeMetricFamily(
            "accelpool_pool_measured_tflops",
            "Sum of the members' latest matmul results (policy dtype), TFLOPS.",
            labels=["pool"],
        )
        expected = GaugeMetricFamily(
            "accelpool_pool_expected_tflops",
            "Catalog dense peak of the policy dtype times the devices pods can use now, TFLOPS.",
            labels=["pool"],
        )
        breaker = GaugeMetricFamily(
            "accelpool_pool_circuit_breaker_open",
            "1 when the pool refused a quarantine because maxUnavailable was reached.",
            labels=["pool"],
        )
        for pool in pools:
            status = pool.status
            assert status is not None
            for name in PHASES:
                phases.add_metric([pool.name, name], 1 if status.phase == name else 0)
            spec = pool.spec
            info.add_metric(
                [
                    pool.name,
                    status.accelerator or "",
                    spec.provisioner.type if spec else "",
                    spec.mig_strategy() if spec else "",
                    (spec.sharing.mode if spec and spec.sharing else "none"),
                ],
                1,
            )
            counts = status.nodes
            for state, value in zip(
                NODE_STATES,
                (counts.desired, counts.members, counts.ready, counts.quarantined, counts.burn_in),
                strict=True,
            ):
                nodes.add_metric([pool.name, state], value)
            for step, state in LADDER_STATES.items():
                nodes.add_metric([pool.name, state], pool.ladder_steps.get(step, 0))
            capacity = status.capacity
            gpus.add_metric([pool.name], capacity.gpus)
            for reason, value in zip(
                UNAVAILABLE_REASONS,
                (
                    capacity.quarantined_gpus,
                    capacity.burn_in_gpus,
                    capacity.unschedulable_gpus,
                    capacity.unconfigured_gpus,
                ),
                strict=True,
            ):
                unavailable.add_metric([pool.name, reason], value)
            drivers.add_metric([pool.name], pool.driver_versions)
            if status.capacity.measured_tflops is not None:
                measured.add_metric([pool.name], status.capacity.measured_tflops)
            if pool.expected_tflops is not None:
                expected.add_metric([pool.name], pool.expected_tflops)
            breaker.add_metric([pool.name], 1 if pool.breaker_open else 0)
        yield from (phases, info, nodes, gpus, unavailable, drivers, measured, expected, breaker)


class OperatorCollector(Collector):
    """Reads `OperatorMetrics`' counters at scrape time (the pools' families: `PlanCollector`)."""

    def __init__(self, metrics: OperatorMetrics) -> None:
        self._metrics = metrics

    def collect(self) -> Iterator[Metric]:
        metrics = self._metrics
        plan = metrics.plan
        pools = [p for p in (plan.pools if plan else ()) if p.status is not None]
        total = CounterMetricFamily("accelpool_reconcile", "Reconcile passes by result.", labels=["result"])
        for result in ("success", "error"):
            total.add_metric([result], metrics.reconciles.get(result, 0))
        yield total
        yield CounterMetricFamily("accelpool_reconcile_errors", "Reconcile passes that failed.", value=metrics.errors)
        events = CounterMetricFamily(
            "accelpool_node_events", "Node watch events, by whether they could change a plan.", labels=["relevant"]
        )
        for relevant in (True, False):
            events.add_metric([str(relevant).lower()], metrics.node_events.get(relevant, 0))
        yield events
        cumulative = 0
        buckets: list[tuple[str, float]] = []
        for bound, count in zip((*DURATION_BUCKETS, float("inf")), metrics.duration_buckets, strict=True):
            cumulative += count
            buckets.append(("+Inf" if bound == float("inf") else repr(bound), cumulative))
        yield HistogramMetricFamily(
            "accelpool_reconcile_duration_seconds",
            "Duration of reconcile passes (planning and writes).",
            buckets=buckets,
            sum_value=metrics.duration_sum,
        )
        stages = CounterMetricFamily(
            "accelpool_reconcile_stage_seconds",
            "Seconds reconcile passes spent in each stage (load, plan, write, drain, status, events, record), "
            "their API requests included.",
            labels=["stage"],
        )
        for stage in PASS_STAGES:
            stages.add_metric([stage], metrics.stage_seconds.get(stage, 0.0))
        yield stages
        last = GaugeMetricFamily(
            "accelpool_reconcile_last_success_timestamp_seconds", "Unix time of the last successful pass."
        )
        if metrics.last_success is not None:
            last.add_metric([], metrics.last_success)
        yield last
        remediations = CounterMetricFamily(
            "accelpool_remediations", "Remediation decisions by pool and action.", labels=["pool", "action"]
        )
        for (pool_name, action), count in sorted(metrics.remediations.items()):
            remediations.add_metric([pool_name, action], count)
        yield remediations
        yield from _drain_families(
            metrics, [p.name for p in pools if p.spec is not None and p.spec.health.drain.enabled]
        )
        writes = CounterMetricFamily(
            "accelpool_api_writes", "Kubernetes API writes made by the reconciler.", labels=["verb", "resource"]
        )
        for (verb, resource), count in sorted(metrics.writes.items()):
            writes.add_metric([verb, resource], count)
        yield writes


def _drain_families(metrics: OperatorMetrics, draining_pools: list[str]) -> Iterator[Metric]:
    """The drain's counters: every pool whose policy drains has its series from the start (at 0)."""
    evictions = CounterMetricFamily(
        "accelpool_drain_evictions",
        "Evictions the drain executor sent, by pool and result (blocked: refused by a PodDisruptionBudget).",
        labels=["pool", "result"],
    )
    pools = sorted({pool for pool, _ in metrics.drain_evictions} | set(draining_pools))
    for pool in pools:
        for result in EVICTION_RESULTS:
            evictions.add_metric([pool, result], metrics.drain_evictions.get((pool, result), 0))
    yield evictions
    errors = CounterMetricFamily(
        "accelpool_drain_list_errors", "Visits to a draining node whose pods could not be listed.", labels=["pool"]
    )
    for pool, count in sorted(metrics.drain_list_errors.items()):
        errors.add_metric([pool], count)
    yield errors


def _rendered(collector: Collector) -> bytes:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry)


_last_plan: tuple[Plan | None, bytes] | None = None
"""The last plan rendered, and its text."""
_last_plan_lock = threading.Lock()


def plan_exposition(plan: Plan | None) -> bytes:
    """The pools' families of `plan`, rendered once per plan: at 500 pools they are most of a scrape's thousands of
    series, and the plan changes only with a pass, while scrapes come every few seconds."""
    global _last_plan
    with _last_plan_lock:
        last = _last_plan
        if last is None or last[0] is not plan:
            last = _last_plan = (plan, _rendered(PlanCollector(plan)))
        return last[1]


def exposition(metrics: OperatorMetrics) -> bytes:
    return plan_exposition(metrics.plan) + _rendered(OperatorCollector(metrics))


def application(metrics: OperatorMetrics, *, cache_seconds: float = CACHE_SECONDS) -> web.Application:
    """GET /metrics: a snapshot taken on the loop, rendered in a thread of its own, shared by concurrent scrapers."""
    shared = SharedRender[bytes](cache_seconds=cache_seconds, thread_name="accelpool-metrics")

    async def handle(_: web.Request) -> web.Response:
        body = await shared.get(CONTENT_TYPE_LATEST, lambda: functools.partial(exposition, metrics.snapshot()))
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def close(_: web.Application) -> None:
        shared.close()

    app = web.Application()
    app.router.add_get("/metrics", handle)
    app.on_cleanup.append(close)
    return app


async def serve(metrics: OperatorMetrics, host: str, port: int) -> web.AppRunner:
    """Serve /metrics on host:port; the caller cleans the runner up."""
    runner = web.AppRunner(application(metrics), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    return runner
