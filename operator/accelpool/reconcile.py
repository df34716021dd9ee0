"""The reconciler: one loop that plans the whole cluster and writes only the difference.

kopf handlers (`accelpool.handlers`) feed it: the kopf indexes of Nodes and ComputePools are its
inputs (no list call per pass), node and pool events nudge it, and pool handlers wait on it.
A pass (`reconcile_once`):

1. snapshots pools and nodes (index views, overlaid with the results of its own recent writes
   until the watch catches up, so a pass never re-sends a write the index has not seen yet);
2. calls the pure planner (`accelpool.planning.plan`) and renders each pool's DaemonSet and
   NodePool; a pool whose planning or rendering raises is set aside (`Valid=False/PlanningFailed`)
   and the rest are planned without it, so one pool can never stop the others;
3. if it would write and has not listed the ComputePools for `POOL_CHECK_SECONDS` (or a write
   met a 409 since), lists them and plans again with what the API server says when the index
   disagrees (a watch that lagged, an operator resumed after a pause);
4. writes, in an order that never leaves a node pointing at a missing config: ConfigMap keys
   added → agent DaemonSets and Karpenter NodePools (server-side apply, see `_Writes._ensure`) →
   node patches (merge patches carrying `metadata.resourceVersion`; a 409 re-reads the node and
   plans again) → ConfigMap keys removed → objects of deleted pools removed → Events (deduplicated);
5. publishes each pool's status for the status writer and records metrics.

Before planning, at most every `--agent-check-interval`, it lists the agents' DaemonSets, their pods
and the FailedCreate Events of DaemonSets in the agent namespace (one list each for all pools, with
label and field selectors), for the pools' AgentReady (`accelpool.agents`); while there are pools it
plans again at that interval, so an agent the DaemonSet controller cannot create is reported without
waiting for its node's health report to go stale. A failed list keeps the last observation.

One reconciler per operator, one pass at a time: cross-pool decisions are made on one view of
the cluster, so no two pools can claim a node, and writes to the shared ConfigMaps are
serialized. Failed writes mark their pools failed (their statuses are not published) and the
pass is retried with exponential backoff; 409s are retried at once. ConfigMaps, DaemonSets and
NodePools are read at start and every `--resync-interval`, and from write responses otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import aiohttp

from accelpool import agents, api, conventions, inputs, nvidia, patches, render
from accelpool.metrics import OperatorMetrics
from accelpool.nodes import NodeView
from accelpool.planning import ConfigState, EventIntent, Plan, PlannerOptions, PoolInput, PoolPlan, plan
from accelpool.settings import OperatorConfig
from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError

log = logging.getLogger("accelpool.reconcile")

OVERLAY_TTL_SECONDS = 30.0
"""How long a write's result stands in for a node the watch has not caught up with."""
STATUS_ECHO_SECONDS = 5.0
"""How long a written status is not re-sent while the pool's body has not caught up."""
EVENT_REPEAT_SECONDS = 600.0
"""The same Event (object, reason, message) is posted at most once in this window."""
BACKOFF_START, BACKOFF_MAX = 0.5, 30.0
TRANSIENT = (ApiError, OSError, asyncio.TimeoutError, aiohttp.ClientError)
"""Errors a later pass may not see again: API errors, connection trouble, timeouts."""
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
FIELD_MANAGER = "accelpool"
"""The operator's field manager in server-side apply (agent DaemonSets, Karpenter NodePools)."""
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
POOL_CHECK_SECONDS = 10.0
"""A pass that would write lists the pools first when it has not done so for this long (or after a 409):
a pool deleted while the operator was paused or its watch was down is never written for."""


@dataclass(frozen=True)
class PoolRecord:
    """A ComputePool as the kopf index keeps it: plain, immutable copies."""

    name: str
    uid: str
    generation: int | None
    created: str | None
    deleting: bool
    spec_json: str
    status: Mapping[str, Any] = field(default_factory=dict, compare=False)

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> PoolRecord:
        metadata = body.get("metadata") or {}
        return cls(
            name=str(metadata.get("name", "")),
            uid=str(metadata.get("uid") or ""),
            generation=metadata.get("generation"),
            created=metadata.get("creationTimestamp"),
            deleting=bool(metadata.get("deletionTimestamp")),
            spec_json=inputs.spec_key(dict(body.get("spec") or {})),
            status=copy.deepcopy(dict(body.get("status") or {})),
        )

    def body(self) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": self.name, "uid": self.uid}
        if self.generation is not None:
            metadata["generation"] = self.generation
        if self.created:
            metadata["creationTimestamp"] = self.created
        if self.deleting:
            metadata["deletionTimestamp"] = "set"
        return {"metadata": metadata, "spec": json.loads(self.spec_json), "status": dict(self.status)}


@dataclass(frozen=True)
class PassResult:
    """How a pass went. `ok` is False only for errors; conflicts (409) are re-read and planned again at once."""

    number: int
    ok: bool
    failed_pools: frozenset[str] = frozenset()
    """Pools whose writes failed with an error (their statuses were not published)."""
    released_pools: frozenset[str] = frozenset()
    error: str | None = None
    writes: int = 0
    conflicts: int = 0


@dataclass
class _Overlay:
    before: NodeView | None
    after: NodeView
    at: float


@dataclass
class _Published:
    status: dict[str, Any]
    changed: asyncio.Event = field(default_factory=asyncio.Event)
    written: dict[str, Any] | None = None
    written_at: float = 0.0


class Reconciler:
    """Plans and writes; see the module docstring. Create one per operator (kept in kopf's memo)."""

    def __init__(
        self,
        config: OperatorConfig,
        client: KubeClient,
        metrics: OperatorMetrics,
        *,
        clock: Callable[[], float] | None = None,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.config = config
        self.client = client
        self.metrics = metrics
        self._clock = clock or _loop_time
        self._now = wall_clock
        self._node_source: Callable[[], Iterable[NodeView]] = lambda: ()
        self._pool_source: Callable[[], Iterable[PoolRecord]] = lambda: ()
        self._ready = asyncio.Event()
        self._dirty = asyncio.Event()
        self._pass_done = asyncio.Condition()
        self._exclusive = asyncio.Lock()
        self._started = 0
        self._last: PassResult | None = None
        self._overlay: dict[str, _Overlay] = {}
        self._planned_nodes: dict[str, NodeView] = {}
        self._planned_pools: dict[str, PoolRecord] = {}
        self._validated: dict[tuple[str, str], tuple[api.ComputePoolSpec | None, tuple[str, ...]]] = {}
        self._pools_listed_at: float | None = None
        self._pools_suspect = False
        """A write met a 409: what the index says about pools may be stale too."""
        self._pool_overlay: dict[str, PoolRecord | None] = {}
        """Pools as the last list returned them (None: gone), standing in for the index until it agrees."""
        self._pool_overlay_at = 0.0
        self._unplannable: dict[tuple[str, str], str] = {}
        """Pools (by uid and spec) that planning or rendering could not handle, and why; retried on a spec change."""
        self._configmaps: dict[str, dict[str, Any] | None] = {}
        self._daemonsets: dict[str, dict[str, Any]] = {}
        self._nodepools: dict[str, dict[str, Any]] = {}
        self._karpenter = False
        self._agents: dict[str, agents.AgentObservation] | None = None
        self._agents_at: float | None = None
        self._loaded_at: float | None = None
        self._requeue_at: float | None = None
        self._retry_at: float | None = None
        self._backoff = BACKOFF_START
        self._published: dict[str, _Published] = {}
        self._released: set[str] = set()
        self._first_healthy: dict[str, datetime] = {}
        self._events_posted: dict[tuple[str, str, str, str], float] = {}
        self._breakers_seen: set[tuple[str, str]] = set()
        self._instance = socket.gethostname()
        self._active = asyncio.Event()
        self._active.set()
        self._in_flight: asyncio.Task[PassResult] | None = None
        self.plan: Plan | None = None
        self.task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------ wiring (from the kopf handlers)

    def bind(self, nodes: Callable[[], Iterable[NodeView]], pools: Callable[[], Iterable[PoolRecord]]) -> None:
        self._node_source, self._pool_source = nodes, pools

    def indexed(self) -> None:
        """kopf has listed every resource (resource handlers only run after that)."""
        if not self._ready.is_set():
            self._ready.set()
            self._dirty.set()

    def nudge(self) -> None:
        self._dirty.set()

    def node_changed(self, name: str, view: NodeView | None) -> None:
        """A node event: nudge only if planning could come out differently."""
        planned = self._planned_nodes.get(name)
        overlay = self._overlay.get(name)
        if view is None:
            if planned is not None:
                self._dirty.set()
            return
        if view == planned or (overlay is not None and view == overlay.after):
            return
        self._dirty.set()

    def pool_changed(self, record: PoolRecord | None, name: str) -> None:
        if record is None or self._planned_pools.get(name) != record:
            self._dirty.set()

    # ------------------------------------------------------------ hot standby (accelpool.leadership)

    @property
    def active(self) -> bool:
        """True unless paused: only an active reconciler writes."""
        return self._active.is_set()

    def pause(self) -> None:
        """Stop writing at once: no pass starts, and the pass in flight (if any) is cancelled before its next write."""
        self._active.clear()
        if self._in_flight is not None:
            self._in_flight.cancel()
        self.metrics.plan = None  # the leader reports the pools; a standby's last plan would go stale

    def resume(self) -> None:
        """Start writing again; the next pass first reads everything cached anew. No-op while active."""
        if self.active:
            return
        self._loaded_at = self._pools_listed_at = self._agents_at = None
        self._overlay.clear()
        self._pool_overlay = {}
        for published in self._published.values():
            published.changed.set()
        self._published.clear()  # the next pass starts from the stored statuses
        self._active.set()
        self._dirty.set()

    # ------------------------------------------------------------ waiting (for handlers)

    async def request_pass(self, wait_seconds: float | None = None) -> PassResult | None:
        """Nudge and wait for a pass that starts after now; None on timeout."""
        after = self._started
        self._dirty.set()
        try:
            async with asyncio.timeout(wait_seconds):
                async with self._pass_done:
                    await self._pass_done.wait_for(lambda: self._last is not None and self._last.number > after)
        except TimeoutError:
            return None
        return self._last

    async def wait_released(self, pool: str, wait_seconds: float) -> bool:
        self._dirty.set()
        try:
            async with asyncio.timeout(wait_seconds):
                async with self._pass_done:
                    await self._pass_done.wait_for(lambda: pool in self._released)
        except TimeoutError:
            return False
        return True

    def status(self, pool: str) -> dict[str, Any] | None:
        published = self._published.get(pool)
        return published.status if published else None

    async def next_status(
        self,
        pool: str,
        current: Callable[[], Mapping[str, Any]],
        wait_seconds: float,
        stop: Awaitable[Any] | None = None,
    ) -> dict[str, Any] | None:
        """The status the pool should have, once it differs from `current()`.

        A change is held for `--status-settle` seconds so that changes in quick succession (a
        pool going Configuring → Ready as the MIG manager and agents report) become one write.
        None after `wait_seconds` without a change, or as soon as `stop` completes.
        """
        published = self._published.get(pool)
        if published is None:
            published = self._published[pool] = _Published(status={})
        stopper = asyncio.ensure_future(stop) if stop is not None else None
        try:
            if not self._status_pending(published, current()):
                published.changed.clear()
                if not await self._wait_either(published.changed.wait(), stopper, wait_seconds):
                    return None
                published = self._published.get(pool) or published
            if not published.status or not self._status_pending(published, current()):
                return None
            settle = self.config.status_settle_seconds
            if settle > 0:
                if await self._wait_either(None, stopper, settle) is None:
                    return None
                published = self._published.get(pool) or published
                if not published.status or not self._status_pending(published, current()):
                    return None
            return published.status
        finally:
            if stopper is not None:
                stopper.cancel()

    @staticmethod
    async def _wait_either(
        change: Awaitable[Any] | None, stopper: asyncio.Future[Any] | None, seconds: float
    ) -> bool | None:
        """True when `change` completed, None when `stopper` did, False on timeout."""
        waiters: list[asyncio.Future[Any]] = []
        changed = asyncio.ensure_future(change) if change is not None else None
        if changed is not None:
            waiters.append(changed)
        if stopper is not None:
            waiters.append(stopper)
        if not waiters:
            await asyncio.sleep(seconds)
            return False
        try:
            done, _ = await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if changed is not None:
                changed.cancel()
        if stopper is not None and stopper in done:
            return None
        return changed is not None and changed in done

    def status_written(self, pool: str, status: Mapping[str, Any]) -> None:
        published = self._published.get(pool)
        if published is not None:
            published.written = dict(status)
            published.written_at = self._clock()

    def _status_pending(self, published: _Published, current: Mapping[str, Any] | None) -> bool:
        if not published.status or patches.merge_diff(dict(current or {}), published.status) is None:
            return False
        recently = self._clock() - published.written_at < STATUS_ECHO_SECONDS
        return not (recently and published.written == published.status)

    def probe(self) -> dict[str, Any]:
        if self.task is not None and self.task.done() and not self.task.cancelled():
            error = self.task.exception()
            raise RuntimeError(f"the reconcile loop stopped: {error!r}")
        last = self._last
        return {
            "active": self.active,
            "passes": self._started,
            "last_ok": last.ok if last else None,
            "last_error": last.error if last else None,
            "pools": len(self._planned_pools),
            "nodes": len(self._planned_nodes),
        }

    # ------------------------------------------------------------ the loop

    async def run(self) -> None:
        await self._ready.wait()
        while True:
            await self._active.wait()
            wait = self._wait_seconds()
            if wait is None or wait > 0:
                with contextlib.suppress(TimeoutError):  # asyncio.timeout: a cancellation is never lost
                    async with asyncio.timeout(wait):
                        await self._dirty.wait()
            if self._retry_at is not None and self._clock() < self._retry_at:
                await asyncio.sleep(self._retry_at - self._clock())
            if self.config.debounce_seconds > 0:
                await asyncio.sleep(self.config.debounce_seconds)
            if not self.active:
                continue
            self._dirty.clear()
            self._in_flight = asyncio.ensure_future(self.reconcile_once())
            try:
                result = await self._in_flight
            except asyncio.CancelledError:
                if _cancelling():
                    raise
                continue  # paused mid-pass
            finally:
                self._in_flight = None
            if result.ok:
                self._backoff = BACKOFF_START
                self._retry_at = None
                if result.conflicts:
                    self._dirty.set()  # re-read already: plan again with the fresh objects, no backoff
            else:
                self._retry_at = self._clock() + self._backoff
                self._backoff = min(self._backoff * 2, BACKOFF_MAX)
                self._dirty.set()

    def _wait_seconds(self) -> float | None:
        now = self._clock()
        deadlines = [t for t in (self._requeue_at, self._retry_at) if t is not None]
        if self._loaded_at is not None:
            deadlines.append(self._loaded_at + self.config.resync_seconds)
        if self._agents_at is not None and self._planned_pools:
            deadlines.append(self._agents_at + self.config.agent_check_seconds)
        if not deadlines:
            return None
        return max(0.0, min(deadlines) - now)

    async def reconcile_once(self) -> PassResult:
        """One pass: load what is not cached, plan, write, publish. Never raises (errors are results).

        Passes never overlap (`_exclusive`): every write to nodes and to the shared ConfigMaps comes
        from one plan of the whole cluster at a time.
        """
        async with self._exclusive:
            return await self._reconcile_once()

    async def _reconcile_once(self) -> PassResult:
        self._started += 1
        number = self._started
        started = time.perf_counter()
        try:
            if self._loaded_at is None or self._clock() - self._loaded_at >= self.config.resync_seconds:
                await self._load()
            result = await self._pass(number)
        except TRANSIENT as error:
            log.warning("reconcile pass %d failed: %s", number, error)
            result = PassResult(number, False, error=str(error))
        except Exception as error:  # a bug must not kill the loop: log it, count it, retry later
            log.exception("reconcile pass %d crashed", number)
            result = PassResult(number, False, error=repr(error))
        self.metrics.observe_pass(time.perf_counter() - started, result.ok)
        async with self._pass_done:
            self._last = result
            self._pass_done.notify_all()
        return result

    # ------------------------------------------------------------ reading what is not watched

    async def _load(self) -> None:
        config = self.config
        for name in (config.device_plugin_configmap, config.mig_configmap):
            self._configmaps[name] = await self.client.get_or_none(self._configmap_path(name))
        selector = f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY}"
        listed = await self.client.list(
            f"/apis/apps/v1/namespaces/{config.agent.namespace}/daemonsets", label_selector=selector
        )
        self._daemonsets = {d["metadata"]["name"]: d for d in listed if _managed(d)}
        try:
            nodepools = await self.client.list(NODEPOOLS, label_selector=selector)
        except NotFoundError:
            self._karpenter = False
            self._nodepools = {}
        else:
            self._karpenter = True
            self._nodepools = {n["metadata"]["name"]: n for n in nodepools if _managed(n)}
        self._unplannable.clear()  # set-aside pools are tried again at every resync
        self._loaded_at = self._clock()

    async def _observe_agents(self) -> None:
        """The agents' DaemonSets, pods and FailedCreate Events, for all pools (at most every agent check)."""
        now = self._clock()
        if self._agents_at is not None and now - self._agents_at < self.config.agent_check_seconds:
            return
        namespace = self.config.agent.namespace
        try:
            daemonsets = await self.client.list(
                f"/apis/apps/v1/namespaces/{namespace}/daemonsets",
                label_selector=f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY}",
            )
            pods = await self.client.list(
                f"/api/v1/namespaces/{namespace}/pods", label_selector=agents.POD_LABEL_SELECTOR
            )
            events = await self.client.list(
                f"/api/v1/namespaces/{namespace}/events", field_selector=agents.EVENT_FIELD_SELECTOR
            )
        except TRANSIENT as error:  # RBAC of an older chart, a slow API server: AgentReady rests on reports
            if self._agents is not None or self._agents_at is None:
                log.warning("the agents' DaemonSets, pods and Events could not be listed: %s", error)
            self._agents_at = now
            return
        self._agents = agents.observe(daemonsets, pods, events)
        self._agents_at = now

    def _configmap_path(self, name: str, *, collection: bool = False) -> str:
        base = f"/api/v1/namespaces/{self.config.namespace}/configmaps"
        return base if collection else f"{base}/{name}"

    # ------------------------------------------------------------ inputs

    def _pool_input(self, record: PoolRecord) -> PoolInput:
        key = _spec_key(record)
        checked = self._validated.get(key)
        if checked is None:
            checked = self._validated[key] = inputs.validate(json.loads(record.spec_json))
        pool = inputs.pool_input(record.body(), checked=checked)
        published = self._published.get(record.name)
        if published is not None and published.status:
            pool = PoolInput(
                name=pool.name,
                spec=pool.spec,
                problems=pool.problems,
                uid=pool.uid,
                generation=pool.generation,
                created=pool.created,
                deleting=pool.deleting,
                previous=inputs.previous_status(published.status),
            )
        return pool

    def _node_views(self) -> list[NodeView]:
        now = self._clock()
        views: list[NodeView] = []
        for view in self._node_source():
            overlay = self._overlay.get(view.name)
            if overlay is not None:
                if view == overlay.after or now - overlay.at > OVERLAY_TTL_SECONDS or view != overlay.before:
                    del self._overlay[view.name]
                else:
                    view = overlay.after
            views.append(view)
        return views

    def _config_state(self) -> ConfigState:
        return inputs.config_state(
            self._configmaps.get(self.config.device_plugin_configmap),
            self._configmaps.get(self.config.mig_configmap),
        )

    def _healthy_since(self, views: Iterable[NodeView]) -> dict[str, datetime]:
        seen: dict[str, datetime] = {}
        for view in views:
            if view.health is not None and view.health.healthy and view.health.since is None:
                seen[view.name] = self._first_healthy.get(view.name) or self._now()
        self._first_healthy = seen
        return seen

    # ------------------------------------------------------------ a pass

    def _pool_records(self) -> dict[str, PoolRecord]:
        """The index's pools, overlaid with a fresher list until the index agrees (or the overlay expires)."""
        records = {r.name: r for r in self._pool_source()}
        if self._pool_overlay and self._clock() - self._pool_overlay_at > OVERLAY_TTL_SECONDS:
            self._pool_overlay = {}
        for name, listed in list(self._pool_overlay.items()):
            indexed = records.get(name)
            if _same_pool(indexed, listed):
                del self._pool_overlay[name]
            elif listed is None:
                records.pop(name, None)
            else:
                records[name] = listed
        return records

    def _pool_check_due(self) -> bool:
        listed = self._pools_listed_at
        return self._pools_suspect or listed is None or self._clock() - listed >= POOL_CHECK_SECONDS

    async def _index_was_stale(self, records: Mapping[str, PoolRecord]) -> bool:
        """Lists the pools; True (and an overlay of the listed pools) when the index disagrees with the API."""
        listed = {r.name: r for r in map(PoolRecord.from_body, await self.client.list(POOLS))}
        self._pools_listed_at = self._clock()
        self._pools_suspect = False
        stale = {n for n in set(records) | set(listed) if not _same_pool(records.get(n), listed.get(n))}
        if not stale:
            return False
        log.warning("the pool index is stale (%s); planning with the listed pools", ", ".join(sorted(stale)[:10]))
        self._pool_overlay = {name: listed.get(name) for name in stale}
        self._pool_overlay_at = self._clock()
        return True

    def _would_write(self, result: Plan, owned: Mapping[str, OwnedObjects], views: Mapping[str, NodeView]) -> bool:
        for name, change in result.changes.items():
            view = views.get(name)
            if view is not None and patches.node_patch(view, change) is not None:
                return True
        for objects in owned.values():
            for obj, cache in ((objects.daemonset, self._daemonsets), (objects.nodepool, self._nodepools)):
                if obj is not None:
                    current = cache.get(obj["metadata"]["name"])
                    if current is None or _hash(current) != _hash(obj):
                        return True
        return False

    async def _pass(self, number: int) -> PassResult:
        records = self._pool_records()
        if records:
            await self._observe_agents()
        pools = [self._pool_input(r) for r in records.values()]
        views = self._node_views()
        options = PlannerOptions(
            now=self._now(),
            release_orphans=True,
            not_ready_grace_seconds=self.config.not_ready_grace_seconds,
            karpenter_available=self._karpenter,
            agent_backend=self.config.agent.backend,
            tolerated_taints=self.config.tolerated_taints,
            healthy_since=self._healthy_since(views),
            agents=self._agents,
        )
        live_specs = {_spec_key(r) for r in records.values()}
        self._unplannable = {k: v for k, v in self._unplannable.items() if k in live_specs}
        known = {r.name: self._unplannable[key] for r in records.values() if (key := _spec_key(r)) in self._unplannable}
        config_state = self._config_state()
        result = plan(pools, views, config_state, options, known)
        owned, failures = render_owned(result, self.config.agent, karpenter=self._karpenter)
        if failures:
            result = plan(pools, views, config_state, options, {**result.unplannable, **failures})
            owned, _ = render_owned(result, self.config.agent, karpenter=self._karpenter)
        for name, why in result.unplannable.items():
            if name in records and _spec_key(records[name]) not in self._unplannable:
                log.error("pool %s set aside: %s", name, why)
                self._unplannable[_spec_key(records[name])] = why
        by_name = {v.name: v for v in views}
        if (
            self._pool_check_due()
            and self._would_write(result, owned, by_name)
            and await self._index_was_stale(records)
        ):
            return await self._pass(number)  # once: the pools were just listed
        self.plan = result
        writer = _Writes(self)

        await writer.configmaps(result, final=False)
        if not writer.blocked:
            await writer.owned_objects(owned)
            await writer.nodes(result, by_name)
            if not writer.unwritten_nodes:
                await writer.configmaps(result, final=True)
            await writer.delete_orphaned_objects(result, records)
        await writer.events(result.events)

        complete = not writer.blocked and not writer.unwritten_nodes
        unpublished = set(writer.failed_pools) | writer.conflicted_pools
        if writer.blocked:
            unpublished |= {p.name for p in result.pools}
        self._record_remediations(result)
        self._publish(result, unpublished)
        released = frozenset(p.name for p in result.pools if p.deleting and p.name not in unpublished and complete)
        self._released = (self._released | released) & set(records)
        self._planned_nodes = {v.name: v for v in views}
        self._planned_pools = records
        self._overlay = {name: o for name, o in self._overlay.items() if name in by_name}
        self._validated = {k: v for k, v in self._validated.items() if k in live_specs}
        self._requeue_at = self._clock() + result.requeue_after if result.requeue_after is not None else None
        self.metrics.plan = result
        self._pools_suspect = self._pools_suspect or writer.conflicts > 0
        ok = writer.first_error is None
        failed = frozenset(writer.failed_pools | ({p.name for p in result.pools} if writer.errored_globally else set()))
        return PassResult(number, ok, failed, released, writer.first_error, writer.count, writer.conflicts)

    def _publish(self, result: Plan, failed: Iterable[str]) -> None:
        failed = set(failed)
        for pool in result.pools:
            if pool.status is None or pool.name in failed:
                continue
            status = pool.status.model_dump(mode="json", by_alias=True, exclude_none=True)
            published = self._published.get(pool.name)
            if published is None:
                published = self._published[pool.name] = _Published(status=status)
                published.changed.set()
            elif published.status != status:
                published.status = status
                published.changed.set()
        live = {p.name for p in result.pools}
        for name in list(self._published):
            if name not in live:
                self._published[name].changed.set()
                del self._published[name]

    def _record_remediations(self, result: Plan) -> None:
        breakers: set[tuple[str, str]] = set()
        for remediation in result.remediations:
            key = (remediation.pool, remediation.node)
            if remediation.action == "circuit_breaker":
                breakers.add(key)
                if key in self._breakers_seen:
                    continue
            self.metrics.remediations[(remediation.pool, remediation.action)] += 1
        self._breakers_seen = breakers

    def remember_node(self, before: NodeView | None, after: Mapping[str, Any]) -> None:
        view = NodeView.from_body(after)
        self._overlay[view.name] = _Overlay(before=before, after=view, at=self._clock())

    def event_due(self, key: tuple[str, str, str, str]) -> bool:
        now = self._clock()
        last = self._events_posted.get(key)
        if last is not None and now - last < EVENT_REPEAT_SECONDS:
            return False
        self._events_posted[key] = now
        if len(self._events_posted) > 10_000:
            cutoff = now - EVENT_REPEAT_SECONDS
            self._events_posted = {k: t for k, t in self._events_posted.items() if t >= cutoff}
        return True


@dataclass(frozen=True)
class OwnedObjects:
    """What one pool owns besides node labels: its agent DaemonSet and, for Karpenter pools, a NodePool."""

    daemonset: dict[str, Any]
    nodepool: dict[str, Any] | None = None


def render_owned(
    result: Plan, agent: render.AgentSettings, *, karpenter: bool
) -> tuple[dict[str, OwnedObjects], dict[str, str]]:
    """Renders every planned pool's objects; a pool whose rendering raises is returned apart (name → why)."""
    owned: dict[str, OwnedObjects] = {}
    failures: dict[str, str] = {}
    for pool in result.pools:
        if not pool.valid or pool.deleting or pool.spec is None:
            continue
        try:
            daemonset = render.daemonset(pool.name, pool.uid, pool.spec, agent, pool.tolerations)
            nodepool = None
            if pool.spec.provisioner.type == "karpenter" and karpenter:
                nodepool = render.nodepool(pool.name, pool.uid, pool.spec, pool.member_labels)
        except Exception as error:  # one pool's bug must not stop the others
            failures[pool.name] = f"accelpool could not render this pool's objects: {type(error).__name__}: {error}"
            continue
        owned[pool.name] = OwnedObjects(daemonset, nodepool)
    return owned, failures


def _same_pool(a: PoolRecord | None, b: PoolRecord | None) -> bool:
    if a is None or b is None:
        return a is b
    return (a.uid, a.spec_json, a.deleting, a.generation) == (b.uid, b.spec_json, b.deleting, b.generation)


def _spec_key(record: PoolRecord) -> tuple[str, str]:
    return (record.uid or record.name, record.spec_json)


def _cancelling() -> bool:
    """Whether the running task itself is being cancelled (not only a pass it awaited)."""
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _loop_time() -> float:
    """The event loop's clock: timers, backoff and hold-down all run on it (and on a fake one in tests)."""
    return asyncio.get_running_loop().time()


def _managed(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(conventions.MANAGED_BY_LABEL) == conventions.MANAGED_BY and conventions.POOL_LABEL in labels


class _Writes:
    """The writes of one pass, their failures attributed to pools."""

    def __init__(self, reconciler: Reconciler) -> None:
        self.r = reconciler
        self.client = reconciler.client
        self.config = reconciler.config
        self.failed_pools: set[str] = set()
        """Pools whose writes failed with an error."""
        self.conflicted_pools: set[str] = set()
        """Pools with a write rejected for a stale resourceVersion (re-read; the next pass retries)."""
        self.unwritten_nodes: set[str] = set()
        self.blocked = False
        """A ConfigMap could not be written: nothing that depends on it is written this pass."""
        self.errored_globally = False
        self.conflicts = 0
        self.count = 0
        self.first_error: str | None = None

    def _fail(self, error: Exception, what: str, pools: Iterable[str | None] = ()) -> None:
        log.warning("%s: %s", what, error)
        self.first_error = self.first_error or f"{what}: {error}"
        self.failed_pools.update(p for p in pools if p)

    def _wrote(self, verb: str, resource: str) -> None:
        self.count += 1
        self.r.metrics.write(verb, resource)

    # ------------------------------------------------------------ ConfigMaps

    async def configmaps(self, result: Plan, *, final: bool) -> None:
        config = self.config
        dp_name, mig_name = config.device_plugin_configmap, config.mig_configmap
        current_dp = self.r._configmaps.get(dp_name)
        current_mig = self.r._configmaps.get(mig_name)
        dp_data = dict(result.device_plugin)
        dp_managed = result.device_plugin_managed
        mig_document: dict[str, Any] = dict(result.mig_document)
        mig_managed = result.mig_managed
        if not final:
            # Add and update only: nodes may still select keys this pass removes.
            old_dp = dict((current_dp or {}).get("data") or {})
            dp_data = {**old_dp, **dp_data}
            dp_managed = dp_managed | patches.parse_managed(
                ((current_dp or {}).get("metadata") or {})
                .get("annotations", {})
                .get(conventions.MANAGED_KEYS_ANNOTATION)
            )
            state = inputs.config_state(None, current_mig)
            old_entries = dict((state.mig or {}).get("mig-configs") or {})
            entries = {**old_entries, **dict(result.mig_document.get("mig-configs") or {})}
            mig_document = {**dict(result.mig_document), "mig-configs": entries}
            mig_managed = mig_managed | state.mig_managed
        wanted = {
            dp_name: (dp_data, dp_managed, conventions.MANAGED_KEYS_ANNOTATION),
            mig_name: (
                {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(_ordered_mig(mig_document))},
                mig_managed,
                conventions.MANAGED_ENTRIES_ANNOTATION,
            ),
        }
        for name, (data, managed, annotation) in wanted.items():
            current = self.r._configmaps.get(name)
            if name == mig_name and current is not None:
                # Compare documents, not text: a ConfigMap edited by hand need not be rewritten for whitespace.
                old = inputs.config_state(None, current)
                old_text = (current.get("data") or {}).get(conventions.MIG_CONFIG_DATA_KEY)
                if old.mig == _ordered_mig(mig_document) and old_text is not None:
                    data = {conventions.MIG_CONFIG_DATA_KEY: old_text}
            change = patches.configmap_patch(
                current, name=name, namespace=config.namespace, data=data, managed=managed, annotation=annotation
            )
            if change is None:
                continue
            verb, body = change
            try:
                if verb == "create":
                    try:
                        response = await self.client.create(self.r._configmap_path(name, collection=True), body)
                    except ConflictError:
                        self.r._configmaps[name] = await self.client.get_or_none(self.r._configmap_path(name))
                        self.conflicts += 1
                        self.blocked = True
                        continue
                else:
                    response = await self.client.patch(self.r._configmap_path(name), body)
                self._wrote(verb, "configmaps")
                self.r._configmaps[name] = response
            except ConflictError:
                self.r._configmaps[name] = await self.client.get_or_none(self.r._configmap_path(name))
                self.conflicts += 1
                self.blocked = True
            except TRANSIENT as error:
                self._fail(error, f"ConfigMap {config.namespace}/{name}")
                self.blocked = True
                self.errored_globally = True
                with contextlib.suppress(*TRANSIENT):
                    self.r._configmaps[name] = await self.client.get_or_none(self.r._configmap_path(name))

    # ------------------------------------------------------------ DaemonSets and NodePools

    async def owned_objects(self, owned: Mapping[str, OwnedObjects]) -> None:
        daemonsets = f"/apis/apps/v1/namespaces/{self.config.agent.namespace}/daemonsets"
        for pool, objects in owned.items():
            await self._ensure(pool, objects.daemonset, self.r._daemonsets, daemonsets, "daemonsets")
            if objects.nodepool is not None:
                await self._ensure(pool, objects.nodepool, self.r._nodepools, NODEPOOLS, "nodepools")

    async def _ensure(
        self, pool: str, desired: dict[str, Any], cache: dict[str, dict[str, Any]], collection: str, resource: str
    ) -> None:
        """Server-side apply of the rendered object, when its spec hash differs from what is there.

        The operator owns these objects whole, and their controllers (the DaemonSet controller, Karpenter)
        write only `.status`, after every change. An update carrying the resourceVersion of the
        operator's last write would meet a 409 almost every time; an apply without one cannot conflict
        on versions, leaves the controller's fields alone, removes what an earlier rendering set and this
        one does not, and creates the object when it is missing (one request either way).
        """
        name = desired["metadata"]["name"]
        current = cache.get(name)
        if (
            current is not None
            and _hash(current) == desired["metadata"]["annotations"][conventions.SPEC_HASH_ANNOTATION]
        ):
            return
        path = f"{collection}/{name}"
        try:
            response = await self.client.apply(path, desired, field_manager=FIELD_MANAGER)
            self._wrote("apply", resource)
            cache[name] = response
        except ConflictError:  # not expected (forced, no resourceVersion): re-read, and the next pass applies again
            fresh = await self.client.get_or_none(path)
            if fresh is None:
                cache.pop(name, None)
            else:
                cache[name] = fresh
            self.conflicts += 1
            self.conflicted_pools.add(pool)
        except NotFoundError as error:
            cache.pop(name, None)
            self._fail(error, f"{resource} {name}", [pool])
        except TRANSIENT as error:
            self._fail(error, f"{resource} {name}", [pool])

    async def delete_orphaned_objects(self, result: Plan, records: Mapping[str, PoolRecord]) -> None:
        keep = {p.name for p in result.pools if not p.deleting}
        for cache, path, resource, named in (
            (
                self.r._daemonsets,
                f"/apis/apps/v1/namespaces/{self.config.agent.namespace}/daemonsets",
                "daemonsets",
                conventions.agent_name,
            ),
            (self.r._nodepools, NODEPOOLS, "nodepools", conventions.nodepool_name),
        ):
            for name, obj in list(cache.items()):
                pool = ((obj.get("metadata") or {}).get("labels") or {}).get(conventions.POOL_LABEL)
                still_wanted = pool in keep and self._wants(result, pool, resource, name == named(pool or ""))
                if still_wanted:
                    continue
                try:
                    await self.client.delete(f"{path}/{name}")
                    self._wrote("delete", resource)
                    del cache[name]
                except TRANSIENT as error:
                    self._fail(error, f"deleting {resource} {name}", [pool])

    @staticmethod
    def _wants(result: Plan, pool: str | None, resource: str, current_name: bool) -> bool:
        found = result.pool(pool) if pool else None
        if found is None:
            return False
        if not found.valid:
            return True  # an invalid pool's objects are left as they are
        if not current_name:
            return False  # named by an older naming scheme: the pool's object under its current name replaces it
        if resource == "nodepools":
            return found.spec is not None and found.spec.provisioner.type == "karpenter"
        return True

    # ------------------------------------------------------------ nodes

    async def nodes(self, result: Plan, views: Mapping[str, NodeView]) -> None:
        semaphore = asyncio.Semaphore(max(1, self.config.write_concurrency))
        index_views = {v.name: v for v in self.r._node_source()}

        async def write(name: str) -> None:
            change = result.changes[name]
            view = views.get(name)
            if view is None:
                return
            body = patches.node_patch(view, change)
            removal = patches.health_removal(view, change)
            if body is None and removal is None:
                return
            async with semaphore:
                try:
                    if body is not None:
                        response = await self.client.patch(f"/api/v1/nodes/{name}", body)
                        self._wrote("patch", "nodes")
                        self.r.remember_node(index_views.get(name), response)
                    if removal is not None:
                        await self._remove_health(name, removal, index_views.get(name))
                except ConflictError:
                    self.conflicts += 1
                    self.unwritten_nodes.add(name)
                    self.conflicted_pools.update(p for p in (change.pool, view.pool) if p)
                    with contextlib.suppress(*TRANSIENT):
                        fresh = await self.client.get(f"/api/v1/nodes/{name}")
                        self.r.remember_node(index_views.get(name), fresh)
                except NotFoundError:
                    pass  # the node is gone; the next pass plans without it
                except TRANSIENT as error:
                    self.unwritten_nodes.add(name)
                    self._fail(error, f"node {name}", [change.pool, view.pool])
                    with contextlib.suppress(*TRANSIENT):
                        fresh = await self.client.get(f"/api/v1/nodes/{name}")
                        self.r.remember_node(index_views.get(name), fresh)

        await asyncio.gather(*(write(name) for name in result.changes))

    async def _remove_health(self, name: str, ops: list[dict[str, Any]], before: NodeView | None) -> None:
        """Best effort: a condition left behind reads as Unknown once its heartbeat is old (planning)."""
        try:
            response = await self.client.patch(f"/api/v1/nodes/{name}/status", ops, patch_type="json")
        except TRANSIENT as error:
            log.info("node %s: %s not removed: %s", name, conventions.HEALTH_CONDITION, error)
            return
        self._wrote("patch", "nodes/status")
        self.r.remember_node(before, response)

    # ------------------------------------------------------------ events

    async def events(self, intents: Iterable[EventIntent]) -> None:
        namespace = self.config.events_namespace
        now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        for intent in intents:
            key = (intent.kind, intent.name, intent.reason, intent.message)
            if not self.r.event_due(key):
                continue
            api_version = "v1" if intent.kind == "Node" else api.API_VERSION
            body = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{intent.name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
                "involvedObject": {"apiVersion": api_version, "kind": intent.kind, "name": intent.name}
                | ({"uid": intent.uid} if intent.uid else {}),
                "reason": intent.reason,
                "message": intent.message[:1024],
                "type": intent.type,
                "source": {"component": "accelpool"},
                "reportingComponent": "accelpool",
                "reportingInstance": self.r._instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
            try:
                await self.client.create(f"/api/v1/namespaces/{namespace}/events", body)
                self._wrote("create", "events")
            except TRANSIENT as error:
                log.info("event %s/%s not posted: %s", intent.kind, intent.name, error)


def _hash(obj: Mapping[str, Any]) -> str | None:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(conventions.SPEC_HASH_ANNOTATION)
    return str(value) if value is not None else None


def _ordered_mig(document: Mapping[str, Any]) -> dict[str, Any]:
    return nvidia.mig_parted_document(dict(document.get("mig-configs") or {}))


__all__ = ["PassResult", "PoolPlan", "PoolRecord", "Reconciler"]
