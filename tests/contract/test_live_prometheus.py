"""Proof that every dashboard and alert query is real: a real Prometheus scrapes the real operator
and real device agents (tests/contract/live_cluster.py) while faults are injected, and evaluates

- every expression of every panel of the committed dashboards, with the template variables as
  "All" (`.*`) and as a multi-selection of real values: each returns data;
- every template variable's query: each offers values;
- every alert expression of charts/accelpool/files/alerts.yaml: it is true exactly for what the
  injected faults broke (and for nothing healthy), and false where nothing is broken.

Labels are the ones the chart's monitors give in a cluster: job="accelpool-operator" and
job="accelpool-agent", the agents' own `node`/`pool` labels kept (honorLabels) and put on `up`.
The last test stops the operator; it must stay last.
"""

from __future__ import annotations

import json
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import require_tool
from tests.contract.live_cluster import BATCH, INFERENCE, NAMESPACE, TRAINING, LiveCluster, Topology
from tests.contract.prometheus import Prometheus, ScrapeTarget, wait_for

pytestmark = [pytest.mark.contract, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
DASHBOARDS = sorted((ROOT / "charts" / "accelpool" / "dashboards").glob("*.json"))
ALERTS = ROOT / "charts" / "accelpool" / "files" / "alerts.yaml"
RATE_INTERVAL = "15s"
"""What Grafana would put for $__rate_interval at this test's 1 s scrape interval (several samples)."""


@dataclass(frozen=True)
class Live:
    cluster: LiveCluster
    prometheus: Prometheus

    @property
    def topology(self) -> Topology:
        return self.cluster.topology


@pytest.fixture(scope="module")
def live() -> Iterator[Live]:
    binary = require_tool("prometheus")
    with LiveCluster.running() as cluster, tempfile.TemporaryDirectory(prefix="accelpool-prometheus-") as work:
        topology = cluster.topology
        targets = [ScrapeTarget("accelpool-operator", topology.operator, {"namespace": NAMESPACE, "pod": "operator"})]
        for node, (address, pool) in sorted(topology.agents.items()):
            labels = {"node": node, "pool": pool, "namespace": NAMESPACE, "pod": f"accelpool-agent-{pool}-{node}"}
            targets.append(ScrapeTarget("accelpool-agent", address, labels, honor_labels=True))
        with Prometheus.start(binary, Path(work), targets) as prometheus:
            wait_for(
                "three good scrapes of every target",
                lambda: prometheus.query(f"count(count_over_time(up[1m]) >= 3 and up == 1) == {len(targets)}"),
                timeout=30,
            )
            cluster.break_the_api()
            wait_for(
                "Prometheus to see the failed reconcile pass",
                lambda: prometheus.query("increase(accelpool_reconcile_errors_total[1m]) > 0"),
                timeout=30,
            )
            cluster.kill_agent(topology.healthy_inference)
            wait_for(
                "Prometheus to see the killed agent down",
                lambda: prometheus.query(f'up{{node="{topology.healthy_inference}"}} == 0'),
                timeout=30,
            )
            wait_for(
                "Prometheus to see the batch pool",
                lambda: prometheus.query(f'accelpool_pool_info{{pool="{BATCH}"}}'),
                timeout=30,
            )
            yield Live(cluster, prometheus)


# ---- dashboards


def _dashboard_targets() -> list[tuple[str, str, str]]:
    found = []
    for path in DASHBOARDS:
        document = json.loads(path.read_text())
        for panel in document["panels"]:
            for target in panel.get("targets") or []:
                found.append((path.stem, f"{panel['title']} [{target['refId']}]", target["expr"]))
    return found


def _variables() -> list[tuple[str, str, str]]:
    found = []
    for path in DASHBOARDS:
        for variable in json.loads(path.read_text())["templating"]["list"]:
            if variable["type"] == "query":
                found.append((path.stem, variable["name"], variable["query"]))
    return found


def _substitute(expr: str, values: dict[str, str]) -> str:
    """Grafana's interpolation of the dashboards' variables; an unknown one fails the test."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        if name not in values:
            pytest.fail(f"{expr}: no value for the variable ${name}")
        return values[name]

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", value, expr)


def _all(_: Topology) -> dict[str, str]:
    return {"pool": ".*", "node": ".*", "vendor": ".*", "gpu": ".*", "__rate_interval": RATE_INTERVAL}


def _selected(topology: Topology) -> dict[str, str]:
    """A multi-selection of real values, rendered as Grafana does for a regex matcher: (a|b)."""
    nodes = f"({topology.faulty_xid}|{topology.faulty_slow_hot})"
    selected = {"pool": f"({TRAINING})", "node": nodes, "vendor": "(nvidia)", "gpu": "(0|1)"}
    return {**selected, "__rate_interval": RATE_INTERVAL}


SELECTIONS: dict[str, Callable[[Topology], dict[str, str]]] = {"all": _all, "selected": _selected}


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize(("dashboard", "panel", "expr"), _dashboard_targets())
def test_every_dashboard_query_returns_data(live: Live, dashboard: str, panel: str, expr: str, selection: str) -> None:
    query = _substitute(expr, SELECTIONS[selection](live.topology))
    result = live.prometheus.query(query)
    assert result, f"{dashboard} / {panel}: no data for {query}"


@pytest.mark.parametrize(("dashboard", "name", "query"), _variables())
def test_every_template_variable_offers_values(live: Live, dashboard: str, name: str, query: str) -> None:
    match = re.fullmatch(r"label_values\((.+), (\w+)\)", _substitute(query, _all(live.topology)))
    assert match, f"{dashboard} ${name}: not a label_values(selector, label) query: {query}"
    selector, label = match.groups()
    assert live.prometheus.label_values(selector, label), f"{dashboard} ${name}: no values for {query}"


def test_the_dashboards_are_checked_at_all() -> None:
    assert len(DASHBOARDS) == 2 and len(_dashboard_targets()) >= 40 and len(_variables()) >= 5


# ---- alerts


def _alerts() -> dict[str, str]:
    document = yaml.safe_load(ALERTS.read_text())
    return {rule["alert"]: rule["expr"] for group in document["groups"] for rule in group["rules"]}


Expectation = tuple[tuple[str, ...], Callable[[Topology], set[tuple[str, ...]]]]
EXPECTED: dict[str, Expectation] = {
    # alert: (the labels that identify what fires, exactly what the injected faults make it fire for)
    "AccelPoolDegraded": (("pool", "phase"), lambda t: {(TRAINING, "Degraded")}),
    "AccelPoolUnderCapacity": (("pool",), lambda t: {(TRAINING,), (BATCH,)}),
    "AccelPoolCircuitBreakerOpen": (("pool",), lambda t: {(TRAINING,)}),
    # No drain is blocked and no node handed off in the live cluster (the unit and promtool tests make them fire).
    "AccelPoolDrainBlocked": (("pool",), lambda t: set()),
    "AccelPoolNodeHandedOff": (("pool",), lambda t: set()),
    # Silent: every node passed burn-in before its fault was injected, and the fake agents run one driver.
    "AccelPoolBurnInStuck": (("pool",), lambda t: set()),
    "AccelPoolDriverVersionMismatch": (("pool",), lambda t: set()),
    "AccelPoolGPUUnhealthy": (
        ("pool", "node", "gpu"),
        lambda t: {(TRAINING, t.faulty_xid, "0"), (TRAINING, t.faulty_slow_hot, "1")},
    ),
    "AccelPoolXIDError": (("pool", "node", "gpu", "xid"), lambda t: {(TRAINING, t.faulty_xid, "0", "79")}),
    "AccelPoolMatmulBelowPolicy": (("node", "gpu", "check"), lambda t: {(t.faulty_slow_hot, "1", "matmul")}),
    "AccelPoolGPUHighTemperature": (("node", "gpu"), lambda t: {(t.faulty_slow_hot, "1")}),
    "AccelPoolAgentDown": (("node", "pool"), lambda t: {(t.healthy_inference, INFERENCE)}),
    "AccelPoolAgentMissing": (("pool",), lambda t: {(INFERENCE,)}),
    "AccelPoolReconcileErrors": (("job",), lambda t: {("accelpool-operator",)}),
    # Silent while the operator runs; test_operator_down_fires_when_the_operator_stops makes it fire.
    "AccelPoolOperatorDown": (("job",), lambda t: set()),
    "AccelPoolNVLinkDown": (("node", "gpu"), lambda t: {(t.faulty_xid, "0")}),
    "AccelPoolNVLinkErrors": (("node", "gpu"), lambda t: {(t.faulty_slow_hot, "1")}),
    "AccelPoolPCIeLinkDegraded": (("node", "gpu", "reason"), lambda t: {(t.faulty_slow_hot, "1", "PcieLinkDegraded")}),
    "AccelPoolInfiniBandPortDown": (("node", "device", "port"), lambda t: {(t.faulty_xid, "mlx5_0", "1")}),
    "AccelPoolNodeActionRecommended": (
        ("pool", "node", "action"),
        lambda t: {(TRAINING, t.faulty_xid, "restart-os"), (TRAINING, t.faulty_slow_hot, "reset-gpu")},
    ),
}


def _fired(live: Live, expr: str, keys: tuple[str, ...]) -> set[tuple[str, ...]]:
    return {tuple(sample["metric"].get(k, "") for k in keys) for sample in live.prometheus.query(expr)}


def test_every_alert_has_a_live_expectation() -> None:
    assert set(_alerts()) == set(EXPECTED)


@pytest.mark.parametrize(("alert", "expr"), sorted(_alerts().items()))
def test_each_alert_is_true_exactly_for_the_injected_faults(live: Live, alert: str, expr: str) -> None:
    keys, expected = EXPECTED[alert]
    assert _fired(live, expr, keys) == expected(live.topology), f"{alert}: {expr}"


def test_healthy_things_do_not_alert(live: Live) -> None:
    """Spelled out: the healthy pool, node and GPUs appear in no alert's result."""
    healthy_gpus = {(live.topology.faulty_xid, "1"), (live.topology.faulty_slow_hot, "0")}
    for alert, expr in _alerts().items():
        for sample in live.prometheus.query(expr):
            labels: dict[str, Any] = sample["metric"]
            assert (labels.get("node"), labels.get("gpu")) not in healthy_gpus, (alert, labels)
            if alert not in ("AccelPoolAgentDown", "AccelPoolAgentMissing"):
                assert labels.get("pool") != INFERENCE, (alert, labels)


def test_operator_down_fires_when_the_operator_stops(live: Live) -> None:
    """Runs last: it stops the operator for good."""
    expr = _alerts()["AccelPoolOperatorDown"]
    assert not live.prometheus.query(expr)
    live.cluster.stop_operator()
    wait_for("up{job=accelpool-operator} == 0", lambda: live.prometheus.query(expr), timeout=30)
    assert _fired(live, expr, ("job",)) == {("accelpool-operator",)}
