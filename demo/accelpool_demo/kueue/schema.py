"""Kueue's ResourceFlavor and ClusterQueue as the demo serves them when Kueue's published CRDs are not at hand.

Written here, not taken from Kueue: the v1beta2 kinds (Kueue's storage version, `accelpool.decide.kueue.VERSION`)
with their names, scope and `status` subresource as Kueue declares them, and a structural schema of only
the fields accelpool reads and writes (`accelpool.decide.kueue`, `accelpool.runtime.controller.kueue`) and the demo's
ClusterQueue sets (`cluster-queue.yaml`):

- ResourceFlavor `spec`: `nodeLabels`, `nodeTaints`, `tolerations` (at most 8 each, as Kueue allows;
  `accelpool.decide.kueue.plan.MAX_TOLERATIONS` relies on it);
- ClusterQueue `spec`: `namespaceSelector`, `cohortName`, and `resourceGroups[]` (`coveredResources`,
  `flavors[].name`, `flavors[].resources[]` with `name`, `nominalQuota`, `borrowingLimit`,
  `lendingLimit`), with Kueue's bounds, list types and required fields; `status`, which Kueue's
  controllers write (none runs in the demo), kept as it is written.

Kueue's other fields (`queueingStrategy`, `preemption`, a flavor's `topologyName`, ...) are kept as given
and not checked (`x-kubernetes-preserve-unknown-fields` on each `spec` and `status`), and there are no CEL
rules: the published CRDs check all of that, and the demo serves them instead whenever they are found
(`accelpool_demo.kueue.published_dir`). tests/integration/demo/test_kueue.py holds every field this schema
declares to the published CRDs: same path, same type, same bounds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

GROUP = "kueue.x-k8s.io"
VERSION = "v1beta2"
MAX_FLAVOR_ITEMS = 8
"""A ResourceFlavor's nodeLabels, nodeTaints and tolerations: at most this many each."""
MAX_RESOURCE_GROUPS = 16
MAX_GROUP_ITEMS = 64
"""A resource group's coveredResources and flavors, and a flavor's resources: at most this many each."""

Schema = dict[str, Any]


def _string() -> Schema:
    return {"type": "string"}


def _object(properties: Mapping[str, Schema], *, required: Iterable[str] = (), open_: bool = False) -> Schema:
    """An object of these properties; `open_`: other properties are kept as they are, unchecked."""
    node: Schema = {"type": "object", "properties": dict(properties)}
    if required:
        node["required"] = list(required)
    if open_:
        node["x-kubernetes-preserve-unknown-fields"] = True
    return node


def _string_map(**bounds: int) -> Schema:
    return {"type": "object", "additionalProperties": _string(), **bounds}


def _atomic_list(items: Schema, **bounds: int) -> Schema:
    return {"type": "array", "items": items, "x-kubernetes-list-type": "atomic", **bounds}


def _map_list(items: Schema, key: str, **bounds: int) -> Schema:
    """A list of objects keyed by `key` (a server-side apply list map)."""
    return {
        "type": "array",
        "items": items,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": [key],
        **bounds,
    }


def _quantity() -> Schema:
    """A Kubernetes quantity: `8` or `"2Ti"`."""
    return {"anyOf": [{"type": "integer"}, {"type": "string"}], "x-kubernetes-int-or-string": True}


def _toleration() -> Schema:
    return _object(
        {
            "key": _string(),
            "operator": _string(),
            "value": _string(),
            "effect": _string(),
            "tolerationSeconds": {"type": "integer", "format": "int64"},
        }
    )


def _taint() -> Schema:
    return _object({"key": _string(), "value": _string(), "effect": _string()}, required=("effect", "key"))


def resource_flavor_spec() -> Schema:
    node_labels = _string_map(maxProperties=MAX_FLAVOR_ITEMS)
    node_labels["x-kubernetes-map-type"] = "atomic"
    return _object(
        {
            "nodeLabels": node_labels,
            "nodeTaints": _atomic_list(_taint(), maxItems=MAX_FLAVOR_ITEMS),
            "tolerations": _atomic_list(_toleration(), maxItems=MAX_FLAVOR_ITEMS),
        },
        open_=True,
    )


def _resource_quota() -> Schema:
    return _object(
        {"name": _string(), "nominalQuota": _quantity(), "borrowingLimit": _quantity(), "lendingLimit": _quantity()},
        required=("name", "nominalQuota"),
    )


def _flavor_quotas() -> Schema:
    resources = _map_list(_resource_quota(), "name", minItems=1, maxItems=MAX_GROUP_ITEMS)
    return _object({"name": _string(), "resources": resources}, required=("name", "resources"))


def _resource_group() -> Schema:
    return _object(
        {
            "coveredResources": _atomic_list(_string(), minItems=1, maxItems=MAX_GROUP_ITEMS),
            "flavors": _map_list(_flavor_quotas(), "name", minItems=1, maxItems=MAX_GROUP_ITEMS),
        },
        required=("coveredResources", "flavors"),
    )


def _label_selector() -> Schema:
    expression = _object(
        {"key": _string(), "operator": _string(), "values": _atomic_list(_string())}, required=("key", "operator")
    )
    selector = _object({"matchLabels": _string_map(), "matchExpressions": _atomic_list(expression)})
    selector["x-kubernetes-map-type"] = "atomic"
    return selector


def cluster_queue_spec() -> Schema:
    return _object(
        {
            "namespaceSelector": _label_selector(),
            "cohortName": _string(),
            "resourceGroups": _atomic_list(_resource_group(), maxItems=MAX_RESOURCE_GROUPS),
        },
        open_=True,
    )


KINDS: dict[str, tuple[str, list[str]]] = {
    "ResourceFlavor": ("resourceflavors", ["flavor", "flavors", "rf"]),
    "ClusterQueue": ("clusterqueues", ["cq"]),
}
"""Kind → (plural, short names), as Kueue names them."""


def custom_resource_definition(kind: str) -> dict[str, Any]:
    """The CRD of `kind` (ResourceFlavor or ClusterQueue), cluster-scoped, serving and storing v1beta2 only."""
    plural, short_names = KINDS[kind]
    properties: dict[str, Schema] = {
        "apiVersion": _string(),
        "kind": _string(),
        "metadata": {"type": "object"},
        "spec": resource_flavor_spec() if kind == "ResourceFlavor" else cluster_queue_spec(),
    }
    version: dict[str, Any] = {"name": VERSION, "served": True, "storage": True}
    if kind == "ClusterQueue":
        properties["status"] = _object({}, open_=True)
        version["subresources"] = {"status": {}}
    version["schema"] = {"openAPIV3Schema": _object(properties)}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind,
                "listKind": f"{kind}List",
                "plural": plural,
                "singular": kind.lower(),
                "shortNames": short_names,
            },
            "scope": "Cluster",
            "versions": [version],
        },
    }
