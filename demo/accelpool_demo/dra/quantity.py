"""Kubernetes resource quantities and semantic versions as DRA reads them: device capacities
(`81559Mi`) and version attributes (`580.126.20`). Pure.

- `parse_quantity` reads a Quantity's string form the way k8s.io/apimachinery/pkg/api/resource
  `ParseQuantity` does (quantity.go: a signed decimal number, then a binary suffix `Ki`..`Ei`, a decimal
  suffix `n`, `u`, `m`, ``, `k`, `M`, `G`, `T`, `P`, `E`, or an exponent `e3`/`E-3`), exactly, as a fraction.
- `binary_si` writes a byte count the way `resource.NewQuantity(n, resource.BinarySI)` serializes it:
  the largest binary suffix that divides it (`85520809984` → `81559Mi`), what NVIDIA's plugin publishes
  for memory (kubernetes-sigs/dra-driver-nvidia-gpu `cmd/gpu-kubelet-plugin/partitions.go` `fullGpuCapacity`).
- `parse_semver` reads a semantic version as the CEL `semver()` of Kubernetes does
  (k8s.io/apiserver/pkg/cel/library/semverlib.go, blang/semver's strict parse: `MAJOR.MINOR.PATCH`,
  optional `-prerelease` and `+build`), and `compare_semver` orders two by semver 2.0 precedence
  (build metadata ignored).

Used by `accelpool_demo.dra.cel` (the `quantity()` and `semver()` CEL functions and the device's
capacities and version attributes) and `accelpool_demo.dra.plugin` (the published memory capacity).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction

_QUANTITY = re.compile(r"^([+-]?)(\d+\.?\d*|\.\d+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?\d+)?$")
_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}


class QuantityError(ValueError):
    """Not a Kubernetes quantity; the message names the text and the accepted form."""


def parse_quantity(text: str) -> Fraction:
    """The exact value of a quantity's string form, e.g. `81559Mi` → 85520809984."""
    match = _QUANTITY.match(text.strip()) if isinstance(text, str) else None
    if match is None:
        raise QuantityError(
            f"quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    sign, number, suffix = match.groups()
    value = Fraction(number)
    if suffix in _BINARY:
        value *= 1024 ** _BINARY[suffix]
    elif suffix in _DECIMAL:
        value *= Fraction(10) ** _DECIMAL[suffix]
    elif suffix:
        value *= Fraction(10) ** int(suffix[1:])
    return -value if sign == "-" else value


def binary_si(count: int) -> str:
    """A non-negative integer as BinarySI serializes it: `81559Mi`, `1Gi`, `1` (no suffix that divides it: `1000`)."""
    if count < 0:
        raise QuantityError(f"binary_si takes a count of bytes >= 0, not {count}")
    for name, power in sorted(_BINARY.items(), key=lambda item: -item[1]):
        if count and count % (1024**power) == 0:
            return f"{count // 1024**power}{name}"
    return str(count)


_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?"
    r"(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$"
)


class SemverError(ValueError):
    """Not a semantic version; the message names the text."""


@dataclass(frozen=True)
class Semver:
    major: int
    minor: int
    patch: int
    prerelease: tuple[str, ...] = ()

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return f"{core}-{'.'.join(self.prerelease)}" if self.prerelease else core


def parse_semver(text: str) -> Semver:
    """`580.126.20` → Semver(580, 126, 20); build metadata is dropped (it takes no part in precedence)."""
    match = _SEMVER.match(text) if isinstance(text, str) else None
    if match is None:
        raise SemverError(f"Could not parse Semver string: {text!r}: expected MAJOR.MINOR.PATCH, e.g. 580.126.20")
    major, minor, patch, prerelease, _build = match.groups()
    return Semver(int(major), int(minor), int(patch), tuple(prerelease.split(".")) if prerelease else ())


def _identifier_key(identifier: str) -> tuple[int, int, str]:
    return (0, int(identifier), "") if identifier.isdigit() else (1, 0, identifier)


def compare_semver(a: Semver, b: Semver) -> int:
    """-1, 0 or 1 by semver 2.0 precedence: numbers, then a release above its pre-releases, then identifiers."""
    left, right = (a.major, a.minor, a.patch), (b.major, b.minor, b.patch)
    if left != right:
        return -1 if left < right else 1
    if a.prerelease == b.prerelease:
        return 0
    if not a.prerelease or not b.prerelease:
        return 1 if not a.prerelease else -1
    for x, y in zip(a.prerelease, b.prerelease, strict=False):
        if x != y:
            return -1 if _identifier_key(x) < _identifier_key(y) else 1
    return -1 if len(a.prerelease) < len(b.prerelease) else 1
