"""accelpool's DeviceTaintRules: their shape, and what one read back says. Pure.

One rule per quarantined device (k8s.io/api `resource/v1/types.go` `DeviceTaintRule`: the selector names a
driver, a pool and a device only since 1.35, and one rule carries one taint), named
`accelpool-<node>-<device>`, labelled with the pool, owned by the ComputePool (both are cluster-scoped, so
the garbage collector deletes a deleted pool's rules), with its bookkeeping in annotations: the GPU's UUID
(device names are minor numbers, not hardware: dra.md 6.4), the cause, when it began, and when the GPU was
first reported healthy again (the hold-down counts from it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import accelpool_api as api
from accelpool.decide.dra.slices import DRIVER
from accelpool.model.nodes import format_time, mapping, parse_time
from accelpool_api import conventions

GROUP = "resource.k8s.io"
KIND = "DeviceTaintRule"
PLURAL = "devicetaintrules"
LABEL_SELECTOR = f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY},{conventions.POOL_LABEL}"
"""The rules accelpool lists: its own (a pool label and managed-by)."""


@dataclass(frozen=True)
class TaintRule:
    """A DeviceTaintRule, accelpool's way of seeing it."""

    name: str
    pool: str
    node: str
    device: str
    gpu: str
    reason: str
    effect: str
    since: datetime | None = None
    healthy_since: datetime | None = None
    api_version: str = ""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> TaintRule | None:
        """None for a rule that is not accelpool's or not of its shape (it is then left alone)."""
        metadata, spec = mapping(body.get("metadata")), mapping(body.get("spec"))
        labels, annotations = mapping(metadata.get("labels")), mapping(metadata.get("annotations"))
        selector, taint = mapping(spec.get("deviceSelector")), mapping(spec.get("taint"))
        name, pool = metadata.get("name"), labels.get(conventions.POOL_LABEL)
        node, device = selector.get("pool"), selector.get("device")
        if labels.get(conventions.MANAGED_BY_LABEL) != conventions.MANAGED_BY or selector.get("driver") != DRIVER:
            return None
        if not all(isinstance(v, str) and v for v in (name, pool, node, device)):
            return None
        return cls(
            name=str(name),
            pool=str(pool),
            node=str(node),
            device=str(device),
            gpu=str(annotations.get(conventions.GPU_UUID_ANNOTATION, "")),
            reason=str(annotations.get(conventions.QUARANTINE_REASON_ANNOTATION, "")),
            effect=str(taint.get("effect", "")),
            since=parse_time(annotations.get(conventions.QUARANTINE_SINCE_ANNOTATION)),
            healthy_since=parse_time(annotations.get(conventions.GPU_HEALTHY_SINCE_ANNOTATION)),
            api_version=str(body.get("apiVersion", "")),
        )

    def body(self, version: str, pool_uid: str) -> dict[str, Any]:
        """The rule as accelpool writes it, in `resource.k8s.io/<version>`."""
        annotations = {
            conventions.GPU_UUID_ANNOTATION: self.gpu,
            conventions.QUARANTINE_REASON_ANNOTATION: self.reason,
        }
        if self.since is not None:
            annotations[conventions.QUARANTINE_SINCE_ANNOTATION] = format_time(self.since)
        if self.healthy_since is not None:
            annotations[conventions.GPU_HEALTHY_SINCE_ANNOTATION] = format_time(self.healthy_since)
        metadata: dict[str, Any] = {
            "name": self.name,
            "labels": {conventions.POOL_LABEL: self.pool, conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY},
            "annotations": annotations,
        }
        if pool_uid:
            metadata["ownerReferences"] = [
                {"apiVersion": api.API_VERSION, "kind": api.KIND, "name": self.pool, "uid": pool_uid}
            ]
        return {
            "apiVersion": f"{GROUP}/{version}",
            "kind": KIND,
            "metadata": metadata,
            "spec": {
                "deviceSelector": {"driver": DRIVER, "pool": self.node, "device": self.device},
                "taint": {
                    "key": conventions.QUARANTINE_TAINT_KEY,
                    "value": conventions.label_value(self.reason),
                    "effect": self.effect,
                },
            },
        }

    def same_as(self, other: TaintRule) -> bool:
        """Nothing to write: what accelpool sets is equal (the API version aside)."""
        keys = ("pool", "node", "device", "gpu", "reason", "effect", "since", "healthy_since")
        return all(getattr(self, k) == getattr(other, k) for k in keys)
