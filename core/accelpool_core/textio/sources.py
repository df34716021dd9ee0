"""The sources named on a command line (`-f FILE`, a directory, '-') and the objects in them.

`read_objects` is the one reader of the files the commands are given, `scan_objects` the same for a
Node snapshot that may be large: it hands out the items of a List as they are read. See
`accelpool_core.textio`.

Reads files and standard input; parsing is `accelpool_core.textio.safe_yaml`'s and `json_stream`'s.
"""

from __future__ import annotations

import argparse
import codecs
import io
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from accelpool_core.textio import json_stream
from accelpool_core.textio.lines import brief, one_line, size_text
from accelpool_core.textio.safe_yaml import Document, Item, SourceError, documents

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Per file of objects read whole (`read_objects`): a ComputePool file is a few KiB."""
MAX_SNAPSHOT_BYTES = 2 * 1024 * 1024 * 1024
"""Per Node snapshot read item by item (`scan_objects`): `kubectl get nodes -o json` of a 10,000-node
fleet is about 200-400 MiB (a Node with its images and managedFields is 20-40 KiB)."""
MAX_OBJECT_BYTES = 8 * 1024 * 1024
"""One object of a snapshot; etcd refuses a request over 1.5 MiB (its default --max-request-bytes)."""
_JSON_SNIFF_BYTES = 4096
"""How far kubectl looks for the `{` that makes a stream JSON (cli-runtime visitor.go: 4096)."""
_SPOOL_BYTES = 8 * 1024 * 1024
"""Standard input is copied to a file past this size, so that it can be read again (JSON, then YAML)."""


def add_filename_argument(parser: argparse.ArgumentParser) -> None:
    """`-f/--filename FILE`, repeatable, read by `read_objects`."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="ComputePool YAML or JSON (one or many documents): a file, a directory of *.yaml, or '-' for "
        f"standard input; repeatable; at most {MAX_SOURCE_BYTES // 2**20} MiB a file",
    )
    parser.add_argument(
        "-R",
        "--recursive",
        action="store_true",
        help="read the directories given to -f and every directory below them (as kubectl's -R); "
        "without it, only the files directly in a directory",
    )


@dataclass(frozen=True)
class SourceObject:
    """One object read from a source: a document of the stream, or one item of a `...List` document."""

    source: str
    document: int
    """1-based position of the document in its stream."""
    line: int
    """1-based line where the object starts."""
    body: Any
    item: int | None = None
    """Position in the List's `items`, when the object came from one."""

    @property
    def place(self) -> str:
        """`FILE:LINE: document N` (`, items[I]`): where the object is, for error lines."""
        item = f", items[{self.item}]" if self.item is not None else ""
        return f"{self.source}:{self.line}: document {self.document}{item}"

    @property
    def label(self) -> str:
        """`Kind/name`, with `?` for what the object does not say (or says in the wrong shape)."""
        body = self.body if isinstance(self.body, Mapping) else {}
        kind = body.get("kind")
        metadata = body.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        return f"{kind if isinstance(kind, str) else '?'}/{name if isinstance(name, str) else '?'}"

    def problem(self, path: str, message: str, value: Any = None) -> str:
        """One error line for a problem at a field `path` of this object."""
        shown = f" (value: {brief(value)})" if value is not None else ""
        return one_line(f"{self.place} ({self.label}): {path}: {message}{shown}")


@dataclass
class Objects:
    """What `read_objects` found: the objects, and one line for each source or document it could not read."""

    objects: list[SourceObject] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def read_objects(names: Sequence[str], *, recursive: bool = False) -> Objects:
    """Every object in the named sources (files, directories, '-'), each document read whole.

    A directory gives its `*.yaml` and `*.yml` files; `recursive` (kubectl's `-R`) those of every
    directory below it too, in path order."""
    found = Objects()
    for name in names:
        for result in _scan(name, MAX_SOURCE_BYTES, stream=False, recursive=recursive):
            if isinstance(result, SourceObject):
                found.objects.append(result)
            else:
                found.errors.append(result)
    return found


def scan_objects(name: str, limit: int | None = None) -> Iterator[SourceObject | str]:
    """The objects in a source, as `read_objects` finds them, and an error line for each problem; the
    items of a List are handed out as they are read, so memory goes with the largest item.

    A document with a top-level `items` list whose `kind` turns out not to end in "List" is an error
    (its items were handed out before its `kind` was read: kubectl writes `items` first).
    """
    return _scan(name, MAX_SNAPSHOT_BYTES if limit is None else limit, stream=True)


def _scan(name: str, limit: int, stream: bool, recursive: bool = False) -> Iterator[SourceObject | str]:
    try:
        sources = list(_sources(name, recursive))
    except SourceError as error:
        yield str(error)
        return
    for label, opener in sources:
        try:
            with opener(limit) as file:
                yield from _objects(label, file, limit, stream)
        except SourceError as error:
            yield str(error)


Opener = Callable[[int], IO[bytes]]


def _sources(name: str, recursive: bool = False) -> list[tuple[str, Opener]]:
    if name == "-":
        return [("<stdin>", lambda limit: _spool_stdin(limit))]
    path = Path(name)
    within = "**/" if recursive else ""
    try:
        files = sorted([*path.glob(f"{within}*.yaml"), *path.glob(f"{within}*.yml")]) if path.is_dir() else [path]
    except OSError as error:
        raise SourceError(f"{name}: cannot read: {error.strerror}") from None
    return [(str(f), _file_opener(f)) for f in files]


def _file_opener(path: Path) -> Opener:
    def open_file(limit: int) -> IO[bytes]:
        try:
            file = path.open("rb")
            if os.fstat(file.fileno()).st_size > limit:
                file.close()
                raise SourceError(one_line(f"{path}: larger than {size_text(limit)}, the limit for one input"))
            if not file.seekable():
                spooled = _spool(file, str(path), limit)
                file.close()
                return spooled
        except OSError as error:
            raise SourceError(one_line(f"{path}: cannot read: {error.strerror}")) from None
        return file

    return open_file


def _spool_stdin(limit: int) -> IO[bytes]:
    binary = getattr(sys.stdin, "buffer", None)
    if binary is None:  # a text stream put in its place
        text = sys.stdin.read(limit + 1)
        binary = io.BytesIO(text.encode("utf-8", "surrogatepass"))
    return _spool(binary, "<stdin>", limit)


def _spool(source: IO[bytes], label: str, limit: int) -> IO[bytes]:
    """A stream copied to memory, or to a temporary file past `_SPOOL_BYTES`, so it can be read twice."""
    copy = tempfile.SpooledTemporaryFile(max_size=_SPOOL_BYTES)  # noqa: SIM115 - returned open
    shutil.copyfileobj(_Limited(source, label, limit), copy)
    copy.seek(0)
    return copy


class _Limited(io.RawIOBase):
    """A byte stream that refuses to go past `limit` bytes and checks that they are UTF-8 as they pass."""

    def __init__(self, source: IO[bytes], label: str, limit: int) -> None:
        super().__init__()
        self._source, self._label, self._limit = source, label, limit
        self._decoder = codecs.getincrementaldecoder("utf-8")()
        self.offset = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        data = self._source.read(size)
        if self.offset + len(data) > self._limit:
            raise SourceError(one_line(f"{self._label}: larger than {size_text(self._limit)}, the limit for one input"))
        pending = len(self._decoder.getstate()[0])
        try:
            self._decoder.decode(data, final=not data)
        except UnicodeDecodeError as error:
            raise SourceError(
                one_line(f"{self._label}: byte {self.offset - pending + error.start}: not UTF-8 text")
            ) from None
        self.offset += len(data)
        return data

    def readinto(self, buffer: Any) -> int:
        data = self.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _objects(label: str, file: IO[bytes], limit: int, stream: bool) -> Iterator[SourceObject | str]:
    """The objects of one seekable source: JSON when it starts with `{` (and is JSON), else YAML."""
    head = file.read(_JSON_SNIFF_BYTES)
    file.seek(0)
    if head.decode("utf-8", "ignore").lstrip().startswith("{"):
        try:
            yield from _found(
                label, json_stream.documents(label, _text_reader(file, label, limit), MAX_OBJECT_BYTES, stream)
            )
            return
        except json_stream.NotJson:
            file.seek(0)
    yield from _found(label, documents(label, _Limited(file, label, limit), stream, _file_locator(file)))


def _found(label: str, parts: Iterator[Document | Item]) -> Iterator[SourceObject | str]:
    for part in parts:
        if isinstance(part, Item):
            yield SourceObject(label, part.document, part.line, part.body, part.index)
        else:
            yield from _unpacked(label, part)


def _text_reader(file: IO[bytes], label: str, limit: int) -> Callable[[int], str]:
    source = _Limited(file, label, limit)
    decoder = codecs.getincrementaldecoder("utf-8")()

    def read(size: int) -> str:
        data = source.read(size)
        return decoder.decode(data, final=not data)

    return read


def _file_locator(file: IO[bytes]) -> Callable[[int], tuple[int, int] | None]:
    def locate(offset: int) -> tuple[int, int] | None:
        try:
            file.seek(0)
            data = file.read(offset)
        except (OSError, ValueError):
            return None
        return data.count(b"\n") + 1, len(data) - (data.rfind(b"\n") + 1) + 1

    return locate


def _unpacked(label: str, document: Document) -> Iterator[SourceObject | str]:
    """A document's objects: the items of a `kind: ...List` (those not handed out already), or itself."""
    if document.body is None:
        return
    whole = SourceObject(label, document.index, document.line, document.body)
    body = document.body
    is_list = isinstance(body, Mapping) and isinstance(body.get("kind"), str) and body["kind"].endswith("List")
    if document.streamed and not is_list:
        yield whole.problem("items", "only a List has items; this document's kind is not one", body.get("kind"))
        return
    if not is_list:
        yield whole
        return
    items = body.get("items")
    if items is None:
        return
    if not isinstance(items, list):
        yield whole.problem("items", "the items of a List must be a list", items)
        return
    lines = document.item_lines
    for index, item in enumerate(items):
        yield SourceObject(label, document.index, lines[index] if index < len(lines) else document.line, item, index)
