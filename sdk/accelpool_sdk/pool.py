"""`ComputePool` in Python: build a pool, apply it, wait until it is Ready, read its status, delete it,
and give the pod-spec fragment that lands a workload on it.

    pool = ap.ComputePool("llm-training", ap.Accelerator.NVIDIA.H100(count=8, mig="3g.40gb"), nodes=4)
    pool.apply()
    pool.wait_until_ready(timeout=600)        # a line per change; progress=callback or False
    pool.pod_spec_fragment()                  # nodeSelector, tolerations, limits

The spec is the API's own model (`accelpool_api.ComputePoolSpec`), built through the validation
`accelpool validate` and the API server run (`accelpool_api.validation.validate_object`): a pool the API
would refuse is refused here, with the same field errors. The cluster calls go through
`accelpool_sdk.cluster.Cluster`: the pool's `cluster=`, else the default one (`Cluster.default()`: the
cluster `Cluster.connect()` made last, else the environment's, connected on first use).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, Literal, Self

import accelpool_api as api
from accelpool_api import validation
from accelpool_core import textio
from accelpool_sdk import fragment, waiting
from accelpool_sdk.accelerator import CatalogAccelerator
from accelpool_sdk.cluster import Cluster
from accelpool_sdk.errors import InvalidSpecError, PoolFailedError, PoolGoneError, PoolNotReadyError
from accelpool_sdk.factories import Accelerator

AcceleratorLike = CatalogAccelerator | str | Callable[[], CatalogAccelerator]
"""An accelerator: a factory's result, a factory itself (`NVIDIA.A100`), or the string form (`"H100:8"`)."""
Sharing = api.TimeSlicingSpec | api.MpsSpec | api.SharingSpec
WATCH_SECONDS = 60
"""The longest one watch request of `wait_until_ready` stays open before the pool is read again."""


class ComputePool:
    """A ComputePool: accelerator, nodes, layout and health policy; and its life on a cluster."""

    def __init__(
        self,
        name: str,
        accelerator: AcceleratorLike,
        nodes: int = 1,
        *,
        max_nodes: int | None = None,
        sharing: Sharing | None = None,
        health: api.HealthSpec | Mapping[str, Any] | None = None,
        node_selector: Mapping[str, str] | None = None,
        dedicated: bool = True,
        provisioner: Literal["static", "karpenter"] | api.ProvisionerSpec | None = None,
        allocation: Literal["DevicePlugin", "DRA"] = "DevicePlugin",
        cluster: Cluster | None = None,
    ) -> None:
        wire: dict[str, Any] = {"nodes": nodes}
        if isinstance(accelerator, str):
            wire["accelerator"] = accelerator
        else:
            chosen = accelerator if isinstance(accelerator, CatalogAccelerator) else accelerator()
            wire.update(accelerator=chosen.accelerator_wire(), **chosen.mig_wire())
        optional = {
            "maxNodes": max_nodes,
            "sharing": _sharing_wire(sharing),
            "health": _wire(health),
            "nodeSelector": dict(node_selector) if node_selector is not None else None,
            "dedicated": None if dedicated else False,
            "provisioner": {"type": provisioner} if isinstance(provisioner, str) else _wire(provisioner),
            "allocation": None if allocation == "DevicePlugin" else allocation,
        }
        wire.update({key: value for key, value in optional.items() if value is not None})
        self.name = name
        self.spec = _validated(name, wire)
        self.cluster = cluster
        self.last_status: api.ComputePoolStatus | None = None
        """The status last read (`status()`, `wait_until_ready()`); `pod_spec_fragment` uses its scheduling."""

    @classmethod
    def get(cls, name: str, cluster: Cluster | None = None) -> Self:
        """A pool as stored in the cluster (someone else may have made it), with its status."""
        stored = (cluster or Cluster.default()).get_pool(name)
        if stored is None:
            raise PoolGoneError(f"ComputePool {name} does not exist")
        return cls.from_manifest(stored, cluster)

    @classmethod
    def from_yaml(cls, text: str, cluster: Cluster | None = None) -> Self:
        """The one ComputePool in a manifest's YAML (or JSON) text, read as kubectl reads it
        (`accelpool_core.textio`: `nodes: 1:30` is the string "1:30", `dedicated: y` is true), where
        `yaml.safe_load` reads YAML 1.1 (90, and the string "y")."""
        try:
            documents = textio.load_yaml(text, "ComputePool.from_yaml")
        except textio.SourceError as error:
            raise ValueError(str(error)) from None
        pools = [d for d in documents if isinstance(d, Mapping) and d.get("kind") == api.KIND]
        if len(pools) != 1:
            raise ValueError(f"ComputePool.from_yaml: expected one {api.KIND} document, found {len(pools)}")
        return cls.from_manifest(pools[0], cluster)

    @classmethod
    def from_manifest(cls, document: Mapping[str, Any], cluster: Cluster | None = None) -> Self:
        """A pool from its object: as `from_yaml` reads a file, or the API's (its status is read too)."""
        name = str((document.get("metadata") or {}).get("name", ""))
        pool = cls.__new__(cls)
        pool.name, pool.spec, pool.cluster = name, _validated(name, document.get("spec") or {}), cluster
        pool.last_status = api.read_status(document.get("status"))
        return pool

    # ------------------------------------------------------------ what it is

    @property
    def accelerator(self) -> Accelerator:
        """The pool's accelerator with the catalog's facts."""
        return Accelerator(entry=self.spec.resolve().entry, request=self.spec.accelerator, mig_spec=self.spec.mig)

    def manifest(self) -> dict[str, Any]:
        """The ComputePool object as `kubectl apply` takes it."""
        spec = self.spec.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
        return {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": self.name}, "spec": spec}

    def to_yaml(self) -> str:
        """The manifest as YAML that `kubectl apply -f` reads back as it is (a string like "y" is quoted)."""
        return textio.dump_yaml(self.manifest())

    def pod_spec_fragment(self, *, devices: int | None = None, profile: str | None = None) -> fragment.PodSpecFragment:
        """What a pod needs to run on this pool: `status.scheduling` as last read (before any status: what the
        operator will write) and the limits for `devices` devices (MIG mixed layouts: of `profile`)."""
        scheduling = (
            self.last_status.scheduling
            if self.last_status is not None and self.last_status.scheduling.node_selector
            else fragment.expected_scheduling(self.name, self.spec)
        )
        return fragment.pod_spec_fragment(self.spec, scheduling, devices=devices, profile=profile, pool=self.name)

    # ------------------------------------------------------------ on the cluster

    def _cluster(self) -> Cluster:
        """The pool's own cluster, else the default one at the time of the call (`Cluster.default()`)."""
        return self.cluster or Cluster.default()

    def apply(self) -> Self:
        """Create the pool, or update it to this spec (server-side apply; the operator's status is kept)."""
        stored = self._cluster().apply_pool(self.manifest())
        self.last_status = api.read_status(stored.get("status"))
        return self

    def status(self) -> api.ComputePoolStatus | None:
        """The operator's status now (None: not written yet)."""
        stored = self._cluster().get_pool(self.name)
        if stored is None:
            raise PoolGoneError(f"ComputePool {self.name} does not exist")
        self.last_status = api.read_status(stored.get("status"))
        return self.last_status

    def delete(self) -> None:
        """Ask for the pool's deletion; the operator releases its nodes, then it is gone."""
        self._cluster().delete_pool(self.name)

    def wait_until_ready(
        self, timeout: float = 600.0, progress: waiting.ProgressCallback | bool = True
    ) -> api.ComputePoolStatus:
        """Block until the operator reports the pool Ready for this spec, watching it change.

        `progress`: True prints a line per change, a callable gets each `waiting.Progress`, False is silent.
        Raises PoolNotReadyError after `timeout` seconds, PoolFailedError when the operator reports the
        spec Failed, PoolGoneError when the pool is deleted.
        """
        report = waiting.printer if progress is True else (progress or None)
        cluster = self._cluster()
        deadline = time.monotonic() + timeout
        stored = cluster.get_pool(self.name)
        shown = None
        while True:
            if stored is None:
                raise PoolGoneError(f"ComputePool {self.name} does not exist (apply it first)")
            seen = waiting.judge(stored)
            self.last_status = seen.status
            if report is not None and seen.summary != shown:
                report(seen)
                shown = seen.summary
            if seen.stage == "ready":
                assert seen.status is not None
                return seen.status
            if seen.stage == "failed":
                assert seen.status is not None
                raise PoolFailedError(self.name, seen.summary, seen.status)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise PoolNotReadyError(self.name, timeout, seen.summary, seen.status)
            version = str(stored["metadata"].get("resourceVersion", ""))
            changed = cluster.next_change(self.name, version, int(min(remaining, WATCH_SECONDS)))
            stored = changed if changed is not None else cluster.get_pool(self.name)

    def __repr__(self) -> str:
        return f"ComputePool({self.name!r}, {self.accelerator}, nodes={self.spec.nodes})"


def _validated(name: str, spec: Mapping[str, Any]) -> api.ComputePoolSpec:
    document = {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": name}, "spec": dict(spec)}
    verdict = validation.validate_object(document)
    if verdict.pool is None:
        raise InvalidSpecError(f"ComputePool({name!r})", verdict.problems)
    return verdict.pool.spec


def _wire(model: api.Model | Mapping[str, Any] | None) -> dict[str, Any] | None:
    if model is None:
        return None
    if isinstance(model, api.Model):
        return model.model_dump(by_alias=True, exclude_none=True, exclude_unset=True)
    return dict(model)


def _sharing_wire(sharing: Sharing | None) -> dict[str, Any] | None:
    if isinstance(sharing, api.TimeSlicingSpec):
        return {"timeSlicing": _wire(sharing)}
    if isinstance(sharing, api.MpsSpec):
        return {"mps": _wire(sharing)}
    return _wire(sharing)
