"""Kubernetes' CEL through Google's implementation (cel-expr-python, the bindings of cel-cpp): CRD rules
and admission expressions compiled, type-checked and evaluated as a Kubernetes API server does it.

The environment is Kubernetes' base environment (staging/src/k8s.io/apiserver/pkg/cel/environment/
base.go) as far as the rules here need it: CEL's standard library, cel-go's strings extension
(ext.Strings; cel-cpp's is the same library), optionals, and Kubernetes' regex and list libraries
(staging/src/k8s.io/apiserver/pkg/cel/library/regex.go, lists.go), declared with their signatures
and implemented below from those sources. A rule calling anything else does not compile, and
`unsupported_functions` names it.

Type checking (`check_rules`) declares `self` and `oldSelf` with the type the schema gives the node
a rule sits on, as the API server does (staging/src/k8s.io/apiserver/pkg/cel/common/schemas.go
SchemaDeclType): an object with properties is a message type whose fields are its properties
(names escaped as staging/src/k8s.io/apiserver/pkg/cel/escaping.go escapes them), an object with
additionalProperties a map, an array a list, int-or-string and preserved unknown fields `dyn`,
strings with format date-time and duration timestamps and durations. cel-cpp checks against
protobuf descriptors, so those types are built as descriptors (`_Types`).

Evaluation (`evaluate`, `evaluate_rules`) runs the same expressions with `self` as the object's
plain JSON value, as on the server (pkg/apiserver/schema/cel/validation.go): a rule runs at every
schema node the object has a value for; one that is not true, or cannot be evaluated, rejects; a
transition rule (one that reads `oldSelf`) runs only on an update where the old object has a value
correlated with the node (through object properties, map keys, and items of `x-kubernetes-list-type:
map` lists; not through other lists). The message is the rule's messageExpression when it
evaluates to a non-empty string, else its message, else `failed rule: RULE`.

DRA device selectors (`device_selector_problem`: a DeviceClass's or a claim request's CEL) are compiled as
staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go does, with `device` of type
`kubernetes.DRADevice` and the quantity and semver libraries; they are checked, not evaluated, here.
Compile errors are cel-go's (the checker's `undeclared reference to 'gpu'` where cel-cpp names `gpu.memory`).
"""

from __future__ import annotations

import functools
import itertools
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import re2  # type: ignore[import-untyped]
from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, duration_pb2, struct_pb2, timestamp_pb2

# ---------------------------------------------------------------- Kubernetes' library functions


def _find(text: str, regex: str) -> str:
    """regex.go `find`: the first match of the regex in the string, or '' when there is none."""
    match = re2.search(regex, text)
    return match.group(0) if match else ""


def _find_all(text: str, regex: str, limit: int = -1) -> list[str]:
    """regex.go `findAll`: every match (at most `limit` when it is not negative)."""
    matches = [m.group(0) for m in re2.finditer(regex, text)]
    return matches if limit < 0 else matches[:limit]


def _sum(items: list[Any]) -> Any:
    """lists.go `sum`: the sum of the elements, 0 of an empty list."""
    total: Any = 0
    for i, item in enumerate(items):
        total = item if i == 0 else total + item
    return total


def _extreme(name: str, pick: Callable[[Any, Any], bool]) -> Callable[[list[Any]], Any]:
    def extreme(items: list[Any]) -> Any:
        """lists.go `min`/`max`: an error on an empty list."""
        if not items:
            raise ValueError(f"{name} called on empty list")
        best = items[0]
        for item in items[1:]:
            if pick(item, best):
                best = item
        return best

    return extreme


def _index_of(items: list[Any], item: Any) -> int:
    """lists.go `indexOf`: -1 when absent."""
    return next((i for i, x in enumerate(items) if x == item), -1)


def _last_index_of(items: list[Any], item: Any) -> int:
    return next((i for i in range(len(items) - 1, -1, -1) if items[i] == item), -1)


def kubernetes_library() -> cel.CelExtension:
    """Kubernetes' own CEL functions for strings and lists (k8s.io/apiserver/pkg/cel/library regex.go, lists.go),
    implemented: for the emulator's environments and the demo's DRA selector evaluator (`accelpool_demo.dra.cel`)."""
    string, integer, boolean, dyn = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL, cel.Type.DYN
    items = cel.Type.List(dyn)

    def member(name: str, result: cel.Type, *params: cel.Type, impl: Callable[..., Any]) -> cel.Overload:
        return cel.Overload(name, result, list(params), is_member=True, impl=impl)

    return cel.CelExtension(
        "kubernetes",
        [
            cel.FunctionDecl("find", [member("string_find_string", string, string, string, impl=_find)]),
            cel.FunctionDecl(
                "findAll",
                [
                    member("string_find_all_string", cel.Type.List(string), string, string, impl=_find_all),
                    member(
                        "string_find_all_string_int", cel.Type.List(string), string, string, integer, impl=_find_all
                    ),
                ],
            ),
            cel.FunctionDecl(
                "isSorted",
                [
                    member(
                        "list_is_sorted", boolean, items, impl=lambda x: all(a <= b for a, b in itertools.pairwise(x))
                    )
                ],
            ),
            cel.FunctionDecl("sum", [member("list_sum", dyn, items, impl=_sum)]),
            cel.FunctionDecl("min", [member("list_min", dyn, items, impl=_extreme("min", lambda a, b: a < b))]),
            cel.FunctionDecl("max", [member("list_max", dyn, items, impl=_extreme("max", lambda a, b: a > b))]),
            cel.FunctionDecl("indexOf", [member("list_index_of", integer, items, dyn, impl=_index_of)]),
            cel.FunctionDecl("lastIndexOf", [member("list_last_index_of", integer, items, dyn, impl=_last_index_of)]),
        ],
    )


def environment(variables: Mapping[str, cel.Type], pool: Any = None) -> cel.Env:
    """Kubernetes' CEL environment with these variables (types from `pool` where they are messages)."""
    return cel.NewEnv(
        descriptor_pool=pool,
        variables=dict(variables),
        extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), kubernetes_library()],
    )


class CompileError(Exception):
    """An expression the API server would refuse to store: a syntax error, an undeclared reference, a
    type error. The text is cel-cpp's, in cel-go's format (`ERROR: <input>:1:23: Syntax error: ...`)."""


def _compile(env: cel.Env, expression: str) -> Any:
    try:
        return env.compile(expression)
    except RuntimeError as error:
        text = str(error).removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
        # cel-go's checker says "undefined field 'x'" (checker/errors.go undefinedField); cel-cpp adds the type
        text = re.sub(r"(undefined field '[^']*') not found in struct '[^']*'", r"\1", text)
        raise CompileError(_undeclared_as_cel_go(text)) from error


_UNDECLARED = re.compile(
    r"ERROR: <input>:(\d+):(\d+): undeclared reference to '([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)'"
    r" \(in container '([^']*)'\)\n \| ([^\n]*)\n \| \.*\^"
)


def _undeclared_as_cel_go(text: str) -> str:
    """An undeclared `a.b.c` as cel-go reports it: cel-cpp names the whole qualified name at its last dot,
    cel-go's checker (checker/checker.go checkSelect, then checkIdent) the first identifier where it starts."""

    def first(found: re.Match[str]) -> str:
        line, column, name, container, source = found.groups()
        head, _, _ = name.partition(".")
        start = max(1, int(column) - len(name.rsplit(".", 1)[0]))
        return (
            f"ERROR: <input>:{line}:{start}: undeclared reference to '{head}' (in container '{container}')\n"
            f" | {source}\n | {'.' * (start - 1)}^"
        )

    return _UNDECLARED.sub(first, text)


# ---------------------------------------------------------------- schema types (type checking)

_RESERVED = frozenset(
    {"true", "false", "null", "in", "as", "break", "const", "continue", "else", "for", "function", "if"}
    | {"import", "let", "loop", "package", "namespace", "return", "var", "void", "while"}
)
"""CEL's reserved words (escaping.go celReservedSymbols)."""


def escaped(name: str) -> str | None:
    """A property's name as CEL sees it (escaping.go Escape), or None where CEL cannot reach it."""
    if name in _RESERVED:
        return f"__{name}__"
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_./-]*", name):
        return None
    out = name.replace("__", "__underscores__").replace(".", "__dot__").replace("-", "__dash__")
    return out.replace("/", "__slash__")


_F = descriptor_pb2.FieldDescriptorProto
_SCALARS = {"string": _F.TYPE_STRING, "integer": _F.TYPE_INT64, "number": _F.TYPE_DOUBLE, "boolean": _F.TYPE_BOOL}
_WELL_KNOWN = {"date-time": ".google.protobuf.Timestamp", "duration": ".google.protobuf.Duration"}
_DYN = ".google.protobuf.Value"
_DYN_LIST = ".google.protobuf.ListValue"


class _Types:
    """Message types for the schema nodes of one schema, in one descriptor pool."""

    def __init__(self) -> None:
        self.pool = descriptor_pool.DescriptorPool()
        for module in (struct_pb2, timestamp_pb2, duration_pb2):
            proto = descriptor_pb2.FileDescriptorProto()
            module.DESCRIPTOR.CopyToProto(proto)
            self.pool.Add(proto)
        self._file = descriptor_pb2.FileDescriptorProto(
            name="k8s/schema.proto",
            package="k8s",
            syntax="proto3",
            dependency=[
                "google/protobuf/struct.proto",
                "google/protobuf/timestamp.proto",
                "google/protobuf/duration.proto",
            ],
        )
        self._names: dict[int, str] = {}
        self._sealed = False

    def _message(self, node: Mapping[str, Any]) -> str:
        """The message type of an object node with properties (declared once per node)."""
        if id(node) in self._names:
            return self._names[id(node)]
        name = f"Object{len(self._names)}"
        self._names[id(node)] = f".k8s.{name}"
        message = self._file.message_type.add(name=name)
        number = 0
        for prop, child in (node.get("properties") or {}).items():
            cel_name = escaped(prop)
            if cel_name is None:
                continue
            number += 1
            self._field(message, cel_name, number, child)
        return f".k8s.{name}"

    def _field(self, message: descriptor_pb2.DescriptorProto, name: str, number: int, node: Mapping[str, Any]) -> None:
        shape = self._shape(node)
        if shape[0] == "list":
            element = shape[1]
            if element[0] in ("list", "map"):  # a list of lists or maps: no protobuf field holds it
                message.field.add(
                    name=name, number=number, label=_F.LABEL_OPTIONAL, type=_F.TYPE_MESSAGE, type_name=_DYN_LIST
                )
            else:
                message.field.add(name=name, number=number, label=_F.LABEL_REPEATED, **element[1])
        elif shape[0] == "map":
            value = shape[1]
            nested = value[0] in ("list", "map")
            _map_field(
                message, name, number, ".k8s", {"type": _F.TYPE_MESSAGE, "type_name": _DYN} if nested else value[1]
            )
        else:
            spec = dict(shape[1])
            if "type_name" not in spec:  # a scalar: presence (has()) needs proto3's optional
                oneof = len(message.oneof_decl)
                message.oneof_decl.add(name=f"_{name}")
                spec |= {"proto3_optional": True, "oneof_index": oneof}
            message.field.add(name=name, number=number, label=_F.LABEL_OPTIONAL, **spec)

    def _shape(self, node: Mapping[str, Any]) -> tuple[str, Any]:
        """("scalar", field spec) | ("list", element shape) | ("map", value shape) of a schema node."""
        if node.get("x-kubernetes-int-or-string") or (
            node.get("x-kubernetes-preserve-unknown-fields") and not node.get("properties")
        ):
            return ("scalar", {"type": _F.TYPE_MESSAGE, "type_name": _DYN})
        kind = node.get("type")
        if kind == "array":
            return ("list", self._shape(node.get("items") or {}))
        if kind == "object":
            additional = node.get("additionalProperties")
            if isinstance(additional, dict) and not node.get("properties"):
                return ("map", self._shape(additional))
            return ("scalar", {"type": _F.TYPE_MESSAGE, "type_name": self._message(node)})
        if kind == "string" and node.get("format") in _WELL_KNOWN:
            return ("scalar", {"type": _F.TYPE_MESSAGE, "type_name": _WELL_KNOWN[node["format"]]})
        if kind == "string" and node.get("format") == "byte":
            return ("scalar", {"type": _F.TYPE_BYTES})
        if kind in _SCALARS:
            return ("scalar", {"type": _SCALARS[kind]})
        return ("scalar", {"type": _F.TYPE_MESSAGE, "type_name": _DYN})

    def cel_type(self, node: Mapping[str, Any]) -> cel.Type:
        """The CEL type of `self` at this node; call `seal()` before compiling against it."""
        shape = self._shape(node)
        return self._as_cel(shape)

    def _as_cel(self, shape: tuple[str, Any]) -> cel.Type:
        if shape[0] == "list":
            return cel.Type.List(self._as_cel(shape[1]))
        if shape[0] == "map":
            return cel.Type.Map(cel.Type.STRING, self._as_cel(shape[1]))
        spec = shape[1]
        if "type_name" in spec:
            name = spec["type_name"].lstrip(".")
            return cel.Type.DYN if name == "google.protobuf.Value" else cel.Type(name)
        return {
            _F.TYPE_STRING: cel.Type.STRING,
            _F.TYPE_INT64: cel.Type.INT,
            _F.TYPE_DOUBLE: cel.Type.DOUBLE,
            _F.TYPE_BOOL: cel.Type.BOOL,
            _F.TYPE_BYTES: cel.Type.BYTES,
        }[spec["type"]]

    def seal(self) -> Any:
        if not self._sealed:
            self.pool.Add(self._file)
            self._sealed = True
        return self.pool


@dataclass(frozen=True)
class RuleProblem:
    """A rule the API server would refuse to store, where it sits in the schema, and why."""

    field: str
    """Where, in the API server's words: `openAPIV3Schema.properties[spec].x-kubernetes-validations[0].rule`."""
    rule: Mapping[str, Any]
    expression: str
    detail: str
    """The server's words (pkg/apiserver/schema/cel/compilation.go): `compilation failed: <the compiler's
    errors>`, `cel expression must evaluate to a bool`, `messageExpression must evaluate to a string`."""

    def __str__(self) -> str:
        return f"{self.field}: {self.expression!r}: {self.detail}"


def _nodes(node: Mapping[str, Any], path: str) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """Every schema node, with its path as apiextensions' validation names it (properties[x], items, ...)."""
    yield path, node
    for name, child in (node.get("properties") or {}).items():
        yield from _nodes(child, f"{path}.properties[{name}]")
    if isinstance(node.get("additionalProperties"), dict):
        yield from _nodes(node["additionalProperties"], f"{path}.additionalProperties")
    if isinstance(node.get("items"), dict):
        yield from _nodes(node["items"], f"{path}.items")


def rules_of(
    schema: Mapping[str, Any], root: str = "openAPIV3Schema"
) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(field of the rule, its schema node, the rule) of every `x-kubernetes-validations` entry."""
    for path, node in _nodes(schema, root):
        for index, rule in enumerate(node.get("x-kubernetes-validations") or []):
            yield f"{path}.x-kubernetes-validations[{index}]", node, rule


def check_rules(schema: Mapping[str, Any], root: str = "openAPIV3Schema") -> list[RuleProblem]:
    """Every rule and messageExpression of a structural schema compiled and type-checked with `self` and
    `oldSelf` of the type the schema gives their node, as the API server checks them when the CRD is
    stored (pkg/apiserver/schema/cel/compilation.go: a rule must check as bool, a messageExpression
    as string)."""
    types = _Types()
    declared = [(where, types.cel_type(node), rule) for where, node, rule in rules_of(schema, root)]
    pool = types.seal()
    problems = []
    wanted = (
        ("rule", cel.Type.BOOL, "cel expression must evaluate to a bool"),
        ("messageExpression", cel.Type.STRING, "messageExpression must evaluate to a string"),
    )
    for where, self_type, rule in declared:
        env = environment({"self": self_type, "oldSelf": self_type}, pool)
        for key, expected, otherwise in wanted:
            if not rule.get(key):
                continue
            field = f"{where}.{key}"
            try:
                result = _compile(env, rule[key]).return_type()
            except CompileError as error:
                problems.append(RuleProblem(field, rule, rule[key], f"compilation failed: {error}"))
                continue
            if result != expected and result != cel.Type.DYN:
                problems.append(RuleProblem(field, rule, rule[key], otherwise))
    return problems


# ---------------------------------------------------------------- evaluation

_DYNAMIC = environment({"self": cel.Type.DYN, "oldSelf": cel.Type.DYN})
_UNTYPED: dict[frozenset[str], cel.Env] = {}
ABSENT: Any = object()
"""No old value: a create, or a node the update cannot correlate."""


@dataclass(frozen=True)
class Outcome:
    """What an expression evaluated to: its value, or the error that stopped it."""

    value: Any = None
    error: str | None = None

    @property
    def true(self) -> bool:
        return self.error is None and self.value is True


@functools.cache
def _program(names: frozenset[str], expression: str) -> Any:
    if names not in _UNTYPED:
        _UNTYPED[names] = environment(dict.fromkeys(names, cel.Type.DYN))
    return _compile(_UNTYPED[names], expression)


_CEL_GO_WORDS = (
    (re.compile(r'^NOT_FOUND: Key not found in map : "(.*)"$'), r"no such key: \1"),
    (re.compile(r"^[A-Z_]+: divide by zero$"), "division by zero"),
    (re.compile(r"^[A-Z_]+: modulus by zero$"), "modulus by zero"),
    (re.compile(r"^[A-Z_]+: (.*)$"), r"\1"),
)
"""cel-cpp's evaluation errors in cel-go's words, where they differ (cel-go common/types/err.go: "no such
key: %v", "division by zero", "modulus by zero"); otherwise without cel-cpp's status code."""


def _go_worded(error: str) -> str:
    for pattern, replacement in _CEL_GO_WORDS:
        if pattern.match(error):
            return pattern.sub(replacement, error)
    return error


def evaluate(expression: str, variables: Mapping[str, Any]) -> Outcome:
    """`expression` evaluated with these variables (plain JSON values, declared `dyn`). A compile error
    raises `CompileError`; an evaluation error is the outcome's `error`, in cel-go's words."""
    result = _program(frozenset(variables), expression).eval(data=dict(variables))
    if result.type() == cel.Type.ERROR:
        return Outcome(error=_go_worded(str(result.value())))
    return Outcome(value=result.plain_value())


def unsupported_functions(expression: str) -> set[str]:
    """What the expression calls that this environment does not declare (nothing, for a rule that compiles)."""
    try:
        _compile(_DYNAMIC, expression)
    except CompileError as error:
        return set(re.findall(r"undeclared reference to '([^']+)'", str(error)))
    return set()


@functools.cache
def uses_old_self(expression: str) -> bool:
    """A transition rule: one that reads `oldSelf` (compiles only where oldSelf is declared)."""
    try:
        _program(frozenset({"self"}), expression)
    except CompileError as error:
        return re.search(r"undeclared reference to 'oldSelf[.']", str(error)) is not None
    return False


def _variables(value: Any, old: Any) -> dict[str, Any]:
    return {"self": value} if old is ABSENT else {"self": value, "oldSelf": old}


def rule_message(rule: Mapping[str, Any], value: Any, old: Any = ABSENT) -> str:
    """What a failed rule says: its messageExpression's result, else its message, else the rule."""
    if rule.get("messageExpression"):
        said = evaluate(rule["messageExpression"], _variables(value, old))
        if isinstance(said.value, str) and said.value.strip():
            return said.value
    return str(rule.get("message") or f"failed rule: {rule['rule']}")


def evaluate_rule(rule: Mapping[str, Any], value: Any, old: Any = ABSENT) -> Outcome:
    """One rule on the value of its node (`old`: the correlated old value, on update)."""
    return evaluate(rule["rule"], _variables(value, old))


@dataclass(frozen=True)
class Failure:
    """A rule that rejected the object: where, on what value, and why."""

    path: str
    """The value's path in the object (`.spec.limits`, `.spec.tags[0]`, `.spec.labels[key]`)."""
    rule: Mapping[str, Any]
    node: Mapping[str, Any]
    """The rule's schema node (its `type` is what the API server shows for an error)."""
    value: Any
    message: str
    """The messageExpression's result, else the message, else `failed rule: RULE`."""
    error: str | None = None
    """Why the rule could not be evaluated (it rejects all the same)."""

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass
class Evaluation:
    """The rules that rejected the object, and every rule that ran (schema path, rule)."""

    failures: list[Failure] = field(default_factory=list)
    evaluated: list[tuple[str, str]] = field(default_factory=list)

    @property
    def errors(self) -> list[str]:
        """Each failure as `path: message`."""
        return [str(failure) for failure in self.failures]


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
        outcome = evaluate_rule(rule, value, old)
        if not outcome.true:  # as on a real API server, an error rejects too
            failure = Failure(path, rule, node, value, rule_message(rule, value, old), outcome.error)
            result.failures.append(failure)
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


# ---------------------------------------------------------------- DRA device selectors

QUANTITY = cel.Type("kubernetes.Quantity")
SEMVER = cel.Type("kubernetes.Semver")
"""cel-go's opaque types, declared as (empty) protobuf messages of those names: cel-cpp's abstract types
of the Python binding are not told apart from one another by its type checker."""
_GO_TYPE_NAMES = {
    "STRING": "string",
    "INT": "int",
    "UINT": "uint",
    "DOUBLE": "double",
    "BOOL": "bool",
    "BYTES": "bytes",
    "NULL": "null_type",
    "DYN": "dyn",
    "TIMESTAMP": "google.protobuf.Timestamp",
    "DURATION": "google.protobuf.Duration",
}


def _checked_only(*_: Any) -> Any:
    """These functions are declared to type-check selectors as the API server does; none are evaluated here."""
    raise NotImplementedError("DRA selector functions are type-checked, not evaluated, by the emulator")


def _dra_libraries() -> cel.CelExtension:
    """k8s.io/apiserver/pkg/cel/library quantity.go and semverlib.go (the latter is the DRA environment's own,
    staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go), as signatures."""
    string, integer, boolean, double = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL, cel.Type.DOUBLE

    def of(name: str, *overloads: tuple[str, cel.Type, list[cel.Type], bool]) -> cel.FunctionDecl:
        return cel.FunctionDecl(
            name,
            [
                cel.Overload(oid, result, params, is_member=member, impl=_checked_only)
                for oid, result, params, member in overloads
            ],
        )

    def compared(name: str, result: cel.Type) -> cel.FunctionDecl:
        return of(
            name,
            (f"quantity_{name}_quantity", result, [QUANTITY, QUANTITY], True),
            (f"semver_{name}_semver", result, [SEMVER, SEMVER], True),
        )

    return cel.CelExtension(
        "dra",
        [
            of("quantity", ("string_to_quantity", QUANTITY, [string], False)),
            of("isQuantity", ("is_quantity_string", boolean, [string], False)),
            of("sign", ("quantity_sign", integer, [QUANTITY], True)),
            of("isInteger", ("quantity_is_integer", boolean, [QUANTITY], True)),
            of("asInteger", ("quantity_as_integer", integer, [QUANTITY], True)),
            of("asApproximateFloat", ("quantity_as_float", double, [QUANTITY], True)),
            of(
                "add",
                ("quantity_add_quantity", QUANTITY, [QUANTITY, QUANTITY], True),
                ("quantity_add_int", QUANTITY, [QUANTITY, integer], True),
            ),
            of(
                "sub",
                ("quantity_sub_quantity", QUANTITY, [QUANTITY, QUANTITY], True),
                ("quantity_sub_int", QUANTITY, [QUANTITY, integer], True),
            ),
            compared("isLessThan", boolean),
            compared("isGreaterThan", boolean),
            compared("compareTo", integer),
            of(
                "semver",
                ("string_to_semver", SEMVER, [string], False),
                ("string_bool_to_semver", SEMVER, [string, boolean], False),
            ),
            of(
                "isSemver",
                ("is_semver_string", boolean, [string], False),
                ("is_semver_string_bool", boolean, [string, boolean], False),
            ),
            of("major", ("semver_major", integer, [SEMVER], True)),
            of("minor", ("semver_minor", integer, [SEMVER], True)),
            of("patch", ("semver_patch", integer, [SEMVER], True)),
        ],
    )


def _map_field(
    message: descriptor_pb2.DescriptorProto, name: str, number: int, package: str, value: Mapping[str, Any]
) -> None:
    """A `map<string, value>` field of `message` (in `package`): its entry message, named as protobuf names it
    (descriptor.cc: ToCamelCase(name) + "Entry"), and the repeated field of entries."""
    entry_name = "".join(part[:1].upper() + part[1:] for part in name.split("_")) + "Entry"
    entry = message.nested_type.add(name=entry_name)
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
    entry.field.add(name="value", number=2, label=_F.LABEL_OPTIONAL, **value)
    message.field.add(
        name=name,
        number=number,
        label=_F.LABEL_REPEATED,
        type=_F.TYPE_MESSAGE,
        type_name=f"{package}.{message.name}.{entry.name}",
    )


def _device_pool() -> Any:
    """`kubernetes.DRADevice` (compile.go `newCompiler`): `driver` a string, `attributes` and `capacity` maps
    by domain of maps by name. The inner maps' values are `dyn` here: cel-cpp types a variable's fields by
    protobuf, which has no field of a map of maps, so a map of google.protobuf.Struct stands in (a device's
    capacity is a Quantity on the server, and `dyn` accepts every use of one; what it lets through that the
    server would refuse is a capacity used as another type)."""
    pool = descriptor_pool.DescriptorPool()
    proto = descriptor_pb2.FileDescriptorProto()
    struct_pb2.DESCRIPTOR.CopyToProto(proto)
    pool.Add(proto)
    device = descriptor_pb2.FileDescriptorProto(
        name="kubernetes/dra.proto", package="kubernetes", syntax="proto3", dependency=["google/protobuf/struct.proto"]
    )
    device.message_type.add(name="Quantity")
    device.message_type.add(name="Semver")
    message = device.message_type.add(name="DRADevice")
    message.field.add(name="driver", number=1, label=_F.LABEL_OPTIONAL, type=_F.TYPE_STRING)
    for number, name in ((2, "attributes"), (3, "capacity")):
        _map_field(
            message, name, number, ".kubernetes", {"type": _F.TYPE_MESSAGE, "type_name": ".google.protobuf.Struct"}
        )
    pool.Add(device)
    return pool


@functools.cache
def _device_environment() -> cel.Env:
    """The DRA selector environment: Kubernetes' base one, `device`, the quantity and semver libraries and
    `cel.bind` (ext.Bindings)."""
    return cel.NewEnv(
        descriptor_pool=_device_pool(),
        variables={"device": cel.Type("kubernetes.DRADevice")},
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
            kubernetes_library(),
            _dra_libraries(),
        ],
    )


def go_type_name(found: cel.Type) -> str:
    """A type as cel-go's `Type.String()` names it (`string`, `map(string, dyn)`, `list(int)`)."""
    text = found.name()
    for cpp, go in _GO_TYPE_NAMES.items():
        text = re.sub(rf"\b{cpp}\b", go, text)
    text = re.sub(r"\bLIST<", "list(", re.sub(r"\bMAP<", "map(", text))
    return text.replace(">", ")")


def device_selector_problem(expression: str) -> str | None:
    """Why the API server refuses a DRA CEL selector (a DeviceClass's or a claim request's), in its words
    (compile.go `CompileCELExpression`: `compilation failed: <the compiler's errors>`, or `must evaluate to
    bool or the unknown type, not <type>`); None when it compiles to a bool. The estimated cost is not
    checked (the server refuses one over 1,000,000 as "too complex, exceeds cost limit")."""
    try:
        compiled = _compile(_device_environment(), expression)
    except CompileError as error:
        return f"compilation failed: {error}"
    result = compiled.return_type()
    if result not in (cel.Type.BOOL, cel.Type.DYN):
        return f"must evaluate to bool or the unknown type, not {go_type_name(result)}"
    return None
