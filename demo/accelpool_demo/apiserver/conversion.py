"""Resources served from another's storage, converted. Pure.

- events.k8s.io/v1 Events are core/v1 Events, one object read and written through either API
  (pkg/apis/events/v1/conversion.go: `regarding` is `involvedObject`, `note` is `message`,
  `deprecatedSource` `source`, `reportingController` `reportingComponent`...). Objects are stored as core/v1
  Events, each API shows them in its own shape (`typed`: the Go types' fields that are never left out);
- resource.k8s.io/v1beta2 objects are stored as v1 ones (`dra`): the same fields, another `apiVersion`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from accelpool_demo.apiserver import dra
from accelpool_demo.apiserver.typed import shaped_core_event, shaped_new_event

JsonObject = dict[str, Any]
NEW_EVENTS = "events.k8s.io/v1/events"
CORE_EVENTS = "v1/events"
STORED_AS = {NEW_EVENTS: CORE_EVENTS, **dra.STORED_AS}
"""Resources whose objects are stored as another's (resource key → the storage's)."""
_RENAMED = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
    ("reportingController", "reportingComponent"),
)
"""events.k8s.io/v1 fields and their core/v1 names (the rest are named alike)."""


def storage_of(key: str) -> str:
    return STORED_AS.get(key, key)


def to_storage(key: str, obj: Mapping[str, Any]) -> JsonObject:
    """An object of resource `key` as its storage holds it."""
    result = copy.deepcopy(dict(obj))
    if key in dra.STORED_AS:
        result["apiVersion"] = _api_version(dra.STORED_AS[key])
    if key != NEW_EVENTS:
        return result
    for new, core in _RENAMED:
        if new in result:
            result[core] = result.pop(new)
    result["apiVersion"] = "v1"
    return shaped_core_event(result)


def from_storage(key: str, obj: Mapping[str, Any]) -> JsonObject:
    """A stored object as resource `key` shows it."""
    if key in dra.STORED_AS:
        return {**obj, "apiVersion": _api_version(key)}
    if key != NEW_EVENTS:
        return dict(obj)
    result = copy.deepcopy(dict(obj))
    for new, core in _RENAMED:
        if core in result:
            result[new] = result.pop(core)
    result["apiVersion"] = "events.k8s.io/v1"
    return shaped_new_event(result)


def _api_version(key: str) -> str:
    """`resource.k8s.io/v1beta2` of `resource.k8s.io/v1beta2/devicetaintrules`."""
    return key.rsplit("/", 1)[0]
