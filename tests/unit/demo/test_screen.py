"""What `accelpool demo` shows while it runs (`accelpool_demo.screen`): on a terminal, a frame that fits it and is
redrawn in place, Degraded in colour, a legend for the counts; into a pipe, a plain table only when it changes."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from accelpool_demo import screen
from accelpool_demo.run import banner, pool_rows

CONTROL = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
POOLS = [
    ("a100-slices", "A100-40GB x8", "Ready", []),
    ("h100-mixed", "H100-80GB x8", "Ready", []),
    ("l4-inference", "L4", "Ready", []),
    ("llm-training", "H100-80GB x8", "Degraded", [("Healthy", "NodesQuarantined")]),
    ("mi300x-research", "MI300X x8", "Configuring", [("AgentReady", "WaitingForAgents")]),
    ("tpu-v5p", "TPU-v5p x4", "Ready", []),
    ("trainium2-pretraining", "Trainium2 x16", "Ready", []),
]


def demo_pools() -> list[dict[str, Any]]:
    """Seven of the demo's example pools, llm-training with a quarantined member and its stand-in."""
    return [
        {
            "metadata": {"name": name},
            "status": {
                "accelerator": accelerator,
                "phase": phase,
                "nodes": {"members": 3 if why else 1, "desired": 2 if why else 1, "ready": 2, "quarantined": 1},
                "capacity": {"gpus": 16, "measuredTFLOPS": 12700.0},
                "conditions": [{"type": kind, "status": "False", "reason": reason} for kind, reason in why],
            },
        }
        for name, accelerator, phase, why in POOLS
    ]


def hints() -> list[str]:
    return banner("http://127.0.0.1:18080", 18081, Path("/tmp/accelpool-demo-x")).splitlines()


def visible(frame: str) -> list[str]:
    return CONTROL.sub("", frame).splitlines()


def test_a_frame_fits_an_80x24_terminal_and_keeps_every_pool_and_its_phase() -> None:
    frame = screen.live_frame(
        pool_rows(demo_pools()), hints(), "  12s  Ctrl-C to stop", width=80, height=24, colour=True
    )
    lines = visible(frame)
    assert len(lines) <= 23, "the cursor stays on the last line: nothing scrolls"
    assert max(len(line) for line in lines) <= 80
    assert lines[0].split()[:2] == ["POOL", "MEMBERS"] and "PHASE" in lines[0] and "QUAR" in lines[0]
    assert [line.split()[0] for line in lines[1:8]] == [name for name, *_ in POOLS]
    training = lines[4].split()
    assert training[:5] == ["llm-training", "3/2", "2", "1", "16"] and "Degraded" in training
    assert any(line.startswith("MEMBERS in the pool/asked for") for line in lines), "a legend says what 3/2 means"
    assert lines[-1] == "  12s  Ctrl-C to stop"


def test_a_frame_is_drawn_over_the_last_one_not_after_a_full_clear() -> None:
    rows = pool_rows(demo_pools())
    first = screen.live_frame(rows, hints(), "1s", width=120, height=40, colour=False, first=True)
    later = screen.live_frame(rows, hints(), "2s", width=120, height=40, colour=False)
    assert first.startswith(screen.CLEAR_SCREEN + screen.HOME)
    assert later.startswith(screen.HOME) and screen.CLEAR_SCREEN not in later
    assert later.endswith(screen.CLEAR_BELOW)
    assert all(line.endswith(screen.CLEAR_LINE_END) for line in later.removeprefix(screen.HOME).splitlines()[:-1])
    assert len(visible(later)) == len(rows) + 4 + len(hints()) + 1, "a tall terminal shows every hint"


def test_degraded_is_coloured_and_ready_differs_from_it() -> None:
    frame = screen.live_frame(pool_rows(demo_pools()), [], "", width=120, height=40, colour=True)
    lines = frame.split("\n")
    degraded = next(line for line in lines if "llm-training" in line)
    ready = next(line for line in lines if "a100-slices" in line)
    assert degraded.removeprefix(screen.HOME).startswith(screen.PHASE_COLOURS["Degraded"])
    assert ready.startswith(screen.PHASE_COLOURS["Ready"])
    plain = screen.live_frame(pool_rows(demo_pools()), [], "", width=120, height=40, colour=False)
    assert "\x1b[3" not in plain


def test_into_a_pipe_the_table_is_printed_plain_and_only_when_it_changes() -> None:
    pools = demo_pools()
    printed, last = screen.plain_update(pool_rows(pools), None, 3.0)
    assert printed is not None and "\x1b" not in printed
    assert printed.splitlines()[0] == "3s" and "MEMBERS in the pool/asked for" in printed, "the legend, once"
    assert screen.plain_update(pool_rows(pools), last, 4.0) == (None, last)
    pools[3]["status"]["phase"] = "Ready"
    changed, _ = screen.plain_update(pool_rows(pools), last, 5.0)
    assert changed is not None and changed.startswith("5s\nPOOL") and "MEMBERS in the pool" not in changed
