"""Validating admission webhooks, called as kube-apiserver calls them: the stored
ValidatingWebhookConfigurations decide which writes go to which webhook, over HTTPS, and a webhook's
refusal reaches the client in the API server's words.

Following kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/admission/plugin/webhook/:

- generic/webhook.go ShouldCallHook, predicates/rules/rules.go: a webhook is called when one of its
  `rules` matches the write (operation, apiGroup, apiVersion, "resource/subresource" and scope, with
  "*" wildcards), its `objectSelector` selects the new or the old object's labels, its
  `namespaceSelector` the labels of the object's namespace (a cluster-scoped object is always selected),
  and every `matchCondition` is true (matchconditions/matcher.go: CEL with `object`, `oldObject` and
  `request`; one false skips the webhook; an error and no false is the failurePolicy's call);
- validating/dispatcher.go: the AdmissionReview (admission.k8s.io/v1) posted to `clientConfig.url`, or
  to `https://NAME.NAMESPACE.svc:PORT/PATH` for a `service` (port 443 unless given), trusting only
  `caBundle`, within `timeoutSeconds` (10 unless given); configurations in name order, webhooks in their
  order, the first refusal answering the request;
- errors/statuserror.go ToStatusErr: a refusal answers with the webhook's status, its code raised to
  400 when below, its message prefixed `admission webhook "NAME" denied the request: ` (the reason
  when there is no message; `... denied the request without explanation` when neither);
- webhook/errors.go ErrCallingWebhook: a webhook that cannot be called, times out or answers
  something that is not an AdmissionReview for this request fails the write with 500 `Internal error
  occurred: failed calling webhook "NAME": ...` under failurePolicy Fail (the default), and is
  passed over under Ignore; a response's `warnings` become Warning headers.

The emulator has no Services or Endpoints of its own: a `service` reference is resolved by the
`resolve` callback its owner gives it (where the demo runs the operator's webhook).

Who the server says it is to a webhook comes from the admission plugin's kubeconfig, as set by
`--admission-control-config-file` (`read_admission_kubeconfig`, then `Webhooks.kubeconfig`):

- apiserver/pkg/admission/config.go ReadAdmissionConfiguration: an AdmissionConfiguration
  (apiserver.config.k8s.io/v1) lists `plugins`, each with its `configuration` inline or in the file at
  `path` (relative to the configuration's directory); webhook/config/kubeconfig.go LoadConfig: the
  ValidatingAdmissionWebhook plugin's WebhookAdmissionConfiguration names a `kubeConfigFile`, which must
  be an absolute path;
- util/webhook/client.go HookClient, authentication.go defaultAuthenticationInfoResolver: the `users`
  entry for a `service` is looked up as `NAME.NAMESPACE.svc:PORT` (for a `url`, its host:port, 443
  unless given): the exact name, then `*.` + each shorter suffix, then (port 443 only) the same without
  the port, then `*`, then the current context's user, else none (anonymous); restConfigFromKubeconfig:
  its `client-certificate`(`-data`) and `client-key`(`-data`) are presented in the TLS handshake, a
  `token`/`tokenFile` is sent as `Authorization: Bearer`, a `username`/`password` as basic auth, and an
  `auth-provider` fails the call ("auth provider not supported").
"""

from __future__ import annotations

import base64
import contextvars
import json
import ssl
import tempfile
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import yaml

from accelpool_demo.apiserver.cel import CompileError, evaluate
from accelpool_demo.apiserver.resources import StatusError, refused, status_body
from accelpool_demo.apiserver.selectors import selects

DEFAULT_TIMEOUT_SECONDS = 10
Resolve = Callable[[str, str, int], tuple[str, int] | None]
"""A Service (namespace, name, port) → the address that serves it, or None where nothing does."""
NamespaceLabels = Callable[[str], Mapping[str, str] | None]


@dataclass(frozen=True)
class UserInfo:
    username: str = "system:admin"
    groups: tuple[str, ...] = ("system:masters", "system:authenticated")
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)


ADMIN = UserInfo()
REQUESTING_USER: contextvars.ContextVar[UserInfo] = contextvars.ContextVar("requesting_user", default=ADMIN)
"""Who sent the request being served (the server sets it as it starts to serve one)."""


@dataclass(frozen=True)
class Attributes:
    """One write as admission sees it (k8s.io/apiserver pkg/admission attributes.go)."""

    operation: str
    """CREATE, UPDATE or DELETE (a PATCH is an UPDATE)."""
    group: str
    version: str
    resource: str
    kind: str
    name: str
    namespace: str | None = None
    subresource: str = ""
    object: Mapping[str, Any] | None = None
    old_object: Mapping[str, Any] | None = None
    user: UserInfo = ADMIN
    dry_run: bool = False


def rule_matches(rule: Mapping[str, Any], attributes: Attributes) -> bool:
    """rules.go Matcher.Matches: scope, operation, group, version, resource/subresource ("*" wildcards)."""
    scope = rule.get("scope", "*")
    namespaced = attributes.namespace is not None
    if (scope == "Namespaced" and not namespaced) or (scope == "Cluster" and namespaced):
        return False

    def listed(items: Sequence[str], value: str) -> bool:
        return any(item in ("*", value) for item in items)

    if not (
        listed(rule.get("operations") or [], attributes.operation)
        and listed(rule.get("apiGroups") or [], attributes.group)
        and listed(rule.get("apiVersions") or [], attributes.version)
    ):
        return False
    for entry in rule.get("resources") or []:
        resource, _, subresource = entry.partition("/")
        if resource in ("*", attributes.resource) and subresource in ("*", attributes.subresource):
            return True
    return False


def admission_request(attributes: Attributes, uid: str) -> dict[str, Any]:
    """The AdmissionRequest (admission.k8s.io/v1) of a write, as request.go CreateAdmissionObjects builds it."""
    gvk = {"group": attributes.group, "version": attributes.version, "kind": attributes.kind}
    gvr = {"group": attributes.group, "version": attributes.version, "resource": attributes.resource}
    user: dict[str, Any] = {"username": attributes.user.username}
    if attributes.user.groups:
        user["groups"] = list(attributes.user.groups)
    if attributes.user.extra:
        user["extra"] = {key: list(values) for key, values in attributes.user.extra.items()}
    request: dict[str, Any] = {
        "uid": uid,
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": attributes.name,
        "operation": attributes.operation,
        "userInfo": user,
        "object": attributes.object,
        "oldObject": attributes.old_object,
        "dryRun": attributes.dry_run,
    }
    if attributes.subresource:
        request["subResource"] = request["requestSubResource"] = attributes.subresource
    if attributes.namespace is not None:
        request["namespace"] = attributes.namespace
    return request


class _CallFailed(Exception):
    """The webhook could not be called or gave no usable answer (webhook/errors.go ErrCallingWebhook)."""


class _Unsupported(Exception):
    """A kubeconfig user the server cannot build a client from."""


class AdmissionConfigurationError(Exception):
    """The admission configuration or its kubeconfig cannot be used; kube-apiserver would not start."""


ADMISSION_PLUGIN = "ValidatingAdmissionWebhook"
WEBHOOK_ADMISSION_KINDS = {
    "apiserver.config.k8s.io/v1": "WebhookAdmissionConfiguration",
    "apiserver.config.k8s.io/v1alpha1": "WebhookAdmission",
}


def read_admission_kubeconfig(config_file: Path) -> dict[str, Any] | None:
    """The kubeconfig the ValidatingAdmissionWebhook plugin reads, from the file kube-apiserver's
    `--admission-control-config-file` names; None when that plugin is not configured (anonymous calls)."""
    document = yaml.safe_load(config_file.read_text())
    if (document or {}).get("kind") != "AdmissionConfiguration":
        raise AdmissionConfigurationError(f"{config_file}: not an AdmissionConfiguration")
    for plugin in document.get("plugins") or []:
        if plugin.get("name") != ADMISSION_PLUGIN:
            continue
        configuration = plugin.get("configuration")
        if configuration is None and plugin.get("path"):
            configuration = yaml.safe_load((config_file.parent / str(plugin["path"])).read_text())
        kind = WEBHOOK_ADMISSION_KINDS.get(str((configuration or {}).get("apiVersion")))
        if kind is None or configuration.get("kind") != kind:
            raise AdmissionConfigurationError(
                f"{config_file}: {ADMISSION_PLUGIN}'s configuration is not one of "
                + ", ".join(f"{version} {name}" for version, name in WEBHOOK_ADMISSION_KINDS.items())
            )
        kubeconfig_file = str(configuration.get("kubeConfigFile") or "")
        if not PurePosixPath(kubeconfig_file).is_absolute():
            raise AdmissionConfigurationError(
                f'kubeConfigFile: Invalid value: "{kubeconfig_file}": must be an absolute file path'
            )
        loaded: dict[str, Any] = yaml.safe_load(Path(kubeconfig_file).read_text()) or {}
        return loaded
    return None


def authentication_info(kubeconfig: Mapping[str, Any] | None, target: str) -> Mapping[str, Any] | None:
    """authentication.go clientConfig: the `user` of the kubeconfig's `users` entry for `target` (host:port)."""
    if not kubeconfig:
        return None
    users = {str(entry.get("name")): entry.get("user") or {} for entry in kubeconfig.get("users") or []}

    def exact_or_wildcard(name: str) -> Mapping[str, Any] | None:
        if name in users:
            return users[name]
        steps = name.split(".")
        for i in range(1, len(steps)):
            wildcard = "*." + ".".join(steps[i:])
            if wildcard in users:
                return users[wildcard]
        return None

    found = exact_or_wildcard(target)
    host, _, port = target.rpartition(":")
    if found is None and port == "443":
        found = exact_or_wildcard(host)
    if found is None:
        found = users.get("*")
    if found is None:
        contexts = {str(c.get("name")): c.get("context") or {} for c in kubeconfig.get("contexts") or []}
        current = contexts.get(str(kubeconfig.get("current-context") or ""), {})
        found = users.get(str(current.get("user") or "")) if current.get("user") else None
    return found


@dataclass(frozen=True)
class _Identity:
    """What a kubeconfig user makes the call carry: a client certificate (PEM files) and headers."""

    certificate: tuple[bytes, bytes] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)


def _identity(user: Mapping[str, Any] | None) -> _Identity:
    """restConfigFromKubeconfig, for what the emulator's calls can carry."""
    if not user:
        return _Identity()
    if user.get("auth-provider"):
        raise _Unsupported("auth provider not supported")
    if user.get("exec"):
        raise _Unsupported("an exec credential plugin: kube-apiserver runs it, the emulator does not")
    headers: dict[str, str] = {}
    token = user.get("token") or (Path(user["tokenFile"]).read_text().strip() if user.get("tokenFile") else "")
    if token:
        headers["Authorization"] = f"Bearer {token}"
    elif user.get("username") or user.get("password"):
        pair = f"{user.get('username') or ''}:{user.get('password') or ''}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
    certificate = None
    if user.get("client-certificate") or user.get("client-certificate-data"):
        certificate = (_pem(user, "client-certificate"), _pem(user, "client-key"))
    return _Identity(certificate, headers)


def _pem(user: Mapping[str, Any], key: str) -> bytes:
    if user.get(f"{key}-data"):
        return base64.b64decode(str(user[f"{key}-data"]))
    return Path(str(user.get(key))).read_bytes()


class Webhooks:
    """The validating webhooks of the stored configurations, called for each write they match."""

    def __init__(
        self,
        configurations: Callable[[], list[Mapping[str, Any]]],
        *,
        resolve: Resolve,
        namespace_labels: NamespaceLabels,
        kubeconfig: Mapping[str, Any] | None = None,
    ) -> None:
        self._configurations = configurations
        self._resolve = resolve
        self._namespace_labels = namespace_labels
        self.kubeconfig = kubeconfig
        """The admission plugin's kubeconfig (`read_admission_kubeconfig`): who the server is to each
        webhook. None: every call is anonymous, as with no admission configuration."""

    async def validate(self, attributes: Attributes) -> list[str]:
        """The warnings of the webhooks that admit the write; raises the API server's error for one that
        refuses it or, under failurePolicy Fail, cannot be asked."""
        warnings: list[str] = []
        for configuration in sorted(self._configurations(), key=lambda c: str(c["metadata"]["name"])):
            for hook in configuration.get("webhooks") or []:
                warnings += await self._call_if_matching(hook, attributes)
        return warnings

    def _selected(self, hook: Mapping[str, Any], attributes: Attributes) -> bool:
        if not any(rule_matches(rule, attributes) for rule in hook.get("rules") or []):
            return False
        labels = [
            ((obj or {}).get("metadata") or {}).get("labels") or {}
            for obj in (attributes.object, attributes.old_object)
            if obj is not None
        ]
        if hook.get("objectSelector") and not any(selects(hook["objectSelector"], found) for found in labels):
            return False
        if hook.get("namespaceSelector") and attributes.namespace is not None:
            namespace = self._namespace_labels(attributes.namespace)
            if not selects(hook["namespaceSelector"], namespace or {}):
                return False
        return True

    async def _call_if_matching(self, hook: Mapping[str, Any], attributes: Attributes) -> list[str]:
        if not self._selected(hook, attributes):
            return []
        name = str(hook["name"])
        fail = hook.get("failurePolicy", "Fail") == "Fail"
        uid = str(uuid.uuid4())
        request = admission_request(attributes, uid)
        try:
            if not _conditions_hold(hook.get("matchConditions") or [], attributes, request):
                return []
            return await self._call(hook, request)
        except _CallFailed as failure:
            if not fail:
                return []
            raise refused(
                500, "InternalError", f'Internal error occurred: failed calling webhook "{name}": {failure}'
            ) from failure

    async def _call(self, hook: Mapping[str, Any], request: dict[str, Any]) -> list[str]:
        name = str(hook["name"])
        client = hook.get("clientConfig") or {}
        url, server_name = self._endpoint(client)
        timeout = int(hook.get("timeoutSeconds") or DEFAULT_TIMEOUT_SECONDS)
        target = f"{url}?timeout={timeout}s"
        review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
        try:  # validating/dispatcher.go callHook: GetRESTClient
            identity = _identity(authentication_info(self.kubeconfig, _auth_target(client)))
            context = _trusting(client.get("caBundle"), identity.certificate)
        except (_Unsupported, OSError, ValueError, ssl.SSLError) as error:
            raise _CallFailed(f"could not get REST client: {error}") from error
        try:
            async with (
                aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=timeout)) as session,
                session.post(
                    target,
                    json=review,
                    ssl=context,
                    server_hostname=server_name,
                    headers={"User-Agent": "kube-apiserver-admission", **identity.headers},
                ) as response,
            ):
                body = await response.read()
                status = response.status
        except TimeoutError as error:
            raise _CallFailed(f'failed to call webhook: Post "{target}": context deadline exceeded') from error
        except (aiohttp.ClientError, ssl.SSLError, OSError) as error:
            raise _CallFailed(f'failed to call webhook: Post "{target}": {error}') from error
        if status != 200:
            raise _CallFailed(f"failed to call webhook: the server responded with the status code {status}")
        try:
            answer = json.loads(body)["response"]
        except (ValueError, KeyError, TypeError) as error:
            raise _CallFailed("received invalid webhook response: expected an AdmissionReview") from error
        if not isinstance(answer, dict):
            raise _CallFailed("received invalid webhook response: expected an AdmissionResponse")
        if answer.get("uid") != request["uid"]:
            raise _CallFailed(f"expected response.uid={request['uid']!r}, got {answer.get('uid')!r}")
        warnings = [str(w) for w in answer.get("warnings") or []]
        if answer.get("allowed") is True:
            return warnings
        raise denied(name, answer.get("status"))

    def _endpoint(self, client: Mapping[str, Any]) -> tuple[str, str | None]:
        """The URL to post to, and the TLS server name to check (a Service's DNS name)."""
        if client.get("url"):
            return str(client["url"]), None
        service = client.get("service") or {}
        namespace, name = str(service.get("namespace")), str(service.get("name"))
        port = int(service.get("port") or 443)
        address = self._resolve(namespace, name, port)
        if address is None:
            raise _CallFailed(f'failed to call webhook: service "{name}" not found')
        host, served_port = address
        return f"https://{host}:{served_port}{service.get('path') or ''}", f"{name}.{namespace}.svc"


def _conditions_hold(
    conditions: Sequence[Mapping[str, Any]], attributes: Attributes, request: Mapping[str, Any]
) -> bool:
    """matcher.go: False when one condition is false; an error (and none false) fails the call."""
    variables = {"object": attributes.object, "oldObject": attributes.old_object, "request": request}
    errors = []
    for condition in conditions:
        try:
            outcome = evaluate(condition["expression"], variables)
        except CompileError as error:
            errors.append(f"compilation error: {error}")
            continue
        if outcome.error is not None:
            errors.append(f"expression '{condition['expression']}' resulted in error: {outcome.error}")
        elif outcome.value is False:
            return False
    if errors:
        raise _CallFailed("failed to evaluate match condition: " + "; ".join(errors))
    return True


def _auth_target(client: Mapping[str, Any]) -> str:
    """client.go HookClient: the host:port whose kubeconfig user calls this webhook."""
    if client.get("url"):
        parts = urlsplit(str(client["url"]))
        return parts.netloc if parts.port else f"{parts.hostname}:443"
    service = client.get("service") or {}
    return f"{service.get('name')}.{service.get('namespace')}.svc:{int(service.get('port') or 443)}"


def _trusting(ca_bundle: str | None, certificate: tuple[bytes, bytes] | None = None) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_bundle:
        context = ssl.create_default_context(cadata=base64.b64decode(ca_bundle).decode())
    if certificate is not None:
        # OpenSSL reads a certificate chain from files only: written for the moment it takes to load them.
        with tempfile.TemporaryDirectory(prefix="accelpool-webhook-client-") as directory:
            cert_file, key_file = Path(directory) / "tls.crt", Path(directory) / "tls.key"
            cert_file.write_bytes(certificate[0])
            key_file.write_bytes(certificate[1])
            context.load_cert_chain(cert_file, key_file)
    return context


def denied(name: str, result: Any) -> StatusError:
    """statuserror.go ToStatusErr: the webhook's status, as the API server returns it."""
    status: dict[str, Any] = dict(result) if isinstance(result, dict) else {}
    code = int(status.get("code") or 0)
    code = code if code >= 400 else 400
    prefix = f'admission webhook "{name}" denied the request'
    if status.get("message"):
        message = f"{prefix}: {status['message']}"
    elif status.get("reason"):
        message = f"{prefix}: {status['reason']}"
    else:
        message = f"{prefix} without explanation"
    body = status_body(code, message, status.get("reason") or None)
    if status.get("details"):
        body["details"] = status["details"]
    return StatusError.of(body)
