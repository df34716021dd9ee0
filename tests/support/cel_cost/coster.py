"""The worst-case cost of an expression: cel-go's coster and the Kubernetes library's call costs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from tests.support.cel_cost.checker import _COMPARISONS, _Checker
from tests.support.cel_cost.expr import (
    _ACCUMULATOR,
    Call,
    Comprehension,
    Expr,
    Ident,
    ListLiteral,
    Literal,
    MapLiteral,
    Select,
    parse,
)
from tests.support.cel_cost.limits import (
    _CONST_COST,
    _LIST_CREATE_BASE_COST,
    _MAP_CREATE_BASE_COST,
    _PRESENCE_TEST_COST,
    _REGEX_STRING_LENGTH_COST_FACTOR,
    _SELECT_AND_IDENT_COST,
    _STRING_TRAVERSAL_COST_FACTOR,
    UINT64_MAX,
    CELCompileError,
    UnmodelledCEL,
    _add,
    _factor,
    _mul,
)
from tests.support.cel_cost.types import _SCALAR_KINDS, DeclType, schema_decl_type

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
