"""What the API server's schema stage checks beyond pydantic's first error on each field.

The CRD's CEL rules on the object as sent (with the schema's defaults), the pattern of a string
that is also too long, the items of a list that also has too many, the scale subresource's check
of `.spec.nodes`, and the nulls the server prunes before all of it.

The CRD's schema is generated once, from the models.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

import accelpool_api as api
from accelpool_api import crd
from accelpool_api.validation.errors import WEBHOOK_FIELDS, json_type, model_of, wire_fields


def checked_anyway(problems: list[api.Problem]) -> list[api.Problem]:
    """What kube-openapi checks where pydantic stops at the first broken constraint: the items of a list that
    has too many. A string that is too long is not also matched against its pattern: kube-openapi's string
    validator stops at its first finding (pkg/validation/validate/validator.go stringValidator: maxLength,
    minLength, then pattern), as the recorded v1.36.2 server shows for a name both too long and off its
    pattern (../shared/fidelity/kubernetes/crd-admission-and-apply.yaml, "pattern and maxLength")."""
    found: list[api.Problem] = []
    for problem in problems:
        if problem.error_type == "TooMany" and isinstance(problem.value, list):
            items = _schema_at(problem.path).get("items") or {}
            for index, item in enumerate(problem.value):
                path = f"{problem.path}[{index}]"
                expected = items.get("type")
                if expected == "string" and not isinstance(item, str):
                    given = json_type(item)
                    found.append(
                        api.Problem(
                            path,
                            item,
                            f'{path} in body must be of type {expected}: "{given}"',
                            shown=f'"{given}"',
                            error_type="TypeInvalid",
                        )
                    )
                elif isinstance(item, str):
                    found += _pattern_problems(path, item, items)
    return found


def _pattern_problems(path: str, value: str, schema: Mapping[str, Any]) -> list[api.Problem]:
    pattern = schema.get("pattern")
    if pattern and not re.search(pattern, value):
        return [api.Problem(path, value, f"{path} in body should match '{pattern}'")]
    return []


@functools.cache
def _crd_schema() -> dict[str, Any]:
    return crd.openapi_schema()


def _schema_at(path: str) -> Mapping[str, Any]:
    node: Mapping[str, Any] = _crd_schema()
    for part in re.sub(r"\[[0-9]+\]", ".[]", path).split("."):
        if not part:
            continue
        node = node.get("items", {}) if part == "[]" else (node.get("properties") or {}).get(part, {})
    return node


def rule_problems(model: type[BaseModel], value: Any, path: str) -> list[api.Problem]:
    """The CEL rules of `model` and of the models inside it, checked on the object as it is, as the API
    server checks them even when a field is out of range (its schema errors are reported alongside)."""
    if not isinstance(value, Mapping):
        return []
    wire = _with_defaults(model, value)
    problems = [
        api.Problem(f"{path}.{rule.field}" if rule.field else path, dict(wire), rule.message_for(wire), shown=None)
        for rule in getattr(model, "rules", ())
        if not rule.holds(wire)
    ]
    for name, annotation in wire_fields(model).items():
        inner = model_of(annotation)
        if inner is not None and name in value and f"{path}.{name}" not in WEBHOOK_FIELDS:
            problems += rule_problems(inner, value[name], f"{path}.{name}")
    return problems


def _with_defaults(model: type[BaseModel], value: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar defaults the CRD's schema declares, applied as the API server applies them."""
    wire = dict(value)
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in wire and info.default is not None and isinstance(info.default, str | int | float | bool):
            wire[key] = info.default
    return wire


def int_or_string(problems: list[api.Problem]) -> list[api.Problem]:
    """The API server's words for an int-or-string field (`x-kubernetes-int-or-string`, `anyOf: [integer,
    string]`) given another type, in place of pydantic's two union errors: kube-openapi's type error
    for `integer,string`, the anyOf's, its first branch's, and for a number the integer format's
    (recorded from kube-apiserver v1.36.2: ../shared/fidelity/kubernetes/crd-admission-and-apply.yaml,
    "int-or-string given a float"; the same for a boolean, a list or a mapping by the emulated
    server, accelpool_demo.apiserver.structural)."""
    found: list[api.Problem] = []
    for problem in problems:
        value = problem.value
        if problem.error_type != "TypeInvalid" or not _schema_at(problem.path).get("x-kubernetes-int-or-string"):
            found.append(problem)
            continue
        path, given = problem.path, json_type(value)
        found += [
            api.Problem(
                path, value, f'{path} in body must be of type integer,string: "{given}"', "TypeInvalid", f'"{given}"'
            ),
            api.Problem("<nil>", "", f'"{path}" must validate at least one schema (anyOf)', shown='""'),
            api.Problem(path, value, f'{path} in body must be of type integer: "{given}"', "TypeInvalid", f'"{given}"'),
        ]
        if given == "number":
            found.append(
                api.Problem(
                    "<nil>", "", f"Checked value must be of type integer (default format) in {path}", shown='""'
                )
            )
    return found


BLOCKING = frozenset({"Required", "NotSupported", "TooLong", "TooMany", "TypeInvalid"})
RULES_NOT_CHECKED = api.Problem(
    "<nil>",
    None,
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation",
    shown="null",
)
INT32_MAX = 2**31 - 1


def scale_problems(body: Mapping[str, Any]) -> list[api.Problem]:
    """The scale subresource's own check of `specReplicasPath` on every write
    (apiextensions-apiserver pkg/registry/customresource/validator.go ValidateScaleSpec), on top of
    the schema's: `.spec.nodes` must be an int64 (unstructured.NestedInt64's accessor error), not
    negative, and fit an int32."""
    spec = body.get("spec")
    if not isinstance(spec, Mapping) or "nodes" not in spec:
        return []
    nodes = spec["nodes"]
    if not isinstance(nodes, int) or isinstance(nodes, bool):
        return [
            api.Problem(
                ".spec.nodes",
                nodes,
                f".spec.nodes accessor error: {go_plain(nodes)} is of the type {go_type(nodes)}, expected int64",
                shown="0",
            )
        ]
    if nodes < 0:
        return [api.Problem(".spec.nodes", nodes, "should be a non-negative integer")]
    if nodes > INT32_MAX:
        return [api.Problem(".spec.nodes", nodes, f"should be less than or equal to {INT32_MAX}")]
    return []


def go_plain(value: Any) -> str:
    """Go's %v of a decoded JSON value: `four`, `map[max:4 min:1]`, `[H100]`."""
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{key}:{go_plain(value[key])}" for key in sorted(value)) + "]"
    if isinstance(value, list | tuple):
        return "[" + " ".join(go_plain(item) for item in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, str):
        return value
    return api.go_value(value)


def go_type(value: Any) -> str:
    """Go's %T of a decoded JSON value."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, float):
        return "float64"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "map[string]interface {}"
    if isinstance(value, list | tuple):
        return "[]interface {}"
    return "<nil>" if value is None else "int64"


def without_nulls(model: type[BaseModel], value: Mapping[str, Any]) -> dict[str, Any]:
    """Drop null fields, as the API server prunes them before defaulting (none of ours is nullable).

    Only declared fields: a null in a map (nodeSelector) fails its type, and inside `accelerator`
    (x-kubernetes-preserve-unknown-fields) nothing is pruned.
    """
    fields = wire_fields(model)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if key in fields and item is None:
            continue
        inner = model_of(fields[key]) if key in fields and key != "accelerator" else None
        kept[key] = without_nulls(inner, item) if inner is not None and isinstance(item, Mapping) else item
    return kept
