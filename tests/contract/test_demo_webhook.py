"""Admission the way a cluster does it: the chart's ValidatingWebhookConfiguration, called over HTTPS by
the emulated API server's dispatcher (accelpool_demo.apiserver.webhooks), reaching the operator's real
webhook server; and the demo installing the same configuration as the chart (accelpool_demo.webhook).

A refusal must read as a real API server's: a 422 Status of the same shape as the recorded v1.36.2
server's refusals of invalid custom objects (../shared/fidelity/kubernetes/crd-admission-and-apply.yaml),
its message prefixed as statuserror.go ToStatusErr prefixes a webhook's.
"""

from __future__ import annotations

import base64
import copy
import socket
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from accelpool import api
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver.resources import StatusError
from accelpool_demo.apiserver.webhooks import Attributes, Webhooks, denied
from tests.admission_webhook import ChartCertificates, RunningWebhook
from tests.cases import pool
from tests.conftest import require_shared
from tests.contract.chart import one, render

pytestmark = pytest.mark.contract
REFUSED = pool({"accelerator": "H100", "mig": {"profile": "9g.99gb"}}, name="refused")
VALID = pool({"accelerator": "H100"}, name="valid")


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
