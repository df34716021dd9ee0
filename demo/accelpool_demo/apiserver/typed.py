"""The built-in kinds as the API server's Go types shape them. Pure data and functions.

The real server decodes every object of a built-in kind into its Go struct and encodes it back, so what
it stores and answers has that struct's shape whatever was sent: a field without `omitempty` is always
there (a Node's `spec: {}`, its `status.daemonEndpoints` and `status.nodeInfo` of zero values, a
condition's `lastHeartbeatTime: null`), an empty map or list with `omitempty` is left out (no `labels:
{}`), and only the kinds whose strategy tracks it have a `metadata.generation`
(k8s.io/api/core/v1/types.go, policy/v1; custom resources keep what was sent: unstructured).

`SCHEMAS` are the types' list and map kinds where they are not the default of the field manager's
deduced type (atomic lists, maps of fields): keyed lists (`+listType=map`), sets and atomic structs,
as k8s.io/api declares them, for the fields accelpool, kopf and the transcripts write.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelpool_demo.apiserver import dra, dra_types, structural

JsonObject = dict[str, Any]

NODES = "v1/nodes"
PODS = "v1/pods"
CONFIG_MAPS = "v1/configmaps"
EVENTS = "v1/events"
NEW_EVENTS = "events.k8s.io/v1/events"
BUDGETS = "policy/v1/poddisruptionbudgets"
NAMESPACES = "v1/namespaces"
CRDS = "apiextensions.k8s.io/v1/customresourcedefinitions"


def _keyed(*keys: str, items: Mapping[str, Any] | None = None, merge: bool = True) -> JsonObject:
    """A list of objects keyed by `keys` (`+listType=map`), merged by its first key in a strategic merge
    patch (`+patchMergeKey`, `+patchStrategy=merge`) unless not `merge`."""
    found: JsonObject = {
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": list(keys),
        "items": dict(items or {}),
    }
    if merge:
        found["x-kubernetes-patch-merge-key"] = keys[0]
    return found


def _closed(**properties: Any) -> JsonObject:
    """An object of exactly these fields (the others are unknown: dropped with a warning, or refused)."""
    return {"properties": properties, "additionalProperties": False}


ANY: JsonObject = {}
STRINGS: JsonObject = {"additionalProperties": {}}
"""A map of strings (labels, resources)."""
SET: JsonObject = {"x-kubernetes-list-type": "set"}
ATOMIC: JsonObject = {"x-kubernetes-map-type": "atomic"}
OWNER_REFERENCE = _closed(apiVersion=ANY, kind=ANY, name=ANY, uid=ANY, controller=ANY, blockOwnerDeletion=ANY)
METADATA: JsonObject = _closed(
    name=ANY,
    generateName=ANY,
    namespace=ANY,
    selfLink=ANY,
    uid=ANY,
    resourceVersion=ANY,
    generation=ANY,
    creationTimestamp=ANY,
    deletionTimestamp=ANY,
    deletionGracePeriodSeconds=ANY,
    labels=STRINGS,
    annotations=STRINGS,
    ownerReferences=_keyed("uid", items={**OWNER_REFERENCE, "x-kubernetes-map-type": "atomic"}),
    finalizers={**SET, "x-kubernetes-patch-strategy": "merge"},
    managedFields={"items": {}},
)
CONDITIONS = _keyed("type")
NODE_CONDITION = _closed(type=ANY, status=ANY, lastHeartbeatTime=ANY, lastTransitionTime=ANY, reason=ANY, message=ANY)
_CONTAINER: JsonObject = {
    "properties": {
        "ports": _keyed("containerPort", "protocol"),
        "env": _keyed("name"),
        "volumeMounts": _keyed("mountPath"),
        "resources": {"properties": {"claims": _keyed("name")}},
    }
}
NODE = _closed(
    apiVersion=ANY,
    kind=ANY,
    metadata=METADATA,
    spec=_closed(
        podCIDR=ANY,
        podCIDRs={**SET, "x-kubernetes-patch-strategy": "merge"},
        providerID=ANY,
        unschedulable=ANY,
        taints={"items": _closed(key=ANY, value=ANY, effect=ANY, timeAdded=ANY)},
        configSource=ANY,
        externalID=ANY,
    ),
    status=_closed(
        capacity=STRINGS,
        allocatable=STRINGS,
        phase=ANY,
        conditions=_keyed("type", items=NODE_CONDITION),
        addresses=_keyed("type", items=_closed(type=ANY, address=ANY)),
        daemonEndpoints=_closed(kubeletEndpoint=_closed(Port=ANY)),
        nodeInfo=ANY,
        images={"items": ANY},
        volumesInUse=ANY,
        volumesAttached=ANY,
        config=ANY,
        runtimeHandlers=ANY,
        features=ANY,
        declaredFeatures=ANY,
    ),
)
SCHEMAS: dict[str, JsonObject] = {
    NODES: NODE,
    PODS: {
        "properties": {
            "metadata": METADATA,
            "spec": {
                "properties": {
                    "containers": _keyed("name", items=_CONTAINER),
                    "initContainers": _keyed("name", items=_CONTAINER),
                    "volumes": _keyed("name"),
                    "resourceClaims": _keyed("name"),
                }
            },
            "status": {"properties": {"conditions": CONDITIONS}},
        }
    },
    EVENTS: {"properties": {"metadata": METADATA, "involvedObject": ATOMIC, "related": ATOMIC}},
    CRDS: {"properties": {"metadata": METADATA, "status": {"properties": {"conditions": CONDITIONS}}}},
    NEW_EVENTS: {"properties": {"metadata": METADATA, "regarding": ATOMIC, "related": ATOMIC}},
    BUDGETS: {
        "properties": {
            "metadata": METADATA,
            "spec": {"properties": {"selector": ATOMIC}},
            "status": {"properties": {"conditions": CONDITIONS}},
        }
    },
}
SCHEMAS.update(dra_types.schemas(METADATA))
"""The built-in kinds' field types (an OpenAPI v3 schema's list and map annotations), by resource key;
closed objects (`additionalProperties: false`) where every field of the Go type is listed (the
resource.k8s.io kinds: `dra_types`)."""
DEFAULT_SCHEMA: JsonObject = {"properties": {"metadata": METADATA}}


def unknown_fields(schema: Mapping[str, Any], value: Any, path: str = "") -> list[str]:
    """The fields of `value` a closed object of `schema` does not declare (paths as the decoder names them:
    `spec.notAField`, `spec.taints[0].$patch`), removed from `value` in place."""
    return structural.prune(schema, value, path, closed_only=True)


GENERATION_TRACKED = (
    frozenset(
        {
            PODS,
            BUDGETS,
            CRDS,
            "apps/v1/daemonsets",
            "apps/v1/replicasets",
            "apps/v1/deployments",
            "apps/v1/statefulsets",
        }
    )
    | dra_types.GENERATION_TRACKED
)
"""Built-in kinds whose strategy sets `metadata.generation` (the rest have none)."""
BUILT_IN_GROUPS = frozenset({"", "apps", "policy", "events.k8s.io", "node.k8s.io", "apiextensions.k8s.io", dra.GROUP})
NODE_INFO_FIELDS = (
    "machineID",
    "systemUUID",
    "bootID",
    "kernelVersion",
    "osImage",
    "containerRuntimeVersion",
    "kubeletVersion",
    "kubeProxyVersion",
    "operatingSystem",
    "architecture",
)
OMITTED_WHEN_EMPTY = ("labels", "annotations", "finalizers", "ownerReferences", "managedFields")


def schema_of(key: str) -> JsonObject:
    return SCHEMAS.get(key, DEFAULT_SCHEMA)


def is_built_in(key: str) -> bool:
    return key.count("/") == 1 or key.split("/", 1)[0] in BUILT_IN_GROUPS


def tracks_generation(key: str) -> bool:
    return not is_built_in(key) or key in GENERATION_TRACKED


def zero(key: str, api_version: str, kind: str) -> JsonObject:
    """The object an empty Go struct of the kind encodes to (what a create is compared with), less metadata."""
    obj: JsonObject = {"apiVersion": api_version, "kind": kind, "metadata": {}}
    return shaped(key, obj) if is_built_in(key) else obj


def shaped(key: str, obj: JsonObject) -> JsonObject:
    """A built-in kind's object as its Go struct encodes it (in place; returned)."""
    metadata = obj.get("metadata")
    if isinstance(metadata, dict):
        for name in OMITTED_WHEN_EMPTY:
            if name in metadata and not metadata[name]:
                del metadata[name]
        if not tracks_generation(key):
            metadata.pop("generation", None)
    if key == BUDGETS:
        obj.setdefault("spec", {})
    if key == NODES:
        _shape_node(obj)
    elif key == CRDS:
        _shape_crd(obj)
    elif key == EVENTS:
        shaped_core_event(obj)
    elif key == NEW_EVENTS:
        shaped_new_event(obj)
    elif dra.plural_of(key) is not None:
        dra_types.shaped(key, obj)
    return obj


def _shape_crd(crd: JsonObject) -> None:
    """A CustomResourceDefinition as apiextensions/v1 defaults and encodes it (SetDefaults_CustomResourceDefinitionSpec:
    conversion strategy None; the create strategy's storedVersions; acceptedNames and conditions never left out)."""
    spec = crd.setdefault("spec", {})
    if isinstance(spec, dict):
        spec.setdefault("group", "")
        names = spec.setdefault("names", {})
        if isinstance(names, dict):
            names.setdefault("plural", "")
            names.setdefault("kind", "")
        spec.setdefault("scope", "")
        spec.setdefault("versions", None)
        if "metadata" in crd and crd["metadata"].get("name"):  # a stored object (the zero one has no conversion)
            spec.setdefault("conversion", {"strategy": "None"})
    status = crd.get("status")
    if not isinstance(status, dict):
        status = crd["status"] = {}
    status.setdefault("conditions", None)
    accepted = status.setdefault("acceptedNames", {})
    if isinstance(accepted, dict):
        accepted.setdefault("plural", "")
        accepted.setdefault("kind", "")
    if not status.get("storedVersions") and isinstance(spec, dict):
        stored = [v.get("name") for v in spec.get("versions") or [] if isinstance(v, dict) and v.get("storage")]
        status["storedVersions"] = stored or None


def shaped_core_event(event: JsonObject) -> JsonObject:
    """A core/v1 Event as its Go type encodes it (k8s.io/api/core/v1 `Event`), in place."""
    for name in ("eventTime", "firstTimestamp", "lastTimestamp"):
        event.setdefault(name, None)
    for name in ("reportingComponent", "reportingInstance"):
        event.setdefault(name, "")
    event.setdefault("involvedObject", {})
    event.setdefault("source", {})
    if not event.get("count"):
        event.pop("count", None)
    for name in ("message", "reason", "type", "action"):
        if event.get(name) == "":
            del event[name]
    return event


def shaped_new_event(event: JsonObject) -> JsonObject:
    """An events.k8s.io/v1 Event as its Go type encodes it (k8s.io/api/events/v1 `Event`), in place."""
    for name in ("eventTime", "deprecatedFirstTimestamp", "deprecatedLastTimestamp"):
        event.setdefault(name, None)
    event.setdefault("regarding", {})
    event.setdefault("deprecatedSource", {})
    if not event.get("deprecatedCount"):
        event.pop("deprecatedCount", None)
    for name in ("note", "reason", "type", "action", "reportingController", "reportingInstance"):
        if event.get(name) == "":
            del event[name]
    return event


def _shape_node(node: JsonObject) -> None:
    spec = node.setdefault("spec", {})
    if isinstance(spec, dict) and "taints" in spec and not spec["taints"]:
        del spec["taints"]
    status = node.get("status")
    if not isinstance(status, dict):
        status = node["status"] = {}
    endpoints = status.setdefault("daemonEndpoints", {})
    if isinstance(endpoints, dict):
        kubelet = endpoints.setdefault("kubeletEndpoint", {})
        if isinstance(kubelet, dict):
            kubelet.setdefault("Port", 0)
    info = status.setdefault("nodeInfo", {})
    if isinstance(info, dict):
        for name in NODE_INFO_FIELDS:
            info.setdefault(name, "")
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict):
            condition.setdefault("lastHeartbeatTime", None)
            condition.setdefault("lastTransitionTime", None)
    for name in ("conditions", "addresses", "capacity", "allocatable", "images", "volumesInUse"):
        if name in status and not status[name]:
            del status[name]
