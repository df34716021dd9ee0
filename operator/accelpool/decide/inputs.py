"""Raw Kubernetes objects (from the API, the kopf indexes or YAML files) → the planner's inputs.

- `PoolRecord.from_body(body)`: a ComputePool as the operator keeps it (the kopf index's value, a
  listed pool): plain immutable copies of its metadata, spec and status. Records compare equal
  when everything planning reads is equal (the status is not compared), and `validation_key`
  names the one validation a (uid, spec) ever needs.
- `pool_input(record, checked=..., previous=...)`: a record → `PoolInput`, validated with
  `accelpool_api.validation` unless the caller passes a cached result (`validate(record.spec)`); an
  invalid spec gives `spec=None` and its problems, which become `Valid=False`. A name longer
  than 63 characters is a problem too: it could not be the value of the pool label.
- `pool_from_file(document)`: the same for a ComputePool read from a file, whose `status` is
  not validated (files are often `kubectl get -o yaml` output).
- the shape of an object read from a file is checked first (`accelpool.model.shapes`).
- `nodes_from_yaml(text)`: a `kubectl get nodes -o yaml` snapshot (a v1 List, a NodeList, or a
  stream of Node documents) → `NodeView`s, for text the caller trusts (test fixtures); the
  commands read files with `accelpool_core.textio.read_objects`, which bounds what a file may cost.
- `config_state(device_plugin, mig)`: the two NVIDIA ConfigMaps → `ConfigState`.

Callers: the controller (`accelpool.runtime.controller`), `accelpool plan` and `accelpool validate`.
"""

from __future__ import annotations

import copy
import functools
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml

import accelpool_api as api
from accelpool.decide.patches import parse_managed
from accelpool.decide.planning import ConfigState, PoolInput
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool.model.shapes import node_problems
from accelpool_api import conventions, validation


def _name_problems(name: str) -> list[str]:
    if not conventions.is_label_value(name):
        return [
            f"metadata.name: {name!r} is longer than {conventions.LABEL_VALUE_MAX} characters; the pool's name "
            f"is the value of the {conventions.POOL_LABEL} node label, so it must fit a label value"
        ]
    return []


Checked = tuple[api.ComputePoolSpec | None, tuple[str, ...]]
"""A spec's validation: the model (None when invalid) and its problems."""


@dataclass(frozen=True)
class PoolRecord:
    """A ComputePool as the operator keeps it (the kopf index's value): plain, immutable copies."""

    name: str
    uid: str
    generation: int | None
    created: str | None
    deleting: bool
    spec_key: str
    """The spec as canonical JSON: records with equal specs compare equal, and it keys the validation cache."""
    spec: Mapping[str, Any] = field(compare=False)
    status: Mapping[str, Any] = field(default_factory=dict, compare=False)
    check_request: str | None = None
    """The pool's `accelpool.io/check-requested` token, copied to its members."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PoolRecord:
        metadata = body.get("metadata") or {}
        spec = copy.deepcopy(dict(body.get("spec") or {}))
        return cls(
            name=str(metadata.get("name", "?")),
            uid=str(metadata.get("uid") or ""),
            generation=metadata.get("generation"),
            created=metadata.get("creationTimestamp"),
            deleting=bool(metadata.get("deletionTimestamp")),
            spec_key=json.dumps(spec, sort_keys=True, default=str),
            spec=spec,
            status=copy.deepcopy(dict(body.get("status") or {})),
            check_request=_annotation(metadata, conventions.CHECK_REQUEST_ANNOTATION),
        )

    @functools.cached_property
    def validation_key(self) -> tuple[str, str]:
        """The same pool with the same spec validates the same: (uid, spec)."""
        return (self.uid or self.name, self.spec_key)


def _annotation(metadata: Mapping[str, Any], key: str) -> str | None:
    value = (metadata.get("annotations") or {}).get(key)
    return value if isinstance(value, str) else None


def pool_input(
    record: PoolRecord, *, checked: Checked | None = None, previous: api.ComputePoolStatus | None = None
) -> PoolInput:
    """A record → PoolInput. `checked`: a cached `validate(record.spec)`; `previous`: the status the pool
    is known to have (the operator's own latest), else the one the record carries."""
    spec, problems = checked if checked is not None else validate(record.spec)
    problems = tuple(_name_problems(record.name)) + problems
    return PoolInput(
        name=record.name,
        spec=spec if not problems else None,
        problems=problems,
        uid=record.uid,
        generation=record.generation,
        created=record.created,
        deleting=record.deleting,
        previous=previous if previous is not None else api.read_status(record.status),
        check_request=record.check_request,
    )


def validate(spec_raw: Mapping[str, Any]) -> Checked:
    """A stored pool's spec, judged as the API server judges a new one; a `holdDown` stored below the floor is
    read as the floor (`hold_down_below_floor`)."""
    if hold_down_below_floor(spec_raw) is not None:
        health = {**spec_raw["health"], "holdDown": api.MIN_HOLD_DOWN}
        spec_raw = {**spec_raw, "health": health}
    spec, problems = validation.validate_spec(spec_raw)
    return spec, tuple(str(p) for p in problems)


def hold_down_below_floor(spec_raw: Mapping[str, Any]) -> str | None:
    """The stored `health.holdDown` when it is a duration below `api.MIN_HOLD_DOWN`, else None.

    Pools admitted before the floor existed keep such a value: the API server admits updates that leave
    it unchanged (CRD validation ratcheting, KEP-4008). Read as invalid, such a pool's quarantines would
    never be lifted; read as the floor, it goes on as its owner meant, and the controller says so.
    """
    health = spec_raw.get("health")
    hold_down = health.get("holdDown") if isinstance(health, Mapping) else None
    if not isinstance(hold_down, str) or not re.fullmatch(api.DURATION_PATTERN, hold_down):
        return None
    return hold_down if api.parse_duration(hold_down) < api.parse_duration(api.MIN_HOLD_DOWN) else None


def _documents(text: str) -> Iterator[Mapping[str, Any]]:
    for document in yaml.safe_load_all(text):
        if not isinstance(document, Mapping):
            continue
        if str(document.get("kind", "")).endswith("List") and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, Mapping))
        else:
            yield document


def nodes_from_yaml(text: str) -> list[NodeView]:
    """Nodes from trusted YAML text; `ValueError` for a Node of the wrong shape (see `node_problems`)."""
    nodes = [doc for doc in _documents(text) if doc.get("kind", "Node") == "Node"]
    for doc in nodes:
        problems = node_problems(doc)
        if problems:
            raise ValueError("; ".join(str(p) for p in problems))
    return [NodeView.from_body(doc) for doc in nodes]


def pool_from_file(document: Mapping[str, Any]) -> PoolInput:
    """A ComputePool read from a file (its shape checked with `object_problems`) → PoolInput."""
    verdict = validation.validate_object({k: v for k, v in document.items() if k != "status"})
    spec = verdict.pool.spec if verdict.pool is not None else None
    return pool_input(PoolRecord.from_body(document), checked=(spec, tuple(str(p) for p in verdict.problems)))


# ---------------------------------------------------------------- shapes of objects read from files


def config_state(device_plugin: Mapping[str, Any] | None, mig: Mapping[str, Any] | None) -> ConfigState:
    dp_data = dict((device_plugin or {}).get("data") or {}) if device_plugin is not None else None
    dp_annotations = ((device_plugin or {}).get("metadata") or {}).get("annotations") or {}
    mig_annotations = ((mig or {}).get("metadata") or {}).get("annotations") or {}
    mig_document = None
    if mig is not None:
        loaded = nvidia.load((mig.get("data") or {}).get(conventions.MIG_CONFIG_DATA_KEY))
        mig_document = loaded if isinstance(loaded, Mapping) else {}
    return ConfigState(
        device_plugin=dp_data,
        device_plugin_managed=parse_managed(dp_annotations.get(conventions.MANAGED_KEYS_ANNOTATION)),
        mig=mig_document,
        mig_managed=parse_managed(mig_annotations.get(conventions.MANAGED_ENTRIES_ANNOTATION)),
    )
