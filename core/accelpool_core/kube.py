"""A small asynchronous Kubernetes API client: the only place accelpool speaks HTTP to the API server.

Used by the operator's handlers (nodes, ConfigMaps, DaemonSets, Events, Karpenter NodePools)
and by the device agent's reporter (its node's status and annotations) and node watch. It knows
just enough of the API: JSON requests, merge/strategic/JSON patches, server-side apply (`apply`),
label and field selectors on lists, watch streams (`watch`), conflicts as `ConflictError`, an
expired resourceVersion as `GoneError`, and credentials from a kubeconfig, the in-cluster
service account, or a plain server URL.

Credentials are handled as client-go handles them: a token from a file (the pod's rotating
ServiceAccount token, a kubeconfig's `tokenFile`) is re-read while the client runs, and
certificates and keys embedded in a kubeconfig stay in memory (nothing is left on disk).
`token_refresh_time` tells a holder of a token (kopf's login handler) when to read it again.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import json
import os
import ssl
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import aiohttp
import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
PatchType = Literal["merge", "strategic", "json"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
"""Server-side apply. JSON is YAML, so the body is sent as JSON (as client-go's Apply does)."""
USER_AGENT = "accelpool"
JsonObject = dict[str, Any]


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        method: str = "",
        path: str = "",
        causes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes
        """The Status's `details.causes` as (type, message): an eviction's `DisruptionBudget` cause names its budget."""
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())


class NotFoundError(ApiError):
    """404: the object (or its resource) does not exist."""


class ConflictError(ApiError):
    """409: a stale resourceVersion, or the object already exists."""


class GoneError(ApiError):
    """410: the resourceVersion a watch asked for is older than the server keeps: list again."""


WATCH_READ_MARGIN_SECONDS = 30.0
"""How long past its `timeoutSeconds` a watch may stay silent before the client gives up on it."""


TOKEN_REREAD_SECONDS = 60.0
"""How long a token read from a file is used before the file is read again: client-go's
`transport.NewCachedFileTokenSource` (k8s.io/client-go transport/token_source.go), which
`rest.InClusterConfig` (rest/config.go, through `BearerTokenFile`) uses for the pod's token."""
TOKEN_REFRESH_FRACTION = 0.9
"""How far into a bound token's validity a holder asks for it again: the kubelet writes the
rotated token into the pod at 80% of its lifetime, so at 90% the file holds the new one."""


class FileToken:
    """A bearer token in a file that is replaced while the process runs: bound ServiceAccount tokens
    are rotated by the kubelet. Read as client-go reads one (transport/token_source.go): the value is
    kept for `TOKEN_REREAD_SECONDS`, then the file is read again; a 401 answer to a request sent with
    an older read makes the next request read it at once (`reset_older_than`). A read that fails,
    or finds the file empty, keeps the last good token; only the first read's failure is raised."""

    def __init__(
        self, path: str | Path, *, period: float = TOKEN_REREAD_SECONDS, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.path = Path(path)
        self._period = period
        self._clock = clock
        self._token: str | None = None
        self._read_at = 0.0

    def value(self) -> str:
        now = self._clock()
        if self._token is not None and now - self._read_at < self._period:
            return self._token
        try:
            token = self.path.read_text().strip()
            if not token:
                raise OSError(f"{self.path}: empty token file")
        except OSError:
            if self._token is None:
                raise
            return self._token
        self._token, self._read_at = token, now
        return token

    def reset_older_than(self, instant: float) -> None:
        """Forget a token read before `instant` (on the clock this was built with)."""
        if self._read_at < instant:
            self._token = None

    def now(self) -> float:
        """The time on this token's clock: what a request notes before it is sent, for `reset_older_than`."""
        return self._clock()


def token_refresh_time(token: str, now: datetime.datetime) -> datetime.datetime | None:
    """When a holder of `token` should read it again, from its JWT claims (unverified: only the times are
    read): 90% into its validity (`exp`, or `kubernetes.io.warnafter` for a token whose expiry the API
    server extended), but no sooner than `TOKEN_REREAD_SECONDS` from `now`. None for a token with no
    expiry (a static token, a legacy Secret's token, anything that is not a JWT). Pure."""
    claims = _jwt_claims(token)
    expiry = claims.get("exp")
    if not isinstance(expiry, int | float):
        return None
    kubernetes = claims.get("kubernetes.io")
    warn_after = kubernetes.get("warnafter") if isinstance(kubernetes, dict) else None
    end = float(warn_after) if isinstance(warn_after, int | float) else float(expiry)
    issued = claims.get("iat")
    start = float(issued) if isinstance(issued, int | float) and issued < end else end
    planned = datetime.datetime.fromtimestamp(start + TOKEN_REFRESH_FRACTION * (end - start), tz=datetime.UTC)
    return max(planned, now + datetime.timedelta(seconds=TOKEN_REREAD_SECONDS))


def _jwt_claims(token: str) -> dict[str, Any]:
    parts = token.split(".")
    if len(parts) != 3:
        return {}
    try:
        claims = json.loads(base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4)))
    except (ValueError, UnicodeDecodeError):
        return {}
    return claims if isinstance(claims, dict) else {}


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate; built from a kubeconfig or the pod's account.

    A token is either `token` (fixed) or `token_file` (re-read, see `FileToken`). Certificates and
    keys are either a file's path (`*_path`) or PEM held in memory (`*_data`, from a kubeconfig's
    `*-data`): never both, and nothing is written to disk when credentials are discovered."""

    server: str
    token: str | None = None
    token_file: str | None = None
    ca_path: str | None = None
    ca_data: bytes | None = None
    client_cert_path: str | None = None
    client_cert_data: bytes | None = None
    client_key_path: str | None = None
    client_key_data: bytes | None = None
    insecure: bool = False

    @classmethod
    def in_cluster(cls) -> Credentials:
        """The pod's ServiceAccount: the API server's Service, its CA, and its token file (re-read)."""
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        host = f"[{host}]" if ":" in host else host
        return cls(
            server=f"https://{host}:{port}",
            token_file=str(SERVICE_ACCOUNT_DIR / "token"),
            ca_path=str(SERVICE_ACCOUNT_DIR / "ca.crt"),
        )

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> Credentials:
        """The context's cluster and user; as in client-go, a `*-data` field wins over its file."""
        config_path = Path(path or os.environ.get("KUBECONFIG", "").split(os.pathsep)[0] or "~/.kube/config")
        config = yaml.safe_load(config_path.expanduser().read_text()) or {}
        context_name = context or config.get("current-context")
        contexts = {c["name"]: c["context"] for c in config.get("contexts") or []}
        clusters = {c["name"]: c["cluster"] for c in config.get("clusters") or []}
        users = {u["name"]: u.get("user") or {} for u in config.get("users") or []}
        if context_name not in contexts:
            raise ValueError(f"kubeconfig {config_path}: context {context_name!r} not found")
        ctx = contexts[context_name]
        cluster = clusters[ctx["cluster"]]
        user = users.get(ctx.get("user", ""), {})
        ca_path, ca_data = _pem(cluster, "certificate-authority")
        cert_path, cert_data = _pem(user, "client-certificate")
        key_path, key_data = _pem(user, "client-key")
        return cls(
            server=cluster["server"].rstrip("/"),
            token=user.get("token"),
            token_file=None if user.get("token") else user.get("tokenFile"),
            ca_path=ca_path,
            ca_data=ca_data,
            client_cert_path=cert_path,
            client_cert_data=cert_data,
            client_key_path=key_path,
            client_key_data=key_data,
            insecure=bool(cluster.get("insecure-skip-tls-verify", False)),
        )

    @classmethod
    def discover(cls, kubeconfig: str | None = None, server: str | None = None) -> Credentials:
        """An explicit server URL, else an explicit kubeconfig, else in-cluster, else ~/.kube/config."""
        if server:
            return cls(server=server.rstrip("/"))
        if kubeconfig is None and "KUBERNETES_SERVICE_HOST" in os.environ and SERVICE_ACCOUNT_DIR.exists():
            return cls.in_cluster()
        return cls.from_kubeconfig(kubeconfig)

    def bearer_token(self) -> str | None:
        """The token to send now: the fixed one, or the token file's content as it is now."""
        if self.token_file:
            return FileToken(self.token_file).value()
        return self.token

    def ssl_context(self) -> ssl.SSLContext | bool:
        """TLS for aiohttp (False: plain HTTP, or no verification when `insecure`); PEM from memory."""
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            return False
        cadata = self.ca_data.decode() if self.ca_data else None
        context = ssl.create_default_context(cafile=self.ca_path, cadata=cadata)
        if cert := self.client_cert_path or self.client_cert_data:
            _load_client_certificate(context, cert, self.client_key_path or self.client_key_data)
        return context


def _pem(section: Mapping[str, Any], field: str) -> tuple[str | None, bytes | None]:
    """A kubeconfig's certificate or key: (path, None), or (None, PEM) from its base64 `FIELD-data`."""
    data = section.get(f"{field}-data")
    if data:
        return None, base64.b64decode(data)
    path = section.get(field)
    return (str(path) if path else None), None


def _load_client_certificate(context: ssl.SSLContext, cert: str | bytes, key: str | bytes | None) -> None:
    """Load a client certificate and key, each a path (str) or PEM held in memory (bytes). Python's ssl
    reads them only from files: PEM is written into a private directory (mode 0700), loaded, and
    removed before this returns; with paths alone nothing is written."""
    if isinstance(cert, str) and not isinstance(key, bytes):
        context.load_cert_chain(cert, key)
        return
    with tempfile.TemporaryDirectory(prefix="accelpool-tls-") as private:
        context.load_cert_chain(
            _on_disk(cert, Path(private, "tls.crt")), key and _on_disk(key, Path(private, "tls.key"))
        )


def _on_disk(material: str | bytes, spare: Path) -> str:
    """MATERIAL's path: itself, or SPARE (created, mode 0600) holding its PEM."""
    if isinstance(material, str):
        return material
    descriptor = os.open(spare, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as handle:
        handle.write(material)
    return str(spare)


class KubeClient:
    """JSON over HTTP to one API server; one aiohttp session, reused."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0, user_agent: str = USER_AGENT) -> None:
        self.credentials = credentials
        self.user_agent = user_agent
        self._token_file = FileToken(credentials.token_file) if credentials.token_file else None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Accept": "application/json", "User-Agent": self.user_agent}
            connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context(), limit=64)
            self._session = aiohttp.ClientSession(headers=headers, timeout=self._timeout, connector=connector)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
    ) -> JsonObject:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        sent_at = self._token_file.now() if self._token_file else 0.0
        if token := self._token():
            headers["Authorization"] = f"Bearer {token}"
        url = f"{self.credentials.server}{path}"
        async with self._http().request(method, url, data=data, params=params, headers=headers) as response:
            text = await response.text()
            if response.status == 401 and self._token_file is not None:
                self._token_file.reset_older_than(sent_at)  # the file may hold a rotated token: read it next time
            if response.status >= 400:
                raise _error(response.status, text, method=method, path=path)
            if not text:
                return {}
            result: JsonObject = json.loads(text)
            return result

    def _token(self) -> str | None:
        return self._token_file.value() if self._token_file else self.credentials.token

    async def get(self, path: str) -> JsonObject:
        return await self.request("GET", path)

    async def get_or_none(self, path: str) -> JsonObject | None:
        try:
            return await self.get(path)
        except NotFoundError:
            return None

    async def list(
        self, path: str, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[JsonObject]:
        params = {
            key: value for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if value
        }
        items: list[JsonObject] = (await self.request("GET", path, params=params or None)).get("items") or []
        return items

    async def create(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, *, patch_type: PatchType = "merge") -> JsonObject:
        return await self.request("PATCH", path, body=body, content_type=_PATCH_CONTENT_TYPES[patch_type])

    async def apply(self, path: str, body: JsonObject, *, field_manager: str, force: bool = True) -> JsonObject:
        """Server-side apply of `body` (the whole intent, without resourceVersion) at `path`, creating the
        object if it does not exist. Fields `field_manager` applied before and left out now are removed;
        fields other managers own (a controller's status) are left alone, so no concurrent write conflicts."""
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, body=body, params=params, content_type=APPLY_CONTENT_TYPE)

    async def delete(self, path: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self.request("DELETE", path)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> AsyncIterator[JsonObject]:
        """The watch events (`{"type", "object"}`) of a collection after `resource_version`, until the server
        ends the stream (after `timeout_seconds`, or going down). Bookmarks are asked for (`BOOKMARK`
        events carry only a newer resourceVersion). An `ERROR` event raises: `GoneError` for 410
        Expired (list again), else `ApiError`. Events are read as whole lines of any length (a Node
        with its image list is easily over aiohttp's 128 KiB line limit)."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        params.update(
            {
                key: value
                for key, value in (("fieldSelector", field_selector), ("labelSelector", label_selector))
                if value
            }
        )
        sent_at = self._token_file.now() if self._token_file else 0.0
        headers = {"Authorization": f"Bearer {token}"} if (token := self._token()) else {}
        read_limit = timeout_seconds + WATCH_READ_MARGIN_SECONDS
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=read_limit)
        url = f"{self.credentials.server}{path}"
        async with self._http().get(url, params=params, headers=headers, timeout=timeout) as response:
            if response.status == 401 and self._token_file is not None:
                self._token_file.reset_older_than(sent_at)
            if response.status >= 400:
                raise _error(response.status, await response.text(), method="WATCH", path=path)
            pending = b""
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield _watch_event(json.loads(line), path)


def _error(status: int, text: str, *, method: str, path: str) -> ApiError:
    reason, message = "", text[:500]
    causes: tuple[tuple[str, str], ...] = ()
    try:
        payload = json.loads(text)
        reason = str(payload.get("reason", ""))
        message = str(payload.get("message", message))
        listed = (payload.get("details") or {}).get("causes") or []
        causes = tuple((str(c.get("type", "")), str(c.get("message", ""))) for c in listed if isinstance(c, dict))
    except (ValueError, AttributeError):
        pass
    kind = {404: NotFoundError, 409: ConflictError, 410: GoneError}.get(status, ApiError)
    return kind(status, reason, message, method=method, path=path, causes=causes)


def _watch_event(event: JsonObject, path: str) -> JsonObject:
    """A watch event as it came, or the error an `ERROR` event stands for (its object is a Status)."""
    if event.get("type") != "ERROR":
        return event
    status = event.get("object") or {}
    code = int(status.get("code") or 500)
    raise _error(code, json.dumps(status), method="WATCH", path=path)
