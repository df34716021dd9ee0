"""Raw Kubernetes objects (from the API, the kopf indexes or YAML files) → the planner's inputs. Pure.

- `pool_input(body)`: a ComputePool object → `PoolInput`, validated with `accelpool.validation`
  (an invalid spec gives `spec=None` and its problems, which become `Valid=False`). A name
  longer than 63 characters is a problem too: it could not be the value of the pool label.
- `nodes_from_yaml(text)`: a `kubectl get nodes -o yaml` snapshot (a v1 List, a NodeList, or a
  stream of Node documents) → `NodeView`s.
- `pools_from_yaml(text)`: ComputePools from files (a stream or a List) → `PoolInput`s.
- `config_state(device_plugin, mig)`: the two NVIDIA ConfigMaps → `ConfigState`.

Callers: the reconciler and `accelpool plan`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import yaml
from pydantic import ValidationError

from accelpool import api, conventions, nvidia, validation
from accelpool.nodes import NodeView
from accelpool.patches import parse_managed
from accelpool.planning import ConfigState, PoolInput


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


def pool_input(body: Mapping[str, Any], *, checked: tuple[Any, ...] | None = None) -> PoolInput:
    """A ComputePool object → PoolInput. `checked` may carry a cached (spec, problems) validation result."""
    metadata = body.get("metadata") or {}
    name = str(metadata.get("name", ""))
    spec_raw = body.get("spec") or {}
    if checked is None:
        checked = validate(spec_raw)
    spec, problems = checked
    problems = tuple(_name_problems(name)) + tuple(problems)
    return PoolInput(
        name=name,
        spec=spec if not problems else None,
        problems=problems,
        uid=str(metadata.get("uid") or ""),
        generation=metadata.get("generation"),
        created=metadata.get("creationTimestamp"),
        deleting=bool(metadata.get("deletionTimestamp")),
        previous=previous_status(body.get("status")),
    )


def validate(spec_raw: Mapping[str, Any]) -> tuple[api.ComputePoolSpec | None, tuple[str, ...]]:
    spec, problems = validation.validate_spec(spec_raw)
    return spec, tuple(str(p) for p in problems)


def spec_key(spec_raw: Mapping[str, Any]) -> str:
    """A cache key for a spec's validation result."""
    return json.dumps(spec_raw, sort_keys=True, default=str)


def _documents(text: str) -> Iterator[Mapping[str, Any]]:
    for document in yaml.safe_load_all(text):
        if not isinstance(document, Mapping):
            continue
        if str(document.get("kind", "")).endswith("List") and isinstance(document.get("items"), list):
            yield from (item for item in document["items"] if isinstance(item, Mapping))
        else:
            yield document


def nodes_from_yaml(text: str) -> list[NodeView]:
    return [NodeView.from_body(doc) for doc in _documents(text) if doc.get("kind", "Node") == "Node"]


def pools_from_yaml(text: str) -> list[PoolInput]:
    pools: list[PoolInput] = []
    for document in _documents(text):
        if document.get("kind") != api.KIND:
            continue
        verdict = validation.validate_object({k: v for k, v in document.items() if k != "status"})
        metadata = document.get("metadata") or {}
        name = str(metadata.get("name", "?")) if isinstance(metadata, Mapping) else "?"
        problems = tuple(_name_problems(name)) + tuple(str(p) for p in verdict.problems)
        pools.append(
            PoolInput(
                name=name,
                spec=verdict.pool.spec if verdict.pool is not None and not problems else None,
                problems=problems,
                uid=str(metadata.get("uid") or ""),
                generation=metadata.get("generation"),
                created=metadata.get("creationTimestamp"),
                deleting=bool(metadata.get("deletionTimestamp")),
                previous=previous_status(document.get("status")),
            )
        )
    return pools


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
