"""One duration syntax for every command line's duration flags (`accelpool_core.durations`): the operator's,
the demo's and the agent's take `90s`, `15m`, `1h30m` or plain seconds alike, and refuse the rest alike."""

from __future__ import annotations

import argparse

import pytest

from accelpool.cli import build_parser as accelpool_parser
from accelpool.runtime.settings import OperatorConfig
from accelpool_agent.cli import build_parser as agent_parser
from accelpool_core.durations import duration_argument, seconds


@pytest.mark.parametrize(
    ("text", "expected"),
    [("25", 25.0), ("2.5", 2.5), ("90s", 90.0), ("15m", 900.0), ("1h30m", 5400.0), ("500ms", 0.5), (" 2m ", 120.0)],
)
def test_durations_read_as_seconds(text: str, expected: float) -> None:
    assert seconds(text) == expected


@pytest.mark.parametrize("text", ["", "m", "15 m", "2 minutes", "1d", "1h1h1h1h1h", "15M"])
def test_anything_else_is_refused_with_examples(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not like 90s, 15m, 1h30m or 2.5 \(seconds\)"):
        seconds(text)
    with pytest.raises(argparse.ArgumentTypeError, match="a positive duration such as 90s, 15m"):
        duration_argument(text)


def test_every_duration_flag_takes_the_same_syntax() -> None:
    assert accelpool_parser().parse_args(["demo", "--for", "2m"]).duration == 120.0
    agent = agent_parser().parse_args(
        ["run", "--interval", "15m", "--telemetry-interval", "2s", "--check-timeout", "90s"]
    )
    assert (agent.interval, agent.telemetry_interval, agent.check_timeout) == (900.0, 2.0, 90.0)
    assert OperatorConfig.from_env({"ACCELPOOL_RESYNC_INTERVAL": "5m"}).resync_seconds == 300.0
