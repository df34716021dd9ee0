"""The API client's credentials: a token file is re-read as client-go re-reads it (so a long-running
agent or operator outlives the kubelet's token rotation), and a kubeconfig's embedded certificates
and key are used from memory, leaving nothing on disk. Served by real aiohttp servers (HTTP, and
HTTPS that demands a client certificate made with openssl)."""

from __future__ import annotations

import base64
import datetime
import json
import ssl
import subprocess
import tempfile
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from aiohttp import web
from aiohttp.test_utils import TestServer

from accelpool_core import credentials
from accelpool_core.credentials import Credentials, FileToken, token_refresh_time
from accelpool_core.kube import ApiError, KubeClient
from tests.support.environment import require_tool

UTC = datetime.UTC


@dataclass
class Clock:
    now: float = 1000.0

    def __call__(self) -> float:
        return self.now


def test_a_token_file_is_read_again_once_its_reading_is_a_minute_old(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("first\n")
    clock = Clock()
    token = FileToken(path, clock=clock)
    assert token.value() == "first"
    path.write_text("rotated")
    clock.now += credentials.TOKEN_REREAD_SECONDS - 1
    assert token.value() == "first"
    clock.now += 1
    assert token.value() == "rotated"


def test_a_token_file_that_cannot_be_read_keeps_the_last_token(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("good")
    clock = Clock()
    token = FileToken(path, clock=clock)
    assert token.value() == "good"
    for broken in ("", None):  # the kubelet swaps the projected volume's files: empty, or briefly gone
        if broken is None:
            path.unlink()
        else:
            path.write_text(broken)
        clock.now += credentials.TOKEN_REREAD_SECONDS
        assert token.value() == "good"
    with pytest.raises(OSError, match="token"):
        FileToken(tmp_path / "missing").value()


def test_a_rejected_token_older_than_the_request_is_read_again_at_once(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("old")
    clock = Clock()
    token = FileToken(path, clock=clock)
    assert token.value() == "old"
    path.write_text("new")
    token.reset_older_than(clock.now)  # a token read at the request's start is kept (client-go's rule)
    assert token.value() == "old"
    clock.now += 1
    token.reset_older_than(clock.now)
    assert token.value() == "new"


def test_in_cluster_credentials_follow_the_token_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "token").write_text("first")
    (tmp_path / "ca.crt").write_text("")
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT_DIR", tmp_path)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "6443")
    found = Credentials.discover()
    assert found.server == "https://[fd00::1]:6443"
    assert found.token_file == str(tmp_path / "token")
    assert found.bearer_token() == "first"
    (tmp_path / "token").write_text("rotated")
    assert found.bearer_token() == "rotated"


@dataclass
class TokenCheckingServer:
    """Accepts only the bearer token its `valid` file holds now; records what each request carried."""

    valid: Path
    seen: list[str] = field(default_factory=list)

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append(request.headers.get("Authorization", ""))
        if request.headers.get("Authorization") != f"Bearer {self.valid.read_text().strip()}":
            return web.json_response({"kind": "Status", "reason": "Unauthorized", "message": "token"}, status=401)
        return web.json_response({"kind": "Node", "metadata": {"name": request.match_info["name"]}})


def kubeconfig(path: Path, server: str, user: dict[str, str], cluster: dict[str, str] | None = None) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "test",
                "contexts": [{"name": "test", "context": {"cluster": "test", "user": "test"}}],
                "clusters": [{"name": "test", "cluster": {"server": server, **(cluster or {})}}],
                "users": [{"name": "test", "user": user}],
            }
        )
    )
    return path


async def test_the_client_sends_a_rotated_token_after_a_401(tmp_path: Path) -> None:
    """The file rotates under a running client: the API server refuses the old token once, and the
    next request carries the new one, without waiting for the minute to pass."""
    token_file = tmp_path / "token"
    token_file.write_text("first")
    checker = TokenCheckingServer(valid=token_file)
    app = web.Application()
    app.router.add_get("/api/v1/nodes/{name}", checker.handle)
    async with TestServer(app, host="127.0.0.1") as server:
        config = kubeconfig(tmp_path / "config", str(server.make_url("")), {"tokenFile": str(token_file)})
        async with KubeClient(Credentials.discover(str(config))) as client:
            assert (await client.get("/api/v1/nodes/a"))["metadata"]["name"] == "a"
            token_file.write_text("rotated\n")
            with pytest.raises(ApiError) as refused:
                await client.get("/api/v1/nodes/b")
            assert refused.value.status == 401
            assert (await client.get("/api/v1/nodes/c"))["metadata"]["name"] == "c"
    assert checker.seen == ["Bearer first", "Bearer first", "Bearer rotated"]


def test_when_to_read_a_bound_token_again() -> None:
    now = datetime.datetime(2026, 11, 22, 12, 0, tzinfo=UTC)
    issued = int(now.timestamp())
    hour = jwt({"iat": issued, "exp": issued + 3600})
    assert token_refresh_time(hour, now) == now + datetime.timedelta(seconds=3240)
    # The API server extended this one to a year; the kubelet still rotates it within the hour.
    extended = jwt({"iat": issued, "exp": issued + 365 * 86400, "kubernetes.io": {"warnafter": issued + 3607}})
    assert token_refresh_time(extended, now) == now + datetime.timedelta(seconds=0.9 * 3607)
    # Late in its life (the file not yet rotated): ask again in a minute, as client-go would read it.
    assert token_refresh_time(hour, now + datetime.timedelta(seconds=3500)) == now + datetime.timedelta(seconds=3560)
    assert token_refresh_time("a-static-token", now) is None
    assert token_refresh_time(jwt({"sub": "system:serviceaccount:x:y"}), now) is None


def jwt(claims: dict[str, Any]) -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part(claims)}.signature"


@dataclass(frozen=True)
class Pki:
    ca: bytes
    server_cert: Path
    server_key: Path
    client_cert: bytes
    client_key: bytes


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    openssl = require_tool("openssl")
    where = tmp_path_factory.mktemp("pki")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], cwd=where, check=True, capture_output=True, timeout=60)

    ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    run("req", "-x509", *ec, "-keyout", "ca.key", "-out", "ca.crt", "-subj", "/CN=test-ca", "-days", "2",
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")  # fmt: skip
    for name, extension in (("server", "subjectAltName=IP:127.0.0.1"), ("client", "extendedKeyUsage=clientAuth")):
        (where / f"{name}.ext").write_text(extension + "\n")
        run("req", *ec, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.crt", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.crt", "-days", "2", "-extfile", f"{name}.ext")  # fmt: skip
    return Pki(
        ca=(where / "ca.crt").read_bytes(),
        server_cert=where / "server.crt",
        server_key=where / "server.key",
        client_cert=(where / "client.crt").read_bytes(),
        client_key=(where / "client.key").read_bytes(),
    )


@pytest.fixture
async def mutual_tls_server(pki: Pki, tmp_path: Path) -> AsyncIterator[TestServer]:
    """HTTPS on 127.0.0.1 that refuses any client without a certificate signed by the test CA."""
    (tmp_path / "ca.crt").write_bytes(pki.ca)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=str(tmp_path / "ca.crt"))
    context.load_cert_chain(pki.server_cert, pki.server_key)
    context.verify_mode = ssl.CERT_REQUIRED

    async def node(request: web.Request) -> web.Response:
        return web.json_response({"kind": "Node", "metadata": {"name": request.match_info["name"]}})

    app = web.Application()
    app.router.add_get("/api/v1/nodes/{name}", node)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server(ssl=context)
    yield server
    await server.close()


async def test_embedded_certificates_are_used_from_memory_and_nothing_is_left_on_disk(
    pki: Pki, mutual_tls_server: TestServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.delenv("KUBECONFIG", raising=False)
    (tmp_path / ".kube").mkdir()
    kubeconfig(
        tmp_path / ".kube" / "config",
        str(mutual_tls_server.make_url("")).rstrip("/"),
        {
            "client-certificate-data": base64.b64encode(pki.client_cert).decode(),
            "client-key-data": base64.b64encode(pki.client_key).decode(),
        },
        cluster={"certificate-authority-data": base64.b64encode(pki.ca).decode()},
    )

    for _ in range(3):  # discovery, as the operator's login handler repeats it
        credentials = Credentials.discover()
    assert credentials.client_cert_data == pki.client_cert
    assert credentials.client_cert_path is None and credentials.ca_path is None
    assert entries(private_tmp) == []

    async with KubeClient(credentials) as client:
        assert (await client.get("/api/v1/nodes/gpu-1"))["metadata"]["name"] == "gpu-1"
    assert entries(private_tmp) == []
    assert entries(tmp_path) == [".kube", "ca.crt", "tmp"]  # HOME: the kubeconfig, the server's CA file
    assert entries(tmp_path / ".kube") == ["config"]


def entries(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.iterdir())
