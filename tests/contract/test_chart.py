"""charts/accelpool with the real helm: lint, render (default and full-featured values), every object
checked with kubernetes-validate, a golden snapshot of the default render, the CRDs, hardened pods,
the operator's flags, images and the NOTES a user reads. RBAC, availability, monitoring and network
policies, values.schema.json and the images' supply chain have modules of their own (test_chart_*.py,
test_supply_chain.py).

Set UPDATE_GOLDENS=1 to rewrite tests/contract/golden/ after a reviewed change to the chart.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

import accelpool_api as api
from accelpool import cli
from accelpool.decide import render as operator_render
from accelpool.runtime import leadership
from tests.contract.chart import (
    CHART,
    FULL_VALUES,
    KUBERNETES_VERSION,
    NAMESPACE,
    RELEASE,
    Objects,
    find,
    one,
    operator_config,
    operator_deployment,
    render,
    run_helm,
    template_text,
)

pytestmark = pytest.mark.contract

GOLDEN = Path(__file__).resolve().parent / "golden" / "chart-default.yaml"
MONITORING_KINDS = {"ServiceMonitor", "PodMonitor", "PrometheusRule"}
CERT_MANAGER_KINDS = {"Certificate", "Issuer"}
"""Kinds of CRDs that kubernetes-validate has no schema for: checked by apiVersion, kind and metadata."""
PEERING_API_VERSION = f"{leadership.PEERING_GROUP}/{leadership.PEERING_VERSION}"
GENERATED_TLS = re.compile(r"^(\s*(?:ca\.crt|tls\.crt|tls\.key|caBundle): )\S+$", re.MULTILINE)
DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
FULL_OPERATOR_DIGEST = "sha256:" + "0123456789abcdef" * 4  # values-full.yaml
FULL_AGENT_DIGEST = "sha256:" + "fedcba9876543210" * 4


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


# ---- Pods: hardened, probed, and told where everything is.


def _pod_specs(objects: Objects) -> list[tuple[str, dict[str, Any]]]:
    specs = [
        (f"Deployment/{o['metadata']['name']}", o["spec"]["template"]["spec"]) for o in find(objects, "Deployment")
    ]
    specs += [(f"Pod/{o['metadata']['name']}", o["spec"]) for o in find(objects, "Pod")]
    specs += [(f"Job/{o['metadata']['name']}", o["spec"]["template"]["spec"]) for o in find(objects, "Job")]
    return specs


def test_every_container_is_hardened(rendered: Objects) -> None:
    specs = _pod_specs(rendered)
    assert {name.split("/")[0] for name, _ in specs} == {"Deployment", "Pod", "Job"}
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


@pytest.mark.parametrize(("values", "metrics", "health"), [([], 8080, 8081), ([FULL_VALUES], 9090, 9091)])
def test_operator_probes_and_ports(helm: str, values: list[Path], metrics: int, health: int) -> None:
    objects = render(helm, values)
    deployment, container = operator_deployment(objects)
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


def test_the_operator_image_runs_as_the_chart_expects(default_objects: Objects) -> None:
    """operator/Dockerfile: the numeric non-root USER the pod's securityContext names, and
    `accelpool run` as the entrypoint the chart's args are appended to."""
    dockerfile = (CHART.parents[1] / "operator" / "Dockerfile").read_text()
    final_stage = dockerfile.split("\nFROM ")[-1]
    user = re.search(r"^USER (\d+):(\d+)$", final_stage, re.MULTILINE)
    assert user, "the final stage needs a numeric USER uid:gid"
    deployment, _ = operator_deployment(default_objects)
    pod_context = deployment["spec"]["template"]["spec"]["securityContext"]
    assert (pod_context["runAsUser"], pod_context["runAsGroup"]) == (int(user[1]), int(user[2]))
    assert 'ENTRYPOINT ["accelpool", "run"]' in final_stage
    assert cli.build_parser().parse_args(["run"]).command == "run"


def test_operator_flags_parse_and_carry_the_full_values(full_objects: Objects) -> None:
    config = operator_config(full_objects)
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
    _, container = operator_deployment(full_objects)
    assert container["image"] == f"registry.example.com/platform/accelpool-operator@{FULL_OPERATOR_DIGEST}"


def test_operator_flags_parse_with_the_defaults(default_objects: Objects) -> None:
    config = operator_config(default_objects)
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
    assert agent.backends == {"nvidia": "nvml", "amd": "amdsmi", "aws": "neuron", "google": "tpu"}
    assert agent.images == {
        "amd": "ghcr.io/accelpool/accelpool-agent-rocm:0.1.0",
        "aws": "ghcr.io/accelpool/accelpool-agent-neuron:0.1.0",
        "google": "ghcr.io/accelpool/accelpool-agent-tpu:0.1.0",
    }
    assert agent.images == operator_render.AgentRendering().images, "the chart and the operator default alike"
    assert (agent.backend, agent.runtime_class, agent.privileged, agent.priority_class) == (
        None,
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
    _, container = operator_deployment(default_objects)
    assert container["image"] == "ghcr.io/accelpool/accelpool-operator:0.1.0"


# ---- Images: by tag (the chart's appVersion) unless a digest pins them.


def _images(objects: Objects) -> dict[str, str]:
    """Every image the release runs: the operator, `helm test`'s pod, and the agents (--agent-image)."""
    images = {name: c["image"] for name, spec in _pod_specs(objects) for c in spec["containers"]}
    images["agents"] = operator_config(objects).agent.image
    return images


def test_images_default_to_the_chart_app_version(default_objects: Objects) -> None:
    images = _images(default_objects)
    assert images == {
        "Deployment/accelpool-operator": "ghcr.io/accelpool/accelpool-operator:0.1.0",
        "Pod/accelpool-operator-test-metrics": "ghcr.io/accelpool/accelpool-operator:0.1.0",
        "Job/accelpool-uninstall": "ghcr.io/accelpool/accelpool-operator:0.1.0",
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
        "Job/gpu-pools-uninstall": operator,
        "agents": f"registry.example.com/platform/accelpool-agent@{FULL_AGENT_DIGEST}",
    }
    config = operator_config(full_objects)
    spec = api.ComputePoolSpec.model_validate({"accelerator": "H100:8", "nodes": 2})
    daemonset = operator_render.daemonset("llm-training", "0000-uid", spec, config.agent)
    assert daemonset["spec"]["template"]["spec"]["containers"][0]["image"] == images["agents"]
    only_agent = _images(render(helm, set_values=[f"agent.image.digest={FULL_AGENT_DIGEST}"]))
    assert only_agent["agents"] == f"ghcr.io/accelpool/accelpool-agent@{FULL_AGENT_DIGEST}"
    assert only_agent["Deployment/accelpool-operator"] == "ghcr.io/accelpool/accelpool-operator:0.1.0"


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
