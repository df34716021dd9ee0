"""Managed fields (`metadata.managedFields`): which manager set which field, as the API server's field
manager records them (k8s.io/apiserver/pkg/endpoints/handlers/fieldmanager over
sigs.k8s.io/structured-merge-diff/v4). Pure, apart from the times the caller gives.

A field is a path of FieldsV1 elements: `f:name` (a field or map key), `k:{"type":"Ready"}` (an item of a
list keyed by some of its fields, `x-kubernetes-list-type: map`), `v:"a"` (an item of a set). Which lists
are keyed, sets or atomic (one field, whatever its items), and which maps are atomic, is the type's
schema (`Schema`): an OpenAPI v3 schema with its `x-kubernetes-list-type`, `x-kubernetes-list-map-keys`
and `x-kubernetes-map-type` (a CRD's own; the built-in kinds' in `typed`). What a schema leaves out is
a map of fields and an atomic list, as structured-merge-diff's deduced type.

- `compare` (typed/compare.go): the fields an update added, modified and removed; a map or keyed item
  that appears or goes counts itself, beside its fields (FieldsV1's `.`);
- `updated` (merge/update.go `Updater.Update`, internal/managedfieldsupdater.go): after a write by an
  Update manager, it owns what it added or modified besides what it owned; others lose those; nobody
  keeps a removed field; its entry's time is now when it took any field;
- `entries` / `encoded`: `metadata.managedFields` read and written, one entry per manager, operation,
  apiVersion (Update only) and subresource, sorted as internal/managedfields.go sorts them (operation,
  time in seconds, manager, apiVersion, subresource).

Server-side apply's own rules (`field_set`, merging, conflicts) are in `apply`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

Path = tuple[str, ...]
MISSING: Any = object()
STRIPPED = frozenset(
    {
        ("f:apiVersion",),
        ("f:kind",),
        ("f:metadata",),
        *(
            ("f:metadata", f"f:{name}")
            for name in (
                "name",
                "namespace",
                "creationTimestamp",
                "selfLink",
                "uid",
                "clusterName",
                "generation",
                "managedFields",
                "resourceVersion",
            )
        ),
    }
)
"""Fields no manager owns (internal/stripmeta.go)."""


class Schema:
    """Where the list and map types of an object's fields are read (an OpenAPI v3 schema node)."""

    def __init__(self, node: Mapping[str, Any] | None = None) -> None:
        self.node: Mapping[str, Any] = node or {}

    def child(self, key: str) -> Schema:
        properties = self.node.get("properties") or {}
        if key in properties:
            return Schema(properties[key])
        additional = self.node.get("additionalProperties")
        return Schema(additional if isinstance(additional, Mapping) else None)

    def item(self) -> Schema:
        items = self.node.get("items")
        return Schema(items if isinstance(items, Mapping) else None)

    @property
    def list_type(self) -> str:
        return str(self.node.get("x-kubernetes-list-type") or "atomic")

    @property
    def keys(self) -> list[str]:
        return list(self.node.get("x-kubernetes-list-map-keys") or [])

    @property
    def atomic_map(self) -> bool:
        return self.node.get("x-kubernetes-map-type") == "atomic" or self.node.get("x-kubernetes-int-or-string") is True


def element_of(item: Any, schema: Schema) -> str:
    """The path element of a list item: `k:{...}` in a keyed list, `v:...` in a set."""
    if schema.list_type == "map" and isinstance(item, Mapping):
        return "k:" + _json({key: item.get(key) for key in sorted(schema.keys) if key in item})
    return "v:" + _json(item)


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


def _indexed(items: list[Any], schema: Schema) -> dict[str, Any]:
    return {element_of(item, schema): item for item in items}


def _is_map(value: Any, schema: Schema) -> bool:
    return isinstance(value, Mapping) and not schema.atomic_map


def _is_granular_list(value: Any, schema: Schema) -> bool:
    return isinstance(value, list) and schema.list_type in ("map", "set")


# ---------------------------------------------------------------- comparing


@dataclass
class Comparison:
    added: set[Path] = field(default_factory=set)
    modified: set[Path] = field(default_factory=set)
    removed: set[Path] = field(default_factory=set)


def compare(old: Any, new: Any, schema: Schema) -> Comparison:
    """What changed from `old` to `new` (objects without their managedFields), field by field."""
    result = Comparison()
    _compare(old, new, schema, (), result)
    return result


def _compare(old: Any, new: Any, schema: Schema, path: Path, result: Comparison) -> None:
    if old is MISSING and new is MISSING:
        return
    sample = new if new is not MISSING else old
    both_same_kind = old is MISSING or new is MISSING or type(old) is type(new) or (_num(old) and _num(new))
    if both_same_kind and _is_map(sample, schema):
        left = old if old is not MISSING else {}
        right = new if new is not MISSING else {}
        if not left and not right:
            _leaf(old, new, path, result)
            return
        for key in list(dict.fromkeys([*left, *right])):
            _compare(
                left.get(key, MISSING), right.get(key, MISSING), schema.child(str(key)), (*path, f"f:{key}"), result
            )
    elif both_same_kind and _is_granular_list(sample, schema):
        left = _indexed(old, schema) if old is not MISSING else {}
        right = _indexed(new, schema) if new is not MISSING else {}
        if not left and not right:
            _leaf(old, new, path, result)
            return
        item = schema.item()
        for element in list(dict.fromkeys([*left, *right])):
            at = (*path, element)
            if schema.list_type == "set":
                _leaf(left.get(element, MISSING), right.get(element, MISSING), at, result)
            else:
                _compare(left.get(element, MISSING), right.get(element, MISSING), item, at, result)
    else:
        _leaf(old, new, path, result)
        return
    if path and old is MISSING:
        result.added.add(path)
    elif path and new is MISSING:
        result.removed.add(path)


def _num(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _leaf(old: Any, new: Any, path: Path, result: Comparison) -> None:
    if not path:
        return
    if old is MISSING and new is not MISSING:
        result.added.add(path)
    elif new is MISSING and old is not MISSING:
        result.removed.add(path)
    elif old != new or type(old) is not type(new):
        result.modified.add(path)


def without_prefixes(paths: Iterable[Path], prefixes: Iterable[Path]) -> set[Path]:
    """`paths` less every path under (or at) one of `prefixes` (fieldpath.Set.RecursiveDifference)."""
    prefixes = list(prefixes)
    return {p for p in paths if not any(p[: len(prefix)] == prefix for prefix in prefixes)}


# ---------------------------------------------------------------- entries


@dataclass
class Entry:
    """One `metadata.managedFields` entry."""

    manager: str
    operation: str
    api_version: str
    subresource: str
    fields: set[Path]
    time: str | None

    @property
    def identity(self) -> tuple[str, str, str, str]:
        """What tells entries apart (internal/managedfields.go `BuildManagerIdentifier`: an applier's
        entries of different apiVersions are one)."""
        return (self.manager, self.operation, "" if self.operation == "Apply" else self.api_version, self.subresource)

    def describe(self) -> str:
        """How a conflict names the manager (internal/conflict.go `printManager`)."""
        text = json.dumps(self.manager)
        if self.subresource:
            text += f" with subresource {json.dumps(self.subresource)}"
        if self.operation == "Update":
            text += f" using {self.api_version}"
        return text


def entries(obj: Mapping[str, Any]) -> list[Entry]:
    """An object's managedFields, read."""
    found = []
    for raw in (obj.get("metadata") or {}).get("managedFields") or []:
        if not isinstance(raw, Mapping):
            continue
        found.append(
            Entry(
                str(raw.get("manager", "")),
                str(raw.get("operation", "")),
                str(raw.get("apiVersion", "")),
                str(raw.get("subresource", "") or ""),
                paths_of(raw.get("fieldsV1") or {}),
                raw.get("time"),
            )
        )
    return found


def encoded(found: Iterable[Entry]) -> list[dict[str, Any]]:
    """Entries as `metadata.managedFields` (those that own nothing left out), in the API server's order."""

    def order(entry: Entry) -> tuple[str, str, str, str, str]:
        return (entry.operation, entry.time or "", entry.manager, entry.api_version, entry.subresource)

    result = []
    for entry in sorted((e for e in found if e.fields), key=order):
        raw: dict[str, Any] = {
            "manager": entry.manager,
            "operation": entry.operation,
            "apiVersion": entry.api_version,
        }
        if entry.time is not None:
            raw["time"] = entry.time
        raw["fieldsType"] = "FieldsV1"
        raw["fieldsV1"] = fields_v1(entry.fields)
        if entry.subresource:
            raw["subresource"] = entry.subresource
        result.append(raw)
    return result


def fields_v1(paths: Iterable[Path]) -> dict[str, Any]:
    """Paths as FieldsV1: a tree of elements, `.` marking a path that is a field itself and has fields."""
    paths = set(paths)
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for element in path:
            node = node.setdefault(element, {})
    _mark(root, (), paths)
    return root


def _mark(node: dict[str, Any], path: Path, paths: set[Path]) -> None:
    for element, child in node.items():
        if element == ".":
            continue
        at = (*path, element)
        if child:
            _mark(child, at, paths)
            if at in paths:
                child["."] = {}


def paths_of(tree: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for element, child in tree.items():
        if element == ".":
            found.add(prefix)
            continue
        at = (*prefix, element)
        if isinstance(child, Mapping) and child:
            found |= paths_of(child, at)
        else:
            found.add(at)
    return found


def display(path: Path) -> str:
    """A path as conflicts name it (fieldpath.Path.String): `.spec.replicas`, `.status.conditions[type="A"]`."""
    text = ""
    for element in path:
        kind, _, rest = element.partition(":")
        if kind == "f":
            text += f".{rest}"
        elif kind == "k":
            keys = json.loads(rest)
            text += "[" + ",".join(f"{key}={_json(value)}" for key, value in keys.items()) + "]"
        elif kind == "v":
            text += f"[={rest}]"
        else:
            text += f"[{rest}]"
    return text


# ---------------------------------------------------------------- an Update's ownership


def updated(
    found: list[Entry],
    comparison: Comparison,
    writer: Entry,
    *,
    now: str | None,
    ignored: Iterable[Path] = (),
) -> list[Entry]:
    """The entries after an update by `writer` (an Update manager, its fields empty) that made `comparison`."""
    changed = comparison.added | comparison.modified
    result = []
    own: Entry | None = None
    for entry in found:
        kept = Entry(
            entry.manager,
            entry.operation,
            entry.api_version,
            entry.subresource,
            (entry.fields - changed) - comparison.removed,
            entry.time,
        )
        if entry.identity == writer.identity:
            own = kept
        result.append(kept)
    taken = without_prefixes(changed - comparison.removed, ignored) - STRIPPED
    if taken:
        if own is None:
            own = Entry(writer.manager, writer.operation, writer.api_version, writer.subresource, set(), None)
            result.append(own)
        own.fields |= taken
        own.time = now
    return [entry for entry in result if entry.fields]
