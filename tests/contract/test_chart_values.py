"""values.schema.json with the real helm: bad values are refused with a message naming the value,
the full-featured values are accepted."""

from __future__ import annotations

import pytest

from tests.contract.chart import (
    FULL_VALUES,
    HelmFailed,
    operator_config,
    render,
    template_text,
)

pytestmark = pytest.mark.contract


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
        ("agent.backends.amd=rocm", "/agent/backends/amd"),
        ("agent.backends.intel=nvml", "additional properties 'intel'"),
        ("agent.images.intel.repository=x", "additional properties 'intel'"),
        ("agent.images.amd.tag=1", "/agent/images/amd"),
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


def test_each_vendors_agent_image_and_backend_reach_the_operator(helm: str) -> None:
    values = [
        "agent.image.tag=2.0",
        "agent.images.amd.repository=registry.example/accelpool-agent-rocm",
        "agent.images.google.repository=registry.example/accelpool-agent-tpu",
        "agent.images.google.tag=3.0",
        "agent.backends.aws=cpu",
    ]
    agent = operator_config(render(helm, set_values=values)).agent
    assert agent.images == {
        "amd": "registry.example/accelpool-agent-rocm:2.0",
        "aws": "ghcr.io/accelpool/accelpool-agent-neuron:2.0",
        "google": "registry.example/accelpool-agent-tpu:3.0",
    }
    assert agent.backends == {"nvidia": "nvml", "amd": "amdsmi", "aws": "cpu", "google": "tpu"}
    assert operator_config(render(helm, set_values=["agent.backend=fake"])).agent.backend == "fake"


def test_a_digest_pins_only_its_own_vendors_agent_image(helm: str) -> None:
    """agent.image.digest is the NVIDIA image's: the other vendors keep their tags unless given theirs."""
    digest, amd_digest = "sha256:" + "a" * 64, "sha256:" + "b" * 64
    values = [f"agent.image.digest={digest}", f"agent.images.amd.digest={amd_digest}"]
    agent = operator_config(render(helm, set_values=values)).agent
    assert agent.image == f"ghcr.io/accelpool/accelpool-agent@{digest}"
    assert agent.images["amd"] == f"ghcr.io/accelpool/accelpool-agent-rocm@{amd_digest}"
    assert agent.images["google"] == "ghcr.io/accelpool/accelpool-agent-tpu:0.1.0"
