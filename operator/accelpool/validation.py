"""Validates ComputePool documents and reports every problem with its field path, value and remedy.

Used by `accelpool validate` (objects read by `accelpool.textio`) and by the operator (the `Valid`
condition of a pool that slipped past admission). Structural problems come from the pydantic
models, catalog problems from `api.spec_problems`; both end up as `api.Problem`s. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from accelpool import api


@dataclass(frozen=True)
class Verdict:
    """One document's result: the parsed pool when valid, else its problems."""

    kind: str
    name: str
    pool: api.ComputePool | None
    problems: tuple[api.Problem, ...]

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"


def validate_object(document: Any) -> Verdict:
    """Validate one decoded object (a dict from YAML or the API)."""
    if not isinstance(document, Mapping):
        return Verdict(
            "?", "?", None, (api.Problem("(document)", document, "expected a mapping (a Kubernetes object)"),)
        )
    kind = str(document.get("kind", "?"))
    metadata = document.get("metadata")
    name = str(metadata.get("name", "?")) if isinstance(metadata, Mapping) else "?"
    try:
        pool = api.ComputePool.model_validate(document, context={"structural_only": True})
    except ValidationError as error:
        return Verdict(kind, name, None, tuple(_merge(_problem(e) for e in error.errors())))
    problems = tuple(api.spec_problems(pool.spec))
    return Verdict(kind, name, None if problems else pool, problems)


def validate_spec(spec: Mapping[str, Any]) -> tuple[api.ComputePoolSpec | None, tuple[api.Problem, ...]]:
    """Validate a bare spec (what the operator gets from kopf)."""
    verdict = validate_object(
        {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "x"}, "spec": spec}
    )
    return (verdict.pool.spec if verdict.pool else None), verdict.problems


# ---------------------------------------------------------------- pydantic errors → problems


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
            parts[-1] += f"[{part}]"
        # anything else is a union tag (int, NodeRange, function-after[...]) and is skipped
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


_HINTS = {
    api.MIG_PROFILE_PATTERN: "a MIG profile like 3g.40gb or 1g.10gb+me",
    api.DURATION_PATTERN: "a duration like 90s, 15m or 1h30m",
    api.PERCENT_PATTERN: "a percentage like 50%",
    api.MEMORY_PATTERN: "a size like 80GB",
}


def _problem(error: Mapping[str, Any]) -> api.Problem:
    loc = tuple(error["loc"])
    path, _ = _walk(loc)
    value = error.get("input")
    kind = error["type"]
    if kind == "extra_forbidden":
        parent_path, parent_model = _walk(loc[:-1])
        field = str(loc[-1]) or "''"
        valid = ", ".join(_wire_fields(parent_model)) if parent_model else ""
        prefix = "" if parent_path == "(document)" else f"{parent_path}."
        return api.Problem(f"{prefix}{field}", value, f"unknown field {field!r}; valid fields here: {valid}")
    if kind == "missing":
        return api.Problem(path, None, "required field is missing")
    if path.endswith(_UNION_FIELDS) and kind not in ("value_error", "assertion_error"):
        return api.Problem(path, value, _union_message(path, value))
    if kind == "string_pattern_mismatch":
        pattern = error.get("ctx", {}).get("pattern", "")
        return api.Problem(path, value, f"{value!r} is not {_HINTS.get(pattern, f'matching {pattern}')}")
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind not in ("value_error", "assertion_error"):
        message = f"{message} (got {value!r})"
    rule_field = _RULE_FIELDS.get(message)
    if rule_field and isinstance(value, Mapping):
        return api.Problem(f"{path}.{rule_field}", value.get(rule_field), message)
    return api.Problem(path, value, message)


_RULE_FIELDS = {
    rule.message: rule.field
    for model in (api.ComputePoolSpec, api.MigSpec, api.SharingSpec, api.HealthSpec, api.NodeRange)
    for rule in model.rules
    if rule.field
}


_UNION_FIELDS = ("spec.nodes", "spec.accelerator", "maxUnavailable")


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
    return problem.message == _union_message(problem.path, problem.value)


def _union_message(path: str, value: Any) -> str:
    if path.endswith("nodes"):
        return f"nodes must be a number of nodes (e.g. 4) or {{min, max}} for karpenter pools, got {value!r}"
    if path.endswith("maxUnavailable"):
        return f"maxUnavailable must be a number >= 0 or a percentage like '50%', got {value!r}"
    return f"accelerator must be NAME[:COUNT] (e.g. 'H100:8') or {{name, memory, formFactor, count}}, got {value!r}"
