"""The HTTPS server of the ComputePool validating admission webhook, on the operator's event loop.

`serve(cert_dir, port)` listens on `port` (all interfaces) with the serving certificate from
`cert_dir` (`tls.crt`, `tls.key`: the Secret the chart mounts) and answers POSTs to `PATH` with
`admission.review`: exactly the check `accelpool validate` runs. The operator's startup handler
starts it when `--webhook-port` is not 0, and `tls_context` refuses to start without readable
certificate files, naming the path and the chart values. Every minute (`reload_seconds`) the
files are read again and a changed pair is loaded for new connections, so a certificate that
cert-manager renews (or a Secret someone replaces) is served without a restart.

A small aiohttp app rather than kopf's admission support (`@kopf.on.validate` served by
`kopf.WebhookServer`), because of how kopf 1.45 shapes a webhook:

- a denial from `kopf.AdmissionError` is `status: {message, code}` only: no `reason: Invalid`
  (kubectl then prints "Error from server:" instead of "Error from server (Invalid):") and no
  per-field causes; here the whole metav1.Status comes from `admission.denial_status`;
- kopf routes by handler id in the URL path and resolves the request's resource against its scan
  of the cluster's API resources, listening only once that scan is done, so its serving path
  runs only inside a whole operator connected to an API server; this one is a function the
  tests start on their own, with the certificates the chart generates;
- a registered `@kopf.on.validate` handler makes kopf refuse to start without a webhook server,
  so `--webhook-port=0` would need a handler registered or not at import time.

Either way the webhook is answered on every replica, a kopf peering standby included: kopf runs
the startup activities (which start this server) on every replica and pauses only the resource
handling (the watch streams) of a standby. The webhook reads nothing from the cluster, so a standby's
answer is as good as the active operator's.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from accelpool import admission

PATH = "/validate-computepools"
"""The URL path the chart's ValidatingWebhookConfiguration calls."""
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
MAX_REVIEW_BYTES = 8 * 1024 * 1024
"""An AdmissionReview carries the object and the old one; a ComputePool is far smaller."""
RELOAD_SECONDS = 60.0

log = logging.getLogger("accelpool.webhook")


class CertificateError(Exception):
    """The serving certificate or key cannot be read; the message says where and what to set."""


def tls_context(cert_dir: str | Path) -> ssl.SSLContext:
    """A server TLS context with `cert_dir`'s tls.crt and tls.key (TLS 1.2 or later)."""
    context = _server_context()
    _load(context, Path(cert_dir))
    return context


def _server_context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context


def _load(context: ssl.SSLContext, cert_dir: Path) -> tuple[bytes, bytes]:
    """Load the pair into `context`; return the bytes loaded (to notice a change later)."""
    cert, key = cert_dir / CERT_FILE, cert_dir / KEY_FILE
    for path in (cert, key):
        if not path.is_file():
            raise CertificateError(
                f"webhook certificate file {path} not found. The chart mounts the Secret with tls.crt and "
                f"tls.key at {cert_dir} when webhook.enabled=true (Helm generates the certificate, or "
                "cert-manager issues it with webhook.certManager.enabled=true); elsewhere, point "
                "--webhook-cert-dir (ACCELPOOL_WEBHOOK_CERT_DIR) at such a directory, or turn the "
                "webhook off with --webhook-port=0 (chart: webhook.enabled=false)"
            )
    try:
        loaded = cert.read_bytes(), key.read_bytes()
        context.load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise CertificateError(f"cannot load the webhook certificate {cert} with key {key}: {error}") from error
    return loaded


@dataclass
class WebhookServer:
    """A running webhook: its port, and the certificate pair it serves (reloaded when changed)."""

    runner: web.AppRunner
    context: ssl.SSLContext
    cert_dir: Path
    port: int
    loaded: tuple[bytes, bytes]
    reloader: asyncio.Task[None] | None = field(default=None, repr=False)

    def reload(self) -> bool:
        """Load the pair again if its files changed; True when new connections get a new pair.

        A pair that does not load (read while the Secret is being swapped) is tried again at the
        next tick; the previous pair is served meanwhile.
        """
        cert, key = self.cert_dir / CERT_FILE, self.cert_dir / KEY_FILE
        try:
            if (cert.read_bytes(), key.read_bytes()) == self.loaded:
                return False
            self.loaded = _load(self.context, self.cert_dir)
        except (OSError, CertificateError) as error:
            log.warning("webhook certificate not reloaded, still serving the previous one: %s", error)
            return False
        log.info("webhook certificate reloaded from %s", self.cert_dir)
        return True

    async def _reload_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self.reload()

    async def close(self) -> None:
        if self.reloader is not None:
            self.reloader.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.reloader
        await self.runner.cleanup()


async def _handle(request: web.Request) -> web.Response:
    try:
        document = json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return web.Response(status=400, text=f"the request body is not JSON: {error}")
    try:
        answer = admission.review(document)
    except admission.MalformedReview as error:
        return web.Response(status=400, text=f"not an AdmissionReview this webhook answers: {error}")
    response = answer["response"]
    if not response["allowed"]:
        request_ = document["request"]
        log.info(
            "denied %s of ComputePool %s%s: %s",
            request_["operation"],
            request_.get("name") or response["status"]["details"]["name"],
            " (dry run)" if request_.get("dryRun") else "",
            response["status"]["message"],
        )
    return web.json_response(answer)


def application() -> web.Application:
    app = web.Application(client_max_size=MAX_REVIEW_BYTES)
    app.router.add_post(PATH, _handle)
    return app


async def serve(
    cert_dir: str | Path,
    port: int,
    *,
    host: str | None = None,
    reload_seconds: float = RELOAD_SECONDS,
) -> WebhookServer:
    """Listen on host:port (all interfaces when host is None; port 0: any free port) over TLS.

    Raises `CertificateError` before listening when the certificate files are missing or bad.
    The caller closes the returned server.
    """
    context = _server_context()
    loaded = _load(context, Path(cert_dir))
    runner = web.AppRunner(application(), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = int(runner.addresses[0][1])
    webhook = WebhookServer(runner, context, Path(cert_dir), bound, loaded)
    webhook.reloader = asyncio.create_task(webhook._reload_every(reload_seconds), name="accelpool webhook reloader")
    log.info("ComputePool admission webhook listening on https://%s:%s%s", host or "*", bound, PATH)
    return webhook
