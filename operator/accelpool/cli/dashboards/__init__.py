"""The Grafana dashboards shipped in the Helm chart, generated from code with grafana-foundation-sdk.

*Accelerator Pools* is the fleet view (per pool: members, ready, quarantined, GPUs, utilization,
memory, power, temperature, measured vs expected TFLOPS, XID/ECC events, the operator's own
health); *GPU Node* drills down into one node's GPUs and its agent's checks. Every expression
uses only metrics the operator and the device agent export: tests/contract/test_live_prometheus.py
evaluates each one against a real Prometheus scraping both.

`render()` returns file name → JSON text; `accelpool dashboards` writes them to
charts/accelpool/dashboards/ (`make dashboards`), and `make check-generated` fails when the
committed files differ. grafana-foundation-sdk is a development dependency, so
only the `dashboards` command imports this package.

The modules: `panels` (a panel declared as data), `pools` and `node` (each dashboard's rows),
`build` (rows → JSON with the SDK).
"""

from accelpool.cli.dashboards.build import (
    DATASOURCE,
    NODE_UID,
    POOLS_UID,
    TAGS,
    accelerator_pools,
    expressions,
    gpu_node,
    render,
)
from accelpool.cli.dashboards.panels import GPU, NODE, POOL, Panel, PanelKind, Query, Row

__all__ = [
    "DATASOURCE",
    "GPU",
    "NODE",
    "NODE_UID",
    "POOL",
    "POOLS_UID",
    "TAGS",
    "Panel",
    "PanelKind",
    "Query",
    "Row",
    "accelerator_pools",
    "expressions",
    "gpu_node",
    "render",
]
