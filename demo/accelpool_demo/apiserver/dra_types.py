"""The `resource.k8s.io` kinds as the API server's Go types shape them (k8s.io/api resource/v1 types.go,
v1.36, whose v1beta2 twin has the same fields; DeviceTaintRule as resource/v1beta2 and, from 1.37, v1
have it). Pure; `typed` uses it for every built-in kind's shape, schema and field ownership.

- `schemas`: each kind's fields as an OpenAPI v3 schema: closed objects where the Go struct lists every
  field (a field it lacks is unknown: dropped with a warning, refused under `fieldValidation=Strict`,
  `spec.deviceSelector.selectors` of a DeviceTaintRule since 1.35 for one), the list types the field
  manager needs (`+listType=atomic` everywhere but a claim's `status.reservedFor`, keyed by `uid`, and
  the conditions, keyed by `type`);
- `shaped`: an object as the Go struct encodes it: the fields without `omitempty` always there (a
  DeviceClass's `spec: {}`, a ResourceSlice's `pool`, a claim's and a rule's `status: {}`, a template's
  `spec.metadata: {}`), nulls and zero `count`s of `omitempty` fields gone;
- `defaulted`: the defaulting of pkg/apis/resource/v1/defaults.go (and v1beta2's, the same):
  `allocationMode: ExactCount` and `count: 1` for a request that names neither, and a taint's
  `timeAdded` (a slice device's or a rule's) when it has none;
- `go_printed`: a value as an error message prints it, `json.Marshal` of the internal Go type (field
  names, not JSON names: `{"IntValue":1,"BoolValue":null,...}`), the way field.Invalid shows a struct.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from accelpool_demo.apiserver import dra

JsonObject = dict[str, Any]

# ---------------------------------------------------------------- schemas

ANY: JsonObject = {}
ATOMIC: JsonObject = {"x-kubernetes-map-type": "atomic"}
PRESERVED: JsonObject = {"x-kubernetes-preserve-unknown-fields": True, "x-kubernetes-map-type": "atomic"}


def _struct(**properties: Any) -> JsonObject:
    return {"properties": properties, "additionalProperties": False}


def _list(item: Mapping[str, Any]) -> JsonObject:
    """`+listType=atomic`."""
    return {"items": dict(item)}


def _keyed(item: Mapping[str, Any], *keys: str, merge: bool = False) -> JsonObject:
    """`+listType=map` with these `+listMapKey`s (and `patchMergeKey` on the first where `merge`)."""
    found: JsonObject = {"items": dict(item), "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": list(keys)}
    if merge:
        found["x-kubernetes-patch-merge-key"] = keys[0]
    return found


def _map(value: Mapping[str, Any]) -> JsonObject:
    return {"additionalProperties": dict(value)}


TAINT = _struct(key=ANY, value=ANY, effect=ANY, timeAdded=ANY)
TOLERATION = _struct(key=ANY, operator=ANY, value=ANY, effect=ANY, tolerationSeconds=ANY)
SELECTOR = _struct(cel=_struct(expression=ANY))
OPAQUE = _struct(driver=ANY, parameters=PRESERVED)
CAPACITY_REQUIREMENTS = _struct(requests=_map(ANY))
EXACT_REQUEST = _struct(
    deviceClassName=ANY,
    selectors=_list(SELECTOR),
    allocationMode=ANY,
    count=ANY,
    adminAccess=ANY,
    tolerations=_list(TOLERATION),
    capacity=CAPACITY_REQUIREMENTS,
)
SUB_REQUEST = _struct(
    name=ANY,
    deviceClassName=ANY,
    selectors=_list(SELECTOR),
    allocationMode=ANY,
    count=ANY,
    tolerations=_list(TOLERATION),
    capacity=CAPACITY_REQUIREMENTS,
)
DEVICE_CLAIM = _struct(
    requests=_list(_struct(name=ANY, exactly=EXACT_REQUEST, firstAvailable=_list(SUB_REQUEST))),
    constraints=_list(_struct(requests=_list(ANY), matchAttribute=ANY, distinctAttribute=ANY)),
    config=_list(_struct(requests=_list(ANY), opaque=OPAQUE)),
)
CLAIM_SPEC = _struct(devices=DEVICE_CLAIM)
CONDITION = _struct(type=ANY, status=ANY, observedGeneration=ANY, lastTransitionTime=ANY, reason=ANY, message=ANY)
ALLOCATION = _struct(
    devices=_struct(
        results=_list(
            _struct(
                request=ANY,
                driver=ANY,
                pool=ANY,
                device=ANY,
                adminAccess=ANY,
                tolerations=_list(TOLERATION),
                bindingConditions=_list(ANY),
                bindingFailureConditions=_list(ANY),
                shareID=ANY,
                consumedCapacity=_map(ANY),
            )
        ),
        config=_list(_struct(source=ANY, requests=_list(ANY), opaque=OPAQUE)),
    ),
    nodeSelector=ATOMIC,
    allocationTimestamp=ANY,
)
CLAIM_STATUS = _struct(
    allocation=ALLOCATION,
    reservedFor=_keyed(_struct(apiGroup=ANY, resource=ANY, name=ANY, uid=ANY), "uid", merge=True),
    devices=_keyed(
        _struct(
            driver=ANY,
            pool=ANY,
            device=ANY,
            shareID=ANY,
            conditions=_keyed(CONDITION, "type"),
            data=PRESERVED,
            networkData=_struct(interfaceName=ANY, ips=_list(ANY), hardwareAddress=ANY),
        ),
        "driver",
        "device",
        "pool",
        "shareID",
    ),
)
ATTRIBUTE = _struct(
    int=ANY,
    bool=ANY,
    string=ANY,
    version=ANY,
    ints=_list(ANY),
    bools=_list(ANY),
    strings=_list(ANY),
    versions=_list(ANY),
)
COUNTER = _struct(value=ANY)
DEVICE = _struct(
    name=ANY,
    attributes=_map(ATTRIBUTE),
    capacity=_map(
        _struct(
            value=ANY,
            requestPolicy=_struct(default=ANY, validValues=_list(ANY), validRange=_struct(min=ANY, max=ANY, step=ANY)),
        )
    ),
    consumesCounters=_list(_struct(counterSet=ANY, counters=_map(COUNTER))),
    nodeName=ANY,
    nodeSelector=ATOMIC,
    allNodes=ANY,
    taints=_list(TAINT),
    bindsToNode=ANY,
    bindingConditions=_list(ANY),
    bindingFailureConditions=_list(ANY),
    allowMultipleAllocations=ANY,
    nodeAllocatableResourceMappings=_map(_struct(capacityKey=ANY, allocationMultiplier=ANY)),
)
SLICE_SPEC = _struct(
    driver=ANY,
    pool=_struct(name=ANY, generation=ANY, resourceSliceCount=ANY),
    nodeName=ANY,
    nodeSelector=ATOMIC,
    allNodes=ANY,
    devices=_list(DEVICE),
    perDeviceNodeSelection=ANY,
    sharedCounters=_list(_struct(name=ANY, counters=_map(COUNTER))),
)
CLASS_SPEC = _struct(selectors=_list(SELECTOR), config=_list(_struct(opaque=OPAQUE)), extendedResourceName=ANY)
RULE_SPEC = _struct(deviceSelector=_struct(driver=ANY, pool=ANY, device=ANY), taint=TAINT)
RULE_STATUS = _struct(conditions=_keyed(CONDITION, "type", merge=True))


def schemas(metadata: Mapping[str, Any]) -> dict[str, JsonObject]:
    """Every resource's schema (both versions), with `metadata` the ObjectMeta schema (`typed.METADATA`)."""

    def kind(**parts: Any) -> JsonObject:
        return _struct(apiVersion=ANY, kind=ANY, metadata=metadata, **parts)

    by_plural = {
        dra.DEVICE_CLASSES: kind(spec=CLASS_SPEC),
        dra.RESOURCE_SLICES: kind(spec=SLICE_SPEC),
        dra.RESOURCE_CLAIMS: kind(spec=CLAIM_SPEC, status=CLAIM_STATUS),
        dra.CLAIM_TEMPLATES: kind(spec=_struct(metadata=metadata, spec=CLAIM_SPEC)),
        dra.DEVICE_TAINT_RULES: kind(spec=RULE_SPEC, status=RULE_STATUS),
    }
    return {key: by_plural[str(dra.plural_of(key))] for key in dra.KNOWN}


GENERATION_TRACKED = frozenset(
    k for k in dra.KNOWN if dra.plural_of(k) in (dra.DEVICE_CLASSES, dra.RESOURCE_SLICES, dra.DEVICE_TAINT_RULES)
)
"""The kinds whose strategies keep `metadata.generation` (claims and templates have none)."""

# ---------------------------------------------------------------- shapes and defaults

EXACT_COUNT = "ExactCount"


def _without_nulls(value: Any) -> Any:
    """`omitempty` pointers sent as null are unset (JSON's null decodes to a nil pointer)."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _dicts(value: Any) -> list[JsonObject]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


def _child(parent: JsonObject, name: str) -> JsonObject:
    """`parent[name]` as an object, made one when it is missing (a struct without omitempty)."""
    found = parent.get(name)
    if not isinstance(found, dict):
        found = parent[name] = {}
    return found


def _shape_taint(taint: JsonObject) -> None:
    taint.setdefault("key", "")
    taint.setdefault("effect", "")


def _shape_request(request: JsonObject) -> None:
    if request.get("count") == 0:  # int64 `omitempty`
        del request["count"]
    request.setdefault("deviceClassName", "")
    for toleration in _dicts(request.get("tolerations")):
        if toleration.get("tolerationSeconds") is None:
            toleration.pop("tolerationSeconds", None)


def _shape_claim_spec(spec: JsonObject) -> None:
    devices = _child(spec, "devices")
    devices.setdefault("requests", None)  # `json:"requests"`: no omitempty
    for request in _dicts(devices.get("requests")):
        request.setdefault("name", "")
        if isinstance(request.get("exactly"), dict):
            _shape_request(request["exactly"])
        for sub in _dicts(request.get("firstAvailable")):
            sub.setdefault("name", "")
            _shape_request(sub)
    for config in _dicts(devices.get("config")):
        if isinstance(config.get("opaque"), dict):
            config["opaque"].setdefault("driver", "")


def shaped(resource_key: str, obj: JsonObject) -> JsonObject:
    """The object as its Go struct encodes it (in place; returned)."""
    plural = dra.plural_of(resource_key)
    for part in ("spec", "status"):
        if part in obj:
            obj[part] = _without_nulls(obj[part])
    spec = _child(obj, "spec")
    if plural == dra.RESOURCE_SLICES:
        spec.setdefault("driver", "")
        pool = _child(spec, "pool")
        for name, zero in (("name", ""), ("generation", 0), ("resourceSliceCount", 0)):
            pool.setdefault(name, zero)
        for device in _dicts(spec.get("devices")):
            device.setdefault("name", "")
            for taint in _dicts(device.get("taints")):
                _shape_taint(taint)
    elif plural == dra.RESOURCE_CLAIMS:
        _shape_claim_spec(spec)
        _child(obj, "status")
    elif plural == dra.CLAIM_TEMPLATES:
        _child(spec, "metadata")
        _shape_claim_spec(_child(spec, "spec"))
    elif plural == dra.DEVICE_TAINT_RULES:
        _shape_taint(_child(spec, "taint"))
        _child(obj, "status")
    return obj


def _default_request(request: JsonObject) -> None:
    """SetDefaults_ExactDeviceRequest / SetDefaults_DeviceSubRequest."""
    if not request.get("allocationMode"):
        request["allocationMode"] = EXACT_COUNT
    if request["allocationMode"] == EXACT_COUNT and not request.get("count"):
        request["count"] = 1


def _default_claim_spec(spec: Any) -> None:
    devices = spec.get("devices") if isinstance(spec, dict) else None
    for request in _dicts((devices or {}).get("requests") if isinstance(devices, dict) else None):
        if isinstance(request.get("exactly"), dict):
            _default_request(request["exactly"])
        for sub in _dicts(request.get("firstAvailable")):
            _default_request(sub)


def defaulted(resource_key: str, obj: JsonObject, now: str) -> JsonObject:
    """The object with its version's defaults (in place; returned); `now` stamps a taint without `timeAdded`
    (SetDefaults_DeviceTaint)."""
    plural = dra.plural_of(resource_key)
    spec = obj.get("spec")
    if not isinstance(spec, dict):
        return obj
    taints = [spec["taint"]] if plural == dra.DEVICE_TAINT_RULES and isinstance(spec.get("taint"), dict) else []
    if plural == dra.RESOURCE_CLAIMS:
        _default_claim_spec(spec)
    elif plural == dra.CLAIM_TEMPLATES:
        _default_claim_spec(spec.get("spec"))
    elif plural == dra.RESOURCE_SLICES:
        taints = [taint for device in _dicts(spec.get("devices")) for taint in _dicts(device.get("taints"))]
    for taint in taints:
        if not taint.get("timeAdded"):
            taint["timeAdded"] = now
    return obj


# ---------------------------------------------------------------- values as Go prints them in errors

Field = tuple[str, str, str]
"""(JSON name, Go name, type): `string`, `int`, `bool`, `*T` (a pointer), `[]T`, `map[T]`, `Quantity`,
`Time`, `Raw` (runtime.RawExtension), `ObjectMeta`, a struct's name, `inline:Struct` (an embedded one)."""
STRUCTS: dict[str, list[Field]] = {
    "ResourceClaimSpec": [("devices", "Devices", "DeviceClaim")],
    "DeviceClaim": [
        ("requests", "Requests", "[]DeviceRequest"),
        ("constraints", "Constraints", "[]DeviceConstraint"),
        ("config", "Config", "[]DeviceClaimConfiguration"),
    ],
    "DeviceRequest": [
        ("name", "Name", "string"),
        ("exactly", "Exactly", "*ExactDeviceRequest"),
        ("firstAvailable", "FirstAvailable", "[]DeviceSubRequest"),
    ],
    "ExactDeviceRequest": [
        ("deviceClassName", "DeviceClassName", "string"),
        ("selectors", "Selectors", "[]DeviceSelector"),
        ("allocationMode", "AllocationMode", "string"),
        ("count", "Count", "int"),
        ("adminAccess", "AdminAccess", "*bool"),
        ("tolerations", "Tolerations", "[]DeviceToleration"),
        ("capacity", "Capacity", "*CapacityRequirements"),
    ],
    "DeviceSubRequest": [
        ("name", "Name", "string"),
        ("deviceClassName", "DeviceClassName", "string"),
        ("selectors", "Selectors", "[]DeviceSelector"),
        ("allocationMode", "AllocationMode", "string"),
        ("count", "Count", "int"),
        ("tolerations", "Tolerations", "[]DeviceToleration"),
        ("capacity", "Capacity", "*CapacityRequirements"),
    ],
    "DeviceSelector": [("cel", "CEL", "*CELDeviceSelector")],
    "CELDeviceSelector": [("expression", "Expression", "string")],
    "DeviceToleration": [
        ("key", "Key", "string"),
        ("operator", "Operator", "string"),
        ("value", "Value", "string"),
        ("effect", "Effect", "string"),
        ("tolerationSeconds", "TolerationSeconds", "*int"),
    ],
    "CapacityRequirements": [("requests", "Requests", "map[Quantity]")],
    "DeviceConstraint": [
        ("requests", "Requests", "[]string"),
        ("matchAttribute", "MatchAttribute", "*string"),
        ("distinctAttribute", "DistinctAttribute", "*string"),
    ],
    "DeviceClaimConfiguration": [
        ("requests", "Requests", "[]string"),
        ("", "", "inline:DeviceConfiguration"),
    ],
    "DeviceConfiguration": [("opaque", "Opaque", "*OpaqueDeviceConfiguration")],
    "OpaqueDeviceConfiguration": [("driver", "Driver", "string"), ("parameters", "Parameters", "Raw")],
    "ResourceClaimTemplateSpec": [("metadata", "", "inline:ObjectMeta"), ("spec", "Spec", "ResourceClaimSpec")],
    "DeviceAttribute": [
        ("int", "IntValue", "*int"),
        ("bool", "BoolValue", "*bool"),
        ("string", "StringValue", "*string"),
        ("version", "VersionValue", "*string"),
        ("ints", "IntValues", "[]int"),
        ("bools", "BoolValues", "[]bool"),
        ("strings", "StringValues", "[]string"),
        ("versions", "VersionValues", "[]string"),
    ],
}
"""The internal types (pkg/apis/resource/types.go) a message prints, their fields in Go's order (v1's)."""
OBJECT_META_FIELDS = ("name", "generateName", "namespace", "uid", "resourceVersion", "generation", "labels")
_ZERO: dict[str, Any] = {"string": "", "int": 0, "bool": False}


def _go(kind: str, value: Any, present: bool) -> Any:
    if kind.startswith("*"):
        return _go(kind[1:], value, present) if present and value is not None else None
    if kind.startswith("[]"):
        return [_go(kind[2:], item, True) for item in value] if present and isinstance(value, list) else None
    if kind.startswith("map["):
        inner = kind[4:-1]
        return (
            {k: _go(inner, v, True) for k, v in sorted(value.items())} if present and isinstance(value, dict) else None
        )
    if kind in _ZERO:
        return value if present and value is not None else _ZERO[kind]
    if kind in ("Quantity", "Time"):
        return str(value) if present and value is not None else None
    if kind == "Raw":
        return value if present else None
    return _go_struct(kind, value if present and isinstance(value, dict) else {})


def _go_struct(name: str, value: Mapping[str, Any]) -> dict[str, Any]:
    printed: dict[str, Any] = {}
    for json_name, go_name, kind in STRUCTS[name]:
        if kind == "inline:ObjectMeta":  # metav1.ObjectMeta embedded: its JSON names, creationTimestamp null
            found = value.get(json_name)
            meta: Mapping[str, Any] = found if isinstance(found, dict) else {}
            printed.update({k: meta[k] for k in OBJECT_META_FIELDS if meta.get(k)})
            printed["creationTimestamp"] = None
            printed.update({k: meta[k] for k in ("annotations", "ownerReferences", "finalizers") if meta.get(k)})
        elif kind.startswith("inline:"):
            printed.update(_go_struct(kind[7:], value))
        else:
            printed[go_name] = _go(kind, value.get(json_name), json_name in value)
    return printed


def go_printed(type_name: str, value: Mapping[str, Any]) -> str:
    """`value` (JSON, as sent) as `json.Marshal` of the internal Go type `type_name` prints it."""
    return json.dumps(_go_struct(type_name, value), separators=(",", ":"), ensure_ascii=False)
