"""The YAML sources named on a command line (`-f FILE`, a directory, '-') and the objects in them.

`read_objects` is the one reader of the YAML files the commands are given; see `accelpool.textio`.

Reads files and standard input; parsing is `accelpool.textio.safe_yaml`'s.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from accelpool.textio.lines import brief, one_line
from accelpool.textio.safe_yaml import JsonLoader, SourceError, check_events, yaml_error

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Per file. `kubectl get nodes -o yaml` of about 5,000 nodes; a ComputePool file is a few KiB."""


def add_filename_argument(parser: argparse.ArgumentParser) -> None:
    """`-f/--filename FILE`, repeatable, read by `read_sources`."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="ComputePool YAML (one or many documents): a file, a directory of *.yaml, or '-' for standard "
        f"input; repeatable; at most {MAX_SOURCE_BYTES // 2**20} MiB a file",
    )


def read_sources(name: str) -> list[tuple[str, str]]:
    """(label, text) of a file, of every *.yaml/*.yml in a directory, or of standard input ('-').

    Raises `SourceError` for a file that cannot be read, is larger than `MAX_SOURCE_BYTES` or is
    not UTF-8.
    """
    if name == "-":
        text = sys.stdin.read(MAX_SOURCE_BYTES + 1)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_SOURCE_BYTES:
            raise SourceError(f"<stdin>: larger than {MAX_SOURCE_BYTES // 2**20} MiB, the limit for one input")
        return [("<stdin>", text)]
    path = Path(name)
    try:
        files = sorted([*path.glob("*.yaml"), *path.glob("*.yml")]) if path.is_dir() else [path]
    except OSError as error:
        raise SourceError(f"{name}: cannot read: {error.strerror}") from None
    return [(str(f), _read_file(f)) for f in files]


def _read_file(path: Path) -> str:
    try:
        with path.open("rb") as file:
            data = file.read(MAX_SOURCE_BYTES + 1)
    except OSError as error:
        raise SourceError(one_line(f"{path}: cannot read: {error.strerror}")) from None
    if len(data) > MAX_SOURCE_BYTES:
        raise SourceError(one_line(f"{path}: larger than {MAX_SOURCE_BYTES // 2**20} MiB, the limit for one input"))
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise SourceError(one_line(f"{path}: byte {error.start}: not UTF-8 text")) from None


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


def read_objects(names: Sequence[str]) -> Objects:
    """Every object in the named sources (files, directories, '-'); see the module docstring."""
    found = Objects()
    for name in names:
        try:
            sources = read_sources(name)
        except SourceError as error:
            found.errors.append(str(error))
            continue
        for label, text in sources:
            try:
                found.objects += _objects(label, text)
            except SourceError as error:
                found.errors.append(str(error))
    return found


def _objects(label: str, text: str) -> list[SourceObject]:
    check_events(label, text)
    objects: list[SourceObject] = []
    loader = JsonLoader(text)
    try:
        index = 0
        while loader.check_node():
            index += 1
            node = loader.get_node()
            if node is None:
                continue
            body = loader.construct_document(node)
            if body is None:
                continue
            objects += _unpack(SourceObject(label, index, node.start_mark.line + 1, body), node)
    except yaml.YAMLError as error:
        raise SourceError(yaml_error(label, text, error)) from None
    finally:
        loader.dispose()
    return objects


def _unpack(document: SourceObject, node: yaml.Node) -> list[SourceObject]:
    """A `kind: ...List` document → its items; any other document → itself."""
    body = document.body
    if not isinstance(body, Mapping) or not (isinstance(body.get("kind"), str) and body["kind"].endswith("List")):
        return [document]
    items = body.get("items")
    if items is None:
        return []
    if not isinstance(items, list):
        raise SourceError(document.problem("items", "the items of a List must be a list", items))
    lines = _item_lines(node)
    return [
        SourceObject(document.source, document.document, lines[i] if i < len(lines) else document.line, item, i)
        for i, item in enumerate(items)
    ]


def _item_lines(node: yaml.Node) -> list[int]:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode) and key.value == "items" and isinstance(value, yaml.SequenceNode):
                return [item.start_mark.line + 1 for item in value.value]
    return []
