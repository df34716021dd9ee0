"""A type checker for the CEL subset: what cel-go's checker decides that the cost depends on."""

from __future__ import annotations

from tests.support.cel_cost.expr import Call, Comprehension, Expr, Ident, ListLiteral, Literal, MapLiteral, Select
from tests.support.cel_cost.limits import CELCompileError, UnmodelledCEL
from tests.support.cel_cost.types import DeclType

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
