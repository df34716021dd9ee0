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
- `object_problems(body)` / `node_problems(body)`: the shape of an object read from a file,
  before anything reads it: a mapping, `metadata` a mapping with a string `name`, `labels` and
  `annotations` mappings of strings to strings, `spec` and `status` mappings; for Nodes also
  every field `NodeView.from_body` reads (taints, conditions, capacity). Each problem is an
  `api.Problem` with a field path; the commands add the file and the document.
- `nodes_from_yaml(text)`: a `kubectl get nodes -o yaml` snapshot (a v1 List, a NodeList, or a
  stream of Node documents) → `NodeView`s, for text the caller trusts (test fixtures); the
  commands read files with `accelpool_core.textio.read_objects`, which bounds what a file may cost.
- `config_state(device_plugin, mig)`: the two NVIDIA ConfigMaps → `ConfigState`.

Callers: the controller (`accelpool.runtime.controller`), `accelpool plan` and `accelpool validate`.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

import accelpool_api as api
from accelpool.decide.patches import parse_managed
from accelpool.decide.planning import ConfigState, PoolInput
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions, validation


def _name_problems(name: str) -> list[str]:
    if not conventions.is_label_value(name):
        return [
            f"metadata.name: {name!r} is longer than {conventions.LABEL_VALUE_MAX} characters; the pool's name "
            f"is the value of the {conventions.POOL_LABEL} node label, so it must fit a label value"
        ]
    return []


def previous_status(raw: Any) -> api.ComputePoolStatus | None:
    if not isinstance(raw, Mapping) or not raw:
        return None
    known = {k: v for k, v in raw.items() if k in _STATUS_FIELDS}
    try:
        return api.ComputePoolStatus.model_validate(known)
    except ValidationError:
        return None


_STATUS_FIELDS = frozenset(
    (info.alias or name) for name, info in api.ComputePoolStatus.model_fields.items()
) | frozenset(api.ComputePoolStatus.model_fields)


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

    @property
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
        previous=previous if previous is not None else previous_status(record.status),
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


_METADATA_STRINGS = ("name", "namespace", "uid", "resourceVersion", "creationTimestamp", "deletionTimestamp")


def object_problems(body: Any) -> list[api.Problem]:
    """What is wrong with the envelope every Kubernetes object shares; [] when it can be read."""
    if not isinstance(body, Mapping):
        return [api.Problem("(document)", body, f"expected a Kubernetes object (a mapping), got {_a(body)}")]
    problems: list[api.Problem] = []
    for key in ("apiVersion", "kind"):
        _expect(problems, body, key, key, str)
    for key in ("spec", "status"):
        _expect(problems, body, key, key, Mapping)
    metadata = body.get("metadata")
    if not _expect(problems, body, "metadata", "metadata", Mapping) or metadata is None:
        return problems
    for key in _METADATA_STRINGS:
        _expect(problems, metadata, key, f"metadata.{key}", str)
    generation = metadata.get("generation")
    if generation is not None and (not isinstance(generation, int) or isinstance(generation, bool)):
        problems.append(api.Problem("metadata.generation", generation, f"must be an integer, got {_a(generation)}"))
    for key in ("labels", "annotations"):
        _string_map(problems, metadata, key, f"metadata.{key}")
    return problems


def node_problems(body: Any) -> list[api.Problem]:
    """`object_problems`, a name, and the shape of every field `NodeView.from_body` reads."""
    problems = object_problems(body)
    if problems:
        return problems
    name = (body.get("metadata") or {}).get("name")
    if not name:
        problems.append(api.Problem("metadata.name", None, "a Node needs a name"))
    spec = body.get("spec") or {}
    if _expect(problems, spec, "taints", "spec.taints", list):
        for i, taint in enumerate(spec.get("taints") or []):
            path = f"spec.taints[{i}]"
            if not _expect_value(problems, taint, path, Mapping):
                continue
            for key in ("key", "effect"):
                if taint.get(key) is None:
                    problems.append(api.Problem(f"{path}.{key}", None, "required field is missing"))
            for key in ("key", "effect", "value", "timeAdded"):
                _expect(problems, taint, key, f"{path}.{key}", str)
    _expect(problems, spec, "unschedulable", "spec.unschedulable", bool)
    status = body.get("status") or {}
    if _expect(problems, status, "conditions", "status.conditions", list):
        for i, condition in enumerate(status.get("conditions") or []):
            path = f"status.conditions[{i}]"
            if not _expect_value(problems, condition, path, Mapping):
                continue
            if condition.get("type") is None:
                problems.append(api.Problem(f"{path}.type", None, "required field is missing"))
            for key in ("type", "status", "reason", "message", "lastTransitionTime"):
                _expect(problems, condition, key, f"{path}.{key}", str)
    for key in ("capacity", "allocatable"):
        if _expect(problems, status, key, f"status.{key}", Mapping):
            for resource, quantity in (status.get(key) or {}).items():
                if not isinstance(quantity, str | int | float) or isinstance(quantity, bool):
                    problems.append(
                        api.Problem(
                            f"status.{key}[{resource}]",
                            quantity,
                            f"must be a quantity like 8 or 80Gi, got {_a(quantity)}",
                        )
                    )
    return problems


_SHAPES: dict[Any, str] = {str: "a string", Mapping: "a mapping", list: "a list", bool: "true or false"}


def _expect(problems: list[api.Problem], parent: Mapping[str, Any], key: str, path: str, shape: Any) -> bool:
    """Is `parent[key]` absent, null or of `shape`? If not, a problem is added."""
    value = parent.get(key)
    return value is None or _expect_value(problems, value, path, shape)


def _expect_value(problems: list[api.Problem], value: Any, path: str, shape: Any) -> bool:
    if isinstance(value, shape):
        return True
    problems.append(api.Problem(path, value, f"must be {_SHAPES[shape]}, got {_a(value)}"))
    return False


def _string_map(problems: list[api.Problem], parent: Mapping[str, Any], key: str, path: str) -> None:
    """`parent[key]`, when set, must map strings to strings, as labels and annotations do."""
    if not _expect(problems, parent, key, path, Mapping):
        return
    for name, value in (parent.get(key) or {}).items():
        if not isinstance(name, str):
            problems.append(api.Problem(f"{path}", name, f"keys must be strings, got {_a(name)}"))
        elif not isinstance(value, str):
            hint = " (quote it)" if isinstance(value, int | float | bool) else ""
            problems.append(api.Problem(f"{path}[{name}]", value, f"must be a string{hint}, got {_a(value)}"))


def _a(value: Any) -> str:
    """What kind of YAML value this is, in words."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return type(value).__name__


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
