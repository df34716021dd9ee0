"""accelpool's validating admission webhook in the demo, installed as the chart installs it.

The chart (charts/accelpool/templates/webhook.yaml, default values, release `accelpool` in
`accelpool-system`) has Helm generate a CA and a serving certificate for the webhook's Service,
mounts them into the operator, and registers a ValidatingWebhookConfiguration whose caBundle is that
CA. The demo does the same: `Certificates.generate()` makes the pair, the operator serves the
webhook with it (`--webhook-cert-dir`), and `configuration()` is the chart's configuration, which the
emulated API server then calls for every ComputePool write it matches
(`accelpool_demo.apiserver.webhooks`); tests/contract/test_demo_webhook.py holds it equal to
what `helm template` renders.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from accelpool import api, conventions
from accelpool import webhook as operator_webhook
from accelpool_demo.apiserver import ApiServer, resources

NAME = "accelpool"
"""The configuration's name (the chart's fullname for release `accelpool`)."""
SERVICE = "accelpool-operator-webhook"
NAMESPACE = conventions.DEFAULT_NAMESPACE
SERVICE_PORT = 443
WEBHOOK = f"{api.PLURAL}.{api.GROUP}"
FAILURE_POLICY = "Fail"
TIMEOUT_SECONDS = 10
VALID_DAYS = 3650


@dataclass(frozen=True)
class Certificates:
    """A CA and the webhook's serving certificate for its Service's DNS names (PEM)."""

    ca: bytes
    certificate: bytes
    key: bytes

    @classmethod
    def generate(cls, service: str = SERVICE, namespace: str = NAMESPACE) -> Certificates:
        """As the chart's `genCA` and `genSignedCert` (for `<service>.<namespace>.svc` and `...svc.cluster.local`)."""
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{NAME}-operator-webhook-ca")])
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        names = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
        certificate = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False)
            .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        return cls(
            ca=ca.public_bytes(serialization.Encoding.PEM),
            certificate=certificate.public_bytes(serialization.Encoding.PEM),
            key=key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            ),
        )

    def write(self, directory: Path) -> Path:
        """tls.crt and tls.key where the operator reads them (`--webhook-cert-dir`), as the chart mounts its Secret."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tls.crt").write_bytes(self.certificate)
        (directory / "tls.key").write_bytes(self.key)
        (directory / "tls.key").chmod(0o600)
        return directory


def configuration(ca: bytes, service: str = SERVICE, namespace: str = NAMESPACE) -> dict[str, Any]:
    """The chart's ValidatingWebhookConfiguration (default values), trusting `ca`."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": NAME},
        "webhooks": [
            {
                "name": WEBHOOK,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": FAILURE_POLICY,
                "timeoutSeconds": TIMEOUT_SECONDS,
                "matchPolicy": "Equivalent",
                "rules": [
                    {
                        "apiGroups": [api.GROUP],
                        "apiVersions": [api.VERSION],
                        "resources": [api.PLURAL],
                        "operations": ["CREATE", "UPDATE"],
                        "scope": "Cluster",
                    }
                ],
                "matchConditions": [
                    {
                        "name": "creates-or-changes-spec",
                        "expression": (
                            "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec)"
                            " || object.spec != oldObject.spec"
                        ),
                    }
                ],
                "clientConfig": {
                    "service": {
                        "name": service,
                        "namespace": namespace,
                        "path": operator_webhook.PATH,
                        "port": SERVICE_PORT,
                    },
                    "caBundle": base64.b64encode(ca).decode(),
                },
            }
        ],
    }


def install(server: ApiServer, address: tuple[str, int], ca: bytes) -> None:
    """The chart's configuration stored in the emulated API server, its Service served at `address` (where the
    operator serves the webhook with the certificate `ca` signed): from now on the server calls it."""
    server.store.services[(NAMESPACE, SERVICE, SERVICE_PORT)] = address
    server.store.put(resources.WEBHOOK_CONFIGURATIONS, configuration(ca))


@contextlib.asynccontextmanager
async def serving(server: ApiServer, directory: Path) -> AsyncIterator[operator_webhook.WebhookServer]:
    """The operator's webhook served in this process on 127.0.0.1 with a fresh certificate (in `directory`),
    installed in the emulated API server as the chart installs it, until the block ends."""
    certificates = Certificates.generate()
    running = await operator_webhook.serve(certificates.write(directory), 0, host="127.0.0.1")
    try:
        install(server, ("127.0.0.1", running.port), certificates.ca)
        yield running
    finally:
        await running.close()
