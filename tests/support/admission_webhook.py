"""The whole admission path after the CRD's schema and CEL rules: the operator's webhook, over HTTPS.

`webhook_errors(obj, operation="CREATE", old=None)` (a fixture) sends an AdmissionReview for `obj`
to the operator's real webhook server (`accelpool.runtime.webhook.serve`, what the operator's startup
handler runs) and returns why it is denied: one field error per problem, as `kubectl` prints the
status causes (`spec.mig.profile: Invalid value: "1g.5gb": ...`), empty when it is allowed. Every
answer is also checked the way the API server reads it (the uid echoed, the status 422 Invalid
with a cause per problem, and the status message other clients print, made of the same lines).

The server runs once per test session, in its own thread and event loop (tests, async or not,
call it synchronously), with the certificate `helm template` generates for the chart's default
values: tls.crt and tls.key from the Secret the operator mounts. The client trusts only the
ValidatingWebhookConfiguration's caBundle, checks the certificate against the Service's DNS
name (`<service>.<namespace>.svc`, what the API server dials) and POSTs to the configuration's
path; so each call also proves that the chart's certificate, CA bundle and path fit the server.
Needs helm (`make tools`): skipped without it, failed under REQUIRE_TOOLS=1.

    def test_something(webhook_errors: WebhookErrors) -> None:
        assert webhook_errors(pool({"accelerator": "H100"})) == []
"""

from __future__ import annotations

import asyncio
import base64
import http.client
import json
import socket
import ssl
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import pytest

import accelpool_api as api
from accelpool.admission import review
from accelpool.runtime import webhook
from accelpool_api import validation
from accelpool_core.textio import one_line
from tests.contract.chart import one, render
from tests.support.environment import require_tool

TIMEOUT_SECONDS = 30.0


class WebhookErrors(Protocol):
    def __call__(self, obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> list[str]:
        """Why the webhook denies `operation` of `obj` (from `old` for UPDATE); [] when it allows it."""
        ...


@dataclass(frozen=True)
class ChartCertificates:
    """What the chart gives the operator and the API server, written where the operator reads it."""

    cert_dir: Path
    """tls.crt and tls.key from the chart's Secret (the operator's --webhook-cert-dir)."""
    ca_bundle: bytes
    """The ValidatingWebhookConfiguration's caBundle, decoded (PEM): what the API server trusts."""
    server_name: str
    """The Service's DNS name the API server dials: `<service>.<namespace>.svc`."""
    path: str
    """clientConfig.service.path."""

    @classmethod
    def from_chart(cls, objects: list[dict[str, Any]], cert_dir: Path) -> ChartCertificates:
        deployment = one(objects, "Deployment")
        volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"].get("volumes", [])}
        secret = one(objects, "Secret", volumes["webhook-tls"]["secret"]["secretName"])
        cert_dir.mkdir(parents=True, exist_ok=True)
        for key in (webhook.CERT_FILE, webhook.KEY_FILE):
            (cert_dir / key).write_bytes(base64.b64decode(secret["data"][key]))
        [hook] = one(objects, "ValidatingWebhookConfiguration")["webhooks"]
        service = hook["clientConfig"]["service"]
        return cls(
            cert_dir=cert_dir,
            ca_bundle=base64.b64decode(hook["clientConfig"]["caBundle"]),
            server_name=f"{service['name']}.{service['namespace']}.svc",
            path=service["path"],
        )


@dataclass(frozen=True)
class Answer:
    """The HTTP status and body of one POST to the webhook."""

    status: int
    body: bytes

    def json(self) -> dict[str, Any]:
        loaded: dict[str, Any] = json.loads(self.body)
        return loaded


class RunningWebhook:
    """`accelpool.runtime.webhook.serve` on 127.0.0.1 (a free port) in a thread of its own, and a TLS client for it."""

    def __init__(self, certificates: ChartCertificates) -> None:
        self.certificates = certificates
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="admission webhook", daemon=True)
        self._server: webhook.WebhookServer | None = None

    def __enter__(self) -> RunningWebhook:
        self._thread.start()
        started = asyncio.run_coroutine_threadsafe(
            webhook.serve(self.certificates.cert_dir, 0, host="127.0.0.1"), self._loop
        )
        self._server = started.result(TIMEOUT_SECONDS)
        return self

    def __exit__(self, *_: object) -> None:
        try:
            if self._server is not None:
                asyncio.run_coroutine_threadsafe(self._server.close(), self._loop).result(TIMEOUT_SECONDS)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT_SECONDS)
            self._loop.close()

    @property
    def server(self) -> webhook.WebhookServer:
        assert self._server is not None, "not started"
        return self._server

    def client_context(self) -> ssl.SSLContext:
        """What the API server does: trust the caBundle alone, check the name it dials."""
        return ssl.create_default_context(cadata=self.certificates.ca_bundle.decode("ascii"))

    def connect(self, server_name: str | None = None) -> ssl.SSLSocket:
        raw = socket.create_connection(("127.0.0.1", self.server.port), timeout=TIMEOUT_SECONDS)
        try:
            return self.client_context().wrap_socket(raw, server_hostname=server_name or self.certificates.server_name)
        except BaseException:
            raw.close()
            raise

    def post(self, body: bytes, path: str | None = None) -> Answer:
        connection = http.client.HTTPConnection(self.certificates.server_name, 443, timeout=TIMEOUT_SECONDS)
        connection.sock = self.connect()
        try:
            connection.request(
                "POST", path or self.certificates.path, body=body, headers={"Content-Type": "application/json"}
            )
            response = connection.getresponse()
            return Answer(response.status, response.read())
        finally:
            connection.close()

    def review(self, obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> Any:
        """The AdmissionReview's `response` for `operation` of `obj`, checked as the API server reads it."""
        uid = str(uuid.uuid4())
        request: dict[str, Any] = {
            "uid": uid,
            "kind": {"group": "accelpool.io", "version": "v1alpha1", "kind": "ComputePool"},
            "resource": {"group": "accelpool.io", "version": "v1alpha1", "resource": "computepools"},
            "name": (obj.get("metadata") or {}).get("name", ""),
            "operation": operation,
            "userInfo": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
            "object": obj,
            "oldObject": old,
            "dryRun": False,
        }
        document = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        answer = self.post(json.dumps(document).encode())
        assert answer.status == 200, answer
        reply = answer.json()
        assert (reply["apiVersion"], reply["kind"]) == ("admission.k8s.io/v1", "AdmissionReview"), reply
        response = reply["response"]
        assert response["uid"] == uid, response
        return response

    def errors(self, obj: dict[str, Any], operation: str = "CREATE", old: dict[str, Any] | None = None) -> list[str]:
        response = self.review(obj, operation, old)
        if response["allowed"]:
            assert "status" not in response, response
            return []
        status = response["status"]
        assert (status["code"], status["reason"]) == (422, "Invalid"), status
        problems = [f"{cause['field']}: {cause['message']}" for cause in status["details"]["causes"]]
        shown = [one_line(problem, review.PROBLEM_CHARS) for problem in problems]
        assert problems and status["message"] == validation.listed(shown), status
        assert (status["details"]["kind"], status["details"]["name"]) == (api.KIND, obj["metadata"]["name"]), status
        return shown


@pytest.fixture(scope="session")
def admission_webhook(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningWebhook]:
    """The operator's webhook server with the certificate of a default `helm template` render."""
    objects = render(require_tool("helm"))
    certificates = ChartCertificates.from_chart(objects, tmp_path_factory.mktemp("webhook-tls"))
    with RunningWebhook(certificates) as running:
        yield running


@pytest.fixture(scope="session")
def webhook_errors(admission_webhook: RunningWebhook) -> WebhookErrors:
    """`webhook_errors(obj, operation="CREATE", old=None) -> list[str]` (see the module docstring)."""
    return admission_webhook.errors
