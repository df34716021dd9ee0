"""The chart's NetworkPolicies with the real helm, read for what they let through.

`Traffic.admitted` decides a connection as the NetworkPolicy API defines it (kubernetes.io/docs/concepts/
services-networking/network-policies, and the networking.k8s.io/v1 reference): a pod selected by a policy
with Ingress (Egress) in its policyTypes is isolated in that direction and takes only what some rule of such a
policy admits; a rule admits a connection whose port its `ports` list (every port when absent) and whose peer
its `from`/`to` list (every peer when absent); a peer entry with namespaceSelector and podSelector selects pods
matching both, an ipBlock an address inside `cidr` and outside `except`; a connection from the pod's own node
(the kubelet's probes) is always admitted. Selectors are read by the emulator's `selects` (apimachinery's
LabelSelectorAsSelector).

What the chart promises: the agents' and the operator's metrics only to `metricsFrom` (and `helm test`'s pod);
the webhook port to any source, or to `webhookFrom`; nothing else to them; egress open unless the API server's
endpoints (or extra rules) are given, then only those, DNS and the extra rules.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from typing import Any

import kubernetes_validate
import pytest
import yaml

import accelpool_api as api
from accelpool.decide import render as operator_render
from accelpool_demo.apiserver.selectors import selects
from tests.contract.chart import (
    FULL_VALUES,
    KUBERNETES_VERSION,
    NAMESPACE,
    HelmFailed,
    Objects,
    find,
    one,
    operator_config,
    operator_deployment,
    render,
    template_text,
)

pytestmark = pytest.mark.contract

ON = ["networkPolicy.enabled=true"]


@dataclass(frozen=True)
class Peer:
    """One end of a connection: a pod (namespace and its labels, pod labels), an address outside the pod
    network, or the pod's own node."""

    ip: str = "192.168.7.7"
    """Pods' addresses lie outside every ipBlock here: the API leaves to each CNI whether an ipBlock selects pods."""
    namespace: str | None = None
    namespace_labels: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)
    node: bool = False


def pod(namespace: str, **labels: str) -> Peer:
    return Peer(namespace=namespace, namespace_labels={"kubernetes.io/metadata.name": namespace}, labels=labels)


def address(ip: str) -> Peer:
    return Peer(ip=ip)


NODE = Peer(ip="172.18.0.5", node=True)
PROMETHEUS = pod("monitoring", **{"app.kubernetes.io/name": "prometheus"})
STRANGER = pod("default", app="curious")
KUBE_DNS = pod("kube-system", **{"k8s-app": "kube-dns"})


def _peer_matches(entry: dict[str, Any], peer: Peer, own_namespace: str) -> bool:
    if "ipBlock" in entry:
        block = entry["ipBlock"]
        ip = ipaddress.ip_address(peer.ip)
        inside = ip in ipaddress.ip_network(block["cidr"], strict=False)
        return inside and not any(ip in ipaddress.ip_network(c, strict=False) for c in block.get("except") or [])
    if peer.namespace is None:  # selectors select pods only
        return False
    if "namespaceSelector" in entry:
        if not selects(entry["namespaceSelector"], peer.namespace_labels):
            return False
    elif peer.namespace != own_namespace:  # a podSelector alone: the policy's own namespace
        return False
    return "podSelector" not in entry or selects(entry["podSelector"], peer.labels)


def _port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str) -> bool:
    if not ports:
        return True
    for entry in ports:
        if entry.get("protocol", "TCP") != protocol:
            continue
        low = entry.get("port")
        if low is None or (low <= port <= entry.get("endPort", low)):
            return True
    return False


@dataclass(frozen=True)
class Traffic:
    policies: list[dict[str, Any]]

    def admitted(
        self, direction: str, namespace: str, labels: dict[str, str], peer: Peer, port: int, protocol: str = "TCP"
    ) -> bool:
        """Whether the pod (`namespace`, `labels`) may receive (Ingress) from, or open (Egress) to, `peer` on `port`."""
        if direction == "Ingress" and peer.node:
            return True
        isolating = [
            p
            for p in self.policies
            if p["metadata"]["namespace"] == namespace
            and selects(p["spec"]["podSelector"], labels)
            and direction in p["spec"].get("policyTypes", ["Ingress"])
        ]
        if not isolating:
            return True
        side = "from" if direction == "Ingress" else "to"
        for policy in isolating:
            for rule in policy["spec"].get(direction.lower()) or []:
                peers = rule.get(side)
                if _port_matches(rule.get("ports"), port, protocol) and (
                    not peers or any(_peer_matches(e, peer, namespace) for e in peers)
                ):
                    return True
        return False


@dataclass(frozen=True)
class Installed:
    """A render: its policies, the operator pod and an agent pod as they will run, and their ports."""

    objects: Objects

    @property
    def traffic(self) -> Traffic:
        return Traffic(find(self.objects, "NetworkPolicy"))

    @property
    def operator(self) -> tuple[str, dict[str, str]]:
        deployment, _ = operator_deployment(self.objects)
        return deployment["metadata"]["namespace"], deployment["spec"]["template"]["metadata"]["labels"]

    @property
    def agent(self) -> tuple[str, dict[str, str]]:
        config = operator_config(self.objects)
        spec = api.ComputePoolSpec.model_validate({"accelerator": "H100:8", "nodes": 2})
        daemonset = operator_render.daemonset("llm-training", "0000-uid", spec, config.agent)
        return daemonset["metadata"]["namespace"], daemonset["spec"]["template"]["metadata"]["labels"]

    def port(self, name: str) -> int:
        _, container = operator_deployment(self.objects)
        return int(next(p["containerPort"] for p in container["ports"] if p["name"] == name))

    def to_operator(self, peer: Peer, port: int) -> bool:
        return self.traffic.admitted("Ingress", *self.operator, peer, port)

    def to_agent(self, peer: Peer, port: int = 9402) -> bool:
        return self.traffic.admitted("Ingress", *self.agent, peer, port)

    def from_operator(self, peer: Peer, port: int, protocol: str = "TCP") -> bool:
        return self.traffic.admitted("Egress", *self.operator, peer, port, protocol)

    def from_agent(self, peer: Peer, port: int, protocol: str = "TCP") -> bool:
        return self.traffic.admitted("Egress", *self.agent, peer, port, protocol)


def installed(helm: str, *set_values: str) -> Installed:
    objects = render(helm, set_values=[*ON, *set_values])
    for policy in find(objects, "NetworkPolicy"):
        kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)
    return Installed(objects)


# ---- Off unless asked for.


def test_no_network_policy_unless_enabled(default_objects: Objects) -> None:
    """As cert-manager's, Kyverno's and Gatekeeper's charts: who scrapes and where the API server calls from
    are the cluster's, and a policy that guesses wrong stops scrapes or admission."""
    assert not find(default_objects, "NetworkPolicy")


# ---- Ingress.


def test_by_default_the_webhook_is_open_and_the_metrics_only_for_the_monitoring_namespace(helm: str) -> None:
    cluster = installed(helm)
    webhook, metrics, health = cluster.port("webhook"), cluster.port("metrics"), cluster.port("health")
    for caller in (address("52.95.110.1"), address("172.18.0.2"), STRANGER):  # wherever the API server is
        assert cluster.to_operator(caller, webhook)
    assert cluster.to_operator(PROMETHEUS, metrics) and cluster.to_agent(PROMETHEUS)
    assert not cluster.to_operator(STRANGER, metrics) and not cluster.to_agent(STRANGER)
    assert not cluster.to_operator(STRANGER, health) and not cluster.to_operator(address("172.18.0.2"), health)
    assert cluster.to_operator(NODE, health)  # the kubelet's probes
    assert not cluster.to_operator(PROMETHEUS, webhook + 1) and not cluster.to_agent(PROMETHEUS, 22)
    helm_test = pod(NAMESPACE, **{k: v for k, v in cluster.operator[1].items() if k != "app.kubernetes.io/component"})
    helm_test.labels["app.kubernetes.io/component"] = "helm-test"
    assert cluster.to_operator(helm_test, metrics) and not cluster.to_operator(helm_test, webhook + 1)


def test_webhook_from_narrows_the_webhook_port_to_the_api_server(helm: str) -> None:
    cluster = installed(
        helm,
        "networkPolicy.webhookFrom[0].ipBlock.cidr=172.18.0.0/24",
        "networkPolicy.webhookFrom[1].namespaceSelector.matchLabels.kubernetes\\.io/metadata\\.name=kube-system",
        "networkPolicy.webhookFrom[1].podSelector.matchLabels.k8s-app=konnectivity-agent",
    )
    webhook = cluster.port("webhook")
    assert cluster.to_operator(address("172.18.0.2"), webhook)  # a control-plane node
    assert cluster.to_operator(pod("kube-system", **{"k8s-app": "konnectivity-agent"}), webhook)
    assert not cluster.to_operator(address("52.95.110.1"), webhook)
    assert not cluster.to_operator(STRANGER, webhook) and not cluster.to_operator(KUBE_DNS, webhook)
    assert cluster.to_operator(PROMETHEUS, cluster.port("metrics"))  # the metrics rule is its own


def test_no_scrapers_means_no_one_reaches_the_agents(helm: str) -> None:
    """An empty `metricsFrom` must not turn into a rule without `from` (which admits everyone)."""
    cluster = installed(helm, "networkPolicy.metricsFrom=null")
    assert one(cluster.objects, "NetworkPolicy", "accelpool-agent")["spec"]["ingress"] == []
    assert not cluster.to_agent(PROMETHEUS) and not cluster.to_agent(address("172.18.0.2"))
    assert not cluster.to_operator(PROMETHEUS, cluster.port("metrics"))
    assert cluster.to_operator(address("172.18.0.2"), cluster.port("webhook"))


def test_without_the_webhook_only_the_metrics_port_is_open(helm: str) -> None:
    cluster = installed(helm, "webhook.enabled=false")
    assert not cluster.to_operator(address("172.18.0.2"), 9443) and not cluster.to_operator(STRANGER, 9443)
    assert cluster.to_operator(PROMETHEUS, cluster.port("metrics"))


# ---- Egress.


def test_egress_is_open_unless_restricted(helm: str) -> None:
    cluster = installed(helm)
    for policy in find(cluster.objects, "NetworkPolicy"):
        assert policy["spec"]["policyTypes"] == ["Ingress"] and "egress" not in policy["spec"]
    assert cluster.from_operator(address("203.0.113.9"), 443) and cluster.from_agent(address("203.0.113.9"), 443)


API_SERVER = "172.18.0.2"
RESTRICTED = ["networkPolicy.apiServerCIDRs={172.18.0.2/32,172.18.0.3/32}"]


def test_restricted_egress_reaches_only_the_api_server_and_dns(helm: str) -> None:
    cluster = installed(helm, *RESTRICTED)
    for leaves in (cluster.from_operator, cluster.from_agent):
        assert leaves(address(API_SERVER), 6443) and leaves(address("172.18.0.3"), 443)
        assert not leaves(address(API_SERVER), 22) and not leaves(address(API_SERVER), 6443, "UDP")
        assert not leaves(address("172.18.0.4"), 6443)  # a worker node: not an endpoint
        assert not leaves(address("203.0.113.9"), 443)
        assert leaves(KUBE_DNS, 53, "UDP") and leaves(KUBE_DNS, 53, "TCP") and not leaves(KUBE_DNS, 9153)
        assert not leaves(pod("kube-system", app="other"), 53, "UDP")
        assert not leaves(STRANGER, 8080)
    for policy in find(cluster.objects, "NetworkPolicy"):
        assert policy["spec"]["policyTypes"] == ["Ingress", "Egress"]


def test_api_server_ports_and_dns_targets_come_from_values(helm: str) -> None:
    cluster = installed(
        helm,
        *RESTRICTED,
        "networkPolicy.apiServerPorts={443}",
        "networkPolicy.dnsTo[0].ipBlock.cidr=169.254.20.10/32",  # NodeLocal DNSCache only
    )
    assert cluster.from_operator(address(API_SERVER), 443) and not cluster.from_operator(address(API_SERVER), 6443)
    assert cluster.from_agent(address("169.254.20.10"), 53, "UDP") and not cluster.from_agent(KUBE_DNS, 53, "UDP")


def test_no_dns_rule_when_dns_to_is_empty(helm: str) -> None:
    cluster = installed(helm, *RESTRICTED, "networkPolicy.dnsTo=null")
    assert not cluster.from_operator(KUBE_DNS, 53, "UDP")
    assert cluster.from_operator(address(API_SERVER), 6443)


def test_extra_egress_rules_restrict_egress_on_their_own_and_are_appended(helm: str) -> None:
    extra = [
        "networkPolicy.egress[0].to[0].ipBlock.cidr=10.20.0.10/32",
        "networkPolicy.egress[0].ports[0].port=3128",
    ]
    only_extra = installed(helm, *extra)
    assert only_extra.from_operator(address("10.20.0.10"), 3128)
    assert only_extra.from_operator(KUBE_DNS, 53, "UDP")  # restricted: DNS comes with it
    assert not only_extra.from_operator(address(API_SERVER), 6443)  # no apiServerCIDRs: the API server is yours to add
    both = installed(helm, *RESTRICTED, *extra)
    assert both.from_agent(address("10.20.0.10"), 3128) and both.from_agent(address(API_SERVER), 6443)


# ---- The full values: every knob at once, in the namespaces it names.


def test_full_values(full_objects: Objects) -> None:
    values = yaml.safe_load(FULL_VALUES.read_text())["networkPolicy"]
    cluster = Installed(full_objects)
    agent_namespace, agent_labels = cluster.agent
    agent_policy = one(full_objects, "NetworkPolicy", "gpu-pools-agent")
    assert agent_policy["metadata"]["namespace"] == agent_namespace == "accelpool-agents"
    assert selects(agent_policy["spec"]["podSelector"], agent_labels)
    assert not selects(agent_policy["spec"]["podSelector"], cluster.operator[1])
    operator_policy = one(full_objects, "NetworkPolicy", "gpu-pools-operator")
    assert operator_policy["metadata"]["namespace"] == cluster.operator[0] == NAMESPACE
    assert not selects(operator_policy["spec"]["podSelector"], one(full_objects, "Pod")["metadata"]["labels"])
    assert cluster.to_agent(PROMETHEUS) and not cluster.to_agent(pod("monitoring", app="grafana"))
    assert cluster.to_agent(address("10.1.2.3")) and not cluster.to_agent(address("10.96.0.10"))  # ipBlock except
    webhook = cluster.port("webhook")
    assert webhook == 8443 and cluster.to_operator(address("172.18.0.9"), webhook)
    assert not cluster.to_operator(address("10.1.2.3"), webhook)
    assert cluster.from_operator(address(values["apiServerCIDRs"][0].split("/")[0]), 6443)
    assert not cluster.from_operator(address(values["apiServerCIDRs"][0].split("/")[0]), 443)
    assert cluster.from_agent(address("169.254.20.10"), 53, "UDP") and cluster.from_agent(KUBE_DNS, 53, "TCP")
    assert cluster.from_agent(address("10.20.0.10"), 3128) and not cluster.from_agent(address("10.20.0.11"), 3128)
    for policy in (agent_policy, operator_policy):
        kubernetes_validate.validate(policy, KUBERNETES_VERSION, strict=True)


# ---- Bad values are refused by values.schema.json.


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("networkPolicy.apiServerCIDRs={172.18.0.2}", "/networkPolicy/apiServerCIDRs/0"),
        ("networkPolicy.apiServerCIDRs={kubernetes.default}", "/networkPolicy/apiServerCIDRs/0"),
        ("networkPolicy.apiServerPorts=null", "missing property 'apiServerPorts'"),  # no ports: every port
        ("networkPolicy.apiServerPorts={0}", "/networkPolicy/apiServerPorts/0"),
        ("networkPolicy.webhookFrom[0].cidr=10.0.0.0/8", "additional properties 'cidr'"),
        ("networkPolicy.dnsTo[0].namespace=kube-system", "additional properties 'namespace'"),
    ],
)
def test_schema_rejects_bad_network_policy_values(helm: str, assignment: str, says: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        template_text(helm, set_values=[assignment])
    assert says in str(refused.value)
