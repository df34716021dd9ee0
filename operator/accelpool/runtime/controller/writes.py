"""The "write the difference" stage of a pass: `Desired` → the smallest API writes, in a safe order.

`Writer.write(desired, snapshot, permit)` compares each part of what the pass wants with what is
stored (the snapshot's nodes, the `ClusterState` caches) through the pure `accelpool.decide.patches`,
and sends only what differs, in an order that never leaves a node pointing at a missing config:

1. the ConfigMaps' staged version (keys added and updated, none removed: `accelpool.decide.configmaps`);
2. agent DaemonSets and Karpenter NodePools (server-side apply, when the rendered spec hash differs),
   then Kueue's ResourceFlavors and the ClusterQueue edits that lower quota (`accelpool.runtime.controller.kueue`);
3. node patches (merge patches carrying `metadata.resourceVersion`, `--write-concurrency` at once, those
   that quarantine a node first; a 409 re-reads the node) and, on released nodes, the removal of the
   agent's condition;
4. the ConfigMaps' final version (keys of deleted pools removed), and the ClusterQueue edits that raise
   quota, then the Kueue flavors no pool wants, once every node patch went through;
5. the DaemonSets and NodePools no pool wants any more;
6. Events (`accelpool.runtime.controller.events`, `Writer.post_events`, beside the statuses and the next
   pass), including a `WriteFailed` Warning on a pool whose writes failed.

A ConfigMap that cannot be written blocks steps 2-5 (nothing may point at it). Every response is
remembered in the `ClusterState`, so the next pass starts from what was written. `WriteOutcome`
says what failed, for which pools: their statuses are not published, and the loop backs off.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelpool.decide import patches
from accelpool.decide.configmaps import ConfigMapsVersion
from accelpool.decide.desired import Desired, OwnedObjects
from accelpool.decide.planning import EventIntent, Plan, PoolPlan
from accelpool.model.nodes import NodeChange, NodeView
from accelpool.model.revisions import differing
from accelpool.runtime.controller import apiserver
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool.runtime.controller.dra import DraWriter
from accelpool.runtime.controller.events import EventRecorder
from accelpool.runtime.controller.kueue import KueueWriter, KueueWrites
from accelpool.runtime.controller.state import ClusterState, Owned, Snapshot
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_api import conventions
from accelpool_core.kube import ConflictError, KubeClient, NotFoundError

log = logging.getLogger("accelpool.runtime.controller")


@dataclass
class WriteOutcome:
    """What the writes of one pass did."""

    count: int = 0
    conflicts: int = 0
    """Writes rejected for a stale resourceVersion (re-read; the next pass plans again at once)."""
    first_error: str | None = None
    pool_errors: dict[str, str] = field(default_factory=dict)
    """Pools whose writes failed with an error, and the first error."""
    conflicted_pools: set[str] = field(default_factory=set)
    unwritten_nodes: set[str] = field(default_factory=set)
    blocked: bool = False
    """A ConfigMap could not be written: nothing that depends on it was written."""
    config_failed: bool = False
    """A ConfigMap write failed with an error (not a conflict): every pool's writes count as failed."""

    @property
    def complete(self) -> bool:
        """Everything the plan wanted was written (a deleted pool is released only then)."""
        return not self.blocked and not self.unwritten_nodes

    def unpublished(self, plan: Plan) -> set[str]:
        """Pools whose statuses must not be published: they describe writes that did not happen."""
        if self.blocked:
            return {p.name for p in plan.pools}
        return set(self.pool_errors) | self.conflicted_pools

    def failed_pools(self, plan: Plan) -> frozenset[str]:
        return frozenset(p.name for p in plan.pools) if self.config_failed else frozenset(self.pool_errors)

    def fail(self, error: Exception, what: str, pools: Iterable[str | None] = ()) -> None:
        log.warning("%s: %s", what, error)
        self.first_error = self.first_error or f"{what}: {error}"
        for pool in pools:
            if pool:
                self.pool_errors.setdefault(pool, f"{what}: {error}")


class Writer:
    """Applies a pass's `Desired` (see the module docstring). One per controller."""

    def __init__(
        self,
        config: OperatorConfig,
        client: KubeClient,
        state: ClusterState,
        events: EventRecorder,
        metrics: OperatorMetrics,
    ) -> None:
        self._config = config
        self._client = client
        self._state = state
        self._events = events
        self._metrics = metrics
        self._kueue = KueueWriter(client, state.kueue)
        self._dra = DraWriter(client, state.dra, config.dra_plugin_namespace, config.dra_plugin_selector)
        self._walked: tuple[Mapping[str, NodeChange], Mapping[str, NodeView]] | None = None
        """The changes and the views the last walk over the nodes compared (`_due`)."""
        self._due_then: set[str] = set()
        """The nodes that walk found to need a write."""
        self._in_sync: tuple[int, Mapping[str, OwnedObjects]] = (-1, {})
        """The stored objects' version (`ClusterState.owned_version`) and the pools whose rendered objects were found
        stored as rendered then: the very same rendered objects need no comparison while nothing stored changed."""
        self._kept: tuple[int, tuple[PoolPlan, ...]] | None = None
        """The stored objects' version and the pool plans the last `_delete_unwanted` found every object wanted by."""
        self._by_pool: tuple[int, Mapping[str | None, list[tuple[Owned, str, str | None]]]] = (-1, {})
        """The stored objects' version and their (kind, name, pool label) by pool label."""

    def would_write(self, desired: Desired, snapshot: Snapshot) -> bool:
        """Whether a node or an owned object differs (the pass then checks the pool index first)."""
        if any(body is not None for _, _, _, body, _ in self._due(desired.plan.changes, snapshot.nodes)):
            return True
        return any(self._owned_differ(pool, objects) for pool, objects in desired.owned.items())

    async def write(self, desired: Desired, snapshot: Snapshot, permit: Permit) -> WriteOutcome:
        """Writes what differs, in the order of the module docstring; `Paused` when the permit is revoked."""
        outcome = WriteOutcome()
        await self._configmaps(desired.configmaps.staged, outcome, permit)
        if not outcome.blocked:
            await self._owned_objects(desired.owned, outcome, permit)
            kueue = self._kueue_writes(await self._kueue.before_nodes(desired.kueue, permit), outcome)
            await self._nodes(desired.plan, snapshot.nodes, outcome, permit)
            if not outcome.unwritten_nodes:
                await self._configmaps(desired.configmaps.final, outcome, permit)
                after = await self._kueue.after_nodes(desired.kueue, permit, queues_done=kueue.queues_done)
                self._kueue_writes(after, outcome)
            if desired.dra is not None:
                dra = await self._dra.write(desired.dra, permit)
                for verb, resource in dra.written:
                    self._wrote(verb, resource, outcome)
                for what, error, pools in dra.errors:
                    outcome.fail(error, what, pools)
                for pool, answer in dra.evictions:
                    if answer.result != "gone":
                        self._metrics.drain_evictions[(pool, answer.result)] += 1
            await self._delete_unwanted(desired.plan, outcome, permit)
        return outcome

    async def post_events(self, plan: Plan, outcome: WriteOutcome, permit: Permit) -> int:
        """Posts the pass's Events, and a `WriteFailed` Warning on each pool whose writes failed; how many it posted."""
        return await self._events.post([*plan.events, *_failure_events(plan, outcome)], permit)

    def _wrote(self, verb: str, resource: str, outcome: WriteOutcome) -> None:
        outcome.count += 1
        self._metrics.write(verb, resource)

    # ------------------------------------------------------------ ConfigMaps

    async def _configmaps(self, version: ConfigMapsVersion, outcome: WriteOutcome, permit: Permit) -> None:
        config = self._config
        collection = apiserver.configmaps(config.namespace)
        for name, content, annotation in (
            (config.device_plugin_configmap, version.device_plugin, conventions.MANAGED_KEYS_ANNOTATION),
            (config.mig_configmap, version.mig, conventions.MANAGED_ENTRIES_ANNOTATION),
        ):
            change = patches.configmap_patch(
                self._state.configmap(name),
                name=name,
                namespace=config.namespace,
                data=content.data,
                managed=content.managed,
                annotation=annotation,
            )
            if change is None:
                continue
            verb, body = change
            path = f"{collection}/{name}"
            permit.check()
            try:
                if verb == "create":
                    response = await self._client.create(collection, body)
                else:
                    response = await self._client.patch(path, body)
            except ConflictError:  # created or changed by someone else: re-read; the next pass plans with it
                self._state.remember_configmap(name, await self._client.get_or_none(path))
                outcome.conflicts += 1
                outcome.blocked = True
                continue
            except TRANSIENT as error:
                outcome.fail(error, f"ConfigMap {config.namespace}/{name}")
                outcome.blocked = outcome.config_failed = True
                with contextlib.suppress(*TRANSIENT):
                    self._state.remember_configmap(name, await self._client.get_or_none(path))
                continue
            self._wrote(verb, "configmaps", outcome)
            self._state.remember_configmap(name, response)

    # ------------------------------------------------------------ DaemonSets and NodePools

    def _collection(self, kind: Owned) -> str:
        return apiserver.daemonsets(self._config.agent.namespace) if kind == "daemonsets" else apiserver.NODEPOOLS

    def _differs(self, kind: Owned, desired: Mapping[str, Any]) -> bool:
        current = self._state.owned_object(kind, desired["metadata"]["name"])
        return current is None or _spec_hash(current) != _spec_hash(desired)

    def _owned_differ(self, pool: str, objects: OwnedObjects) -> bool:
        """Whether a pool's DaemonSet or NodePool is not stored as rendered."""
        version, in_sync = self._in_sync
        if version == self._state.owned_version and in_sync.get(pool) is objects:
            return False
        return self._differs("daemonsets", objects.daemonset) or (
            objects.nodepool is not None and self._differs("nodepools", objects.nodepool)
        )

    async def _owned_objects(self, owned: Mapping[str, OwnedObjects], outcome: WriteOutcome, permit: Permit) -> None:
        in_sync: dict[str, OwnedObjects] = {}
        for pool, objects in owned.items():
            if not self._owned_differ(pool, objects):
                in_sync[pool] = objects
                continue
            await self._apply(pool, "daemonsets", objects.daemonset, outcome, permit)
            if objects.nodepool is not None:
                await self._apply(pool, "nodepools", objects.nodepool, outcome, permit)
        self._in_sync = (self._state.owned_version, in_sync)

    async def _apply(
        self, pool: str, kind: Owned, desired: dict[str, Any], outcome: WriteOutcome, permit: Permit
    ) -> None:
        """Server-side apply of the rendered object, when its spec hash differs from what is there.

        The operator owns these objects whole, and their controllers (the DaemonSet controller, Karpenter)
        write only `.status`, after every change. An update carrying the resourceVersion of the
        operator's last write would meet a 409 almost every time; an apply without one cannot conflict
        on versions, leaves the controller's fields alone, removes what an earlier rendering set and this
        one does not, and creates the object when it is missing (one request either way).
        """
        if not self._differs(kind, desired):
            return
        name = desired["metadata"]["name"]
        path = f"{self._collection(kind)}/{name}"
        permit.check()
        try:
            response = await self._client.apply(path, desired, field_manager=apiserver.FIELD_MANAGER)
        except ConflictError:  # not expected (forced, no resourceVersion): re-read, and the next pass applies again
            self._state.remember_owned(kind, name, await self._client.get_or_none(path))
            outcome.conflicts += 1
            outcome.conflicted_pools.add(pool)
        except NotFoundError as error:
            self._state.remember_owned(kind, name, None)
            outcome.fail(error, f"{kind} {name}", [pool])
        except TRANSIENT as error:
            outcome.fail(error, f"{kind} {name}", [pool])
        else:
            self._wrote("apply", kind, outcome)
            self._state.remember_owned(kind, name, response)

    def _kueue_writes(self, writes: KueueWrites, outcome: WriteOutcome) -> KueueWrites:
        """Kueue's writes (`accelpool.runtime.controller.kueue`) counted into the pass's outcome."""
        for verb, resource in writes.written:
            self._wrote(verb, resource, outcome)
        outcome.conflicts += writes.conflicts
        outcome.conflicted_pools |= writes.conflicted_pools
        for what, error, pools in writes.errors:
            outcome.fail(error, what, pools)
        return writes

    async def _delete_unwanted(self, plan: Plan, outcome: WriteOutcome, permit: Permit) -> None:
        """Deletes the DaemonSets and NodePools of pools that are gone, deleted, or no longer want them.

        Where nothing stored changed since the last pass found every object wanted, only the objects of the pools
        planned anew since are looked at (a pool plan is a value: the same object, the same answer)."""
        failed = False
        for kind, name, pool in self._maybe_unwanted(plan):
            if pool and _wanted(plan, pool, kind, current_name=name == _OWNED_NAMES[kind](pool)):
                continue
            permit.check()
            try:
                await self._client.delete(f"{self._collection(kind)}/{name}")
            except TRANSIENT as error:
                failed = True
                outcome.fail(error, f"deleting {kind} {name}", [pool])
                continue
            self._wrote("delete", kind, outcome)
            self._state.remember_owned(kind, name, None)
        self._kept = None if failed else (self._state.owned_version, plan.pools)

    def _maybe_unwanted(self, plan: Plan) -> list[tuple[Owned, str, str | None]]:
        """The owned objects (kind, name, pool label) `_delete_unwanted` looks at."""
        version = self._state.owned_version
        if self._by_pool[0] != version:
            by_pool: dict[str | None, list[tuple[Owned, str, str | None]]] = {}
            for kind in _OWNED_NAMES:
                for name, obj in self._state.owned(kind).items():
                    pool = ((obj.get("metadata") or {}).get("labels") or {}).get(conventions.POOL_LABEL)
                    by_pool.setdefault(pool, []).append((kind, name, pool))
            self._by_pool = (version, by_pool)
        index, kept = self._by_pool[1], self._kept
        replanned = plan.replanned_since(kept[1]) if kept is not None and kept[0] == version else None
        if replanned is None:
            return [entry for entries in index.values() for entry in entries]
        return [entry for pool in sorted(replanned) for entry in index.get(pool, ())]

    # ------------------------------------------------------------ nodes

    def _due(self, changes: Mapping[str, NodeChange], views: Mapping[str, NodeView]) -> list[_DueNode]:
        """The nodes whose stored view differs from their planned change, by name: of those the last walk found
        due, and of those whose view or change differs from what it compared (a `Revision` each: found in as many
        steps as changed), the others being as the last walk found them."""
        if self._walked is None:
            names: Iterable[str] = changes.keys()
        else:
            names = self._due_then | differing(changes, self._walked[0]) | differing(views, self._walked[1])
        due = []
        for name in sorted(names):
            change, view = changes.get(name), views.get(name)
            if change is None or view is None:
                continue
            body = patches.node_patch(view, change)
            removal = patches.health_removal(view, change)
            if body is not None or removal is not None:
                due.append((name, change, view, body, removal))
        return due

    async def _nodes(self, plan: Plan, views: Mapping[str, NodeView], outcome: WriteOutcome, permit: Permit) -> None:
        semaphore = asyncio.Semaphore(max(1, self._config.write_concurrency))
        due = self._due(plan.changes, views)  # what differs, found before any task is made
        self._walked, self._due_then = (plan.changes, views), {name for name, *_ in due}
        if not due:
            return
        due.sort(key=lambda item: not _fences(item[2], item[1]))  # stable: the rest keep their order, by name
        indexed = self._state.indexed_nodes()

        async def write(
            name: str,
            change: NodeChange,
            view: NodeView,
            body: dict[str, Any] | None,
            removal: list[dict[str, Any]] | None,
        ) -> None:
            path = f"{apiserver.NODES}/{name}"
            async with semaphore:
                try:
                    if body is not None:
                        permit.check()
                        response = await self._client.patch(path, body)
                        self._wrote("patch", "nodes", outcome)
                        self._state.remember_node(indexed.get(name), response)
                    if removal is not None:
                        await self._remove_health(name, removal, indexed.get(name), outcome, permit)
                except ConflictError:
                    outcome.conflicts += 1
                    outcome.unwritten_nodes.add(name)
                    outcome.conflicted_pools.update(p for p in (change.pool, view.pool) if p)
                    with contextlib.suppress(*TRANSIENT):
                        self._state.remember_node(indexed.get(name), await self._client.get(path))
                except NotFoundError:
                    pass  # the node is gone; the next pass plans without it
                except TRANSIENT as error:
                    outcome.unwritten_nodes.add(name)
                    outcome.fail(error, f"node {name}", [change.pool, view.pool])
                    with contextlib.suppress(*TRANSIENT):
                        self._state.remember_node(indexed.get(name), await self._client.get(path))

        results = await asyncio.gather(*(write(*item) for item in due), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result  # Paused, or a bug: every other node's write has finished

    async def _remove_health(
        self, name: str, ops: list[dict[str, Any]], before: NodeView | None, outcome: WriteOutcome, permit: Permit
    ) -> None:
        """Best effort: a condition left behind reads as Unknown once its heartbeat is old (planning)."""
        permit.check()
        try:
            response = await self._client.patch(f"{apiserver.NODES}/{name}/status", ops, patch_type="json")
        except TRANSIENT as error:
            log.info("node %s: %s not removed: %s", name, conventions.HEALTH_CONDITION, error)
            return
        self._wrote("patch", "nodes/status", outcome)
        self._state.remember_node(before, response)


_OWNED_NAMES: Mapping[Owned, Callable[[str], str]] = {
    "daemonsets": conventions.agent_name,
    "nodepools": conventions.nodepool_name,
}
"""The kinds of object pools own that `_delete_unwanted` deletes, and what a pool names its own."""
_DueNode = tuple[str, NodeChange, NodeView, dict[str, Any] | None, list[dict[str, Any]] | None]
"""A node to write: its name, planned change, stored view, merge patch and condition removal (None: none)."""


def _fences(view: NodeView, change: NodeChange) -> bool:
    """Whether the change quarantines a node that is not quarantined yet (its taint or cordon): such patches go out
    first in a pass, so a failing GPU is fenced before joins, burn-in lifts and config moves are written."""
    return not view.quarantined and view.apply(change).quarantined


def _failure_events(plan: Plan, outcome: WriteOutcome) -> list[EventIntent]:
    """A Warning on each pool whose writes failed, naming the first error (`kubectl describe` shows it)."""
    events = []
    for name, why in sorted(outcome.pool_errors.items()):
        pool = plan.pool(name)
        if pool is not None:
            events.append(
                EventIntent(
                    "ComputePool", name, pool.uid, "Warning", "WriteFailed", f"writes for pool {name} failed: {why}"
                )
            )
    return events


def _wanted(plan: Plan, pool: str, kind: Owned, *, current_name: bool) -> bool:
    """Whether a pool's DaemonSet or NodePool stays: its pool is planned, not deleted, and still wants one."""
    found = plan.pool(pool)
    if found is None or found.deleting:
        return False
    if not found.valid:
        return True  # an invalid pool's objects are left as they are
    if not current_name:
        return False  # named by an older naming scheme: the pool's object under its current name replaces it
    if kind == "nodepools":
        return found.spec is not None and found.spec.provisioner.type == "karpenter"
    return True


def _spec_hash(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(conventions.SPEC_HASH_ANNOTATION)
    return str(value) if value is not None else None
