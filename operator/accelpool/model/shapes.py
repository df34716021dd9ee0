"""The shape of a Kubernetes object read from a file, checked before anything reads it.

- `object_problems(body)`: a mapping, `metadata` a mapping with string fields, `labels` and
  `annotations` mappings of strings to strings, `spec` and `status` mappings;
- `node_problems(body)`: that, a name, and every field `NodeView.from_body` reads (taints,
  conditions, capacity).

Each problem is an `api.Problem` with a field path; the commands (`accelpool validate`, `plan`,
`recommend`) add the file and the document. This module imports only the API's models, so the
commands that check files do not load the planner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import accelpool_api as api

_METADATA_STRINGS = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")


def object_problems(body: Any) -> list[api.Problem]:
    """What is wrong with the envelope every Kubernetes object shares; [] when it can be read."""
    if not isinstance(body, Mapping):
        return [api.Problem("(document)", body, f"expected a Kubernetes object (a mapping), got {_a(body)}")]
    problems: list[api.Problem] = []
    for key in ("apiVersion", "kind"):
        _expect(problems, body, key, key, str)
    for key in ("spec", "status"):
        _expect(problems, body, key, key, Mapping)
    metadata = body.get("metadata")
    if not _expect(problems, body, "metadata", "metadata", Mapping) or metadata is None:
        return problems
    for key in _METADATA_STRINGS:
        _expect(problems, metadata, key, f"metadata.{key}", str)
    generation = metadata.get("generation")
    if generation is not None and (not isinstance(generation, int) or isinstance(generation, bool)):
        problems.append(api.Problem("metadata.generation", generation, f"must be an integer, got {_a(generation)}"))
    for key in ("labels", "annotations"):
        _string_map(problems, metadata, key, f"metadata.{key}")
    return problems


def node_problems(body: Any) -> list[api.Problem]:
    """`object_problems`, a name, and the shape of every field `NodeView.from_body` reads."""
    problems = object_problems(body)
    if problems:
        return problems
    name = (body.get("metadata") or {}).get("name")
    if not name:
        problems.append(api.Problem("metadata.name", None, "a Node needs a name"))
    spec = body.get("spec") or {}
    if _expect(problems, spec, "taints", "spec.taints", list):
        for i, taint in enumerate(spec.get("taints") or []):
            path = f"spec.taints[{i}]"
            if not _expect_value(problems, taint, path, Mapping):
                continue
            for key in ("key", "effect"):
                if taint.get(key) is None:
                    problems.append(api.Problem(f"{path}.{key}", None, "required field is missing"))
            for key in ("key", "effect", "value", "timeAdded"):
                _expect(problems, taint, key, f"{path}.{key}", str)
    _expect(problems, spec, "unschedulable", "spec.unschedulable", bool)
    status = body.get("status") or {}
    if _expect(problems, status, "conditions", "status.conditions", list):
        for i, condition in enumerate(status.get("conditions") or []):
            path = f"status.conditions[{i}]"
            if not _expect_value(problems, condition, path, Mapping):
                continue
            if condition.get("type") is None:
                problems.append(api.Problem(f"{path}.type", None, "required field is missing"))
            for key in ("type", "status", "reason", "message", "lastTransitionTime"):
                _expect(problems, condition, key, f"{path}.{key}", str)
    for key in ("capacity", "allocatable"):
        if _expect(problems, status, key, f"status.{key}", Mapping):
            for resource, quantity in (status.get(key) or {}).items():
                if not isinstance(quantity, str | int | float) or isinstance(quantity, bool):
                    problems.append(
                        api.Problem(
                            f"status.{key}[{resource}]",
                            quantity,
                            f"must be a quantity like 8 or 80Gi, got {_a(quantity)}",
                        )
                    )
    return problems


_SHAPES: dict[Any, str] = {str: "a string", Mapping: "a mapping", list: "a list", bool: "true or false"}


def _expect(problems: list[api.Problem], parent: Mapping[str, Any], key: str, path: str, shape: Any) -> bool:
    """Is `parent[key]` absent, null or of `shape`? If not, a problem is added."""
    value = parent.get(key)
    return value is None or _expect_value(problems, value, path, shape)


def _expect_value(problems: list[api.Problem], value: Any, path: str, shape: Any) -> bool:
    if isinstance(value, shape):
        return True
    problems.append(api.Problem(path, value, f"must be {_SHAPES[shape]}, got {_a(value)}"))
    return False


def _string_map(problems: list[api.Problem], parent: Mapping[str, Any], key: str, path: str) -> None:
    """`parent[key]`, when set, must map strings to strings, as labels and annotations do."""
    if not _expect(problems, parent, key, path, Mapping):
        return
    for name, value in (parent.get(key) or {}).items():
        if not isinstance(name, str):
            problems.append(api.Problem(f"{path}", name, f"keys must be strings, got {_a(name)}"))
        elif not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, int | float | bool) else ""
            problems.append(api.Problem(f"{path}[{name}]", value, f"must be a string{hint}, got {_a(value)}"))


def _a(value: Any) -> str:
    """What kind of YAML value this is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__
