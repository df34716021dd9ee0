"""What the API server hands a ValidatingAdmissionPolicy for a Node write, for tests of the chart's
policy (accelpool_demo.apiserver.policies evaluates it).

`patched_node(old, body, patch_type, subresource)` is what the API server hands to admission for
a PATCH of a Node: the JSON merge patch (RFC 7386) or strategic-merge patch applied (a strategic
patch merges `status.conditions` by `type`, their patchMergeKey in k8s.io/api/core/v1/types.go;
other lists are replaced), then the node registry's PrepareForUpdate (pkg/registry/core/node/
strategy.go: an update of `nodes` keeps the old status, one of `nodes/status` the old spec), then
the field manager's new managedFields entry (apiserver pkg/endpoints/handlers/patch.go), all
before the validating admission of registry/generic/registry/store.go's Update.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

import jsonpatch

from accelpool_demo.apiserver.policies import Decision, admit
from accelpool_demo.apiserver.webhooks import Attributes, UserInfo

__all__ = ["Decision", "admit", "as_user", "merge_patch", "node_write", "patched_node"]


def node_write(
    operation: str,
    resource: str,
    name: str,
    username: str,
    object: dict[str, Any] | None = None,
    old_object: dict[str, Any] | None = None,
    subresource: str = "",
    extra: Mapping[str, Sequence[str]] | None = None,
    groups: Sequence[str] = (),
    group: str = "",
    version: str = "v1",
    kind: str = "Node",
    namespace: str | None = None,
) -> Attributes:
    """The admission attributes of a write by `username` (a Node write unless told otherwise)."""
    user = UserInfo(username=username, groups=tuple(groups), extra=dict(extra or {}))
    return Attributes(operation, group, version, resource, kind, name, namespace, subresource, object, old_object, user)


def as_user(
    request: Attributes, *, username: str | None = None, extra: Mapping[str, Sequence[str]] | None = None
) -> Attributes:
    """The same write by another user, or with other extra user information."""
    user = replace(
        request.user,
        username=request.user.username if username is None else username,
        extra=request.user.extra if extra is None else dict(extra),
    )
    return replace(request, user=user)


# ---- What a PATCH of a Node hands to admission.


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strategic(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A merge patch whose status.conditions merge by `type` (the only merge key a Node patch here uses)."""
    conditions = (patch.get("status") or {}).get("conditions")
    if conditions is None:
        return dict(merge_patch(target, patch))
    rest = merge_patch(patch, {"status": {"conditions": None}})
    result: dict[str, Any] = merge_patch(target, rest)
    merged = [dict(c) for c in (target.get("status") or {}).get("conditions") or []]
    for condition in conditions:
        for index, existing in enumerate(merged):
            if existing.get("type") == condition.get("type"):
                merged[index] = merge_patch(existing, condition)
                break
        else:
            merged.append(dict(condition))
    result.setdefault("status", {})["conditions"] = merged
    return result


def patched_node(
    old: dict[str, Any], body: Any, patch_type: str, *, subresource: str = "", manager: str = "agent"
) -> dict[str, Any]:
    """The Node that validating admission sees for a PATCH of `old` with `body`.

    A JSON patch (RFC 6902) whose `test` fails raises `jsonpatch.JsonPatchTestFailed`: the API server
    answers 422 before admission (k8s.io/apiserver pkg/endpoints/handlers/patch.go)."""
    if patch_type not in ("merge", "strategic", "json"):
        raise ValueError(f"patch type {patch_type!r} is not modelled")
    if patch_type == "json":
        new = jsonpatch.apply_patch(old, body)
    else:
        new = _strategic(old, body) if patch_type == "strategic" else merge_patch(old, body)
    if subresource == "status":
        new["spec"] = copy.deepcopy(old.get("spec", {}))
    elif subresource == "":
        new["status"] = copy.deepcopy(old.get("status", {}))
    else:
        raise ValueError(f"subresource {subresource!r} is not modelled")
    entries = [e for e in old["metadata"].get("managedFields", []) if e.get("manager") != manager]
    entries.append(
        {"manager": manager, "operation": "Update", "subresource": subresource, "time": "2026-01-01T00:00:00Z"}
    )
    new["metadata"]["managedFields"] = entries
    return copy.deepcopy(new)
