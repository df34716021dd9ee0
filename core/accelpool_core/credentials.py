"""Credentials for the API client: a kubeconfig, the in-cluster ServiceAccount, or a plain server URL.

Handled as client-go handles them: a token from a file (the pod's rotating ServiceAccount token,
a kubeconfig's `tokenFile`) is re-read while the client runs (`FileToken`), and certificates and
keys embedded in a kubeconfig stay in memory (nothing is left on disk). `token_refresh_time` tells
a holder of a token (kopf's login handler) when to read it again. Used by `accelpool_core.kube`.
"""

from __future__ import annotations

import base64
import datetime
import json
import os
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")

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
