"""Label and field selectors, as the API server reads them from `?labelSelector=` and `?fieldSelector=`.

Pure. Label selectors as k8s.io/apimachinery/pkg/labels/selector.go lexes and parses them (`k=v`, `k==v`,
`k!=v`, `k`, `!k`, `k in (a,b)`, `k notin (a,b)`, `k>1`, `k<1`, comma-separated, all of which must hold),
a ValueError in its words for one that does not parse. Field selectors (k8s.io/apimachinery/pkg/fields):
`f=v`, `f==v`, `f!=v`, comma-separated, where `f` is one of the fields the resource can be selected by
(`FIELDS`; any dotted path when no resource is named). And LabelSelector objects (a PodDisruptionBudget's
`spec.selector`: `selects`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Matcher = Callable[[Mapping[str, Any]], bool]
Requirement = Callable[[Mapping[str, str]], bool]
_SPECIAL = "=!(),<>"
_TOKENS = {")": ")", ",": ",", "!": "!", "==": "==", "=": "=", ">": ">", "<": "<", "!=": "!=", "(": "("}
_KEYWORDS = {"in": "in", "notin": "notin"}
_BINARY = ("in", "notin", "=", "==", "!=", ">", "<")


def _lex(selector: str) -> list[tuple[str, str]]:
    """selector.go `Lexer`: (token, literal) pairs, ending with ("end", "")."""
    tokens = []
    i = 0
    while i < len(selector):
        char = selector[i]
        if char.isspace():
            i += 1
        elif char in _SPECIAL:
            j = i + 1
            while j < len(selector) and selector[i : j + 1] in _TOKENS:
                j += 1
            literal = selector[i:j]
            tokens.append((_TOKENS.get(literal, "error"), literal))
            i = j
        else:
            j = i
            while j < len(selector) and not selector[j].isspace() and selector[j] not in _SPECIAL:
                j += 1
            word = selector[i:j]
            tokens.append((_KEYWORDS.get(word, "identifier"), word))
            i = j
    return [*tokens, ("end", "")]


class _Parser:
    """selector.go `Parser`: requirements separated by commas, its errors in its words."""

    def __init__(self, selector: str) -> None:
        self.tokens = _lex(selector)
        self.position = 0

    def lookahead(self, values: bool = True) -> tuple[str, str]:
        token, literal = self.tokens[self.position]
        if values and token in ("in", "notin"):  # where a value is expected, keywords are identifiers
            token = "identifier"
        return token, literal

    def consume(self, values: bool = True) -> tuple[str, str]:
        found = self.lookahead(values)
        self.position = min(self.position + 1, len(self.tokens) - 1)
        return found

    def parse(self) -> list[Requirement]:
        requirements: list[Requirement] = []
        while True:
            token, literal = self.lookahead()
            if token == "end":
                return requirements
            if token not in ("identifier", "!"):
                raise ValueError(f"found '{literal}', expected: !, identifier, or 'end of string'")
            try:
                requirements.append(self.requirement())
            except ValueError as error:
                raise ValueError(f"unable to parse requirement: {error}") from None
            token, literal = self.consume()
            if token == "end":
                return requirements
            if token != ",":
                raise ValueError(f"found '{literal}', expected: ',' or 'end of string'")
            after, after_literal = self.lookahead()
            if after not in ("identifier", "!"):
                raise ValueError(f"found '{after_literal}', expected: identifier after ','")

    def requirement(self) -> Requirement:
        token, literal = self.consume()
        absent = token == "!"
        if absent:
            token, literal = self.consume()
        if token != "identifier":
            raise ValueError(f"found '{literal}', expected: identifier")
        key = literal
        if absent or self.lookahead()[0] in ("end", ","):
            return (lambda labels: key not in labels) if absent else (lambda labels: key in labels)
        operator, literal = self.consume(values=False)
        if operator not in _BINARY:
            raise ValueError(f"found '{literal}', expected: {', '.join(_BINARY)}")
        values = self.values() if operator in ("in", "notin") else self.exact_value()
        if operator in ("notin", "!="):
            return lambda labels: key not in labels or labels[key] not in values
        if operator in (">", "<"):
            (bound,) = values
            if not bound.lstrip("-").isdigit():
                raise ValueError(f"for 'Gt', 'Lt' operators, the value must be an integer: {bound}")
            sign = 1 if operator == ">" else -1
            return lambda labels: (
                key in labels and labels[key].lstrip("-").isdigit() and sign * (int(labels[key]) - int(bound)) > 0
            )
        return lambda labels: key in labels and labels[key] in values

    def values(self) -> set[str]:
        token, literal = self.consume()
        if token != "(":
            raise ValueError(f"found '{literal}' expected: '('")
        token, literal = self.lookahead()
        if token == ")":
            self.consume()
            return {""}
        if token not in ("identifier", ","):
            raise ValueError(f"found '{literal}', expected: ',', ')' or identifier")
        found: set[str] = set()
        expecting = True
        while True:
            token, literal = self.consume()
            if token == "identifier" and expecting:
                found.add(literal)
                expecting = False
            elif token in (",", ")"):
                if expecting:
                    found.add("")
                if token == ")":
                    return found
                expecting = True
            else:
                raise ValueError(f"found '{literal}', expected: ',' or ')'")

    def exact_value(self) -> set[str]:
        if self.lookahead()[0] in ("end", ","):
            return {""}
        token, literal = self.consume()
        if token == "identifier":
            return {literal}
        raise ValueError(f"found '{literal}', expected: identifier")


def label_matcher(selector: str | None) -> Matcher:
    """Whether an object's `metadata.labels` satisfy a label selector (an empty one selects everything)."""
    requirements = _Parser(selector or "").parse()

    def matches(obj: Mapping[str, Any]) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(requirement(labels) for requirement in requirements)

    return matches


FIELDS: dict[str, tuple[str, ...]] = {
    "v1/nodes": ("spec.unschedulable",),
    "v1/pods": (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.podIPs",
        "status.nominatedNodeName",
    ),
    "v1/events": (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
    "events.k8s.io/v1/events": (
        "regarding.kind",
        "regarding.namespace",
        "regarding.name",
        "regarding.uid",
        "regarding.apiVersion",
        "regarding.resourceVersion",
        "regarding.fieldPath",
        "reason",
        "reportingController",
        "type",
    ),
    "v1/namespaces": ("status.phase",),
    "apps/v1/replicasets": ("status.replicas",),
    # pkg/registry/resource/resourceslice/strategy.go (`spec.pool.name` from 1.37; accepted on 1.36 too)
    **{
        f"resource.k8s.io/{version}/resourceslices": ("spec.nodeName", "spec.driver", "spec.pool.name")
        for version in ("v1", "v1beta2")
    },
}
"""What each resource can be selected by besides metadata.name and metadata.namespace (the registries'
`GetAttrs` and the field label conversions: pkg/registry/core/*/strategy.go, pkg/apis/core/v1/conversion.go);
any other resource only by those two (runtime.DefaultMetaV1FieldSelectorConversion)."""
_ALIASES = {
    "v1/events": {"source": "source.component"},
    "events.k8s.io/v1/events": {  # events.k8s.io/v1 Events are selected as the core/v1 Events they are stored as
        **{
            f"regarding.{name}": f"involvedObject.{name}"
            for name in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
        },
        "reportingController": "reportingComponent",
    },
}


def _split(selector: str) -> list[str]:
    return [part.strip() for part in selector.split(",") if part.strip()]


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


def field_matcher(selector: str | None, resource_key: str | None = None) -> Matcher:
    """Whether an object satisfies a field selector (an empty one selects everything): for a resource, only
    by the fields it can be selected by (a ValueError in the API server's words for another)."""
    requirements: list[tuple[str, bool, str]] = []
    for part in _split(selector or ""):
        for operator in ("!=", "==", "="):
            if operator in part:
                path, _, value = (p.strip() for p in part.partition(operator))
                requirements.append((path, operator != "!=", value))
                break
        else:
            raise ValueError(f"invalid selector: '{selector}'; can't understand '{part}'")
    if resource_key is not None:
        allowed = FIELDS.get(resource_key)
        for path, _, _ in requirements:
            if path in ("metadata.name", "metadata.namespace"):
                continue
            if allowed is None:
                raise ValueError(f'"{path}" is not a known field selector: only "metadata.name", "metadata.namespace"')
            if path not in allowed:
                raise ValueError(f"field label not supported: {path}")
        aliases = _ALIASES.get(resource_key, {})
        requirements = [(aliases.get(path, path), equal, value) for path, equal, value in requirements]

    def matches(obj: Mapping[str, Any]) -> bool:
        return all((field_value(obj, path) == value) == equal for path, equal, value in requirements)

    return matches


def matcher(params: Mapping[str, str], resource_key: str | None = None) -> Matcher:
    """The selectors of a list or watch request's query parameters, combined (ValueError: one is invalid)."""
    labels = label_matcher(params.get("labelSelector"))
    fields = field_matcher(params.get("fieldSelector"), resource_key)
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
