"""webhook.clientAuth with the real helm: the API server's client certificate, required by the operator.

Off by default (managed control planes cannot present one). On, the operator gets `--webhook-client-ca`
pointing at the CA mounted from one of three sources: a CA and client certificate Helm generates (and keeps
across upgrades, like the serving pair), `caBundle` (a ConfigMap; a changed bundle restarts the pods), or an
existing Secret. Each render is then served by the operator's real webhook server and called by the emulated
API server (accelpool_demo.apiserver.webhooks) as kube-apiserver calls it: with the client certificate its
admission kubeconfig names, ComputePools are admitted or refused on their merits; without, the call fails.
"""

from __future__ import annotations

import base64
import copy
import hashlib
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

import accelpool_api as api
from accelpool.runtime import webhook as webhook_server
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver.resources import StatusError
from accelpool_demo.apiserver.webhooks import Attributes, Webhooks
from tests.contract.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    HelmFailed,
    Objects,
    as_installed,
    find,
    one,
    operator_config,
    operator_deployment,
    render,
    render_upgrade,
    run_helm,
    template_text,
)
from tests.support.admission_webhook import ChartCertificates
from tests.support.builders import pool_body

pytestmark = pytest.mark.contract

ON = ["webhook.clientAuth.enabled=true"]
CA_FILE = "/etc/accelpool/webhook-client/ca.crt"
CLIENT_SECRET = f"{RELEASE}-operator-webhook-client"
CLIENT_CONFIGMAP = f"{RELEASE}-operator-webhook-client-ca"
VALID = pool_body("valid", {"accelerator": "H100"})
REFUSED = pool_body("refused", {"accelerator": "H100", "mig": {"profile": "9g.99gb"}})


def _create(obj: dict[str, Any]) -> Attributes:
    name = str(obj["metadata"]["name"])
    return Attributes("CREATE", api.GROUP, api.VERSION, api.PLURAL, api.KIND, name, object=obj)


def _client_ca_source(objects: Objects) -> dict[str, Any]:
    """The volume the operator's --webhook-client-ca is read from, checked to be mounted where the flag says."""
    deployment, container = operator_deployment(objects)
    assert operator_config(objects).webhook_client_ca == CA_FILE
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    mount = mounts[str(Path(CA_FILE).parent)]
    assert mount["readOnly"] is True
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    volume = dict(volumes[mount["name"]])
    source = volume.get("secret") or volume["configMap"]
    assert [item["path"] for item in source["items"]] == [Path(CA_FILE).name]  # the CA file and nothing else
    return volume


def _decoded(secret: dict[str, Any], key: str) -> bytes:
    return base64.b64decode(secret["data"][key])


def _kubeconfig(objects: Objects, certificate: bytes, key: bytes) -> dict[str, Any]:
    """The API server's admission kubeconfig: a user named after the configuration's Service presents them."""
    [hook] = one(objects, "ValidatingWebhookConfiguration")["webhooks"]
    service = hook["clientConfig"]["service"]
    user = {
        "client-certificate-data": base64.b64encode(certificate).decode(),
        "client-key-data": base64.b64encode(key).decode(),
    }
    return {"users": [{"name": f"{service['name']}.{service['namespace']}.svc", "user": user}]}


@asynccontextmanager
async def _served(
    objects: Objects, client_ca: bytes, tmp_path: Path, names: Sequence[str] = ()
) -> AsyncIterator[Callable[[dict[str, Any] | None], Webhooks]]:
    """The render's serving pair and `client_ca` (the mounted CA file) served by the operator's webhook; yields
    a factory of API servers calling the render's configuration with a given admission kubeconfig."""
    certificates = ChartCertificates.from_chart(objects, tmp_path / "tls")
    ca_file = tmp_path / "client-ca" / "ca.crt"
    ca_file.parent.mkdir(parents=True)
    ca_file.write_bytes(client_ca)
    running = await webhook_server.serve(
        certificates.cert_dir, 0, host="127.0.0.1", client_ca=ca_file, client_names=names
    )
    configuration = copy.deepcopy(one(objects, "ValidatingWebhookConfiguration"))

    def api_server(kubeconfig: dict[str, Any] | None) -> Webhooks:
        return Webhooks(
            lambda: [configuration],
            resolve=lambda *_: ("127.0.0.1", running.port),
            namespace_labels=lambda _: None,
            kubeconfig=kubeconfig,
        )

    try:
        yield api_server
    finally:
        await running.close()


async def _admits_on_merit(api_server: Webhooks) -> None:
    assert await api_server.validate(_create(VALID)) == []
    with pytest.raises(StatusError) as refused:
        await api_server.validate(_create(REFUSED))
    assert refused.value.body["code"] == 422
    assert refused.value.body["message"].startswith('admission webhook "computepools.accelpool.io" denied the request')


async def _cannot_call(api_server: Webhooks) -> str:
    with pytest.raises(StatusError) as failed:
        await api_server.validate(_create(VALID))
    assert failed.value.body["code"] == 500
    message = str(failed.value.body["message"])
    assert message.startswith('Internal error occurred: failed calling webhook "computepools.accelpool.io": ')
    return message


# ---- Off by default.


def test_off_by_default(default_objects: Objects) -> None:
    _, container = operator_deployment(default_objects)
    assert not [a for a in container["args"] if a.startswith("--webhook-client")]
    assert operator_config(default_objects).webhook_client_ca is None
    assert "webhook-client-ca" not in {m["name"] for m in container["volumeMounts"]}
    assert not find(default_objects, "Secret", CLIENT_SECRET) and not find(
        default_objects, "ConfigMap", CLIENT_CONFIGMAP
    )


# ---- Helm generates the CA and the API server's certificate.


@pytest.fixture(scope="module")
def generated(helm: str) -> Objects:
    return render(helm, set_values=ON)


def test_helm_generates_a_client_ca_and_the_api_servers_certificate(generated: Objects) -> None:
    volume = _client_ca_source(generated)
    assert volume["secret"]["secretName"] == CLIENT_SECRET and volume["secret"]["items"][0]["key"] == "ca.crt"
    secret = one(generated, "Secret", CLIENT_SECRET)
    assert secret["type"] == "Opaque" and set(secret["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    ca = x509.load_pem_x509_certificate(_decoded(secret, "ca.crt"))
    client = x509.load_pem_x509_certificate(_decoded(secret, "tls.crt"))
    client.verify_directly_issued_by(ca)
    assert client.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == "kube-apiserver"
    usages = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usages
    serving = one(generated, "Secret", f"{RELEASE}-operator-webhook-tls")
    assert _decoded(serving, "ca.crt") != _decoded(secret, "ca.crt")  # one CA per direction
    assert operator_config(generated).webhook_client_names == ()


async def test_the_api_server_with_the_generated_certificate_is_admitted(generated: Objects, tmp_path: Path) -> None:
    secret = one(generated, "Secret", CLIENT_SECRET)
    async with _served(generated, _decoded(secret, "ca.crt"), tmp_path) as api_server:
        await _admits_on_merit(
            api_server(_kubeconfig(generated, _decoded(secret, "tls.crt"), _decoded(secret, "tls.key")))
        )
        await _cannot_call(api_server(None))  # no admission kubeconfig: kube-apiserver calls anonymously
        impostor = demo_webhook.ClientCertificates.generate()  # the right name, another CA
        await _cannot_call(api_server(_kubeconfig(generated, impostor.certificate, impostor.key)))


async def test_an_upgrade_keeps_the_client_ca(helm: str, generated: Objects, tmp_path: Path) -> None:
    installed = as_installed(one(generated, "Secret", CLIENT_SECRET))
    upgraded = await render_upgrade(helm, generated, [installed], tmp_path, set_values=ON)
    assert one(upgraded, "Secret", CLIENT_SECRET)["data"] == installed["data"]


async def test_the_key_may_leave_the_cluster_once_copied(helm: str, generated: Objects, tmp_path: Path) -> None:
    """With only ca.crt left in the Secret, an upgrade keeps that CA and does not bring the key back."""
    installed = as_installed(one(generated, "Secret", CLIENT_SECRET))
    installed["data"] = {"ca.crt": installed["data"]["ca.crt"]}
    upgraded = await render_upgrade(helm, generated, [installed], tmp_path, set_values=ON)
    assert one(upgraded, "Secret", CLIENT_SECRET)["data"] == installed["data"]
    assert _client_ca_source(upgraded)["secret"]["secretName"] == CLIENT_SECRET


def test_each_render_without_a_cluster_generates_a_new_client_ca(helm: str, generated: Objects) -> None:
    """Why the lookup: `helm template` and Argo CD cannot read the Secret back (README: use caBundle there)."""
    again = render(helm, set_values=ON)
    assert (
        one(again, "Secret", CLIENT_SECRET)["data"]["ca.crt"]
        != one(generated, "Secret", CLIENT_SECRET)["data"]["ca.crt"]
    )


# ---- Your CA: caBundle, or an existing Secret.


async def test_a_ca_bundle_is_mounted_from_a_config_map(helm: str, tmp_path: Path) -> None:
    client = demo_webhook.ClientCertificates.generate("apiserver-webhook-client")
    values = [
        *ON,
        f"webhook.clientAuth.caBundle={client.ca.decode()}",
        "webhook.clientAuth.allowedNames={apiserver-webhook-client}",
    ]
    objects = render(helm, set_values=values)
    volume = _client_ca_source(objects)
    assert volume["configMap"]["name"] == CLIENT_CONFIGMAP
    mounted = one(objects, "ConfigMap", CLIENT_CONFIGMAP)["data"]["ca.crt"].encode()
    assert mounted.strip() == client.ca.strip()
    assert not find(objects, "Secret", CLIENT_SECRET)
    assert operator_config(objects).webhook_client_names == ("apiserver-webhook-client",)
    async with _served(objects, mounted, tmp_path, names=operator_config(objects).webhook_client_names) as api_server:
        await _admits_on_merit(api_server(_kubeconfig(objects, client.certificate, client.key)))
        other = client.sign("someone-else")  # the CA signed it, the name is not allowed: 403
        assert "the server responded with the status code 403" in await _cannot_call(
            api_server(_kubeconfig(objects, other.certificate, other.key))
        )


def test_a_changed_ca_bundle_restarts_the_operator(helm: str) -> None:
    """A CA taken out of the bundle must stop being trusted: the operator only adds CAs while it runs."""

    def annotation(bundle: bytes) -> str:
        objects = render(helm, set_values=[*ON, f"webhook.clientAuth.caBundle={bundle.decode()}"])
        deployment, _ = operator_deployment(objects)
        value: str = deployment["spec"]["template"]["metadata"]["annotations"]["accelpool.io/webhook-client-ca-sha256"]
        return value

    first, second = demo_webhook.ClientCertificates.generate().ca, demo_webhook.ClientCertificates.generate().ca
    assert annotation(first) == hashlib.sha256(first.strip()).hexdigest()
    assert annotation(first) != annotation(second)
    generated, _ = operator_deployment(render(helm, set_values=ON))
    assert "annotations" not in generated["spec"]["template"]["metadata"]


def test_an_existing_secret_is_mounted_by_its_key(helm: str) -> None:
    objects = render(
        helm,
        set_values=[
            *ON,
            "webhook.clientAuth.caSecretName=apiserver-client-ca",
            "webhook.clientAuth.caSecretKey=root.pem",
        ],
    )
    volume = _client_ca_source(objects)
    assert volume["secret"]["secretName"] == "apiserver-client-ca"
    assert volume["secret"]["items"] == [{"key": "root.pem", "path": "ca.crt"}]
    assert not find(objects, "Secret", CLIENT_SECRET) and not find(objects, "ConfigMap", CLIENT_CONFIGMAP)


def test_full_values_use_a_cert_manager_ca_secret(full_objects: Objects) -> None:
    volume = _client_ca_source(full_objects)
    assert volume["secret"] == {
        "secretName": "apiserver-webhook-client-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
        "defaultMode": 0o440,
    }
    assert operator_config(full_objects).webhook_client_names == ("kube-apiserver",)


def test_the_webhook_off_takes_client_auth_with_it(helm: str) -> None:
    objects = render(helm, set_values=[*ON, "webhook.enabled=false"])
    _, container = operator_deployment(objects)
    assert not [a for a in container["args"] if a.startswith("--webhook-client")]
    assert not find(objects, "Secret", CLIENT_SECRET)


def test_notes_say_what_the_control_plane_needs(helm: str) -> None:
    notes = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client", "--set", ON[0])
    assert (
        "Client authentication: the webhook refuses any caller without a client certificate from the CA Helm generated"
        in notes
    )
    assert f"get secret {CLIENT_SECRET} -o jsonpath='{{.data.tls\\.key}}'" in notes
    assert f'user "{RELEASE}-operator-webhook.{NAMESPACE}.svc"' in notes


# ---- Bad values are refused by values.schema.json.


@pytest.mark.parametrize(
    ("assignment", "says"),
    [
        ("webhook.clientAuth.enabled=yes", "/webhook/clientAuth/enabled"),
        ("webhook.clientAuth.caBundle=not-a-certificate", "/webhook/clientAuth/caBundle"),
        ("webhook.clientAuth.caSecretName=Not_A_Name", "/webhook/clientAuth/caSecretName"),
        ("webhook.clientAuth.caSecretKey=a/b", "/webhook/clientAuth/caSecretKey"),
        ("webhook.clientAuth.allowedNames={a b}", "/webhook/clientAuth/allowedNames/0"),
        ("webhook.clientAuth.ca=x", "additional properties 'ca'"),
    ],
)
def test_schema_rejects_bad_client_auth_values(helm: str, assignment: str, says: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        template_text(helm, set_values=[*ON, assignment])
    assert says in str(refused.value)


PEM = demo_webhook.ClientCertificates.generate().ca.decode()
WHILE_OFF = "is set but webhook.clientAuth.enabled is false, so nothing would check client certificates"


@pytest.mark.parametrize(
    ("assignments", "says"),
    [
        ([f"webhook.clientAuth.caBundle={PEM}"], f"webhook.clientAuth.caBundle {WHILE_OFF}"),  # surely a mistake
        (["webhook.clientAuth.caSecretName=apiserver-client-ca"], f"webhook.clientAuth.caSecretName {WHILE_OFF}"),
        (["webhook.clientAuth.allowedNames={kube-apiserver}"], f"webhook.clientAuth.allowedNames {WHILE_OFF}"),
        (
            [*ON, f"webhook.clientAuth.caBundle={PEM}", "webhook.clientAuth.caSecretName=apiserver-client-ca"],
            "webhook.clientAuth.caBundle and webhook.clientAuth.caSecretName (apiserver-client-ca) are both set",
        ),
    ],
    ids=["bundle-while-off", "secret-while-off", "names-while-off", "bundle-and-secret"],
)
def test_settings_that_would_be_ignored_are_refused(helm: str, assignments: list[str], says: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        template_text(helm, set_values=assignments)
    assert says in str(refused.value)
    assert "webhook.enabled=false" not in assignments
    with pytest.raises(HelmFailed):  # the webhook off does not hide them
        template_text(helm, set_values=[*assignments, "webhook.enabled=false"])
