"""A CRD's `x-kubernetes-validations` rules evaluated as a Kubernetes API server evaluates them, with
cel-python and the Kubernetes CEL library functions cel-python lacks.

As on a real server (kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/
schema/cel/validation.go): a rule runs at every schema node the object has a value for, with `self`
that value; a rule that does not evaluate to true, or cannot be evaluated at all, rejects the object;
a transition rule (one that reads `oldSelf`) runs only on an update, where the old object has a value
correlated with the node (through object properties, map keys, and items of `x-kubernetes-list-type:
map` lists; not through other lists), and is skipped otherwise. The message is the rule's
messageExpression when it evaluates to a non-empty string, else its message, else `failed rule: RULE`.

Functions a Kubernetes API server offers that cel-python does not are implemented below from their
sources: Kubernetes' regex and list libraries (staging/src/k8s.io/apiserver/pkg/cel/library/regex.go,
lists.go) and cel-go's strings extension (google/cel-go ext/strings.go, enabled by
staging/src/k8s.io/apiserver/pkg/cel/environment/base.go). `unsupported_functions` names what a rule
calls that is still missing, so a test can list such a rule instead of passing it silently.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import re2  # type: ignore[import-untyped]
from celpy.adapter import json_to_cel
from celpy.celtypes import BoolType, IntType, ListType, StringType
from celpy.evaluation import CELEvalError, base_functions

from tests.cel_cost import Call, Comprehension, Expr, Ident, ListLiteral, MapLiteral, Select, parse

# ---------------------------------------------------------------- library functions


def _error(message: str) -> CELEvalError:
    return CELEvalError(message, ValueError, (message,))


def _find(text: StringType, regex: StringType) -> Any:
    """regex.go `find`: the first match of the regex in the string, or '' when there is none."""
    try:
        match = re2.search(str(regex), str(text))
    except re2.error as error:
        return _error(f"Illegal regex: {error}")
    return StringType(match.group(0) if match else "")


def _find_all(text: StringType, regex: StringType, limit: IntType | None = None) -> Any:
    """regex.go `findAll`: every match (at most `limit` when given, none when it is 0)."""
    try:
        matches = [StringType(m.group(0)) for m in re2.finditer(str(regex), str(text))]
    except re2.error as error:
        return _error(f"Illegal regex: {error}")
    if limit is not None and int(limit) >= 0:
        matches = matches[: int(limit)]
    return ListType(matches)


def _is_sorted(items: list[Any]) -> Any:
    """lists.go `isSorted`: each element compares <= the next."""
    return BoolType(all(a <= b for a, b in itertools.pairwise(items)))


def _sum(items: list[Any]) -> Any:
    """lists.go `sum`: the sum of the elements, 0 of an empty list."""
    total: Any = IntType(0)
    for i, item in enumerate(items):
        total = item if i == 0 else total + item
    return total


def _extreme(name: str, pick: Callable[[Any, Any], bool]) -> Callable[[list[Any]], Any]:
    def extreme(items: list[Any]) -> Any:
        """lists.go `min`/`max`: an error on an empty list."""
        if not items:
            return _error(f"{name} called on empty list")
        best = items[0]
        for item in items[1:]:
            if pick(item, best):
                best = item
        return best

    return extreme


def _index_of(target: Any, item: Any) -> Any:
    """lists.go `indexOf` (lists) and ext/strings.go `indexOf` (strings): -1 when absent."""
    if isinstance(target, str):
        return IntType(str(target).find(str(item)))
    return IntType(next((i for i, x in enumerate(target) if x == item), -1))


def _last_index_of(target: Any, item: Any) -> Any:
    if isinstance(target, str):
        return IntType(str(target).rfind(str(item)))
    return IntType(next((i for i in range(len(target) - 1, -1, -1) if target[i] == item), -1))


def _split(text: StringType, separator: StringType, limit: IntType | None = None) -> Any:
    """ext/strings.go `split`: Go's strings.SplitN (limit < 0: all parts; 0: none)."""
    n = -1 if limit is None else int(limit)
    if n == 0:
        return ListType([])
    if str(separator) == "":
        parts = list(str(text))
        if n > 0 and len(parts) > n:
            parts = [*parts[: n - 1], "".join(parts[n - 1 :])]
    else:
        parts = str(text).split(str(separator), n - 1 if n > 0 else -1)
    return ListType([StringType(p) for p in parts])


def _join(items: list[Any], separator: StringType | None = None) -> Any:
    """ext/strings.go `join`."""
    return StringType(("" if separator is None else str(separator)).join(str(i) for i in items))


def _ascii_case(convert: Callable[[str], str]) -> Callable[[StringType], Any]:
    def change(text: StringType) -> Any:
        """ext/strings.go `lowerAscii`/`upperAscii`: only ASCII letters change."""
        return StringType("".join(convert(c) if c.isascii() else c for c in str(text)))

    return change


def _replace(text: StringType, old: StringType, new: StringType, limit: IntType | None = None) -> Any:
    """ext/strings.go `replace`: Go's strings.Replace (limit < 0: every occurrence)."""
    return StringType(str(text).replace(str(old), str(new), -1 if limit is None else int(limit)))


def _trim(text: StringType) -> Any:
    """ext/strings.go `trim`: leading and trailing Unicode white space removed."""
    return StringType(str(text).strip())


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "find": _find,
    "findAll": _find_all,
    "isSorted": _is_sorted,
    "sum": _sum,
    "min": _extreme("min", lambda a, b: a < b),
    "max": _extreme("max", lambda a, b: a > b),
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "split": _split,
    "join": _join,
    "lowerAscii": _ascii_case(str.lower),
    "upperAscii": _ascii_case(str.upper),
    "replace": _replace,
    "trim": _trim,
}
_OPERATORS = frozenset(
    {"_&&_", "_||_", "!_", "-_", "_?_:_", "_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "@in", "_+_", "_-_"}
    | {"_*_", "_/_", "_%_", "_[_]", "@not_strictly_false", "dyn"}
)
SUPPORTED_FUNCTIONS = frozenset(base_functions) | frozenset(KUBERNETES_FUNCTIONS) | _OPERATORS


# ---------------------------------------------------------------- what a rule calls


def _walk(e: Expr) -> Iterator[Expr]:
    yield e
    children: list[Expr] = []
    if isinstance(e, Select):
        children = [e.operand]
    elif isinstance(e, Call):
        children = [*([e.target] if e.target is not None else []), *e.args]
    elif isinstance(e, ListLiteral):
        children = list(e.elements)
    elif isinstance(e, MapLiteral):
        children = [x for entry in e.entries for x in entry]
    elif isinstance(e, Comprehension):
        children = [e.iter_range, e.accu_init, e.loop_condition, e.loop_step, e.result]
    for child in children:
        yield from _walk(child)


def functions_called(rule: str) -> set[str]:
    """The functions and operators a rule calls (macros expanded as cel-go expands them)."""
    return {e.function for e in _walk(parse(rule)) if isinstance(e, Call)}


def unsupported_functions(rule: str) -> set[str]:
    """What the rule calls that this evaluator cannot evaluate as the API server would."""
    return functions_called(rule) - SUPPORTED_FUNCTIONS


def uses_old_self(rule: str) -> bool:
    try:
        return any(isinstance(e, Ident) and e.name == "oldSelf" for e in _walk(parse(rule)))
    except Exception:  # syntax tests/cel_cost.py does not parse: fall back on the name
        return re.search(r"\boldSelf\b", rule) is not None


# ---------------------------------------------------------------- evaluation

_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}
ABSENT: Any = object()
"""No old value: a create, or a node the update cannot correlate."""


def program(expression: str) -> Any:
    """The compiled program of a CEL expression, with the Kubernetes library functions."""
    if expression not in _PROGRAMS:
        _PROGRAMS[expression] = _ENV.program(_ENV.compile(expression), functions=KUBERNETES_FUNCTIONS)
    return _PROGRAMS[expression]


def activation(value: Any, old: Any) -> dict[str, Any]:
    activation = {"self": json_to_cel(value)}
    if old is not ABSENT:
        activation["oldSelf"] = json_to_cel(old)
    return activation


def rule_message(rule: Mapping[str, Any], value: Any, old: Any = ABSENT) -> str:
    """What a failed rule says: its messageExpression's result, else its message, else the rule."""
    if rule.get("messageExpression"):
        try:
            message = program(rule["messageExpression"]).evaluate(activation(value, old))
        except CELEvalError:
            message = None
        if isinstance(message, StringType) and str(message).strip():
            return str(message)
    return str(rule.get("message") or f"failed rule: {rule['rule']}")


@dataclass
class Evaluation:
    """The rules that rejected the object, and every rule that ran (schema path, rule)."""

    errors: list[str] = field(default_factory=list)
    evaluated: list[tuple[str, str]] = field(default_factory=list)


def _correlate(old: Any, key: Any) -> Any:
    if old is ABSENT:
        return ABSENT
    if isinstance(key, str) and isinstance(old, dict):
        return old.get(key, ABSENT)
    return ABSENT


def _list_item_old(node: Mapping[str, Any], item: Any, old: Any) -> Any:
    """Items of `x-kubernetes-list-type: map` lists correlate by their keys; other list items never do."""
    if old is ABSENT or node.get("x-kubernetes-list-type") != "map" or not isinstance(old, list):
        return ABSENT
    keys = node.get("x-kubernetes-list-map-keys") or []
    for candidate in old:
        if isinstance(candidate, dict) and all(candidate.get(k) == item.get(k) for k in keys):
            return candidate
    return ABSENT


def evaluate_rules(
    node: Mapping[str, Any], value: Any, *, old: Any = ABSENT, path: str = "", into: Evaluation | None = None
) -> Evaluation:
    """Run the rules of `node` and of every node below it on `value` (`old`: the stored object, on update)."""
    result = into if into is not None else Evaluation()
    for rule in node.get("x-kubernetes-validations") or []:
        if old is ABSENT and uses_old_self(rule["rule"]):
            continue  # a transition rule runs only on update
        result.evaluated.append((path or ".", rule["rule"]))
        try:
            verdict = program(rule["rule"]).evaluate(activation(value, old))
        except CELEvalError:  # as on a real API server, a rule that cannot be evaluated rejects
            verdict = None
        if not (isinstance(verdict, BoolType) and bool(verdict)):
            result.errors.append(f"{path}: {rule_message(rule, value, old)}")
    if isinstance(value, dict):
        # an atomic map or object is replaced whole: its old members do not correlate (MapIsCorrelatable)
        correlated = ABSENT if node.get("x-kubernetes-map-type") == "atomic" else old
        for name, prop in (node.get("properties") or {}).items():
            if name in value:
                prop_old = _correlate(correlated, name)
                evaluate_rules(prop, value[name], old=prop_old, path=f"{path}.{name}", into=result)
        additional = node.get("additionalProperties")
        if isinstance(additional, dict):
            for key, item in value.items():
                item_old = _correlate(correlated, key)
                evaluate_rules(additional, item, old=item_old, path=f"{path}[{key}]", into=result)
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            item_old = _list_item_old(node, item, old)
            evaluate_rules(node["items"], item, old=item_old, path=f"{path}[{index}]", into=result)
    return result
