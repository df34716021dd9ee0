"""charts/accelpool with the real helm: lint, render (default and full-featured values), every object
checked with kubernetes-validate, a golden snapshot of the default render, least-privilege RBAC,
hardened security contexts, values.schema.json refusing bad values, and the NOTES a user reads.

Set UPDATE_GOLDENS=1 to rewrite tests/contract/golden/ after a reviewed change to the chart.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from accelpool import api, cli, leadership
from accelpool import render as operator_render
from accelpool.settings import OperatorConfig
from tests.conftest import require_tool
from tests.contract.chart import (
    CHART,
    FULL_VALUES,
    NAMESPACE,
    RELEASE,
    HelmFailed,
    find,
    one,
    render,
    run_helm,
    template_text,
)

pytestmark = pytest.mark.contract

KUBERNETES_VERSION = "1.35.0"
GOLDEN = Path(__file__).resolve().parent / "golden" / "chart-default.yaml"
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
CERT_MANAGER_KINDS = {"Certificate", "Issuer"}
"""Kinds of CRDs that kubernetes-validate has no schema for: checked by apiVersion, kind and metadata."""
PEERING_API_VERSION = f"{leadership.PEERING_GROUP}/{leadership.PEERING_VERSION}"
GENERATED_TLS = re.compile(r"^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle): )\S+$", re.MULTILINE)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
Objects = list[dict[str, Any]]
FULL_OPERATOR_DIGEST = "sha256:" + "0123456789abcdef" * 4  # values-full.yaml
FULL_AGENT_DIGEST = "sha256:" + "fedcba9876543210" * 4


@pytest.fixture(scope="module")
def helm() -> str:
    return require_tool("helm")


@pytest.fixture(scope="module")
def default_objects(helm: str) -> Objects:
    return render(helm, include_crds=True)


@pytest.fixture(scope="module")
def full_objects(helm: str) -> Objects:
    return render(helm, [FULL_VALUES], include_crds=True)


@pytest.fixture(params=["default", "full"])
def rendered(request: pytest.FixtureRequest, default_objects: Objects, full_objects: Objects) -> Objects:
    return default_objects if request.param == "default" else full_objects


def test_helm_lint_is_clean(helm: str) -> None:
    for extra in ([], ["--values", str(FULL_VALUES)]):
        output = run_helm(helm, "lint", "--strict", str(CHART), *extra)
        assert "1 chart(s) linted, 0 chart(s) failed" in output
        assert "[WARNING]" not in output and "[ERROR]" not in output, output


def test_every_object_validates(rendered: Objects) -> None:
    """Built-in kinds strictly against the Kubernetes OpenAPI schemas (unknown fields are errors);
    Prometheus Operator and cert-manager kinds (CRDs not in kubernetes-validate) by apiVersion,
    kind and metadata."""
    for obj in rendered:
        name = f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"
        if obj["kind"] == "ClusterKopfPeering":  # cluster-scoped, no spec: kopf's records go under status
            assert obj["apiVersion"] == PEERING_API_VERSION and set(obj) == {"apiVersion", "kind", "metadata"}
            assert DNS_SUBDOMAIN.match(obj["metadata"]["name"]) and "namespace" not in obj["metadata"], name
            continue
        if obj["kind"] in MONITORING_KINDS | CERT_MANAGER_KINDS:
            group = "monitoring.coreos.com" if obj["kind"] in MONITORING_KINDS else "cert-manager.io"
            assert obj["apiVersion"] == f"{group}/v1", name
            assert DNS_SUBDOMAIN.match(obj["metadata"]["name"]), name
            assert DNS_LABEL.match(obj["metadata"]["namespace"]), name
            assert isinstance(obj["spec"], dict) and obj["spec"], name
            continue
        try:
            kubernetes_validate.validate(obj, KUBERNETES_VERSION, strict=True)
        except kubernetes_validate.ValidationError as error:
            path = ".".join(str(p) for p in error.path)
            pytest.fail(f"{name}: {path}: {error.message}")


def test_default_render_matches_golden(helm: str) -> None:
    """The webhook's CA, certificate and key are generated anew by each render: the golden file
    keeps their place, not their value (tests/contract/test_webhook.py checks them)."""
    text = GENERATED_TLS.sub(r"\1<generated>", template_text(helm))
    assert text.count("<generated>") == 4
    if os.environ.get("UPDATE_GOLDENS") == "1":
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        GOLDEN.write_text(text)
    assert GOLDEN.exists(), f"{GOLDEN} is missing: run with UPDATE_GOLDENS=1"
    assert text == GOLDEN.read_text(), "the default render changed: review, then UPDATE_GOLDENS=1"


def test_defaults_install_no_monitoring_objects(default_objects: Objects) -> None:
    """Without the Prometheus Operator's CRDs or Grafana, the default install must still apply."""
    kinds = {o["kind"] for o in default_objects}
    assert not kinds & MONITORING_KINDS
    assert not [o for o in find(default_objects, "ConfigMap") if "grafana_dashboard" in o["metadata"]["labels"]]


def test_crds_are_the_generated_copy(default_objects: Objects) -> None:
    generated = yaml.safe_load((CHART.parents[1] / "crds" / "accelpool.io_computepools.yaml").read_text())
    assert one(default_objects, "CustomResourceDefinition", "computepools.accelpool.io") == generated


def test_the_peering_crd_is_the_one_kopf_watches(default_objects: Objects) -> None:
    """kopf's own peering.yaml (cluster-scoped, status kept whole), at the resource the leadership daemon is on."""
    crd = one(default_objects, "CustomResourceDefinition", f"{leadership.PEERING_PLURAL}.{leadership.PEERING_GROUP}")
    spec = crd["spec"]
    assert (spec["group"], spec["scope"], spec["names"]["plural"], spec["names"]["kind"]) == (
        leadership.PEERING_GROUP,
        "Cluster",
        leadership.PEERING_PLURAL,
        "ClusterKopfPeering",
    )
    (version,) = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == (leadership.PEERING_VERSION, True, True)
    status = version["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert status == {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


# ---- RBAC: exactly these rules, nothing more.

OPERATOR_CLUSTER_RULES = [
    {"apiGroups": ["accelpool.io"], "resources": ["computepools"], "verbs": ["list", "watch", "patch"]},
    {"apiGroups": ["accelpool.io"], "resources": ["computepools/status"], "verbs": ["patch"]},
    {"apiGroups": ["accelpool.io"], "resources": ["computepools/finalizers"], "verbs": ["update"]},
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "watch", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
    {"apiGroups": ["apiextensions.k8s.io"], "resources": ["customresourcedefinitions"], "verbs": ["list", "watch"]},
    {"apiGroups": ["karpenter.sh"], "resources": ["nodepools"], "verbs": ["get", "list", "create", "patch", "delete"]},
]
AGENT_CLUSTER_RULES = [
    {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
    {"apiGroups": [""], "resources": ["nodes/status"], "verbs": ["patch"]},
]
DAEMONSET_RULES = [
    {"apiGroups": ["apps"], "resources": ["daemonsets"], "verbs": ["get", "list", "create", "patch", "delete"]},
    {"apiGroups": [""], "resources": ["pods", "events"], "verbs": ["list"]},
]
EVENT_RULES = [{"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]


def _peering_rules(name: str) -> list[dict[str, Any]]:
    """kopf's peering: list and watch every peering object (kopf lists them all), patch only ours."""
    return [
        {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "verbs": ["list", "watch"]},
        {"apiGroups": ["kopf.dev"], "resources": ["clusterkopfpeerings"], "resourceNames": [name], "verbs": ["patch"]},
    ]


def _config_rules(device_plugin: str, mig: str) -> list[dict[str, Any]]:
    return [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [device_plugin, mig],
            "verbs": ["get", "patch"],
        },
    ]


def _subject(objects: Objects, binding_kind: str, role: dict[str, Any]) -> list[tuple[str, str]]:
    meta = role["metadata"]
    bindings = [
        b
        for b in find(objects, binding_kind)
        if b["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": role["kind"], "name": meta["name"]}
        and b["metadata"].get("namespace") == meta.get("namespace")
    ]
    return [(s["namespace"], s["name"]) for b in bindings for s in b["subjects"] if s["kind"] == "ServiceAccount"]


@pytest.mark.parametrize(
    ("values", "names"),
    [
        (
            [],
            {
                "prefix": "accelpool",
                "agents": NAMESPACE,
                "nvidia": NAMESPACE,
                "events": "default",
                "configs": ("accelpool-device-plugin-config", "accelpool-mig-parted-config"),
            },
        ),
        (
            [FULL_VALUES],
            {
                "prefix": "gpu-pools",
                "agents": "accelpool-agents",
                "nvidia": "gpu-operator",
                "events": "accelpool-events",
                "configs": ("device-plugin-configs", "custom-mig-parted-config"),
            },
        ),
    ],
    ids=["default", "full"],
)
def test_rbac_is_exactly_least_privilege(helm: str, values: list[Path], names: dict[str, Any]) -> None:
    objects = render(helm, values)
    operator_sa = (NAMESPACE, f"{names['prefix']}-operator")
    agent_sa = (names["agents"], f"{names['prefix']}-agent")

    roles = find(objects, "ClusterRole") + find(objects, "Role")
    for role in roles:
        for rule in role["rules"]:
            for key in ("apiGroups", "resources", "verbs", "resourceNames"):
                assert "*" not in rule.get(key, []), f"{role['metadata']['name']}: wildcard in {key}"
            assert not {"secrets", "pods/exec", "serviceaccounts/token"} & set(rule["resources"])
            assert not {"escalate", "bind", "impersonate", "deletecollection"} & set(rule["verbs"])
    assert len(roles) == 5, [r["metadata"]["name"] for r in roles]

    operator_role = one(objects, "ClusterRole", operator_sa[1])
    assert operator_role["rules"] == OPERATOR_CLUSTER_RULES + _peering_rules(names["prefix"])
    assert _subject(objects, "ClusterRoleBinding", operator_role) == [operator_sa]

    agent_role = one(objects, "ClusterRole", agent_sa[1])
    assert agent_role["rules"] == AGENT_CLUSTER_RULES
    assert _subject(objects, "ClusterRoleBinding", agent_role) == [agent_sa]

    daemonsets = one(objects, "Role", f"{operator_sa[1]}-agents")
    assert daemonsets["metadata"]["namespace"] == names["agents"]
    assert daemonsets["rules"] == DAEMONSET_RULES
    assert _subject(objects, "RoleBinding", daemonsets) == [operator_sa]

    events = one(objects, "Role", f"{operator_sa[1]}-events")
    assert events["metadata"]["namespace"] == names["events"]
    assert events["rules"] == EVENT_RULES
    assert _subject(objects, "RoleBinding", events) == [operator_sa]

    configs = one(objects, "Role", f"{operator_sa[1]}-nvidia-configs")
    assert configs["metadata"]["namespace"] == names["nvidia"]
    assert configs["rules"] == _config_rules(*names["configs"])
    assert _subject(objects, "RoleBinding", configs) == [operator_sa]

    accounts = {(sa["metadata"]["namespace"], sa["metadata"]["name"]) for sa in find(objects, "ServiceAccount")}
    assert accounts == {operator_sa, agent_sa}


# ---- Pods: hardened, probed, and told where everything is.


def _pod_specs(objects: Objects) -> list[tuple[str, dict[str, Any]]]:
    specs = [
        (f"Deployment/{o['metadata']['name']}", o["spec"]["template"]["spec"]) for o in find(objects, "Deployment")
    ]
    specs += [(f"Pod/{o['metadata']['name']}", o["spec"]) for o in find(objects, "Pod")]
    return specs


def test_every_container_is_hardened(rendered: Objects) -> None:
    specs = _pod_specs(rendered)
    assert {name.split("/")[0] for name, _ in specs} == {"Deployment", "Pod"}
    for name, spec in specs:
        pod_context = spec.get("securityContext", {})
        assert pod_context.get("runAsNonRoot") is True, name
        assert pod_context.get("runAsUser", 0) != 0, name
        for container in spec["containers"] + spec.get("initContainers", []):
            context = container["securityContext"]
            where = f"{name}/{container['name']}"
            assert context["runAsNonRoot"] is True, where
            assert context["readOnlyRootFilesystem"] is True, where
            assert context["allowPrivilegeEscalation"] is False, where
            assert context["capabilities"] == {"drop": ["ALL"]}, where
            assert context["seccompProfile"] == {"type": "RuntimeDefault"}, where
            assert "privileged" not in context, where
            assert container["resources"].get("requests") and container["resources"].get("limits"), where


def _operator(objects: Objects) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = one(objects, "Deployment")
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


@pytest.mark.parametrize(("values", "metrics", "health"), [([], 8080, 8081), ([FULL_VALUES], 9090, 9091)])
def test_operator_probes_and_ports(helm: str, values: list[Path], metrics: int, health: int) -> None:
    objects = render(helm, values)
    deployment, container = _operator(objects)
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    assert ports.items() >= {"metrics": metrics, "health": health}.items()
    assert set(ports) == {"metrics", "health", "webhook"}  # the webhook's: tests/contract/test_webhook.py
    for probe in ("livenessProbe", "readinessProbe"):
        assert container[probe]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert f"--liveness-port={health}" in container["args"] and f"--metrics-port={metrics}" in container["args"]
    service = one(objects, "Service", f"{deployment['metadata']['name']}-metrics")
    assert service["spec"]["ports"] == [
        {"name": "metrics", "port": metrics, "targetPort": "metrics", "protocol": "TCP"}
    ]
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    assert deployment["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()


# ---- High availability: replicas, kopf peering, disruption budget, spread.


def _spread(deployment: dict[str, Any]) -> list[dict[str, Any]]:
    affinity = deployment["spec"]["template"]["spec"].get("affinity") or {}
    return list((affinity.get("podAntiAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution") or [])


def test_two_replicas_with_peering_by_default(default_objects: Objects) -> None:
    """One leads, one stands by: both in the peering object the chart creates, on different nodes
    when the scheduler can, never both evicted at once, and upgraded one at a time with no gap."""
    deployment, container = _operator(default_objects)
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"] == {
        "type": "RollingUpdate",
        "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
    }
    config = _operator_config(default_objects)
    peering = one(default_objects, "ClusterKopfPeering")
    assert config.peering == peering["metadata"]["name"] == RELEASE
    assert config.peering_lifetime == 60 and config.priority is None  # each replica derives its own
    assert {"name": "POD_ID", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}} in container["env"]

    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    budget = one(default_objects, "PodDisruptionBudget")
    assert budget["spec"]["maxUnavailable"] == 1
    assert budget["spec"]["selector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert budget["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    (preference,) = _spread(deployment)
    term = preference["podAffinityTerm"]
    assert term["topologyKey"] == "kubernetes.io/hostname"
    assert term["labelSelector"]["matchLabels"].items() <= pod_labels.items()


def test_the_spread_joins_the_users_affinity(full_objects: Objects) -> None:
    deployment, _ = _operator(full_objects)
    assert deployment["spec"]["replicas"] == 3
    affinity = deployment["spec"]["template"]["spec"]["affinity"]
    assert affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]  # values-full.yaml's
    assert len(_spread(deployment)) == 1
    config = _operator_config(full_objects)
    assert (config.peering, config.peering_lifetime) == ("gpu-pools", 30)
    assert one(full_objects, "ClusterKopfPeering")["metadata"]["name"] == "gpu-pools"


def test_one_replica_with_peering_still_upgrades_without_a_gap(helm: str) -> None:
    """The new pod stands by until the old one leaves; no disruption budget (it would block every drain)."""
    objects = render(helm, set_values=["operator.replicas=1"])
    deployment, _ = _operator(objects)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"]["type"] == "RollingUpdate"
    assert not find(objects, "PodDisruptionBudget") and not _spread(deployment)
    assert _operator_config(objects).peering == RELEASE


def test_a_standalone_operator_is_recreated_and_needs_no_peering(helm: str) -> None:
    """For clusters where kopf's peering CRD cannot be installed."""
    objects = render(helm, set_values=["operator.replicas=1", "operator.peering.enabled=false"], include_crds=True)
    deployment, container = _operator(objects)
    assert deployment["spec"]["replicas"] == 1 and deployment["spec"]["strategy"] == {"type": "Recreate"}
    assert _operator_config(objects).peering is None
    assert not [a for a in container["args"] if a.startswith("--peering")]
    assert not find(objects, "ClusterKopfPeering") and not find(objects, "PodDisruptionBudget")
    rules = one(objects, "ClusterRole", f"{RELEASE}-operator")["rules"]
    assert rules == OPERATOR_CLUSTER_RULES


def test_the_operator_image_runs_as_the_chart_expects(default_objects: Objects) -> None:
    """operator/Dockerfile: the numeric non-root USER the pod's securityContext names, and
    `accelpool run` as the entrypoint the chart's args are appended to."""
    dockerfile = (CHART.parents[1] / "operator" / "Dockerfile").read_text()
    final_stage = dockerfile.split("\nFROM ")[-1]
    user = re.search(r"^USER (\d+):(\d+)$", final_stage, re.MULTILINE)
    assert user, "the final stage needs a numeric USER uid:gid"
    deployment, _ = _operator(default_objects)
    pod_context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (pod_context["runAsUser"], pod_context["runAsGroup"]) == (int(user[1]), int(user[2]))
    assert 'ENTRYPOINT ["accelpool", "run"]' in final_stage
    assert cli.build_parser().parse_args(["run"]).command == "run"


def _operator_config(objects: Objects) -> OperatorConfig:
    """The operator's settings as `accelpool run` itself parses the rendered container args."""
    _, container = _operator(objects)
    args = cli.build_parser().parse_args(["run", *container["args"]])
    return OperatorConfig.from_args(args)


def test_operator_flags_parse_and_carry_the_full_values(full_objects: Objects) -> None:
    config = _operator_config(full_objects)
    assert (config.namespace, config.device_plugin_configmap, config.mig_configmap) == (
        "gpu-operator",
        "device-plugin-configs",
        "custom-mig-parted-config",
    )
    assert (config.metrics_port, config.liveness_port, config.log_level) == (9090, 9091, "verbose")
    assert config.events_namespace == "accelpool-events"
    assert config.resync_seconds == 120
    agent = config.agent
    assert agent.namespace == "accelpool-agents"
    assert agent.image == f"registry.example.com/platform/accelpool-agent@{FULL_AGENT_DIGEST}"
    assert agent.image_pull_policy == "Always"
    assert agent.service_account == "gpu-pools-agent"
    assert (agent.backend, agent.runtime_class, agent.privileged, agent.priority_class) == (
        "fake",
        None,
        True,
        "system-node-critical",
    )
    assert (agent.cpu_request, agent.memory_request, agent.cpu_limit, agent.memory_limit) == (
        "100m",
        "256Mi",
        "2",
        "2Gi",
    )
    _, container = _operator(full_objects)
    assert container["image"] == f"registry.example.com/platform/accelpool-operator@{FULL_OPERATOR_DIGEST}"


def test_operator_flags_parse_with_the_defaults(default_objects: Objects) -> None:
    config = _operator_config(default_objects)
    assert (config.namespace, config.device_plugin_configmap, config.mig_configmap) == (
        NAMESPACE,
        "accelpool-device-plugin-config",
        "accelpool-mig-parted-config",
    )
    assert config.events_namespace == "default"
    agent = config.agent
    assert (agent.namespace, agent.service_account, agent.image) == (
        NAMESPACE,
        "accelpool-agent",
        "ghcr.io/accelpool/accelpool-agent:0.1.0",
    )
    assert (agent.backend, agent.runtime_class, agent.privileged, agent.priority_class) == (
        "nvml",
        "nvidia",
        False,
        None,
    )
    assert (agent.cpu_request, agent.memory_request, agent.cpu_limit, agent.memory_limit) == (
        "50m",
        "128Mi",
        None,
        "1Gi",
    )
    _, container = _operator(default_objects)
    assert container["image"] == "ghcr.io/accelpool/accelpool-operator:0.1.0"


# ---- Images: by tag (the chart's appVersion) unless a digest pins them.


def _images(objects: Objects) -> dict[str, str]:
    """Every image the release runs: the operator, `helm test`'s pod, and the agents (--agent-image)."""
    images = {name: c["image"] for name, spec in _pod_specs(objects) for c in spec["containers"]}
    images["agents"] = _operator_config(objects).agent.image
    return images


def test_images_default_to_the_chart_app_version(default_objects: Objects) -> None:
    images = _images(default_objects)
    assert images == {
        "Deployment/accelpool-operator": "ghcr.io/accelpool/accelpool-operator:0.1.0",
        "Pod/accelpool-operator-test-metrics": "ghcr.io/accelpool/accelpool-operator:0.1.0",
        "agents": "ghcr.io/accelpool/accelpool-agent:0.1.0",
    }


def test_a_digest_pins_every_image(full_objects: Objects, helm: str) -> None:
    """With `digest` set the reference is <repository>@<digest> (a tag beside it would be ignored by
    the runtime and mislead a reader); the operator passes the agent's on to every DaemonSet."""
    images = _images(full_objects)
    operator = f"registry.example.com/platform/accelpool-operator@{FULL_OPERATOR_DIGEST}"
    assert images == {
        "Deployment/gpu-pools-operator": operator,
        "Pod/gpu-pools-operator-test-metrics": operator,
        "agents": f"registry.example.com/platform/accelpool-agent@{FULL_AGENT_DIGEST}",
    }
    config = _operator_config(full_objects)
    spec = api.ComputePoolSpec.model_validate({"accelerator": "H100:8", "nodes": 2})
    daemonset = operator_render.daemonset("llm-training", "0000-uid", spec, config.agent)
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == images["agents"]
    only_agent = _images(render(helm, set_values=[f"agent.image.digest={FULL_AGENT_DIGEST}"]))
    assert only_agent["agents"] == f"ghcr.io/accelpool/accelpool-agent@{FULL_AGENT_DIGEST}"
    assert only_agent["Deployment/accelpool-operator"] == "ghcr.io/accelpool/accelpool-operator:0.1.0"


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
    config = _operator_config(full_objects)
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


# ---- NetworkPolicies: the agents' and the operator's metrics only for the scrapers named in values.


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, "these policies select by labels only"
    return bool(selector["matchLabels"].items() <= labels.items())


def _namespace_of(objects: Objects, kind: str) -> str:
    return str(one(objects, kind)["metadata"]["namespace"])


def test_no_network_policy_unless_enabled(default_objects: Objects) -> None:
    assert not find(default_objects, "NetworkPolicy")


def test_agent_network_policy_admits_only_the_scrapers(full_objects: Objects) -> None:
    """The policy sits in the namespace the operator runs the agents in, selects the pods of the
    DaemonSet it renders, and opens their metrics port to `networkPolicy.metricsFrom` alone."""
    values = yaml.safe_load(FULL_VALUES.read_text())["networkPolicy"]
    config = _operator_config(full_objects)
    spec = api.ComputePoolSpec.model_validate({"accelerator": "H100:8", "nodes": 2})
    daemonset = operator_render.daemonset("llm-training", "0000-uid", spec, config.agent)
    pod = daemonset["spec"]["template"]
    policy = one(full_objects, "NetworkPolicy", "gpu-pools-agent")
    assert policy["metadata"]["namespace"] == daemonset["metadata"]["namespace"] == "accelpool-agents"
    assert _selects(policy["spec"]["podSelector"], pod["metadata"]["labels"])
    assert not _selects(
        policy["spec"]["podSelector"], one(full_objects, "Deployment")["spec"]["template"]["metadata"]["labels"]
    )
    [rule] = policy["spec"]["ingress"]
    metrics_port = next(p for p in pod["spec"]["containers"][0]["ports"] if p["name"] == "metrics")
    assert rule["ports"] == [{"port": metrics_port["containerPort"], "protocol": "TCP"}]
    assert rule["from"] == values["metricsFrom"]
    assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]
    assert policy["spec"]["egress"] == values["egress"]


def test_operator_network_policy_admits_the_scrapers_and_helm_test(full_objects: Objects) -> None:
    values = yaml.safe_load(FULL_VALUES.read_text())["networkPolicy"]
    deployment, _ = _operator(full_objects)
    policy = one(full_objects, "NetworkPolicy", "gpu-pools-operator")
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"] == NAMESPACE
    assert _selects(policy["spec"]["podSelector"], deployment["spec"]["template"]["metadata"]["labels"])
    rule, webhook_rule = policy["spec"]["ingress"]
    assert rule["ports"] == [{"port": 9090, "protocol": "TCP"}]  # metrics only: the kubelet probes the health port
    assert webhook_rule == {
        "ports": [{"port": 8443, "protocol": "TCP"}]
    }  # the API server: tests/contract/test_webhook.py
    assert rule["from"][: len(values["metricsFrom"])] == values["metricsFrom"]
    [test_peer] = rule["from"][len(values["metricsFrom"]) :]
    test_pod = one(full_objects, "Pod")
    assert set(test_peer) == {"podSelector"} and _selects(test_peer["podSelector"], test_pod["metadata"]["labels"])
    assert not _selects(policy["spec"]["podSelector"], test_pod["metadata"]["labels"])
    assert policy["spec"]["egress"] == values["egress"]


def test_network_policies_by_default_leave_egress_open_and_admit_the_monitoring_namespace(helm: str) -> None:
    objects = render(helm, set_values=["networkPolicy.enabled=true"])
    monitoring = [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}]
    policies = {p["metadata"]["name"]: p for p in find(objects, "NetworkPolicy")}
    assert set(policies) == {"accelpool-agent", "accelpool-operator"}
    for policy in policies.values():
        assert policy["metadata"]["namespace"] == NAMESPACE
        assert policy["spec"]["policyTypes"] == ["Ingress"] and "egress" not in policy["spec"]
        assert policy["spec"]["ingress"][0]["from"][:1] == monitoring
        kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
    assert policies["accelpool-agent"]["spec"]["ingress"][0]["ports"] == [{"port": 9402, "protocol": "TCP"}]


def test_no_scrapers_means_no_one_reaches_the_agents(helm: str) -> None:
    """An empty `metricsFrom` must not turn into a rule without `from` (which admits everyone)."""
    objects = render(helm, set_values=["networkPolicy.enabled=true", "networkPolicy.metricsFrom=null"])
    assert one(objects, "NetworkPolicy", "accelpool-agent")["spec"]["ingress"] == []
    rule, webhook_rule = one(objects, "NetworkPolicy", "accelpool-operator")["spec"]["ingress"]
    assert [set(peer) for peer in rule["from"]] == [{"podSelector"}]
    assert "from" not in webhook_rule and webhook_rule["ports"] == [{"port": 9443, "protocol": "TCP"}]


def test_prometheus_rule_carries_every_alert_with_extra_labels(full_objects: Objects) -> None:
    source = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    rule = one(full_objects, "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    rendered = {r["alert"]: r for g in rule["spec"]["groups"] for r in g["rules"]}
    expected = {r["alert"]: r for g in source["groups"] for r in g["rules"]}
    assert rendered.keys() == expected.keys() and expected
    for name, alert in expected.items():
        assert rendered[name]["expr"] == alert["expr"], name
        assert rendered[name]["annotations"] == alert["annotations"], name
        assert rendered[name]["labels"] == {**alert["labels"], "team": "ml-infra"}, name


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


# ---- values.schema.json


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("operator.logLevel=loud", "/operator/logLevel"),
        ("operator.metricsPort=70000", "/operator/metricsPort"),
        ("operator.metricsPort=http", "/operator/metricsPort"),
        ("image.pullPolicy=Sometimes", "/image/pullPolicy"),
        ("image.repository=", "/image/repository"),
        ("nvidia.devicePluginConfigMap=Not_A_Name", "/nvidia/devicePluginConfigMap"),
        ("nvidia.migPartedConfigMap=", "/nvidia/migPartedConfigMap"),
        ("nvidia.namespace=Bad_Namespace", "/nvidia/namespace"),
        ("nvidia.configMap=x", "additional properties 'configMap'"),
        ("agent.namespace=UPPER", "/agent/namespace"),
        ("agent.backend=rocm", "/agent/backend"),
        ("agent.privileged=maybe", "/agent/privileged"),
        ("agent.resources.requests.memory=lots", "/agent/resources/requests/memory"),
        ("agent.resources.requests.cpu=", "/agent/resources/requests/cpu"),
        ("agent.resources.limits.gpu=1", "additional properties 'gpu'"),
        ("agent.metricsPort=9500", "additional properties 'metricsPort'"),
        ("operator.eventsNamespace=", "/operator/eventsNamespace"),
        ("metrics.serviceMonitor.enabled=yes", "/metrics/serviceMonitor/enabled"),
        ("metrics.podMonitor.interval=often", "/metrics/podMonitor/interval"),
        ("prometheusRule.enabled=1", "/prometheusRule/enabled"),
        ("dashboards.label=", "/dashboards/label"),
        ("operator.extraArgs[0]=positional", "/operator/extraArgs/0"),
        ("image.digest=sha256:abc", "/image/digest"),
        ("image.digest=latest", "/image/digest"),
        ("agent.image.digest=sha256:" + "A" * 64, "/agent/image/digest"),
        ("networkPolicy.enabled=yes", "/networkPolicy/enabled"),
        ("networkPolicy.metricsFrom[0].namespace=monitoring", "additional properties 'namespace'"),
        ("networkPolicy.metricsFrom[0].podSelector.app=prometheus", "additional properties 'app'"),
        ("networkPolicy.egress[0].ports[0].protocol=ICMP", "/networkPolicy/egress/0/ports/0/protocol"),
        ("networkPolicy.ingress=x", "additional properties 'ingress'"),
        ("replicaCount=2", "additional properties 'replicaCount'"),
        ("operator.replicas=0", "/operator/replicas"),
        ("operator.peering.enabled=false", "/operator/peering/enabled"),  # two replicas, both writing
        ("operator.peering.lifetime=5", "/operator/peering/lifetime"),
        ("operator.peering.name=x", "additional properties 'name'"),
        ("webhook.enabled=maybe", "/webhook/enabled"),
        ("webhook.port=0", "/webhook/port"),
        ("webhook.failurePolicy=Sometimes", "/webhook/failurePolicy"),
        ("webhook.timeoutSeconds=31", "/webhook/timeoutSeconds"),
        ("webhook.certManager.enabled=1", "/webhook/certManager/enabled"),
        ("webhook.certManager.issuerRef.kind=Vault", "/webhook/certManager/issuerRef/kind"),
        ("webhook.certManager.issuerRef.kind=ClusterIssuer", "properties 'name' required"),
        ("webhook.certManager.issuer=ca", "additional properties 'issuer'"),
        ("webhook.caBundle=x", "additional properties 'caBundle'"),
    ],
)
def test_schema_rejects_bad_values(helm: str, assignment: str, says: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        template_text(helm, set_values=[assignment])
    assert says in str(refused.value)


def test_schema_accepts_the_full_values(helm: str) -> None:
    assert template_text(helm, [FULL_VALUES])


# ---- NOTES.txt


def test_notes_tell_the_user_what_to_do_next(helm: str) -> None:
    output = run_helm(
        helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client", "--values", str(FULL_VALUES)
    )
    notes = output.split("NOTES:", 1)[1]
    for expected in (
        "kubectl get cpool",
        "kubectl apply -f -",
        '"devicePlugin": {"config": {"name": "device-plugin-configs"',
        '"migManager":   {"config": {"name": "custom-mig-parted-config"',
        "in namespace gpu-operator",
        "svc/gpu-pools-operator-metrics 9090",
        "namespace accelpool-agents, port 9402",
        'job="accelpool-agent"',
        "NetworkPolicies gpu-pools-agent (namespace accelpool-agents) and gpu-pools-operator",
        "ValidatingWebhookConfiguration gpu-pools sends every ComputePool created",
        "failurePolicy Ignore: while no operator pod is ready, pools are admitted unchecked",
        "issued by cert-manager (Certificate gpu-pools-operator-webhook",
        "Operator replicas: 3, with kopf peering: one leads",
        "within 30 s when it dies",
        "kubectl get clusterkopfpeering gpu-pools",
    ):
        assert expected in notes, expected
    assert "Off in this release" not in notes
    default_notes = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client")
    assert "nvidia.namespace is unset" in default_notes
    assert (
        "failurePolicy Fail: while no operator pod is ready, ComputePools cannot be created or edited" in default_notes
    )
    assert "generated by Helm into Secret accelpool-operator-webhook-tls and kept on upgrades" in default_notes
    without = run_helm(
        helm,
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--dry-run=client",
        "--set",
        "webhook.enabled=false",
    )
    assert "The webhook is off" in without and "ValidatingWebhookConfiguration" not in without
    assert "NetworkPolicies" not in default_notes
    assert "--set metrics.serviceMonitor.enabled=true,metrics.podMonitor.enabled=true" in default_notes


# ---- Supply chain: the images' base by digest, every Python package from a lock with hashes.
# (No Docker engine runs these tests: the Dockerfiles are read, not built.)

ROOT = CHART.parents[1]
DOCKERFILES = {"operator": ROOT / "operator" / "Dockerfile", "agent": ROOT / "device-agent" / "Dockerfile"}
IMAGE_LOCKS = {"operator": "requirements-operator.lock", "agent": "requirements-agent.lock"}
PINNED_IMAGE = re.compile(r"^[a-z0-9][a-z0-9./_-]*:[A-Za-z0-9._-]+@sha256:[0-9a-f]{64}$")
LOCK_ENTRY = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)==(\S+?)(?: ; (.+?))? \\$")


def _instructions(path: Path) -> list[tuple[str, str]]:
    """A Dockerfile's (INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    lines = [line for line in path.read_text().splitlines() if not line.lstrip().startswith("#")]
    text = re.sub(r"\\\n", " ", "\n".join(lines))
    found = [line.strip().split(None, 1) for line in text.splitlines() if line.strip()]
    return [(words[0].upper(), words[1] if len(words) > 1 else "") for words in found]


def _base_images(path: Path) -> list[str]:
    """Each FROM's image with the ARG defaults substituted; a FROM naming an earlier stage is skipped."""
    args: dict[str, str] = {}
    stages: set[str] = set()
    images: list[str] = []
    for instruction, rest in _instructions(path):
        if instruction == "ARG" and "=" in rest and not stages and not images:
            name, value = rest.split("=", 1)
            args[name.strip()] = value.strip().strip('"')
        elif instruction == "FROM":
            words = [w for w in rest.split() if not w.startswith("--platform")]
            image = re.sub(r"\$\{?(\w+)\}?", lambda m: args.get(m[1], m[0]), words[0])
            if words[0] not in stages:
                images.append(image)
            if len(words) == 3 and words[1].upper() == "AS":
                stages.add(words[2])
    return images


def _makefile_value(name: str) -> str:
    match = re.search(rf"^{name} \?= (\S+)$", (ROOT / "Makefile").read_text(), re.MULTILINE)
    assert match, f"Makefile: {name} ?= ... is missing"
    return match[1]


@pytest.mark.parametrize(("image", "make_variable"), [("operator", "PYTHON_BASE_IMAGE"), ("agent", "CUDA_BASE_IMAGE")])
def test_base_images_are_pinned_by_digest(image: str, make_variable: str) -> None:
    """Every FROM resolves to image:tag@sha256:<64 hex>, through a BASE_IMAGE build argument whose
    default is the Makefile's value, which `make images` passes on."""
    path = DOCKERFILES[image]
    bases = _base_images(path)
    assert bases, path
    for base in bases:
        assert PINNED_IMAGE.match(base), f"{path}: FROM {base} is not pinned as image:tag@sha256:<digest>"
    assert set(bases) == {_makefile_value(make_variable)}, f"{path} and the Makefile's {make_variable} differ"
    assert f"-f {path.relative_to(ROOT)} --build-arg BASE_IMAGE=$({make_variable})" in (ROOT / "Makefile").read_text()


def test_base_image_check_refuses_a_tag_alone(tmp_path: Path) -> None:
    dockerfile = tmp_path / "Dockerfile"
    dockerfile.write_text("ARG BASE_IMAGE=python:3.11-slim\nFROM ${BASE_IMAGE} AS build\nFROM build\nFROM debian:12\n")
    assert [bool(PINNED_IMAGE.match(b)) for b in _base_images(dockerfile)] == [False, False]


@pytest.mark.parametrize("image", sorted(DOCKERFILES))
def test_images_install_python_packages_only_from_hashed_locks(image: str) -> None:
    """Each `pip install` either takes a lock with --require-hashes, or installs accelpool's own wheel
    with --no-deps (nothing resolved, nothing fetched); the wheel is built without fetching a backend.
    The locks it names are in the build context (its .dockerignore lets them through)."""
    path = DOCKERFILES[image]
    runs = " ; ".join(rest for instruction, rest in _instructions(path) if instruction == "RUN")
    commands = [c.strip() for c in re.split(r"&&|;", runs) if re.search(r"\bpip (install|wheel)\b", c)]
    used_locks: set[str] = set()
    for command in commands:
        where = f"{path}: {command}"
        words = command.split()
        if " wheel " in f" {command} ":
            assert {"--no-build-isolation", "--no-deps"} <= set(words), where
        elif "--require-hashes" in words:
            locks = [words[i + 1] for i, w in enumerate(words) if w == "-r"]
            assert len(locks) == 1 and locks[0].endswith(".lock") and "--no-deps" in words, where
            used_locks.add(Path(locks[0]).name)
        else:
            assert "--no-deps" in words and words[-1] == "/wheels/*.whl", where
    assert used_locks == {IMAGE_LOCKS[image], "requirements-build.lock"}, path
    ignore = (path.parent / "Dockerfile.dockerignore").read_text().splitlines()
    for lock in used_locks:
        assert (ROOT / lock).is_file() and f"!{lock}" in ignore, lock


def _lock(name: str) -> dict[str, list[tuple[str, str | None]]]:
    """A lock file's pins: normalized name → [(version, environment marker)], each checked for hashes."""
    lines = (ROOT / name).read_text().splitlines()
    pins: dict[str, list[tuple[str, str | None]]] = {}
    for number, line in enumerate(lines):
        if not line or line.startswith((" ", "#")):
            continue
        entry = LOCK_ENTRY.match(line)
        assert entry, f"{name}:{number + 1}: not `name==version \\`: {line}"
        assert lines[number + 1].strip().startswith("--hash=sha256:"), f"{name}:{number + 1}: {line} has no hash"
        pins.setdefault(canonicalize_name(entry[1]), []).append((entry[2], entry[3]))
    return pins


def _declared(lock: str) -> list[Requirement]:
    """What `make lock` resolves for this lock (hack/requirements.py reads the pyproject.toml files)."""
    return [Requirement(r) for r in _lock_inputs(lock)]


def _lock_inputs(lock: str) -> list[str]:
    spec = importlib.util.spec_from_file_location("lock_requirements", ROOT / "hack" / "requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    found: list[str] = module.requirements(lock)
    return found


@pytest.mark.parametrize("lock", ["dev", "operator", "agent"])
def test_locks_pin_every_declared_dependency(lock: str) -> None:
    """Every dependency the pyproject.toml files declare (for that install) is pinned == with hashes, at
    a version its specifier accepts, for CPython 3.11 and 3.12; `make lock` rewrites them after a change."""
    name_of_lock = f"requirements-{lock}.lock"
    pins = _lock(name_of_lock)
    for requirement in _declared(lock):
        name = canonicalize_name(requirement.name)
        assert name in pins, f"{name_of_lock}: {requirement} is not pinned: run `make lock`"
        for python in ("3.11", "3.12"):
            environment = {"python_version": python, "python_full_version": f"{python}.0", "sys_platform": "linux"}
            versions = [v for v, marker in pins[name] if marker is None or Marker(marker).evaluate(environment)]
            assert len(versions) == 1, f"{name_of_lock}: {name} for Python {python}: {versions}"
            assert requirement.specifier.contains(versions[0], prereleases=True), (
                f"{name_of_lock}: {name}=={versions[0]}"
            )


def test_the_agent_image_carries_no_kopf_and_the_operator_image_no_emulator() -> None:
    """The agent's lock (its image's only source of packages) holds no kopf; the operator's no kmock,
    no NVML and no NumPy: each image carries what its own code imports."""
    agent, operator = _lock("requirements-agent.lock"), _lock("requirements-operator.lock")
    assert "kopf" not in agent and "kmock" not in agent
    assert not {"kmock", "nvidia-ml-py", "numpy", "cupy-cuda12x"} & set(operator)
    for image, path in DOCKERFILES.items():
        copied = [rest.split()[0] for instruction, rest in _instructions(path) if instruction == "COPY"]
        assert not any(c.startswith("demo") for c in copied), image
        other = "device-agent" if image == "operator" else "operator"
        assert not any(c.startswith(f"{other}/") for c in copied), (image, copied)


def test_build_lock_pins_the_build_backend() -> None:
    pins = _lock("requirements-build.lock")
    for directory in ("core", "operator", "device-agent", "demo"):
        manifest = tomllib.loads((ROOT / directory / "pyproject.toml").read_text())
        for text in manifest["build-system"]["requires"]:
            requirement = Requirement(text)
            [(version, _)] = pins[canonicalize_name(requirement.name)]
            assert requirement.specifier.contains(version), f"requirements-build.lock: {requirement.name}=={version}"


def test_lock_check_refuses_an_unhashed_or_loose_pin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
    (tmp_path / "loose.lock").write_text("kopf>=1.45 \\\n    --hash=sha256:" + "0" * 64 + "\n")
    (tmp_path / "unhashed.lock").write_text("kopf==1.45.2 \\\n    # via accelpool\n")
    for name in ("loose.lock", "unhashed.lock"):
        with pytest.raises(AssertionError):
            _lock(name)


def test_make_install_takes_the_dev_lock_with_hashes() -> None:
    """CI (.ci/run → make lint/test → make install) gets exactly the locked versions; accelpool itself
    goes on top without resolving anything."""
    recipe = (ROOT / "Makefile").read_text().split("$(VENV)/.installed:", 1)[1].split("\n\n", 1)[0]
    assert "requirements-dev.lock" in recipe.splitlines()[0], "the venv must be rebuilt when the lock changes"
    installs = [line.strip() for line in recipe.splitlines() if "pip install" in line]
    assert installs == [
        "$(BIN)/pip install -q --require-hashes -r requirements-dev.lock",
        "$(BIN)/pip install -q --no-deps $(foreach p,$(PACKAGES),-e ./$(p))",
    ]
