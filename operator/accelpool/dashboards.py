"""The Grafana dashboards shipped in the Helm chart, generated from code with grafana-foundation-sdk.

*Accelerator Pools* is the fleet view (per pool: members, ready, quarantined, GPUs, utilization,
memory, power, temperature, measured vs expected TFLOPS, XID/ECC events, the operator's own
health); *GPU Node* drills down into one node's GPUs and its agent's checks. Every expression
uses only metrics the operator and the device agent export: tests/contract/test_live_prometheus.py
evaluates each one against a real Prometheus scraping both.

`render()` returns file name → JSON text; `accelpool dashboards` writes them to
charts/accelpool/dashboards/ (`make dashboards`), and `make check-generated` fails when the
committed files differ. Pure: no I/O. grafana-foundation-sdk is a development dependency, so
only the `dashboards` command imports this module.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models

DATASOURCE = models.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["accelpool", "gpu"]
POOLS_UID = "accelpool-pools"
NODE_UID = "accelpool-gpu-node"

# Selectors by template variable. Agent series carry `pool` and `node` target labels (the chart's
# PodMonitor sets them from the pod); operator series carry `pool`.
POOL = 'pool=~"$pool"'
NODE = 'pool=~"$pool", node=~"$node"'
GPU = 'pool=~"$pool", node=~"$node", gpu=~"$gpu"'


@dataclass(frozen=True)
class Query:
    """One PromQL target of a panel and how its series are named in the legend."""

    expr: str
    legend: str = ""


PanelKind = Literal["timeseries", "stat", "table"]


@dataclass(frozen=True)
class Panel:
    """A panel, declared: what it shows and how, before it becomes SDK builders."""

    title: str
    description: str
    queries: tuple[Query, ...]
    unit: str = "short"
    kind: PanelKind = "timeseries"
    width: int = 12
    height: int = 8
    min: float | None = None
    max: float | None = None
    thresholds: tuple[tuple[float, str], ...] = ()
    """(value, colour) steps above the base green, e.g. ((1, "red"),)."""
    stacked: bool = False


@dataclass(frozen=True)
class Row:
    title: str
    panels: tuple[Panel, ...]


def _queries(*pairs: tuple[str, str]) -> tuple[Query, ...]:
    return tuple(Query(expr, legend) for expr, legend in pairs)


# ---- Accelerator Pools


def _pools_rows() -> tuple[Row, ...]:
    return (
        Row(
            "Fleet",
            (
                Panel(
                    "Pools by phase",
                    "ComputePools per status.phase (Pending, Provisioning, Configuring, Ready, Degraded, Failed).",
                    _queries(("sum by (phase) (accelpool_pools)", "{{phase}}")),
                    kind="stat",
                    width=8,
                    height=5,
                ),
                Panel(
                    "Pools",
                    "Every pool's current phase and accelerator.",
                    _queries(
                        (
                            f"(accelpool_pool_phase{{{POOL}}} == 1) * on (pool) "
                            "group_left (accelerator, provisioner, mig_strategy, sharing) "
                            f"accelpool_pool_info{{{POOL}}}",
                            "",
                        ),
                    ),
                    kind="table",
                    width=8,
                    height=5,
                ),
                Panel(
                    "Quarantined nodes",
                    "Members the operator tainted or cordoned because their agent reported a fault.",
                    _queries((f'sum(accelpool_pool_nodes{{{POOL}, state="quarantined"}})', "quarantined")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "Circuit breakers open",
                    "Pools where the operator refused a quarantine because health.maxUnavailable was reached.",
                    _queries((f"sum(accelpool_pool_circuit_breaker_open{{{POOL}}})", "open")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "Unhealthy GPUs",
                    "GPUs failing at least one check, as their agents report them.",
                    _queries((f"sum(accelpool_node_unhealthy_gpus{{{POOL}}})", "unhealthy")),
                    kind="stat",
                    width=4,
                    height=5,
                    thresholds=((1, "red"),),
                ),
                Panel(
                    "GPUs in pools",
                    "Devices on member nodes, as the operator counts them (status.capacity.gpus).",
                    _queries((f"sum(accelpool_pool_gpus{{{POOL}}})", "GPUs")),
                    kind="stat",
                    width=4,
                    height=5,
                ),
                Panel(
                    "Healthy nodes",
                    "Nodes whose agent reports AcceleratorHealthy=True, and nodes with a reporting agent.",
                    _queries(
                        (f"sum(accelpool_node_healthy{{{POOL}}})", "healthy"),
                        (f"count(accelpool_node_healthy{{{POOL}}})", "with an agent"),
                    ),
                    kind="stat",
                    width=4,
                    height=5,
                ),
            ),
        ),
        Row(
            "Pool capacity",
            (
                Panel(
                    "Nodes per pool",
                    "Desired (spec.nodes), member, ready and quarantined nodes of each pool.",
                    _queries((f"accelpool_pool_nodes{{{POOL}}}", "{{pool}} {{state}}")),
                    min=0,
                ),
                Panel(
                    "GPUs per pool",
                    "Devices on each pool's members.",
                    _queries((f"accelpool_pool_gpus{{{POOL}}}", "{{pool}}")),
                    min=0,
                ),
                Panel(
                    "Measured vs expected TFLOPS",
                    "The pool's measured matmul TFLOPS (status.capacity.measuredTFLOPS, the policy dtype) against "
                    "the catalog's dense peak of the same GPUs: a gap means slow, throttled or missing GPUs.",
                    _queries(
                        (f"accelpool_pool_measured_tflops{{{POOL}}}", "{{pool}} measured"),
                        (f"accelpool_pool_expected_tflops{{{POOL}}}", "{{pool}} expected (catalog peak)"),
                    ),
                    unit="none",
                    min=0,
                ),
                Panel(
                    "Matmul efficiency, worst GPU",
                    "Lowest measured / peak matmul throughput of any GPU in the pool, per dtype; the pool's "
                    "health.matmul.minEfficiency is the floor below which the GPU fails.",
                    _queries(
                        (
                            f"min by (pool, dtype) (accelpool_check_matmul_efficiency_ratio{{{POOL}}})",
                            "{{pool}} {{dtype}}",
                        ),
                    ),
                    unit="percentunit",
                    min=0,
                ),
            ),
        ),
        Row(
            "Utilization",
            (
                Panel(
                    "GPU utilization",
                    "Mean utilization of the pool's GPUs (fraction of time a kernel ran).",
                    _queries((f"avg by (pool) (accelpool_gpu_utilization_ratio{{{POOL}}})", "{{pool}}")),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "GPU memory",
                    "Device memory in use across each pool, against the total.",
                    _queries(
                        (f"sum by (pool) (accelpool_gpu_memory_used_bytes{{{POOL}}})", "{{pool}} used"),
                        (f"sum by (pool) (accelpool_gpu_memory_total_bytes{{{POOL}}})", "{{pool}} total"),
                    ),
                    unit="bytes",
                    min=0,
                ),
                Panel(
                    "Power",
                    "Total power draw of each pool's GPUs, against the sum of their power limits.",
                    _queries(
                        (f"sum by (pool) (accelpool_gpu_power_watts{{{POOL}}})", "{{pool}} draw"),
                        (f"sum by (pool) (accelpool_gpu_power_limit_watts{{{POOL}}})", "{{pool}} limit"),
                    ),
                    unit="watt",
                    min=0,
                ),
                Panel(
                    "Temperature",
                    "Hottest GPU of each pool, and the lowest slowdown temperature among them (clocks drop there).",
                    _queries(
                        (f"max by (pool) (accelpool_gpu_temperature_celsius{{{POOL}}})", "{{pool}} hottest"),
                        (
                            f"min by (pool) (accelpool_gpu_slowdown_temperature_celsius{{{POOL}}})",
                            "{{pool}} slowdown",
                        ),
                    ),
                    unit="celsius",
                ),
            ),
        ),
        Row(
            "Faults",
            (
                Panel(
                    "XID errors",
                    "Critical XID errors the driver reported, per node and XID (79: fallen off the bus; "
                    "48, 94, 95: ECC; 119, 120: GSP). The GPU Node dashboard shows which GPU.",
                    _queries(
                        (
                            "sum by (pool, node, xid) "
                            f"(increase(accelpool_gpu_xid_errors_total{{{POOL}}}[$__rate_interval]))",
                            "{{node}} XID {{xid}}",
                        ),
                    ),
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "ECC errors since the driver loaded",
                    "Volatile ECC error counts per node: single_bit were corrected, double_bit were not.",
                    _queries(
                        (
                            "sum by (pool, node, error_type) "
                            f'(accelpool_gpu_ecc_errors_total{{{POOL}, scope="volatile"}})',
                            "{{node}} {{error_type}}",
                        ),
                    ),
                    min=0,
                ),
                Panel(
                    "Checks failing and warning",
                    "GPUs per check whose latest result fails (2) or warns (1).",
                    _queries(
                        (f"count by (pool, check) (accelpool_check_status{{{POOL}}} == 2)", "{{pool}} {{check}} fail"),
                        (f"count by (pool, check) (accelpool_check_status{{{POOL}}} == 1)", "{{pool}} {{check}} warn"),
                    ),
                    min=0,
                ),
                Panel(
                    "Remediations",
                    "Quarantines and releases the operator applied, per pool.",
                    _queries(
                        (
                            "sum by (pool, action) "
                            f"(increase(accelpool_remediations_total{{{POOL}}}[$__rate_interval]))",
                            "{{pool}} {{action}}",
                        ),
                    ),
                    min=0,
                ),
            ),
        ),
        Row(
            "Operator and agents",
            (
                Panel(
                    "Reconcile passes",
                    "Reconcile passes per second by result (a pass plans every pool and writes the difference).",
                    _queries(("sum by (result) (rate(accelpool_reconcile_total[$__rate_interval]))", "{{result}}")),
                    unit="ops",
                    min=0,
                    stacked=True,
                ),
                Panel(
                    "Reconcile duration (p95)",
                    "95th percentile of a reconcile's wall time.",
                    _queries(
                        (
                            "histogram_quantile(0.95, sum by (le) "
                            "(rate(accelpool_reconcile_duration_seconds_bucket[$__rate_interval])))",
                            "p95",
                        ),
                    ),
                    unit="s",
                    min=0,
                ),
                Panel(
                    "Since the last successful pass",
                    "Seconds since a reconcile pass last succeeded; it keeps growing while every pass fails.",
                    _queries(("time() - max(accelpool_reconcile_last_success_timestamp_seconds)", "seconds")),
                    unit="s",
                    kind="stat",
                    width=6,
                    height=8,
                    thresholds=((300, "orange"), (900, "red")),
                ),
                Panel(
                    "API writes",
                    "Kubernetes API writes of the reconciler per second, by verb and resource; zero at steady state.",
                    _queries(
                        (
                            "sum by (verb, resource) (rate(accelpool_api_writes_total[$__rate_interval]))",
                            "{{verb}} {{resource}}",
                        ),
                    ),
                    unit="wps",
                    min=0,
                ),
                Panel(
                    "Agents up",
                    "Agent pods Prometheus scrapes successfully, of those it knows, per pool.",
                    _queries(
                        (f'sum by (pool) (up{{job="accelpool-agent", {POOL}}})', "{{pool}} up"),
                        (f'count by (pool) (up{{job="accelpool-agent", {POOL}}})', "{{pool}} scraped"),
                    ),
                    min=0,
                ),
            ),
        ),
    )


# ---- GPU Node


def _node_rows() -> tuple[Row, ...]:
    return (
        Row(
            "Node",
            (
                Panel(
                    "Node health",
                    "The agent's verdict (node condition AcceleratorHealthy): 1 healthy, 0 unhealthy or unknown.",
                    _queries((f"accelpool_node_healthy{{{NODE}}}", "{{node}}")),
                    kind="stat",
                    width=6,
                    height=5,
                    thresholds=((1, "green"),),
                ),
                Panel(
                    "Check results",
                    "The latest result of every check on every GPU: 0 pass, 1 warn, 2 fail, with the reason "
                    "(skipped checks are absent).",
                    _queries((f"accelpool_check_status{{{GPU}}}", "")),
                    kind="table",
                    width=18,
                    height=10,
                    thresholds=((1, "orange"), (2, "red")),
                ),
                Panel(
                    "Check cycle",
                    "Seconds since the agent's last full check cycle ended, and how long that cycle took.",
                    _queries(
                        (f"time() - accelpool_node_last_cycle_timestamp_seconds{{{NODE}}}", "{{node}} age"),
                        (f"accelpool_node_cycle_duration_seconds{{{NODE}}}", "{{node}} duration"),
                    ),
                    unit="s",
                    width=6,
                    height=5,
                ),
            ),
        ),
        Row(
            "Per GPU",
            (
                Panel(
                    "Utilization",
                    "Fraction of time a kernel ran, per GPU.",
                    _queries((f"accelpool_gpu_utilization_ratio{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="percentunit",
                    min=0,
                    max=1,
                ),
                Panel(
                    "Memory used",
                    "Device memory in use per GPU.",
                    _queries((f"accelpool_gpu_memory_used_bytes{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="bytes",
                    min=0,
                ),
                Panel(
                    "Temperature",
                    "Per GPU, with the lowest slowdown temperature among them.",
                    _queries(
                        (f"accelpool_gpu_temperature_celsius{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"min(accelpool_gpu_slowdown_temperature_celsius{{{GPU}}})", "slowdown"),
                    ),
                    unit="celsius",
                ),
                Panel(
                    "Power",
                    "Power draw per GPU, with the lowest power limit among them.",
                    _queries(
                        (f"accelpool_gpu_power_watts{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"min(accelpool_gpu_power_limit_watts{{{GPU}}})", "limit"),
                    ),
                    unit="watt",
                    min=0,
                ),
                Panel(
                    "SM clock",
                    "Streaming-multiprocessor clock per GPU against its maximum; it drops under throttling.",
                    _queries(
                        (f"accelpool_gpu_sm_clock_hertz{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"max(accelpool_gpu_sm_clock_max_hertz{{{GPU}}})", "max"),
                    ),
                    unit="hertz",
                    min=0,
                ),
                Panel(
                    "Clock throttling",
                    "GPUs whose clocks are held back, per NVML clock-event reason.",
                    _queries((f"sum by (reason) (accelpool_gpu_clock_throttle{{{GPU}}})", "{{reason}}")),
                    min=0,
                ),
            ),
        ),
        Row(
            "Checks and memory health",
            (
                Panel(
                    "Matmul TFLOPS",
                    "Measured dense matmul throughput per GPU and dtype.",
                    _queries((f"accelpool_check_matmul_tflops{{{GPU}}}", "{{node}} GPU {{gpu}} {{dtype}}")),
                    unit="none",
                    min=0,
                ),
                Panel(
                    "Matmul efficiency",
                    "Measured / the catalog's dense peak per GPU and dtype; below the pool's "
                    "health.matmul.minEfficiency the GPU fails.",
                    _queries((f"accelpool_check_matmul_efficiency_ratio{{{GPU}}}", "{{node}} GPU {{gpu}} {{dtype}}")),
                    unit="percentunit",
                    min=0,
                ),
                Panel(
                    "Memory bandwidth",
                    "Measured device-to-device copy bandwidth per GPU (bytes read + written).",
                    _queries((f"accelpool_check_bandwidth_bytes_per_second{{{GPU}}}", "{{node}} GPU {{gpu}}")),
                    unit="Bps",
                    min=0,
                ),
                Panel(
                    "XID errors",
                    "Critical XID errors per GPU since the agent started, by XID.",
                    _queries((f"accelpool_gpu_xid_errors_total{{{GPU}}}", "{{node}} GPU {{gpu}} XID {{xid}}")),
                    min=0,
                ),
                Panel(
                    "ECC errors and remapped rows",
                    "Volatile ECC errors by type, and memory rows remapped, per GPU.",
                    _queries(
                        (
                            f'accelpool_gpu_ecc_errors_total{{{GPU}, scope="volatile"}}',
                            "{{node}} GPU {{gpu}} ECC {{error_type}}",
                        ),
                        (f"accelpool_gpu_remapped_rows{{{GPU}}}", "{{node}} GPU {{gpu}} remapped {{error_type}}"),
                    ),
                    min=0,
                ),
                Panel(
                    "PCIe link width",
                    "Lanes the PCIe link trained at, per GPU; below the maximum means a degraded link.",
                    _queries(
                        (f"accelpool_gpu_pcie_link_width{{{GPU}}}", "{{node}} GPU {{gpu}}"),
                        (f"max(accelpool_gpu_pcie_link_max_width{{{GPU}}})", "max"),
                    ),
                    min=0,
                ),
                Panel(
                    "Agent collectors",
                    "Per-collector scrape duration of the agent, and how many collectors failed (no data).",
                    _queries(
                        (
                            f"accelpool_agent_scrape_collector_duration_seconds{{{NODE}}}",
                            "{{node}} {{collector}}",
                        ),
                        (
                            f"sum by (node) (1 - accelpool_agent_scrape_collector_success{{{NODE}}})",
                            "{{node}} failing collectors",
                        ),
                    ),
                    unit="s",
                    min=0,
                ),
            ),
        ),
    )


# ---- building with the SDK


def _target(query: Query, ref: str, *, instant: bool) -> prometheus.Dataquery:
    target = prometheus.Dataquery().expr(query.expr).ref_id(ref).legend_format(query.legend or "__auto")
    return target.instant() if instant else target.range()


def _thresholds(steps: Sequence[tuple[float, str]]) -> dashboard_builders.ThresholdsConfig:
    return (
        dashboard_builders.ThresholdsConfig()
        .mode(models.ThresholdsMode.ABSOLUTE)
        .steps([models.Threshold(None, "green"), *(models.Threshold(v, c) for v, c in steps)])
    )


def _build_panel(panel: Panel) -> Any:
    builder: Any
    if panel.kind == "stat":
        builder = (
            stat.Panel()
            .graph_mode(common.BigValueGraphMode.AREA)
            .color_mode(common.BigValueColorMode.VALUE)
            .reduce_options(common_builders.ReduceDataOptions().calcs(["lastNotNull"]))
        )
    elif panel.kind == "table":
        builder = table.Panel().with_transformation(
            models.DataTransformerConfig(id_val="labelsToFields", options={"mode": "columns"})
        )
    else:
        builder = (
            timeseries.Panel()
            .line_width(1)
            .fill_opacity(10)
            .legend(
                common_builders.VizLegendOptions()
                .display_mode(common.LegendDisplayMode.TABLE)
                .placement(common.LegendPlacement.BOTTOM)
                .show_legend(True)
                .calcs(["lastNotNull", "max"])
            )
        )
        if panel.stacked:
            builder = builder.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    instant = panel.kind == "table"
    builder = (
        builder.title(panel.title)
        .description(panel.description)
        .datasource(DATASOURCE)
        .unit(panel.unit)
        .span(panel.width)
        .height(panel.height)
    )
    for index, query in enumerate(panel.queries):
        builder = builder.with_target(_target(query, chr(ord("A") + index), instant=instant))
    if panel.min is not None:
        builder = builder.min(panel.min)
    if panel.max is not None:
        builder = builder.max(panel.max)
    if panel.thresholds:
        builder = builder.thresholds(_thresholds(panel.thresholds))
    return builder


def _query_variable(name: str, label: str, query: str) -> dashboard_builders.QueryVariable:
    return (
        dashboard_builders.QueryVariable(name)
        .label(label)
        .query(query)
        .datasource(DATASOURCE)
        .multi(True)
        .include_all(True)
        .all_value(".*")
        .refresh(models.VariableRefresh.ON_TIME_RANGE_CHANGED)
        .sort(models.VariableSort.ALPHABETICAL_ASC)
        .current(models.VariableOption(text="All", value="$__all", selected=True))
    )


def _variables(*, with_gpu: bool) -> list[Any]:
    variables: list[Any] = [
        dashboard_builders.DatasourceVariable("datasource").label("Data source").type("prometheus"),
        _query_variable("pool", "Pool", "label_values(accelpool_pool_info, pool)"),
        _query_variable("node", "Node", 'label_values(accelpool_node_healthy{pool=~"$pool"}, node)'),
    ]
    if with_gpu:
        variables.append(
            _query_variable("gpu", "GPU", 'label_values(accelpool_gpu_info{pool=~"$pool", node=~"$node"}, gpu)')
        )
    return variables


def _link(title: str, uid: str) -> dashboard_builders.DashboardLink:
    return (
        dashboard_builders.DashboardLink(title)
        .type(models.DashboardLinkType.LINK)
        .url(f"/d/{uid}")
        .include_vars(True)
        .keep_time(True)
        .icon("dashboard")
    )


def _dashboard(
    *, uid: str, title: str, description: str, rows: tuple[Row, ...], with_gpu: bool, link: tuple[str, str]
) -> dict[str, Any]:
    builder = (
        dashboard_builders.Dashboard(title)
        .uid(uid)
        .description(description)
        .tags(TAGS)
        .refresh("30s")
        .time("now-6h", "now")
        .timezone("browser")
        .tooltip(models.DashboardCursorSync.CROSSHAIR)
        .link(_link(*link))
    )
    for variable in _variables(with_gpu=with_gpu):
        builder = builder.with_variable(variable)
    for row in rows:
        builder = builder.with_row(dashboard_builders.Row(row.title))
        for panel in row.panels:
            builder = builder.with_panel(_build_panel(panel))
    document: dict[str, Any] = json.loads(json.dumps(builder.build(), cls=JSONEncoder))
    for number, panel_json in enumerate(document["panels"], start=1):
        panel_json["id"] = number
    return document


def accelerator_pools() -> dict[str, Any]:
    return _dashboard(
        uid=POOLS_UID,
        title="Accelerator Pools",
        description="accelpool ComputePools: capacity, utilization, health and the operator.",
        rows=_pools_rows(),
        with_gpu=False,
        link=("GPU Node", NODE_UID),
    )


def gpu_node() -> dict[str, Any]:
    return _dashboard(
        uid=NODE_UID,
        title="GPU Node",
        description="One node's GPUs as its accelpool agent sees them: telemetry, checks, XID/ECC.",
        rows=_node_rows(),
        with_gpu=True,
        link=("Accelerator Pools", POOLS_UID),
    )


def render() -> dict[str, str]:
    """File name → the dashboard's JSON text, as committed under charts/accelpool/dashboards/."""
    return {
        "accelerator-pools.json": _dumps(accelerator_pools()),
        "gpu-node.json": _dumps(gpu_node()),
    }


def _dumps(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def expressions(document: dict[str, Any]) -> list[tuple[str, str]]:
    """(panel title, PromQL) for every target of every panel of a dashboard's JSON."""
    return [
        (panel["title"], target["expr"])
        for panel in document["panels"]
        for target in panel.get("targets") or []
        if target.get("expr")
    ]
