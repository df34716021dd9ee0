"""Kueue's objects as the controller reads and writes them: `KueueCache` (read at every resync) and `KueueWriter`.

Kueue is detected by listing its v1beta2 ResourceFlavors and ClusterQueues at start, every
`--resync-interval` and after a reload: a 404 means the API is not served (Kueue not installed,
or installed later: the next resync finds it); another API error keeps what was read before, or is
kept as the reason when nothing was (RBAC of an older chart); nothing else of the pass depends on it.
Writes report back into the cache, so the next pass starts from what they did.

`KueueWriter` writes a `KueuePlan` in two steps around the pass's node writes, in the order that keeps
Kueue consistent and a queue from offering more than serves:

1. `before_nodes`: ResourceFlavors, by server-side apply (accelpool owns them whole), when the rendered
   hash differs; then the ClusterQueue edits that lower or remove quota (a quarantine's);
2. `after_nodes` (once the node writes went through): the edits that raise or add quota (a release's),
   then the deletions of the flavors no pool wants, only once every queue edit went through (a queue
   that still lists a flavor keeps it Terminating under Kueue's finalizer `kueue.x-k8s.io/resource-in-use`,
   which accelpool leaves to Kueue).

A queue edit is a JSON merge patch of `spec.resourceGroups` (an atomic list: one writer's whole value)
carrying the `metadata.resourceVersion` it was computed from, so an edit made meanwhile by anyone else
is never overwritten: the API server answers 409, the queue is read again and the next pass computes
the edit anew.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from accelpool.decide import kueue
from accelpool.decide.kueue import KueueObserved, KueuePlan
from accelpool.runtime.controller import apiserver
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool_api import conventions
from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError

log = logging.getLogger("accelpool.runtime.controller")


class KueueCache:
    """What the controller last read or wrote of Kueue's ResourceFlavors and ClusterQueues."""

    def __init__(self, client: KubeClient) -> None:
        self._client = client
        self._installed = False
        self._error: str | None = None
        self._flavors: dict[str, dict[str, Any]] = {}
        self._queues: dict[str, dict[str, Any]] = {}

    @property
    def observed(self) -> KueueObserved:
        return KueueObserved(self._installed, self._error, dict(self._flavors), dict(self._queues))

    async def load(self) -> None:
        """Lists both kinds. A 404 is Kueue not installed; another API error keeps what was last read, or,
        when nothing was (RBAC of an older chart), is kept as the reason Kueue cannot be used."""
        try:
            flavors = await self._client.list(apiserver.RESOURCE_FLAVORS)
            queues = await self._client.list(apiserver.CLUSTER_QUEUES)
        except NotFoundError:
            self._installed, self._error = False, None
            self._flavors, self._queues = {}, {}
            return
        except ApiError as error:
            log.warning("Kueue's ResourceFlavors and ClusterQueues could not be listed: %s", error)
            if not self._installed:
                self._error = str(error)
            return
        self._installed, self._error = True, None
        self._flavors = {f["metadata"]["name"]: f for f in flavors}
        self._queues = {q["metadata"]["name"]: q for q in queues}

    def flavor(self, name: str) -> dict[str, Any] | None:
        return self._flavors.get(name)

    def remember_flavor(self, name: str, stored: dict[str, Any] | None) -> None:
        if stored is None:
            self._flavors.pop(name, None)
        else:
            self._flavors[name] = stored

    def remember_queue(self, name: str, stored: dict[str, Any] | None) -> None:
        if stored is None:
            self._queues.pop(name, None)
        else:
            self._queues[name] = stored


@dataclass
class KueueWrites:
    """What the Kueue writes of one pass did."""

    conflicted_pools: set[str] = field(default_factory=set)
    conflicts: int = 0
    errors: list[tuple[str, Exception, tuple[str, ...]]] = field(default_factory=list)
    """(what, error, pools) of each write that failed."""
    written: list[tuple[str, str]] = field(default_factory=list)
    """(verb, resource) of each write, for the metrics."""
    queues_done: bool = True
    """Every queue edit so far went through."""


class KueueWriter:
    """Writes a pass's `KueuePlan` (see the module docstring). One per controller."""

    def __init__(self, client: KubeClient, cache: KueueCache) -> None:
        self._client = client
        self._cache = cache

    async def before_nodes(self, plan: KueuePlan, permit: Permit) -> KueueWrites:
        """The flavors, then the queue edits that lower or remove quota."""
        writes = KueueWrites()
        for name, (pool, desired) in sorted(plan.flavors.items()):
            await self._apply_flavor(name, pool, desired, writes, permit)
        for edit in plan.queues:
            if not edit.grows:
                writes.queues_done &= await self._edit_queue(edit, writes, permit)
        return writes

    async def after_nodes(self, plan: KueuePlan, permit: Permit, *, queues_done: bool) -> KueueWrites:
        """The queue edits that raise or add quota, then (all edits through, `queues_done` included) the
        deletions of unwanted flavors."""
        writes = KueueWrites(queues_done=queues_done)
        for edit in plan.queues:
            if edit.grows:
                writes.queues_done &= await self._edit_queue(edit, writes, permit)
        if writes.queues_done and not writes.errors:
            for name, pool in sorted(plan.deletions.items()):
                await self._delete_flavor(name, pool, writes, permit)
        return writes

    async def _apply_flavor(
        self, name: str, pool: str, desired: dict[str, Any], writes: KueueWrites, permit: Permit
    ) -> None:
        current = self._cache.flavor(name)
        if current is not None and _spec_hash(current) == _spec_hash(desired):
            return
        path = f"{apiserver.RESOURCE_FLAVORS}/{name}"
        permit.check()
        try:
            response = await self._client.apply(path, desired, field_manager=apiserver.FIELD_MANAGER)
        except TRANSIENT as error:
            writes.errors.append((f"ResourceFlavor {name}", error, (pool,)))
            return
        writes.written.append(("apply", "resourceflavors"))
        self._cache.remember_flavor(name, response)

    async def _edit_queue(self, edit: kueue.QueueEdit, writes: KueueWrites, permit: Permit) -> bool:
        """Whether the queue now holds the edit."""
        path = f"{apiserver.CLUSTER_QUEUES}/{edit.name}"
        body = {
            "metadata": {"resourceVersion": edit.resource_version},
            "spec": {"resourceGroups": edit.resource_groups},
        }
        permit.check()
        try:
            response = await self._client.patch(path, body)
        except ConflictError:  # changed since it was read: read it again, and the next pass edits that
            writes.conflicts += 1
            writes.conflicted_pools.update(edit.pools)
            with contextlib.suppress(*TRANSIENT):
                self._cache.remember_queue(edit.name, await self._client.get_or_none(path))
            return False
        except NotFoundError:
            self._cache.remember_queue(edit.name, None)
            return False
        except TRANSIENT as error:
            writes.errors.append((f"ClusterQueue {edit.name}", error, edit.pools))
            return False
        writes.written.append(("patch", "clusterqueues"))
        self._cache.remember_queue(edit.name, response)
        return True

    async def _delete_flavor(self, name: str, pool: str, writes: KueueWrites, permit: Permit) -> None:
        path = f"{apiserver.RESOURCE_FLAVORS}/{name}"
        permit.check()
        try:
            await self._client.delete(path)
            left = await self._client.get_or_none(path)  # Terminating while Kueue's finalizer holds it
        except TRANSIENT as error:
            writes.errors.append((f"deleting ResourceFlavor {name}", error, (pool,) if pool else ()))
            return
        writes.written.append(("delete", "resourceflavors"))
        self._cache.remember_flavor(name, left)


def _spec_hash(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(conventions.SPEC_HASH_ANNOTATION)
    return str(value) if value is not None else None
