"""`spec.health`: how members are checked, what happens to a node that fails, and the durations it is written in.

Pure: no I/O.
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import Field

from accelpool.api.rules import Model, Rule, RuledModel

DURATION_PATTERN = r"^([0-9]{1,5}(\.[0-9]{1,9})?(ms|s|m|h)){1,4}$"
"""15m, 1h30m, 90s. At most 4 parts of at most 5 digits: even 4 x 99999h stays within what CEL's
duration() (Go's time.ParseDuration, int64 nanoseconds: about 2,562,047h) can parse, so the CRD's
duration rules never fail to evaluate (a rule that errors rejects the object with the error's text)."""
PERCENT_PATTERN = r"^(100|[1-9]?[0-9])%$"
MAX_DURATION_LENGTH = 32
"""Durations are short strings; the bound also keeps the API server's CEL cost estimate small."""
MIN_INTERVAL = "1m"
MAX_INTERVAL = "168h"
MAX_HOLD_DOWN = "168h"


class MatmulPolicy(Model):
    """The matmul throughput check's pass mark."""

    dtype: Literal["fp32", "tf32", "fp16", "bf16"] = Field("bf16", description="Data type of the matmul check.")
    min_efficiency: float = Field(
        0.6, ge=0, le=1, description="Fail a GPU below this fraction of the catalog's dense peak."
    )


class HealthSpec(RuledModel):
    """How members are checked and what happens to a node that fails."""

    interval: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "15m",
        description=(
            f"Time between full check cycles on a node (telemetry is continuous), "
            f"from {MIN_INTERVAL} to {MAX_INTERVAL}."
        ),
    )
    matmul: MatmulPolicy = Field(default_factory=MatmulPolicy)
    remediation: Literal["taint", "cordon", "none"] = Field(
        "taint", description="What happens to a node whose AcceleratorHealthy turns False."
    )
    max_unavailable: int | str = Field(
        "50%",
        description="Circuit breaker: never quarantine more than this many (or this % of) member nodes.",
        json_schema_extra={"x-kubernetes-int-or-string": True},
    )
    hold_down: Annotated[str, Field(pattern=DURATION_PATTERN, max_length=MAX_DURATION_LENGTH)] = Field(
        "10m",
        description=(
            f"How long a quarantined node must be healthy again before it is released, at most {MAX_HOLD_DOWN}."
        ),
    )
    burn_in: bool | None = Field(
        None,
        description=(
            "Burn-in gate: a node joining the pool (claimed, or provisioned by Karpenter) carries the taint "
            "accelpool.io/burn-in=pending:NoSchedule until its agent reports a completed full check cycle with "
            "AcceleratorHealthy True; a node that fails it keeps accelpool.io/burn-in=failed until it has been "
            "healthy for two check intervals. Members at the time it is turned on are not tainted; turning it off "
            "lifts the taint. No effect where the agent cannot verify the pool's devices. Unset: on for static "
            "pools, off for Karpenter pools, where it is a NodePool startup taint and turning it on or off is "
            "NodePool drift (Karpenter replaces the pool's existing nodes)."
        ),
    )

    rules = (
        Rule(
            f"type(self.maxUnavailable) == string ? self.maxUnavailable.matches('{PERCENT_PATTERN}')"
            " : self.maxUnavailable >= 0",
            lambda h: (
                re.fullmatch(PERCENT_PATTERN, h["maxUnavailable"]) is not None
                if isinstance(h["maxUnavailable"], str)
                else h["maxUnavailable"] >= 0
            ),
            "maxUnavailable must be a number >= 0 or a percentage like '50%'",
            field="maxUnavailable",
        ),
        Rule(
            # The pattern guard keeps the rule from erroring on a malformed duration, which the
            # schema's pattern reports (a rule that errors rejects with a second, noisier message).
            f"!self.interval.matches('{DURATION_PATTERN}')"
            f" || (duration(self.interval) >= duration('{MIN_INTERVAL}')"
            f" && duration(self.interval) <= duration('{MAX_INTERVAL}'))",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["interval"])
                or _duration_within(h["interval"], parse_duration(MIN_INTERVAL), parse_duration(MAX_INTERVAL))
            ),
            f"interval must be between {MIN_INTERVAL} and {MAX_INTERVAL} (a full check cycle runs compute checks "
            "on every GPU; telemetry and XIDs are watched continuously in between)",
            field="interval",
        ),
        Rule(
            f"!self.holdDown.matches('{DURATION_PATTERN}') || duration(self.holdDown) <= duration('{MAX_HOLD_DOWN}')",
            lambda h: (
                not re.fullmatch(DURATION_PATTERN, h["holdDown"])
                or _duration_within(h["holdDown"], 0.0, parse_duration(MAX_HOLD_DOWN))
            ),
            f"holdDown must be at most {MAX_HOLD_DOWN}",
            field="holdDown",
        ),
    )

    @property
    def interval_seconds(self) -> float:
        return parse_duration(self.interval)

    @property
    def hold_down_seconds(self) -> float:
        return parse_duration(self.hold_down)

    def max_unavailable_nodes(self, desired: int) -> int:
        """The circuit breaker's limit for a pool of `desired` nodes (percentages round down, at least 1)."""
        if isinstance(self.max_unavailable, int):
            return self.max_unavailable
        percent = int(self.max_unavailable.rstrip("%"))
        return max(1, desired * percent // 100) if percent else 0


_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def _duration_within(text: str, low: float, high: float) -> bool:
    try:
        seconds = parse_duration(text)
    except ValueError:
        return False
    return math.isfinite(seconds) and low <= seconds <= high


def parse_duration(text: str) -> float:
    """`15m`, `1h30m`, `90s` → seconds."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"duration {text!r} is not like 15m, 1h30m or 90s")
    return sum(float(n) * _DURATION_UNITS[u] for n, u in re.findall(r"([0-9.]+)(ms|s|m|h)", text))
