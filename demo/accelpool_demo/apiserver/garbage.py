"""The garbage collector's decisions (kube-controller-manager's pkg/controller/garbagecollector). Pure.

From the objects stored and their ownerReferences (`Graph`):

- an owner deleted with `propagationPolicy: Orphan` (its `orphan` finalizer): each dependent loses the
  reference to it, then the finalizer goes (garbagecollector.go `orphanDependents`);
- an owner deleted with `propagationPolicy: Foreground` (its `foregroundDeletion` finalizer): each
  dependent is deleted; once none is left, the finalizer goes (`processDeletingDependentsItem`);
- an object with references: to owners that are gone only (or that never existed) → deleted; to some
  that are gone and some that exist → those references removed (`attemptToDeleteItem`: dangling ones);
  one whose owner is being deleted in the foreground → deleted too;
- a reference from an object of no namespace to a namespaced kind is not followed: the graph builder
  reports it once as an `OwnerRefInvalidNamespace` Warning Event (graph_builder.go), and the object stays.

Owners are found by uid, kind and name (and the dependent's namespace for a namespaced kind); a kind
the server does not serve is not followed.
"""

from __future__ import annotations

import copy
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

JsonObject = dict[str, Any]
Key = tuple[kmock.resource, str | None, str]
ORPHAN = "orphan"
FOREGROUND = "foregroundDeletion"
FINALIZERS = {"Orphan": ORPHAN, "Foreground": FOREGROUND}
"""The finalizer a deletion's propagationPolicy puts on the owner (Background: none)."""
COMPONENT = "garbage-collector-controller"


@dataclass
class Action:
    delete: bool = False
    object: JsonObject | None = None
    """The object to store instead (references or a finalizer removed)."""


class Graph:
    def __init__(self, live: Mapping[Key, JsonObject], namespaced: Callable[[str, str], bool | None]) -> None:
        self.live = live
        self.namespaced = namespaced
        self.by_uid = {str((o.get("metadata") or {}).get("uid")): (k, o) for k, o in live.items()}
        self.dependents: dict[str, list[Key]] = {}
        for key, obj in live.items():
            for reference in _references(obj):
                self.dependents.setdefault(str(reference.get("uid")), []).append(key)

    def actions(self) -> Iterator[tuple[Key, Action]]:
        for key, obj in self.live.items():
            metadata = obj.get("metadata") or {}
            finalizers = metadata.get("finalizers") or []
            uid = str(metadata.get("uid"))
            if metadata.get("deletionTimestamp") and ORPHAN in finalizers:
                for dependent in self.dependents.get(uid, []):
                    yield dependent, Action(object=_without_reference(self.live[dependent], uid))
                yield key, Action(object=_without_finalizer(obj, ORPHAN))
            elif metadata.get("deletionTimestamp") and FOREGROUND in finalizers:
                waiting = self.dependents.get(uid, [])
                for dependent in waiting:
                    yield dependent, Action(delete=True)
                if not waiting:
                    yield key, Action(object=_without_finalizer(obj, FOREGROUND))
            elif _references(obj) and not metadata.get("deletionTimestamp"):
                action = self._dependent(key, obj)
                if action is not None:
                    yield key, action

    def _dependent(self, key: Key, obj: JsonObject) -> Action | None:
        gone, kept = [], 0
        for reference in _references(obj):
            state = self._owner_state(key, reference)
            if state == "gone":
                gone.append(str(reference.get("uid")))
            elif state == "deleting":
                return Action(delete=True)
            elif state in ("solid", "ignored"):
                kept += 1
        if gone and not kept:
            return Action(delete=True)
        if gone:
            result = obj
            for uid in gone:
                result = _without_reference(result, uid)
            return Action(object=result)
        return None

    def _owner_state(self, key: Key, reference: Mapping[str, Any]) -> str:
        namespaced = self.namespaced(str(reference.get("apiVersion")), str(reference.get("kind")))
        if namespaced is None or (namespaced and key[1] is None):
            return "ignored"
        found = self.by_uid.get(str(reference.get("uid")))
        if found is None:
            return "gone"
        owner_key, owner = found
        same = owner.get("kind") == reference.get("kind") and owner_key[2] == reference.get("name")
        if not same or (namespaced and owner_key[1] != key[1]):
            return "gone"
        metadata = owner.get("metadata") or {}
        if metadata.get("deletionTimestamp") and FOREGROUND in (metadata.get("finalizers") or []):
            return "deleting"
        return "solid"

    def invalid_namespaces(self) -> Iterator[tuple[JsonObject, Mapping[str, Any]]]:
        """Objects of no namespace with a reference to a namespaced kind, and that reference."""
        for key, obj in self.live.items():
            if key[1] is not None:
                continue
            for reference in _references(obj):
                if self.namespaced(str(reference.get("apiVersion")), str(reference.get("kind"))):
                    yield obj, reference


def invalid_namespace_event(dependent: Mapping[str, Any], reference: Mapping[str, Any], now: str) -> JsonObject:
    """The Warning the graph builder records (graph_builder.go `reportInvalidNamespaceOwnerRef`), in `default`."""
    metadata = dependent.get("metadata") or {}
    namespace = str(metadata.get("namespace") or "")
    message = (
        f"ownerRef [{reference.get('apiVersion')}/{reference.get('kind')}, namespace: {namespace}, "
        f'name: {reference.get("name")}, uid: {reference.get("uid")}] does not exist in namespace "{namespace}"'
    )
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{metadata.get('name')}.{uuid.uuid4().hex[:16]}", "namespace": "default"},
        "involvedObject": {
            "kind": dependent.get("kind"),
            "name": metadata.get("name"),
            "uid": metadata.get("uid"),
            "apiVersion": dependent.get("apiVersion"),
        },
        "reason": "OwnerRefInvalidNamespace",
        "message": message,
        "source": {"component": COMPONENT},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "type": "Warning",
        "eventTime": None,
        "reportingComponent": "",
        "reportingInstance": "",
    }


def _references(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = (obj.get("metadata") or {}).get("ownerReferences") or []
    return [r for r in found if isinstance(r, Mapping)]


def _without_reference(obj: Mapping[str, Any], uid: str) -> JsonObject:
    result = copy.deepcopy(dict(obj))
    kept = [r for r in _references(result) if str(r.get("uid")) != uid]
    if kept:
        result["metadata"]["ownerReferences"] = kept
    else:
        result["metadata"].pop("ownerReferences", None)
    return result


def _without_finalizer(obj: Mapping[str, Any], finalizer: str) -> JsonObject:
    result = copy.deepcopy(dict(obj))
    kept = [f for f in result["metadata"].get("finalizers") or [] if f != finalizer]
    if kept:
        result["metadata"]["finalizers"] = kept
    else:
        result["metadata"].pop("finalizers", None)
    return result
