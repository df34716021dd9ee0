"""The expression tree, as cel-go's parser builds it (macros expanded), from celpy's parse."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy.evaluation import celbytes, celstr

from tests.support.cel_cost.limits import CELCompileError, UnmodelledCEL

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
