"""A custom object judged by its CRD's structural schema, as kube-apiserver judges it before CEL runs. Pure.

- `apply_defaults`: a property's `default` where the object leaves it out, then defaulting goes on
  inside it (k8s.io/apiextensions-apiserver pkg/apiserver/schema/defaulting/algorithm.go);
- `prune`: fields the schema does not declare removed, their paths returned (pkg/apiserver/schema/
  pruning/algorithm.go; with `fieldValidation=Strict` the server refuses them instead);
  `x-kubernetes-preserve-unknown-fields` keeps them;
- `problems`: types (`x-kubernetes-int-or-string`, `nullable`), `required`, `enum`, `pattern`, the
  length, item and property bounds, `minimum`/`maximum`, and the uniqueness of `x-kubernetes-list-type`
  `set` items and `map` keys, worded as kube-openapi's validator and field.Error word them
  (k8s.io/kube-openapi pkg/validation/validate, k8s.io/apimachinery pkg/util/validation/field).
`format` is not checked.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from typing import Any

import accelpool_api as api

_TYPES = {"object": dict, "array": list, "string": str, "boolean": bool}


def prune_nulls(schema: Mapping[str, Any], value: Any) -> Any:
    """A null property is dropped unless its schema allows null, so that its default (if any) fills it in;
    nulls in maps and lists are kept, to fail their type (apiextensions-apiserver
    pkg/apiserver/schema/defaulting/prunenulls.go PruneNonNullableNullsWithoutDefaults, and algorithm.go
    `Default`, which treats a non-nullable null as absent)."""
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        pruned = {}
        for key, item in value.items():
            if key in properties:
                if item is None and not properties[key].get("nullable"):
                    continue
                pruned[key] = prune_nulls(properties[key], item)
            else:
                pruned[key] = prune_nulls(additional, item) if isinstance(additional, Mapping) else item
        return pruned
    if isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        return [prune_nulls(schema["items"], item) for item in value]
    return value


def apply_defaults(schema: Mapping[str, Any], value: Any) -> None:
    """The schema's defaults filled in, in place."""
    if isinstance(value, dict):
        for name, prop in (schema.get("properties") or {}).items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
            if name in value:
                apply_defaults(prop, value[name])
        if isinstance(schema.get("additionalProperties"), dict):
            for item in value.values():
                apply_defaults(schema["additionalProperties"], item)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for item in value:
            apply_defaults(schema["items"], item)


def prune(schema: Mapping[str, Any], value: Any, path: str = "", *, closed_only: bool = False) -> list[str]:
    """Removes, in place, the fields the schema does not declare; returns their paths. `closed_only`: only
    from closed objects (`additionalProperties: false`), as a built-in kind's Go type drops them (`typed`)."""
    pruned: list[str] = []
    if isinstance(value, dict) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for name in list(value):
            child = f"{path}.{name}" if path else name
            if properties is not None and name in properties:
                pruned += prune(properties[name], value[name], child, closed_only=closed_only)
            elif isinstance(additional, dict):
                pruned += prune(additional, value[name], child, closed_only=closed_only)
            elif additional is False or (properties is not None and not closed_only):
                del value[name]
                pruned.append(child)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, item in enumerate(value):
            pruned += prune(schema["items"], item, f"{path}[{index}]", closed_only=closed_only)
    return pruned


def problems(schema: Mapping[str, Any], value: Any, path: str = "") -> list[api.Problem]:
    """Where `value` (defaulted and pruned) breaks the schema, as the API server words it."""
    where = path or "<root>"
    if value is None:
        return [] if schema.get("nullable") else [_type_problem(schema, where, value)]
    if not _typed(schema, value):
        if schema.get("x-kubernetes-int-or-string"):
            return _int_or_string_problems(where, value)
        return [_type_problem(schema, where, value)]
    found = _scalar_problems(schema, value, where)
    if isinstance(value, dict):
        found += _object_problems(schema, value, path)
    elif isinstance(value, list):
        found += _array_problems(schema, value, path, where)
    return found


def _typed(schema: Mapping[str, Any], value: Any) -> bool:
    if schema.get("x-kubernetes-int-or-string"):
        return isinstance(value, int | str) and not isinstance(value, bool)
    wanted = schema.get("type")
    if wanted is None:
        return True
    if wanted == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if wanted == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, _TYPES.get(wanted, object))


def _type_problem(schema: Mapping[str, Any], where: str, value: Any) -> api.Problem:
    given = _json_type(value)
    return api.Problem(
        where, value, f'{where} in body must be of type {schema.get("type")}: "{given}"', "TypeInvalid", f'"{given}"'
    )


def _int_or_string_problems(where: str, value: Any) -> list[api.Problem]:
    """What kube-openapi's validator says of an int-or-string (`anyOf: [integer, string]`) given another type:
    the type error of the field, of the anyOf, of its first branch, and for a number the integer format's."""
    given = _json_type(value)
    found = [
        api.Problem(
            where, value, f'{where} in body must be of type integer,string: "{given}"', "TypeInvalid", f'"{given}"'
        ),
        api.Problem("<nil>", "", f'"{where}" must validate at least one schema (anyOf)', "Invalid", '""'),
        api.Problem(where, value, f'{where} in body must be of type integer: "{given}"', "TypeInvalid", f'"{given}"'),
    ]
    if given == "number":
        found.append(
            api.Problem(
                "<nil>", "", f"Checked value must be of type integer (default format) in {where}", "Invalid", '""'
            )
        )
    return found


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", list: "array", str: "string", int: "integer", float: "number"}.get(type(value), "string")


def _scalar_problems(schema: Mapping[str, Any], value: Any, where: str) -> list[api.Problem]:
    found: list[api.Problem] = []
    if "enum" in schema and value not in schema["enum"]:
        supported = ", ".join(json.dumps(v) for v in schema["enum"])
        found.append(api.Problem(where, value, f"supported values: {supported}", "NotSupported"))
    if isinstance(value, str):  # kube-openapi's string and number validators stop at their first finding
        before = len(found)
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            found.append(
                api.Problem(where, value, f"may not be more than {schema['maxLength']} bytes", "TooLong", None)
            )
        if "minLength" in schema and len(value) < schema["minLength"]:
            found.append(
                api.Problem(where, value, f"{where} in body should be at least {schema['minLength']} chars long")
            )
        if "pattern" in schema and not re.search(schema["pattern"], value):
            found.append(api.Problem(where, value, f"{where} in body should match '{schema['pattern']}'"))
        del found[before + 1 :]
    if isinstance(value, int | float) and not isinstance(value, bool):
        before = len(found)
        if "maximum" in schema and value > schema["maximum"]:
            found.append(
                api.Problem(where, value, f"{where} in body should be less than or equal to {schema['maximum']}")
            )
        if "minimum" in schema and value < schema["minimum"]:
            found.append(
                api.Problem(where, value, f"{where} in body should be greater than or equal to {schema['minimum']}")
            )
        del found[before + 1 :]
    return found


def _object_problems(schema: Mapping[str, Any], value: Mapping[str, Any], path: str) -> list[api.Problem]:
    found: list[api.Problem] = []
    for name in schema.get("required") or []:
        if name not in value:
            found.append(api.Problem(f"{path}.{name}" if path else name, None, "", "Required"))
    if "maxProperties" in schema and len(value) > schema["maxProperties"]:
        found.append(api.Problem(path, len(value), f"must have at most {schema['maxProperties']} items", "TooMany"))
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    for name, item in value.items():
        child = f"{path}.{name}" if path else name
        if name in properties:
            found += problems(properties[name], item, child)
        elif isinstance(additional, dict):
            found += problems(additional, item, child)
    return found


def _array_problems(schema: Mapping[str, Any], value: list[Any], path: str, where: str) -> list[api.Problem]:
    found: list[api.Problem] = []
    if "maxItems" in schema and len(value) > schema["maxItems"]:
        found.append(api.Problem(where, len(value), f"must have at most {schema['maxItems']} items", "TooMany"))
    if "minItems" in schema and len(value) < schema["minItems"]:
        # field.Invalid with the list itself as the value (apiextensions validation.go kubeOpenAPIResultToFieldErrors)
        found.append(api.Problem(where, value, f"{where} in body should have at least {schema['minItems']} items"))
    list_type = schema.get("x-kubernetes-list-type")
    keys = schema.get("x-kubernetes-list-map-keys") or []
    seen: set[str] = set()
    for index, item in enumerate(value):
        identity = (
            json.dumps({k: item.get(k) for k in keys}, sort_keys=True)
            if list_type == "map" and isinstance(item, dict)
            else json.dumps(item, sort_keys=True)
            if list_type == "set"
            else None
        )
        if identity is not None and identity in seen:
            found.append(api.Problem(f"{path}[{index}]", item, f"duplicate entries in a list of type {list_type}"))
        elif identity is not None:
            seen.add(identity)
        if isinstance(schema.get("items"), dict):
            found += problems(schema["items"], item, f"{path}[{index}]")
    return found
