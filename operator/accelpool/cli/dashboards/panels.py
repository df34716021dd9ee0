"""Panels declared as data: what each shows (PromQL, legend) and how (kind, unit, size, thresholds).

`accelpool.cli.dashboards.pools` and `accelpool.cli.dashboards.node` declare their rows with these;
`accelpool.cli.dashboards.build` turns them into grafana-foundation-sdk builders.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Selectors by template variable. Agent series carry `pool` and `node` target labels (the chart's
# PodMonitor sets them from the pod); operator series carry `pool`. Per-device series (`accelpool_gpu_*`,
# `accelpool_check_*`: every vendor's devices) also carry `vendor` (nvidia, amd, aws, google).
POOL = 'pool=~"$pool"'
DEVICES = 'pool=~"$pool", vendor=~"$vendor"'
NODE = 'pool=~"$pool", node=~"$node"'
GPU = 'pool=~"$pool", node=~"$node", vendor=~"$vendor", gpu=~"$gpu"'


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
    """A titled row of a dashboard and the panels under it."""

    title: str
    panels: tuple[Panel, ...]


def queries(*pairs: tuple[str, str]) -> tuple[Query, ...]:
    """Queries from (PromQL, legend) pairs."""
    return tuple(Query(expr, legend) for expr, legend in pairs)
