"""Server-side apply (PATCH `application/apply-patch+yaml`), as k8s.io/apiserver's patch handler
(pkg/endpoints/handlers/patch.go, `applyPatcher`) and sigs.k8s.io/structured-merge-diff/v4
(merge/update.go `Updater.Apply`) do it. Pure, apart from the time given:

- the applied configuration (YAML or JSON) needs apiVersion and kind (400 `invalid object type`), and
  declares no field the type lacks (500 `failed to create typed patch object`);
- it is merged into the live object: maps field by field, keyed lists (`x-kubernetes-list-type: map`)
  item by item in the order merge.go gives them, sets as unions, atomic lists and scalars replaced;
- the fields this manager applied before and leaves out now are removed, unless another manager (an
  applier or an updater) owns them (merge/update.go `prune`); a list or map left empty by that goes too;
- a field another manager owns and the apply changes is a conflict: 409 with a cause per field, unless
  `force`, which takes it from them (internal/conflict.go words them);
- the applier owns exactly the fields of its configuration (`field_set`: typed/tofieldset.go); a
  missing object is created (201: `applyPatcher.createNewObject`); an apply that changes nothing leaves
  the object and its entry's time as they were, its ownership recorded all the same.

A write through the resource owns no status, one through `status` no spec (the strategies' reset
fields); `metadata.resourceVersion`, when sent, is a precondition (the caller's).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

import yaml

from accelpool_demo.apiserver import fields
from accelpool_demo.apiserver.fields import MISSING, Entry, Path, Schema
from accelpool_demo.apiserver.resources import bad_request, error, internal
from accelpool_demo.apiserver.writes import JsonObject

CONTENT_TYPE = "application/apply-patch+yaml"


def configuration(data: Any, text: str) -> JsonObject:
    """The applied configuration of a request (parsed JSON, or the YAML text); 400 without apiVersion and kind."""
    config = data if isinstance(data, dict) else yaml.safe_load(text or "")
    if not isinstance(config, dict):
        raise bad_request("invalid object type: /, Kind=")
    if not config.get("apiVersion") or not config.get("kind"):
        api_version = str(config.get("apiVersion") or "")
        group_version = api_version if "/" in api_version else f"/{api_version}"
        raise bad_request(f"invalid object type: {group_version}, Kind={config.get('kind') or ''}")
    return config


def undeclared(config: Mapping[str, Any], schema: Mapping[str, Any], name: str, namespace: str) -> None:
    """500 for a configuration with a field its type does not declare (the typed patch object: the
    type converter refuses it before anything is merged)."""
    missing = _undeclared(schema, {k: v for k, v in config.items() if k not in ("apiVersion", "kind", "metadata")}, "")
    if missing:
        kind, api_version = config.get("kind"), config.get("apiVersion")
        raise internal(
            f"failed to create typed patch object ({namespace}/{name}; {api_version}, Kind={kind}): "
            f"{missing[0]}: field not declared in schema"
        )


def _undeclared(schema: Mapping[str, Any], value: Any, path: str) -> list[str]:
    found: list[str] = []
    if isinstance(value, Mapping) and not schema.get("x-kubernetes-preserve-unknown-fields"):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        for key, child in value.items():
            at = f"{path}.{key}"
            if properties is not None and key in properties:
                found += _undeclared(properties[key], child, at)
            elif isinstance(additional, Mapping):
                found += _undeclared(additional, child, at)
            elif properties is not None or additional is False:
                found.append(at)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            found += _undeclared(schema["items"], item, path)
    return found


# ---------------------------------------------------------------- field sets and merging


def field_set(config: Any, schema: Schema, path: Path = ()) -> set[Path]:
    """The fields a configuration sets (typed/tofieldset.go): its leaves, atomic lists and maps whole, the
    items of keyed lists (each a field itself and its fields), the items of sets; a map is no field."""
    found: set[Path] = set()
    if isinstance(config, Mapping) and not schema.atomic_map:
        if not config and path:
            found.add(path)
        for key, child in config.items():
            found |= field_set(child, schema.child(str(key)), (*path, f"f:{key}"))
    elif isinstance(config, list) and schema.list_type in ("map", "set"):
        if not config and path:
            found.add(path)
        item = schema.item()
        for child in config:
            at = (*path, fields.element_of(child, schema))
            found.add(at)
            if schema.list_type == "map":
                found |= field_set(child, item, at)
    elif path:
        found.add(path)
    return found


def merged(live: Any, config: Any, schema: Schema) -> Any:
    """The configuration merged into the live value (typed/merge.go)."""
    if isinstance(config, Mapping) and isinstance(live, Mapping) and not schema.atomic_map:
        result = dict(live)
        for key, child in config.items():
            result[key] = merged(live.get(key, MISSING), child, schema.child(str(key)))
        return result
    if isinstance(config, list) and isinstance(live, list) and schema.list_type in ("map", "set"):
        return _merged_list(live, config, schema)
    return copy.deepcopy(config)


def _merged_list(live: list[Any], config: list[Any], schema: Schema) -> list[Any]:
    """A keyed list or a set merged (merge.go `visitListItems`, as far as the emulator goes): the live items in
    their order, each the configuration matches merged with it, then the configuration's new items in its order."""
    element = fields.element_of
    wanted = {element(item, schema): item for item in config}
    item_schema = schema.item()
    out = []
    for item in live:
        key = element(item, schema)
        if key in wanted and schema.list_type == "map":
            out.append(merged(item, wanted.pop(key), item_schema))
        else:
            wanted.pop(key, None)
            out.append(copy.deepcopy(item))
    return out + [copy.deepcopy(item) for item in wanted.values()]


def _value_at(obj: Any, path: Path, schema: Schema) -> Any:
    node, node_schema = obj, schema
    for part in path:
        kind, _, rest = part.partition(":")
        if kind == "f" and isinstance(node, Mapping) and rest in node:
            node, node_schema = node[rest], node_schema.child(rest)
        elif kind in ("k", "v") and isinstance(node, list):
            found = [i for i in node if fields.element_of(i, node_schema) == part]
            if not found:
                return MISSING
            node, node_schema = found[0], node_schema.item()
        else:
            return MISSING
    return node


def _remove(obj: Any, path: Path, schema: Schema) -> None:
    """Remove the field at `path` (a map key, a list item), if it is there."""
    parent = _value_at(obj, path[:-1], schema) if len(path) > 1 else obj
    parent_schema = schema
    for part in path[:-1]:
        kind, _, rest = part.partition(":")
        parent_schema = parent_schema.child(rest) if kind == "f" else parent_schema.item()
    kind, _, rest = path[-1].partition(":")
    if kind == "f" and isinstance(parent, dict):
        parent.pop(rest, None)
    elif kind in ("k", "v") and isinstance(parent, list):
        parent[:] = [i for i in parent if fields.element_of(i, parent_schema) != path[-1]]


def pruned(obj: JsonObject, gone: Iterable[Path], owned: set[Path], schema: Schema) -> JsonObject:
    """`obj` without the fields in `gone` nobody else owns (merge/update.go `prune`), nor the lists and maps
    that leaves empty and nobody owns."""
    result = copy.deepcopy(obj)
    for path in sorted(gone, key=len, reverse=True):
        if any(p[: len(path)] == path for p in owned):
            continue
        _remove(result, path, schema)
        for depth in range(len(path) - 1, 1, -1):
            parent = path[:depth]
            value = _value_at(result, parent, schema)
            if value in ({}, []) and parent not in owned:
                _remove(result, parent, schema)
            else:
                break
    return result


# ---------------------------------------------------------------- applying


def conflict(found: list[tuple[Entry, Path]]) -> Exception:
    """409 as internal/conflict.go `NewConflictError` words it: a cause per field, the managers sorted."""
    causes = [
        {
            "reason": "FieldManagerConflict",
            "message": f"conflict with {entry.describe()}",
            "field": fields.display(path),
        }
        for entry, path in found
    ]
    if len(found) == 1:
        entry, path = found[0]
        message = f"Apply failed with 1 conflict: conflict with {entry.describe()}: {fields.display(path)}"
    else:
        lines: list[str] = []
        for who in sorted({entry.describe() for entry, _ in found}):
            lines.append(f"conflict with {who}:")
            lines += [f"- {fields.display(p)}" for e, p in found if e.describe() == who]
        message = f"Apply failed with {len(found)} conflicts: " + "\n".join(lines)
    return error(409, "Conflict", message, {"causes": causes})


def applied(
    live: JsonObject,
    config: Mapping[str, Any],
    schema: Schema,
    *,
    applier: Entry,
    force: bool,
    now: str,
    ignored: Iterable[Path],
) -> tuple[JsonObject, list[JsonObject], bool]:
    """The object `applier`'s configuration makes of `live` (the zero object of a create), its managedFields,
    and whether the object changed (False: a no-op, the entries changed all the same)."""
    ignored = list(ignored)
    body = {k: v for k, v in config.items() if k not in ("apiVersion", "kind", "metadata")}
    for prefix in ignored:
        body.pop(prefix[0][2:], None)
    metadata = {k: v for k, v in (config.get("metadata") or {}).items() if k not in _UNOWNED_METADATA}
    if metadata:
        body["metadata"] = metadata
    owned = fields.without_prefixes(field_set(body, schema), ignored) - fields.STRIPPED
    entries = fields.entries(live)
    mine = next((e for e in entries if e.identity == applier.identity), None)
    others = [e for e in entries if e.identity != applier.identity]
    result = merged({k: v for k, v in live.items() if k != "metadata"}, body, schema)
    result["metadata"] = (
        merged(live.get("metadata") or {}, metadata, schema.child("metadata"))
        if metadata
        else dict(live.get("metadata") or {})
    )
    if mine is not None:
        kept = set().union(*(e.fields for e in others)) | owned
        result = pruned(result, mine.fields - owned, kept, schema)
    comparison = fields.compare(_unmanaged(live), _unmanaged(result), schema)
    changed = fields.without_prefixes(comparison.added | comparison.modified, ignored)
    found = [(e, p) for e in others for p in sorted(e.fields & changed)]
    if found and not force:
        raise conflict(found)
    for entry in others:
        entry.fields = (entry.fields - changed) - comparison.removed
    is_change = bool(comparison.added or comparison.modified or comparison.removed)
    time = now if is_change else (mine.time if mine is not None else None)
    ours = Entry(applier.manager, applier.operation, applier.api_version, applier.subresource, owned, time)
    return result, fields.encoded([*others, ours]), is_change


_UNOWNED_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "managedFields", "selfLink"}
)


def _unmanaged(obj: Mapping[str, Any]) -> JsonObject:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("managedFields", "resourceVersion")}
    return {**obj, "metadata": metadata}
