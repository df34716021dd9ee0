"""YAML scalars as kubectl reads them: go-yaml v2's resolution, then sigs.k8s.io/yaml's JSON.

kubectl reads a manifest with k8s.io/apimachinery pkg/util/yaml/decoder.go (`YAMLToJSONDecoder`,
called from k8s.io/cli-runtime pkg/resource/visitor.go `StreamVisitor`): each document goes through
sigs.k8s.io/yaml `Unmarshal` (yaml.go), which decodes it with go.yaml.in/yaml/v2 (v2.4.2, the
go-yaml v2 branch) into Go values and then writes those as JSON (`convertToJSONableObject`,
`json.Marshal`). What the API server receives is that JSON. This module reproduces both steps for
one scalar; `accelpool_core.textio.safe_yaml` applies them to whole documents.

go-yaml v2 `resolve.go` (`resolve`, `resolveTable`, `resolveMap`), for a plain (unquoted, untagged)
scalar:

- only a scalar whose first character is a sign, a digit, `.`, or one of `yYnNtTfFoO~` (or the
  empty scalar) can be anything but a string;
- booleans: `y Y yes Yes YES true True TRUE on On ON` and `n N no No NO false False FALSE off Off
  OFF`; null: the empty scalar, `~ null Null NULL`; `.inf .Inf .INF`, `+.inf ...`, `-.inf ...`,
  `.nan .NaN .NAN`. Nothing else: `yes` is true but `YeS` and `nil` are strings;
- a scalar starting with `.`: a float if Go's `strconv.ParseFloat` reads it (`.5`, `.5e3`, `.5_5`);
- a scalar starting with a sign or a digit: a timestamp (kept as its text), else, with every `_`
  removed, an integer by `strconv.ParseInt(s, 0, 64)` (so `0x1F`, `0o17`, `0b101`, `017` octal,
  `+12`, `1_000`), else an unsigned one by `strconv.ParseUint`, else a float if it matches
  `yamlStyleFloat` (`1e1`, `5e-1`, `1.`, `+.5`; a float Go cannot hold, `1e999`, stays a string),
  else `0b...`/`-0b...` binary. Everything else is a string: there are no sexagesimal numbers
  (`1:30` is the string "1:30"), unlike YAML 1.1 and PyYAML.

A quoted scalar is a string; the non-specific tag `!` makes a string; an explicit standard tag
(`!!int`, `!!float`, `!!bool`, `!!null`, `!!str`, `!!timestamp`) resolves the text and must agree
(`!!float` also takes an integer), else go-yaml fails with "cannot decode !!str `x` as a !!int";
`!!binary` is base64, decoded (go-yaml v2 decode.go `scalar`); any other tag is ignored (the text).
Timestamps stay text when decoded into `interface{}` (decode.go `scalar`, "for backward
compatibility").

sigs.k8s.io/yaml yaml.go `convertToJSONableObject` then makes every mapping key a string: an
integer in decimal, a bool `true`/`false`, a float with `strconv.FormatFloat(f, 'g', -1, 32)`
(float32 precision: `0.1`, `1e+06`; `.inf`, `-.inf`, `.nan`); a null or uint64 key is an error.
Values go through Go's `encoding/json`: a float is written in its shortest form, which the API
server reads back as an integer when it has no fraction (`1e1` → `10`, k8s.io/apimachinery
pkg/util/json); NaN and ±Inf are refused ("json: unsupported value: +Inf"). Python values here
are what `json.loads` makes of that JSON.

Pure: no I/O.
"""

from __future__ import annotations

import binascii
import math
import re
import struct
from dataclasses import dataclass
from decimal import ROUND_CEILING, ROUND_FLOOR, Decimal, localcontext
from fractions import Fraction
from typing import Any

PREFIX = "tag:yaml.org,2002:"
STR, INT, FLOAT, BOOL, NULL = (PREFIX + t for t in ("str", "int", "float", "bool", "null"))
TIMESTAMP, BINARY, MERGE = PREFIX + "timestamp", PREFIX + "binary", PREFIX + "merge"
PLAIN = ""
"""The tag of a plain scalar with no tag (go-yaml's empty `tag`, resolved from the text)."""

_RESOLVABLE = frozenset({PLAIN, STR, BOOL, INT, FLOAT, NULL, TIMESTAMP})


class GoYamlError(ValueError):
    """A scalar go-yaml or sigs.k8s.io/yaml refuses; the message is theirs."""


@dataclass(frozen=True)
class Uint:
    """A uint64 above int64's range: a value in JSON, but no mapping key (sigs.k8s.io/yaml refuses it)."""

    value: int


GoValue = str | int | float | bool | None | Uint
"""A decoded scalar as go-yaml v2 holds it in an `interface{}`: string, int, float64, bool, nil, uint64."""


def _hint(text: str) -> str:
    """go-yaml's `resolveTable` class of the first byte: S(ign), D(igit), M(ap), '.', or '' (a string)."""
    if not text:
        return "N"
    first = text[0]
    if first in "+-":
        return "S"
    if "0" <= first <= "9":
        return "D"
    if first in "yYnNtTfFoO~":
        return "M"
    return "." if first == "." else ""


_MAP: dict[str, tuple[str, GoValue]] = {
    **dict.fromkeys(("y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON"), (BOOL, True)),
    **dict.fromkeys(("n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF"), (BOOL, False)),
    **dict.fromkeys(("", "~", "null", "Null", "NULL"), (NULL, None)),
    **dict.fromkeys((".nan", ".NaN", ".NAN"), (FLOAT, math.nan)),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), (FLOAT, math.inf)),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), (FLOAT, -math.inf)),
    "<<": (MERGE, "<<"),
}
"""go-yaml v2 resolve.go `resolveMapList`."""

_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
"""go-yaml v2 resolve.go `yamlStyleFloat` (matched in full)."""
_DOT_FLOAT = re.compile(r"\.[0-9]+(_[0-9]+)*([eE][-+]?[0-9]+(_[0-9]+)*)?")
"""What `strconv.ParseFloat` reads of a text that starts with '.': no sign, no hex, no inf/nan, and
an underscore only between digits (strconv atof.go `readFloat`, `underscoreOK`)."""
_INT64_MIN, _INT64_MAX, _UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1


def resolve(tag: str, text: str) -> tuple[str, GoValue]:
    """go-yaml v2 `resolve(tag, in)`: the resolved tag and value of a scalar's text under `tag`
    (`PLAIN` for a plain scalar without a tag). Raises `GoYamlError` where go-yaml fails."""
    if tag not in _RESOLVABLE:
        return tag, text
    rtag, out = _resolve(tag, text)
    if tag in (PLAIN, rtag, STR):
        return rtag, out
    if tag == FLOAT and rtag == INT and isinstance(out, int):  # uint64 is not converted
        return FLOAT, float(out)
    raise GoYamlError(f"cannot decode {_short(rtag)} `{text}` as a {_short(tag)}")


def _short(tag: str) -> str:
    return "!!" + tag[len(PREFIX) :] if tag.startswith(PREFIX) else tag


def _resolve(tag: str, text: str) -> tuple[str, GoValue]:
    hint = _hint(text)
    if not hint or tag == STR:
        return STR, text
    if text in _MAP:
        return _MAP[text]
    if hint == ".":
        number = _parse_float(text.replace("_", "")) if _DOT_FLOAT.fullmatch(text) else None
        if number is not None:
            return FLOAT, number
    elif hint in "DS":
        if tag in (PLAIN, TIMESTAMP) and is_timestamp(text):
            return TIMESTAMP, text
        plain = text.replace("_", "")
        integer = parse_int(plain, 0)
        if integer is not None:
            return INT, integer
        unsigned = parse_uint(plain, 0)
        if unsigned is not None:
            return INT, Uint(unsigned) if unsigned > _INT64_MAX else unsigned
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            number = _parse_float(plain)
            if number is not None:
                return FLOAT, number
        if plain.startswith("0b"):
            integer = parse_int(plain[2:], 2)
            if integer is not None:
                return INT, integer
            unsigned = parse_uint(plain[2:], 2)
            if unsigned is not None:
                return INT, Uint(unsigned) if unsigned > _INT64_MAX else unsigned
        elif plain.startswith("-0b"):
            integer = parse_int("-" + plain[3:], 2)
            if integer is not None:
                return INT, integer
    return STR, text


def _parse_float(text: str) -> float | None:
    """`strconv.ParseFloat(text, 64)` of a decimal text: None where Go reports a range error (±Inf)."""
    number = float(text)
    return None if math.isinf(number) else number


_DIGITS = {c: i for i, c in enumerate("0123456789abcdefghijklmnopqrstuvwxyz")}


def parse_uint(text: str, base: int) -> int | None:
    """Go's `strconv.ParseUint(text, base, 64)`, with base 0 meaning "from the prefix": `0x`/`0X` hex,
    `0o`/`0O` and a bare leading `0` octal, `0b`/`0B` binary. No sign, no underscores (they were
    removed). None where Go fails (syntax or range)."""
    if not text:
        return None
    if base == 0:
        base = 10
        if text[0] == "0":
            prefix = text[1:2].lower()
            if len(text) >= 3 and prefix in ("b", "o", "x"):
                base, text = {"b": 2, "o": 8, "x": 16}[prefix], text[2:]
            else:
                base, text = 8, text[1:]
    value = 0
    for char in text:
        digit = _DIGITS.get(char.lower(), 99)
        if digit >= base:
            return None
        value = value * base + digit
    return value if value <= _UINT64_MAX else None


def parse_int(text: str, base: int) -> int | None:
    """Go's `strconv.ParseInt(text, base, 64)`: an optional sign, then as `parse_uint`."""
    if not text:
        return None
    sign = -1 if text[0] == "-" else 1
    magnitude = parse_uint(text[1:] if text[0] in "+-" else text, base)
    if magnitude is None:
        return None
    value = sign * magnitude
    return value if _INT64_MIN <= value <= _INT64_MAX else None


_TIMESTAMP = re.compile(
    r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})"
    r"(?:(?P<sep>[Tt]| +)(?P<h>[0-9]{1,2}):(?P<mi>[0-9]{1,2}):(?P<s>[0-9]{1,2})(?:[.,][0-9]+)?"
    r"(?P<tz>Z|[-+][0-9]{2}:[0-9]{2})?)?"
)


def is_timestamp(text: str) -> bool:
    """go-yaml v2 resolve.go `parseTimestamp`: `time.Parse` with one of `2006-1-2T15:4:5.999999999Z07:00`
    (also with a lower-case `t`), `2006-1-2 15:4:5.999999999` (spaces: any run, no zone) or `2006-1-2`,
    with Go's range checks (month, day of that month, hour, minute, second, zone offset)."""
    found = _TIMESTAMP.fullmatch(text)
    if found is None:
        return False
    sep, zone = found["sep"], found["tz"]
    if sep is not None and (sep in "Tt") != (zone is not None):
        return False
    year, month, day = int(found["y"]), int(found["mo"]), int(found["d"])
    if not 1 <= month <= 12 or not 1 <= day <= _days_in(month, year):
        return False
    if sep is not None and (int(found["h"]) > 23 or int(found["mi"]) > 59 or int(found["s"]) > 59):
        return False
    return zone is None or zone == "Z" or (int(zone[1:3]) <= 24 and int(zone[4:6]) <= 60)


def _days_in(month: int, year: int) -> int:
    if month == 2:
        return 29 if year % 4 == 0 and (year % 100 != 0 or year % 400 == 0) else 28
    return 30 if month in (4, 6, 9, 11) else 31


def decode_binary(text: str) -> str:
    """A `!!binary` scalar's text as go-yaml v2 decodes it (`base64.StdEncoding.DecodeString`, which
    skips line breaks), as the string `encoding/json` then writes (invalid UTF-8 → U+FFFD per byte)."""
    try:
        data = binascii.a2b_base64(text.replace("\r", "").replace("\n", "").encode("ascii"), strict_mode=True)
    except (binascii.Error, UnicodeEncodeError):
        raise GoYamlError("!!binary value contains invalid base64 data") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return _go_text(data)


def _go_text(data: bytes) -> str:
    """Bytes as Go's `encoding/json` writes them: each byte that starts no valid UTF-8 sequence → U+FFFD."""
    out: list[str] = []
    index = 0
    while index < len(data):
        for size in (1, 2, 3, 4):
            try:
                out.append(data[index : index + size].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            index += size
            break
        else:
            out.append("\ufffd")
            index += 1
    return "".join(out)


def json_value(value: GoValue) -> Any:
    """A decoded scalar as the API server reads it from kubectl's JSON: `json.loads` of Go's
    `json.Marshal`. A float without a fraction below 1e21 is written without a decimal point (`10`,
    an integer to the server); NaN and ±Inf cannot be written ("json: unsupported value")."""
    if isinstance(value, Uint):
        return value.value
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            shown = "NaN" if math.isnan(value) else ("+Inf" if value > 0 else "-Inf")
            raise GoYamlError(f"json: unsupported value: {shown}")
        if value.is_integer() and abs(value) < 1e21:
            # encoding/json writes strconv.AppendFloat(f, 'f', -1, 64): the shortest digits that read
            # back as f, as Python's repr has them, padded with zeros (2**60 → 1152921504606847000).
            return int(Decimal(repr(value)))
    return value


def key_text(value: GoValue) -> str:
    """A decoded scalar mapping key as sigs.k8s.io/yaml makes it a JSON key (`convertToJSONableObject`)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return format_float32(value)
    raise GoYamlError(f"unsupported map key of type: {'uint64' if isinstance(value, Uint) else '<nil>'}")


def format_float32(value: float) -> str:
    """`strconv.FormatFloat(value, 'g', -1, 32)` with sigs.k8s.io/yaml's names for the specials
    (`.inf`, `-.inf`, `.nan`): the shortest digits that read back as the same float32, in %e form
    when the exponent is below -4 or at least 6 (`1e+06`, `1e-05`, `123456`, `0.0001`)."""
    if math.isnan(value):
        return ".nan"
    try:
        single = struct.unpack("<f", struct.pack("<f", value))[0]
    except OverflowError:
        single = math.copysign(math.inf, value)
    if math.isinf(single):
        return ".inf" if single > 0 else "-.inf"
    sign = "-" if math.copysign(1.0, single) < 0 else ""
    single = abs(single)
    if single == 0:
        return sign + "0"
    digits, point = _shortest_float32(single)
    exponent = point - 1
    if exponent < -4 or exponent >= 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if exponent < 0 else '+'}{abs(exponent):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def _shortest_float32(value: float) -> tuple[str, int]:
    """The shortest decimal digits that read back as the float32 `value` (> 0), the closest of them
    to it, and the decimal point's position (value = 0.DIGITS * 10**point), as Go's Ryu finds them."""
    bits = struct.unpack("<I", struct.pack("<f", value))[0]
    exact = Fraction(value)
    below = Fraction(struct.unpack("<f", struct.pack("<I", bits - 1))[0]) if bits > 0 else Fraction(0)
    above_bits = bits + 1
    above = (
        Fraction(struct.unpack("<f", struct.pack("<I", above_bits))[0])
        if above_bits < 0x7F800000
        else exact + (exact - below)
    )
    low, high = (exact + below) / 2, (exact + above) / 2
    inclusive = bits % 2 == 0  # round-half-even: a tie goes to the even mantissa
    exact_decimal = Decimal(value)
    for precision in range(1, 10):
        with localcontext() as context:
            context.prec = precision
            context.rounding = ROUND_FLOOR
            down = +exact_decimal
            context.rounding = ROUND_CEILING
            up = +exact_decimal
        fits = [c for c in dict.fromkeys((down, up)) if _within(Fraction(c), low, high, inclusive)]
        if fits:
            best = min(fits, key=lambda c: (abs(Fraction(c) - exact), int(c.as_tuple().digits[-1]) % 2))
            _, digit_tuple, exponent = best.normalize().as_tuple()
            digits = "".join(map(str, digit_tuple))
            return digits, len(digits) + int(exponent)
    raise AssertionError(f"no float32 digits for {value!r}")  # nine digits always suffice


def _within(candidate: Fraction, low: Fraction, high: Fraction, inclusive: bool) -> bool:
    return low <= candidate <= high if inclusive else low < candidate < high
