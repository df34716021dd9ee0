"""What `accelpool demo` shows while it runs: the pool table, a legend, the hints. Pure.

On a terminal (`live_frame`) the whole view is redrawn in place once a second: the cursor goes home, each
line is written over the last frame's and cleared to its end, and whatever is below the frame is cleared
(no full-screen clear, so nothing flickers), the lines cut to the terminal's width and the hints dropped
from the bottom until the frame fits its height (80x24 shows every pool of the demo, the legend and the
first hints); rows are coloured by phase unless NO_COLOR is set. Into a pipe or a file (`plain_update`)
there are no control codes: the table is printed again only when it changes.

Called by `accelpool_demo.run.run_demo`.
"""

from __future__ import annotations

from collections.abc import Sequence

from accelpool_core.textio import format_table

HOME = "\x1b[H"
CLEAR_SCREEN = "\x1b[2J"
CLEAR_LINE_END = "\x1b[K"
CLEAR_BELOW = "\x1b[J"
RESET = "\x1b[0m"
PHASE_COLOURS = {"Ready": "\x1b[32m", "Degraded": "\x1b[33m", "Failed": "\x1b[31m"}
"""Green, yellow, red; the phases on the way to Ready (Pending, Provisioning, Configuring) in cyan."""
PENDING_COLOUR = "\x1b[36m"
PHASE_COLUMN = "PHASE"
LEGEND = (
    "MEMBERS in the pool/asked for (more while a spare replaces a quarantined member)",
    "READY members serving  QUAR members quarantined (tainted)  GPUS usable now",
)
CUT = "…"
DROPPED_FIRST = ("TFLOPS", "ACCELERATOR", "QUAR")
"""The columns a narrow terminal loses, in this order, so that PHASE and the start of WHY stay on screen."""
LAST_COLUMN_ROOM = 16
"""Characters of the last column (WHY) a narrow terminal keeps before it drops a column."""


def cut(line: str, width: int) -> str:
    """LINE in at most WIDTH characters, ending in `…` when it was longer."""
    return line if len(line) <= width else line[: max(width - 1, 0)] + CUT


def fitted(rows: Sequence[Sequence[str]], width: int) -> list[Sequence[str]]:
    """ROWS without the `DROPPED_FIRST` columns a terminal WIDTH wide has no room for."""
    kept = [list(row) for row in rows]
    for name in DROPPED_FIRST:
        before_last = len(format_table([row[:-1] for row in kept]).splitlines()[0]) if kept[0][:-1] else 0
        if before_last + 2 + LAST_COLUMN_ROOM <= width or name not in kept[0]:
            continue
        at = kept[0].index(name)
        kept = [row[:at] + row[at + 1 :] for row in kept]
    return [tuple(row) for row in kept]


def live_frame(
    rows: Sequence[Sequence[str]],
    hints: Sequence[str],
    status: str,
    *,
    width: int,
    height: int,
    colour: bool,
    first: bool = False,
) -> str:
    """One redraw of the live view for a WIDTHxHEIGHT terminal: the table (`fitted` to the width), the legend,
    as many hints as fit, and STATUS last; at most HEIGHT-1 lines, none wider than WIDTH (the cursor stays on
    the screen, so nothing scrolls). FIRST: clear the screen once before it."""
    rows = fitted(rows, width)
    table = format_table(rows).splitlines()
    fixed = [*table, "", *LEGEND, ""]
    room = max(height - 1 - len(fixed) - 1, 0)
    lines = [cut(line, width) for line in (*fixed, *list(hints)[:room], status)][: max(height - 1, 1)]
    if colour:
        phase_at = list(rows[0]).index(PHASE_COLUMN) if PHASE_COLUMN in rows[0] else None
        for index, row in enumerate(rows[1:], start=1):
            if phase_at is not None and index < len(lines):
                code = PHASE_COLOURS.get(row[phase_at], PENDING_COLOUR)
                lines[index] = f"{code}{lines[index]}{RESET}"
    body = "".join(f"{line}{CLEAR_LINE_END}\n" for line in lines)
    return (CLEAR_SCREEN if first else "") + HOME + body + CLEAR_BELOW


def plain_update(rows: Sequence[Sequence[str]], last: str | None, elapsed: float) -> tuple[str | None, str]:
    """Into a pipe: what to print now (None: the table is as last printed; the first time, the legend under
    it) and the table to remember."""
    table = format_table(rows)
    if table == last:
        return None, table
    legend = "".join(f"{line}\n" for line in LEGEND) if last is None else ""
    return f"{elapsed:.0f}s\n{table}\n{legend}", table
