"""A small asynchronous Kubernetes API client: the only place accelpool speaks HTTP to the API server.

Used by the operator's handlers (nodes, ConfigMaps, DaemonSets, Events, Karpenter NodePools)
and by the device agent's reporter (its node's status and annotations). It knows just enough
of the API: JSON requests, merge/strategic/JSON patches, server-side apply (`apply`), label and
field selectors on lists, conflicts as `ConflictError`, and credentials from a kubeconfig, the
in-cluster service account, or a plain server URL.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import ssl
import tempfile
from collections.abc import Mapping
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

    def __init__(self, status: int, reason: str, message: str, *, method: str = "", path: str = "") -> None:
        self.status = status
        self.reason = reason
        self.message = message
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())


class NotFoundError(ApiError):
    """404: the object (or its resource) does not exist."""


class ConflictError(ApiError):
    """409: a stale resourceVersion, or the object already exists."""


@dataclass(frozen=True)
class Credentials:
    """Where the API server is and how to authenticate; built from a kubeconfig or the pod's account."""

    server: str
    token: str | None = None
    ca_path: str | None = None
    client_cert_path: str | None = None
    client_key_path: str | None = None
    insecure: bool = False

    @classmethod
    def in_cluster(cls) -> Credentials:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        token = (SERVICE_ACCOUNT_DIR / "token").read_text().strip()
        host = f"[{host}]" if ":" in host else host
        return cls(server=f"https://{host}:{port}", token=token, ca_path=str(SERVICE_ACCOUNT_DIR / "ca.crt"))

    @classmethod
    def from_kubeconfig(cls, path: str | None = None, context: str | None = None) -> Credentials:
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
        return cls(
            server=cluster["server"].rstrip("/"),
            token=user.get("token"),
            ca_path=_materialise(cluster.get("certificate-authority"), cluster.get("certificate-authority-data")),
            client_cert_path=_materialise(user.get("client-certificate"), user.get("client-certificate-data")),
            client_key_path=_materialise(user.get("client-key"), user.get("client-key-data")),
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

    def ssl_context(self) -> ssl.SSLContext | bool:
        if not self.server.startswith("https"):
            return False
        if self.insecure:
            return False
        context = ssl.create_default_context(cafile=self.ca_path)
        if self.client_cert_path:
            context.load_cert_chain(self.client_cert_path, self.client_key_path)
        return context


def _materialise(path: str | None, data: str | None) -> str | None:
    """Kubeconfigs embed certificates as base64 `*-data`; ssl needs files."""
    if data:
        handle = tempfile.NamedTemporaryFile(prefix="accelpool-", suffix=".pem", delete=False)  # noqa: SIM115
        with handle:
            handle.write(base64.b64decode(data))
        return handle.name
    return path


class KubeClient:
    """JSON over HTTP to one API server; one aiohttp session, reused."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0, user_agent: str = USER_AGENT) -> None:
        self.credentials = credentials
        self.user_agent = user_agent
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
            if self.credentials.token:
                headers["Authorization"] = f"Bearer {self.credentials.token}"
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
        url = f"{self.credentials.server}{path}"
        async with self._http().request(method, url, data=data, params=params, headers=headers) as response:
            text = await response.text()
            if response.status >= 400:
                raise _error(response.status, text, method=method, path=path)
            if not text:
                return {}
            result: JsonObject = json.loads(text)
            return result

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


def _error(status: int, text: str, *, method: str, path: str) -> ApiError:
    reason, message = "", text[:500]
    try:
        payload = json.loads(text)
        reason = str(payload.get("reason", ""))
        message = str(payload.get("message", message))
    except (ValueError, AttributeError):
        pass
    kind = {404: NotFoundError, 409: ConflictError}.get(status, ApiError)
    return kind(status, reason, message, method=method, path=path)
