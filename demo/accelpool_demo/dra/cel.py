"""DRA's device selectors: CEL expressions over one `device`, evaluated the way kube-scheduler's structured
allocator evaluates DeviceClass and request selectors, through Google's CEL (cel-expr-python, as
`accelpool_demo.apiserver.cel` uses it). Pure.

After kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/cel/compile.go`:

- the variable `device` holds `driver`, `attributes` and `capacity`, the latter two keyed by domain then
  by identifier; an attribute without a domain belongs to the driver's domain (`parseQualifiedName`),
  so NVIDIA's `productName` is `device.attributes["gpu.nvidia.com"].productName` and the standard
  `resource.kubernetes.io/pciBusID` is `device.attributes["resource.kubernetes.io"].pciBusID`;
- attribute values are int, bool, string or a semantic version (`getAttributeValue`); capacities are
  Quantities;
- looking up a domain the device has none of gives an empty map (`newStringInterfaceMapWithDefault`), so
  `device.attributes["other.example.com"].x` fails on `x`, not on the domain: here every domain an
  expression names in `attributes["..."]`/`capacity["..."]` is given an empty map before evaluation
  (cel-expr-python has no map with a default), which is the same for every expression that names its
  domains literally;
- the libraries: CEL's standard library, the strings extension (`lowerAscii`, ...), optionals,
  `cel.bind` (ext.Bindings), Kubernetes' Quantity library (k8s.io/apiserver/pkg/cel/library/quantity.go:
  `quantity()`, `isQuantity()`, `compareTo`, `isGreaterThan`, `isLessThan`, `sign`, `isInteger`,
  `asInteger`, `asApproximateFloat`, `add`, `sub`) and its Semver library (semverlib.go: `semver()`,
  `isSemver()`, `compareTo`, `isGreaterThan`, `isLessThan`, `major`, `minor`, `patch`);
- an expression must evaluate to a bool; an evaluation error (a missing attribute: `no such key: x`) is
  an error, not a mismatch: the allocator stops with it (`SelectorError`).

`device` is declared `dyn`, so a misspelled field of `device` itself fails when evaluated, where
kube-apiserver refuses it when the class or claim is stored (that check is the API server's).
Used by `accelpool_demo.dra.allocator`.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from accelpool_demo.apiserver import cel as apiserver_cel
from accelpool_demo.dra.quantity import (
    QuantityError,
    Semver,
    SemverError,
    compare_semver,
    parse_quantity,
    parse_semver,
)

# ---------------------------------------------------------------- Quantity and Semver as CEL values

_PACKAGE = "accelpool.dra"


def _pool() -> tuple[Any, Any, Any]:
    """A descriptor pool with two one-field messages standing for Kubernetes' Quantity and Semver types."""
    file = descriptor_pb2.FileDescriptorProto(name="accelpool_dra_cel.proto", package=_PACKAGE, syntax="proto3")
    for name in ("Quantity", "Semver"):
        message = file.message_type.add(name=name)
        message.field.add(
            name="value",
            number=1,
            type=descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
            label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL,
        )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(file)
    quantity = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Quantity"))
    semver = message_factory.GetMessageClass(pool.FindMessageTypeByName(f"{_PACKAGE}.Semver"))
    return pool, quantity, semver


_POOL, _QuantityMessage, _SemverMessage = _pool()
_QUANTITY = cel.Type(f"{_PACKAGE}.Quantity")
_SEMVER = cel.Type(f"{_PACKAGE}.Semver")


def quantity_value(text: str) -> Any:
    """A Quantity as CEL sees it; its one field is the exact value (`n/d`), so equal quantities are `==`."""
    value = parse_quantity(text)
    return _QuantityMessage(value=f"{value.numerator}/{value.denominator}")


def semver_value(text: str) -> Any:
    """A version attribute as CEL sees it (build metadata dropped: it takes no part in comparisons)."""
    return _SemverMessage(value=str(parse_semver(text)))


def _fraction(message: Any) -> Fraction:
    return Fraction(str(message.value))


def _version(message: Any) -> Semver:
    return parse_semver(str(message.value))


def _compare(a: Any, b: Any) -> int:
    """One runtime function serves both types' `compareTo` (cel-cpp dispatches messages by kind, not name)."""
    if isinstance(a, _SemverMessage):
        return compare_semver(_version(a), _version(b))
    x, y = _fraction(a), _fraction(b)
    return (x > y) - (x < y)


def _quantity_of(value: Fraction) -> Any:
    return _QuantityMessage(value=f"{value.numerator}/{value.denominator}")


def _as_integer(q: Any) -> int:
    value = _fraction(q)
    if value.denominator != 1 or not -(2**63) <= value.numerator < 2**63:
        raise ValueError("cannot convert value to integer")
    return value.numerator


def _is_quantity(text: str) -> bool:
    try:
        parse_quantity(text)
    except QuantityError:
        return False
    return True


def _is_semver(text: str) -> bool:
    try:
        parse_semver(text)
    except SemverError:
        return False
    return True


def _parse_quantity(text: str) -> Any:
    try:
        return quantity_value(text)
    except QuantityError as error:
        raise ValueError(str(error)) from None


def _parse_semver(text: str) -> Any:
    try:
        return semver_value(text)
    except SemverError as error:
        raise ValueError(str(error)) from None


def _declarations() -> tuple[list[cel.FunctionDecl], dict[str, Callable[..., Any]]]:
    string, integer, boolean, double = cel.Type.STRING, cel.Type.INT, cel.Type.BOOL, cel.Type.DOUBLE
    q, s = _QUANTITY, _SEMVER

    def overload(name: str, result: cel.Type, *params: cel.Type, member: bool = True) -> cel.Overload:
        return cel.Overload(name, result, list(params), is_member=member)

    declarations = [
        cel.FunctionDecl("quantity", [overload("string_to_quantity", q, string, member=False)]),
        cel.FunctionDecl("isQuantity", [overload("is_quantity_string", boolean, string, member=False)]),
        cel.FunctionDecl("semver", [overload("string_to_semver", s, string, member=False)]),
        cel.FunctionDecl("isSemver", [overload("is_semver_string", boolean, string, member=False)]),
        cel.FunctionDecl(
            "compareTo",
            [
                overload("quantity_compareTo_quantity", integer, q, q),
                overload("semver_compareTo_semver", integer, s, s),
            ],
        ),
        cel.FunctionDecl(
            "isGreaterThan",
            [overload("quantity_isGreaterThan", boolean, q, q), overload("semver_isGreaterThan", boolean, s, s)],
        ),
        cel.FunctionDecl(
            "isLessThan",
            [overload("quantity_isLessThan", boolean, q, q), overload("semver_isLessThan", boolean, s, s)],
        ),
        cel.FunctionDecl("sign", [overload("quantity_sign", integer, q)]),
        cel.FunctionDecl("isInteger", [overload("quantity_is_integer", boolean, q)]),
        cel.FunctionDecl("asInteger", [overload("quantity_get_int", integer, q)]),
        cel.FunctionDecl("asApproximateFloat", [overload("quantity_get_float", double, q)]),
        cel.FunctionDecl("add", [overload("quantity_add", q, q, q), overload("quantity_add_int", q, q, integer)]),
        cel.FunctionDecl("sub", [overload("quantity_sub", q, q, q), overload("quantity_sub_int", q, q, integer)]),
        cel.FunctionDecl("major", [overload("semver_major", integer, s)]),
        cel.FunctionDecl("minor", [overload("semver_minor", integer, s)]),
        cel.FunctionDecl("patch", [overload("semver_patch", integer, s)]),
    ]
    # cel-cpp registers runtime functions by argument kind: the Quantity and Semver overloads of one function
    # share one implementation, which tells the two apart.
    implementations: dict[str, Callable[..., Any]] = {
        "string_to_quantity": _parse_quantity,
        "is_quantity_string": _is_quantity,
        "string_to_semver": _parse_semver,
        "is_semver_string": _is_semver,
        "quantity_compareTo_quantity": _compare,
        "quantity_isGreaterThan": lambda a, b: _compare(a, b) > 0,
        "quantity_isLessThan": lambda a, b: _compare(a, b) < 0,
        "quantity_sign": lambda a: (_fraction(a) > 0) - (_fraction(a) < 0),
        "quantity_is_integer": lambda a: _fraction(a).denominator == 1,
        "quantity_get_int": _as_integer,
        "quantity_get_float": lambda a: float(_fraction(a)),
        "quantity_add": lambda a, b: _quantity_of(_fraction(a) + _fraction(b)),
        "quantity_add_int": lambda a, b: _quantity_of(_fraction(a) + b),
        "quantity_sub": lambda a, b: _quantity_of(_fraction(a) - _fraction(b)),
        "quantity_sub_int": lambda a, b: _quantity_of(_fraction(a) - b),
        "semver_major": lambda a: _version(a).major,
        "semver_minor": lambda a: _version(a).minor,
        "semver_patch": lambda a: _version(a).patch,
    }
    return declarations, implementations


@functools.cache
def _environment() -> cel.Env:
    declarations, implementations = _declarations()
    return cel.NewEnv(
        descriptor_pool=_POOL,
        variables={"device": cel.Type.DYN},
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
            apiserver_cel.kubernetes_library(),
        ],
        functions=declarations,
        function_impls=implementations,
    )


# ---------------------------------------------------------------- compiling and evaluating


class SelectorError(Exception):
    """A selector that cannot be compiled, or that failed to evaluate on a device (`CEL compile error: ...`,
    `CEL runtime error: no such key: x`); the allocator stops the allocation with it."""


_DOMAIN_LOOKUP = re.compile(r"""\b(attributes|capacity)\s*\[\s*(["'])(.*?)\2\s*\]""")


@functools.cache
def _compiled(expression: str) -> tuple[Any, frozenset[str]]:
    try:
        program = _environment().compile(expression)
    except RuntimeError as error:
        text = str(error).removeprefix("INVALID_ARGUMENT: ").removesuffix(" [INVALID_ARGUMENT]")
        raise SelectorError(f"CEL compile error: compilation failed: {text}") from None
    domains = frozenset(match.group(3) for match in _DOMAIN_LOOKUP.finditer(expression))
    return program, domains


def check(expression: str) -> None:
    """Raise `SelectorError` when the expression does not compile."""
    _compiled(expression)


def _split(name: str, driver: str) -> tuple[str, str]:
    """compile.go `parseQualifiedName`: `domain/id`, or the driver's domain for a bare identifier."""
    domain, slash, ident = name.partition("/")
    return (domain, ident) if slash else (driver, name)


def _attribute(value: Mapping[str, Any]) -> Any:
    for kind in ("int", "bool", "string"):
        if kind in value:
            return value[kind]
    if "version" in value:
        return semver_value(str(value["version"]))
    for kind in ("ints", "bools", "strings"):
        if kind in value:
            return list(value[kind])
    if "versions" in value:
        return [semver_value(str(v)) for v in value["versions"]]
    raise SelectorError(f"unsupported attribute value {dict(value)!r}: expected int, bool, string or version")


def device_variable(driver: str, device: Mapping[str, Any]) -> dict[str, Any]:
    """The `device` variable for one `spec.devices[]` entry of a ResourceSlice of `driver`."""
    attributes: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("attributes") or {}).items():
        domain, ident = _split(str(name), driver)
        attributes.setdefault(domain, {})[ident] = _attribute(value)
    capacity: dict[str, dict[str, Any]] = {}
    for name, value in (device.get("capacity") or {}).items():
        domain, ident = _split(str(name), driver)
        capacity.setdefault(domain, {})[ident] = quantity_value(str((value or {}).get("value", "0")))
    return {"driver": driver, "attributes": attributes, "capacity": capacity}


def matches(expression: str, device: Mapping[str, Any]) -> bool:
    """Whether the selector holds for `device` (a `device_variable`); `SelectorError` when it cannot say."""
    program, domains = _compiled(expression)
    variable = dict(device)
    if domains:
        variable["attributes"] = {**{domain: {} for domain in domains}, **device["attributes"]}
        variable["capacity"] = {**{domain: {} for domain in domains}, **device["capacity"]}
    result = program.eval(data={"device": variable})
    if result.type() == cel.Type.ERROR:
        raise SelectorError(f"CEL runtime error: {_go_worded(str(result.value()))}")
    value = result.value()
    if not isinstance(value, bool):
        kind = result.type().name().lower()
        raise SelectorError(f"CEL runtime error: CEL result of type {kind} could not be converted to bool")
    return value


_CEL_GO_WORDS = (
    (re.compile(r'^NOT_FOUND: Key not found in map : "(.*)"$'), r"no such key: \1"),
    (re.compile(r"^[A-Z_]+: (.*?)(?: \[[A-Z_]+\])?$"), r"\1"),
)
"""cel-cpp's evaluation errors in cel-go's words where they differ (cel-go common/types/err.go `no such key`)."""


def _go_worded(error: str) -> str:
    for pattern, replacement in _CEL_GO_WORDS:
        if pattern.match(error):
            return pattern.sub(replacement, error)
    return error
