"""Plain-text input and output shared by the commands: YAML sources named on the command line,
and column-aligned tables. Used by `accelpool validate`, `plan`, `catalog` and `demo`."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path


def add_filename_argument(parser: argparse.ArgumentParser) -> None:
    """`-f/--filename FILE`, repeatable, read by `read_sources`."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="ComputePool YAML (one or many documents): a file, a directory of *.yaml, or '-' for standard "
        "input; repeatable",
    )


def read_sources(name: str) -> list[tuple[str, str]]:
    """(label, text) of a file, of every *.yaml/*.yml in a directory, or of standard input ('-')."""
    if name == "-":
        return [("<stdin>", sys.stdin.read())]
    path = Path(name)
    files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
    return [(str(f), f.read_text()) for f in files]


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
