"""Admission the way a cluster does it: the chart's ValidatingWebhookConfiguration, called over HTTPS by
the emulated API server's dispatcher (accelpool_demo.apiserver.webhooks), reaching the operator's real
webhook server; and the demo installing the same configuration as the chart (accelpool_demo.webhook).

A refusal must read as a real API server's: a 422 Status of the same shape as the recorded v1.36.2
server's refusals of invalid custom objects (../shared/fidelity/kubernetes/crd-admission-and-apply.yaml),
its message prefixed as statuserror.go ToStatusErr prefixes a webhook's.

The API server authenticating itself to the webhook (the chart's webhook.clientAuth): the emulator finds its
credentials in the admission configuration's kubeconfig as kube-apiserver does (which `users` entry for which
webhook: util/webhook/authentication.go; the files: admission/config.go, webhook/config/kubeconfig.go), and
the demo serves the operator's webhook requiring the certificate it gives the emulator.
"""

from __future__ import annotations

import base64
import copy
import socket
import ssl
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web

import accelpool_api as api
from accelpool.runtime import webhook as webhook_server
from accelpool_core.kube import ApiError
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver import ApiServer, serving
from accelpool_demo.apiserver.resources import StatusError
from accelpool_demo.apiserver.webhooks import (
    AdmissionConfigurationError,
    Attributes,
    Webhooks,
    authentication_info,
    denied,
    read_admission_kubeconfig,
)
from tests.contract.chart import one, render
from tests.support.admission_webhook import ChartCertificates, RunningWebhook
from tests.support.builders import pool_body
from tests.support.environment import require_shared

pytestmark = pytest.mark.contract
REFUSED = pool_body("refused", {"accelerator": "H100", "mig": {"profile": "9g.99gb"}})
VALID = pool_body("valid", {"accelerator": "H100"})


def _attributes(operation: str, obj: dict[str, Any] | None, old: dict[str, Any] | None = None) -> Attributes:
    name = str(((obj or old or {}).get("metadata") or {}).get("name"))
    return Attributes(operation, api.GROUP, api.VERSION, api.PLURAL, api.KIND, name, object=obj, old_object=old)


@pytest.fixture(scope="module")
def chart_configuration(helm: str) -> dict[str, Any]:
    found: dict[str, Any] = one(render(helm), "ValidatingWebhookConfiguration")
    return found


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def _dispatcher(configuration: dict[str, Any], port: int) -> Webhooks:
    service = configuration["webhooks"][0]["clientConfig"]["service"]

    def resolve(namespace: str, name: str, service_port: int) -> tuple[str, int] | None:
        known = (service["namespace"], service["name"], service["port"])
        return ("127.0.0.1", port) if (namespace, name, service_port) == known else None

    return Webhooks(lambda: [configuration], resolve=resolve, namespace_labels=lambda _: None)


@pytest.fixture(scope="module")
def chart_webhooks(chart_configuration: dict[str, Any], admission_webhook: RunningWebhook) -> Webhooks:
    """The chart's configuration, its Service resolved to the operator's webhook server, which serves the
    certificate of another render of the chart: the configuration trusts that render's CA."""
    configuration = copy.deepcopy(chart_configuration)
    ca = base64.b64encode(admission_webhook.certificates.ca_bundle).decode()
    configuration["webhooks"][0]["clientConfig"]["caBundle"] = ca
    return _dispatcher(configuration, admission_webhook.server.port)


def _recorded_refusal() -> dict[str, Any]:
    transcript = yaml.safe_load(require_shared("fidelity/kubernetes/crd-admission-and-apply.yaml").read_text())
    for scenario in transcript["scenarios"]:
        for step in scenario["steps"]:
            response = step.get("response") or {}
            if response.get("code") == 422 and "/apis/fidelity.example.com/" in step["request"]["path"]:
                found: dict[str, Any] = response["body"]
                return found
    raise AssertionError("the transcript holds no refused custom object")


async def test_a_pool_the_webhook_refuses_reads_as_the_server_refusals(
    chart_webhooks: Webhooks, webhook_errors: Any
) -> None:
    with pytest.raises(StatusError) as raised:
        await chart_webhooks.validate(_attributes("CREATE", REFUSED))
    body = dict(raised.value.body)
    expected = webhook_errors(REFUSED)
    assert body["code"] == 422 and body["reason"] == "Invalid"
    prefix = f'admission webhook "{demo_webhook.WEBHOOK}" denied the request: '
    assert body["message"].startswith(prefix) and expected[0] in body["message"]
    assert [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]] == expected
    recorded = _recorded_refusal()
    assert set(body) == set(recorded), "the Status has the recorded server's keys"
    assert set(body["details"]) == set(recorded["details"])
    assert all(set(cause) == {"reason", "message", "field"} for cause in body["details"]["causes"])
    assert (body["details"]["kind"], body["details"]["name"]) == (api.KIND, "refused")


async def test_a_valid_pool_passes(chart_webhooks: Webhooks) -> None:
    assert await chart_webhooks.validate(_attributes("CREATE", VALID)) == []


async def test_match_conditions_skip_updates_that_keep_the_spec(chart_configuration: dict[str, Any]) -> None:
    """With nothing listening, a call fails the write: only a create or a spec change makes one."""
    unreachable = _dispatcher(chart_configuration, _closed_port())
    relabelled = copy.deepcopy(REFUSED)
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert await unreachable.validate(_attributes("UPDATE", relabelled, REFUSED)) == []
    with pytest.raises(StatusError) as raised:
        await unreachable.validate(_attributes("CREATE", VALID))
    assert raised.value.body["code"] == 500 and raised.value.body["reason"] == "InternalError"
    assert raised.value.body["message"].startswith(
        f'Internal error occurred: failed calling webhook "{demo_webhook.WEBHOOK}": failed to call webhook: Post '
        f'"https://127.0.0.1:'
    )


async def test_failure_policy_ignore_admits_when_the_webhook_is_down(chart_configuration: dict[str, Any]) -> None:
    ignoring = copy.deepcopy(chart_configuration)
    ignoring["webhooks"][0]["failurePolicy"] = "Ignore"
    assert await _dispatcher(ignoring, _closed_port()).validate(_attributes("CREATE", REFUSED)) == []


async def test_a_write_the_rules_do_not_match_is_not_sent(chart_configuration: dict[str, Any]) -> None:
    unreachable = _dispatcher(chart_configuration, _closed_port())
    status_write = Attributes(
        "UPDATE",
        api.GROUP,
        api.VERSION,
        api.PLURAL,
        api.KIND,
        "x",
        subresource="status",
        object=VALID,
        old_object=VALID,
    )
    assert await unreachable.validate(status_write) == []
    deletion = _attributes("DELETE", None, VALID)
    assert await unreachable.validate(deletion) == []


def test_a_refusal_is_worded_as_the_api_server_words_it() -> None:
    """statuserror.go ToStatusErr: the code raised to 400 at least, the message, else the reason, else none."""
    forbidden = denied("w.example.com", {"code": 403, "message": "no thanks", "reason": "Forbidden"}).body
    assert (forbidden["code"], forbidden["message"]) == (
        403,
        'admission webhook "w.example.com" denied the request: no thanks',
    )
    assert denied("w", {"code": 200}).body["code"] == 400
    assert denied("w", None).body["message"] == 'admission webhook "w" denied the request without explanation'
    assert denied("w", {"reason": "Because"}).body["message"] == 'admission webhook "w" denied the request: Because'


def test_the_demo_installs_the_charts_configuration(chart_configuration: dict[str, Any]) -> None:
    ca = base64.b64decode(chart_configuration["webhooks"][0]["clientConfig"]["caBundle"])
    ours = demo_webhook.configuration(ca)
    theirs = copy.deepcopy(chart_configuration)
    theirs["metadata"].pop("labels")
    assert ours == theirs


@pytest.fixture(scope="module")
def demo_served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[demo_webhook.Certificates, RunningWebhook]]:
    certificates = demo_webhook.Certificates.generate()
    cert_dir = certificates.write(tmp_path_factory.mktemp("demo-webhook-tls"))
    served = ChartCertificates(
        cert_dir=cert_dir,
        ca_bundle=certificates.ca,
        server_name=f"{demo_webhook.SERVICE}.{demo_webhook.NAMESPACE}.svc",
        path="/validate-computepools",
    )
    with RunningWebhook(served) as running:
        yield certificates, running


async def test_the_demo_certificates_serve_the_operator_webhook(
    demo_served: tuple[demo_webhook.Certificates, RunningWebhook],
) -> None:
    """The operator serves the webhook with the demo's pair, and the API server's check of it passes."""
    certificates, running = demo_served
    webhooks = _dispatcher(demo_webhook.configuration(certificates.ca), running.server.port)
    assert await webhooks.validate(_attributes("CREATE", VALID)) == []
    with pytest.raises(StatusError):
        await webhooks.validate(_attributes("CREATE", REFUSED))


# ---- The API server's credentials: the admission configuration's kubeconfig.

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


async def test_the_emulated_api_server_presents_its_certificate_and_pools_are_admitted(tmp_path: Path) -> None:
    """As with the chart's webhook.clientAuth on a kubeadm cluster: the webhook requires the client certificate,
    the API server has it from its AdmissionConfiguration, `kubectl apply` works as before."""
    async with (
        serving() as running,
        demo_webhook.serving(running.server, tmp_path, client_auth=True) as webhook,
        running.client() as client,
    ):
        assert webhook.client_auth is not None
        assert (await client.create(POOLS, VALID))["metadata"]["name"] == "valid"
        with pytest.raises(ApiError) as refused:
            await client.create(POOLS, pool_body("no-mig-on-l4", {"accelerator": "L4", "mig": {"profile": "1g.5gb"}}))
        assert refused.value.status == 422
        assert refused.value.message.startswith(f'admission webhook "{demo_webhook.WEBHOOK}" denied the request: ')
        running.server.store.webhooks.kubeconfig = None  # an API server without the admission configuration
        with pytest.raises(ApiError) as failed:
            await client.create(POOLS, pool_body("valid-too", {"accelerator": "H100"}))
        assert failed.value.status == 500
        assert failed.value.message.startswith(
            f'Internal error occurred: failed calling webhook "{demo_webhook.WEBHOOK}": failed to call webhook: Post '
        )


def test_the_admission_configuration_is_read_as_kube_apiserver_reads_it(tmp_path: Path) -> None:
    client = demo_webhook.ClientCertificates.generate()
    admission_file = demo_webhook.authenticate_as(ApiServer(), client, tmp_path / "inline")
    document = yaml.safe_load(admission_file.read_text())
    kubeconfig_file = Path(document["plugins"][0]["configuration"]["kubeConfigFile"])
    assert kubeconfig_file.is_absolute()
    assert read_admission_kubeconfig(admission_file) == yaml.safe_load(kubeconfig_file.read_text())
    # The plugin's configuration in a file of its own, named relative to the AdmissionConfiguration.
    by_path = tmp_path / "by-path"
    by_path.mkdir()
    (by_path / "webhook-admission.yaml").write_text(yaml.safe_dump(document["plugins"][0]["configuration"]))
    (by_path / "admission.yaml").write_text(
        yaml.safe_dump(
            {**document, "plugins": [{"name": "ValidatingAdmissionWebhook", "path": "webhook-admission.yaml"}]}
        )
    )
    assert read_admission_kubeconfig(by_path / "admission.yaml") == read_admission_kubeconfig(admission_file)
    # Other plugins only: every webhook is called anonymously.
    (by_path / "other.yaml").write_text(yaml.safe_dump({**document, "plugins": [{"name": "PodSecurity"}]}))
    assert read_admission_kubeconfig(by_path / "other.yaml") is None


@pytest.mark.parametrize(
    ("configuration", "says"),
    [
        (
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "WebhookAdmissionConfiguration",
                "kubeConfigFile": "kc",
            },
            'kubeConfigFile: Invalid value: "kc": must be an absolute file path',
        ),
        (
            {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "WebhookAdmission", "kubeConfigFile": "/kc"},
            "ValidatingAdmissionWebhook's configuration is not one of apiserver.config.k8s.io/v1 "
            "WebhookAdmissionConfiguration, apiserver.config.k8s.io/v1alpha1 WebhookAdmission",
        ),
    ],
)
def test_an_admission_configuration_kube_apiserver_refuses(
    tmp_path: Path, configuration: dict[str, Any], says: str
) -> None:
    path = tmp_path / "admission.yaml"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "AdmissionConfiguration",
                "plugins": [{"name": "ValidatingAdmissionWebhook", "configuration": configuration}],
            }
        )
    )
    with pytest.raises(AdmissionConfigurationError, match=says):
        read_admission_kubeconfig(path)


def _users(*names: str, current: str | None = None) -> dict[str, Any]:
    kubeconfig: dict[str, Any] = {"users": [{"name": name, "user": {"token": name}} for name in names]}
    if current:
        kubeconfig["contexts"] = [{"name": "c", "context": {"cluster": "x", "user": current}}]
        kubeconfig["current-context"] = "c"
    return kubeconfig


@pytest.mark.parametrize(
    ("names", "current", "target", "chosen"),
    [
        (["w.ns.svc:443", "w.ns.svc", "*.ns.svc", "*"], None, "w.ns.svc:443", "w.ns.svc:443"),  # exact first
        (["w.ns.svc", "*.ns.svc:443", "*"], None, "w.ns.svc:443", "*.ns.svc:443"),  # then *.suffix with the port
        (["w.ns.svc", "*.svc", "*"], None, "w.ns.svc:443", "w.ns.svc"),  # then without port 443
        (["*.svc", "*"], None, "w.ns.svc:443", "*.svc"),
        (["w.ns.svc", "*"], None, "w.ns.svc:8443", "*"),  # another port: the docs' name does not match
        (["w.ns.svc:8443"], None, "w.ns.svc:8443", "w.ns.svc:8443"),
        (["someone"], "someone", "w.ns.svc:443", "someone"),  # the current context's user
        (["someone"], None, "w.ns.svc:443", None),  # anonymous
    ],
)
def test_which_user_calls_which_webhook(names: list[str], current: str | None, target: str, chosen: str | None) -> None:
    """authentication.go defaultAuthenticationInfoResolver.clientConfig, in its order."""
    user = authentication_info(_users(*names, current=current), target)
    assert (user or {}).get("token") == chosen


class Recorder:
    """A TLS webhook that admits everything and notes what each call carried."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.client_ca = demo_webhook.ClientCertificates.generate()
        """The CA whose client certificates the webhook verifies (and notes)."""

    async def handle(self, request: web.Request) -> web.Response:
        review = await request.json()
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        self.calls.append({"authorization": request.headers.get("Authorization"), "peer": peer})
        answer = {"uid": review["request"]["uid"], "allowed": True}
        return web.json_response({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": answer})


@pytest.fixture
async def recorder(tmp_path: Path) -> AsyncIterator[tuple[Recorder, int, demo_webhook.Certificates]]:
    certificates = demo_webhook.Certificates.generate()
    cert_dir = certificates.write(tmp_path / "tls")
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert_dir / "tls.crt", cert_dir / "tls.key")
    context.verify_mode = ssl.CERT_OPTIONAL  # note a certificate when one comes
    recording = Recorder()
    context.load_verify_locations(cadata=recording.client_ca.ca.decode())
    app = web.Application()
    app.router.add_post("/validate-computepools", recording.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    try:
        yield recording, int(runner.addresses[0][1]), certificates
    finally:
        await runner.cleanup()


def _webhooks_with(kubeconfig: dict[str, Any], port: int, certificates: demo_webhook.Certificates) -> Webhooks:
    return _dispatcher_with(demo_webhook.configuration(certificates.ca), port, kubeconfig)


def _dispatcher_with(configuration: dict[str, Any], port: int, kubeconfig: dict[str, Any] | None) -> Webhooks:
    dispatcher = _dispatcher(configuration, port)
    dispatcher.kubeconfig = kubeconfig
    return dispatcher


SERVICE_USER = f"{demo_webhook.SERVICE}.{demo_webhook.NAMESPACE}.svc"


async def test_a_token_and_a_password_are_sent_as_kube_apiserver_sends_them(
    recorder: tuple[Recorder, int, demo_webhook.Certificates], tmp_path: Path
) -> None:
    recording, port, certificates = recorder
    token_file = tmp_path / "token"
    token_file.write_text("from-a-file\n")
    for user, expected in (
        ({"token": "t0k3n"}, "Bearer t0k3n"),
        ({"tokenFile": str(token_file)}, "Bearer from-a-file"),
        ({"username": "apiserver", "password": "s3cret"}, "Basic " + base64.b64encode(b"apiserver:s3cret").decode()),
        ({}, None),
    ):
        kubeconfig = {"users": [{"name": SERVICE_USER, "user": user}]}
        assert await _webhooks_with(kubeconfig, port, certificates).validate(_attributes("CREATE", VALID)) == []
        assert recording.calls[-1]["authorization"] == expected, user
        assert not recording.calls[-1]["peer"]


async def test_a_client_certificate_from_files_or_data(
    recorder: tuple[Recorder, int, demo_webhook.Certificates], tmp_path: Path
) -> None:
    recording, port, certificates = recorder
    client = recording.client_ca.sign("kube-apiserver")
    (tmp_path / "client.crt").write_bytes(client.certificate)
    (tmp_path / "client.key").write_bytes(client.key)
    as_files = {"client-certificate": str(tmp_path / "client.crt"), "client-key": str(tmp_path / "client.key")}
    as_data = demo_webhook.kubeconfig(client)["users"][0]["user"]
    for user in (as_files, as_data):
        kubeconfig = {"users": [{"name": SERVICE_USER, "user": user}]}
        assert await _webhooks_with(kubeconfig, port, certificates).validate(_attributes("CREATE", VALID)) == []
        assert recording.calls[-1]["peer"]["subject"] == ((("commonName", "kube-apiserver"),),)


async def test_credentials_it_cannot_use_fail_the_call(
    recorder: tuple[Recorder, int, demo_webhook.Certificates], tmp_path: Path
) -> None:
    _, port, certificates = recorder
    for user, says in (
        ({"auth-provider": {"name": "gcp"}}, "could not get REST client: auth provider not supported"),
        (
            {"client-certificate": str(tmp_path / "absent.crt"), "client-key": str(tmp_path / "absent.key")},
            "could not get REST client: ",
        ),
    ):
        kubeconfig = {"users": [{"name": SERVICE_USER, "user": user}]}
        with pytest.raises(StatusError) as failed:
            await _webhooks_with(kubeconfig, port, certificates).validate(_attributes("CREATE", VALID))
        assert failed.value.body["message"].startswith(
            f'Internal error occurred: failed calling webhook "{demo_webhook.WEBHOOK}": {says}'
        )


def _docs_block(first_line: str) -> str:
    """The fenced block of docs/install/webhook.md that starts with `first_line`."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "install" / "webhook.md").read_text()
    start = text.index(f"```yaml\n{first_line}\n") + len("```yaml\n")
    return text[start : text.index("```", start)]


async def test_the_docs_admission_configuration_gives_the_webhook_its_certificate(tmp_path: Path) -> None:
    """docs/install/webhook.md, "Securing the webhook": its two files, as kube-apiserver reads them, make the
    emulated API server present the certificate to the chart's webhook (release accelpool in accelpool-system),
    which admits pools."""
    admission = _docs_block("# /etc/kubernetes/admission/admission-configuration.yaml")
    kubeconfig = _docs_block("# /etc/kubernetes/admission/webhook-kubeconfig.yaml")
    client = demo_webhook.ClientCertificates.generate()
    (tmp_path / "accelpool-webhook-client.crt").write_bytes(client.certificate)
    (tmp_path / "accelpool-webhook-client.key").write_bytes(client.key)
    (tmp_path / "admission-configuration.yaml").write_text(
        admission.replace("/etc/kubernetes/admission", str(tmp_path))
    )
    (tmp_path / "webhook-kubeconfig.yaml").write_text(kubeconfig.replace("/etc/kubernetes/admission", str(tmp_path)))
    certificates = demo_webhook.Certificates.generate()
    ca_file = client.write_ca(tmp_path / "client-ca.crt")
    running = await webhook_server.serve(certificates.write(tmp_path / "tls"), 0, host="127.0.0.1", client_ca=ca_file)
    try:
        dispatcher = _dispatcher(demo_webhook.configuration(certificates.ca), running.port)
        dispatcher.kubeconfig = read_admission_kubeconfig(tmp_path / "admission-configuration.yaml")
        assert await dispatcher.validate(_attributes("CREATE", VALID)) == []
    finally:
        await running.close()
