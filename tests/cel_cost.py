"""The CEL cost budget of a CRD, estimated statically as a Kubernetes API server does when the CRD is
created or updated, for the CEL subset accelpool's (and Karpenter's) rules use.

A real API server compiles every `x-kubernetes-validations` rule against the schema node it sits on,
estimates the rule's worst-case cost from the schema's maxLength/maxItems/maxProperties (or, where a
bound is missing, from the largest request it accepts), multiplies it by the number of times the rule
can run in one object, and rejects the CRD when one rule, or the sum over the CRD, is over the limit.
This module replays that computation:

- the CEL types a rule sees and their worst-case sizes: `SchemaDeclType` and the `estimate*` helpers
  in kubernetes/kubernetes staging/src/k8s.io/apiserver/pkg/cel/common/schemas.go, the declared types
  of staging/src/k8s.io/apiserver/pkg/cel/types.go and the sizes of .../pkg/cel/limits.go;
- the size of a node reached by a field path: `sizeEstimator.EstimateSize` in
  staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/compilation.go (which also gives
  `maxCardinality`, the repeat count of a rule under unbounded lists or maps);
- the cost of each expression node, comprehension and standard function: the `coster` of google/cel-go
  checker/cost.go, its constants in common/cost.go (listed there in cel-go's `common` package) and the
  macro expansions of parser/macro.go;
- the Kubernetes library functions' costs: `CostEstimator.EstimateCallCost` in
  staging/src/k8s.io/apiserver/pkg/cel/library/cost.go; has() costs nothing
  (`checker.PresenceTestHasCost(false)` in staging/src/k8s.io/apiserver/pkg/cel/environment/base.go);
- the limits, the multiplication by cardinality, the CRD total and the error texts:
  staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go
  (`getExpressionCost`, `getCostErrorMessage`) and cel_validation.go (`MaxCardinality`, `TotalCost`),
  with the runtime constants of staging/src/k8s.io/apiserver/pkg/apis/cel/config.go.

It estimates only the worst-case (Max) side, which is all the server compares. It is honest about its
reach: an expression it does not model (a function, macro or syntax outside the subset) raises
`UnmodelledCEL` instead of costing 0, and one the server would not compile (an unknown field, a rule
that is not a bool) raises `CELCompileError`. Where a choice had to be made it errs high: the global
form `matches(s, re)` is costed like `s.matches(re)`, which cel-go prices as O(1).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import celpy
import lark
from celpy.evaluation import celbytes, celstr

UINT64_MAX = 2**64 - 1

# staging/src/k8s.io/apiserver/pkg/apis/cel/config.go
PER_CALL_LIMIT = 1_000_000
"""The runtime limit of one evaluation: an object whose rule costs more is rejected when it is written.
The static estimate may exceed it (the server only compares the estimate with the static limits)."""
RUNTIME_CEL_COST_BUDGET = 10_000_000
MAX_REQUEST_SIZE_BYTES = 3 * 1024 * 1024
MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES = 5 * 1024

# staging/src/k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation/validation.go
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
"""The largest estimated cost of one rule (times its cardinality) or messageExpression."""
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000
"""The largest estimated total of a version's schema: every rule (times cardinality) and messageExpression."""

# google/cel-go common/cost.go
_SELECT_AND_IDENT_COST = 1
_CONST_COST = 0
_LIST_CREATE_BASE_COST = 10
_MAP_CREATE_BASE_COST = 30
_STRING_TRAVERSAL_COST_FACTOR = 0.1
_REGEX_STRING_LENGTH_COST_FACTOR = 0.25
_PRESENCE_TEST_COST = 0  # environment/base.go: cel.CostEstimatorOptions(checker.PresenceTestHasCost(false))

# staging/src/k8s.io/apiserver/pkg/cel/limits.go
_MAX_DURATION_SIZE_JSON = 32
_MAX_DATETIME_SIZE_JSON = 32
_MIN_DURATION_SIZE_JSON = 3
_JSON_DATE_SIZE = 12
_MIN_DATETIME_SIZE_JSON = 21
_MIN_STRING_SIZE = 2
_MIN_BOOL_SIZE = 4
_MIN_NUMBER_SIZE = 1


class UnmodelledCEL(Exception):
    """The expression uses a construct this estimator does not model: it refuses rather than guess."""


class CELCompileError(Exception):
    """The API server would not compile this expression (an unknown field or variable, a wrong type)."""


# --- saturating uint64 arithmetic (checker/cost.go addUint64NoOverflow, multiplyUint64NoOverflow,
# multiplyByCostFactor) ---


def _add(*values: int) -> int:
    return min(sum(values), UINT64_MAX)


def _mul(x: int, y: int) -> int:
    return min(x * y, UINT64_MAX)


def _factor(x: int, factor: float) -> int:
    """x * factor, rounded up, as cel-go computes it (in float64)."""
    as_float = float(x)
    if as_float > 0 and factor > 0 and as_float > UINT64_MAX / factor:
        return UINT64_MAX
    rounded = math.ceil(as_float * factor)
    return UINT64_MAX if rounded >= 2**64 else rounded


# --- the types a rule sees: common/schemas.go SchemaDeclType, types.go ---


@dataclass(eq=False)
class DeclType:
    """A CEL type as the API server declares it for a schema node, with its largest size (MaxElements:
    characters of a string, items of a list, entries of a map) and smallest JSON size."""

    kind: str
    """object, map, list, string, bytes, int, uint, double, bool, duration, timestamp, dyn, null, type."""
    max_elements: int = 0
    min_size: int = 0
    fields: dict[str, DeclType] = field(default_factory=dict)
    elem: DeclType | None = None
    key: DeclType | None = None


_SCALAR_KINDS = frozenset({"bool", "double", "duration", "int", "timestamp", "uint"})
_CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)


def _string_length_per_request(node: Mapping[str, Any]) -> int:
    """estimateMaxStringLengthPerRequest: an unbounded string fills the largest request."""
    if node.get("x-kubernetes-int-or-string"):
        return MAX_REQUEST_SIZE_BYTES - 2
    return {"duration": _MAX_DURATION_SIZE_JSON, "date": _JSON_DATE_SIZE, "date-time": _MAX_DATETIME_SIZE_JSON}.get(
        node.get("format", ""), MAX_REQUEST_SIZE_BYTES - 2
    )


def _with_type_and_object_meta(node: Mapping[str, Any]) -> dict[str, Any]:
    """WithTypeAndObjectMeta: a resource root always shows apiVersion, kind, metadata.name and generateName."""
    properties = dict(node.get("properties") or {})
    metadata = properties.get("metadata") or {}
    meta_props = metadata.get("properties") or {}
    if (
        (properties.get("kind") or {}).get("type") == "string"
        and (properties.get("apiVersion") or {}).get("type") == "string"
        and metadata.get("type") == "object"
        and (meta_props.get("name") or {}).get("type") == "string"
        and (meta_props.get("generateName") or {}).get("type") == "string"
    ):
        return dict(node)
    string = {"type": "string"}
    properties.update(
        kind=string,
        apiVersion=string,
        metadata={"type": "object", "properties": {"name": string, "generateName": string}},
    )
    return {**node, "properties": properties}


def schema_decl_type(node: Mapping[str, Any], is_resource_root: bool = False) -> DeclType | None:
    """The CEL type of a structural schema node, or None where CEL cannot see it (SchemaDeclType)."""
    if node.get("x-kubernetes-int-or-string"):
        bound = max(node["maxLength"], 0) * 4 if "maxLength" in node else _string_length_per_request(node)
        return DeclType("dyn", max_elements=bound, min_size=1)
    if is_resource_root:
        node = _with_type_and_object_meta(node)
    kind = node.get("type")
    if kind == "array":
        items = node.get("items")
        if items is None:
            return None
        item_type = schema_decl_type(items, bool(items.get("x-kubernetes-embedded-resource")))
        if item_type is None:
            return None
        if "maxItems" in node:
            max_items = max(node["maxItems"], 0)
        else:  # estimateMaxArrayItemsFromMinSize
            max_items = (MAX_REQUEST_SIZE_BYTES - 2) // (item_type.min_size + 1)
        return DeclType("list", max_elements=max_items, min_size=2, elem=item_type)
    if kind == "object":
        additional = node.get("additionalProperties")
        if isinstance(additional, Mapping):
            value_type = schema_decl_type(additional, bool(additional.get("x-kubernetes-embedded-resource")))
            if value_type is None:
                return None
            if "maxProperties" in node:
                max_properties = max(node["maxProperties"], 0)
            else:  # estimateMaxAdditionalPropertiesFromMinSize
                max_properties = (MAX_REQUEST_SIZE_BYTES - 2) // (value_type.min_size + 6)
            # the key is types.go's StringType, whose MaxElements is 0
            key = DeclType("string", max_elements=0, min_size=_MIN_STRING_SIZE)
            return DeclType("map", max_elements=max_properties, min_size=2, key=key, elem=value_type)
        required = set(node.get("required") or [])
        fields: dict[str, DeclType] = {}
        min_size = 2
        for name, prop in (node.get("properties") or {}).items():
            field_type = schema_decl_type(prop, bool(prop.get("x-kubernetes-embedded-resource")))
            if field_type is None:
                continue
            if name.isidentifier() and name.isascii() and name not in _CEL_RESERVED:
                fields[name] = field_type  # names needing escapes (cel.Escape) are left out: a rule using them fails
            if name in required and "default" not in prop:
                min_size += len(name) + field_type.min_size + 4
        return DeclType("object", min_size=min_size, fields=fields)
    if kind == "string":
        fmt = node.get("format")
        if fmt == "byte":
            bound = max(node["maxLength"], 0) if "maxLength" in node else _string_length_per_request(node)
            return DeclType("bytes", max_elements=bound, min_size=_MIN_STRING_SIZE)
        if fmt == "duration":
            return DeclType("duration", max_elements=_MAX_DURATION_SIZE_JSON, min_size=_MIN_DURATION_SIZE_JSON)
        if fmt == "date":
            return DeclType("timestamp", max_elements=_JSON_DATE_SIZE, min_size=_JSON_DATE_SIZE)
        if fmt == "date-time":
            return DeclType("timestamp", max_elements=_MAX_DATETIME_SIZE_JSON, min_size=_MIN_DATETIME_SIZE_JSON)
        if "maxLength" in node:  # estimateMaxElementsFromMaxLength: up to 4 bytes per character
            bound = max(node["maxLength"], 0) * 4
        elif node.get("enum"):  # estimateMaxStringEnumLength
            bound = max(len(str(value).encode()) for value in node["enum"])
        else:
            bound = _string_length_per_request(node)
        return DeclType("string", max_elements=bound, min_size=_MIN_STRING_SIZE)
    if kind == "boolean":
        return DeclType("bool", min_size=_MIN_BOOL_SIZE)
    if kind == "number":
        return DeclType("double", min_size=_MIN_NUMBER_SIZE)
    if kind == "integer":
        return DeclType("int", min_size=_MIN_NUMBER_SIZE)
    return None


# --- the expression tree, as cel-go's parser builds it (macros expanded: parser/macro.go) ---


@dataclass(eq=False)
class Expr:
    """A node of a parsed CEL expression; identity is the node (cel-go's expression id)."""


@dataclass(eq=False)
class Literal(Expr):
    kind: str  # string, bytes, int, uint, double, bool, null
    value: Any


@dataclass(eq=False)
class Ident(Expr):
    name: str


@dataclass(eq=False)
class Select(Expr):
    operand: Expr
    field: str
    test_only: bool = False  # has(operand.field)


@dataclass(eq=False)
class Call(Expr):
    function: str
    args: list[Expr]
    target: Expr | None = None


@dataclass(eq=False)
class ListLiteral(Expr):
    elements: list[Expr]


@dataclass(eq=False)
class MapLiteral(Expr):
    entries: list[tuple[Expr, Expr]]


@dataclass(eq=False)
class Comprehension(Expr):
    iter_var: str
    iter_range: Expr
    accu_var: str
    accu_init: Expr
    loop_condition: Expr
    loop_step: Expr
    result: Expr


_ACCUMULATOR = "@result"  # parser.AccumulatorName
_BINARY = {
    "relation_lt": "_<_",
    "relation_le": "_<=_",
    "relation_gt": "_>_",
    "relation_ge": "_>=_",
    "relation_eq": "_==_",
    "relation_ne": "_!=_",
    "relation_in": "@in",
    "addition_add": "_+_",
    "addition_sub": "_-_",
    "multiplication_mul": "_*_",
    "multiplication_div": "_/_",
    "multiplication_mod": "_%_",
}
_CEL = celpy.Environment()


def parse(source: str) -> Expr:
    """Parse with cel-python and build cel-go's expression tree, expanding macros as cel-go does."""
    tree: lark.Tree[Any] = _CEL.compile(source)
    return _Builder().build(tree)


class _Builder:
    def build(self, node: lark.Tree[Any] | lark.Token) -> Expr:
        if isinstance(node, lark.Token):
            raise UnmodelledCEL(f"unexpected token {node!r}")
        children = [c for c in node.children if c is not None]
        rule = node.data
        if rule in ("expr",) and len(children) == 3:
            return Call("_?_:_", [self.build(c) for c in children])
        if rule in ("conditionalor", "conditionaland") and len(children) == 2:
            operator = "_||_" if rule == "conditionalor" else "_&&_"
            return Call(operator, [self.build(children[0]), self.build(children[1])])
        if rule in ("relation", "addition", "multiplication") and len(children) == 2:
            left: lark.Tree[Any] = children[0]
            return Call(_BINARY[left.data], [self.build(left.children[0]), self.build(children[1])])
        if rule == "unary" and len(children) == 2:
            return self._unary(node)
        if len(children) == 1 and rule in (
            "expr",
            "conditionalor",
            "conditionaland",
            "relation",
            "addition",
            "multiplication",
            "unary",
            "member",
            "primary",
            "paren_expr",
        ):
            return self.build(children[0])
        handler = {
            "ident": self._ident,
            "literal": self._literal,
            "list_lit": self._list_lit,
            "map_lit": self._map_lit,
            "member_dot": self._member_dot,
            "member_index": self._member_index,
            "ident_arg": self._ident_arg,
            "member_dot_arg": self._member_dot_arg,
        }.get(rule)
        if handler is None:  # member_object (messages), dot_ident and dot_ident_arg (leading-dot names)
            raise UnmodelledCEL(f"CEL syntax {rule!r} is not modelled")
        return handler(children)

    def _unary(self, node: lark.Tree[Any]) -> Expr:
        operators: list[str] = []
        while node.data == "unary" and len(node.children) == 2:
            operators.append(node.children[0].data)
            node = node.children[1]
        operand = self.build(node)
        if len(set(operators)) != 1:
            raise UnmodelledCEL("mixed unary operators are not modelled")
        # cel-go's parser drops an even run of '!' or '-' (VisitLogicalNot, VisitNegate)
        if len(operators) % 2 == 0:
            return operand
        return Call("!_" if operators[0] == "unary_not" else "-_", [operand])

    def _exprlist(self, children: list[Any]) -> list[Expr]:
        if not children:
            return []
        exprlist: lark.Tree[Any] = children[0]
        return [self.build(c) for c in exprlist.children]

    def _ident(self, children: list[Any]) -> Expr:
        return Ident(str(children[0]))

    def _literal(self, children: list[Any]) -> Expr:
        token: lark.Token = children[0]
        text = str(token)
        if token.type == "INT_LIT":
            return Literal("int", int(text, 0))
        if token.type == "UINT_LIT":
            return Literal("uint", int(text[:-1], 0))
        if token.type == "FLOAT_LIT":
            return Literal("double", float(text))
        if token.type in ("STRING_LIT", "MLSTRING_LIT"):
            return Literal("string", str(celstr(token)))
        if token.type == "BYTES_LIT":
            return Literal("bytes", bytes(celbytes(token)))
        if token.type == "BOOL_LIT":
            return Literal("bool", text == "true")
        if token.type == "NULL_LIT":
            return Literal("null", None)
        raise UnmodelledCEL(f"literal {text!r}")

    def _list_lit(self, children: list[Any]) -> Expr:
        return ListLiteral(self._exprlist(children))

    def _map_lit(self, children: list[Any]) -> Expr:
        if not children:
            return MapLiteral([])
        items = [self.build(c) for c in children[0].children]
        return MapLiteral(list(zip(items[::2], items[1::2], strict=True)))

    def _member_dot(self, children: list[Any]) -> Expr:
        return Select(self.build(children[0]), str(children[1]))

    def _member_index(self, children: list[Any]) -> Expr:
        return Call("_[_]", [self.build(children[0]), self.build(children[1])])

    def _ident_arg(self, children: list[Any]) -> Expr:
        name = str(children[0])
        args = self._exprlist(children[1:])
        if name == "has":  # MakeHas
            if len(args) != 1 or not isinstance(args[0], Select):
                raise CELCompileError("invalid argument to has() macro")
            return Select(args[0].operand, args[0].field, test_only=True)
        return Call(name, args)

    def _member_dot_arg(self, children: list[Any]) -> Expr:
        target = self.build(children[0])
        name = str(children[1])
        args = self._exprlist(children[2:])
        macro = getattr(self, f"_macro_{name}", None)
        if macro is not None and len(args) in (2, 3):
            if not isinstance(args[0], Ident):
                raise CELCompileError(f"{name}(): argument must be a simple name")
            if len(args) == 3 and name != "map":
                raise UnmodelledCEL(f"the two-variable form of {name}() is not modelled")
            expanded: Expr = macro(target, args[0].name, args[1:])
            return expanded
        return Call(name, args, target)

    @staticmethod
    def _accu() -> Ident:
        return Ident(_ACCUMULATOR)

    def _comprehension(self, target: Expr, var: str, init: Expr, cond: Expr, step: Expr, result: Expr) -> Expr:
        return Comprehension(var, target, _ACCUMULATOR, init, cond, step, result)

    def _macro_all(self, target: Expr, var: str, args: list[Expr]) -> Expr:
        a = self._accu
        return self._comprehension(
            target,
            var,
            Literal("bool", True),
            Call("@not_strictly_false", [a()]),
            Call("_&&_", [a(), args[0]]),
            a(),
        )

    def _macro_exists(self, target: Expr, var: str, args: list[Expr]) -> Expr:
        a = self._accu
        return self._comprehension(
            target,
            var,
            Literal("bool", False),
            Call("@not_strictly_false", [Call("!_", [a()])]),
            Call("_||_", [a(), args[0]]),
            a(),
        )

    def _macro_exists_one(self, target: Expr, var: str, args: list[Expr]) -> Expr:
        a = self._accu
        step = Call("_?_:_", [args[0], Call("_+_", [a(), Literal("int", 1)]), a()])
        result = Call("_==_", [a(), Literal("int", 1)])
        return self._comprehension(target, var, Literal("int", 0), Literal("bool", True), step, result)

    def _macro_map(self, target: Expr, var: str, args: list[Expr]) -> Expr:
        a = self._accu
        step: Expr = Call("_+_", [a(), ListLiteral([args[-1]])])
        if len(args) == 2:
            step = Call("_?_:_", [args[0], step, a()])
        return self._comprehension(target, var, ListLiteral([]), Literal("bool", True), step, a())

    def _macro_filter(self, target: Expr, var: str, args: list[Expr]) -> Expr:
        a = self._accu
        step = Call("_?_:_", [args[0], Call("_+_", [a(), ListLiteral([Ident(var)])]), a()])
        return self._comprehension(target, var, ListLiteral([]), Literal("bool", True), step, a())


# --- a type checker for the subset: what cel-go's checker decides that the cost depends on ---

_TYPE_IDENTS = frozenset({"bool", "int", "uint", "double", "string", "bytes", "list", "map", "null_type", "type"})
_COMPARISONS = frozenset({"_<_", "_<=_", "_>_", "_>=_"})
_STRING_TO = {"duration": "duration", "timestamp": "timestamp"}
_CONVERSIONS = {"int": "int", "uint": "uint", "double": "double", "string": "string", "bytes": "bytes", "bool": "bool"}


def _list_of(elem: DeclType) -> DeclType:
    return DeclType("list", elem=elem)


class _Checker:
    def __init__(self, root: DeclType) -> None:
        self.root = root
        self.types: dict[Expr, DeclType] = {}
        self.scopes: dict[str, list[DeclType]] = {}

    def check(self, e: Expr) -> DeclType:
        t = self._check(e)
        self.types[e] = t
        return t

    def _check(self, e: Expr) -> DeclType:
        if isinstance(e, Literal):
            return DeclType(e.kind)
        if isinstance(e, Ident):
            if self.scopes.get(e.name):
                return self.scopes[e.name][-1]
            if e.name in ("self", "oldSelf"):
                return self.root
            if e.name in _TYPE_IDENTS:
                return DeclType("type")
            raise CELCompileError(f"undeclared reference to '{e.name}'")
        if isinstance(e, Select):
            operand = self.check(e.operand)
            if operand.kind == "object":
                if e.field not in operand.fields:
                    raise CELCompileError(f"undefined field '{e.field}'")
                selected = operand.fields[e.field]
            elif operand.kind == "map":
                selected = operand.elem or DeclType("dyn")
            elif operand.kind == "dyn":
                selected = DeclType("dyn")
            else:
                raise CELCompileError(f"type '{operand.kind}' has no field '{e.field}'")
            return DeclType("bool") if e.test_only else selected
        if isinstance(e, ListLiteral):
            kinds = {self.check(x).kind for x in e.elements}
            if len(kinds) > 1:  # cel.HomogeneousAggregateLiterals()
                raise CELCompileError("a list literal mixes types")
            return _list_of(self.types[e.elements[0]] if e.elements else DeclType("dyn"))
        if isinstance(e, MapLiteral):
            keys = [self.check(k) for k, _ in e.entries]
            values = [self.check(v) for _, v in e.entries]
            if len({k.kind for k in keys}) > 1 or len({v.kind for v in values}) > 1:
                raise CELCompileError("a map literal mixes types")
            return DeclType("map", key=keys[0] if keys else DeclType("dyn"), elem=values[0] if values else None)
        if isinstance(e, Comprehension):
            return self._comprehension(e)
        if isinstance(e, Call):
            return self._call(e)
        raise UnmodelledCEL(f"expression {e!r}")

    def _comprehension(self, e: Comprehension) -> DeclType:
        container = self.check(e.iter_range)
        if container.kind == "list":
            item = container.elem or DeclType("dyn")
        elif container.kind == "map":
            item = container.key or DeclType("dyn")
        elif container.kind == "dyn":
            item = DeclType("dyn")
        else:
            raise CELCompileError(f"cannot iterate over '{container.kind}'")
        accu = self.check(e.accu_init)
        self.scopes.setdefault(e.accu_var, []).append(accu)
        self.scopes.setdefault(e.iter_var, []).append(item)
        self.check(e.loop_condition)
        step = self.check(e.loop_step)
        self.scopes[e.iter_var].pop()
        if isinstance(e.accu_init, ListLiteral) and step.kind == "list":
            self.scopes[e.accu_var][-1] = step  # the list a map()/filter() builds has the step's item type
        result = self.check(e.result)
        self.scopes[e.accu_var].pop()
        return result

    def _call(self, e: Call) -> DeclType:
        args = [self.check(a) for a in e.args]
        target = self.check(e.target) if e.target is not None else None
        fn, n = e.function, len(args)
        kinds = [a.kind for a in args]
        member = target is not None

        def expect(condition: bool) -> None:
            if not condition:
                shown = f"{target.kind}." if target is not None else ""
                raise CELCompileError(f"found no matching overload for '{fn}' applied to '{shown}({', '.join(kinds)})'")

        if not member and fn in ("_&&_", "_||_"):
            expect(all(k in ("bool", "dyn") for k in kinds))
            return DeclType("bool")
        if not member and fn in ("!_", "@not_strictly_false"):
            return DeclType("bool")
        if not member and fn == "_?_:_":
            expect(kinds[0] in ("bool", "dyn"))
            return args[1] if args[1].kind == args[2].kind else DeclType("dyn")
        if not member and fn in _COMPARISONS | {"_==_", "_!=_", "@in"}:
            if fn == "@in":
                expect(kinds[1] in ("list", "map", "dyn"))
            return DeclType("bool")
        if not member and fn == "_+_":
            if "dyn" in kinds:
                return DeclType("dyn")
            expect(kinds[0] == kinds[1] or set(kinds) == {"timestamp", "duration"})
            if kinds[0] == "list":
                return _list_of(args[1].elem if args[1].elem is not None else args[0].elem or DeclType("dyn"))
            return DeclType("timestamp") if "timestamp" in kinds else args[0]
        if not member and fn in ("_-_", "_*_", "_/_", "_%_"):
            if "dyn" in kinds:
                return DeclType("dyn")
            if kinds == ["timestamp", "timestamp"]:
                return DeclType("duration")
            return args[0]
        if not member and fn == "-_":
            return args[0]
        if not member and fn == "_[_]":
            container = args[0]
            if container.kind in ("list", "map"):
                return container.elem or DeclType("dyn")
            expect(container.kind == "dyn")
            return DeclType("dyn")
        if fn == "size" and ((n == 1 and not member) or (n == 0 and member)):
            expect((target or args[0]).kind in ("string", "bytes", "list", "map", "dyn"))
            return DeclType("int")
        if fn == "matches" and ((n == 1 and member) or (n == 2 and not member)):
            operands = [target.kind] if target is not None else []
            expect(all(k in ("string", "dyn") for k in operands + kinds))
            return DeclType("bool")
        if member and fn in ("startsWith", "endsWith", "contains") and n == 1:
            assert target is not None
            expect(target.kind in ("string", "dyn") and kinds[0] in ("string", "dyn"))
            return DeclType("bool")
        if not member and fn in _STRING_TO and n == 1:
            expect(kinds[0] in ("string", "dyn", _STRING_TO[fn]))
            return DeclType(_STRING_TO[fn])
        if not member and fn in _CONVERSIONS and n == 1:
            return DeclType(_CONVERSIONS[fn])
        if not member and fn in ("type", "dyn") and n == 1:
            return DeclType("type") if fn == "type" else DeclType("dyn")
        # Kubernetes libraries (k8s.io/apiserver/pkg/cel/library: regex.go, lists.go) and ext.Strings
        if member and fn in ("find", "findAll") and n == 1:
            return DeclType("string") if fn == "find" else _list_of(DeclType("string"))
        if member and fn in ("lowerAscii", "upperAscii", "trim") and n == 0:
            return DeclType("string")
        if member and fn == "substring" and n in (1, 2):
            return DeclType("string")
        if member and fn == "split" and n in (1, 2):
            return _list_of(DeclType("string"))
        if member and fn == "join" and n in (0, 1):
            return DeclType("string")
        if member and fn == "isSorted" and n == 0:
            return DeclType("bool")
        if member and fn in ("sum", "min", "max") and n == 0:
            assert target is not None
            return target.elem or DeclType("dyn")
        if member and fn in ("indexOf", "lastIndexOf") and n == 1:
            return DeclType("int")
        raise UnmodelledCEL(f"function {'.' if member else ''}{fn}() with {n} argument(s) is not modelled")


# --- the cost of an expression: cel-go checker/cost.go (coster), k8s library/cost.go ---


@dataclass(frozen=True)
class _Entry:
    """entrySizeEstimate: the container kind and the sizes of its keys and values (Max only)."""

    container: str
    key: int
    val: int

    def union(self, other: _Entry | None) -> _Entry | None:
        if other is None:
            return None
        return _Entry(self.container, max(self.key, other.key), max(self.val, other.val))


@dataclass
class _LocalVar:
    path: list[str]
    size: int | None
    entry: _Entry | None


@dataclass
class _Node:
    """checker.AstNode: an argument or target as the function estimators see it."""

    expr: Expr | None
    path: list[str] | None
    type: DeclType
    size: int | None  # ComputedSize


def _expr_size(e: Expr) -> int | None:
    """computeExprSize: the exact size of a literal."""
    if isinstance(e, Literal):
        if e.kind == "string":
            return len(e.value)
        if e.kind == "bytes":
            return len(e.value)
        return 1
    if isinstance(e, ListLiteral):
        return len(e.elements)
    if isinstance(e, MapLiteral):
        return len(e.entries)
    return None


class _Coster:
    def __init__(self, root: DeclType, types: dict[Expr, DeclType]) -> None:
        self.root = root
        self.types = types
        self.paths: dict[Expr, list[str]] = {}
        self.sizes: dict[Expr, int] = {}
        self.entries: dict[Expr, _Entry] = {}
        self.locals: dict[str, list[_LocalVar]] = {}

    # paths, sizes and local variables

    def _peek(self, name: str) -> _LocalVar | None:
        stack = self.locals.get(name)
        return stack[-1] if stack else None

    def _path(self, e: Expr) -> list[str]:
        if isinstance(e, Ident) and (var := self._peek(e.name)) is not None:
            return list(var.path)
        return list(self.paths.get(e, []))

    def _estimate_size(self, path: list[str] | None) -> int | None:
        """compilation.go sizeEstimator.EstimateSize: walk the schema's types from the rule's node."""
        if not path:
            return None
        node: DeclType | None = self.root
        for name in path[1:]:  # the first element is assumed to be `self`
            assert node is not None
            if name in ("@items", "@values"):
                node = node.elem
            elif name == "@keys":
                node = node.key
            else:
                node = node.fields.get(name)
            if node is None:
                return None
        assert node is not None
        return node.max_elements

    def _size(self, e: Expr) -> int | None:
        """computeSize."""
        if e in self.sizes:
            return self.sizes[e]
        if (size := _expr_size(e)) is not None:
            return size
        if (size := self._estimate_size(self._path(e))) is not None:
            self.sizes[e] = size
            return size
        if self.types[e].kind in _SCALAR_KINDS:  # computeTypeSize
            return 1
        if isinstance(e, Ident) and (var := self._peek(e.name)) is not None and var.size is not None:
            return var.size
        return None

    def _size_or_unknown(self, e: Expr) -> int:
        size = self._size(e)
        return UINT64_MAX if size is None else size

    def _entry(self, e: Expr) -> _Entry | None:
        if e in self.entries:
            return self.entries[e]
        if isinstance(e, Ident) and (var := self._peek(e.name)) is not None:
            return var.entry
        return None

    def _node(self, e: Expr) -> _Node:
        """newAstNode: paths rooted at an accumulator are dropped."""
        path: list[str] | None = self._path(e)
        if path and path[0] in (_ACCUMULATOR, "__result__"):
            path = None
        return _Node(e, path, self.types[e], self._size(e))

    def _push(self, name: str, var: _LocalVar) -> None:
        self.locals.setdefault(name, []).append(var)

    def _pop(self, name: str) -> None:
        self.locals[name].pop()

    # costs

    def cost(self, e: Expr) -> int:
        if isinstance(e, Literal):
            return _CONST_COST
        if isinstance(e, Ident):
            var = self._peek(e.name)
            self.paths[e] = list(var.path) if var is not None else [e.name]
            return _SELECT_AND_IDENT_COST
        if isinstance(e, Select):
            if e.test_only:
                return _add(_PRESENCE_TEST_COST, self.cost(e.operand))
            total = self.cost(e.operand)
            if self.types[e.operand].kind in ("map", "object"):
                total = _add(total, _SELECT_AND_IDENT_COST)
            self.paths[e] = [*self._path(e.operand), e.field]
            return total
        if isinstance(e, Call):
            return self._call(e)
        if isinstance(e, ListLiteral):
            total, item = 0, 0
            for element in e.elements:
                total = _add(total, self.cost(element))
                item = max(item, self._size_or_unknown(element))
            self.entries[e] = _Entry("list", 1, item)
            return _add(total, _LIST_CREATE_BASE_COST)
        if isinstance(e, MapLiteral):
            total, key, val = 0, 0, 0
            for k, v in e.entries:
                total = _add(total, self.cost(k), self.cost(v))
                key = max(key, self._size_or_unknown(k))
                val = max(val, self._size_or_unknown(v))
            self.entries[e] = _Entry("map", key, val)
            return _add(total, _MAP_CREATE_BASE_COST)
        if isinstance(e, Comprehension):
            return self._comprehension(e)
        raise UnmodelledCEL(f"expression {e!r}")

    def _comprehension(self, e: Comprehension) -> int:
        total = _add(self.cost(e.iter_range), self.cost(e.accu_init))
        self._push(e.accu_var, _LocalVar(self._path(e.accu_init), self._size(e.accu_init), self._entry(e.accu_init)))
        entry = self._entry(e.iter_range)  # pushIterSingle
        container = entry.container if entry is not None else self.types[e.iter_range].kind
        if container == "list":
            size, sub = (entry.val if entry is not None else None), "@items"
        else:
            size, sub = (entry.key if entry is not None else None), "@keys"
        self._push(e.iter_var, _LocalVar([*self._path(e.iter_range), sub], size, None))
        loop = self.cost(e.loop_condition)
        step = self.cost(e.loop_step)
        self._pop(e.iter_var)
        total = _add(total, self.cost(e.result))
        self._pop(e.accu_var)
        count = self._size_or_unknown(e.iter_range)
        total = _add(total, _mul(count, _add(step, loop)))
        if isinstance(e.accu_init, Literal):
            if (accu_size := self._size(e.accu_init)) is not None:
                self.sizes[e] = accu_size
        elif isinstance(e.accu_init, (ListLiteral, MapLiteral)):
            self.sizes[e] = count
            if (step_entry := self._entry(e.loop_step)) is not None:
                self.entries[e] = step_entry
        return total

    def _call(self, e: Call) -> int:
        if e.function == "dyn" and e.target is None:  # maybeUnwrapDynCall
            arg_cost = self.cost(e.args[0])
            if (size := self._size(e.args[0])) is not None:
                self.sizes[e] = size
            if (entry := self._entry(e.args[0])) is not None:
                self.entries[e] = entry
            return _add(1, arg_cost)
        arg_costs: list[int] = []
        args: list[_Node] = []
        for arg in e.args:
            arg_costs.append(self.cost(arg))
            args.append(self._node(arg))
        total = 0
        target: _Node | None = None
        if e.target is not None:
            total = self.cost(e.target)
            target = self._node(e.target)
        fn_cost, result_size = self._function_cost(e, target, args, arg_costs)
        if e.function == "_[_]" and e.target is None:
            container = self.types[e.args[0]].kind
            entry = self._entry(e.args[0])
            result_size = entry.val if entry is not None else None
            self.paths[e] = [*self._path(e.args[0]), "@values" if container == "map" else "@items"]
        if result_size is None:
            result_size = self._size(e)
        if result_size is not None:
            self.sizes[e] = result_size
        return _add(total, fn_cost)

    @staticmethod
    def _sz(node: _Node) -> int:
        return UINT64_MAX if node.size is None else node.size

    def _function_cost(
        self, e: Call, target: _Node | None, args: list[_Node], arg_costs: list[int]
    ) -> tuple[int, int | None]:
        arg_sum = _add(*arg_costs)
        library = self._library_cost(e.function, target, args)
        if library is not None:  # the estimator's EstimateCallCost comes before cel-go's defaults
            cost, size = library
            return _add(cost, arg_sum), size
        fn, sz = e.function, self._sz
        kinds = [a.type.kind for a in args]
        traversal = _STRING_TRAVERSAL_COST_FACTOR
        if fn in ("startsWith", "endsWith") and target is not None:
            return _add(_factor(sz(args[0]), traversal), arg_sum), None
        if fn == "@in":
            in_list = _add(sz(args[1]), arg_sum)  # O(n) even for a list literal
            return {"list": in_list, "map": _add(1, arg_sum)}.get(kinds[1], max(in_list, _add(1, arg_sum))), None
        if fn == "matches":
            text, regex = (target, args[0]) if target is not None else (args[0], args[1])
            text_cost = _factor(_add(sz(text), 1), traversal)
            regex_cost = _factor(sz(regex), _REGEX_STRING_LENGTH_COST_FACTOR)
            return _add(_mul(text_cost, regex_cost), arg_sum), None
        if fn == "contains" and target is not None:
            return _add(_mul(_factor(sz(target), traversal), _factor(sz(args[0]), traversal)), arg_sum), None
        if fn in ("_&&_", "_||_"):
            return arg_sum, None
        if fn == "_?_:_":
            size = max(sz(args[1]), sz(args[2]))
            left = self._entry(e.args[1])
            entry = left.union(self._entry(e.args[2])) if left is not None else None
            if entry is not None:
                self.entries[e] = entry
            return _add(arg_costs[0], max(arg_costs[1], arg_costs[2])), size
        if fn == "_+_" and ({"string", "bytes", "list", "dyn"} & set(kinds)):
            size = _add(sz(args[0]), sz(args[1]))
            left = self._entry(e.args[0])
            entry = left.union(self._entry(e.args[1])) if left is not None else None
            if entry is not None:
                self.entries[e] = entry
            concatenation = _add(_factor(size, traversal), arg_sum)
            if "list" in kinds:  # list concatenation is O(1)
                return _add(1, arg_sum), size
            if "dyn" in kinds:  # overloads: strings, bytes, lists and numbers; the estimate covers them all
                return max(concatenation, _add(1, arg_sum)), size
            return concatenation, size
        if fn in ("_==_", "_!=_") or fn in _COMPARISONS:
            # O(n) when strings or bytes are compared: the smaller operand is traversed (Equals is always costed so)
            linear = _add(_factor(min(sz(args[0]), sz(args[1])), traversal), arg_sum)
            if fn in ("_==_", "_!=_") or all(k in ("string", "bytes") for k in kinds):
                return linear, None
            if all(k in ("string", "bytes", "dyn") for k in kinds):  # string overloads are candidates
                return max(linear, _add(1, arg_sum)), None
            return _add(1, arg_sum), None
        if fn == "bytes" and target is None and kinds == ["string"]:  # StringToBytes
            return _add(_factor(sz(args[0]), traversal), arg_sum), _mul(sz(args[0]), 4)
        if fn == "string" and target is None and kinds == ["bytes"]:  # BytesToString
            return _add(_factor(sz(args[0]), traversal), arg_sum), sz(args[0])
        return _add(1, arg_sum), None  # O(1) functions

    def _library_cost(self, fn: str, target: _Node | None, args: list[_Node]) -> tuple[int, int | None] | None:
        """k8s.io/apiserver/pkg/cel/library/cost.go CostEstimator.EstimateCallCost, for the functions modelled."""
        if target is None:
            return None
        sz, traversal = self._sz, _STRING_TRAVERSAL_COST_FACTOR
        if fn in ("isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"):
            if target.type.kind == "list":
                element_cost = 1
                element = target.type.elem
                if element is not None and element.kind in ("string", "bytes"):
                    element_path = [*target.path, "@items"] if target.path else None
                    element_size = self._estimate_size(element_path)
                    element_cost = _add(
                        element_cost, _factor(UINT64_MAX if element_size is None else element_size, traversal)
                    )
                return _mul(sz(target), element_cost), None
            return _factor(sz(target), traversal), None
        if fn in ("lowerAscii", "upperAscii", "substring", "trim"):
            return _factor(sz(target), traversal), sz(target)
        if fn == "split":
            size = sz(target)
            limit = args[1].expr if len(args) > 1 else None
            result = limit.value if isinstance(limit, Literal) and limit.kind == "int" else size
            return _factor(size, 2 * traversal), result
        if fn == "join":
            list_size = sz(target)
            element_path = [*target.path, "@items"] if target.path else None
            element_size = self._estimate_size(element_path)
            size = _mul(list_size, UINT64_MAX if element_size is None else element_size)
            if args:
                size = _add(size, _mul(sz(args[0]), max(list_size - 1, 0)))
            return _factor(size, traversal), size
        if fn in ("find", "findAll") and args:
            text_cost = _factor(_add(sz(target), 1), traversal)
            regex_cost = _factor(sz(args[0]), _REGEX_STRING_LENGTH_COST_FACTOR)
            return _mul(text_cost, regex_cost), sz(target)
        return None


def estimate(
    expression: str, schema: Mapping[str, Any], *, is_resource_root: bool = False, result: str = "bool"
) -> int:
    """The worst-case cost of one evaluation of `expression` with `self` the value of `schema` (MaxCost)."""
    root = schema_decl_type(schema, is_resource_root)
    if root is None:
        unknown_fields = schema.get("x-kubernetes-preserve-unknown-fields")
        raise CELCompileError(
            "rule declared on schema that does not support validation rules: "
            f"type {schema.get('type')!r}, x-kubernetes-preserve-unknown-fields {unknown_fields}"
        )
    expr = parse(expression)
    checker = _Checker(root)
    output = checker.check(expr)
    allowed = {"bool"} if result == "bool" else {"string", "list"}
    if output.kind not in allowed | {"dyn"}:
        raise CELCompileError(f"cel expression must evaluate to a {result}, not {output.kind}")
    return _Coster(root, checker.types).cost(expr)


# --- a CRD's rules, their cardinality and the limits: apiextensions validation.go, cel_validation.go ---


@dataclass(frozen=True)
class RuleCost:
    """One x-kubernetes-validations rule: its estimated cost per evaluation and how often it can run."""

    path: str
    """The field path the API server names the rule by, e.g. `...openAPIV3Schema.properties[spec]...rule`."""
    rule: str
    cost: int
    cardinality: int
    message_expression_cost: int | None = None

    @property
    def total(self) -> int:
        """getExpressionCost: the rule's cost times its cardinality."""
        return 0 if self.cost == 0 else _mul(self.cost, self.cardinality)


@dataclass(frozen=True)
class SchemaCost:
    """Every rule of one version's openAPIV3Schema, and the total the API server compares with its limit."""

    path: str
    rules: list[RuleCost]

    @property
    def total(self) -> int:
        return _add(*(r.total for r in self.rules), *(r.message_expression_cost or 0 for r in self.rules))

    def errors(self) -> list[str]:
        """What the API server would answer, one line per Forbidden error; empty when it accepts the schema."""
        errors: list[str] = []
        observed: list[tuple[int, str]] = []
        for r in self.rules:
            if r.total > STATIC_ESTIMATED_COST_LIMIT:
                errors.append(f"{r.path}: Forbidden: {cost_error_message('estimated rule cost', r.total)}")
            observed.append((r.total, r.path))
            if r.message_expression_cost is not None:
                path = r.path.removesuffix(".rule") + ".messageExpression"
                if r.message_expression_cost > STATIC_ESTIMATED_COST_LIMIT:
                    message = cost_error_message("estimated messageExpression cost", r.message_expression_cost)
                    errors.append(f"{path}: Forbidden: {message}")
                observed.append((r.message_expression_cost, path))
        if self.total > STATIC_ESTIMATED_CRD_COST_LIMIT:
            expensive = sorted((o for o in observed if o[0] >= STATIC_ESTIMATED_CRD_COST_LIMIT // 100), reverse=True)
            for _, path in expensive[:4]:
                errors.append(
                    f"{path}: Forbidden: contributed to estimated rule cost total exceeding cost limit for entire "
                    "OpenAPIv3 schema"
                )
            message = cost_error_message(
                "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
                self.total,
                STATIC_ESTIMATED_CRD_COST_LIMIT,
            )
            errors.append(f"{self.path}: Forbidden: {message}")
        return errors


def cost_error_message(cost_name: str, cost: int, limit: int = STATIC_ESTIMATED_COST_LIMIT) -> str:
    """validation.go getCostErrorMessage."""
    exceed = cost / limit
    if exceed > 100.0:
        factor = "more than 100x"
    elif exceed < 1.5:
        factor = f"{exceed:f}x"
    else:
        factor = f"{exceed:.1f}x"
    return (
        f"{cost_name} exceeds budget by factor of {factor} (try simplifying the rule, or adding maxItems, "
        "maxProperties, and maxLength where arrays, maps, and strings are declared)"
    )


def _max_elements(node: Mapping[str, Any]) -> int | None:
    """cel_validation.go extractMaxElements: how many times a node's children can occur per occurrence."""
    kind = node.get("type")
    if kind == "object":
        if "additionalProperties" in node:
            return max(node["maxProperties"], 0) if "maxProperties" in node else None
        return 1
    if kind == "array":
        return max(node["maxItems"], 0) if "maxItems" in node else None
    return 1


def _walk(
    node: Mapping[str, Any], path: str, cardinality: int | None, root: bool
) -> Iterator[tuple[str, Mapping[str, Any], int | None, bool]]:
    yield path, node, cardinality, root
    factor = _max_elements(node)
    child = None if cardinality is None or factor is None else _mul(cardinality, factor)
    for keyword in ("allOf", "anyOf", "oneOf", "not"):
        nested = node.get(keyword)
        for sub in nested if isinstance(nested, list) else [nested] if nested else []:
            if any(n.get("x-kubernetes-validations") for _, n, _, _ in _walk(sub, path, None, False)):
                raise UnmodelledCEL(f"{path}.{keyword}: rules inside {keyword} are not modelled")
    if isinstance(node.get("additionalProperties"), Mapping):
        yield from _walk(node["additionalProperties"], f"{path}.additionalProperties", child, False)
    for name, prop in (node.get("properties") or {}).items():
        yield from _walk(prop, f"{path}.properties[{name}]", child, bool(prop.get("x-kubernetes-embedded-resource")))
    if isinstance(node.get("items"), Mapping):
        yield from _walk(
            node["items"], f"{path}.items", child, bool(node["items"].get("x-kubernetes-embedded-resource"))
        )


def estimate_schema(schema: Mapping[str, Any], path: str = "spec.versions[0].schema.openAPIV3Schema") -> SchemaCost:
    """Estimate every rule of a version's openAPIV3Schema as the API server does when the CRD is written."""
    rules: list[RuleCost] = []
    for node_path, node, cardinality, root in _walk(schema, path, 1, True):
        validations = node.get("x-kubernetes-validations") or []
        if not validations:
            continue
        decl = schema_decl_type(node, root)
        if decl is None:
            raise CELCompileError(f"{node_path}: rule declared on schema that does not support validation rules")
        # getExpressionCost: unbounded cardinality falls back on how many such values fit in a request
        repeat = cardinality if cardinality is not None else MAX_REQUEST_SIZE_BYTES // (decl.min_size + 1)
        for index, validation in enumerate(validations):
            rule_path = f"{node_path}.x-kubernetes-validations[{index}].rule"
            try:
                cost = estimate(validation["rule"], node, is_resource_root=root)
                message_cost = None
                if validation.get("messageExpression"):
                    message_cost = estimate(
                        validation["messageExpression"], node, is_resource_root=root, result="string"
                    )
            except (UnmodelledCEL, CELCompileError) as error:
                raise type(error)(f"{rule_path}: {error}") from error
            rules.append(RuleCost(rule_path, validation["rule"], cost, repeat, message_cost))
    return SchemaCost(path, rules)


def estimate_crd(crd: Mapping[str, Any]) -> list[SchemaCost]:
    """One SchemaCost per version of a CustomResourceDefinition."""
    return [
        estimate_schema(version["schema"]["openAPIV3Schema"], f"spec.versions[{i}].schema.openAPIV3Schema")
        for i, version in enumerate(crd["spec"]["versions"])
    ]
