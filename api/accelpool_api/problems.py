"""Field errors as the API server words them, and values as it receives and prints them.

`Problem` is one reason an object is invalid; `go_value` and `go_float` print a bad value as Go's
`%v` does; `as_sent` turns a decoded YAML value into what kubectl sends. `accelpool validate`, the
admission webhook and the emulated API server use them so that all three say the same words.
"""

from __future__ import annotations

import decimal
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

AUTO: Any = object()
"""`Problem.shown`'s default: the bad value, rendered as the API server renders values."""


@dataclass(frozen=True)
class Problem:
    """One reason an object is invalid: where, what was there, and what would be valid.

    It reads as the API server's own field errors do (k8s.io/apimachinery pkg/util/validation/field
    errors.go `Error.Error`): `spec.mig.profile: Invalid value: "1g.5gb": mig profile 1g.5gb is not
    offered by H100-80GB; valid: ...`, so `accelpool validate` and `kubectl apply` say the same words.
    """

    path: str
    value: Any
    message: str
    error_type: ErrorType = "Invalid"
    """The field error's type (k8s.io/apimachinery field.ErrorType); UnknownField for the strict
    decoding error the server answers an unknown field with, before any field validation."""
    shown: str | None = AUTO
    """The value as the server prints it after the type (None: not printed); AUTO renders `value`."""
    hint: str = ""
    """Help that goes beyond what the API server says (printed after the message by the CLI)."""

    def __post_init__(self) -> None:
        if self.shown is AUTO:
            object.__setattr__(self, "shown", None if self.value is None else go_value(self.value))

    @property
    def body(self) -> str:
        """The error without its field path: `Invalid value: 1: ... should be greater than or equal to 2`."""
        if self.error_type == "UnknownField":
            return self.message
        label = _ERROR_LABELS[self.error_type]
        head = label if self.shown is None else f"{label}: {self.shown}"
        return f"{head}: {self.message}" if self.message else head

    def __str__(self) -> str:
        return self.body if self.error_type == "UnknownField" else f"{self.path}: {self.body}"


ErrorType = Literal["Invalid", "TypeInvalid", "Required", "NotSupported", "TooMany", "TooLong", "UnknownField"]
_ERROR_LABELS: dict[str, str] = {
    "Invalid": "Invalid value",
    "TypeInvalid": "Invalid value",
    "Required": "Required value",
    "NotSupported": "Unsupported value",
    "TooMany": "Too many",
    "TooLong": "Too long",
}
"""How the API server prints each field error type (k8s.io/apimachinery pkg/util/validation/field errors.go)."""


def go_value(value: Any) -> str:
    """A decoded JSON value as the API server prints a field error's bad value (Go's %v, %q, %#v).

    Scalars as `field.Error` prints them (strings quoted, numbers and booleans bare); objects and
    lists as compact JSON, which the server's own errors never print (they show the type name).
    """
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def go_float(value: float) -> str:
    """Go's %v of a float64 (strconv 'g', shortest): 2, 1.5, 123456, 1.234567e+06, 1e-05."""
    if value == 0 or not math.isfinite(value):
        return {math.inf: "+Inf", -math.inf: "-Inf"}.get(value, "NaN" if value != value else "0")
    sign, digits, exponent = decimal.Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    point = len(text) + exponent  # where the decimal point goes, counted from the first digit
    minus = "-" if sign else ""
    if not -4 <= point - 1 < 6:
        mantissa = text[0] + (f".{text[1:]}" if len(text) > 1 else "")
        power = point - 1
        return f"{minus}{mantissa}e{'-' if power < 0 else '+'}{abs(power):02d}"
    if point <= 0:
        return f"{minus}0.{'0' * -point}{text}"
    if point >= len(text):
        return f"{minus}{text}{'0' * (point - len(text))}"
    return f"{minus}{text[:point]}.{text[point:]}"


def as_sent(value: Any) -> Any:
    """A decoded YAML value as the API server receives it from kubectl: kubectl sends JSON (Go's
    encoding/json writes 4.0 as 4) and the server decodes whole numbers as int64
    (k8s.io/apimachinery pkg/util/json), so `nodes: 4.0` arrives as the integer 4."""
    if isinstance(value, float) and value.is_integer() and -(2**63) <= value < 2**63:
        return int(value)
    if isinstance(value, Mapping):
        return {key: as_sent(item) for key, item in value.items()}
    if isinstance(value, list):
        return [as_sent(item) for item in value]
    return value
