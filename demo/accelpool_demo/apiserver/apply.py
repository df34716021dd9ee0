"""Server-side apply (PATCH `application/apply-patch+yaml`), as k8s.io/apiserver's patch handler
(pkg/endpoints/handlers/patch.go, `applyPatcher`) and sigs.k8s.io/structured-merge-diff do it:

- the `fieldManager` query parameter is required; the body is the whole intent (YAML or JSON);
- a missing object is created (a 201, as `applyPatcher.createNewObject`);
- fields this manager applied before and leaves out now are removed, unless another applier owns them;
  fields nobody applied (another writer's, a controller's status) are kept; the rest is merged in;
- `metadata.resourceVersion`, when sent, is a precondition (409 when stale); without it an apply never
  conflicts on versions, so a controller writing `.status` in between cannot make it fail;
- the status of a resource with a status subresource is not written through the main resource;
- ownership is recorded in `metadata.managedFields` (operation Apply, FieldsV1); a field another applier
  owns with a different value is a 409 conflict unless `force=true`, which takes it over.

Simplified: lists are atomic (real SSA merges list-maps such as containers by key; for a manager that
owns a whole list, as accelpool does, the result is the same), writers other than appliers do not
appear in managedFields, and apply to a subresource is refused. Pure, apart from the clock.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import yaml

from accelpool_demo.apiserver.resources import bad_request, error
from accelpool_demo.apiserver.writes import JsonObject, now

CONTENT_TYPE = "application/apply-patch+yaml"
UNOWNED_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"}
    | {"managedFields", "selfLink"}
)
Path = tuple[str, ...]
_MISSING = object()


def configuration(data: Any, text: str) -> JsonObject:
    """The applied configuration of a request (parsed JSON, or the YAML text); 400 without apiVersion and kind."""
    config = data if isinstance(data, dict) else yaml.safe_load(text or "")
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        raise bad_request("an applied configuration needs apiVersion and kind")
    return config


def owned_paths(config: Mapping[str, Any], has_status: bool) -> set[Path]:
    """The fields an applied configuration sets: every leaf (a scalar, a list, an empty map) by its path."""
    paths: set[Path] = set()

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, Mapping) and value:
            for key, child in value.items():
                walk(child, (*path, str(key)))
        else:
            paths.add(path)

    for key, value in config.items():
        if key in ("apiVersion", "kind") or (key == "status" and has_status):
            continue
        if key == "metadata":
            for meta_key, meta_value in (value or {}).items():
                if meta_key not in UNOWNED_METADATA:
                    walk(meta_value, ("metadata", str(meta_key)))
        else:
            walk(value, (str(key),))
    return paths


def fields_v1(paths: set[Path]) -> JsonObject:
    """Paths as `managedFields[].fieldsV1` (`{"f:spec": {"f:template": {...}}}`); lists are atomic here."""
    root: JsonObject = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def paths_of(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue  # `k:`/`v:`/`i:` list items and the `.` self marker: not produced by this model
        path = (*prefix, key[2:])
        found |= paths_of(child, path) if child else {path}
    return found


def _value_at(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _remove_path(obj: JsonObject, path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
    node.pop(path[-1], None)


def _merge_applied(target: JsonObject, config: Mapping[str, Any]) -> None:
    for key, value in config.items():
        if isinstance(value, Mapping) and value and isinstance(target.get(key), dict):
            _merge_applied(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def _without_managed_fields(obj: Mapping[str, Any]) -> JsonObject:
    return {**obj, "metadata": {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}}


def applied(
    current: Mapping[str, Any] | None, config: Mapping[str, Any], *, manager: str, force: bool, has_status: bool
) -> JsonObject | None:
    """The object an apply leaves: a new one to create when `current` is None (without the server's
    metadata), the merged one otherwise, None when it changes nothing. Preconditions are the caller's."""
    owned = owned_paths(config, has_status)
    body = {k: copy.deepcopy(v) for k, v in config.items() if not (k == "status" and has_status)}
    body["metadata"] = {k: v for k, v in (config.get("metadata") or {}).items() if k not in UNOWNED_METADATA}
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": config["apiVersion"],
        "time": now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": fields_v1(owned),
    }
    if current is None:
        body["metadata"]["managedFields"] = [entry]
        return body
    metadata = current.get("metadata") or {}
    entries = [dict(e) for e in metadata.get("managedFields") or []]
    appliers = [e for e in entries if e.get("operation") == "Apply" and e.get("manager") != manager]
    others = {str(e.get("manager")): paths_of(e.get("fieldsV1") or {}) for e in appliers}
    previous = next(
        (
            paths_of(e.get("fieldsV1") or {})
            for e in entries
            if e.get("operation") == "Apply" and e.get("manager") == manager
        ),
        set(),
    )
    contested = {
        other: {p for p in paths & owned if _value_at(current, p) != _value_at(config, p)}
        for other, paths in others.items()
    }
    contested = {other: paths for other, paths in contested.items() if paths}
    if contested and not force:
        fields = sorted("." + ".".join(p) for paths in contested.values() for p in paths)
        owners = ", ".join(f'"{m}"' for m in sorted(contested))
        raise error(
            409, "Conflict", f"Apply failed with {len(fields)} conflicts: conflict with {owners}: {', '.join(fields)}"
        )
    result = copy.deepcopy(dict(current))
    for path in previous - owned:
        if not any(path in paths for paths in others.values()):
            _remove_path(result, path)
    _merge_applied(result, body)
    for applier in appliers:
        taken = contested.get(str(applier.get("manager")))
        if taken:
            applier["fieldsV1"] = fields_v1(others[str(applier["manager"])] - taken)
    kept = [e for e in entries if not (e.get("operation") == "Apply" and e.get("manager") == manager)]
    result["metadata"] = {**result.get("metadata", {}), **{k: metadata[k] for k in UNOWNED_METADATA if k in metadata}}
    if has_status:
        result["status"] = copy.deepcopy(current.get("status"))
        result = {k: v for k, v in result.items() if v is not None}
    unchanged = _without_managed_fields(result) == _without_managed_fields(current)
    if unchanged and previous == owned and not contested:
        return None
    result["metadata"]["managedFields"] = [*kept, entry]
    return result
