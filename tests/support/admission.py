"""What a Kubernetes API server with the chart installed answers to `kubectl apply` of a ComputePool.

It is asked, not modelled: the emulated API server (held to a real kube-apiserver by tests/conformance)
admits the object by accelpool's CRD (decoding, defaults, schema, CEL) and then calls the operator's real
webhook over HTTPS through the chart's ValidatingWebhookConfiguration (`accelpool_demo.webhook`). Both run
once per test session on an event loop of their own, so tests, async or not, call `create` synchronously.
Each create is a dry run (`dryRun=All`): nothing is stored, so any name can be sent again.

The answer is read as kubectl reads it: a 400 is a decoding refusal (`unknown field "spec.gpus"`), a 422
from the webhook (`admission webhook "..." denied the request: ...`) is the webhook's, any other 422 the
schema's or the CEL rules'; the field errors are the Status causes, `field: message`.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import pytest

import accelpool_api as api
from accelpool.admission.review import PROBLEM_CHARS
from accelpool_api import as_sent
from accelpool_core.textio import one_line
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver import serving

Stage = Literal["decode", "schema", "webhook"]
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
TIMEOUT_SECONDS = 60.0
_WARNING = re.compile(r'^299 - "(.*)"$')


@dataclass
class Answer:
    """The server's verdict: which stage refused the object, with which field errors."""

    stage: Stage | None = None
    errors: list[str] = field(default_factory=list)
    stored: dict[str, Any] | None = None
    """What a create would store (the dry run's answer), when accepted."""
    warnings: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.stage is None


class Create(Protocol):
    def __call__(self, obj: dict[str, Any], field_validation: Literal["Strict", "Warn", "Ignore"] = "Strict") -> Answer:
        """What creating `obj` gets: `kubectl apply` sends fieldValidation=Strict, most other clients do not."""
        ...


def read_answer(status: int, body: dict[str, Any], warnings: list[str]) -> Answer:
    """A create's HTTP answer as kubectl shows it."""
    if status in (200, 201):
        return Answer(None, [], body, warnings)
    message = str(body.get("message", ""))
    if status == 400:
        _, _, found = message.partition("strict decoding error: ")
        fields = re.split(r', (?=(?:unknown|duplicate) field ")', found) if found else [message]
        return Answer("decode", fields, None, warnings)
    assert status == 422, (status, body)
    causes = [
        f"{cause.get('field', '<nil>')}: {cause['message']}"
        for cause in (body.get("details") or {}).get("causes") or []
    ]
    if message.startswith("admission webhook "):  # the webhook writes each problem on one line, as the CLI
        return Answer("webhook", [one_line(cause, PROBLEM_CHARS) for cause in causes] or [message], None, warnings)
    return Answer("schema", causes or [message], None, warnings)


class AdmittingServer:
    """The emulated API server with the operator's webhook installed, on a loop in a thread of its own."""

    def __init__(self, cert_dir: Path) -> None:
        self._cert_dir = cert_dir
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="emulated API server", daemon=True)
        self._stop: asyncio.Event | None = None
        self._done: Any = None
        self.url = ""

    async def _serve(self, ready: asyncio.Future[str]) -> None:
        self._stop = asyncio.Event()
        async with serving() as running, demo_webhook.serving(running.server, self._cert_dir):
            ready.set_result(running.url)
            await self._stop.wait()

    def __enter__(self) -> AdmittingServer:
        self._thread.start()

        async def start() -> str:
            ready: asyncio.Future[str] = self._loop.create_future()
            self._done = asyncio.ensure_future(self._serve(ready))
            return await ready

        self.url = asyncio.run_coroutine_threadsafe(start(), self._loop).result(TIMEOUT_SECONDS)
        return self

    def __exit__(self, *_: object) -> None:
        try:
            if self._stop is not None:
                self._loop.call_soon_threadsafe(self._stop.set)
                asyncio.run_coroutine_threadsafe(asyncio.wait_for(self._done, TIMEOUT_SECONDS), self._loop).result()
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(TIMEOUT_SECONDS)
            self._loop.close()

    def create(self, obj: dict[str, Any], field_validation: Literal["Strict", "Warn", "Ignore"] = "Strict") -> Answer:
        address = urlsplit(self.url)
        connection = http.client.HTTPConnection(address.hostname or "127.0.0.1", address.port, timeout=TIMEOUT_SECONDS)
        try:
            connection.request(
                "POST",
                f"{POOLS}?dryRun=All&fieldValidation={field_validation}",
                body=json.dumps(as_sent(obj)),
                headers={"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            body = json.loads(response.read() or b"{}")
            said = [
                m.group(1).encode().decode("unicode_escape")
                for m in map(_WARNING.match, response.headers.get_all("Warning") or [])
                if m
            ]
            return read_answer(response.status, body, said)
        finally:
            connection.close()


@pytest.fixture(scope="session")
def api_server_create(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Create]:
    """`api_server_create(obj, field_validation="Strict") -> Answer` (see the module docstring)."""
    with AdmittingServer(tmp_path_factory.mktemp("webhook-tls")) as server:
        yield server.create
