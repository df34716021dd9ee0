"""The webhook's optional client authentication (`--webhook-client-ca`, `--webhook-client-names`).

With a client CA, a caller without a certificate, or with one another CA signed, is refused in the TLS
handshake: no HTTP request is read, no review runs. One the CA signed is served; with names, a
certificate naming none of them is answered 403. A CA file that cannot serve (missing, not PEM, a leaf
instead of a CA) stops the operator naming the file and the chart values. A CA added to the file is
trusted after the next reload, without a restart.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from accelpool import cli
from accelpool.runtime import webhook
from accelpool.runtime.settings import OperatorConfig, add_arguments
from accelpool_demo.webhook import SERVICE, Certificates, ClientCertificates
from tests.unit.operator.test_webhook_bounds import review_document

SERVER_NAME = f"{SERVICE}.accelpool-system.svc"
HANG_GUARD_SECONDS = 30.0


class Exchange:
    """One HTTPS POST of a valid AdmissionReview over a raw TLS stream: the status line, or what stopped it."""

    def __init__(self, status: int | None = None, body: bytes = b"", error: OSError | None = None) -> None:
        self.status, self.body, self.error = status, body, error

    @property
    def refused_at_tls(self) -> bool:
        return self.status is None and self.error is not None


def client_context(ca: bytes, client: ClientCertificates | None, tmp_path: Path, tls: str = "1.3") -> ssl.SSLContext:
    context = ssl.create_default_context(cadata=ca.decode())
    context.maximum_version = ssl.TLSVersion.TLSv1_3 if tls == "1.3" else ssl.TLSVersion.TLSv1_2
    if client is not None:
        (tmp_path / "client.crt").write_bytes(client.certificate)
        (tmp_path / "client.key").write_bytes(client.key)
        context.load_cert_chain(tmp_path / "client.crt", tmp_path / "client.key")
    return context


async def post(port: int, context: ssl.SSLContext) -> Exchange:
    body = json.dumps(review_document({"accelerator": "H100:8"})).encode()
    request = (
        f"POST {webhook.PATH} HTTP/1.1\r\nHost: {SERVER_NAME}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body
    try:
        async with asyncio.timeout(HANG_GUARD_SECONDS):
            reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context, server_hostname=SERVER_NAME)
            try:
                writer.write(request)
                await writer.drain()
                answer = await reader.read()
            finally:
                writer.close()
                with contextlib.suppress(OSError):
                    await writer.wait_closed()
    except OSError as error:  # ssl.SSLError is one: an alert; or the reset that follows it
        return Exchange(error=error)
    if not answer:
        return Exchange(error=ConnectionResetError("closed before any HTTP answer"))
    head, _, rest = answer.partition(b"\r\n\r\n")
    return Exchange(status=int(head.split()[1]), body=rest)


@pytest.fixture
def serving_pair(tmp_path: Path) -> tuple[Certificates, Path]:
    certificates = Certificates.generate()
    return certificates, certificates.write(tmp_path / "tls")


@pytest.fixture
def api_server_client() -> ClientCertificates:
    return ClientCertificates.generate()


@pytest.fixture
async def mtls(
    serving_pair: tuple[Certificates, Path], api_server_client: ClientCertificates, tmp_path: Path
) -> AsyncIterator[webhook.WebhookServer]:
    _, cert_dir = serving_pair
    ca_file = api_server_client.write_ca(tmp_path / "client-ca" / "ca.crt")
    running = await webhook.serve(cert_dir, 0, host="127.0.0.1", client_ca=ca_file)
    try:
        yield running
    finally:
        await running.close()


async def test_the_api_servers_certificate_is_served(
    mtls: webhook.WebhookServer,
    serving_pair: tuple[Certificates, Path],
    api_server_client: ClientCertificates,
    tmp_path: Path,
) -> None:
    ca = serving_pair[0].ca
    for tls in ("1.2", "1.3"):
        answer = await post(mtls.port, client_context(ca, api_server_client, tmp_path, tls))
        assert answer.status == 200, (tls, answer.error)
        assert json.loads(answer.body)["response"]["allowed"] is True


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
async def test_a_client_without_a_certificate_is_refused_at_tls(
    mtls: webhook.WebhookServer, serving_pair: tuple[Certificates, Path], tmp_path: Path, tls: str
) -> None:
    answer = await post(mtls.port, client_context(serving_pair[0].ca, None, tmp_path, tls))
    assert answer.refused_at_tls, answer.status


@pytest.mark.parametrize("tls", ["1.2", "1.3"])
async def test_a_certificate_from_another_ca_is_refused_at_tls(
    mtls: webhook.WebhookServer, serving_pair: tuple[Certificates, Path], tmp_path: Path, tls: str
) -> None:
    impostor = ClientCertificates.generate()  # same CN, kube-apiserver; another CA
    answer = await post(mtls.port, client_context(serving_pair[0].ca, impostor, tmp_path, tls))
    assert answer.refused_at_tls, answer.status


async def test_only_the_client_ca_is_trusted(mtls: webhook.WebhookServer) -> None:
    """No system trust store behind it: a public CA's client certificate must not get in."""
    assert mtls.context.verify_mode == ssl.CERT_REQUIRED
    assert mtls.context.cert_store_stats() == {"x509": 1, "x509_ca": 1, "crl": 0}


async def test_without_a_client_ca_anyone_with_tls_may_call(
    serving_pair: tuple[Certificates, Path], tmp_path: Path
) -> None:
    certificates, cert_dir = serving_pair
    running = await webhook.serve(cert_dir, 0, host="127.0.0.1")
    try:
        assert running.context.verify_mode == ssl.CERT_NONE
        assert (await post(running.port, client_context(certificates.ca, None, tmp_path))).status == 200
    finally:
        await running.close()


async def test_names_narrow_the_certificates_the_ca_signed(
    serving_pair: tuple[Certificates, Path], api_server_client: ClientCertificates, tmp_path: Path
) -> None:
    certificates, cert_dir = serving_pair
    ca_file = api_server_client.write_ca(tmp_path / "client-ca.crt")
    by_san = api_server_client.sign("someone", ("apiserver.control-plane.example",))
    running = await webhook.serve(
        cert_dir,
        0,
        host="127.0.0.1",
        client_ca=ca_file,
        client_names=["kube-apiserver", "apiserver.control-plane.example"],
    )
    try:
        by_cn = await post(running.port, client_context(certificates.ca, api_server_client, tmp_path))
        assert by_cn.status == 200
        named = await post(running.port, client_context(certificates.ca, by_san, tmp_path))
        assert named.status == 200, named.error
        other = api_server_client.sign("kubectl-user")  # the right CA, the wrong name
        refused = await post(running.port, client_context(certificates.ca, other, tmp_path))
        assert refused.status == 403
        assert refused.body.decode() == (
            "the client certificate names kubectl-user, none of the names this webhook accepts "
            "(--webhook-client-names: apiserver.control-plane.example, kube-apiserver)"
        )
    finally:
        await running.close()


# ---- A CA file that cannot serve stops the operator, saying which file and what to set.

CHART_HINTS = ("webhook.clientAuth.enabled", "webhook.clientAuth.caBundle", "--webhook-client-ca")


def _refusal(cert_dir: Path, ca_file: Path) -> str:
    with pytest.raises(webhook.CertificateError) as refused:
        webhook.tls_context(cert_dir, client_ca=ca_file)
    return str(refused.value)


def test_a_missing_ca_file_is_named(serving_pair: tuple[Certificates, Path], tmp_path: Path) -> None:
    message = _refusal(serving_pair[1], tmp_path / "absent" / "ca.crt")
    assert message.startswith(f"cannot read the webhook client CA file {tmp_path / 'absent' / 'ca.crt'}: ")
    assert all(hint in message for hint in CHART_HINTS), message


def test_a_file_without_a_pem_certificate_is_named(serving_pair: tuple[Certificates, Path], tmp_path: Path) -> None:
    key_only = tmp_path / "ca.crt"
    key_only.write_bytes(ClientCertificates.generate().key)  # a key where the CA should be
    message = _refusal(serving_pair[1], key_only)
    assert message.startswith(
        f"the webhook client CA file {key_only} holds no PEM certificate (-----BEGIN CERTIFICATE-----). "
    )
    assert all(hint in message for hint in CHART_HINTS), message


def test_a_broken_pem_certificate_is_named(serving_pair: tuple[Certificates, Path], tmp_path: Path) -> None:
    broken = tmp_path / "ca.crt"
    broken.write_text("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n")
    message = _refusal(serving_pair[1], broken)
    assert message.startswith(f"the webhook client CA file {broken} is not PEM certificates OpenSSL can load: ")


def test_the_client_certificate_in_place_of_its_ca_is_named(
    serving_pair: tuple[Certificates, Path], api_server_client: ClientCertificates, tmp_path: Path
) -> None:
    leaf = tmp_path / "tls.crt"
    leaf.write_bytes(api_server_client.certificate)
    message = _refusal(serving_pair[1], leaf)
    assert message.startswith(
        f"the webhook client CA file {leaf} holds no CA certificate (basicConstraints CA:TRUE): is it the client "
        "certificate (tls.crt) instead of the CA that signed it (ca.crt)? "
    )


def test_names_without_a_ca_are_refused(serving_pair: tuple[Certificates, Path]) -> None:
    with pytest.raises(webhook.CertificateError, match=r"^--webhook-client-names \(kube-apiserver\) needs "):
        webhook.tls_context(serving_pair[1], client_names=["kube-apiserver", " "])


def test_run_with_a_bad_client_ca_exits_naming_it(
    serving_pair: tuple[Certificates, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "not-mounted" / "ca.crt"
    argv = ["run", f"--webhook-cert-dir={serving_pair[1]}", f"--webhook-client-ca={missing}", "--server=http://x:9"]
    assert cli.main(argv) == 2
    error = capsys.readouterr().err
    assert error.startswith(f"error: cannot read the webhook client CA file {missing}: ")
    assert "ACCELPOOL_WEBHOOK_CLIENT_CA" in error


def test_client_auth_settings_from_flags_and_environment() -> None:
    assert (OperatorConfig().webhook_client_ca, OperatorConfig().webhook_client_names) == (None, ())
    from_env = OperatorConfig.from_env(
        {"ACCELPOOL_WEBHOOK_CLIENT_CA": "/ca/ca.crt", "ACCELPOOL_WEBHOOK_CLIENT_NAMES": "kube-apiserver, front-proxy"}
    )
    assert (from_env.webhook_client_ca, from_env.webhook_client_names) == (
        "/ca/ca.crt",
        ("kube-apiserver", "front-proxy"),
    )
    parser = argparse.ArgumentParser()
    add_arguments(parser, {"ACCELPOOL_WEBHOOK_CLIENT_CA": "/ca/ca.crt"})
    flags = OperatorConfig.from_args(parser.parse_args(["--webhook-client-names=a,b", "--webhook-client-ca="]))
    assert (flags.webhook_client_ca, flags.webhook_client_names) == (None, ("a", "b"))


# ---- A renewed CA.


async def test_a_ca_added_to_the_file_is_trusted_after_a_reload(
    mtls: webhook.WebhookServer,
    serving_pair: tuple[Certificates, Path],
    api_server_client: ClientCertificates,
    tmp_path: Path,
) -> None:
    """Rotation: a new CA of the same name is appended while the old one still signs the API server's certificate."""
    assert mtls.client_auth is not None
    renewed = ClientCertificates.generate("kube-apiserver")
    ca = serving_pair[0].ca
    assert (await post(mtls.port, client_context(ca, renewed, tmp_path))).refused_at_tls
    assert mtls.reload() is False  # nothing changed
    mtls.client_auth.ca_file.write_bytes(b"not a certificate")  # half-way through a swap
    assert mtls.reload() is False
    assert (await post(mtls.port, client_context(ca, api_server_client, tmp_path))).status == 200
    mtls.client_auth.ca_file.write_bytes(api_server_client.ca + renewed.ca)
    assert mtls.reload() is True
    assert (await post(mtls.port, client_context(ca, renewed, tmp_path))).status == 200
    assert (await post(mtls.port, client_context(ca, api_server_client, tmp_path))).status == 200
