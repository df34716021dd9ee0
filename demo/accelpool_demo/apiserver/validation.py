"""Validation of built-in kinds as the API server words it. Pure.

- `FieldError` and `refusal`: k8s.io/apimachinery/pkg/util/validation/field/errors.go (`ErrorBody`: the
  error type, the bad value as Go prints it, the detail) and pkg/api/errors `NewInvalid` (422, one cause
  per error, the message listing each distinct error once);
- names, label keys and values: k8s.io/apimachinery/pkg/util/validation/validation.go
  (`IsQualifiedName`, `IsValidLabelValue`, `IsDNS1123Subdomain`), wrapped as
  apimachinery/pkg/api/validation/objectmeta.go and pkg/apis/meta/v1/validation do;
- Nodes: pkg/apis/core/validation/validation.go `ValidateNode` / `ValidateNodeUpdate`: metadata, taints
  (under `metadata.taints`, the field path that function gives them), extended resources in the status;
  the uid of an update (`ValidateObjectMetaUpdate`: immutable).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_demo.apiserver.resources import error

TYPES = {
    "FieldValueNotFound": "Not found",
    "FieldValueRequired": "Required value",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
OMIT: Any = object()


@dataclass(frozen=True)
class Raw:
    """A bad value already printed as Go prints it."""

    text: str


@dataclass(frozen=True)
class FieldError:
    reason: str
    """The cause type: FieldValueInvalid, FieldValueRequired..."""
    field: str
    value: Any = OMIT
    detail: str = ""

    def body(self) -> str:
        """field.Error's `ErrorBody`."""
        kind = TYPES[self.reason]
        bare = ("FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong", "InternalError")
        text = kind if self.reason in bare or self.value is OMIT else f"{kind}: {go_value(self.value)}"
        return f"{text}: {self.detail}" if self.detail else text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"


def go_value(value: Any) -> str:
    """A bad value as `ErrorBody` prints it: strings quoted, numbers and booleans bare, null, JSON."""
    if isinstance(value, Raw):
        return value.text
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def refusal(kind: str, group: str, name: str | None, errors: Iterable[FieldError]) -> kmock.KubernetesError:
    """errors.NewInvalid: `Kind.group "name" is invalid: ...`, a cause per error (repeats kept)."""
    errors = list(errors)
    causes = [{"reason": e.reason, "message": e.body(), "field": e.field} for e in errors]
    listed = list(dict.fromkeys(str(e) for e in errors))
    qualified = f"{kind}.{group}" if group else kind
    message = f"{qualified} {json.dumps(name or '')} is invalid"
    if listed:
        message += ": " + (listed[0] if len(listed) == 1 else f"[{', '.join(listed)}]")
    details: dict[str, Any] = {"name": name} if name else {}
    if group:
        details["group"] = group
    if kind:
        details["kind"] = kind
    details["causes"] = causes
    return error(422, "Invalid", message, details)


# ---------------------------------------------------------------- names, labels, annotations

QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
QUALIFIED_NAME_MESSAGE = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE_MESSAGE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for "
    "validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
DNS1123_SUBDOMAIN_MESSAGE = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must "
    "start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
DNS1123_LABEL_MESSAGE = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and "
    "end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
TOTAL_ANNOTATION_SIZE = 256 * 1024


def _bounded(value: str, limit: int, unit: str, pattern: re.Pattern[str], message: str) -> list[str]:
    """apimachinery's validation.go checks: at most `limit` characters or bytes, and the pattern, each its error."""
    found = [f"must be no more than {limit} {unit}"] if len(value) > limit else []
    return found if pattern.match(value) else [*found, message]


def dns1123_subdomain(value: str) -> list[str]:
    return _bounded(value, 253, "characters", DNS1123_SUBDOMAIN, DNS1123_SUBDOMAIN_MESSAGE)


def dns1123_label(value: str) -> list[str]:
    return _bounded(value, 63, "characters", DNS1123_LABEL, DNS1123_LABEL_MESSAGE)


def qualified_name(value: str) -> list[str]:
    """`IsQualifiedName`: an optional DNS subdomain prefix and '/', then a name part."""
    found = []
    parts = value.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            found.append("prefix part must be non-empty")
        else:
            found += [f"prefix part {why}" for why in dns1123_subdomain(prefix)]
    else:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
            "with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for "
            "validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix "
            "and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        found.append("name part must be non-empty")
    elif len(name) > 63:
        found.append("name part must be no more than 63 bytes")
    if not QUALIFIED_NAME.match(name):
        found.append(QUALIFIED_NAME_MESSAGE)
    return found


def label_value(value: str) -> list[str]:
    return _bounded(value, 63, "bytes", LABEL_VALUE, LABEL_VALUE_MESSAGE)


def label_errors(found: Mapping[str, Any] | None, field: str = "metadata.labels") -> list[FieldError]:
    """`ValidateLabels`: each key a qualified name, each value a label value."""
    errors = []
    for key, value in (found or {}).items():
        errors += [FieldError("FieldValueInvalid", field, key, why) for why in qualified_name(str(key))]
        errors += [FieldError("FieldValueInvalid", field, value, why) for why in label_value(str(value))]
    return errors


def annotation_errors(found: Mapping[str, Any] | None, field: str = "metadata.annotations") -> list[FieldError]:
    """`ValidateAnnotations`: each key a qualified name (lower-cased), 256 kB in all."""
    errors = []
    total = 0
    for key, value in (found or {}).items():
        errors += [FieldError("FieldValueInvalid", field, key, why) for why in qualified_name(str(key).lower())]
        total += len(str(key)) + len(str(value))
    if total > TOTAL_ANNOTATION_SIZE:
        errors.append(
            FieldError("FieldValueTooLong", field, OMIT, f"may not be more than {TOTAL_ANNOTATION_SIZE} bytes")
        )
    return errors


def metadata(obj: Mapping[str, Any], *, name_check: bool = True) -> list[FieldError]:
    """`ValidateObjectMeta`: the name (a DNS subdomain), labels and annotations."""
    meta = obj.get("metadata") or {}
    errors = []
    name = meta.get("name")
    if name_check and not name and not meta.get("generateName"):  # objectmeta.go ValidateObjectMetaAccessor
        errors.append(FieldError("FieldValueRequired", "metadata.name", detail="name or generateName is required"))
    if name_check and isinstance(name, str) and name:
        errors += [FieldError("FieldValueInvalid", "metadata.name", name, why) for why in dns1123_subdomain(name)]
    errors += label_errors(meta.get("labels"))
    errors += annotation_errors(meta.get("annotations"))
    return errors


def owner_references(found: Any, field: str = "metadata.ownerReferences") -> list[FieldError]:
    """apimachinery/pkg/api/validation/objectmeta.go `ValidateOwnerReferences`: each reference's apiVersion
    (a version), kind, name and uid set, at most one of them the controller."""
    errors: list[FieldError] = []
    first = ""
    references = found if isinstance(found, list) else []
    for reference in references:
        reference = reference if isinstance(reference, Mapping) else {}
        api_version = str(reference.get("apiVersion") or "")
        if not api_version.rsplit("/", 1)[-1]:
            errors.append(
                FieldError("FieldValueInvalid", f"{field}.apiVersion", api_version, "version must not be empty")
            )
        for name in ("kind", "name", "uid"):
            if not reference.get(name):
                errors.append(
                    FieldError(
                        "FieldValueInvalid", f"{field}.{name}", str(reference.get(name) or ""), "must not be empty"
                    )
                )
        if reference.get("controller") is True:
            current = f"{reference.get('kind')}/{reference.get('name')}"
            if first:
                why = (
                    "Only one reference can have Controller set to true. "
                    f'Found "true" in references for {first} and {current}'
                )
                errors.append(FieldError("FieldValueInvalid", field, Raw(_owner_references_json(references)), why))
            else:
                first = current
    return errors


def _owner_references_json(references: list[Any]) -> str:
    """References as Go encodes metav1.OwnerReference (its field order, unset pointers left out)."""
    ordered = []
    for reference in references:
        item = {k: reference[k] for k in ("apiVersion", "kind", "name", "uid") if k in reference}
        item.update({k: reference[k] for k in ("controller", "blockOwnerDeletion") if reference.get(k) is not None})
        ordered.append(item)
    return json.dumps(ordered, separators=(",", ":"))


def immutable_uid(obj: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateObjectMetaUpdate`'s uid: a write may leave it out, never change it."""
    sent = (obj.get("metadata") or {}).get("uid")
    if sent and sent != (old.get("metadata") or {}).get("uid"):
        return [FieldError("FieldValueInvalid", "metadata.uid", sent, "field is immutable")]
    return []


# ---------------------------------------------------------------- Nodes

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def taints(found: Any, field: str = "metadata.taints") -> list[FieldError]:
    """`validateNodeTaints`: key, value and effect of each, unique by key and effect."""
    errors = []
    seen: set[tuple[str, str]] = set()
    for index, taint in enumerate(found if isinstance(found, list) else []):
        at = f"{field}[{index}]"
        key, value, effect = str(taint.get("key") or ""), str(taint.get("value") or ""), str(taint.get("effect") or "")
        errors += [FieldError("FieldValueInvalid", f"{at}.key", key, why) for why in qualified_name(key)]
        why_value = label_value(value)
        if why_value:
            errors.append(FieldError("FieldValueInvalid", f"{at}.value", value, ";".join(why_value)))
        if not effect:
            errors.append(FieldError("FieldValueRequired", f"{at}.effect"))
        elif effect not in TAINT_EFFECTS:
            supported = ", ".join(json.dumps(e) for e in TAINT_EFFECTS)
            errors.append(
                FieldError("FieldValueNotSupported", f"{at}.effect", effect, f"supported values: {supported}")
            )
        if (key, effect) in seen:
            printed = json.dumps(
                {"Key": key, "Value": value, "Effect": effect, "TimeAdded": taint.get("timeAdded")},
                separators=(",", ":"),
            )
            errors.append(
                FieldError("FieldValueDuplicate", at, Raw(printed), "taints must be unique by key and effect pair")
            )
            continue
        seen.add((key, effect))
    return errors


def _extended(resource: str) -> bool:
    """`IsExtendedResourceName`: a domain-prefixed name outside kubernetes.io, not `requests.`."""
    if "/" not in resource or resource.startswith("requests."):
        return False
    domain = resource.split("/", 1)[0]
    return not (domain == "kubernetes.io" or domain.endswith(".kubernetes.io"))


def node_resources(status: Mapping[str, Any]) -> list[FieldError]:
    """Extended resources in a Node's capacity and allocatable are whole numbers."""
    errors = []
    for part in ("capacity", "allocatable"):
        for resource, quantity in (status.get(part) or {}).items():
            if _extended(str(resource)) and not re.fullmatch(r"[0-9]+", str(quantity)):
                errors.append(
                    FieldError("FieldValueInvalid", f"status.{part}.{resource}", str(quantity), "must be an integer")
                )
    return errors


def node(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    """`ValidateNode`, and `ValidateNodeUpdate` against `old`: each finding repeated as often as the API
    server's validations repeat it (the labels four times in an update, the taints twice)."""
    meta = metadata(obj, name_check=old is None)
    found_taints = taints((obj.get("spec") or {}).get("taints"))
    status = node_resources(obj.get("status") or {})
    if old is None:
        return meta + found_taints + status
    return 4 * meta + 2 * (found_taints + immutable_uid(obj, old)) + status


# ---------------------------------------------------------------- Events

NOTE_LIMIT = 1024
REPORTING_INSTANCE_LIMIT = 128
ACTION_LIMIT = 128
REASON_LIMIT = 128
MICRO_TIME = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}(Z|[+-]\d\d:\d\d)$")
MICRO_TIME_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"


def micro_time(value: Any) -> str | None:
    """Why a `metav1.MicroTime` does not decode (time.Parse with RFC 3339 and microseconds), or None."""
    if value is None or not isinstance(value, str) or MICRO_TIME.match(value):
        return None
    whole = re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", value)
    parsing = f"parsing time {json.dumps(value)} as {json.dumps(MICRO_TIME_LAYOUT)}"
    if whole is None:
        return f'{parsing}: cannot parse {json.dumps(value)} as "2006"'
    return f'{parsing}: cannot parse {json.dumps(value[whole.end() :])} as ".000000"'


def event(obj: Mapping[str, Any], namespace: str | None, *, strict: bool) -> list[FieldError]:
    """pkg/apis/core/validation/events.go `ValidateEventCreate` of a core/v1 Event: the legacy rules, and
    with `strict` (created through events.k8s.io/v1) the stricter ones, in their order."""
    errors: list[FieldError] = []
    involved = obj.get("involvedObject") or {}
    involved_namespace = str(involved.get("namespace") or "")
    namespace = namespace or ""
    controller_field = "reportingController" if strict else "reportingComponent"
    legacy = not obj.get("eventTime")
    if legacy:
        mismatched = (not involved_namespace and namespace not in ("", "default")) or bool(
            involved_namespace and namespace != involved_namespace
        )
    else:
        mismatched = not involved_namespace and namespace not in ("default", "kube-system")
    if mismatched:
        errors.append(
            FieldError(
                "FieldValueInvalid", "involvedObject.namespace", involved_namespace, "does not match event.namespace"
            )
        )
    if not legacy:
        controller = str(obj.get("reportingComponent") or "")
        if not controller:
            errors.append(FieldError("FieldValueRequired", controller_field))
        errors += [
            FieldError("FieldValueInvalid", controller_field, controller, why) for why in qualified_name(controller)
        ]
        instance = str(obj.get("reportingInstance") or "")
        if not instance:
            errors.append(FieldError("FieldValueRequired", "reportingInstance"))
        if len(instance) > REPORTING_INSTANCE_LIMIT:
            errors.append(
                FieldError(
                    "FieldValueInvalid",
                    "reportingInstance",
                    "",
                    f"can have at most {REPORTING_INSTANCE_LIMIT} characters",
                )
            )
        for field, limit in (("action", ACTION_LIMIT), ("reason", REASON_LIMIT)):
            text = str(obj.get(field) or "")
            if not text:
                errors.append(FieldError("FieldValueRequired", field))
            if len(text) > limit:
                errors.append(FieldError("FieldValueInvalid", field, "", f"can have at most {limit} characters"))
        if len(str(obj.get("message") or "")) > NOTE_LIMIT:
            errors.append(FieldError("FieldValueInvalid", "message", "", f"can have at most {NOTE_LIMIT} characters"))
    errors += (
        [FieldError("FieldValueInvalid", "namespace", namespace, why) for why in dns1123_subdomain(namespace)]
        if namespace
        else []
    )
    if not strict:
        return errors
    errors += metadata(obj)
    if not obj.get("eventTime"):
        errors.append(FieldError("FieldValueRequired", "eventTime"))
    kind = obj.get("type") or ""
    if kind not in ("Normal", "Warning"):
        errors.append(FieldError("FieldValueInvalid", "type", "", f"has invalid value: {kind}"))
    for field in ("firstTimestamp", "lastTimestamp", "count"):
        if obj.get(field):
            errors.append(FieldError("FieldValueInvalid", field, "", "needs to be unset"))
    source = obj.get("source") or {}
    if source.get("component") or source.get("host"):
        errors.append(FieldError("FieldValueInvalid", "source", "", "needs to be unset"))
    return errors
