"""Validates ComputePool documents as the API server admits them, in the server's own words.

A real API server judges a ComputePool in three stages, and stops at the first that objects:

1. decoding: an unknown field fails strict field validation (kubectl's default) before anything
   else: `strict decoding error: unknown field "spec.gpus"`;
2. the CRD's structural schema and its CEL rules (generated from `accelpool.api` by `accelpool.crd`):
   `spec.sharing.timeSlicing.replicas: Invalid value: 1: spec.sharing.timeSlicing.replicas in body
   should be greater than or equal to 2`;
3. the validating admission webhook (`accelpool.admission`), which runs this module: what needs the
   catalog, or the `accelerator` field whose two shapes CEL cannot see.

`validate_object` runs the same stages on the same models and reports what the server would, word
for word, so `accelpool validate` and `kubectl apply` agree. The operator uses it too, for the
`Valid` condition of a pool stored before a rule existed. Pure.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ValidationError

from accelpool import api, crd

Stage = Literal["decode", "schema", "webhook"]
WEBHOOK_NAME = f"{api.PLURAL}.{api.GROUP}"
"""The admission webhook's name, as `kubectl apply` quotes it in a denial."""


@dataclass(frozen=True)
class Verdict:
    """One document's result: the parsed pool when valid, else its problems and the stage that found them."""

    kind: str
    name: str
    pool: api.ComputePool | None
    problems: tuple[api.Problem, ...]
    stage: Stage | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def rejection(self) -> str:
        """What `kubectl apply` prints when the API server refuses to create this object.

        A schema or CEL error and a webhook denial read alike: kubectl rebuilds both from the
        status causes (k8s.io/kubectl pkg/cmd/util/helpers.go checkErr), and the webhook sends one
        cause per field error as the server's own validation does (`accelpool.admission`). Other
        clients print the status message instead; for a denial that is `admission webhook
        "computepools.accelpool.io" denied the request: ` and `denial_message`.
        """
        if self.stage == "decode":
            found = ", ".join(p.message for p in self.problems)
            return (
                f'{self.kind} in version "{api.VERSION}" cannot be handled as a {self.kind}: '
                f"strict decoding error: {found}"
            )
        # kubectl rebuilds the message from the status causes (k8s.io/kubectl pkg/cmd/util/helpers.go).
        if len(self.problems) == 1:
            return f'The {self.kind} "{self.name}" is invalid: {self.problems[0]}'
        return f'The {self.kind} "{self.name}" is invalid: \n' + "\n".join(f"* {p}" for p in self.problems)


def denial_message(problems: Iterable[api.Problem]) -> str:
    """What the admission webhook denies an object with: its field error, or each of them on a line."""
    return listed([str(p) for p in problems])


def listed(lines: list[str]) -> str:
    """One line alone; several as `N problems:` and a `* ` line each."""
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:\n" + "\n".join(f"* {line}" for line in lines)


def validate_object(document: Any) -> Verdict:
    """Validate one decoded object (a dict from YAML or the API), stage by stage, as the API server does."""
    if not isinstance(document, Mapping):
        return Verdict(
            "?", "?", None, (api.Problem("(document)", document, "expected a mapping (a Kubernetes object)"),)
        )
    kind = str(document.get("kind", "?"))
    metadata = document.get("metadata")
    name = str(metadata.get("name", "?")) if isinstance(metadata, Mapping) else "?"
    # The status subresource: a create or update of the object never writes status (the server drops it).
    body = {key: api.as_sent(value) for key, value in document.items() if key != "status"}
    if isinstance(body.get("spec"), Mapping):
        body["spec"] = _without_nulls(api.ComputePoolSpec, body["spec"])
    unknown_metadata = [
        api.Problem(f"metadata.{key}", value, f'unknown field "metadata.{key}"', error_type="UnknownField")
        for key, value in (metadata.items() if isinstance(metadata, Mapping) else ())
        if key not in OBJECT_META_FIELDS
    ]
    unknown_metadata += _unknown_in_status(document.get("status"))
    naming = api.name_problems(metadata.get("name", "")) if isinstance(metadata, Mapping) else []
    try:
        pool = api.ComputePool.model_validate(body, context={"structural_only": True})
    except ValidationError as error:
        problems = unknown_metadata + naming + _merge(_problem(e) for e in error.errors())
        problems += _checked_anyway(problems)
        unknown = [p for p in problems if p.error_type == "UnknownField"]
        if unknown:
            return Verdict(kind, name, None, tuple(unknown), "decode")
        schema = [p for p in problems if not _webhook_only(p) and p.message not in _RULES] + _scale_problems(body)
        if any(p.error_type in _BLOCKING for p in schema):
            # Type, required, enum, length and count errors stop the CEL rules from running
            # (apiextensions-apiserver pkg/registry/customresource/strategy.go hasBlockingErr).
            schema.append(_RULES_NOT_CHECKED)
        else:
            schema += _rule_problems(api.ComputePoolSpec, body.get("spec"), "spec")
        if schema:
            return Verdict(kind, name, None, tuple(schema), "schema")
        return Verdict(kind, name, None, tuple(p for p in problems if _webhook_only(p)), "webhook")
    if unknown_metadata:
        return Verdict(kind, name, None, tuple(unknown_metadata), "decode")
    schema = naming + _scale_problems(body)
    if any(p.error_type in _BLOCKING for p in schema):
        schema.append(_RULES_NOT_CHECKED)
    if schema:
        return Verdict(kind, name, None, tuple(schema), "schema")
    found = tuple(api.spec_problems(pool.spec))
    return Verdict(kind, name, None if found else pool, found, "webhook" if found else None)


def _unknown_in_status(status: Any) -> list[api.Problem]:
    """Strict decoding reads `status` too, though a create or update then drops it: its unknown fields."""
    if not isinstance(status, Mapping):
        return []
    try:
        api.ComputePoolStatus.model_validate(api.as_sent(status))
    except ValidationError as error:
        return [
            _unknown_field(("status", *e["loc"]), e.get("input"))
            for e in error.errors()
            if e["type"] == "extra_forbidden"
        ]
    return []


def _checked_anyway(problems: list[api.Problem]) -> list[api.Problem]:
    """What kube-openapi checks where pydantic stops at the first broken constraint: the pattern of a
    string that is too long, and the items of a list that has too many."""
    found: list[api.Problem] = []
    for problem in problems:
        if problem.error_type == "TooLong" and isinstance(problem.value, str):
            found += _pattern_problems(problem.path, problem.value, _schema_at(problem.path))
        elif problem.error_type == "TooMany" and isinstance(problem.value, list):
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


def _rule_problems(model: type[BaseModel], value: Any, path: str) -> list[api.Problem]:
    """The CEL rules of `model` and of the models inside it, checked on the object as it is, as the API
    server checks them even when a field is out of range (its schema errors are reported alongside)."""
    if not isinstance(value, Mapping):
        return []
    wire = _with_defaults(model, value)
    problems = [
        api.Problem(f"{path}.{rule.field}" if rule.field else path, dict(wire), rule.message, shown=None)
        for rule in getattr(model, "rules", ())
        if not rule.holds(wire)
    ]
    for name, annotation in _wire_fields(model).items():
        inner = _model_of(annotation)
        if inner is not None and name in value and f"{path}.{name}" not in _WEBHOOK_FIELDS:
            problems += _rule_problems(inner, value[name], f"{path}.{name}")
    return problems


def _with_defaults(model: type[BaseModel], value: Mapping[str, Any]) -> dict[str, Any]:
    """The scalar defaults the CRD's schema declares, applied as the API server applies them."""
    wire = dict(value)
    for name, info in model.model_fields.items():
        key = info.alias or name
        if key not in wire and info.default is not None and isinstance(info.default, str | int | float | bool):
            wire[key] = info.default
    return wire


_BLOCKING = frozenset({"Required", "NotSupported", "TooLong", "TooMany", "TypeInvalid"})
_RULES_NOT_CHECKED = api.Problem(
    "<nil>",
    None,
    "some validation rules were not checked because the object was invalid; correct the existing errors to "
    "complete validation",
    shown="null",
)
INT32_MAX = 2**31 - 1


def _scale_problems(body: Mapping[str, Any]) -> list[api.Problem]:
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


def validate_spec(spec: Mapping[str, Any]) -> tuple[api.ComputePoolSpec | None, tuple[api.Problem, ...]]:
    """Validate a bare spec (what the operator gets from kopf)."""
    verdict = validate_object(
        {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "x"}, "spec": spec}
    )
    return (verdict.pool.spec if verdict.pool else None), verdict.problems


def _without_nulls(model: type[BaseModel], value: Mapping[str, Any]) -> dict[str, Any]:
    """Drop null fields, as the API server prunes them before defaulting (none of ours is nullable).

    Only declared fields: a null in a map (nodeSelector) fails its type, and inside `accelerator`
    (x-kubernetes-preserve-unknown-fields) nothing is pruned.
    """
    fields = _wire_fields(model)
    kept: dict[str, Any] = {}
    for key, item in value.items():
        if key in fields and item is None:
            continue
        inner = _model_of(fields[key]) if key in fields and key != "accelerator" else None
        kept[key] = _without_nulls(inner, item) if inner is not None and isinstance(item, Mapping) else item
    return kept


OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
"""metav1.ObjectMeta's fields (k8s.io/apimachinery pkg/apis/meta/v1 types.go): strict decoding refuses others."""

_WEBHOOK_FIELDS = ("spec.accelerator",)
"""Fields the CRD's schema leaves open (two shapes) but requires: only the webhook judges what is in them."""


def _webhook_only(problem: api.Problem) -> bool:
    return problem.path.startswith(_WEBHOOK_FIELDS) and not (
        problem.path in _WEBHOOK_FIELDS and problem.error_type == "Required"
    )


# ---------------------------------------------------------------- pydantic errors → the server's field errors


def _walk(loc: tuple[int | str, ...]) -> tuple[str, type[BaseModel] | None]:
    """A pydantic error location → a field path on the wire, dropping union-member tags."""
    model: type[BaseModel] | None = api.ComputePool
    parts: list[str] = []
    for part in loc:
        if isinstance(part, int):
            parts[-1:] = [f"{parts[-1]}[{part}]"] if parts else [f"[{part}]"]
            continue
        fields = _wire_fields(model) if model is not None else {}
        if part in fields:
            parts.append(part)
            model = _model_of(fields[part])
        elif model is None and parts and parts[-1].endswith("Selector"):
            parts.append(part)  # a map's key, named as kube-openapi names it: spec.nodeSelector.zone
        # anything else is a union tag (int, str, function-after[...]) and is skipped
    return ".".join(parts) or "(document)", model


def _wire_fields(model: type[BaseModel]) -> dict[str, Any]:
    return {(info.alias or name): info.annotation for name, info in model.model_fields.items()}


def _model_of(annotation: Any) -> type[BaseModel] | None:
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


def _problem(error: Mapping[str, Any]) -> api.Problem:
    loc = tuple(error["loc"])
    path, _ = _walk(loc)
    value = error.get("input")
    kind = error["type"]
    if path.startswith(_WEBHOOK_FIELDS) and not (path in _WEBHOOK_FIELDS and kind == "missing"):
        return _webhook_problem(path, loc, error)
    if kind == "extra_forbidden":
        return _unknown_field(loc, value)
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
    rule = _RULES.get(message)
    if rule is not None:
        # A CEL rule's failure: the server names the field (fieldPath) and leaves the value out when
        # the rule is on an object, as all of ours are (apiextensions-apiserver
        # pkg/apiserver/schema/cel/validation.go: field.OmitValueType for objects and arrays).
        return api.Problem(f"{path}.{rule.field}" if rule.field else path, value, message, shown=None)
    return api.Problem(path, value, message)


def _supported(ctx: Mapping[str, Any]) -> list[str]:
    expected = ctx.get("expected", "")
    return [part.strip().strip("'") for part in str(expected).replace(" or ", ", ").split(",") if part.strip()]


def _unknown_field(loc: tuple[int | str, ...], value: Any) -> api.Problem:
    parent_path, parent_model = _walk(loc[:-1])
    field = str(loc[-1])
    prefix = "" if parent_path == "(document)" else f"{parent_path}."
    valid = ", ".join(_wire_fields(parent_model)) if parent_model else ""
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
        unknown = _unknown_field(loc, value)
        return api.Problem(unknown.path, value, f"{unknown.message}; {unknown.hint}")
    if path == "spec.accelerator" and kind not in ("value_error", "assertion_error"):
        return api.Problem(path, value, _accelerator_shape_message(value))
    if kind in ("value_error", "assertion_error"):
        return api.Problem(path, value, str(error["msg"]).removeprefix("Value error, "))
    return _schema_problem(path, error)


_RULES = {
    rule.message: rule
    for model in (api.ComputePoolSpec, api.MigSpec, api.SharingSpec, api.HealthSpec)
    for rule in model.rules
    if rule.cel
}


def _merge(problems: Iterable[api.Problem]) -> list[api.Problem]:
    """Union members each report a failure at the same path; keep one line per path and message."""
    merged: dict[str, api.Problem] = {}
    for problem in problems:
        previous = merged.get(problem.path)
        if previous is None or _is_shape_message(previous):
            merged[problem.path] = problem
        elif not _is_shape_message(problem) and previous.message != problem.message:
            merged[problem.path] = api.Problem(
                previous.path, previous.value, f"{previous.message}; or {problem.message}"
            )
    return list(merged.values())


def _is_shape_message(problem: api.Problem) -> bool:
    """The generic 'takes this shape or that' message, which a specific one beats."""
    return problem.path == "spec.accelerator" and problem.message == _accelerator_shape_message(problem.value)


def _accelerator_shape_message(value: Any) -> str:
    return f"accelerator must be NAME[:COUNT] (e.g. 'H100:8') or {{name, memory, formFactor, count}}, got {value!r}"
