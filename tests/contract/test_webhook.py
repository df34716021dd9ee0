"""The admission webhook as installed: the chart's wiring (Service, port, path, certificate,
matchConditions evaluated with Google's CEL, certificate reuse on upgrade, cert-manager, off), and
the operator's real HTTPS server answering AdmissionReviews with the chart's certificate,
trusted through the configuration's caBundle alone, as an API server would call it.
"""

from __future__ import annotations

import copy
import shutil
import ssl
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool import cli
from accelpool.admission import review
from accelpool.runtime import webhook as webhook_server
from accelpool.runtime.settings import OperatorConfig
from accelpool_api import validation
from accelpool_demo.apiserver.cel import evaluate
from tests.contract.chart import FULL_VALUES, NAMESPACE, RELEASE, as_installed, find, one, render, render_upgrade
from tests.support.admission_webhook import ChartCertificates, RunningWebhook, WebhookErrors
from tests.support.builders import pool_body

pytestmark = pytest.mark.contract

Objects = list[dict[str, Any]]
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "accelpool.io_computepools.yaml"
VALID = {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}
NOT_OFFERED = {"accelerator": "H100:8", "mig": {"profile": "1g.5gb"}}
CERT_MANAGER = ["webhook.certManager.enabled=true"]
TLS_KEYS = ("ca.crt", "tls.crt", "tls.key")


@pytest.fixture(scope="module")
def default_objects(helm: str) -> Objects:
    return render(helm)


@pytest.fixture(scope="module")
def full_objects(helm: str) -> Objects:
    return render(helm, [FULL_VALUES])


def _operator(objects: Objects) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = one(objects, "Deployment")
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


def _config(objects: Objects) -> OperatorConfig:
    _, container = _operator(objects)
    return OperatorConfig.from_args(cli.build_parser().parse_args(["run", *container["args"]]))


def _hook(objects: Objects) -> dict[str, Any]:
    [hook] = one(objects, "ValidatingWebhookConfiguration")["webhooks"]
    return dict(hook)


def _tls_secret_name(objects: Objects) -> str:
    deployment, container = _operator(objects)
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    mount = mounts[_config(objects).webhook_cert_dir]
    assert mount["readOnly"] is True
    return str(volumes[mount["name"]]["secret"]["secretName"])


# ---- The chart's wiring: the configuration calls the operator where it listens.


@pytest.mark.parametrize("values", [[], [FULL_VALUES]], ids=["default", "full"])
def test_the_configuration_calls_the_operators_webhook_port_and_path(helm: str, values: list[Path]) -> None:
    objects = render(helm, values)
    hook = _hook(objects)
    service_ref = hook["clientConfig"]["service"]
    assert service_ref["path"] == webhook_server.PATH
    service = one(objects, "Service", service_ref["name"])
    assert service["metadata"]["namespace"] == service_ref["namespace"] == NAMESPACE
    [port] = [p for p in service["spec"]["ports"] if p["port"] == service_ref["port"]]
    deployment, container = _operator(objects)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert service["spec"]["selector"].items() <= pod_labels.items()
    [container_port] = [p for p in container["ports"] if p["name"] == port["targetPort"]]
    config = _config(objects)
    assert container_port["containerPort"] == config.webhook_port != 0
    assert config.webhook_cert_dir == "/etc/accelpool/webhook"
    monitors = find(objects, "ServiceMonitor")
    for monitor in monitors:  # the metrics ServiceMonitor must not pick the webhook Service up
        assert not monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()


def test_the_configuration_checks_creates_and_updates_of_computepools_only(default_objects: Objects) -> None:
    configuration = one(default_objects, "ValidatingWebhookConfiguration")
    assert configuration["metadata"]["name"] == RELEASE
    hook = _hook(default_objects)
    assert hook["name"] == "computepools.accelpool.io"
    assert hook["rules"] == [
        {
            "apiGroups": ["accelpool.io"],
            "apiVersions": ["v1alpha1"],
            "resources": ["computepools"],  # not computepools/status: the operator's writes
            "operations": ["CREATE", "UPDATE"],
            "scope": "Cluster",
        }
    ]
    assert (hook["sideEffects"], hook["admissionReviewVersions"]) == ("None", ["v1"])
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == ("Fail", 10)
    crd = yaml.safe_load(CRD_FILE.read_text())
    assert crd["spec"]["scope"] == "Cluster" and crd["spec"]["group"] == "accelpool.io"
    assert [v["name"] for v in crd["spec"]["versions"]] == ["v1alpha1"]


def test_failure_policy_and_timeout_come_from_values(full_objects: Objects) -> None:
    values = yaml.safe_load(FULL_VALUES.read_text())["webhook"]
    hook = _hook(full_objects)
    assert (hook["failurePolicy"], hook["timeoutSeconds"]) == (values["failurePolicy"], values["timeoutSeconds"])
    assert _config(full_objects).webhook_port == values["port"]


# ---- matchConditions, as the API server evaluates them (Google's CEL, accelpool_demo/apiserver/cel.py).


def _calls_webhook(hook: dict[str, Any], operation: str, obj: dict[str, Any], old: dict[str, Any] | None) -> bool:
    variables = {
        "request": {"operation": operation, "kind": {"group": "accelpool.io", "kind": "ComputePool"}},
        "object": obj,
        "oldObject": old,
    }
    results = []
    for condition in hook["matchConditions"]:
        outcome = evaluate(condition["expression"], variables)
        assert outcome.error is None and isinstance(outcome.value, bool), (condition, outcome)
        results.append(outcome.value)
    return all(results)


def test_match_conditions_skip_updates_that_keep_the_spec(default_objects: Objects) -> None:
    """The API server calls the webhook for every create and every spec change, and never for a
    metadata-only update: a finalizer removed from an invalid pool must not wait for the webhook."""
    hook = _hook(default_objects)
    stored = pool_body("old", NOT_OFFERED)
    stored["metadata"].update(finalizers=["accelpool.io/finalizer"], resourceVersion="7")
    assert _calls_webhook(hook, "CREATE", pool_body("case", VALID), None)
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"].update(finalizers=[], labels={"team": "b"}, resourceVersion="8")
    assert not _calls_webhook(hook, "UPDATE", relabelled, stored)
    with_status = {**copy.deepcopy(stored), "status": {"phase": "Failed"}}
    assert not _calls_webhook(hook, "UPDATE", with_status, stored)
    rescaled = copy.deepcopy(stored)
    rescaled["spec"]["nodes"] = 3
    assert _calls_webhook(hook, "UPDATE", rescaled, stored)
    deeper = copy.deepcopy(stored)
    deeper["spec"]["mig"]["profile"] = "3g.40gb"
    assert _calls_webhook(hook, "UPDATE", deeper, stored)
    without_spec = {k: v for k, v in stored.items() if k != "spec"}
    assert _calls_webhook(hook, "UPDATE", without_spec, stored)


def test_the_webhook_itself_allows_what_match_conditions_skip(default_objects: Objects) -> None:
    """The same rule on both sides: an API server that sends such an update anyway gets an allow."""
    hook = _hook(default_objects)
    stored = pool_body("case", NOT_OFFERED)
    relabelled = copy.deepcopy(stored)
    relabelled["metadata"]["labels"] = {"team": "b"}
    assert not _calls_webhook(hook, "UPDATE", relabelled, stored)
    request = {"uid": "1", "operation": "UPDATE", "object": relabelled, "oldObject": stored}
    assert review.check(request) is None


# ---- The serving certificate: Helm's, kept across upgrades; or cert-manager's.


def _tls_data(objects: Objects) -> dict[str, str]:
    data = one(objects, "Secret", _tls_secret_name(objects))["data"]
    return {key: data[key] for key in TLS_KEYS}


def test_helm_generates_a_ca_and_a_certificate_for_the_service(default_objects: Objects, tmp_path: Path) -> None:
    secret = one(default_objects, "Secret", _tls_secret_name(default_objects))
    assert secret["type"] == "kubernetes.io/tls" and set(secret["data"]) == set(TLS_KEYS)
    assert _hook(default_objects)["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    certificates = ChartCertificates.from_chart(default_objects, tmp_path)
    assert certificates.server_name == f"{RELEASE}-operator-webhook.{NAMESPACE}.svc"
    webhook_server.tls_context(tmp_path)  # the operator loads the pair


def test_each_render_without_a_cluster_generates_a_new_pair(helm: str) -> None:
    """What makes the lookup below necessary: a fresh CA per render, so an upgrade that did not
    reuse the Secret would hand the API server a new caBundle while pods still serve the old pair."""
    first, second = _tls_data(render(helm)), _tls_data(render(helm))
    assert all(first[key] != second[key] for key in TLS_KEYS)


async def test_an_upgrade_keeps_the_installed_certificate_and_ca(
    helm: str, default_objects: Objects, tmp_path: Path
) -> None:
    installed = one(default_objects, "Secret", _tls_secret_name(default_objects))
    upgraded = await render_upgrade(helm, default_objects, [as_installed(installed)], tmp_path)
    assert _tls_data(upgraded) == _tls_data(default_objects)
    assert _hook(upgraded)["clientConfig"]["caBundle"] == installed["data"]["ca.crt"]


async def test_an_upgrade_replaces_an_incomplete_secret(helm: str, default_objects: Objects, tmp_path: Path) -> None:
    installed = as_installed(one(default_objects, "Secret", _tls_secret_name(default_objects)))
    del installed["data"]["tls.key"]
    upgraded = await render_upgrade(helm, default_objects, [installed], tmp_path)
    fresh = _tls_data(upgraded)
    assert fresh["ca.crt"] != installed["data"]["ca.crt"] and fresh["tls.key"]
    assert _hook(upgraded)["clientConfig"]["caBundle"] == fresh["ca.crt"]
    ChartCertificates.from_chart(upgraded, tmp_path / "tls")
    webhook_server.tls_context(tmp_path / "tls")


def test_cert_manager_issues_the_certificate_and_injects_its_ca(helm: str) -> None:
    objects = render(helm, set_values=CERT_MANAGER)
    assert not find(objects, "Secret")
    certificate = one(objects, "Certificate")
    assert certificate["apiVersion"] == "cert-manager.io/v1"
    service = _hook(objects)["clientConfig"]["service"]
    names = [f"{service['name']}.{NAMESPACE}.svc", f"{service['name']}.{NAMESPACE}.svc.cluster.local"]
    assert certificate["spec"]["dnsNames"] == names
    assert certificate["spec"]["secretName"] == _tls_secret_name(objects)
    issuer = one(objects, "Issuer")
    assert issuer["spec"] == {"selfSigned": {}} and issuer["metadata"]["namespace"] == NAMESPACE
    assert certificate["spec"]["issuerRef"] == {
        "name": issuer["metadata"]["name"],
        "kind": "Issuer",
        "group": "cert-manager.io",
    }
    configuration = one(objects, "ValidatingWebhookConfiguration")
    injected = f"{certificate['metadata']['namespace']}/{certificate['metadata']['name']}"
    assert configuration["metadata"]["annotations"] == {"cert-manager.io/inject-ca-from": injected}
    assert "caBundle" not in _hook(objects)["clientConfig"]


def test_cert_manager_with_a_cluster_issuer(full_objects: Objects) -> None:
    values = yaml.safe_load(FULL_VALUES.read_text())["webhook"]["certManager"]
    assert not find(full_objects, "Issuer") and not find(full_objects, "Secret")
    certificate = one(full_objects, "Certificate")
    assert certificate["spec"]["issuerRef"] == {"group": "cert-manager.io", **values["issuerRef"]}
    assert certificate["spec"]["secretName"] == _tls_secret_name(full_objects)


def test_helm_and_cert_manager_never_share_a_secret(default_objects: Objects, helm: str) -> None:
    """Switching modes must not make Helm and cert-manager fight over one Secret."""
    assert _tls_secret_name(default_objects) != _tls_secret_name(render(helm, set_values=CERT_MANAGER))


# ---- Off.


def test_webhook_disabled_renders_none_of_it(helm: str) -> None:
    objects = render(helm, set_values=["webhook.enabled=false", "networkPolicy.enabled=true"])
    kinds = {o["kind"] for o in objects}
    assert not kinds & {"ValidatingWebhookConfiguration", "Secret", "Certificate", "Issuer"}
    assert [s["metadata"]["name"] for s in find(objects, "Service")] == [f"{RELEASE}-operator-metrics"]
    deployment, container = _operator(objects)
    assert _config(objects).webhook_port == 0
    assert "webhook" not in {p["name"] for p in container["ports"]}
    assert [v["name"] for v in deployment["spec"]["template"]["spec"]["volumes"]] == ["tmp"]
    policy = one(objects, "NetworkPolicy", f"{RELEASE}-operator")
    assert [rule["ports"] for rule in policy["spec"]["ingress"]] == [[{"port": 8080, "protocol": "TCP"}]]


# ---- NetworkPolicy: the API server reaches the webhook port.


@pytest.mark.parametrize(
    "values", [["networkPolicy.enabled=true"], ["networkPolicy.enabled=true", "webhook.port=8443"]]
)
def test_network_policy_opens_the_webhook_port_to_any_source(helm: str, values: list[str]) -> None:
    objects = render(helm, set_values=values)
    policy = one(objects, "NetworkPolicy", f"{RELEASE}-operator")
    _, container = _operator(objects)
    [port] = [p for p in container["ports"] if p["name"] == "webhook"]
    webhook_rules = [
        r for r in policy["spec"]["ingress"] if {"port": port["containerPort"], "protocol": "TCP"} in r["ports"]
    ]
    assert webhook_rules == [{"ports": [{"port": port["containerPort"], "protocol": "TCP"}]}]  # no `from`: everyone


# ---- The real server, called like an API server calls it.


def test_a_valid_pool_is_admitted(webhook_errors: WebhookErrors) -> None:
    assert webhook_errors(pool_body("case", VALID)) == []


def test_a_catalog_rule_is_denied_in_validates_words(webhook_errors: WebhookErrors) -> None:
    obj = pool_body("case", NOT_OFFERED)
    verdict = validation.validate_object(obj)
    assert webhook_errors(obj) == [str(p) for p in verdict.problems]
    assert "; ".join(webhook_errors(obj)) == review.denial_message(verdict)


def test_updates_over_https(webhook_errors: WebhookErrors) -> None:
    invalid = pool_body("case", NOT_OFFERED)
    relabelled = copy.deepcopy(invalid)
    relabelled["metadata"]["labels"] = {"team": "b"}
    assert webhook_errors(relabelled, "UPDATE", invalid) == []
    assert webhook_errors(invalid, "UPDATE", pool_body("case", VALID)) != []
    assert webhook_errors(pool_body("case", VALID), "UPDATE", invalid) == []


def test_the_certificate_is_for_both_service_names(admission_webhook: RunningWebhook) -> None:
    name = admission_webhook.certificates.server_name
    for server_name in (name, f"{name}.cluster.local"):
        with admission_webhook.connect(server_name) as tls:
            assert tls.version() in ("TLSv1.2", "TLSv1.3")
    with pytest.raises(ssl.SSLCertVerificationError, match="match"):
        admission_webhook.connect("accelpool-operator-metrics.accelpool-system.svc").close()


def test_a_malformed_review_is_a_bad_request(admission_webhook: RunningWebhook) -> None:
    not_json = admission_webhook.post(b"{")
    assert not_json.status == 400 and b"not JSON" in not_json.body
    wrong = admission_webhook.post(b'{"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview"}')
    assert wrong.status == 400 and b"expected apiVersion 'admission.k8s.io/v1'" in wrong.body
    assert admission_webhook.post(b"{}", path="/validate").status == 404


def test_a_renewed_certificate_is_served_without_a_restart(helm: str, tmp_path: Path) -> None:
    """cert-manager renews the Secret; the kubelet updates the files; the operator reloads them."""
    first = ChartCertificates.from_chart(render(helm), tmp_path / "first")
    renewed = ChartCertificates.from_chart(render(helm), tmp_path / "renewed")
    serving = ChartCertificates(tmp_path / "serving", first.ca_bundle, first.server_name, first.path)
    shutil.copytree(first.cert_dir, serving.cert_dir)
    with RunningWebhook(serving) as running:
        assert running.server.reload() is False  # unchanged files: nothing to do
        assert running.errors(pool_body("case", VALID)) == []
        for key in (webhook_server.CERT_FILE, webhook_server.KEY_FILE):
            shutil.copy(renewed.cert_dir / key, serving.cert_dir / key)
        assert running.server.reload() is True
        with pytest.raises(ssl.SSLCertVerificationError):
            running.connect().close()  # the old CA no longer verifies what is served
        running.certificates = ChartCertificates(serving.cert_dir, renewed.ca_bundle, first.server_name, first.path)
        assert running.errors(pool_body("case", NOT_OFFERED)) != []
        (serving.cert_dir / webhook_server.KEY_FILE).write_bytes(
            (first.cert_dir / webhook_server.KEY_FILE).read_bytes()
        )  # half-way through a swap: the key no longer matches the certificate
        assert running.server.reload() is False
        assert running.errors(pool_body("case", VALID)) == []  # still serving the renewed pair
