"""The resources the emulated API server serves, and how it names them and their objects.

Declarative: every resource accelpool, kopf, the agents, the demo's simulators and kubectl read or
write, with its kind, scope, short names and subresources, as discovery announces them; and the
API server's error answers (`kmock.KubernetesError`, rendered as a `Status`) in its own words.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import kmock

import accelpool_api as api
from accelpool_demo.apiserver import dra

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
POOLS = f"{api.GROUP}/{api.VERSION}/{api.PLURAL}"
NODES = "v1/nodes"
PODS = "v1/pods"
BUDGETS = "policy/v1/poddisruptionbudgets"
EVENTS = "v1/events"
REPLICA_SETS = "apps/v1/replicasets"
DEPLOYMENTS = "apps/v1/deployments"
STATEFUL_SETS = "apps/v1/statefulsets"
SERVICE_ACCOUNTS = "v1/serviceaccounts"
RUNTIME_CLASSES = "node.k8s.io/v1/runtimeclasses"
CLUSTER_PEERINGS = "kopf.dev/v1/clusterkopfpeerings"
NAMESPACED_PEERINGS = "kopf.dev/v1/kopfpeerings"


def _info(kind: str, namespaced: bool, *shortnames: str, subresources: tuple[str, ...] = ()) -> kmock.ResourceInfo:
    return kmock.ResourceInfo(
        kind=kind,
        singular=kind.lower(),
        namespaced=namespaced,
        shortnames=set(shortnames),
        subresources=set(subresources),
        verbs=set(VERBS),
    )


WEBHOOK_CONFIGURATIONS = "admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
ADMISSION_POLICIES = "admissionregistration.k8s.io/v1/validatingadmissionpolicies"
ADMISSION_POLICY_BINDINGS = "admissionregistration.k8s.io/v1/validatingadmissionpolicybindings"

RESOURCES: dict[str, kmock.ResourceInfo] = {
    "v1/namespaces": _info("Namespace", False, "ns"),
    NODES: _info("Node", False, "no", subresources=("status",)),
    "v1/events": _info("Event", True, "ev"),
    "events.k8s.io/v1/events": _info("Event", True, "ev"),  # the core Events, converted (`conversion`)
    "v1/configmaps": _info("ConfigMap", True, "cm"),
    PODS: _info("Pod", True, "po", subresources=("status", "eviction")),
    SERVICE_ACCOUNTS: _info("ServiceAccount", True, "sa"),
    "apps/v1/daemonsets": _info("DaemonSet", True, "ds", subresources=("status",)),
    # The pods' controllers whose scale the disruption controller reads (`disruption`); stored, never run.
    REPLICA_SETS: _info("ReplicaSet", True, "rs", subresources=("status",)),
    DEPLOYMENTS: _info("Deployment", True, "deploy", subresources=("status",)),
    STATEFUL_SETS: _info("StatefulSet", True, "sts", subresources=("status",)),
    BUDGETS: _info("PodDisruptionBudget", True, "pdb", subresources=("status",)),
    RUNTIME_CLASSES: _info("RuntimeClass", False),
    # What admission is configured with: the webhooks to call (`webhooks`), the policies to evaluate (`policies`).
    WEBHOOK_CONFIGURATIONS: _info("ValidatingWebhookConfiguration", False),
    ADMISSION_POLICIES: _info("ValidatingAdmissionPolicy", False, subresources=("status",)),
    ADMISSION_POLICY_BINDINGS: _info("ValidatingAdmissionPolicyBinding", False),
    "apiextensions.k8s.io/v1/customresourcedefinitions": _info(
        "CustomResourceDefinition", False, "crd", "crds", subresources=("status",)
    ),
    POOLS: kmock.ResourceInfo(
        kind=api.KIND,
        singular=api.SINGULAR,
        namespaced=False,
        shortnames=set(api.SHORT_NAMES),
        categories=set(api.CATEGORIES),
        subresources={"status", "scale"},
        verbs=set(VERBS),
    ),
    # kopf's peering resources (kopf/_cogs/structs/references.py), as its documented CRDs define them:
    # no status subresource (kopf patches `.status` of the object itself).
    CLUSTER_PEERINGS: _info("ClusterKopfPeering", False),
    NAMESPACED_PEERINGS: _info("KopfPeering", True),
}
"""Every resource served whatever the release, keyed `group/version/plural` (`v1/plural` for the core group);
the release's own (resource.k8s.io) are `dra.served`'s."""

CUSTOM = frozenset({POOLS, CLUSTER_PEERINGS, NAMESPACED_PEERINGS})
"""Custom resources: no strategic merge patch (415), as the API server answers for CRDs."""
STATUS_RESET_ON_CREATE = frozenset(
    {
        POOLS,
        "apps/v1/daemonsets",
        REPLICA_SETS,
        DEPLOYMENTS,
        STATEFUL_SETS,
        "apiextensions.k8s.io/v1/customresourcedefinitions",
    }
)
"""Resources whose create strategy drops the status sent (a CRD with a status subresource, the apps kinds;
PodDisruptionBudgets get a zero status instead: `writes.created`)."""


def key_of(resource: kmock.resource) -> str:
    """`v1/nodes`, `apps/v1/daemonsets`: a resource as `RESOURCES` keys it."""
    prefix = f"{resource.group}/" if resource.group else ""
    return f"{prefix}{resource.version}/{resource.plural}"


def key_of_kind(api_version: str, kind: str) -> str | None:
    """The served resource of an object's apiVersion and kind (an ownerReference's), or None."""
    for key, info in RESOURCES.items():
        if info.kind == kind and key.rsplit("/", 1)[0] == api_version:
            return key
    return None


def kind_of(resource: kmock.resource) -> str:
    info = RESOURCES.get(key_of(resource)) or dra.KNOWN.get(key_of(resource))
    return info.kind if info is not None and info.kind else str(resource.plural).capitalize()


def api_version_of(resource: kmock.resource) -> str:
    return f"{resource.group}/{resource.version}" if resource.group else str(resource.version)


def qualified(resource: kmock.resource) -> str:
    """`daemonsets.apps`, `nodes`: how the API server names a resource in its messages."""
    return f"{resource.plural}.{resource.group}" if resource.group else str(resource.plural)


def parse_path(path: str) -> tuple[str, str | None, str | None, str | None]:
    """`/api/v1/namespaces/ns/pods/x/status` → (`v1/pods`, `ns`, `x`, `status`): a URL's resource key,
    namespace, name and subresource (for tests that address stored objects by path)."""
    parts = path.strip("/").split("/")
    prefix, parts = (parts[:2], parts[2:]) if parts[0] == "api" else (parts[:3], parts[3:])
    group_version = "/".join(prefix[1:])
    namespace = None
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) != 2:
        namespace, parts = parts[1], parts[2:]
    plural = parts[0]
    name = parts[1] if len(parts) > 1 else None
    subresource = parts[2] if len(parts) > 2 else None
    return f"{group_version}/{plural}", namespace, name, subresource


# ---------------------------------------------------------------- the API server's error answers


@attrs.frozen
class StatusError(kmock.KubernetesError):
    """An answer rendered as exactly this `Status` (no reason or details added), with its headers:
    `errors.NewTooManyRequests`' `Retry-After`, or a Status the handler returned (reason-less)."""

    body: Mapping[str, Any] = attrs.field(factory=dict)
    headers: Mapping[str, str] = attrs.field(factory=dict)

    @classmethod
    def of(cls, body: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> StatusError:
        reason, message, details = body.get("reason"), body.get("message"), body.get("details")
        return cls(int(body["code"]), reason, message, details, dict(body), dict(headers or {}))


def status_body(code: int, message: str, reason: str | None = None, **details: Any) -> dict[str, Any]:
    """A failure `Status` as metav1.Status renders it: reason and details left out when empty."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    body["message"] = message
    if reason:
        body["reason"] = reason
    if details:
        body["details"] = details
    body["code"] = code
    return body


def refused(code: int, reason: str, message: str, **details: Any) -> StatusError:
    """An error answered exactly as the API server's `StatusError` renders it (details only when it has them)."""
    return StatusError.of(status_body(code, message, reason, **details))


def error(status: int, reason: str, message: str, details: Mapping[str, Any] | None = None) -> kmock.KubernetesError:
    """An error answered as a `Status` with this reason and message, and its details when given (`{}` too)."""
    return kmock.KubernetesError(status, reason, message, dict(details) if details is not None else None)


def rendered(exc: kmock.KubernetesError) -> dict[str, Any]:
    """The `Status` of an error as metav1.Status encodes it: no reason or details when it has none."""
    body: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    if exc.message:
        body["message"] = exc.message
    if exc.reason:
        body["reason"] = exc.reason
    if exc.details is not None:
        body["details"] = exc.details
    body["code"] = exc.status
    return body


def _object_details(resource: kmock.resource, name: str) -> dict[str, Any]:
    """An object's `Status` details (k8s.io/apimachinery/pkg/api/errors: `kind` is the resource)."""
    details: dict[str, Any] = {"name": name}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = str(resource.plural)
    return details


def not_found(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    """errors.NewNotFound."""
    return error(404, "NotFound", f'{qualified(resource)} "{name}" not found', _object_details(resource, name))


def already_exists(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    """errors.NewAlreadyExists."""
    return error(
        409, "AlreadyExists", f'{qualified(resource)} "{name}" already exists', _object_details(resource, name)
    )


def conflict(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    """errors.NewConflict for a stale resourceVersion (k8s.io/apiserver/pkg/registry/generic/registry/store.go)."""
    return error(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {qualified(resource)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
        _object_details(resource, name),
    )


def forbidden(resource: str, name: str, why: str) -> kmock.KubernetesError:
    """`admission.NewForbidden` (k8s.io/apiserver/pkg/admission/errors.go): `pods "x" is forbidden: why`."""
    return error(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}')


def bad_request(message: str) -> kmock.KubernetesError:
    """errors.NewBadRequest: no details."""
    return error(400, "BadRequest", message)


def internal(message: str) -> kmock.KubernetesError:
    """What the API server answers for an error that is not a Status (a Go error): 500, no reason."""
    return error(500, "", message)


def invalid(message: str, details: Mapping[str, Any] | None = None) -> kmock.KubernetesError:
    return error(422, "Invalid", message, details)
