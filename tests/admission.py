"""What a Kubernetes API server answers to `kubectl apply` of a custom object, emulated for tests in
the server's own words, stage by stage, from the CRD alone (not from accelpool's models):

1. decoding: null fields pruned; with kubectl's default strict field validation an unknown field
   fails the request (apiextensions-apiserver pkg/apiserver/customresource_handler.go
   schemaCoercingDecoder; `strict decoding error: unknown field "spec.gpus"`), after kubectl's
   YAML → JSON conversion (`accelpool.api.as_sent`: `4.0` arrives as 4);
2. defaulting from the schema's `default`s;
3. the structural schema, with kube-openapi's messages (k8s.io/kube-openapi pkg/validation/errors
   schema.go, validate/*.go) turned into field errors as apiextensions-apiserver does
   (pkg/apiserver/validation/validation.go kubeOpenAPIResultToFieldErrors);
4. the scale subresource's check of `specReplicasPath` (pkg/registry/customresource/validator.go);
5. the CEL rules, evaluated with Google's CEL and Kubernetes' CEL library (accelpool_demo/apiserver/cel.py), unless
   a blocking error came first (pkg/registry/customresource/strategy.go hasBlockingErr); a rule
   that cannot be evaluated rejects (pkg/apiserver/schema/cel/validation.go);
6. the validating admission webhooks, only for an object that passed all of the above (the API
   server runs them after its own validation, k8s.io/apiserver pkg/registry/generic/registry/store.go).

Field errors print as k8s.io/apimachinery pkg/util/validation/field errors.go prints them. The order
of several schema errors is not fixed on a real server (kube-openapi walks Go maps): compare sets.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from accelpool.api import as_sent, go_float
from accelpool_demo.apiserver.cel import evaluate_rule, rule_message
from accelpool_demo.apiserver.structural import apply_defaults

Stage = Literal["decode", "schema", "webhook"]
Webhook = Callable[[dict[str, Any]], list[str]]
"""A validating webhook: the object → the field errors it denies it with ([] to allow)."""

BLOCKING = ("Required value", "Unsupported value", "Too long", "Too many")
"""Field error types that stop the CEL rules from running; and type errors (TypeInvalid)."""
RULES_NOT_CHECKED = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; "
    "correct the existing errors to complete validation"
)
INT32_MAX = 2**31 - 1
OBJECT_META = (
    *("name", "generateName", "namespace", "selfLink", "uid", "resourceVersion", "generation"),
    *("creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "labels", "annotations"),
    *("ownerReferences", "finalizers", "managedFields"),
)
"""metav1.ObjectMeta's JSON fields (k8s.io/apimachinery pkg/apis/meta/v1 types.go)."""


@dataclass
class Answer:
    """The server's verdict: which stage rejected the object, with which field errors."""

    stage: Stage | None = None
    errors: list[str] = field(default_factory=list)
    stored: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def accepted(self) -> bool:
        return self.stage is None


def version_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def create(
    crd: dict[str, Any],
    obj: dict[str, Any],
    *,
    webhooks: tuple[Webhook, ...] = (),
    field_validation: Literal["Strict", "Warn", "Ignore"] = "Strict",
) -> Answer:
    """What creating `obj` gets: `kubectl apply` sends fieldValidation=Strict, most other clients do not."""
    schema = version_schema(crd)
    version = crd["spec"]["versions"][0]
    obj = as_sent(copy.deepcopy(obj))
    unknown = list(_unknown_fields(schema, obj, ""))
    if unknown and field_validation == "Strict":
        return Answer("decode", [f'unknown field "{path}"' for path in unknown])
    warnings = [f'unknown field "{path}"' for path in unknown] if field_validation == "Warn" else []
    obj = _prune_nulls(schema, _pruned(schema, obj))
    obj.pop("status", None)  # the status subresource: a create never writes status
    apply_defaults(schema, obj)
    errors = _name_errors((obj.get("metadata") or {}).get("name")) + _schema_errors(schema, obj, "")
    errors += _scale_errors(version.get("subresources", {}).get("scale"), obj)
    if any(_blocking(error) for error in errors):
        errors.append(RULES_NOT_CHECKED)
    else:
        errors += _cel_errors(schema, obj, "")
    if errors:
        return Answer("schema", errors, warnings=warnings)
    for webhook in webhooks:
        denied = webhook(obj)
        if denied:
            return Answer("webhook", denied, warnings=warnings)
    return Answer(None, [], obj, warnings)


# ---------------------------------------------------------------- decoding


def _prune_nulls(node: dict[str, Any], value: Any) -> Any:
    """A null property is dropped unless its schema allows null (none of ours does); nulls in maps and
    lists are kept, to fail their type (apiextensions-apiserver pkg/apiserver/schema/defaulting
    PruneNonNullableNullsWithoutDefaults)."""
    if isinstance(value, dict):
        properties = node.get("properties") or {}
        additional = node.get("additionalProperties")
        pruned = {}
        for key, item in value.items():
            if key in properties:
                if item is None and not properties[key].get("nullable"):
                    continue
                pruned[key] = _prune_nulls(properties[key], item)
            else:
                pruned[key] = _prune_nulls(additional, item) if isinstance(additional, dict) else item
        return pruned
    if isinstance(value, list) and "items" in node:
        return [_prune_nulls(node["items"], item) for item in value]
    return value


def _unknown_fields(node: dict[str, Any], value: Any, path: str) -> list[str]:
    found: list[str] = []
    if isinstance(value, dict) and not node.get("x-kubernetes-preserve-unknown-fields"):
        properties = node.get("properties")
        additional = node.get("additionalProperties")
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            if properties is not None and key in properties:
                if path == "" and key == "metadata":  # ObjectMeta is decoded by its own Go type
                    found += [f"metadata.{k}" for k in (item if isinstance(item, dict) else {}) if k not in OBJECT_META]
                else:
                    found += _unknown_fields(properties[key], item, child)
            elif isinstance(additional, dict):
                found += _unknown_fields(additional, item, child)
            elif properties is not None and not (path == "" and key in ("apiVersion", "kind")):
                found.append(child)
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            found += _unknown_fields(node["items"], item, f"{path}[{index}]")
    return found


def _pruned(node: dict[str, Any], value: Any) -> Any:
    if isinstance(value, dict) and not node.get("x-kubernetes-preserve-unknown-fields"):
        properties = node.get("properties")
        additional = node.get("additionalProperties")
        if properties is not None:
            return {k: _pruned(properties[k], v) for k, v in value.items() if k in properties or k in ("metadata",)}
        if isinstance(additional, dict):
            return {k: _pruned(additional, v) for k, v in value.items()}
    if isinstance(value, list) and "items" in node:
        return [_pruned(node["items"], item) for item in value]
    return value


# ---------------------------------------------------------------- the structural schema


def go_value(value: Any) -> str:
    """A bad value as field.Error prints it: %v for numbers and booleans, %q for strings, JSON otherwise."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, int):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _type_ok(node: dict[str, Any], value: Any) -> bool:
    if node.get("x-kubernetes-int-or-string"):
        return json_type(value) in ("integer", "string")
    expected = node.get("type")
    if expected is None:
        return True
    given = json_type(value)
    return given == expected or (expected == "number" and given == "integer")


def _schema_errors(node: dict[str, Any], value: Any, path: str) -> list[str]:
    if not _type_ok(node, value):
        given = json_type(value)
        return [f'{path}: Invalid value: "{given}": {path} in body must be of type {node["type"]}: "{given}"']
    errors: list[str] = []
    if "enum" in node and value not in node["enum"]:
        supported = ", ".join(json.dumps(v) if not isinstance(v, str) else f'"{v}"' for v in node["enum"])
        errors.append(f"{path}: Unsupported value: {go_value(value)}: supported values: {supported}")
    if isinstance(value, int | float) and not isinstance(value, bool):
        if "minimum" in node and value < node["minimum"]:
            errors.append(
                f"{path}: Invalid value: {go_value(value)}: {path} in body should be greater than or equal to "
                f"{go_value(node['minimum'])}"
            )
        if "maximum" in node and value > node["maximum"]:
            errors.append(
                f"{path}: Invalid value: {go_value(value)}: {path} in body should be less than or equal to "
                f"{go_value(node['maximum'])}"
            )
    if isinstance(value, str):
        if "maxLength" in node and len(value) > node["maxLength"]:
            errors.append(f"{path}: Too long: may not be more than {node['maxLength']} bytes")
        if "minLength" in node and len(value) < node["minLength"]:
            errors.append(
                f"{path}: Invalid value: {go_value(value)}: {path} in body should be at least "
                f"{node['minLength']} chars long"
            )
        if "pattern" in node and not re.search(node["pattern"], value):
            errors.append(f"{path}: Invalid value: {go_value(value)}: {path} in body should match '{node['pattern']}'")
    if isinstance(value, list):
        if "maxItems" in node and len(value) > node["maxItems"]:
            errors.append(f"{path}: Too many: {len(value)}: must have at most {node['maxItems']} items")
        if "minItems" in node and len(value) < node["minItems"]:
            errors.append(
                f"{path}: Invalid value: {go_value(value)}: {path} in body should have at least "
                f"{node['minItems']} items"
            )
        for index, item in enumerate(value):
            errors += _schema_errors(node.get("items", {}), item, f"{path}[{index}]")
    if isinstance(value, dict):
        for name in node.get("required", []):
            if name not in value:
                errors.append(f"{path}.{name}: Required value" if path else f"{name}: Required value")
        properties = node.get("properties") or {}
        additional = node.get("additionalProperties")
        for name, item in value.items():
            child = f"{path}.{name}" if path else name
            if name in properties:
                errors += _schema_errors(properties[name], item, child)
            elif isinstance(additional, dict):
                errors += _schema_errors(additional, item, child)
    return errors


DNS1123_SUBDOMAIN = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"


def _name_errors(name: Any) -> list[str]:
    """ObjectMeta's name rules, checked before the schema (apiextensions-apiserver
    pkg/registry/customresource/validator.go: ValidateObjectMetaAccessor, NameIsDNSSubdomain;
    k8s.io/apimachinery pkg/util/validation validation.go IsDNS1123Subdomain)."""
    if not name:
        return ["metadata.name: Required value: name or generateName is required"]
    if not isinstance(name, str) or (re.fullmatch(DNS1123_SUBDOMAIN, name) and len(name) <= 253):
        return []
    return [
        f"metadata.name: Invalid value: {go_value(name)}: a lowercase RFC 1123 subdomain must consist of lower "
        "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character "
        f"(e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN}')"
    ]


def _blocking(error: str) -> bool:
    body = error.partition(": ")[2]
    return body.startswith(BLOCKING) or " in body must be of type " in body


def _scale_errors(scale: dict[str, Any] | None, obj: dict[str, Any]) -> list[str]:
    if not scale:
        return []
    value: Any = obj
    for part in scale["specReplicasPath"].lstrip(".").split("."):
        if not isinstance(value, dict) or part not in value:
            return []
        value = value[part]
    path = scale["specReplicasPath"]
    if not isinstance(value, int) or isinstance(value, bool):
        kind = {"str": "string", "dict": "map[string]interface {}", "list": "[]interface {}", "float": "float64"}.get(
            type(value).__name__, type(value).__name__
        )
        shown = _go_plain(value)
        return [f"{path}: Invalid value: 0: {path} accessor error: {shown} is of the type {kind}, expected int64"]
    if value < 0:
        return [f"{path}: Invalid value: {value}: should be a non-negative integer"]
    if value > INT32_MAX:
        return [f"{path}: Invalid value: {value}: should be less than or equal to {INT32_MAX}"]
    return []


def _go_plain(value: Any) -> str:
    """Go's %v: maps as map[k:v ...] with sorted keys, slices as [a b]."""
    if isinstance(value, dict):
        return "map[" + " ".join(f"{k}:{_go_plain(value[k])}" for k in sorted(value)) + "]"
    if isinstance(value, list):
        return "[" + " ".join(_go_plain(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    return value if isinstance(value, str) else go_value(value)


# ---------------------------------------------------------------- CEL rules


def _cel_errors(node: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    for rule in node.get("x-kubernetes-validations") or []:
        relative = rule.get("fieldPath", "")
        where = f"{path}{relative}" if path else (relative.lstrip(".") or "<nil>")
        message = rule_message(rule, value)
        outcome = evaluate_rule(rule, value)
        if outcome.error is not None:  # a rule that cannot be evaluated rejects
            errors.append(f'{where}: Invalid value: "{node.get("type")}": {outcome.error} evaluating rule: {message}')
        elif not outcome.true:
            shown = "" if node.get("type") in ("object", "array") else f"{go_value(value)}: "
            errors.append(f"{where}: Invalid value: {shown}{message}")
    if isinstance(value, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name in value:
                errors += _cel_errors(prop, value[name], f"{path}.{name}" if path else name)
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            errors += _cel_errors(node["items"], item, f"{path}[{index}]")
    return errors
