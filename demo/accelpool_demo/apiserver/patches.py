"""JSON patches and strategic merge patches, as the API server applies them. Pure.

- `json_patch`: RFC 6902 as gopkg.in/evanphx/json-patch.v4 applies it for the patch handler
  (k8s.io/apiserver/pkg/endpoints/handlers/patch.go `jsonPatcher`): `test` of an absent path against
  null passes, `replace` of an absent map key adds it, an index past the end or a missing parent is an
  error; any failure a 422 "the server rejected our request due to an error in our request".
- `strategic_merge_patch`: k8s.io/apimachinery/pkg/util/strategicpatch/patch.go for the built-in kinds:
  maps merge (null deletes a key); a list whose field has a patch merge key (`x-kubernetes-patch-merge-key`
  in `typed.SCHEMAS`: conditions by type...) merges item by item, one with `$patch: delete` removing the
  item it names; a list without one (a Node's taints) is replaced whole, directives and all (they are
  then unknown fields); `$patch: replace` replaces a map, `$patch: delete` removes it, another `$patch`
  is an error (500: "unknown patch type"); `$setElementOrder/<list>` orders a merged list.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from accelpool_api import go_float
from accelpool_demo.apiserver.resources import error, internal

JsonObject = dict[str, Any]
PATCH = "$patch"
ORDER_PREFIX = "$setElementOrder/"
DIRECTIVE_PREFIXES = ("$setElementOrder/", "$retainKeys", "$deleteFromPrimitiveList/")


class PatchFailed(Exception):
    pass


class Panic(Exception):
    """A patch the API server's handler panics on (it answers nothing and closes the connection)."""


def rejected() -> Exception:
    """How the patch handler answers a JSON patch that cannot be applied."""
    return error(422, "Invalid", "the server rejected our request due to an error in our request", {})


# ---------------------------------------------------------------- JSON patch (RFC 6902)


def json_patch(current: Mapping[str, Any], operations: list[Any]) -> JsonObject:
    doc: Any = copy.deepcopy(dict(current))
    try:
        for operation in operations:
            doc = _operate(doc, operation)
    except PatchFailed:
        raise rejected() from None
    if not isinstance(doc, dict):
        raise rejected()
    result: JsonObject = doc
    return result


def _pointer(path: Any) -> list[str]:
    if not isinstance(path, str) or (path and not path.startswith("/")):
        raise PatchFailed(f"invalid path {path!r}")
    return [part.replace("~1", "/").replace("~0", "~") for part in path.split("/")[1:]]


def _parent(doc: Any, parts: list[str]) -> Any:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            raise PatchFailed("missing parent")
    return node


def _get(doc: Any, parts: list[str]) -> Any:
    node = _parent(doc, parts)
    key = parts[-1]
    if isinstance(node, dict):
        if key not in node:
            raise KeyError(key)
        return node[key]
    if isinstance(node, list) and key.isdigit() and int(key) < len(node):
        return node[int(key)]
    raise KeyError(key)


def _operate(doc: Any, operation: Any) -> Any:
    if not isinstance(operation, Mapping):
        raise PatchFailed("an operation is an object")
    op = operation.get("op")
    parts = _pointer(operation.get("path"))
    if not parts:
        if op in ("add", "replace"):
            return copy.deepcopy(operation.get("value"))
        raise PatchFailed("the whole document")
    if op == "test":
        try:
            found = _get(doc, parts)
        except KeyError:
            if operation.get("value") is None:
                return doc
            raise PatchFailed("testing an absent value") from None
        if found != operation.get("value") or type(found) is not type(operation.get("value")):
            raise PatchFailed("test failed")
        return doc
    if op == "add":
        _add(doc, parts, copy.deepcopy(operation.get("value")))
    elif op == "remove":
        _remove(doc, parts)
    elif op == "replace":
        _replace(doc, parts, copy.deepcopy(operation.get("value")))
    elif op in ("move", "copy"):
        source = _pointer(operation.get("from"))
        try:
            value = copy.deepcopy(_get(doc, source))
        except KeyError:
            raise PatchFailed("missing from") from None
        if op == "move":
            _remove(doc, source)
        _add(doc, parts, value)
    else:
        raise PatchFailed(f"unknown op {op!r}")
    return doc


def _add(doc: Any, parts: list[str], value: Any) -> None:
    node, key = _parent(doc, parts), parts[-1]
    if isinstance(node, dict):
        node[key] = value
    elif isinstance(node, list):
        if key == "-":
            node.append(value)
        elif key.isdigit() and int(key) <= len(node):
            node.insert(int(key), value)
        else:
            raise PatchFailed("index out of range")
    else:
        raise PatchFailed("not a container")


def _remove(doc: Any, parts: list[str]) -> None:
    node, key = _parent(doc, parts), parts[-1]
    if isinstance(node, dict) and key in node:
        del node[key]
    elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
        del node[int(key)]
    else:
        raise PatchFailed("missing")


def _replace(doc: Any, parts: list[str], value: Any) -> None:
    node, key = _parent(doc, parts), parts[-1]
    if isinstance(node, dict):
        node[key] = value  # json-patch v4: a missing key is added
    elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
        node[int(key)] = value
    else:
        raise PatchFailed("missing")


# ---------------------------------------------------------------- strategic merge patch


def strategic_merge_patch(
    current: Mapping[str, Any], patch: Mapping[str, Any], schema: Mapping[str, Any]
) -> JsonObject:
    merged = _merge_map(copy.deepcopy(dict(current)), patch, schema)
    return merged if merged is not None else {}


def go_printed(value: Any) -> str:
    """A decoded JSON value as Go's `%v` prints it (`map[a:1 b:[x y]]`)."""
    if isinstance(value, Mapping):
        return "map[" + " ".join(f"{k}:{go_printed(v)}" for k, v in sorted(value.items())) + "]"
    if isinstance(value, list):
        return "[" + " ".join(go_printed(v) for v in value) + "]"
    if value is None:
        return "<nil>"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return go_float(value)  # strconv's shortest 'g': 1.0000005e+06, not 1000000.5
    return str(value)


def _child(schema: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    properties = schema.get("properties") or {}
    if key in properties:
        found: Mapping[str, Any] = properties[key]
        return found
    additional = schema.get("additionalProperties")
    return additional if isinstance(additional, Mapping) else {}


def _merge_map(original: JsonObject, patch: Mapping[str, Any], schema: Mapping[str, Any]) -> JsonObject | None:
    directive = patch.get(PATCH)
    if directive == "replace":
        return _without_directives(patch)
    if directive == "delete":
        return None
    if directive is not None:
        raise internal(f"unknown patch type: {directive} in map: {go_printed(patch)}")
    orders = {k[len(ORDER_PREFIX) :]: v for k, v in patch.items() if k.startswith(ORDER_PREFIX)}
    for listed in orders:
        if not _child(schema, listed).get("x-kubernetes-patch-merge-key") and isinstance(patch.get(listed), list):
            # patch.go `mergePatchIntoOriginal` → `normalizeElementOrder` of maps without a merge key: a
            # type assertion that panics (recorded from kube-apiserver v1.36.2 for a Node's taints)
            raise Panic(f"$setElementOrder/{listed} of a list without a merge key")
    for key, value in patch.items():
        if key.startswith(DIRECTIVE_PREFIXES):
            continue
        child = _child(schema, key)
        if value is None:
            original.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(original.get(key), dict):
            merged = _merge_map(original[key], value, child)
            if merged is None:
                original.pop(key, None)
            else:
                original[key] = merged
        elif isinstance(value, Mapping):
            merged = _merge_map({}, value, child)
            if merged is not None:
                original[key] = merged
            else:
                original.pop(key, None)
        elif isinstance(value, list) and child.get("x-kubernetes-patch-merge-key"):
            original[key] = _merge_list(original.get(key) or [], value, child, orders.get(key))
        else:
            original[key] = copy.deepcopy(value)
    return original


def _without_directives(patch: Mapping[str, Any]) -> JsonObject:
    return {k: copy.deepcopy(v) for k, v in patch.items() if k != PATCH and not k.startswith(DIRECTIVE_PREFIXES)}


def _merge_list(original: list[Any], patch: list[Any], schema: Mapping[str, Any], order: Any) -> list[Any]:
    """patch.go `mergeSlice`: items merged by key (`$patch: delete` ones removed), then ordered as
    `normalizeElementOrder` orders them: the patch's items in the patch's (or `$setElementOrder`'s) order,
    interleaved with the others in the stored order."""
    key = str(schema["x-kubernetes-patch-merge-key"])
    items = schema.get("items") or {}
    if any(isinstance(p, Mapping) and p.get(PATCH) == "replace" for p in patch):
        return [_without_directives(p) for p in patch if isinstance(p, Mapping) and p.get(PATCH) != "replace"]

    def key_of(item: Any) -> Any:
        return json_key(item.get(key) if isinstance(item, Mapping) else item)

    deleted = {key_of(p) for p in patch if isinstance(p, Mapping) and p.get(PATCH) == "delete"}
    kept_patch = [p for p in patch if not (isinstance(p, Mapping) and p.get(PATCH) == "delete")]
    merged = [copy.deepcopy(item) for item in original if key_of(item) not in deleted]
    for item in kept_patch:
        index = next((i for i, r in enumerate(merged) if key_of(r) == key_of(item)), None)
        if not isinstance(item, Mapping):
            if index is None:
                merged.append(copy.deepcopy(item))
            continue
        if index is None:
            result = _merge_map({}, item, items)
            if result is not None:
                merged.append(result)
            continue
        result = _merge_map(merged[index], item, items)
        if result is None:
            del merged[index]
        else:
            merged[index] = result
    wanted = order if isinstance(order, list) else kept_patch
    in_patch = {key_of(p) for p in kept_patch}
    patch_items = sorted((m for m in merged if key_of(m) in in_patch), key=_rank(wanted, key_of))
    server_only = [m for m in merged if key_of(m) not in in_patch]
    return _merge_sorted(server_only, patch_items, [key_of(o) for o in original], key_of)


def _rank(order: list[Any], key_of: Any) -> Any:
    ranks = {key_of(o): i for i, o in enumerate(order)}
    return lambda item: ranks.get(key_of(item), len(ranks))


def _merge_sorted(left: list[Any], right: list[Any], server_order: list[Any], key_of: Any) -> list[Any]:
    """patch.go `mergeSortedSlice`: each item of `left` placed before the first of `right` that comes
    after it in the stored order (when both are stored), the relative orders of both kept."""
    result = []
    i = j = 0
    while i < len(left) or j < len(right):
        if i >= len(left):
            result.append(right[j])
            j += 1
        elif j >= len(right):
            result.append(left[i])
            i += 1
        else:
            li, ri = key_of(left[i]), key_of(right[j])
            if li in server_order and ri in server_order and server_order.index(li) < server_order.index(ri):
                result.append(left[i])
                i += 1
            else:
                result.append(right[j])
                j += 1
    return result


def json_key(value: Any) -> str:
    return repr(value)
