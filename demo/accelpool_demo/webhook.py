"""accelpool's validating admission webhook in the demo, installed as the chart installs it.

The chart (charts/accelpool/templates/webhook.yaml, default values, release `accelpool` in
`accelpool-system`) has Helm generate a CA and a serving certificate for the webhook's Service,
mounts them into the operator, and registers a ValidatingWebhookConfiguration whose caBundle is that
CA. The demo does the same: `Certificates.generate()` makes the pair, the operator serves the
webhook with it (`--webhook-cert-dir`), and `configuration()` is the chart's configuration, which the
emulated API server then calls for every ComputePool write it matches
(`accelpool_demo.apiserver.webhooks`); tests/contract/test_demo_webhook.py holds it equal to
what `helm template` renders.

With `serving(..., client_auth=True)` the API server authenticates itself too, as the chart's
`webhook.clientAuth.enabled=true` asks on a self-managed control plane: `ClientCertificates` are
the CA and the client certificate Helm generates then (`genCA`, `genSignedCert`), the operator
requires a certificate from that CA (`--webhook-client-ca`), and the emulated API server is
given the certificate the way kube-apiserver is: an AdmissionConfiguration
(`admission_configuration`) whose ValidatingAdmissionWebhook plugin names a kubeconfig
(`kubeconfig`) with a `users` entry for the webhook's Service.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import accelpool_api as api
from accelpool.runtime import webhook as operator_webhook
from accelpool_api import conventions
from accelpool_demo.apiserver import ApiServer, resources
from accelpool_demo.apiserver.webhooks import read_admission_kubeconfig

NAME = "accelpool"
"""The configuration's name (the chart's fullname for release `accelpool`)."""
SERVICE = "accelpool-operator-webhook"
NAMESPACE = conventions.DEFAULT_NAMESPACE
SERVICE_PORT = 443
WEBHOOK = f"{api.PLURAL}.{api.GROUP}"
FAILURE_POLICY = "Fail"
TIMEOUT_SECONDS = 10
VALID_DAYS = 3650
CLIENT_NAME = "kube-apiserver"
"""The subject CN of the API server's client certificate the chart generates."""


def _pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _authority(common_name: str) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A self-signed CA, as Sprig's `genCA`."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(x509.KeyUsage(True, False, False, False, False, True, True, False, False), critical=True)
        # Go's x509.CreateCertificate gives a CA a subject key ID, and what it signs the matching authority
        # key ID: how OpenSSL tells apart two CAs of one name (the old and the new one while rotating).
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return key, certificate


def _signed(
    authority: tuple[ec.EllipticCurvePrivateKey, x509.Certificate],
    common_name: str,
    dns_names: list[str],
    usage: x509.ObjectIdentifier,
) -> tuple[ec.EllipticCurvePrivateKey, x509.Certificate]:
    """A certificate `authority` signed, as Sprig's `genSignedCert`, for one extended key usage."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key, ca = authority
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)]))
        .issuer_name(ca.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False)
    )
    if dns_names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName(n) for n in dns_names]), critical=False
        )
    return key, builder.sign(ca_key, hashes.SHA256())


@dataclass(frozen=True)
class Certificates:
    """A CA and the webhook's serving certificate for its Service's DNS names (PEM)."""

    ca: bytes
    certificate: bytes
    key: bytes

    @classmethod
    def generate(cls, service: str = SERVICE, namespace: str = NAMESPACE) -> Certificates:
        """As the chart's `genCA` and `genSignedCert` (for `<service>.<namespace>.svc` and `...svc.cluster.local`)."""
        authority = _authority(f"{NAME}-operator-webhook-ca")
        names = [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]
        key, certificate = _signed(authority, names[0], names, ExtendedKeyUsageOID.SERVER_AUTH)
        return cls(
            ca=authority[1].public_bytes(serialization.Encoding.PEM),
            certificate=certificate.public_bytes(serialization.Encoding.PEM),
            key=_pem(key),
        )

    def write(self, directory: Path) -> Path:
        """tls.crt and tls.key where the operator reads them (`--webhook-cert-dir`), as the chart mounts its Secret."""
        directory.mkdir(parents=True, exist_ok=True)
        (directory / "tls.crt").write_bytes(self.certificate)
        (directory / "tls.key").write_bytes(self.key)
        (directory / "tls.key").chmod(0o600)
        return directory


@dataclass(frozen=True)
class ClientCertificates:
    """A CA and the API server's webhook client certificate it signed (PEM), as the chart generates them with
    `webhook.clientAuth.enabled=true` and no CA of your own: the operator trusts `ca`, the API server presents
    `certificate` and `key`. The CA's own key stays here, for `sign` (the chart keeps none)."""

    ca: bytes
    certificate: bytes
    key: bytes
    ca_key: bytes = field(default=b"", repr=False)

    @classmethod
    def generate(cls, common_name: str = CLIENT_NAME, dns_names: tuple[str, ...] = ()) -> ClientCertificates:
        ca_key, ca = _authority(f"{NAME}-operator-webhook-client-ca")
        return cls(ca.public_bytes(serialization.Encoding.PEM), b"", b"", _pem(ca_key)).sign(common_name, dns_names)

    def sign(self, common_name: str, dns_names: tuple[str, ...] = ()) -> ClientCertificates:
        """Another client certificate from the same CA."""
        ca_key = serialization.load_pem_private_key(self.ca_key, password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        authority = (ca_key, x509.load_pem_x509_certificate(self.ca))
        key, certificate = _signed(authority, common_name, list(dns_names), ExtendedKeyUsageOID.CLIENT_AUTH)
        return ClientCertificates(self.ca, certificate.public_bytes(serialization.Encoding.PEM), _pem(key), self.ca_key)

    def write_ca(self, path: Path) -> Path:
        """The CA file the operator reads (`--webhook-client-ca`), as the chart mounts it."""
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(self.ca)
        return path


def kubeconfig(client: ClientCertificates, user: str = f"{SERVICE}.{NAMESPACE}.svc") -> dict[str, Any]:
    """The kubeConfigFile of kube-apiserver's ValidatingAdmissionWebhook plugin: its `users` entry named after
    the webhook's Service (`<service>.<namespace>.svc`, port 443) presents `client`'s certificate."""
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate-data": base64.b64encode(client.certificate).decode(),
                    "client-key-data": base64.b64encode(client.key).decode(),
                },
            }
        ],
    }


def admission_configuration(kubeconfig_file: Path) -> dict[str, Any]:
    """kube-apiserver's --admission-control-config-file, its ValidatingAdmissionWebhook plugin reading
    `kubeconfig_file`."""
    return {
        "apiVersion": "apiserver.config.k8s.io/v1",
        "kind": "AdmissionConfiguration",
        "plugins": [
            {
                "name": "ValidatingAdmissionWebhook",
                "configuration": {
                    "apiVersion": "apiserver.config.k8s.io/v1",
                    "kind": "WebhookAdmissionConfiguration",
                    "kubeConfigFile": str(kubeconfig_file.resolve()),
                },
            }
        ],
    }


def authenticate_as(server: ApiServer, client: ClientCertificates, directory: Path) -> Path:
    """Configure the emulated API server as a control plane is configured to present `client` to the webhook:
    the kubeconfig and the AdmissionConfiguration written to `directory` and read back as kube-apiserver reads
    them at start. Returns the AdmissionConfiguration's path."""
    directory.mkdir(parents=True, exist_ok=True)
    kubeconfig_file = directory / "webhook-kubeconfig.yaml"
    kubeconfig_file.write_text(yaml.safe_dump(kubeconfig(client)))
    kubeconfig_file.chmod(0o600)
    admission_file = directory / "admission-configuration.yaml"
    admission_file.write_text(yaml.safe_dump(admission_configuration(kubeconfig_file)))
    server.store.webhooks.kubeconfig = read_admission_kubeconfig(admission_file)
    return admission_file


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
async def serving(
    server: ApiServer, directory: Path, *, client_auth: bool = False
) -> AsyncIterator[operator_webhook.WebhookServer]:
    """The operator's webhook served in this process on 127.0.0.1 with a fresh certificate (in `directory`),
    installed in the emulated API server as the chart installs it, until the block ends. With `client_auth`,
    as with the chart's `webhook.clientAuth.enabled=true`: the webhook requires the client certificate the
    emulated API server is configured to present (`authenticate_as`)."""
    certificates = Certificates.generate()
    client_ca = None
    if client_auth:
        client = ClientCertificates.generate()
        client_ca = client.write_ca(directory / "client-ca" / "ca.crt")
        authenticate_as(server, client, directory / "control-plane")
    running = await operator_webhook.serve(certificates.write(directory), 0, host="127.0.0.1", client_ca=client_ca)
    try:
        install(server, ("127.0.0.1", running.port), certificates.ca)
        yield running
    finally:
        await running.close()
        if client_auth:
            server.store.webhooks.kubeconfig = None
