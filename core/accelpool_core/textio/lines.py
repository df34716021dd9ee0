"""Bounded text for error lines and tables: `brief` shows a value, `one_line` bounds and sanitises a
line built from input, `format_table` aligns columns.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

VALUE_CHARS = 80
"""The most characters of an offending value an error line shows."""
LINE_CHARS = 400
"""The most characters of any one line built from input."""


def brief(value: Any, limit: int = VALUE_CHARS) -> str:
    """`value` as JSON, cut at `limit` characters with '…'; reads no more of `value` than it shows."""
    out: list[str] = []
    size = 0
    for token in _tokens(value):
        out.append(token)
        size += len(token)
        if size > limit:
            return "".join(out)[: limit - 1] + "…"
    return "".join(out)


def _tokens(value: Any) -> Iterator[str]:
    if isinstance(value, Mapping):
        yield "{"
        for i, (key, item) in enumerate(value.items()):
            yield (", " if i else "") + _scalar(str(key)) + ": "
            yield from _tokens(item)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ", "
            yield from _tokens(item)
        yield "]"
    else:
        yield _scalar(value)


def _scalar(value: Any) -> str:
    if isinstance(value, str):
        return json.dumps(value[: LINE_CHARS + 1], ensure_ascii=False)
    if value is None or isinstance(value, bool | float):
        return json.dumps(value)
    if isinstance(value, int):
        return str(value) if value.bit_length() < 1000 else "(a very large number)"
    return json.dumps(str(value)[: LINE_CHARS + 1], ensure_ascii=False)


def size_text(size: int) -> str:
    """A byte count as a limit is named: `2 GiB`, `8 MiB`, else `5000 bytes`."""
    for unit, factor in (("GiB", 2**30), ("MiB", 2**20)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} bytes"


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line: line breaks and control characters escaped, cut at `limit` characters."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
