"""pydantic's validation errors → the API server's field errors, word for word.

The models in `accelpool_api` check what the CRD's schema and CEL rules check; this module turns
each pydantic error into the `api.Problem` kube-openapi or the CEL rule would have reported, at
the same field path: `spec.sharing.timeSlicing.replicas: Invalid value: 1: ... should be greater
than or equal to 2`. Problems inside the two-shape `accelerator` are the webhook's, in its words.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

import accelpool_api as api

WEBHOOK_FIELDS = ("spec.accelerator",)
"""Fields the CRD's schema leaves open (two shapes) but requires: only the webhook judges what is in them."""


def webhook_only(problem: api.Problem) -> bool:
    """Whether only the webhook reports `problem` (it is inside `accelerator`, not its absence)."""
    return problem.path.startswith(WEBHOOK_FIELDS) and not (
        problem.path in WEBHOOK_FIELDS and problem.error_type == "Required"
    )


def wire_path(loc: tuple[int | str, ...]) -> tuple[str, type[BaseModel] | None]:
    """A pydantic error location → a field path on the wire, dropping union-member tags."""
    model: type[BaseModel] | None = api.ComputePool
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
            continue
        fields = wire_fields(model) if model is not None else {}
        if part in fields:
            parts.append(part)
            model = model_of(fields[part])
        elif model is None and parts and parts[-1].endswith("Selector"):
            parts.append(part)  # a map's key, named as kube-openapi names it: spec.nodeSelector.zone
        # anything else is a union tag (int, str, function-after[...]) and is skipped
    return ".".join(parts) or "(document)", model


def wire_fields(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s fields by their name on the wire (camelCase), with their annotations."""
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


def model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field's annotation holds (through `X | None` and `list[X]`), if any."""
    candidates = [annotation, *getattr(annotation, "__args__", ())]
    for candidate in candidates:
        for inner in (candidate, *getattr(candidate, "__args__", ())):
            if isinstance(inner, type) and issubclass(inner, BaseModel):
                return inner
    return None


_JSON_TYPES: dict[str, str] = {
    "int_type": "integer",
    "int_parsing": "integer",
    "string_type": "string",
    "bool_type": "boolean",
    "float_type": "number",
    "list_type": "array",
    "dict_type": "object",
    "model_type": "object",
    "model_attributes_type": "object",
}
"""pydantic's type errors → the JSON type the CRD's schema declares."""


def json_type(value: Any) -> str:
    """The JSON type of a decoded value, as the API server names it in a type error."""
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
    if isinstance(value, list | tuple):
        return "array"
    return "object"


def field_problem(error: Mapping[str, Any]) -> api.Problem:
    """One pydantic error as the API server's field error (or the webhook's, inside `accelerator`)."""
    loc = tuple(error["loc"])
    path, _ = wire_path(loc)
    value = error.get("input")
    kind = error["type"]
    if path.startswith(WEBHOOK_FIELDS) and not (path in WEBHOOK_FIELDS and kind == "missing"):
        return _webhook_problem(path, loc, error)
    if kind == "extra_forbidden":
        return unknown_field(loc, value)
    return _schema_problem(path, error)


def _schema_problem(path: str, error: Mapping[str, Any]) -> api.Problem:
    """A field's problem in the words of the CRD's schema (kube-openapi) or of the CEL rule that failed."""
    value = error.get("input")
    kind = error["type"]
    ctx = error.get("ctx") or {}
    name = path  # kube-openapi names the field as the field path does: spec.mig.profiles[0], spec.nodeSelector.zone
    if kind == "missing":
        return api.Problem(path, None, "", error_type="Required")
    if kind in _JSON_TYPES or (kind in ("literal_error", "enum") and not isinstance(value, str)):
        expected = _JSON_TYPES.get(kind, "string")
        given = json_type(value)
        return api.Problem(
            path,
            value,
            f'{name} in body must be of type {expected}: "{given}"',
            shown=f'"{given}"',
            error_type="TypeInvalid",
        )
    if kind == "greater_than_equal":
        return api.Problem(path, value, f"{name} in body should be greater than or equal to {api.go_value(ctx['ge'])}")
    if kind == "less_than_equal":
        return api.Problem(path, value, f"{name} in body should be less than or equal to {api.go_value(ctx['le'])}")
    if kind == "string_pattern_mismatch":
        return api.Problem(path, value, f"{name} in body should match '{ctx['pattern']}'")
    if kind in ("literal_error", "enum"):
        supported = ", ".join(json.dumps(v) for v in _supported(ctx))
        return api.Problem(path, value, f"supported values: {supported}", error_type="NotSupported")
    if kind == "too_long":
        return api.Problem(
            path,
            value,
            f"must have at most {ctx['max_length']} items",
            error_type="TooMany",
            shown=str(ctx.get("actual_length", len(value) if isinstance(value, list) else 0)),
        )
    if kind == "too_short":
        return api.Problem(path, value, f"{name} in body should have at least {ctx['min_length']} items")
    if kind == "string_too_long":
        return api.Problem(
            path, value, f"may not be more than {ctx['max_length']} bytes", error_type="TooLong", shown=None
        )
    if kind == "string_too_short":
        return api.Problem(path, value, f"{name} in body should be at least {ctx['min_length']} chars long")
    message = str(error["msg"]).removeprefix("Value error, ")
    rule = CEL_RULES.get(message)
    if rule is not None:
        # A CEL rule's failure: the server names the field (fieldPath) and leaves the value out when
        # the rule is on an object, as all of ours are (apiextensions-apiserver
        # pkg/apiserver/schema/cel/validation.go: field.OmitValueType for objects and arrays).
        return api.Problem(f"{path}.{rule.field}" if rule.field else path, value, message, shown=None)
    return api.Problem(path, value, message)


def _supported(ctx: Mapping[str, Any]) -> list[str]:
    expected = ctx.get("expected", "")
    return [part.strip().strip("'") for part in str(expected).replace(" or ", ", ").split(",") if part.strip()]


def unknown_field(loc: tuple[int | str, ...], value: Any) -> api.Problem:
    """Strict decoding's error for an unknown field at `loc`, with the valid fields there as a hint."""
    parent_path, parent_model = wire_path(loc[:-1])
    field = str(loc[-1])
    prefix = "" if parent_path == "(document)" else f"{parent_path}."
    valid = ", ".join(wire_fields(parent_model)) if parent_model else ""
    return api.Problem(
        f"{prefix}{field}",
        value,
        f'unknown field "{prefix}{field}"',
        error_type="UnknownField",
        hint=f"valid fields here: {valid}" if valid else "",
    )


def _webhook_problem(path: str, loc: tuple[int | str, ...], error: Mapping[str, Any]) -> api.Problem:
    """A problem inside the two-shape `accelerator`, which only the webhook sees: the schema's words for
    what a schema would say, accelpool's for the rest."""
    value = error.get("input")
    kind = error["type"]
    if kind == "extra_forbidden":
        unknown = unknown_field(loc, value)
        return api.Problem(unknown.path, value, f"{unknown.message}; {unknown.hint}")
    if path == "spec.accelerator" and kind not in ("value_error", "assertion_error"):
        return api.Problem(path, value, _accelerator_shape_message(value))
    if kind in ("value_error", "assertion_error"):
        return api.Problem(path, value, str(error["msg"]).removeprefix("Value error, "))
    return _schema_problem(path, error)


CEL_RULES = {
    rule.message: rule
    for model in (api.ComputePoolSpec, api.MigSpec, api.SharingSpec, api.HealthSpec, api.DrainPolicy)
    for rule in model.rules
    if rule.cel
}


def merge(problems: Iterable[api.Problem]) -> list[api.Problem]:
    """Union members each report a failure at the same path; keep one line per path and message."""
    merged: dict[str, api.Problem] = {}
    for problem in problems:
        previous = merged.get(problem.path)
        if previous is None or _is_shape_message(previous):
            merged[problem.path] = problem
        elif not _is_shape_message(problem) and previous.message != problem.message:
            same = previous.error_type == problem.error_type and previous.shown == problem.shown
            merged[problem.path] = api.Problem(
                previous.path,
                previous.value,
                f"{previous.message}; or {problem.message}",
                error_type=previous.error_type if same else "Invalid",
                shown=previous.shown if same else api.AUTO,
            )
    return list(merged.values())


def _is_shape_message(problem: api.Problem) -> bool:
    """The generic 'takes this shape or that' message, which a specific one beats."""
    return problem.path == "spec.accelerator" and problem.message == _accelerator_shape_message(problem.value)


def _accelerator_shape_message(value: Any) -> str:
    return f"accelerator must be NAME[:COUNT] (e.g. 'H100:8') or {{name, memory, formFactor, count}}, got {value!r}"
