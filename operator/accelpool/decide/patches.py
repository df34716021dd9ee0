"""The smallest writes that turn what is into what the plan wants.

- `node_patch(view, change)`: a JSON merge patch for a Node carrying only the labels,
  annotations, taints and cordon that differ, plus `metadata.resourceVersion` so the API server
  rejects it with 409 if the node changed since it was read (optimistic concurrency). Taints are
  a list, which a merge patch replaces whole: the new list is the current one with accelpool's
  additions and removals applied, so other controllers' taints are written back as they were
  read (and the resourceVersion guarantees nobody changed them in between). None when nothing
  differs.
- `health_removal(view, change)`: the JSON patch that takes the agent's `AcceleratorHealthy`
  condition off a released node (`nodes/<name>/status`).
- `configmap_patch(current, name, namespace, data, managed, annotation)`: the create body or
  merge patch for one of the NVIDIA ConfigMaps (None: no change), removing only keys accelpool
  owns.
- `merge_diff(current, desired)`: a JSON merge patch (RFC 7386) from one document to another;
  None when equal. Used for `status`.

Callers: the controller's writers (`accelpool.runtime.controller.writes`, `.status`) and the tests.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from accelpool.model.nodes import NodeChange, NodeView, merge_taints
from accelpool_api import conventions


def node_patch(view: NodeView, change: NodeChange) -> dict[str, Any] | None:
    metadata: dict[str, Any] = {}
    labels = {k: v for k, v in change.labels.items() if view.labels.get(k) != v}
    if labels:
        metadata["labels"] = labels
    annotations = {k: v for k, v in change.annotations.items() if view.annotations.get(k) != v}
    if annotations:
        metadata["annotations"] = annotations
    spec: dict[str, Any] = {}
    taints = merge_taints(view.taints, change.add_taints, change.remove_taints)
    if [t.to_dict() for t in taints] != [t.to_dict() for t in view.taints]:
        spec["taints"] = [t.to_dict() for t in taints] or None
    if change.unschedulable is not None and change.unschedulable != view.unschedulable:
        spec["unschedulable"] = True if change.unschedulable else None
    if not metadata and not spec:
        return None
    if view.resource_version:
        metadata["resourceVersion"] = view.resource_version
    patch: dict[str, Any] = {"metadata": metadata}
    if spec:
        patch["spec"] = spec
    return patch


def health_removal(view: NodeView, change: NodeChange) -> list[dict[str, Any]] | None:
    """A JSON patch for `nodes/<name>/status` that removes the agent's condition, or None.

    By position, guarded by a `test` of its type: if the kubelet reordered the conditions since the
    node was read, the API server refuses the patch (422) and the next pass reads it afresh.
    """
    if not change.drop_health or view.health_index is None:
        return None
    path = f"/status/conditions/{view.health_index}"
    return [
        {"op": "test", "path": f"{path}/type", "value": conventions.HEALTH_CONDITION},
        {"op": "remove", "path": path},
    ]


def _managed_text(keys: frozenset[str]) -> str:
    return ",".join(sorted(keys))


def parse_managed(text: str | None) -> frozenset[str]:
    return frozenset(k for k in (text or "").split(",") if k)


def configmap_patch(
    current: Mapping[str, Any] | None,
    *,
    name: str,
    namespace: str,
    data: Mapping[str, str],
    managed: frozenset[str],
    annotation: str,
) -> tuple[str, dict[str, Any]] | None:
    """("create", body) for a missing ConfigMap, ("patch", merge patch) for a changed one, None otherwise."""
    if current is None:
        return "create", {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": name,
                "namespace": namespace,
                "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY},
                "annotations": {annotation: _managed_text(managed)},
            },
            "data": dict(data),
        }
    metadata = current.get("metadata") or {}
    old_data: Mapping[str, str] = current.get("data") or {}
    patch_data: dict[str, str | None] = {k: v for k, v in data.items() if old_data.get(k) != v}
    for key in old_data:
        if key not in data:
            patch_data[key] = None
    patch_metadata: dict[str, Any] = {}
    if (metadata.get("annotations") or {}).get(annotation) != _managed_text(managed):
        patch_metadata["annotations"] = {annotation: _managed_text(managed)}
    if not patch_data and not patch_metadata:
        return None
    if metadata.get("resourceVersion"):
        patch_metadata["resourceVersion"] = metadata["resourceVersion"]
    patch: dict[str, Any] = {"metadata": patch_metadata}
    if patch_data:
        patch["data"] = patch_data
    return "patch", patch


def merge_diff(current: Any, desired: Any) -> Any:
    """The JSON merge patch taking `current` to `desired`; None when they are equal.

    Mappings are diffed key by key (a key missing from `desired` becomes null); anything else
    (lists included) is replaced whole.
    """
    if isinstance(current, Mapping) and isinstance(desired, Mapping):
        patch: dict[str, Any] = {}
        for key, value in desired.items():
            if key not in current:
                patch[key] = value
                continue
            inner = merge_diff(current[key], value)
            if inner is not None:
                patch[key] = inner
        for key in current:
            if key not in desired:
                patch[key] = None
        return patch or None
    if current == desired:
        return None
    return desired
