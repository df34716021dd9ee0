"""Which pods use a quarantined GPU: the pods a GPU-scoped drain evicts. Pure.

A pod holds a device through a ResourceClaim: the claim's `status.allocation.devices.results[]` name the
devices (`driver`, `pool`, `device`) and its `status.reservedFor[]` the pods using it (k8s.io/api
`resource/v1/types.go`; kube-scheduler reserves the claim for the pod it binds). With `spec.health.drain`,
accelpool evicts those pods through the Eviction API, honouring PodDisruptionBudgets, as it drains a node
(`accelpool.model.evictions`); a `NoExecute` rule needs no drain: kube-controller-manager's
device-taint-eviction controller deletes them (`pkg/controller/devicetainteviction`, no PDB).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import Any

from accelpool.decide.dra.slices import DRIVER
from accelpool.model.evictions import PodRef
from accelpool.model.nodes import mapping


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def pods_using(claims: Iterable[Mapping[str, Any]], devices: Collection[tuple[str, str]]) -> list[PodRef]:
    """The pods reserving a claim allocated any of `devices` ((node, device name) of `gpu.nvidia.com`)."""
    found: set[PodRef] = set()
    for claim in claims:
        metadata, status = mapping(claim.get("metadata")), mapping(claim.get("status"))
        results = _items(mapping(mapping(status.get("allocation")).get("devices")).get("results"))
        if not any(r.get("driver") == DRIVER and (r.get("pool"), r.get("device")) in devices for r in results):
            continue
        namespace = str(metadata.get("namespace") or "")
        for consumer in _items(status.get("reservedFor")):
            if consumer.get("resource") == "pods" and not consumer.get("apiGroup") and consumer.get("name"):
                found.add(PodRef(namespace, str(consumer["name"])))
    return sorted(found, key=str)
