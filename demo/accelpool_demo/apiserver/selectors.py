"""Label and field selectors, as the API server reads them from `?labelSelector=` and `?fieldSelector=`.

Pure. Label selectors (k8s.io/apimachinery/pkg/labels/selector.go): `k=v`, `k==v`, `k!=v`, `k`, `!k`,
`k in (a,b)`, `k notin (a,b)`, comma-separated, all of which must hold. Field selectors
(k8s.io/apimachinery/pkg/fields/selector.go): `f=v`, `f==v`, `f!=v`, comma-separated, where `f` is a
dotted path into the object (`metadata.name`, `involvedObject.kind`, `reason`, `spec.nodeName`); the
real server accepts only the fields each resource declares, the emulator any path. And LabelSelector
objects (a PodDisruptionBudget's `spec.selector`: `selects`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]
_SET = re.compile(r"^\s*([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)\s*$")


def _split(selector: str) -> list[str]:
    """Split on the commas outside parentheses (`a in (x,y),b=c` → two requirements)."""
    parts, depth, current = [], 0, ""
    for char in selector:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [part.strip() for part in parts if part.strip()]


def _label_requirement(text: str) -> Callable[[Mapping[str, str]], bool]:
    found = _SET.match(text)
    if found:
        key, operator, values = found[1], found[2], {v.strip() for v in found[3].split(",")}
        if operator == "in":
            return lambda labels: labels.get(key) in values
        return lambda labels: labels.get(key) not in values
    for operator in ("!=", "==", "="):
        if operator in text:
            key, _, value = (part.strip() for part in text.partition(operator))
            if operator == "!=":
                return lambda labels: labels.get(key) != value
            return lambda labels: labels.get(key) == value
    if text.startswith("!"):
        key = text[1:].strip()
        return lambda labels: key not in labels
    return lambda labels: text in labels


def label_matcher(selector: str | None) -> Matcher:
    """Whether an object's `metadata.labels` satisfy a label selector (an empty one selects everything)."""
    requirements = [_label_requirement(part) for part in _split(selector or "")]

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(requirement(labels) for requirement in requirements)

    return matches


def field_value(obj: Mapping[str, Any], path: str) -> str:
    """The value at a dotted path, as a field selector compares it (a missing field is "")."""
    value: Any = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def field_matcher(selector: str | None) -> Matcher:
    """Whether an object satisfies a field selector (an empty one selects everything)."""
    requirements: list[tuple[str, bool, str]] = []
    for part in _split(selector or ""):
        for operator in ("!=", "==", "="):
            if operator in part:
                path, _, value = (p.strip() for p in part.partition(operator))
                requirements.append((path, operator != "!=", value))
                break
        else:
            raise ValueError(f"invalid field selector requirement: {part!r}")

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in requirements)

    return matches


def matcher(params: Mapping[str, str]) -> Matcher:
    """The selectors of a list or watch request's query parameters, combined."""
    labels = label_matcher(params.get("labelSelector"))
    fields = field_matcher(params.get("fieldSelector"))
    return lambda obj: labels(obj) and fields(obj)


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str]) -> bool:
    """Whether a LabelSelector object (`spec.selector`: matchLabels and matchExpressions with In, NotIn,
    Exists, DoesNotExist) selects these labels, as `metav1.LabelSelectorAsSelector` reads it
    (k8s.io/apimachinery/pkg/apis/meta/v1/helpers.go): a null selector selects nothing, an empty one
    everything; one with an unknown operator selects nothing (the eviction handler skips such a PDB)."""
    if selector is None:
        return False
    if any(labels.get(key) != value for key, value in (selector.get("matchLabels") or {}).items()):
        return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = set(expression.get("values") or [])
        held = {
            "In": key in labels and labels[key] in values,
            "NotIn": key not in labels or labels[key] not in values,
            "Exists": key in labels,
            "DoesNotExist": key not in labels,
        }.get(str(operator), False)
        if not held:
            return False
    return True
