"""Declared rows → the dashboards' JSON, built with grafana-foundation-sdk.

`render()` returns file name → JSON text, as committed under charts/accelpool/dashboards/;
`expressions()` lists the PromQL of every panel of a rendered dashboard.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dashboard_builders
from grafana_foundation_sdk.builders import prometheus, stat, table, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models import dashboard as models

from accelpool.cli.dashboards import node, pools
from accelpool.cli.dashboards.panels import Panel, Query, Row

DATASOURCE = models.DataSourceRef(type_val="prometheus", uid="${datasource}")
TAGS = ["accelpool", "gpu"]
POOLS_UID = "accelpool-pools"
NODE_UID = "accelpool-gpu-node"


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
        _query_variable("vendor", "Vendor", 'label_values(accelpool_gpu_info{pool=~"$pool"}, vendor)'),
    ]
    if with_gpu:
        devices = 'accelpool_gpu_info{pool=~"$pool", node=~"$node", vendor=~"$vendor"}'
        variables.append(_query_variable("gpu", "GPU", f"label_values({devices}, gpu)"))
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
    """The Accelerator Pools dashboard's JSON document."""
    return _dashboard(
        uid=POOLS_UID,
        title="Accelerator Pools",
        description="accelpool ComputePools: capacity, utilization, health and the operator.",
        rows=pools.rows(),
        with_gpu=False,
        link=("GPU Node", NODE_UID),
    )


def gpu_node() -> dict[str, Any]:
    """The GPU Node dashboard's JSON document."""
    return _dashboard(
        uid=NODE_UID,
        title="GPU Node",
        description="One node's GPUs as its accelpool agent sees them: telemetry, checks, XID/ECC.",
        rows=node.rows(),
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
