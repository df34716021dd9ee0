"""Plain-text input and output shared by the commands: YAML sources named on the command line,
and column-aligned tables. Used by `accelpool validate`, `plan`, `catalog` and `demo`.

`read_objects` is the one reader of the YAML files the commands are given, and it treats them
as untrusted. It returns the Kubernetes objects found (a `kind: ...List` is unpacked into its
items) and, for input it cannot read, one line per problem: `FILE:LINE:COL: message` for YAML
that does not parse, `FILE:LINE: document N: field: message (value: ...)` for a document of the
wrong shape. It keeps time and memory proportional to the size of the input:

- a file (or standard input) larger than `MAX_SOURCE_BYTES` is refused before it is parsed;
- nesting deeper than `MAX_DEPTH`, counting what aliases expand to, is refused;
- an alias inside the node it refers to (`a: &a [*a]`) is refused: it has no finite expansion;
- aliases that expand to more than their share of the data are refused, with the rule that
  Kubernetes' own YAML decoder applies (sigs.k8s.io/yaml → go-yaml v3 `decode.go`,
  `allowedAliasRatio`, "document contains excessive aliasing"): up to 99% of the decoded nodes
  may come from aliases while the total stays under 400,000, falling linearly to 10% at
  4,000,000. Counted over a whole file, so many small documents cannot add up to a bomb. A
  "billion laughs" file of a few hundred bytes is refused while it is being parsed, before
  anything is expanded;
- values are read as JSON would carry them, as Kubernetes reads YAML: every mapping key is a
  string (`8: x` → `"8"`, `on: x` → `"true"`), timestamps and `!!binary` stay strings, a
  `!!set` is a mapping; `!!omap`, `!!pairs` and every non-standard tag are refused.

`brief(value)` shows a value in an error line in at most `VALUE_CHARS` characters, reading no
more of it than it shows; `one_line(text)` bounds and sanitises any line built from input.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.events import (
    AliasEvent,
    CollectionEndEvent,
    CollectionStartEvent,
    DocumentStartEvent,
    NodeEvent,
    ScalarEvent,
)
from yaml.reader import ReaderError

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml: same behaviour, slower
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]

MAX_SOURCE_BYTES = 8 * 1024 * 1024
"""Per file. `kubectl get nodes -o yaml` of about 5,000 nodes; a ComputePool file is a few KiB."""
MAX_DEPTH = 100
"""Nested mappings and lists, aliases expanded. A Node's managedFields go about 15 deep."""
VALUE_CHARS = 80
"""The most characters of an offending value an error line shows."""
LINE_CHARS = 400
"""The most characters of any one line built from input."""

_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


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


class SourceError(Exception):
    """A source that cannot be read; the message is one line and names the source."""


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
    _check_events(label, text)
    objects: list[SourceObject] = []
    loader = _Loader(text)
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
        raise SourceError(_yaml_error(label, text, error)) from None
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


# ---------------------------------------------------------------- limits, checked on the event stream


@dataclass
class _Open:
    anchor: str | None
    size: int = 1
    height: int = 1


def _check_events(label: str, text: str) -> None:
    """Refuse deep nesting, recursive aliases and alias bombs in one pass over the parser's events.

    Each node's expanded size (nodes, aliases counted as what they stand for) and height are
    known when it ends, so an alias costs O(1) and nothing is ever expanded.
    """
    anchors: dict[str, tuple[int, int]] = {}
    stack: list[_Open] = []
    decoded = aliased = 0
    try:
        for event in yaml.parse(text, Loader=_SafeLoader):
            if isinstance(event, DocumentStartEvent):
                anchors = {}
                continue
            if isinstance(event, CollectionStartEvent):
                decoded += 1
                stack.append(_Open(event.anchor))
                if len(stack) > MAX_DEPTH:
                    raise SourceError(_at(label, event, f"nested more than {MAX_DEPTH} deep"))
                continue
            if isinstance(event, CollectionEndEvent):
                done = stack.pop()
                anchor, size, height = done.anchor, done.size, done.height
            elif isinstance(event, ScalarEvent):
                decoded += 1
                anchor, size, height = event.anchor, 1, 1
            elif isinstance(event, AliasEvent):
                name = str(event.anchor)
                if any(frame.anchor == name for frame in stack):
                    raise SourceError(_at(label, event, f"alias *{name} refers to a node that contains it"))
                if name not in anchors:
                    raise SourceError(_at(label, event, f"alias *{name} refers to no anchor before it"))
                anchor, (size, height) = None, anchors[name]
                decoded += size
                aliased += size
                if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_alias_ratio(decoded):
                    raise SourceError(
                        _at(label, event, "excessive aliasing: aliases expand to most of the document (a YAML bomb?)")
                    )
                if len(stack) + height > MAX_DEPTH:
                    raise SourceError(_at(label, event, f"alias *{name} nests more than {MAX_DEPTH} deep"))
            else:
                continue
            if anchor is not None:
                anchors[anchor] = (size, height)
            if stack:
                stack[-1].size += size
                stack[-1].height = max(stack[-1].height, height + 1)
    except yaml.YAMLError as error:
        raise SourceError(_yaml_error(label, text, error)) from None


def _allowed_alias_ratio(decoded: int) -> float:
    """go-yaml v3's `allowedAliasRatio`: 0.99 up to 400k decoded nodes, falling linearly to 0.10 at 4M."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def _at(label: str, event: NodeEvent, message: str) -> str:
    mark = event.start_mark
    where = f"{mark.line + 1}:{mark.column + 1}:" if mark is not None else ""
    return one_line(f"{label}:{where} {message}")


def _yaml_error(label: str, text: str, error: yaml.YAMLError) -> str:
    if isinstance(error, ReaderError) and isinstance(error.character, str | int):
        line = text.count("\n", 0, error.position) + 1
        column = error.position - (text.rfind("\n", 0, error.position) + 1) + 1
        code = ord(error.character) if isinstance(error.character, str) else error.character
        return one_line(f"{label}:{line}:{column}: not valid YAML: character U+{code:04X}: {error.reason}")
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        context = ""
        if error.context:
            started = error.context_mark
            where = f" (line {started.line + 1}, column {started.column + 1})" if started is not None else ""
            context = f" {error.context}{where}:"
        return one_line(f"{label}:{mark.line + 1}:{mark.column + 1}: not valid YAML:{context} {error.problem}")
    return one_line(f"{label}: not valid YAML: {error}")


# ---------------------------------------------------------------- the loader: JSON-shaped values


class _Loader(_SafeLoader):
    """The safe loader, building only what JSON (and so a Kubernetes object) can hold."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)
        except yaml.YAMLError:
            raise
        except (ValueError, TypeError, OverflowError) as error:
            reason = str(error).partition("; use sys.set_int_max_str_digits")[0]
            raise ConstructorError(None, None, f"cannot read this value: {reason}", node.start_mark) from None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep)
        return {_key_text(key): value for key, value in mapping.items()}

    def construct_as_text(self, node: yaml.Node) -> Any:
        return self.construct_scalar(node)  # type: ignore[arg-type]

    def construct_set_as_mapping(self, node: yaml.Node) -> Iterator[dict[Any, Any]]:
        data: dict[Any, Any] = {}
        yield data
        data.update(self.construct_mapping(node))  # type: ignore[arg-type]

    def refuse(self, node: yaml.Node) -> Any:
        raise ConstructorError(None, None, f"the tag {node.tag} has no JSON equivalent", node.start_mark)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_as_text)
_Loader.add_constructor("tag:yaml.org,2002:binary", _Loader.construct_as_text)
_Loader.add_constructor("tag:yaml.org,2002:set", _Loader.construct_set_as_mapping)
_Loader.add_constructor("tag:yaml.org,2002:omap", _Loader.refuse)
_Loader.add_constructor("tag:yaml.org,2002:pairs", _Loader.refuse)


def _key_text(key: Any) -> str:
    """A mapping key as JSON (and Kubernetes, via sigs.k8s.io/yaml) has it: always a string."""
    if isinstance(key, str):
        return key
    try:
        return json.dumps(key)
    except (TypeError, ValueError):
        return str(key)


# ---------------------------------------------------------------- bounded text for error lines


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


def one_line(text: str, limit: int = LINE_CHARS) -> str:
    """`text` on one line: line breaks and control characters escaped, cut at `limit` characters."""
    shown = "".join(c if c.isprintable() else c.encode("unicode_escape").decode("ascii") for c in text[: limit + 1])
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


def format_table(rows: Sequence[Sequence[str]]) -> str:
    """Columns padded to their widest cell, two spaces apart, no trailing blanks."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows)
