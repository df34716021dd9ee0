"""Validation of the `resource.k8s.io` kinds as the API server words it. Pure.

From k8s.io/kubernetes pkg/apis/resource/validation/validation.go (each function below names its Go
one), including the checks it marks `MarkCoveredByDeclarative` (declarative validation reports them in the
same words; the real server lists those after the others, so the order of the errors may differ from its
order, which the transcripts' comparison leaves out as the server's own runs do). Objects are the JSON of
the request after decoding and defaulting (`dra_types`), so a field the Go struct would hold as a zero
value is read as one here. A negative capacity is accepted: the code checks none, and the recorded 1.36.2
server took one (dra.yaml, dra-objects/11).

- DeviceClass (`ValidateDeviceClass`): name, at most 32 selectors each compiled as CEL (`cel`:
  `device_selector_problem`), at most 32 opaque configs, the extended resource name;
- ResourceSlice (`ValidateResourceSlice`): driver (a CSI driver name), pool (name of DNS subdomains
  separated by `/`, `resourceSliceCount` > 0, `generation` ≥ 0), exactly one of `nodeName`,
  `nodeSelector`, `allNodes`, `perDeviceNodeSelection`, `devices` or `sharedCounters`, at most 128 devices
  (64 with taints, counters or list attributes), each device's name, attributes (C identifiers, optionally
  in a domain, one value each), capacities, at most 16 taints (effect `None`, `NoSchedule` or `NoExecute`),
  names unique; on update the driver, pool name and node name are immutable;
- ResourceClaim and ResourceClaimTemplate (`ValidateResourceClaim`, `validateDeviceClaim`): requests
  (at most 32, DNS-label names, unique, exactly one of `exactly` and `firstAvailable`, a device class,
  selectors, allocation mode and count, tolerations), constraints and configs naming requests; the spec
  is immutable (`ValidateResourceClaimUpdate`, its value printed as the internal Go struct);
- a claim's status (`ValidateResourceClaimStatusUpdate`): `reservedFor` entries complete and unique,
  none without an allocation, an allocation not changed once made, results naming requests of the claim;
- DeviceTaintRule (`ValidateDeviceTaintRule`): the selector's driver, pool and device names, the taint's
  key, value and effect (checked on update only when it changed), at most 8 status conditions.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from accelpool_demo.apiserver import cel, dra, dra_types
from accelpool_demo.apiserver.validation import (
    OMIT,
    FieldError,
    Raw,
    annotation_errors,
    dns1123_label,
    dns1123_subdomain,
    label_errors,
    label_value,
    metadata,
    qualified_name,
)

DRIVER_NAME_MAX = 63
POOL_NAME_MAX = 253
DEVICE_MAX_ID_LENGTH = 32
DEVICE_MAX_DOMAIN_LENGTH = 63
ATTRIBUTE_MAX_VALUE_LENGTH = 64
ATTRIBUTES_AND_CAPACITIES_MAX = 32
ATTRIBUTE_VALUES_MAX = 48
SLICE_MAX_DEVICES = 128
SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES = 64
DEVICE_TAINTS_MAX = 16
COUNTER_SETS_MAX = 8
COUNTER_CONSUMPTIONS_MAX = 2
BINDING_CONDITIONS_MAX = 4
REQUESTS_MAX = 32
SELECTORS_MAX = 32
CONSTRAINTS_MAX = 32
CONFIGS_MAX = 32
FIRST_AVAILABLE_MAX = 8
TOLERATIONS_MAX = 16
RESULTS_MAX = 32
RESERVED_FOR_MAX = 256
RULE_CONDITIONS_MAX = 8
CEL_MAX_LENGTH = 10 * 1024
OPAQUE_PARAMETERS_MAX = 10 * 1024
"""k8s.io/api resource/v1 types.go's limits."""
TAINT_EFFECTS = ("NoExecute", "NoSchedule", "None")
"""`validDeviceTaintEffects`, sorted as `sets.List` prints them."""
TOLERATION_OPERATORS = ("Equal", "Exists")
ALLOCATION_MODES = ("All", "ExactCount")
CONFIG_SOURCES = ("FromClaim", "FromClass")
C_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
C_IDENTIFIER_MESSAGE = (
    "a valid C identifier must start with alphabetic character or '_', followed by a string of alphanumeric "
    "characters or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName', regex used for validation is "
    "'[A-Za-z_][A-Za-z0-9_]*')"
)
SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(-(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(\.(0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*)?"
    r"(\+[0-9a-zA-Z-]+(\.[0-9a-zA-Z-]+)*)?$"
)
Errors = list[FieldError]
JsonObject = dict[str, Any]


def _objects(value: Any) -> list[Mapping[str, Any]]:
    return [item if isinstance(item, Mapping) else {} for item in value] if isinstance(value, list) else []


def _object(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _invalid(field: str, value: Any, detail: str) -> FieldError:
    return FieldError("FieldValueInvalid", field, value, detail)


def _required(field: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", field, detail=detail)


def _not_supported(field: str, value: Any, supported: Iterable[str]) -> FieldError:
    return FieldError(
        "FieldValueNotSupported", field, value, "supported values: " + ", ".join(json.dumps(v) for v in supported)
    )


def _too_many(field: str, count: int, limit: int) -> FieldError:
    return FieldError("FieldValueTooMany", field, count, f"must have at most {limit} items")


def _too_long(field: str, limit: int) -> FieldError:
    return FieldError("FieldValueTooLong", field, OMIT, f"may not be more than {limit} bytes")


def _each(
    items: list[Mapping[str, Any]], limit: int, field: str, check: Callable[[Mapping[str, Any], str], Errors]
) -> Errors:
    """`validateSlice`: too many items is the only error (a guard against huge lists), else each item's."""
    if limit >= 0 and len(items) > limit:
        return [_too_many(field, len(items), limit)]
    return [error for index, item in enumerate(items) for error in check(item, f"{field}[{index}]")]


def _unique(items: list[Any], key: Callable[[Any], Any], field: str) -> Errors:
    """`validateSet`'s duplicates: each repeat of a key, at its index."""
    seen: set[Any] = set()
    errors = []
    for index, item in enumerate(items):
        found = key(item)
        if found in seen:
            errors.append(FieldError("FieldValueDuplicate", f"{field}[{index}]", found))
        seen.add(found)
    return errors


def _set(
    items: list[Mapping[str, Any]],
    limit: int,
    field: str,
    check: Callable[[Mapping[str, Any], str], Errors],
    key: Callable[[Any], Any],
) -> Errors:
    """`validateSet`: `_each`, then the duplicates."""
    if limit >= 0 and len(items) > limit:
        return [_too_many(field, len(items), limit)]
    return _each(items, -1, field, check) + _unique(items, key, field)


# ---------------------------------------------------------------- names


def driver_name(value: str, field: str) -> Errors:
    """`ValidateCSIDriverName` (pkg/apis/core/validation): required, 63 characters, a DNS subdomain once
    lower-cased."""
    errors = [_required(field)] if not value else []
    if len(value) > DRIVER_NAME_MAX:
        errors.append(_too_long(field, DRIVER_NAME_MAX))
    return errors + [_invalid(field, value, why) for why in dns1123_subdomain(value.lower())]


def pool_name(value: str, field: str) -> Errors:
    """`validatePoolName`: required, 253 characters, DNS subdomains separated by `/` (each checked, empty
    ones too)."""
    if not value:
        return [_required(field)]
    errors = [_too_long(field, POOL_NAME_MAX)] if len(value) > POOL_NAME_MAX else []
    for part in value.split("/"):
        errors += [_invalid(field, part, why) for why in dns1123_subdomain(part)]
    return errors


def _label(value: str, field: str) -> Errors:
    """`ValidateDNS1123Label` (device and request names)."""
    return [_invalid(field, value, why) for why in dns1123_label(value)]


def _subdomain(value: str, field: str) -> Errors:
    return [_invalid(field, value, why) for why in dns1123_subdomain(value)]


def _c_identifier(value: str, field: str) -> Errors:
    errors = [_too_long(field, DEVICE_MAX_ID_LENGTH)] if len(value) > DEVICE_MAX_ID_LENGTH else []
    if not C_IDENTIFIER.match(value):
        errors.append(_invalid(field, value, C_IDENTIFIER_MESSAGE))
    return errors


def qualified_attribute_name(name: str, field: str) -> Errors:
    """`validateQualifiedName`: a C identifier, optionally after a domain (a driver name) and `/`."""
    parts = name.split("/")
    if len(parts) == 1:
        return _c_identifier(name, field)
    if len(parts) > 2:
        return [_invalid(field, name, "must not contain more than one slash")]
    domain, identifier = parts
    errors = [_invalid(field, "", "the domain must not be empty")] if not domain else driver_name(domain, field)
    errors += (
        [_invalid(field, "", "the name must not be empty")] if not identifier else _c_identifier(identifier, field)
    )
    return errors


def fully_qualified_name(name: str, field: str) -> Errors:
    """`validateFullyQualifiedName`: a qualified name that has its domain."""
    errors = qualified_attribute_name(name, field)
    if "/" not in name:
        errors.append(_invalid(field, name, "a fully qualified name must be a domain and a name separated by a slash"))
    return errors


def _map_key(key: str) -> str:
    """`truncateIfTooLong`: a map key in a field path, its middle cut out beyond 96 characters."""
    limit = DEVICE_MAX_DOMAIN_LENGTH + 1 + DEVICE_MAX_ID_LENGTH
    if len(key) <= limit:
        return key
    remaining = limit - 3
    return key[: (remaining + 1) // 2] + "..." + key[len(key) - remaining // 2 :]


# ---------------------------------------------------------------- selectors, tolerations, taints


def _cel_expression(expression: str, field: str) -> Errors:
    """`validateCELExpression`: 10 Ki characters, then compiled (`cel.device_selector_problem`)."""
    if len(expression) > CEL_MAX_LENGTH:
        return [_too_long(field, CEL_MAX_LENGTH)]
    problem = cel.device_selector_problem(expression)
    return [_invalid(field, expression, problem)] if problem is not None else []


def _selector(selector: Mapping[str, Any], field: str) -> Errors:
    if not isinstance(selector.get("cel"), Mapping):
        return [_required(f"{field}.cel")]
    return _cel_expression(str(selector["cel"].get("expression") or ""), f"{field}.cel.expression")


def _selectors(found: Any, field: str, stored: bool = False) -> Errors:
    """`validateSelectorSlice` (a stored, unchanged list of expressions is not compiled again)."""
    return _each(_objects(found), SELECTORS_MAX, field, (lambda s, f: []) if stored else _selector)


def label_name(value: str, field: str) -> Errors:
    """metav1validation `ValidateLabelName`: a qualified name."""
    return [_invalid(field, value, why) for why in qualified_name(value)]


def _label_value(value: str, field: str) -> Errors:
    return [_invalid(field, value, why) for why in label_value(value)]


def taint(found: Mapping[str, Any], old: Mapping[str, Any] | None, field: str) -> Errors:
    """`validateDeviceTaint`: key (a label name), value (a label value), effect (checked when it changed)."""
    errors = label_name(str(found.get("key") or ""), f"{field}.key")
    if found.get("value"):
        errors += _label_value(str(found["value"]), f"{field}.value")
    effect = str(found.get("effect") or "")
    if old is None or str(old.get("effect") or "") != effect:
        if not effect:
            errors.append(_required(f"{field}.effect"))
        elif effect not in TAINT_EFFECTS:
            errors.append(_not_supported(f"{field}.effect", effect, TAINT_EFFECTS))
    return errors


def toleration(found: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceToleration`."""
    errors = label_name(str(found["key"]), f"{field}.key") if found.get("key") else []
    operator, value = str(found.get("operator") or ""), str(found.get("value") or "")
    if operator == "Exists":
        if value:
            errors.append(_invalid(f"{field}.value", value, "must be empty for operator `Exists`"))
    elif operator == "Equal":
        errors += _label_value(value, f"{field}.value")
    elif not operator:
        errors.append(_required(f"{field}.operator"))
    else:
        errors.append(_not_supported(f"{field}.operator", operator, TOLERATION_OPERATORS))
    effect = str(found.get("effect") or "")
    if effect and effect not in TAINT_EFFECTS:
        errors.append(_not_supported(f"{field}.effect", effect, TAINT_EFFECTS))
    return errors


def _tolerations(found: Any, field: str) -> Errors:
    return _each(_objects(found), TOLERATIONS_MAX, field, toleration)


# ---------------------------------------------------------------- opaque configuration


def _raw_parameters(value: Any, field: str, stored: bool) -> Errors:
    """`validateRawExtension`: a JSON object, at most 10 Ki on create."""
    if value is None:
        return [_required(field)]
    size = len(json.dumps(value, separators=(",", ":")))
    if not stored and size > OPAQUE_PARAMETERS_MAX:
        return [_too_long(field, OPAQUE_PARAMETERS_MAX)]
    if not isinstance(value, Mapping):
        return [_invalid(field, "<value omitted>", "must be a valid JSON object")]
    return []


def _configuration(config: Mapping[str, Any], field: str, stored: bool) -> Errors:
    """`validateDeviceConfiguration`: an opaque configuration, with its driver and parameters."""
    opaque = config.get("opaque")
    if not isinstance(opaque, Mapping):
        return [_required(f"{field}.opaque")]
    errors = driver_name(str(opaque.get("driver") or ""), f"{field}.opaque.driver")
    return errors + _raw_parameters(opaque.get("parameters"), f"{field}.opaque.parameters", stored)


# ---------------------------------------------------------------- DeviceClass


def device_class(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Errors:
    """`ValidateDeviceClass` / `ValidateDeviceClassUpdate` (unchanged selectors or configs are not checked
    again)."""
    spec, old_spec = _object(obj.get("spec")), _object((old or {}).get("spec"))
    stored_selectors = old is not None and spec.get("selectors") == old_spec.get("selectors")
    stored_config = old is not None and spec.get("config") == old_spec.get("config")
    errors = metadata(obj, name_check=old is None)
    errors += _selectors(spec.get("selectors"), "spec.selectors", stored_selectors)
    errors += _each(
        _objects(spec.get("config")), CONFIGS_MAX, "spec.config", lambda c, f: _configuration(c, f, stored_config)
    )
    name = spec.get("extendedResourceName")
    if name is not None and not _extended_resource_name(str(name)):
        errors.append(_invalid("spec.extendedResourceName", name, "must be a valid extended resource name"))
    return errors


def _extended_resource_name(name: str) -> bool:
    """v1helper `IsExtendedResourceName`: a qualified name in a domain outside kubernetes.io, not `requests.`."""
    if "/" not in name or name.startswith("requests.") or qualified_name(name):
        return False
    domain = name.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


# ---------------------------------------------------------------- ResourceSlice


def _attribute(attribute: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceAttribute`: exactly one value, a string of at most 64 bytes, a semantic version."""
    errors: Errors = []
    singles = [name for name in ("int", "bool", "string", "version") if attribute.get(name) is not None]
    lists = [name for name in ("bools", "ints", "strings", "versions") if attribute.get(name) is not None]
    if attribute.get("string") is not None and len(str(attribute["string"])) > ATTRIBUTE_MAX_VALUE_LENGTH:
        errors.append(_too_long(f"{field}.string", ATTRIBUTE_MAX_VALUE_LENGTH))
    if attribute.get("version") is not None:
        errors += _version(str(attribute["version"]), f"{field}.version")
    for name in lists:
        if not attribute[name]:
            errors.append(_invalid(f"{field}.{name}", attribute[name], "must not be empty if specified"))
    for index, item in enumerate(attribute.get("strings") or []):
        if len(str(item)) > ATTRIBUTE_MAX_VALUE_LENGTH:
            errors.append(_too_long(f"{field}.strings[{index}]", ATTRIBUTE_MAX_VALUE_LENGTH))
    for index, item in enumerate(attribute.get("versions") or []):
        errors += _version(str(item), f"{field}.versions[{index}]")
    count = len(singles) + len(lists)
    if count == 0:
        errors.append(_invalid(field, "", "exactly one value must be specified"))
    elif count > 1:
        printed = Raw(dra_types.go_printed("DeviceAttribute", attribute))
        errors.append(_invalid(field, printed, "exactly one value must be specified"))
    return errors


def _version(value: str, field: str) -> Errors:
    errors = (
        []
        if SEMVER.match(value)
        else [_invalid(field, value, "must be a string compatible with semver.org spec 2.0.0")]
    )
    if len(value) > ATTRIBUTE_MAX_VALUE_LENGTH:
        errors.append(_too_long(field, ATTRIBUTE_MAX_VALUE_LENGTH))
    return errors


def _capacity(capacity: Mapping[str, Any], field: str, multiple: bool) -> Errors:
    """`validateSingleAllocatableDeviceCapacity` (a request policy needs `allowMultipleAllocations`)."""
    if capacity.get("requestPolicy") is not None and not multiple:
        return [
            FieldError("FieldValueForbidden", f"{field}.requestPolicy", detail="allowMultipleAllocations must be true")
        ]
    return []


def _keyed_map(found: Any, field: str, check: Callable[[Mapping[str, Any], str], Errors]) -> Errors:
    """`validateMap`: each key (errors at the map's path), then its value (at `field[key]`)."""
    errors: Errors = []
    for name, value in (found or {}).items() if isinstance(found, Mapping) else ():
        errors += qualified_attribute_name(str(name), field)
        errors += check(_object(value), f"{field}[{_map_key(str(name))}]")
    return errors


def _node_name(value: str, field: str) -> Errors:
    return _subdomain(value, field)


def _device(device: Mapping[str, Any], old: Mapping[str, Any] | None, field: str, per_device: bool) -> Errors:
    """`validateDevice`."""
    errors = _label(str(device.get("name") or ""), f"{field}.name")
    attributes = _object(device.get("attributes"))
    capacities = _object(device.get("capacity"))
    if len(attributes) + len(capacities) > ATTRIBUTES_AND_CAPACITIES_MAX:
        errors.append(
            _invalid(
                field,
                len(attributes) + len(capacities),
                f"the total number of attributes and capacities must not exceed {ATTRIBUTES_AND_CAPACITIES_MAX}",
            )
        )
    values = sum(
        max(1, sum(len(_object(a).get(n) or []) for n in ("bools", "ints", "strings", "versions")))
        for a in attributes.values()
    )
    if values > ATTRIBUTE_VALUES_MAX:
        errors.append(
            _invalid(field, values, f"the total number of attribute values must not exceed {ATTRIBUTE_VALUES_MAX}")
        )
    errors += _keyed_map(attributes, f"{field}.attributes", _attribute)
    multiple = device.get("allowMultipleAllocations") is True
    if old is None or old.get("capacity") != device.get("capacity"):
        errors += _keyed_map(capacities, f"{field}.capacity", lambda c, f: _capacity(c, f, multiple))
    if old is None or old.get("taints") != device.get("taints"):
        errors += _each(
            _objects(device.get("taints")), DEVICE_TAINTS_MAX, f"{field}.taints", lambda t, f: taint(t, None, f)
        )
    errors += _set(
        _objects(device.get("consumesCounters")),
        COUNTER_CONSUMPTIONS_MAX,
        f"{field}.consumesCounters",
        _counter_consumption,
        lambda c: c.get("counterSet"),
    )
    placement = {
        "nodeName": device.get("nodeName"),
        "nodeSelector": device.get("nodeSelector"),
        "allNodes": device.get("allNodes"),
    }
    if per_device:
        chosen = []
        if placement["nodeName"] is not None:
            if placement["nodeName"]:
                chosen.append("`nodeName`")
                errors += _node_name(str(placement["nodeName"]), f"{field}.nodeName")
            else:
                errors.append(_invalid(f"{field}.nodeName", "", "must not be empty"))
        if placement["nodeSelector"] is not None:
            chosen.append("`nodeSelector`")
        if placement["allNodes"] is not None:
            if placement["allNodes"]:
                chosen.append("`allNodes`")
            else:
                errors.append(_invalid(f"{field}.allNodes", False, "must be either unset or set to true"))
        why = (
            "exactly one of `nodeName`, `nodeSelector`, or `allNodes` is required when `perDeviceNodeSelection` "
            "is set to true in the ResourceSlice spec"
        )
        if not chosen:
            errors.append(_required(field, why))
        elif len(chosen) > 1:
            errors.append(_invalid(field, "{" + ", ".join(chosen) + "}", why))
    elif any(v is not None for v in placement.values()):
        errors.append(
            _invalid(
                field,
                None,
                "`nodeName`, `nodeSelector` and `allNodes` can only be set if `perDeviceNodeSelection` is set to "
                "true in the ResourceSlice spec",
            )
        )
    errors += _binding_conditions(device, field)
    return errors


def _counter_consumption(consumption: Mapping[str, Any], field: str) -> Errors:
    name = str(consumption.get("counterSet") or "")
    errors = _label(name, f"{field}.counterSet") if name else [_required(f"{field}.counterSet")]
    if not consumption.get("counters"):
        errors.append(_required(f"{field}.counters"))
    return errors


def _binding_conditions(found: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceBindingParameters`."""
    conditions = [str(c) for c in found.get("bindingConditions") or []]
    failures = [str(c) for c in found.get("bindingFailureConditions") or []]
    errors: Errors = []
    for name, items in (("bindingConditions", conditions), ("bindingFailureConditions", failures)):
        if len(items) > BINDING_CONDITIONS_MAX:
            errors.append(_too_many(f"{field}.{name}", len(items), BINDING_CONDITIONS_MAX))
        else:
            for index, item in enumerate(items):
                errors += label_name(item, f"{field}.{name}[{index}]")
    errors += _unique(conditions, lambda c: c, f"{field}.bindingConditions")
    errors += _unique(failures, lambda c: c, f"{field}.bindingFailureConditions")
    for index, item in enumerate(failures):
        if item in conditions:
            errors.append(
                _invalid(
                    f"{field}.bindingFailureConditions[{index}]",
                    item,
                    "bindingFailureConditions must not overlap with bindingConditions",
                )
            )
    if not conditions and failures:
        errors.append(
            _invalid(
                f"{field}.bindingConditions",
                Raw("null"),
                "bindingConditions are required to use bindingFailureConditions",
            )
        )
    if not failures and conditions:
        errors.append(
            _invalid(
                f"{field}.bindingFailureConditions",
                Raw("null"),
                "bindingFailureConditions are required to use bindingConditions",
            )
        )
    return errors


def resource_slice(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Errors:
    """`ValidateResourceSlice` / `ValidateResourceSliceUpdate` (`validateResourceSliceSpec`)."""
    spec, old_spec = _object(obj.get("spec")), _object((old or {}).get("spec"))
    errors = metadata(obj, name_check=old is None)
    driver = str(spec.get("driver") or "")
    pool = _object(spec.get("pool"))
    errors += driver_name(driver, "spec.driver")
    errors += pool_name(str(pool.get("name") or ""), "spec.pool.name")
    count = int(pool.get("resourceSliceCount") or 0)
    if count <= 0:
        errors.append(_invalid("spec.pool.resourceSliceCount", count, "must be greater than zero"))
    if int(pool.get("generation") or 0) < 0:
        errors.append(_invalid("spec.pool.generation", pool.get("generation"), "must be greater than or equal to zero"))
    if old is not None:
        old_pool = _object(old_spec.get("pool"))
        for field, new, before in (
            ("spec.pool.name", pool.get("name"), old_pool.get("name")),
            ("spec.driver", spec.get("driver"), old_spec.get("driver")),
            ("spec.nodeName", spec.get("nodeName"), old_spec.get("nodeName")),
        ):
            if new != before:
                errors.append(_invalid(field, new, "field is immutable"))
    chosen = []
    if spec.get("nodeName") is not None:
        if spec["nodeName"]:
            chosen.append("`nodeName`")
            errors += _node_name(str(spec["nodeName"]), "spec.nodeName")
        else:
            errors.append(_invalid("spec.nodeName", "", "must be either unset or set to a non-empty string"))
    if spec.get("nodeSelector") is not None:
        chosen.append("`nodeSelector`")
        terms = _object(spec["nodeSelector"]).get("nodeSelectorTerms")
        if not isinstance(terms, list) or len(terms) != 1:
            errors.append(
                _invalid("spec.nodeSelector.nodeSelectorTerms", terms, "must have exactly one node selector term")
            )
    for name in ("allNodes", "perDeviceNodeSelection"):
        if spec.get(name) is not None:
            if spec[name]:
                chosen.append(f"`{name}`")
            else:
                errors.append(_invalid(f"spec.{name}", False, "must be either unset or set to true"))
    exclusive = "exactly one of `nodeName`, `nodeSelector`, `allNodes`, `perDeviceNodeSelection` is required"
    if not chosen:
        errors.append(_required("spec", exclusive))
    elif len(chosen) > 1:
        errors.append(_invalid("spec", "{" + ", ".join(chosen) + "}", exclusive + ", but multiple fields are set"))
    if spec.get("sharedCounters") is not None and spec.get("devices") is not None:
        errors.append(_invalid("spec", "", "only one of `sharedCounters` or `devices` is allowed"))
    devices = _objects(spec.get("devices"))
    advanced = any(
        d.get("taints")
        or d.get("consumesCounters")
        or any(
            _object(a).get(n) is not None
            for a in _object(d.get("attributes")).values()
            for n in ("bools", "ints", "strings", "versions")
        )
        for d in devices
    )
    limit = SLICE_MAX_DEVICES_WITH_ADVANCED_FEATURES if advanced else SLICE_MAX_DEVICES
    old_devices = {str(d.get("name")): d for d in _objects(old_spec.get("devices"))}
    per_device = spec.get("perDeviceNodeSelection") is True
    errors += _set(
        devices,
        limit,
        "spec.devices",
        lambda d, f: _device(d, old_devices.get(str(d.get("name"))), f, per_device),
        lambda d: str(d.get("name") or ""),
    )
    errors += _set(
        _objects(spec.get("sharedCounters")),
        COUNTER_SETS_MAX,
        "spec.sharedCounters",
        _counter_set,
        lambda c: str(c.get("name") or ""),
    )
    return errors


def _counter_set(counter_set: Mapping[str, Any], field: str) -> Errors:
    name = str(counter_set.get("name") or "")
    errors = _label(name, f"{field}.name") if name else [_required(f"{field}.name")]
    counters = _object(counter_set.get("counters"))
    if not counters:
        errors.append(_required(f"{field}.counters"))
    for counter in counters:
        errors += _label(str(counter), f"{field}.counters")
    return errors


# ---------------------------------------------------------------- ResourceClaim and ResourceClaimTemplate


def _request_names(devices: Mapping[str, Any]) -> dict[str, set[str] | None]:
    """`gatherRequestNames`: each request, with its subrequests' names when it has them."""
    names: dict[str, set[str] | None] = {}
    for request in _objects(devices.get("requests")):
        subs = _objects(request.get("firstAvailable"))
        names[str(request.get("name") or "")] = {str(s.get("name") or "") for s in subs} if subs else None
    return names


def _names_request(name: str, names: Mapping[str, set[str] | None]) -> bool:
    parts = name.split("/")
    if len(parts) > 2 or parts[0] not in names:
        return False
    subs = names[parts[0]]
    return len(parts) == 1 or (subs is not None and parts[1] in subs)


def _request_reference(name: str, field: str, names: Mapping[str, set[str] | None]) -> Errors:
    """`validateRequestNameRef`."""
    why = "must be the name of a request in the claim or the name of a request and a subrequest separated by '/'"
    parts = name.split("/")
    if len(parts) > 2:
        return [_invalid(field, name, why)]
    errors = [error for part in parts for error in _label(part, field)]
    if not _names_request(name, names):
        errors.append(_invalid(field, name, why))
    return errors


def _allocation_mode(request: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceAllocationMode`."""
    mode, count = str(request.get("allocationMode") or ""), int(request.get("count") or 0)
    if mode == "All":
        return (
            [_invalid(f"{field}.count", count, "must not be specified when allocationMode is 'All'")] if count else []
        )
    if mode == "ExactCount":
        return [_invalid(f"{field}.count", count, "must be greater than zero")] if count <= 0 else []
    return [_not_supported(f"{field}.allocationMode", mode, ALLOCATION_MODES)]


def _device_class_name(name: str, field: str) -> Errors:
    return _subdomain(name, field) if name else [_required(field)]


def _exact(request: Mapping[str, Any], field: str) -> Errors:
    """`validateExactDeviceRequest`."""
    errors = _device_class_name(str(request.get("deviceClassName") or ""), f"{field}.deviceClassName")
    errors += _selectors(request.get("selectors"), f"{field}.selectors")
    errors += _allocation_mode(request, field)
    return errors + _tolerations(request.get("tolerations"), f"{field}.tolerations")


def _sub_request(request: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceSubRequest`."""
    return _label(str(request.get("name") or ""), f"{field}.name") + _exact(request, field)


def _request(request: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceRequest`: its name, and exactly one of `exactly` and `firstAvailable`."""
    errors = _label(str(request.get("name") or ""), f"{field}.name")
    exactly = request.get("exactly")
    first = _objects(request.get("firstAvailable"))
    if exactly is None and not first:
        errors.append(_required(field, "exactly one of `exactly` or `firstAvailable` is required"))
    elif exactly is not None and first:
        errors.append(
            _invalid(
                field, None, "exactly one of `exactly` or `firstAvailable` is required, but multiple fields are set"
            )
        )
    elif first:
        errors += _set(
            first, FIRST_AVAILABLE_MAX, f"{field}.firstAvailable", _sub_request, lambda s: str(s.get("name") or "")
        )
    else:
        errors += _exact(_object(exactly), f"{field}.exactly")
    return errors


def device_claim(devices: Mapping[str, Any], field: str) -> Errors:
    """`validateDeviceClaim`: requests (a set by name), constraints and configs naming requests."""
    names = _request_names(devices)
    errors = _set(
        _objects(devices.get("requests")),
        REQUESTS_MAX,
        f"{field}.requests",
        _request,
        lambda r: str(r.get("name") or ""),
    )

    def constraint(found: Mapping[str, Any], at: str) -> Errors:
        requests = [str(r) for r in found.get("requests") or []]
        errors = [_too_many(f"{at}.requests", len(requests), REQUESTS_MAX)] if len(requests) > REQUESTS_MAX else []
        for index, name in enumerate(requests if not errors else []):
            errors += _request_reference(name, f"{at}.requests[{index}]", names)
        errors += _unique(requests, lambda r: r, f"{at}.requests")
        if found.get("matchAttribute") is not None:
            errors += fully_qualified_name(str(found["matchAttribute"]), f"{at}.matchAttribute")
        elif found.get("distinctAttribute") is not None:
            errors += fully_qualified_name(str(found["distinctAttribute"]), f"{at}.distinctAttribute")
        else:
            errors.append(
                _required(
                    at,
                    'exactly one of "matchAttribute" or "distinctAttribute" is required, but multiple fields are set',
                )
            )
        return errors

    def config(found: Mapping[str, Any], at: str) -> Errors:
        requests = [str(r) for r in found.get("requests") or []]
        errors: Errors = []
        for index, name in enumerate(requests):
            errors += _request_reference(name, f"{at}.requests[{index}]", names)
        return errors + _unique(requests, lambda r: r, f"{at}.requests") + _configuration(found, at, False)

    errors += _each(_objects(devices.get("constraints")), CONSTRAINTS_MAX, f"{field}.constraints", constraint)
    return errors + _each(_objects(devices.get("config")), CONFIGS_MAX, f"{field}.config", config)


def _immutable_spec(obj: Mapping[str, Any], old: Mapping[str, Any], type_name: str) -> Errors:
    """`ValidateImmutableField(spec)`: the new spec, printed as the internal Go struct."""
    spec, old_spec = _object(obj.get("spec")), _object(old.get("spec"))
    if spec == old_spec:
        return []
    return [_invalid("spec", Raw(dra_types.go_printed(type_name, spec)), "field is immutable")]


def resource_claim(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Errors:
    """`ValidateResourceClaim`, and on update `ValidateResourceClaimUpdate` too (the strategy runs both:
    pkg/registry/resource/resourceclaim/strategy.go `ValidateUpdate`): the spec is immutable."""
    errors = metadata(obj, name_check=old is None)
    errors += device_claim(_object(_object(obj.get("spec")).get("devices")), "spec.devices")
    return errors + (_immutable_spec(obj, old, "ResourceClaimSpec") if old is not None else [])


ADMIN_NAMESPACE_LABEL = "resource.kubernetes.io/admin-access"
"""k8s.io/api resource/v1 `DRAAdminNamespaceLabelKey`."""


def admin_access(obj: Mapping[str, Any], old: Mapping[str, Any] | None, labels: Mapping[str, str]) -> Errors:
    """pkg/registry/resource/utils.go `AuthorizedForAdmin` (a claim's or template's request asking for admin
    access, on create) and `AuthorizedForAdminStatus` (an allocation granting it, unless one did before): only
    in a namespace labelled `resource.kubernetes.io/admin-access: "true"`; the first such field is named."""
    if labels.get(ADMIN_NAMESPACE_LABEL) == "true":
        return []
    spec = _object(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        spec, prefix = _object(spec.get("spec")), "spec.spec.devices.requests"
    else:
        prefix = "spec.devices.requests"
    found = None
    if old is None:
        requests = _objects(_object(spec.get("devices")).get("requests"))
        found = next(
            (
                f"{prefix}[{i}].exactly.adminAccess"
                for i, r in enumerate(requests)
                if _object(r.get("exactly")).get("adminAccess") is True
            ),
            None,
        )
    else:

        def granted(claim: Mapping[str, Any]) -> str | None:
            allocation = _object(_object(claim.get("status")).get("allocation"))
            results = _objects(_object(allocation.get("devices")).get("results"))
            return next(
                (
                    f"status.allocation.devices.results[{i}].adminAccess"
                    for i, r in enumerate(results)
                    if r.get("adminAccess") is True
                ),
                None,
            )

        found = granted(obj) if granted(old) is None else None
    if found is None:
        return []
    why = f"admin access to devices requires the `{ADMIN_NAMESPACE_LABEL}: true` label on the containing namespace"
    return [FieldError("FieldValueForbidden", found, detail=why)]


def resource_claim_template(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Errors:
    """`ValidateResourceClaimTemplate` / `...Update` (the spec is immutable)."""
    if old is not None:
        return _immutable_spec(obj, old, "ResourceClaimTemplateSpec")
    spec = _object(obj.get("spec"))
    template = _object(spec.get("metadata"))  # ValidateTemplateObjectMeta: its labels and annotations
    errors = metadata(obj) + label_errors(template.get("labels"), "spec.metadata.labels")
    errors += annotation_errors(template.get("annotations"), "spec.metadata.annotations")
    return errors + device_claim(_object(_object(spec.get("spec")).get("devices")), "spec.spec.devices")


def claim_status(obj: Mapping[str, Any], old: Mapping[str, Any]) -> Errors:
    """`ValidateResourceClaimStatusUpdate` (`validateResourceClaimStatusUpdate`)."""
    status, old_status = _object(obj.get("status")), _object(old.get("status"))
    names = _request_names(_object(_object(obj.get("spec")).get("devices")))
    reserved = _objects(status.get("reservedFor"))

    def consumer(found: Mapping[str, Any], at: str) -> Errors:
        return [_required(f"{at}.{name}") for name in ("resource", "name", "uid") if not found.get(name)]

    errors = _set(reserved, RESERVED_FOR_MAX, "status.reservedFor", consumer, lambda c: str(c.get("uid") or ""))
    allocation, old_allocation = status.get("allocation"), old_status.get("allocation")
    if reserved:
        if allocation is None:
            errors.append(
                FieldError(
                    "FieldValueForbidden",
                    "status.reservedFor",
                    detail="may not be specified when `allocated` is not set",
                )
            )
        elif (obj.get("metadata") or {}).get("deletionTimestamp"):
            before = {json.dumps(c, sort_keys=True) for c in _objects(old_status.get("reservedFor"))}
            if any(json.dumps(c, sort_keys=True) not in before for c in reserved):
                errors.append(
                    FieldError(
                        "FieldValueForbidden",
                        "status.reservedFor",
                        detail=(
                            "new entries may not be added while `deallocationRequested` or `deletionTimestamp` are set"
                        ),
                    )
                )
    if old_allocation is not None and allocation is not None:
        if allocation != old_allocation:
            printed = json.dumps(allocation, separators=(",", ":"), sort_keys=True)
            errors.append(_invalid("status.allocation", Raw(printed), "field is immutable"))
    elif isinstance(allocation, Mapping):
        results = _objects(_object(allocation.get("devices")).get("results"))

        def result(found: Mapping[str, Any], at: str) -> Errors:
            errors = _request_reference(str(found.get("request") or ""), f"{at}.request", names)
            errors += driver_name(str(found.get("driver") or ""), f"{at}.driver")
            errors += pool_name(str(found.get("pool") or ""), f"{at}.pool")
            errors += _label(str(found.get("device") or ""), f"{at}.device")
            return errors + _tolerations(found.get("tolerations"), f"{at}.tolerations")

        errors += _each(results, RESULTS_MAX, "status.allocation.devices.results", result)
        for index, config in enumerate(_objects(_object(allocation.get("devices")).get("config"))):
            at = f"status.allocation.devices.config[{index}]"
            source = str(config.get("source") or "")
            if not source:
                errors.append(_required(f"{at}.source"))
            elif source not in CONFIG_SOURCES:
                errors.append(_not_supported(f"{at}.source", source, CONFIG_SOURCES))
            errors += _configuration(config, at, False)
    return errors


# ---------------------------------------------------------------- DeviceTaintRule


def device_taint_rule(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> Errors:
    """`ValidateDeviceTaintRule` / `ValidateDeviceTaintRuleUpdate` (`validateDeviceTaintRuleSpec`)."""
    spec, old_spec = _object(obj.get("spec")), _object((old or {}).get("spec"))
    errors = metadata(obj, name_check=old is None)
    selector = spec.get("deviceSelector")
    if isinstance(selector, Mapping):
        if selector.get("driver") is not None:
            errors += driver_name(str(selector["driver"]), "spec.deviceSelector.driver")
        if selector.get("pool") is not None:
            errors += pool_name(str(selector["pool"]), "spec.deviceSelector.pool")
        if selector.get("device") is not None:
            errors += _label(str(selector["device"]), "spec.deviceSelector.device")
    old_taint = _object(old_spec.get("taint")) if old is not None else None
    return errors + taint(_object(spec.get("taint")), old_taint, "spec.taint")


def rule_status(obj: Mapping[str, Any], old: Mapping[str, Any]) -> Errors:
    """`ValidateDeviceTaintRuleStatusUpdate`: at most 8 conditions (metav1 `ValidateConditions` of each:
    type, status True/False/Unknown, reason, lastTransitionTime)."""
    conditions = _objects(_object(obj.get("status")).get("conditions"))
    errors: Errors = []
    for index, condition in enumerate(conditions):
        at = f"status.conditions[{index}]"
        errors += (
            label_name(str(condition.get("type") or ""), f"{at}.type")
            if condition.get("type")
            else [_required(f"{at}.type")]
        )
        if condition.get("status") not in ("True", "False", "Unknown"):
            errors.append(_not_supported(f"{at}.status", condition.get("status") or "", ("False", "True", "Unknown")))
        if not condition.get("lastTransitionTime"):
            errors.append(_required(f"{at}.lastTransitionTime", "must be set"))
        if not condition.get("reason"):
            errors.append(_required(f"{at}.reason"))
    if len(conditions) > RULE_CONDITIONS_MAX:
        errors.append(_too_many("status.conditions", len(conditions), RULE_CONDITIONS_MAX))
    return errors


VALIDATE: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any] | None], Errors]] = {
    dra.DEVICE_CLASSES: device_class,
    dra.RESOURCE_SLICES: resource_slice,
    dra.RESOURCE_CLAIMS: resource_claim,
    dra.CLAIM_TEMPLATES: resource_claim_template,
    dra.DEVICE_TAINT_RULES: device_taint_rule,
}
VALIDATE_STATUS: dict[str, Callable[[Mapping[str, Any], Mapping[str, Any]], Errors]] = {
    dra.RESOURCE_CLAIMS: claim_status,
    dra.DEVICE_TAINT_RULES: rule_status,
}


def errors(resource_key: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None, *, status: bool = False) -> Errors:
    """What the API server refuses in a create (`old` None), an update, or (`status`) a status update."""
    plural = dra.plural_of(resource_key)
    if plural is None:
        return []
    if status:
        check_status = VALIDATE_STATUS.get(plural)
        return check_status(obj, old or {}) if check_status is not None else []
    return VALIDATE[plural](obj, old)
