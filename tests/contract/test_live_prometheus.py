"""Proof that every dashboard and alert query is real: a real Prometheus scrapes the real operator
and real device agents (tests/contract/live_cluster.py: NVIDIA pools, and an MI300X, a Trainium2 and a
TPU v5p pool whose agents simulate those vendors' devices) while faults are injected, and evaluates

- every expression of every panel of the committed dashboards, with the template variables as
  "All" (`.*`): each returns data; and as a multi-selection of real values of each vendor's pool, node,
  devices and `vendor`: each returns that vendor's series, except the panels of readings the vendor's
  tool does not report (`NOT_REPORTED`, exactly those: such a panel returns nothing);
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

from tests.contract.live_cluster import BATCH, INFERENCE, NAMESPACE, TRAINING, LiveCluster, Topology
from tests.contract.prometheus import Prometheus, ScrapeTarget, wait_for
from tests.support.environment import require_tool

pytestmark = [pytest.mark.contract, pytest.mark.timeout(420)]

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


def _selected(topology: Topology, vendor: str) -> dict[str, str]:
    """A multi-selection of one vendor's real values, rendered as Grafana does for a regex matcher: (a|b)."""
    pool = TRAINING if vendor == "nvidia" else topology.vendor_nodes[vendor][1]
    nodes = sorted(node for node, (_, member_of) in topology.agents.items() if member_of == pool)
    selected = {"pool": f"({pool})", "node": f"({'|'.join(nodes)})", "vendor": f"({vendor})", "gpu": "(0|1)"}
    return {**selected, "__rate_interval": RATE_INTERVAL}


VENDORS = ("nvidia", "amd", "aws", "google")
NVIDIA_ONLY = {  # NVML's alone: row remapping, NVSwitch fabric registration, P-states
    "gpu-node / ECC errors and remapped rows [B]",
    "gpu-node / NVSwitch fabric [A]",
    "gpu-node / Performance state [A]",
}
NO_COMPUTE = {  # Neuron and TPU devices are judged without the agent's CuPy/NumPy compute checks
    "accelerator-pools / Measured vs expected TFLOPS [A]",
    "accelerator-pools / Matmul efficiency, worst GPU [A]",
    "gpu-node / Matmul TFLOPS [A]",
    "gpu-node / Matmul efficiency [A]",
    "gpu-node / Memory bandwidth [A]",
}
NOT_MONITORED = {  # neuron-monitor's report and libtpu's metrics have no temperature, power, clocks, PCIe, links,
    # driver events; their hosts' EFA / DCN NICs are no sysfs InfiniBand ports
    "accelerator-pools / Power [A]",
    "accelerator-pools / Power [B]",
    "accelerator-pools / Temperature [A]",
    "accelerator-pools / Temperature [B]",
    "accelerator-pools / Driver error events [A]",
    "gpu-node / Temperature [A]",
    "gpu-node / Temperature [B]",
    "gpu-node / Power [A]",
    "gpu-node / Power [B]",
    "gpu-node / SM clock [A]",
    "gpu-node / SM clock [B]",
    "gpu-node / Clock throttling [A]",
    "gpu-node / Driver error events [A]",
    "gpu-node / PCIe link width [A]",
    "gpu-node / PCIe link width [B]",
    "gpu-node / Peer links down [A]",
    "gpu-node / Peer link errors per minute [A]",
    "gpu-node / PCIe link generation [A]",
    "gpu-node / PCIe link generation [B]",
    "gpu-node / InfiniBand ports [A]",
    "gpu-node / InfiniBand errors per minute [A]",
}
NEURON_CORES, TPU_CORES = "gpu-node / Core utilization [A]", "gpu-node / Core utilization [B]"
TPU_NO_ECC = {
    "accelerator-pools / ECC errors since the driver loaded [A]",
    "gpu-node / ECC errors and remapped rows [A]",
}
QUIET_POOLS = {  # the scenario: nothing warns and nothing is drained in the other vendors' pools
    "accelerator-pools / Checks failing and warning [B]",
    "accelerator-pools / Drain evictions [A]",
}
NOT_REPORTED: dict[str, set[str]] = {
    "nvidia": {NEURON_CORES, TPU_CORES},
    "amd": NVIDIA_ONLY | QUIET_POOLS | {NEURON_CORES, TPU_CORES},
    "aws": NVIDIA_ONLY | QUIET_POOLS | NO_COMPUTE | NOT_MONITORED | {TPU_CORES},
    "google": NVIDIA_ONLY | QUIET_POOLS | NO_COMPUTE | NOT_MONITORED | TPU_NO_ECC | {NEURON_CORES},
}
"""vendor → the panels (`dashboard / title [refId]`) with no data for its devices, and why (comments above)."""


@pytest.mark.parametrize(("dashboard", "panel", "expr"), _dashboard_targets())
def test_every_dashboard_query_returns_data(live: Live, dashboard: str, panel: str, expr: str) -> None:
    query = _substitute(expr, _all(live.topology))
    assert live.prometheus.query(query), f"{dashboard} / {panel}: no data for {query}"


@pytest.mark.parametrize("vendor", VENDORS)
@pytest.mark.parametrize(("dashboard", "panel", "expr"), _dashboard_targets())
def test_every_dashboard_query_shows_each_vendors_devices(
    live: Live, dashboard: str, panel: str, expr: str, vendor: str
) -> None:
    """With one vendor's pool, nodes and devices selected, a panel shows that vendor's series (and no other
    vendor's), unless the vendor's tool does not report what it shows: then it shows nothing."""
    query = _substitute(expr, _selected(live.topology, vendor))
    result = live.prometheus.query(query)
    if f"{dashboard} / {panel}" in NOT_REPORTED[vendor]:
        assert not result, f"{dashboard} / {panel} has {vendor} data after all: {result[:2]}"
        return
    assert result, f"{dashboard} / {panel}: no {vendor} data for {query}"
    vendors = {sample["metric"]["vendor"] for sample in result if "vendor" in sample["metric"]}
    assert vendors <= {vendor}, f"{dashboard} / {panel}: {vendors} for a selection of {vendor}"


def test_every_not_reported_panel_exists() -> None:
    panels = {f"{dashboard} / {panel}" for dashboard, panel, _ in _dashboard_targets()}
    assert set().union(*NOT_REPORTED.values()) <= panels


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
    "AccelPoolDegraded": (
        ("pool", "phase"),
        lambda t: {(TRAINING, "Degraded")} | {(pool, "Degraded") for _, pool in t.vendor_nodes.values()},
    ),
    "AccelPoolUnderCapacity": (
        ("pool",),
        lambda t: {(TRAINING,), (BATCH,)} | {(pool,) for _, pool in t.vendor_nodes.values()},
    ),
    "AccelPoolCircuitBreakerOpen": (("pool",), lambda t: {(TRAINING,)}),
    # No drain is blocked and no node handed off in the live cluster (the unit and promtool tests make them fire).
    "AccelPoolDrainBlocked": (("pool",), lambda t: set()),
    "AccelPoolNodeHandedOff": (("pool",), lambda t: set()),
    # Silent: every node passed burn-in before its fault was injected, and the fake agents run one driver.
    "AccelPoolBurnInStuck": (("pool",), lambda t: set()),
    "AccelPoolDriverVersionMismatch": (("pool",), lambda t: set()),
    "AccelPoolGPUUnhealthy": (  # the `fatal` fault of each vendor's device 1, judged by the vendor's rules
        ("pool", "node", "gpu", "vendor"),
        lambda t: (
            {(TRAINING, t.faulty_xid, "0", "nvidia"), (TRAINING, t.faulty_slow_hot, "1", "nvidia")}
            | {(pool, node, "1", vendor) for vendor, (node, pool) in t.vendor_nodes.items()}
        ),
    ),
    "AccelPoolXIDError": (("pool", "node", "gpu", "xid"), lambda t: {(TRAINING, t.faulty_xid, "0", "79")}),
    "AccelPoolAMDGPUEvent": (  # RING_HANG, the AMD agent's code 5
        ("pool", "node", "gpu", "xid"),
        lambda t: {(t.vendor_nodes["amd"][1], t.vendor_nodes["amd"][0], "1", "5")},
    ),
    "AccelPoolXGMILinkDown": (("node", "gpu", "vendor"), lambda t: {(t.vendor_nodes["amd"][0], "1", "amd")}),
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
    "AccelPoolNodeActionRecommended": (  # XGMI link down: restart-os; Neuron hardware error: service-required;
        # a TPU chip gone: restart-os
        ("pool", "node", "action"),
        lambda t: (
            {(TRAINING, t.faulty_xid, "restart-os"), (TRAINING, t.faulty_slow_hot, "reset-gpu")}
            | {
                (t.vendor_nodes["amd"][1], t.vendor_nodes["amd"][0], "restart-os"),
                (t.vendor_nodes["aws"][1], t.vendor_nodes["aws"][0], "service-required"),
                (t.vendor_nodes["google"][1], t.vendor_nodes["google"][0], "restart-os"),
            }
        ),
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
    """Spelled out: the healthy pool, nodes and GPUs of every vendor appear in no alert's result."""
    healthy_gpus = {(live.topology.faulty_xid, "1"), (live.topology.faulty_slow_hot, "0")}
    healthy_gpus |= {(node, "0") for node, _ in live.topology.vendor_nodes.values()}
    for alert, expr in _alerts().items():
        for sample in live.prometheus.query(expr):
            labels: dict[str, Any] = sample["metric"]
            assert (labels.get("node"), labels.get("gpu")) not in healthy_gpus, (alert, labels)
            assert labels.get("node") not in live.topology.healthy_vendor_nodes, (alert, labels)
            if alert not in ("AccelPoolAgentDown", "AccelPoolAgentMissing"):
                assert labels.get("pool") != INFERENCE, (alert, labels)


def test_operator_down_fires_when_the_operator_stops(live: Live) -> None:
    """Runs last: it stops the operator for good."""
    expr = _alerts()["AccelPoolOperatorDown"]
    assert not live.prometheus.query(expr)
    live.cluster.stop_operator()
    wait_for("up{job=accelpool-operator} == 0", lambda: live.prometheus.query(expr), timeout=30)
    assert _fired(live, expr, ("job",)) == {("accelpool-operator",)}
