"""Durations on every command line: `accelpool check --timeout 15m`, `accelpool demo --for 2m`, `accelpool run
--resync-interval 5m`, `accelpool-agent --interval 15m`. One syntax for all of them: what a ComputePool's
duration fields take (`90s`, `15m`, `1h30m`, `500ms`: at most four number-unit parts), or a plain number
of seconds (`25`, `2.5`). Pure; used by the operator's settings and commands, the demo and the agent.
"""

from __future__ import annotations

import argparse
import re

_PART = re.compile(r"([0-9]{1,5}(?:\.[0-9]{1,9})?)(ms|s|m|h)")
_WHOLE = re.compile(r"(?:[0-9]{1,5}(?:\.[0-9]{1,9})?(?:ms|s|m|h)){1,4}")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
EXAMPLES = "90s, 15m, 1h30m or 2.5 (seconds)"


def seconds(text: str) -> float:
    """`30`, `2.5`, `90s`, `5m`, `1h30m` → seconds; ValueError for anything else."""
    text = str(text).strip()
    try:
        return float(text)
    except ValueError:
        pass
    if not _WHOLE.fullmatch(text):
        raise ValueError(f"duration {text!r} is not like {EXAMPLES}")
    return sum(float(number) * _UNITS[unit] for number, unit in _PART.findall(text))


def positive_seconds(text: str, examples: str = EXAMPLES) -> float:
    """`seconds`, and positive; ValueError `invalid value 'TEXT': a positive duration such as EXAMPLES`."""
    try:
        value = seconds(text)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise ValueError(f"invalid value {text!r}: a positive duration such as {examples}")
    return value


def duration_argument(text: str) -> float:
    """An argparse `type` for a duration flag: `positive_seconds`; argparse names the flag in its error."""
    try:
        return positive_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
