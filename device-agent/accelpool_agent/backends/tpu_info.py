"""tpu-info's report, parsed: the TPU backend's second source when libtpu's SDK is not importable.

`tpu-info` (pip `tpu-info`, github.com/AI-Hypercomputer/cloud-accelerator-diagnostics, `tpu_info/`)
reads the chips from sysfs and the libtpu runtime's metrics over gRPC on localhost:8431, and prints
tables with Rich (`tpu_info/cli.py`, `tpu_info/cli_helper.py`). The formats parsed here are its
README's, Google's "Monitor with tpu-info CLI" page's, and cli_helper.py's tables:

- Box tables (`┏━┳┓`, header cells between `┃`, data cells between `│`) or Markdown-style tables
  (`| Chip | ... |` then `|------|`), each under its title line.
- `TPU Chips`: Chip (`/dev/vfio/0`; `N/A`, and a header `Chip ` with a trailing space, in the newer
  `ActualTpuChipsTable`), Type (`TPU v6e chip`), Devices, PID (`None`, `N/A`, or `12, 34`), Path.
- `TPU Runtime Utilization`: Chip or Device (the runtime's device id, not a position: the docs show
  8, 9, 12, 13), `HBM usage` / `HBM Usage (GiB)` as `18.45 GiB / 31.25 GiB` or `N/A`, Duty cycle as
  `100.00%`, `N/A`, or empty on a chip's second device (v2, v3, 7x: duty cycle is per chip).
- `TensorCore Utilization`: Chip ID or Core ID, and `13.60%` (cli_helper: the SDK's value and `%`), or
  `N/A` (the SDK raised RuntimeError, or gave no data). `TPU HBM Usage` (Chip or Device, HBM Usage) and
  `TPU Duty Cycle` (Core ID, `Duty Cycle (%)`, one row per chip) are `--metric`'s tables.
- `Libtpu version: <v>` and `Accelerator type: <t>` lines (newer releases), `No TPU chips found.`,
  and `WARNING: Libtpu metrics unavailable. Is there a framework using the TPU? ...` when the
  runtime does not answer (then every usage cell is `N/A`).

HBM is printed in GiB with two decimals, so the bytes parsed are accurate to 0.005 GiB. What Rich may
add is undone first: ANSI colours (when forced), and a cell wrapped onto a continuation line (a row whose
first cell is empty) is joined to its row; `run_tpu_info` also widens Rich's console (`COLUMNS`) so that
nothing wraps. A cell in no known format reads as no data and is named in `TpuInfoReport.problems`
(table, column, value); a known table without its column raises `TpuInfoFormatError`. A version line
saying `unknown (...)` or `N/A (...)` is no version. `run_tpu_info` is the thin shell that runs the command.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

GIB = 1 << 30
TITLES = ("TPU Chips", "TPU Runtime Utilization", "TensorCore Utilization", "TPU HBM Usage", "TPU Duty Cycle")
METRICS_UNAVAILABLE = "Libtpu metrics unavailable"
_SEPARATOR = re.compile(r"^[\s\-─━═:┃│|┏┓┗┛┡┩└┘┌┐╇╈┳┻┼╋┴┬╕╞╡]*$")
_CELL_SPLIT = re.compile(r"[│┃|]")
_HBM = re.compile(r"^(\d+(?:\.\d+)?)\s*GiB\s*/\s*(\d+(?:\.\d+)?)\s*GiB$")
_PERCENT = re.compile(r"^(\d+(?:\.\d+)?)\s*%$")
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_NO_VALUE = ("unknown", "n/a")
WIDE_CONSOLE = "250"
"""The console width tpu-info's Rich renders for (`COLUMNS`): wide enough that no table cell wraps."""


class TpuInfoFormatError(ValueError):
    """tpu-info printed a cell this parser does not know; the message names table, column and value."""


@dataclass(frozen=True)
class TpuInfoReport:
    libtpu_version: str | None
    accelerator_type: str | None
    chip_files: tuple[str, ...]
    """The `TPU Chips` table's device files, in its order."""
    chip_types: tuple[str, ...]
    """Its Type cells (`TPU v6e chip`), row by row (empty when the table has no Type column)."""
    hbm_used_bytes: tuple[int | None, ...]
    """Per row of the runtime utilization (or HBM usage) table; None for `N/A`."""
    hbm_total_bytes: tuple[int | None, ...]
    duty_cycle_pct: tuple[float | None, ...]
    tensorcore_pct: tuple[float | None, ...]
    metrics_unavailable: bool
    """tpu-info warned that the libtpu runtime's metrics are unavailable (no framework using the TPU)."""
    no_chips: bool
    problems: tuple[str, ...] = ()
    """Cells in no known format (read as no data): the table, the column and the value of each."""


def _tables(text: str) -> dict[str, list[list[str]]]:
    """Title → rows of cells (the header row first), separators dropped."""
    tables: dict[str, list[list[str]]] = {}
    current: list[list[str]] | None = None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped in TITLES:
            current = tables.setdefault(stripped, [])
            continue
        if current is None or not stripped or _SEPARATOR.match(stripped):
            continue
        if stripped[0] in "│┃|":
            cells = [cell.strip() for cell in _CELL_SPLIT.split(stripped)[1:-1]]
            if current and cells and not cells[0] and any(cells):
                current[-1] = _joined(current[-1], cells)  # Rich wrapped the row's cells onto this line
            else:
                current.append(cells)
        else:
            current = None
    return tables


def _joined(row: list[str], continuation: list[str]) -> list[str]:
    extra = continuation + [""] * (len(row) - len(continuation))
    return [f"{cell} {more}".strip() if more else cell for cell, more in zip(row, extra, strict=False)]


def _column(rows: list[list[str]], table: str, *names: str) -> list[str]:
    """The cells of the first column whose header starts with one of `names` (case-insensitive)."""
    if not rows:
        return []
    header = [cell.lower() for cell in rows[0]]
    for position, cell in enumerate(header):
        if any(cell.startswith(name.lower()) for name in names):
            return [row[position] if position < len(row) else "" for row in rows[1:]]
    raise TpuInfoFormatError(f"tpu-info table {table!r}: no column {' or '.join(names)} in header {rows[0]}")


def _has_column(rows: list[list[str]], name: str) -> bool:
    return bool(rows) and any(cell.lower().startswith(name.lower()) for cell in rows[0])


def _hbm(cell: str, table: str, problems: list[str]) -> tuple[int | None, int | None]:
    if cell in ("N/A", ""):
        return None, None
    match = _HBM.match(cell)
    if not match:
        problems.append(f"tpu-info table {table!r}, HBM usage: {cell!r} is not '<used> GiB / <total> GiB' or N/A")
        return None, None
    return round(float(match.group(1)) * GIB), round(float(match.group(2)) * GIB)


def _percent(cell: str, table: str, column: str, problems: list[str]) -> float | None:
    if cell in ("N/A", ""):
        return None
    match = _PERCENT.match(cell)
    if not match:
        problems.append(f"tpu-info table {table!r}, {column}: {cell!r} is not '<number>%' or N/A")
        return None
    return float(match.group(1))


def _line_value(text: str, prefix: str) -> str | None:
    for line in text.splitlines():
        if line.strip().lower().startswith(prefix.lower()):
            value = line.split(":", 1)[1].strip()
            return value if value and not value.lower().startswith(_NO_VALUE) else None
    return None


def parse_tpu_info(text: str) -> TpuInfoReport:
    """tpu-info's static output (see the module's docstring for the formats)."""
    text = _ANSI.sub("", text)
    problems: list[str] = []
    tables = _tables(text)
    chips = tables.get("TPU Chips", [])
    usage_title = "TPU Runtime Utilization" if "TPU Runtime Utilization" in tables else "TPU HBM Usage"
    usage = tables.get(usage_title, [])
    hbm = [_hbm(cell, usage_title, problems) for cell in _column(usage, usage_title, "HBM usage")]
    duty_title = usage_title if usage_title == "TPU Runtime Utilization" else "TPU Duty Cycle"
    duty_rows = tables.get(duty_title, [])
    duty = [_percent(cell, duty_title, "Duty cycle", problems) for cell in _column(duty_rows, duty_title, "Duty cycle")]
    cores = tables.get("TensorCore Utilization", [])
    tensorcore = [
        _percent(cell, "TensorCore Utilization", "TensorCore Utilization", problems)
        for cell in _column(cores, "TensorCore Utilization", "TensorCore Utilization")
    ]
    return TpuInfoReport(
        libtpu_version=_line_value(text, "Libtpu version:"),
        accelerator_type=_line_value(text, "Accelerator type:"),
        chip_files=tuple(_column(chips, "TPU Chips", "Chip")),
        chip_types=tuple(_column(chips, "TPU Chips", "Type")) if _has_column(chips, "Type") else (),
        hbm_used_bytes=tuple(used for used, _ in hbm),
        hbm_total_bytes=tuple(total for _, total in hbm),
        duty_cycle_pct=tuple(duty),
        tensorcore_pct=tuple(tensorcore),
        metrics_unavailable=METRICS_UNAVAILABLE in text,
        no_chips="No TPU chips found." in text,
        problems=tuple(problems),
    )


def run_tpu_info(command: Sequence[str] = ("tpu-info",), timeout_seconds: float = 20.0) -> str:
    """tpu-info's standard output and error (bytes that are not UTF-8 replaced), its Rich console wide
    enough that no cell wraps; raises OSError or subprocess errors when it cannot run."""
    completed = subprocess.run(
        list(command),
        capture_output=True,
        text=True,
        errors="replace",
        timeout=timeout_seconds,
        check=True,
        env={**os.environ, "COLUMNS": WIDE_CONSOLE},
    )
    return completed.stdout + completed.stderr
