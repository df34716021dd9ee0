"""kopf's login handler: credentials read afresh from the kubeconfig (a rotated token file's new token),
an expiration before the token goes stale, and embedded certificates passed to kopf as data, not files."""

from __future__ import annotations

import base64
import datetime
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import cast

import kopf
import yaml

from accelpool.runtime import handlers
from accelpool.runtime.settings import OperatorConfig

login = cast(Callable[..., Awaitable[kopf.ConnectionInfo]], handlers.login)
"""As kopf calls it (its decorator's type stands for every activity's arguments)."""


def jwt(issued: int, expires: int) -> str:
    def part(value: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")

    return f"{part({'alg': 'RS256'})}.{part({'iat': issued, 'exp': expires})}.signature"


async def test_login_reads_the_token_file_and_passes_certificates_as_data(tmp_path: Path) -> None:
    now = int(datetime.datetime.now(datetime.UTC).timestamp())
    token_file = tmp_path / "token"
    token_file.write_text(jwt(now, now + 3600))
    certificate, key = b"-----BEGIN CERTIFICATE-----\nMIIB\n", b"-----BEGIN PRIVATE KEY-----\nMIIE\n"
    config = {
        "current-context": "c",
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
        "users": [
            {
                "name": "u",
                "user": {
                    "tokenFile": str(token_file),
                    "client-certificate-data": base64.b64encode(certificate).decode(),
                    "client-key-data": base64.b64encode(key).decode(),
                },
            }
        ],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(config))
    memo = kopf.Memo(config=OperatorConfig(kubeconfig=str(tmp_path / "kubeconfig")))

    first = await login(memo=memo)
    assert first.token == token_file.read_text()
    assert (first.certificate_data, first.private_key_data) == (certificate, key)
    assert first.certificate_path is None and first.private_key_path is None
    assert first.expiration == datetime.datetime.fromtimestamp(now + 3240, tz=datetime.UTC)

    token_file.write_text(jwt(now + 2880, now + 6480))  # the kubelet rotates it at 80%
    assert (await login(memo=memo)).token == token_file.read_text()
