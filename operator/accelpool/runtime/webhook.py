"""The HTTPS server of the ComputePool validating admission webhook, served from the operator's event loop.

How it works and why: docs/design/webhook.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
from collections.abc import Awaitable, Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web
from aiohttp.typedefs import Middleware

from accelpool.admission import review
from accelpool_core.textio import one_line

PATH = "/validate-computepools"
"""The URL path the chart's ValidatingWebhookConfiguration calls."""
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
MAX_REVIEW_BYTES = 4 * 1024 * 1024
"""A larger request is refused (413) unread. An AdmissionReview carries the object and the old
one, each at most etcd's 1.5 MiB request limit; a real ComputePool is a few kB."""
MAX_CONCURRENT_REVIEWS = 2
"""Reviews validated at once, each in its own worker thread."""
MAX_WAITING_REVIEWS = 8
"""Reviews that wait for a worker, in arrival order; more get a 429 at once. A client that sends one
review after another holds at most one place, so the API server's call waits behind a few cheap
reviews (the work on each is bounded: `validate_object(limit=...)`) instead of being refused."""
MAX_REVIEW_FIELDS = 10_000
"""Fields (mapping keys and list items, at any depth) an AdmissionReview may hold. A ComputePool has about a
hundred; the API server prunes unknown fields before it calls a webhook, so only a client other than
the API server sends more, and its review is refused before it costs a validation."""
RETRY_AFTER_SECONDS = 1
LOG_CHARS = 2000
"""A denial's log line is cut to this many characters."""
RELOAD_SECONDS = 60.0

log = logging.getLogger("accelpool.runtime.webhook")


PEM_CERTIFICATE = b"-----BEGIN CERTIFICATE-----"
CLIENT_CA_HINT = (
    "The chart mounts the CA at /etc/accelpool/webhook-client/ca.crt when webhook.clientAuth.enabled=true "
    "(from webhook.clientAuth.caBundle, the Secret webhook.clientAuth.caSecretName, or the CA Helm generates); "
    "elsewhere, point --webhook-client-ca (ACCELPOOL_WEBHOOK_CLIENT_CA) at a PEM file of the CA certificates "
    "that sign the API server's webhook client certificate, or leave it empty for no client authentication"
)


class CertificateError(Exception):
    """The serving certificate or key, or the client CA, cannot be read; the message says where and what to set."""


@dataclass(frozen=True)
class ClientAuth:
    """Who may call the webhook: a client certificate signed by a CA in `ca_file` (PEM) and, when
    `names` is not empty, naming one of them as its subject CN or a DNS subjectAltName."""

    ca_file: Path
    names: frozenset[str] = frozenset()

    @classmethod
    def of(cls, ca_file: str | Path | None, names: Collection[str] = ()) -> ClientAuth | None:
        """From `--webhook-client-ca` and `--webhook-client-names`; None (anyone may call) without a CA."""
        wanted = frozenset(name.strip() for name in names if name.strip())
        if not ca_file:
            if wanted:
                raise CertificateError(
                    f"--webhook-client-names ({', '.join(sorted(wanted))}) needs --webhook-client-ca "
                    "(ACCELPOOL_WEBHOOK_CLIENT_CA): names are checked on client certificates, which the "
                    f"webhook asks for only with a CA to verify them. {CLIENT_CA_HINT}"
                )
            return None
        return cls(Path(ca_file), wanted)

    def allows(self, peer: Mapping[str, Any] | None) -> bool:
        return not self.names or bool(self.names & set(certificate_names(peer)))


def certificate_names(peer: Mapping[str, Any] | None) -> list[str]:
    """The subject CNs and DNS subjectAltNames of a verified peer certificate (`SSLSocket.getpeercert()`)."""
    if not peer:
        return []
    common = [value for rdn in peer.get("subject", ()) for key, value in rdn if key == "commonName"]
    dns = [value for kind, value in peer.get("subjectAltName", ()) if kind == "DNS"]
    return [*common, *dns]


def tls_context(
    cert_dir: str | Path, *, client_ca: str | Path | None = None, client_names: Collection[str] = ()
) -> ssl.SSLContext:
    """A server TLS context with `cert_dir`'s tls.crt and tls.key (TLS 1.2 or later), requiring client
    certificates from `client_ca` when given (`ClientAuth.of`)."""
    context = _server_context()
    _load(context, Path(cert_dir))
    auth = ClientAuth.of(client_ca, client_names)
    if auth is not None:
        _load_client_ca(context, auth.ca_file)
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


def _read_client_ca(path: Path) -> bytes:
    """The CA file's bytes once OpenSSL has accepted them and found a CA among them."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise CertificateError(
            f"cannot read the webhook client CA file {path}: {error.strerror or error}. {CLIENT_CA_HINT}"
        ) from error
    if PEM_CERTIFICATE not in data:
        raise CertificateError(
            f"the webhook client CA file {path} holds no PEM certificate ({PEM_CERTIFICATE.decode()}). {CLIENT_CA_HINT}"
        )
    probe = _server_context()
    try:
        probe.load_verify_locations(cadata=data.decode("ascii"))
    except (ssl.SSLError, UnicodeDecodeError, ValueError) as error:
        raise CertificateError(
            f"the webhook client CA file {path} is not PEM certificates OpenSSL can load: {error}. {CLIENT_CA_HINT}"
        ) from error
    if not probe.cert_store_stats()["x509_ca"]:
        raise CertificateError(
            f"the webhook client CA file {path} holds no CA certificate (basicConstraints CA:TRUE): is it the "
            f"client certificate (tls.crt) instead of the CA that signed it (ca.crt)? {CLIENT_CA_HINT}"
        )
    return data


def _load_client_ca(context: ssl.SSLContext, path: Path) -> bytes:
    """Trust the CA file's certificates for client certificates, and require one from every client."""
    data = _read_client_ca(path)
    context.load_verify_locations(cadata=data.decode("ascii"))
    context.verify_mode = ssl.CERT_REQUIRED
    return data


@dataclass
class WebhookServer:
    """A running webhook: its port, and the certificate pair it serves (reloaded when changed)."""

    runner: web.AppRunner
    context: ssl.SSLContext
    cert_dir: Path
    port: int
    loaded: tuple[bytes, bytes]
    client_auth: ClientAuth | None = None
    client_ca_loaded: bytes = b""
    reloader: asyncio.Task[None] | None = field(default=None, repr=False)

    def reload(self) -> bool:
        """Load the pair (and the client CA file) again if its files changed; True when new connections
        get a new pair or trust a new CA.

        A pair that does not load (read while the Secret is being swapped) is tried again at the
        next tick; the previous pair is served meanwhile. So is a client CA file that does not load.
        """
        pair = self._reload_pair()
        client_ca = self._reload_client_ca()
        return pair or client_ca

    def _reload_client_ca(self) -> bool:
        if self.client_auth is None:
            return False
        path = self.client_auth.ca_file
        try:
            if path.read_bytes() == self.client_ca_loaded:
                return False
            self.client_ca_loaded = _load_client_ca(self.context, path)
        except (OSError, CertificateError) as error:
            log.warning("webhook client CA not reloaded, still trusting the previous one: %s", error)
            return False
        log.info(
            "webhook client CA reloaded from %s: its certificates are trusted now; a CA removed from the file "
            "stays trusted until the operator restarts",
            path,
        )
        return True

    def _reload_pair(self) -> bool:
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


@dataclass(frozen=True)
class Answer:
    """What the server sends back: an HTTP status, a body, its content type."""

    status: int
    body: bytes
    content_type: str = "text/plain"


def answer(body: bytes) -> Answer:
    """The answer to one request body: decode, review, encode (runs in a worker thread)."""
    try:
        document = json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        return Answer(400, f"the request body is not JSON: {error}".encode())
    if not within_fields(document, MAX_REVIEW_FIELDS):
        return Answer(
            400,
            f"the AdmissionReview holds more than {MAX_REVIEW_FIELDS} fields (MAX_REVIEW_FIELDS); the API server"
            " prunes unknown fields before it calls this webhook".encode(),
        )
    try:
        reviewed = review.review(document)
    except review.MalformedReview as error:
        return Answer(400, f"not an AdmissionReview this webhook answers: {error}".encode())
    response = reviewed["response"]
    if not response["allowed"]:
        request_ = document["request"]
        log.info(
            "denied %s of ComputePool %s%s: %s",
            request_["operation"],
            request_.get("name") or response["status"]["details"]["name"],
            " (dry run)" if request_.get("dryRun") else "",
            one_line(response["status"]["message"], LOG_CHARS),
        )
    return Answer(200, json.dumps(reviewed).encode(), "application/json")


def within_fields(document: Any, most: int) -> bool:
    """Whether `document` (decoded JSON) holds at most `most` fields; stops counting past `most`."""
    count, stack = 0, [document]
    while stack:
        item = stack.pop()
        values = item.values() if isinstance(item, dict) else item if isinstance(item, list) else ()
        count += len(values)
        if count > most:
            return False
        stack.extend(value for value in values if isinstance(value, dict | list))
    return True


class Reviewer:
    """Answers requests in `workers` threads of its own, `waiting` more queued; past that, `None` at once.

    A request that finds every worker busy and the queue full is answered 429 straight away. A
    request keeps its place until its review is done, even when the client has gone, so a client
    that disconnects cannot start more work than `workers` nor hold more bodies than the queue.
    """

    def __init__(self, workers: int = MAX_CONCURRENT_REVIEWS, waiting: int = MAX_WAITING_REVIEWS) -> None:
        self.workers = workers
        self.waiting = waiting
        self.admitted = 0
        self._slots = asyncio.Semaphore(workers)
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="accelpool-webhook")

    async def __call__(self, body: bytes) -> Answer | None:
        if self.admitted >= self.workers + self.waiting:
            return None
        self.admitted += 1
        try:
            await self._slots.acquire()
        except BaseException:
            self.admitted -= 1
            raise
        future = asyncio.get_running_loop().run_in_executor(self._executor, answer, body)
        future.add_done_callback(self._done)
        return await asyncio.shield(future)

    def _done(self, _: asyncio.Future[Answer]) -> None:
        self._slots.release()
        self.admitted -= 1

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


def _too_large() -> web.Response:
    return web.Response(
        status=413,
        text=f"the AdmissionReview is larger than the {MAX_REVIEW_BYTES} bytes (MAX_REVIEW_BYTES) this webhook reads",
    )


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _names_checked(auth: ClientAuth) -> Middleware:
    """A middleware answering 403 to a client whose (CA-verified) certificate names none of `auth.names`."""

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") if request.transport is not None else None
        if auth.allows(peer):
            return await handler(request)
        presented = ", ".join(certificate_names(peer)) or "no subject CN or DNS name"
        log.warning("refused a webhook call from a client certificate naming %s", one_line(presented, LOG_CHARS))
        return web.Response(
            status=403,
            text=(
                f"the client certificate names {presented}, none of the names this webhook accepts "
                f"(--webhook-client-names: {', '.join(sorted(auth.names))})"
            ),
        )

    return check


def application(reviewer: Reviewer | None = None, client_auth: ClientAuth | None = None) -> web.Application:
    reviewer = reviewer or Reviewer()

    async def handle(request: web.Request) -> web.Response:
        if request.content_length is not None and request.content_length > MAX_REVIEW_BYTES:
            return _too_large()  # refused before reading a byte of it
        try:
            body = await request.read()
        except web.HTTPRequestEntityTooLarge:  # a chunked body that grew past the limit
            return _too_large()
        done = await reviewer(body)
        if done is None:
            return web.Response(
                status=429,
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                text=(
                    f"busy: {reviewer.workers} AdmissionReviews are being validated and {reviewer.waiting} wait;"
                    " try again"
                ),
            )
        return web.Response(status=done.status, body=done.body, content_type=done.content_type)

    async def close(_: web.Application) -> None:
        reviewer.close()

    middlewares = [_names_checked(client_auth)] if client_auth is not None and client_auth.names else []
    app = web.Application(client_max_size=MAX_REVIEW_BYTES, middlewares=middlewares)
    app.router.add_post(PATH, handle)
    app.on_cleanup.append(close)
    return app


async def serve(
    cert_dir: str | Path,
    port: int,
    *,
    host: str | None = None,
    reload_seconds: float = RELOAD_SECONDS,
    workers: int = MAX_CONCURRENT_REVIEWS,
    client_ca: str | Path | None = None,
    client_names: Collection[str] = (),
) -> WebhookServer:
    """Listen on host:port (all interfaces when host is None; port 0: any free port) over TLS; with
    `client_ca`, only to clients presenting a certificate it signed (named in `client_names`, if any).

    Raises `CertificateError` before listening when the certificate files or the client CA file
    are missing or bad. The caller closes the returned server.
    """
    context = _server_context()
    loaded = _load(context, Path(cert_dir))
    auth = ClientAuth.of(client_ca, client_names)
    client_ca_loaded = _load_client_ca(context, auth.ca_file) if auth is not None else b""
    runner = web.AppRunner(application(Reviewer(workers), auth), access_log=None)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port, ssl_context=context)
        await site.start()
    except BaseException:
        await runner.cleanup()
        raise
    bound = int(runner.addresses[0][1])
    webhook = WebhookServer(runner, context, Path(cert_dir), bound, loaded, auth, client_ca_loaded)
    webhook.reloader = asyncio.create_task(webhook._reload_every(reload_seconds), name="accelpool webhook reloader")
    log.info(
        "ComputePool admission webhook listening on https://%s:%s%s%s",
        host or "*",
        bound,
        PATH,
        ""
        if auth is None
        else f", for clients with a certificate from {auth.ca_file}"
        + (f" naming {', '.join(sorted(auth.names))}" if auth.names else ""),
    )
    return webhook
