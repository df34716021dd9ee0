"""A JSON stream (`kubectl get ... -o json`) → its documents, read in chunks, as kubectl reads it.

kubectl reads a stream that starts with `{` as JSON, with Go's `encoding/json` (k8s.io/apimachinery
pkg/util/yaml/decoder.go `YAMLOrJSONDecoder`, `GuessJSONStream`): one value after another, each
one document, sent as it is written. Python's `json` reads those values as the API server does
(k8s.io/apimachinery pkg/util/json: integers as integers, other numbers as floats). When the
first value is not JSON, kubectl reads the whole stream as YAML instead: `NotJson` says so here.

`documents` parses the stream a chunk at a time; the items of a top-level object's `items` list
can come out one by one as they are parsed (see `accelpool_core.textio.safe_yaml`), so a
snapshot of many Nodes needs the memory of the largest one. Line numbers are counted as it goes.

Pure: no I/O beyond the `read` function it is given.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator, Iterator
from typing import Any, NoReturn

from accelpool_core.textio.lines import one_line, size_text
from accelpool_core.textio.safe_yaml import MAX_DEPTH, Document, Item, SourceError

CHUNK_CHARS = 1 << 20
_SPACE = re.compile(r"[ \t\n\r]*")


class NotJson(Exception):
    """The stream's first value is not JSON, and nothing of it was handed out: read it as YAML."""


class _OutOfRange(Exception):
    """A number JSON can write but the API server cannot read (beyond float64)."""


def _parse_float(text: str) -> float:
    number = float(text)
    if math.isinf(number):
        raise _OutOfRange(text)
    return number


class _Constant(Exception):
    """NaN or Infinity, which Python's json reads and Go's does not."""


def _no_constant(name: str) -> Any:
    raise _Constant(name)


_DECODER = json.JSONDecoder(parse_float=_parse_float, parse_constant=_no_constant)


class _Text:
    """Text read in chunks, consumed from the front, with the line and column of any position ahead."""

    def __init__(self, read: Callable[[int], str]) -> None:
        self._read = read
        self.buf = ""
        self.pos = 0
        self.eof = False
        self._counted = 0
        self._line = 1
        self._line_start = 0

    def fill(self) -> None:
        if self.pos > CHUNK_CHARS:
            self.where(self.pos)
            self.buf = self.buf[self.pos :]
            self._counted -= self.pos
            self._line_start -= self.pos
            self.pos = 0
        chunk = self._read(CHUNK_CHARS)
        if chunk:
            self.buf += chunk
        else:
            self.eof = True

    def where(self, index: int) -> tuple[int, int]:
        """(line, column), 1-based, of `index` in `buf`; `index` never goes back."""
        if index > self._counted:
            newlines = self.buf.count("\n", self._counted, index)
            if newlines:
                self._line += newlines
                self._line_start = self.buf.rfind("\n", self._counted, index) + 1
            self._counted = index
        return self._line, index - self._line_start + 1

    def skip_space(self) -> str:
        """Skip blanks; the next character, or '' at the end."""
        while True:
            found = _SPACE.match(self.buf, self.pos)
            self.pos = found.end() if found else self.pos
            if self.pos < len(self.buf):
                return self.buf[self.pos]
            if self.eof:
                return ""
            self.fill()

    def value(self, limit: int, label: str) -> Any:
        """The JSON value at `pos` (blanks skipped already)."""
        start = self.pos
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as error:
                if self.eof:
                    line, column = self.where(error.pos)
                    raise _Invalid(line, column, error.msg) from None
                if len(self.buf) - start > limit:
                    self._too_large(start, limit, label)
                self.fill()
                start = self.pos
                continue
            except _Constant as error:
                line, column = self.where(start)
                raise _Invalid(line, column, f"{error} is not a JSON value") from None
            except RecursionError:
                line, column = self.where(start)
                raise SourceError(one_line(f"{label}:{line}:{column}: nested more than {MAX_DEPTH} deep")) from None
            except _OutOfRange as error:
                line, column = self.where(start)
                raise SourceError(
                    one_line(
                        f"{label}:{line}:{column}: the number {error} is beyond what the API server reads (float64)"
                    )
                ) from None
            if end == len(self.buf) and not self.eof:  # a number may go on in the next chunk
                self.fill()
                start = self.pos
                continue
            if end - start > limit:
                self._too_large(start, limit, label)
            self.pos = end
            return value

    def _too_large(self, start: int, limit: int, label: str) -> NoReturn:
        line, column = self.where(start)
        raise SourceError(one_line(f"{label}:{line}:{column}: a JSON value larger than {size_text(limit)}"))


class _Invalid(Exception):
    def __init__(self, line: int, column: int, message: str) -> None:
        super().__init__(message)
        self.line, self.column, self.message = line, column, message


def documents(
    label: str, read: Callable[[int], str], limit: int, stream_items: bool = False
) -> Iterator[Document | Item]:
    """Each value of a JSON stream as a document; `limit` bounds one value (one item, when streamed).
    With `stream_items`, as `accelpool_core.textio.safe_yaml.documents`.

    Raises `NotJson` when the first value does not parse and no item came out, `SourceError` for
    any other problem.
    """
    text = _Text(read)
    index = 0
    handed = 0
    while True:
        first = text.skip_space()
        if not first:
            return
        index += 1
        line, _ = text.where(text.pos)
        try:
            if first == "{":
                parts = _object(text, label, limit, index, stream_items)
                while True:
                    try:
                        item = next(parts)
                    except StopIteration as done:
                        body, streamed, lines = done.value
                        break
                    handed += 1
                    yield item
            else:
                body, streamed, lines = text.value(limit, label), 0, []
        except _Invalid as error:
            if index == 1 and handed == 0:
                raise NotJson(error.message) from None
            raise SourceError(
                one_line(f"{label}:{error.line}:{error.column}: not valid JSON: {error.message}")
            ) from None
        _check_depth(label, line, body, 0)
        yield Document(index, line, body, streamed, tuple(lines))


def _object(
    text: _Text, label: str, limit: int, document: int, stream_items: bool
) -> Generator[Item, None, tuple[dict[str, Any], int, list[int]]]:
    """A top-level object, read key by key, and its `items` list item by item: handed out when it may
    be a List's, else kept with the line of each. Returns the object, the count handed out, the lines."""
    body: dict[str, Any] = {}
    streamed = 0
    lines: list[int] = []
    text.pos += 1  # {
    if text.skip_space() == "}":
        text.pos += 1
        return body, 0, lines
    while True:
        if text.skip_space() != '"':
            _invalid(text, "Expecting property name enclosed in double quotes")
        key = text.value(limit, label)
        if text.skip_space() != ":":
            _invalid(text, "Expecting ':' delimiter")
        text.pos += 1
        kind = body.get("kind")
        if key == "items" and text.skip_space() == "[":
            items = _items(text, label, limit, document)
            if stream_items and (kind is None or (isinstance(kind, str) and kind.endswith("List"))):
                for item in items:
                    streamed += 1
                    yield item
                body[key], lines = [], []
            else:
                kept = list(items)
                body[key], lines = [item.body for item in kept], [item.line for item in kept]
        else:
            text.skip_space()
            body[key] = text.value(limit, label)
        after = text.skip_space()
        text.pos += 1
        if after == "}":
            return body, streamed, lines
        if after != ",":
            text.pos -= 1
            _invalid(text, "Expecting ',' delimiter")


def _items(text: _Text, label: str, limit: int, document: int) -> Iterator[Item]:
    text.pos += 1  # [
    count = 0
    if text.skip_space() == "]":
        text.pos += 1
        return
    while True:
        line, _ = text.where(text.pos)
        item = text.value(limit, label)
        _check_depth(label, line, item, 2)
        yield Item(document, line, count, item)
        count += 1
        after = text.skip_space()
        text.pos += 1
        if after == "]":
            return
        if after != ",":
            text.pos -= 1
            _invalid(text, "Expecting ',' delimiter")
        text.skip_space()


def _invalid(text: _Text, message: str) -> None:
    line, column = text.where(text.pos)
    raise _Invalid(line, column, message)


def _check_depth(label: str, line: int, value: Any, depth: int) -> None:
    """Refuse nesting deeper than `MAX_DEPTH` (`depth`: how many collections hold `value`), as for YAML."""
    if isinstance(value, dict | list) and not _within(value, MAX_DEPTH - depth - 1):
        raise SourceError(one_line(f"{label}:{line}: nested more than {MAX_DEPTH} deep"))


def _within(value: Any, room: int) -> bool:
    """Whether the collections inside `value` go at most `room` deeper."""
    for child in value.values() if type(value) is dict else value:
        kind = type(child)
        if (kind is dict or kind is list) and (room <= 0 or not _within(child, room - 1)):
            return False
    return True
