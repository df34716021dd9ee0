"""Untrusted YAML → JSON-shaped values, within bounds of time and memory.

`check_events` refuses deep nesting, recursive aliases and alias bombs in one pass over the
parser's events, before anything is constructed; `JsonLoader` then builds only what JSON (and so
a Kubernetes object) can hold. `yaml_error` words PyYAML's errors as `FILE:LINE:COL: message`.
The rules are in `accelpool.textio`'s docstring.

Pure: no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
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

from accelpool.textio.lines import one_line

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


@dataclass
class _Open:
    """A collection being parsed: its anchor, and its expanded size and height so far."""

    anchor: str | None
    size: int = 1
    height: int = 1


def check_events(label: str, text: str) -> None:
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
        raise SourceError(yaml_error(label, text, error)) from None


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


def yaml_error(label: str, text: str, error: yaml.YAMLError) -> str:
    """PyYAML's error as one line: `FILE:LINE:COL: not valid YAML: ...`."""
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


class JsonLoader(_SafeLoader):
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


JsonLoader.add_constructor("tag:yaml.org,2002:timestamp", JsonLoader.construct_as_text)
JsonLoader.add_constructor("tag:yaml.org,2002:binary", JsonLoader.construct_as_text)
JsonLoader.add_constructor("tag:yaml.org,2002:set", JsonLoader.construct_set_as_mapping)
JsonLoader.add_constructor("tag:yaml.org,2002:omap", JsonLoader.refuse)
JsonLoader.add_constructor("tag:yaml.org,2002:pairs", JsonLoader.refuse)


def _key_text(key: Any) -> str:
    """A mapping key as JSON (and Kubernetes, via sigs.k8s.io/yaml) has it: always a string."""
    if isinstance(key, str):
        return key
    try:
        return json.dumps(key)
    except (TypeError, ValueError):
        return str(key)
