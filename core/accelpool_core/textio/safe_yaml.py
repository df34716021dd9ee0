"""Untrusted YAML → JSON-shaped values as kubectl sends them, within bounds of time and memory.

`documents` builds each document of a YAML stream straight from the parser's events (libyaml,
through PyYAML), in one pass and without PyYAML's node tree: it refuses deep nesting, recursive
aliases and alias bombs as it goes, resolves every scalar as go-yaml v2 does and makes the result
what sigs.k8s.io/yaml turns it into (`accelpool_core.textio.goyaml`), merges `<<` keys as go-yaml v2
does, and, when asked, hands the items of a document's top-level `items` list out one at a time
instead of keeping them, so that a snapshot of thousands of Nodes needs the memory of one.
`yaml_error` words PyYAML's errors as `FILE:LINE:COL: message`. The rules are in
`accelpool_core.textio`'s docstring.

Pure: no I/O (the parser reads the stream it is given).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, NoReturn, cast

import yaml
from yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    Event,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
)
from yaml.reader import ReaderError

from accelpool_core.textio import goyaml
from accelpool_core.textio.lines import one_line

try:
    from yaml import CSafeLoader as _SafeLoader
except ImportError:  # PyYAML built without libyaml: same behaviour, slower
    from yaml import SafeLoader as _SafeLoader  # type: ignore[assignment]


MAX_DEPTH = 100
"""Nested mappings and lists, aliases expanded. A Node's managedFields go about 15 deep."""

_ALIAS_RATIO_LOW = 400_000
_ALIAS_RATIO_HIGH = 4_000_000


class SourceError(Exception):
    """A source that cannot be read; the message is one line and names the source."""


@dataclass(frozen=True)
class Document:
    """One document of a stream: its 1-based position, the line it starts on, and its value.

    `streamed` counts the items of its top-level `items` list that were handed out as they were
    read (and are then not in `body["items"]`, which is empty)."""

    index: int
    line: int
    body: Any
    streamed: int = 0
    item_lines: tuple[int, ...] = ()
    """The line of each item of its top-level `items` list (those kept in `body`)."""


@dataclass(frozen=True)
class Item:
    """One item of a document's top-level `items` list, handed out as soon as it is read."""

    document: int
    line: int
    index: int
    body: Any


_KEY = object()
"""A mapping frame's marker for "the next scalar is a key"."""
_MERGE = object()
"""The pending key of a `<<` merge."""


@dataclass
class _Frame:
    """A collection being built: its value so far, and its expanded size and height (aliases counted as
    what they stand for), known when it ends, so an alias costs O(1) and nothing is ever expanded."""

    value: dict[str, Any] | list[Any]
    anchor: str | None
    line: int
    key: Any = _KEY
    """For a mapping: `_KEY` before a key, else the pending key (a str, or `_MERGE`); None for a list."""
    size: int = 1
    height: int = 1
    items: bool = False
    """The document's top-level `items` list: the lines of its items are kept."""
    sink: bool = False
    """A list whose items are handed out (`Item`) instead of kept in `value`."""
    handed: int = 0


@dataclass
class _Anchored:
    """What an anchor names: a built collection, or a scalar as go-yaml decoded it (a key or a value)."""

    value: Any
    scalar: bool
    size: int
    height: int
    text: str = ""


@dataclass
class _State:
    label: str
    stream_items: bool
    pending: list[Item] = field(default_factory=list)
    anchors: dict[str, _Anchored] = field(default_factory=dict)
    stack: list[_Frame] = field(default_factory=list)
    decoded: int = 0
    aliased: int = 0
    document: int = 0
    root: Any = None
    root_line: int = 0
    streamed: int = 0
    item_lines: list[int] = field(default_factory=list)


Locate = Callable[[int], tuple[int, int] | None]
"""A byte offset in the stream → (line, column), 1-based, where the stream can be read again."""


def documents(
    label: str, stream: Any, stream_items: bool = False, locate: Locate | None = None
) -> Iterator[Document | Item]:
    """Each document of a YAML `stream` (text or a binary file object), built as kubectl would send it.

    With `stream_items`, the items of a document's top-level `items` list (when its `kind`, if already
    seen, ends in "List") come out as `Item`s, each as soon as it is read, before their document.
    Raises `SourceError` naming the place of the first problem: YAML that does not parse, a limit,
    or a value kubectl cannot send. `locate` turns the byte offset of a character the reader refuses
    into a line and column (text is located without it).
    """
    if locate is None and isinstance(stream, str):
        locate = _text_locator(stream)
    loader = _SafeLoader(stream)
    try:
        yield from _build(_State(label, stream_items), loader)
    except yaml.YAMLError as error:
        raise SourceError(yaml_error(label, error, locate)) from None
    finally:
        loader.dispose()


def _text_locator(text: str) -> Locate:
    def locate(offset: int) -> tuple[int, int]:
        data = text.encode("utf-8", "surrogatepass")[:offset]
        return data.count(b"\n") + 1, len(data) - (data.rfind(b"\n") + 1) + 1

    return locate


def _build(state: _State, loader: Any) -> Iterator[Document | Item]:
    stack = state.stack
    for event in iter(loader.get_event, None):
        if state.pending:
            yield from state.pending
            state.pending.clear()
        kind = type(event)
        if kind is ScalarEvent:
            state.decoded += 1
            _scalar(state, event)
        elif kind is MappingStartEvent or kind is SequenceStartEvent:
            state.decoded += 1
            _open(state, event)
        elif kind is MappingEndEvent or kind is SequenceEndEvent:
            frame = stack.pop()
            if frame.anchor is not None:
                state.anchors[frame.anchor] = _Anchored(frame.value, False, frame.size, frame.height)
            _attach(state, event, frame.value, frame.size, frame.height, False, frame.line)
        elif kind is AliasEvent:
            _alias(state, event)
        elif kind is DocumentStartEvent:
            state.document += 1
            state.anchors = {}  # anchors are per document (go-yaml v2 decode.go `document`)
            state.root, state.root_line = None, _line(event, end=True)
        elif kind is DocumentEndEvent:
            yield Document(state.document, state.root_line, state.root, state.streamed, tuple(state.item_lines))
            state.root, state.streamed, state.item_lines = None, 0, []


def _open(state: _State, event: MappingStartEvent | SequenceStartEvent) -> None:
    stack = state.stack
    if stack and stack[-1].key is _KEY:
        _fail(state, event, "a mapping or a list cannot be a mapping key (go-yaml: invalid map key)")
    if len(stack) >= MAX_DEPTH:
        _fail(state, event, f"nested more than {MAX_DEPTH} deep")
    line = _line(event)
    if type(event) is MappingStartEvent:
        stack.append(_Frame({}, event.anchor, line))
        return
    items = len(stack) == 1 and stack[0].key == "items"
    sink = items and state.stream_items and _may_be_list(stack[0].value.get("kind"))  # type: ignore[union-attr]
    if items:
        state.item_lines = []
    stack.append(_Frame([], event.anchor, line, key=None, items=items, sink=sink))


def _may_be_list(kind: Any) -> bool:
    return kind is None or (isinstance(kind, str) and kind.endswith("List"))


_MAYBE_NOT_TEXT = frozenset("+-0123456789.yYnNtTfFoO~<")
"""The first characters of a plain scalar that can be something other than a string (go-yaml v2
`resolveTable`; `<` for the merge key `<<`)."""


def _scalar(state: _State, event: ScalarEvent) -> None:
    stack = state.stack
    text = event.value
    tag = event.tag
    # Most scalars are text either way: quoted, or plain and starting with a letter no rule looks at.
    only_text = tag is None and (not event.implicit[0] or (text != "" and text[0] not in _MAYBE_NOT_TEXT))
    frame = stack[-1] if stack else None
    if frame is not None and frame.key is _KEY:
        if only_text:
            frame.key = text
        elif (tag is None and event.implicit[0] and text == "<<") or tag == goyaml.MERGE:  # decode.go isMerge
            frame.key = _MERGE
        else:
            frame.key = _key(state, event, _decode(state, event), text)
        frame.size += 1
        if frame.height < 2:
            frame.height = 2
        if event.anchor is not None:
            state.anchors[event.anchor] = _Anchored(text if only_text else _decode(state, event), True, 1, 1, text)
        return
    decoded = text if only_text else _decode(state, event)
    if event.anchor is not None:
        state.anchors[event.anchor] = _Anchored(decoded, True, 1, 1, text)
    value = text if only_text else _value(state, event, decoded, text)
    _attach(state, event, value, 1, 1, True, _line(event))


def _decode(state: _State, event: ScalarEvent) -> goyaml.GoValue:
    """A scalar as go-yaml v2 decodes it into an `interface{}` (decode.go `scalar`)."""
    tag = event.tag
    if tag is None:
        if not event.implicit[0]:  # quoted: a string
            return event.value
        tag = goyaml.PLAIN
    elif tag == "!":  # the non-specific tag: a string
        return event.value
    try:
        if tag == goyaml.BINARY:
            return goyaml.decode_binary(event.value)
        return goyaml.resolve(tag, event.value)[1]
    except goyaml.GoYamlError as error:
        _fail(state, event, f"{_path(state)}: {error} (kubectl refuses the file)")


def _value(state: _State, event: Event, decoded: goyaml.GoValue, text: str) -> Any:
    try:
        return goyaml.json_value(decoded)
    except goyaml.GoYamlError as error:
        _fail(
            state,
            event,
            f"{_path(state)}: {text} cannot be sent as JSON, so kubectl refuses the file ({error}); "
            "quote it for a string",
        )


def _key(state: _State, event: Event, decoded: goyaml.GoValue, text: str) -> str:
    try:
        return goyaml.key_text(decoded)
    except goyaml.GoYamlError as error:
        what = "null" if decoded is None else "beyond int64"
        _fail(
            state,
            event,
            f"{_path(state)}: the key {text or '(empty)'} is {what}, which kubectl cannot make a JSON key, so "
            f"it refuses the file ({error}); quote it for a string",
        )


def _alias(state: _State, event: AliasEvent) -> None:
    name = str(event.anchor)
    stack = state.stack
    if any(frame.anchor == name for frame in stack):
        _fail(state, event, f"alias *{name} refers to a node that contains it")
    anchored = state.anchors.get(name)
    if anchored is None:
        _fail(state, event, f"alias *{name} refers to no anchor before it")
    state.decoded += anchored.size
    state.aliased += anchored.size
    if (
        state.aliased > 100
        and state.decoded > 1000
        and state.aliased / state.decoded > _allowed_alias_ratio(state.decoded)
    ):
        _fail(state, event, "excessive aliasing: aliases expand to most of the document (a YAML bomb?)")
    if len(stack) + anchored.height > MAX_DEPTH:
        _fail(state, event, f"alias *{name} nests more than {MAX_DEPTH} deep")
    if stack and stack[-1].key is _KEY:
        if not anchored.scalar:
            _fail(state, event, "a mapping or a list cannot be a mapping key (go-yaml: invalid map key)")
        stack[-1].key = _key(state, event, anchored.value, anchored.text)  # an alias is never a merge key
        stack[-1].size += 1
        return
    value = _value(state, event, anchored.value, anchored.text) if anchored.scalar else anchored.value
    _attach(state, event, value, anchored.size, anchored.height, anchored.scalar, _line(event))


def _attach(state: _State, event: Event, value: Any, size: int, height: int, scalar: bool, line: int) -> None:
    """Put a finished value where it belongs: the document, a list, or a mapping under its pending key."""
    stack = state.stack
    if not stack:
        state.root, state.root_line = value, line
        return
    frame = stack[-1]
    frame.size += size
    if frame.height <= height:
        frame.height = height + 1
    if frame.key is None:  # a list
        if frame.items and not frame.sink:
            state.item_lines.append(line)
        if frame.sink:
            state.pending.append(Item(state.document, line, frame.handed, value))
            frame.handed += 1
            state.streamed = frame.handed
        else:
            cast(list[Any], frame.value).append(value)
        return
    key, frame.key = frame.key, _KEY
    if key is _MERGE:
        _merge(state, event, cast(dict[str, Any], frame.value), value, scalar)
    else:
        cast(dict[str, Any], frame.value)[key] = value


def _merge(state: _State, event: Event, into: dict[str, Any], value: Any, scalar: bool) -> None:
    """go-yaml v2 decode.go `merge`: a mapping's keys, or those of a list of mappings (the earlier
    winning), are set at the `<<` key's place: later keys override them, and they override earlier ones."""
    if not scalar and isinstance(value, dict):
        into.update(value)
        return
    if not scalar and isinstance(value, list) and all(isinstance(item, dict) for item in value):
        for item in reversed(value):
            into.update(item)
        return
    where = _path(state)
    where = "<<" if where == "(document)" else f"{where}.<<"
    _fail(state, event, f"{where}: map merge requires map or sequence of maps as the value (go-yaml)")


def _path(state: _State) -> str:
    """The field path of the value being read: `spec.nodes`, `items[3].metadata`."""
    parts: list[str] = []
    for frame in state.stack:
        if isinstance(frame.value, list):
            index = f"[{frame.handed + len(frame.value)}]"
            parts[-1:] = [parts[-1] + index] if parts else [index]
        elif frame.key is _MERGE:
            parts.append("<<")
        elif frame.key is not _KEY:
            parts.append(str(frame.key))
    return ".".join(parts) or "(document)"


def _line(event: Event, end: bool = False) -> int:
    """The 1-based line where `event` starts (or ends)."""
    mark = event.end_mark if end else event.start_mark
    return mark.line + 1 if mark is not None else 0


def _fail(state: _State, event: Event, message: str) -> NoReturn:
    mark = event.start_mark
    where = f"{mark.line + 1}:{mark.column + 1}:" if mark is not None else ""
    raise SourceError(one_line(f"{state.label}:{where} {message}"))


def _allowed_alias_ratio(decoded: int) -> float:
    """go-yaml v2 decode.go `allowedAliasRatio`: 0.99 up to 400k decoded nodes, falling linearly to 0.10 at 4M."""
    if decoded <= _ALIAS_RATIO_LOW:
        return 0.99
    if decoded >= _ALIAS_RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _ALIAS_RATIO_LOW) / (_ALIAS_RATIO_HIGH - _ALIAS_RATIO_LOW)


def yaml_error(label: str, error: yaml.YAMLError, locate: Locate | None = None) -> str:
    """PyYAML's error as one line: `FILE:LINE:COL: not valid YAML: ...` (for a character the reader
    refuses, whose byte offset is all it has, `FILE: byte N: ...` when `locate` cannot place it)."""
    if isinstance(error, ReaderError):
        code = ord(error.character) if isinstance(error.character, str) else error.character
        shown = f"character U+{code:04X}: " if isinstance(code, int) and code >= 0 else ""
        place = locate(error.position) if locate is not None else None
        where = f"{place[0]}:{place[1]}:" if place is not None else f" byte {error.position}:"
        return one_line(f"{label}:{where} not valid YAML: {shown}{error.reason}")
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        context = ""
        if error.context:
            started = error.context_mark
            where = f" (line {started.line + 1}, column {started.column + 1})" if started is not None else ""
            context = f" {error.context}{where}:"
        return one_line(f"{label}:{mark.line + 1}:{mark.column + 1}: not valid YAML:{context} {error.problem}")
    return one_line(f"{label}: not valid YAML: {error}")


class _KubectlDumper(yaml.SafeDumper):
    """PyYAML's safe dumper, quoting every string go-yaml v2 would read as something else: PyYAML
    writes `y`, `n`, `1e1`, `5e-1` and `0o10` bare, which kubectl then sends as a bool or a number."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        tag = super().resolve(kind, value, implicit)  # type: ignore[no-untyped-call]
        if kind is yaml.ScalarNode and implicit[0] and tag == goyaml.STR:
            resolved = goyaml.resolve(goyaml.PLAIN, value)[0]
            if resolved not in (goyaml.STR, goyaml.TIMESTAMP):
                return resolved  # not the string tag, so the emitter quotes the value
        return tag


def dump(value: Any) -> str:
    """`value` as block YAML that kubectl reads back as `value` (`yaml.safe_dump`, keys in order)."""
    return yaml.dump(value, Dumper=_KubectlDumper, sort_keys=False)


def load(text: str, label: str = "<yaml>") -> list[Any]:
    """Every document of a YAML text as kubectl would send it (`documents`); `SourceError`."""
    return [document.body for document in documents(label, text) if document.body is not None]
