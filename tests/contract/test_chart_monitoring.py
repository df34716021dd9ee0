"""The chart's monitoring objects with the real helm: ServiceMonitor, PodMonitor, PrometheusRule and
the dashboards ConfigMaps (the NetworkPolicies that admit the scrapers: test_chart_network_policy.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

import accelpool_api as api
from accelpool.decide import render as operator_render
from tests.contract.chart import (
    CHART,
    Objects,
    find,
    one,
    operator_config,
    render,
)
from tests.support.environment import require_tool

pytestmark = pytest.mark.contract


# ---- Monitoring objects behind their flags.


def test_service_monitor_selects_the_metrics_service(full_objects: Objects) -> None:
    monitor = one(full_objects, "ServiceMonitor")
    service = one(full_objects, "Service", "gpu-pools-operator-metrics")
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    assert monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": [service["metadata"]["namespace"]]}
    endpoint = monitor["spec"]["endpoints"][0]
    assert endpoint["port"] == service["spec"]["ports"][0]["name"] and endpoint["interval"] == "15s"
    assert {"action": "replace", "targetLabel": "job", "replacement": "accelpool-operator"} in endpoint["relabelings"]


def test_pod_monitor_scrapes_the_agent_namespace(full_objects: Objects) -> None:
    monitor = one(full_objects, "PodMonitor")
    assert monitor["spec"]["namespaceSelector"] == {"matchNames": ["accelpool-agents"]}
    assert monitor["spec"]["selector"] == {"matchLabels": {"app.kubernetes.io/name": "accelpool-agent"}}
    endpoint = monitor["spec"]["podMetricsEndpoints"][0]
    assert endpoint["port"] == "metrics" and endpoint["honorLabels"] is True
    targets = {r["targetLabel"] for r in endpoint["relabelings"]}
    assert targets == {"job", "node", "pool"}


def test_agent_daemonsets_the_operator_renders_fit_the_chart(full_objects: Objects) -> None:
    """Render a pool's agent DaemonSet with the settings the chart gives the operator: it runs as the
    chart's agent ServiceAccount, in the namespace the RBAC and the PodMonitor cover, and the
    PodMonitor selects its pods and finds their metrics port and pool label."""
    config = operator_config(full_objects)
    spec = api.ComputePoolSpec.model_validate({"accelerator": "H100:8", "nodes": 2})
    daemonset = operator_render.daemonset("llm-training", "0000-uid", spec, config.agent)
    pod = daemonset["spec"]["template"]
    account = one(full_objects, "ServiceAccount", pod["spec"]["serviceAccountName"])
    assert account["metadata"]["namespace"] == daemonset["metadata"]["namespace"] == "accelpool-agents"
    assert one(full_objects, "Role", "gpu-pools-operator-agents")["metadata"]["namespace"] == "accelpool-agents"
    monitor = one(full_objects, "PodMonitor")
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [daemonset["metadata"]["namespace"]]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= pod["metadata"]["labels"].items()
    assert pod["metadata"]["labels"]["accelpool.io/pool"] == "llm-training"
    ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] in ports
    assert "runtimeClassName" not in pod["spec"]  # agent.runtimeClassName: "" in values-full
    assert account["imagePullSecrets"] == [{"name": "registry-example-com"}]  # pods of the DaemonSet get them


def test_prometheus_rule_carries_every_alert_with_extra_labels(full_objects: Objects) -> None:
    source = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    rule = one(full_objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rendered = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    expected = {r["alert"]: r for g in source["groups"] for r in g["rules"]}
    assert rendered.keys() == expected.keys() and expected
    for name, alert in expected.items():
        assert rendered[name]["expr"] == alert["expr"], name
        # runbook_url under values-full's docsBaseURL (its trailing slash dropped) instead of the default
        runbook = f"https://git.example.com/platform/accelpool/blob/v0.1.0/docs/reference/alerts.md#{name.lower()}"
        assert rendered[name]["annotations"] == {**alert["annotations"], "runbook_url": runbook}, name
        assert rendered[name]["labels"] == {**alert["labels"], "team": "ml-infra"}, name


def test_prometheus_rule_runbooks_default_to_the_files_own(helm: str, tmp_path: Path) -> None:
    """Default docsBaseURL: the PrometheusRule's alerts are files/alerts.yaml's, runbook_url included; the
    rendered groups pass the real promtool as a rule file of their own."""
    objects = render(helm, set_values=["prometheusRule.enabled=true"])
    groups = one(objects, "PrometheusRule")["spec"]["groups"]
    source = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert [[r["annotations"] for r in g["rules"]] for g in groups] == [
        [r["annotations"] for r in g["rules"]] for g in source["groups"]
    ]
    rules = tmp_path / "rendered-alerts.yaml"
    rules.write_text(yaml.safe_dump({"groups": groups}))
    promtool = require_tool("promtool")
    checked = subprocess.run(
        [promtool, "check", "rules", "--lint=all", "--lint-fatal", str(rules)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_alert_labels_never_override_an_alerts_own_severity(helm: str) -> None:
    objects = render(helm, set_values=["prometheusRule.enabled=true", "prometheusRule.alertLabels.severity=none"])
    rules = [r for g in one(objects, "PrometheusRule")["spec"]["groups"] for r in g["rules"]]
    assert rules and all(r["labels"]["severity"] in ("critical", "warning") for r in rules)


def test_dashboards_configmaps_for_the_grafana_sidecar(full_objects: Objects) -> None:
    maps = [o for o in find(full_objects, "ConfigMap") if o["metadata"]["labels"].get("grafana_dashboard") == "1"]
    files = sorted((CHART / "dashboards").glob("*.json"))
    assert len(maps) == len(files) == 2
    by_key = {key: (cm, text) for cm in maps for key, text in cm["data"].items()}
    for path in files:
        configmap, text = by_key[path.name]
        assert configmap["metadata"]["namespace"] == "monitoring"
        assert configmap["metadata"]["annotations"] == {"grafana_folder": "Accelerators"}
        assert json.loads(text) == json.loads(path.read_text())


def test_dashboard_label_is_configurable(helm: str) -> None:
    objects = render(
        helm, set_values=["dashboards.enabled=true", "dashboards.label=my_dashboards", "dashboards.labelValue=yes"]
    )
    maps = [o for o in find(objects, "ConfigMap") if o["metadata"]["labels"].get("my_dashboards") == "yes"]
    assert len(maps) == 2
