"""The cluster as the controller sees it: one object owning everything cached between passes.

How it works and why: docs/design/cluster-state.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, cast

from accelpool.decide import inputs
from accelpool.decide.dra.plan import DraInputs
from accelpool.decide.inputs import PoolRecord
from accelpool.decide.kueue import KueueObserved
from accelpool.decide.planning import ConfigState
from accelpool.model import agents
from accelpool.model.evictions import DrainObservation, DrainOrder
from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision, differing
from accelpool.runtime.controller import apiserver
from accelpool.runtime.controller.agentwatch import AgentWatch
from accelpool.runtime.controller.deadlines import Deadlines
from accelpool.runtime.controller.dra import DraCache
from accelpool.runtime.controller.freshness import HealthFreshness
from accelpool.runtime.controller.kueue import KueueCache
from accelpool.runtime.controller.overlays import Overlays, same_pool
from accelpool.runtime.controller.relevance import same_for_planning, selector_keys
from accelpool.runtime.settings import OperatorConfig
from accelpool_api import conventions
from accelpool_core.kube import KubeClient, NotFoundError

log = logging.getLogger("accelpool.runtime.controller")

POOL_CHECK_SECONDS = 10.0
"""A pass that would write lists the pools first when it has not done so for this long (or after a 409):
a pool deleted while the operator was paused or its watch was down is never written for."""
Owned = Literal["daemonsets", "nodepools"]
"""The kinds of objects a pool owns besides node labels."""
NodeSource = Mapping[str, NodeView] | Iterable[NodeView]
"""What the node source gives: the views by name (the node informer's `Revision`), or the views."""
PoolSource = Mapping[str, PoolRecord] | Iterable[PoolRecord]
"""What the pool source gives: the records by name (`accelpool.runtime.handlers.PoolRecords`), or the records."""
_T = TypeVar("_T")


@dataclass(frozen=True)
class Snapshot:
    """The cluster as one pass plans with it."""

    pools: Mapping[str, PoolRecord]
    nodes: Mapping[str, NodeView]
    """By name: a `Revision` of the previous snapshot's (planning compares only the nodes that changed)."""
    config: ConfigState
    """The NVIDIA ConfigMaps, parsed."""
    mig_text: str | None
    """The MIG ConfigMap's document as stored (a document that says the same is not rewritten)."""
    karpenter: bool
    agents: Mapping[str, agents.AgentObservation] | None
    drains: Mapping[str, DrainObservation]
    """Node → the drain executor's last visit, for the nodes draining."""
    loaded_at: float
    """When the unwatched objects were last read (a new value: pools set aside are tried again)."""
    kueue: KueueObserved | None = None
    """Kueue's ResourceFlavors and ClusterQueues (`accelpool.runtime.controller.kueue`); None in offline plans."""
    health_unchanged_for: Mapping[str, float] | None = None
    """Node → seconds since the operator last saw its agent health change (`PlannerOptions.health_unchanged_for`)."""
    dra: DraInputs | None = None
    """NVIDIA's ResourceSlices, accelpool's DeviceTaintRules and what the cluster serves of them
    (`accelpool.runtime.controller.dra`), read while some pool is `allocation: DRA`; None otherwise."""


class ClusterState:
    """See the module docstring. One per controller; `clock` is the event loop's (a fake one in tests)."""

    def __init__(
        self,
        config: OperatorConfig,
        client: KubeClient,
        clock: Callable[[], float],
        on_agents_changed: Callable[[], None] = lambda: None,
        on_due: Callable[[], None] = lambda: None,
    ) -> None:
        self._config = config
        self._client = client
        self._clock = clock
        self._node_source: Callable[[], NodeSource] = lambda: ()
        self._pool_source: Callable[[], PoolSource] = lambda: ()
        self._overlays = Overlays(clock)
        self._pools_listed_at: float | None = None
        self._pools_suspect = False
        self._pools_relist = False
        self._configmaps: dict[str, dict[str, Any] | None] = {}
        self._owned: dict[Owned, dict[str, dict[str, Any]]] = {"daemonsets": {}, "nodepools": {}}
        self.owned_version = 0
        """Counts the changes to the stored DaemonSets and NodePools held here (a read, a write's response)."""
        self._karpenter = False
        self.kueue = KueueCache(client)
        self.dra = DraCache(client, config.device_taint_rules)
        self._loaded_at: float | None = None
        self.agent_watch = AgentWatch(
            client, config.agent.namespace, on_agents_changed, on_due, clock, poll_seconds=config.agent_check_seconds
        )
        """The agents' objects, watched (`accelpool.runtime.controller.agentwatch`; run by the controller's loop)."""
        self._drains: dict[str, DrainObservation] = {}
        self._planned_nodes: Mapping[str, NodeView] = {}
        self._planned_pools: Mapping[str, PoolRecord] = {}
        self._selector_keys: frozenset[str] = frozenset()
        self._freshness = HealthFreshness()
        self._freshness_at: float | None = None
        """When the last snapshot aged the nodes' health: conditions stale by then were planned so."""
        self._indexed: Mapping[str, NodeView] = {}
        """The node source's views as last read, by name."""
        self._indexed_changes: set[str] | None = None
        """The nodes whose indexed views changed since the last snapshot (None: every node: none was taken)."""
        self._nodes_now: Revision[NodeView] = Revision()
        """The last snapshot's nodes: the indexed views, overlaid."""
        self._observed: Mapping[str, NodeView] = {}
        """The views the last snapshot's freshness observed, by name."""
        self._parsed_config: tuple[dict[str, Any] | None, dict[str, Any] | None, ConfigState] | None = None
        self._pools_read: tuple[object, Mapping[str, PoolRecord]] | None = None
        """The pool source's last answer, and its records by name: an answer that is the same object holds the
        same pools (kopf's index is read again only after a pool event: `accelpool.runtime.handlers.PoolRecords`),
        so a pass without pool overlays gets the very mapping the last one did, and what is derived from it
        (`_derived`) is not derived again."""
        self._derived: dict[str, tuple[Mapping[str, PoolRecord], Any]] = {}

    # ------------------------------------------------------------ inputs (from the kopf handlers)

    def bind(self, nodes: Callable[[], NodeSource], pools: Callable[[], PoolSource]) -> None:
        """The nodes' and the pools' sources (the node informer's views by name, kopf's pool index): read at every
        snapshot."""
        self._node_source, self._pool_source = nodes, pools

    def node_event(self, name: str, view: NodeView | None) -> bool:
        """A node changed (None: deleted); True when planning could come out differently."""
        planned = self._planned_nodes.get(name)
        if view is None:
            self._freshness.forget(name)
            return planned is not None
        written = self._overlays.written_node(name)
        now = self._clock()
        unchanged_for = self._freshness.unchanged_for(name, now)  # before this view: had it gone stale?
        self._freshness.observe(view, now)
        keys, stale = self._selector_keys, self._config.health_stale_seconds
        return not (
            same_for_planning(planned, view, selector_keys=keys, unchanged_for=unchanged_for, stale_seconds=stale)
            or (
                written is not None
                and same_for_planning(
                    written, view, selector_keys=keys, unchanged_for=unchanged_for, stale_seconds=stale
                )
            )
        )

    def pool_event(self, name: str, record: PoolRecord | None) -> bool:
        """A pool changed (None: deleted); True unless what planning reads of it is what was planned."""
        return record is None or self._planned_pools.get(name) != record

    # ------------------------------------------------------------ the one read of a pass

    async def snapshot(self) -> Snapshot:
        """The cluster for one pass: reads what is due (unwatched objects, pools after a resume)."""
        resync = self._loaded_at is None or self._clock() - self._loaded_at >= self._config.resync_seconds
        if resync:
            await self._load()
        if self._pools_relist:
            await self.check_pools(self._pools())
        pools = self._pools()
        dp = self._configmaps.get(self._config.device_plugin_configmap)
        mig = self._configmaps.get(self._config.mig_configmap)
        assert self._loaded_at is not None
        nodes = self._nodes()
        dra = None
        dra_pools = self._derive(
            pools, "DRA pools", lambda: any(r.spec.get("allocation") == "DRA" for r in pools.values())
        )
        if resync or dra_pools or self.dra.holds_objects:  # a resync finds DRA objects a pool left behind
            await self.dra.load(slices=dra_pools)
        if dra_pools or self.dra.holds_objects:
            dra = self.dra.inputs
        return Snapshot(
            pools=pools,
            nodes=nodes,
            config=self._config_state(dp, mig),
            mig_text=((mig or {}).get("data") or {}).get(conventions.MIG_CONFIG_DATA_KEY),
            karpenter=self._karpenter,
            agents=self.agent_watch.observed(),
            drains=dict(self._drains),
            loaded_at=self._loaded_at,
            kueue=self.kueue.observed,
            health_unchanged_for=self._health_ages(nodes),
            dra=dra,
        )

    def _config_state(self, dp: dict[str, Any] | None, mig: dict[str, Any] | None) -> ConfigState:
        """The ConfigMaps parsed, once per stored version (a write or a read replaces the cached object)."""
        cached = self._parsed_config
        if cached is not None and cached[0] is dp and cached[1] is mig:
            return cached[2]
        parsed = inputs.config_state(dp, mig)
        self._parsed_config = (dp, mig, parsed)
        return parsed

    def planned_with(self, snapshot: Snapshot) -> None:
        """A pass planned with `snapshot`: node and pool events are compared with it from now on."""
        self._planned_nodes = snapshot.nodes
        pools = snapshot.pools
        self._planned_pools = pools  # never changed: `_pools` gives a new mapping where overlays change it
        self._selector_keys = self._derive(
            pools, "selector keys", lambda: selector_keys([r.spec for r in pools.values()])
        )
        self._overlays.keep(snapshot.nodes, snapshot.pools)

    def list_pools_first(self) -> None:
        """The next snapshot lists the pools (kopf's pool index may not hold them all yet)."""
        self._pools_relist = True

    def invalidate(self) -> None:
        """Forget everything cached: the next snapshot reads the unwatched objects and the pools again."""
        self._loaded_at = None
        self._pools_relist = True
        self._overlays.clear()
        self._planned_nodes, self._planned_pools = {}, {}
        self._indexed_changes, self._nodes_now = None, Revision()

    def due_at(self, deadlines: Deadlines) -> None:
        """Tell `deadlines` when the cache needs a pass: the next resync, a DaemonSet's change no pass planned with
        (`AgentWatch.due`), and when the next condition planned fresh turns stale."""
        deadlines.watch("resync", self._resync_at)
        deadlines.watch("agent DaemonSets", self.agent_watch.due)
        deadlines.watch("stale health", self._stale_at)

    def _resync_at(self) -> float | None:
        return None if self._loaded_at is None else self._loaded_at + self._config.resync_seconds

    def _stale_at(self) -> float | None:
        if self._freshness_at is None:
            return None
        return self._freshness.turns_stale(self._config.health_stale_seconds, after=self._freshness_at)

    @property
    def planned_counts(self) -> tuple[int, int]:
        """(pools, nodes) the last pass planned with."""
        return len(self._planned_pools), len(self._planned_nodes)

    async def _load(self) -> None:
        config = self._config
        for name in (config.device_plugin_configmap, config.mig_configmap):
            self._configmaps[name] = await self._client.get_or_none(f"{apiserver.configmaps(config.namespace)}/{name}")
        selector = f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY}"
        listed = await self._client.list(apiserver.daemonsets(config.agent.namespace), label_selector=selector)
        self._owned["daemonsets"] = {d["metadata"]["name"]: d for d in listed if _managed(d)}
        try:
            nodepools = await self._client.list(apiserver.NODEPOOLS, label_selector=selector)
        except NotFoundError:
            self._karpenter = False
            self._owned["nodepools"] = {}
        else:
            self._karpenter = True
            self._owned["nodepools"] = {n["metadata"]["name"]: n for n in nodepools if _managed(n)}
        self.owned_version += 1
        await self.kueue.load()
        self.dra.forget_discovery()
        self._loaded_at = self._clock()

    # ------------------------------------------------------------ drains

    def remember_drain(self, observation: DrainObservation) -> None:
        """The drain executor's visit to a node: the next pass plans with it."""
        self._drains[observation.node] = observation

    def keep_drains(self, orders: Sequence[DrainOrder]) -> None:
        """Forget the visits of drains that ended (the node is no longer ordered drained, or drains anew)."""
        wanted = {order.node: order.since for order in orders}
        self._drains = {n: o for n, o in self._drains.items() if wanted.get(n) == o.since}

    # ------------------------------------------------------------ nodes

    def _health_ages(self, nodes: Mapping[str, NodeView]) -> Mapping[str, float]:
        """How long each node's agent health has gone unchanged (the snapshot's views seen now, the watch's
        events seen as they came); only the views that changed since the last snapshot are looked at."""
        now = self._clock()
        for name in differing(nodes, self._observed):
            view = nodes.get(name)
            if view is None:
                self._freshness.forget(name)
            else:
                self._freshness.observe(view, now)
        self._observed = nodes
        self._freshness_at = now
        return self._freshness.ages(now, self._config.health_stale_seconds)

    def _nodes(self) -> Revision[NodeView]:
        """The indexed nodes overlaid with this operator's writes the index has not caught up with: the last
        snapshot's nodes revised where the index changed since or an overlay stood in."""
        indexed = self.indexed_nodes()
        now, overlays = self._clock(), self._overlays
        changed = self._indexed_changes if self._indexed_changes is not None else self._nodes_now.keys() | indexed
        names = changed | overlays.node_names()
        updates = {
            name: overlays.node(view, now) if (view := indexed.get(name)) is not None else None for name in names
        }
        self._indexed_changes = set()
        self._nodes_now = self._nodes_now.revised(updates)
        return self._nodes_now

    def indexed_nodes(self) -> Mapping[str, NodeView]:
        """The node index as it is now, by name, without overlays (what a write's overlay stands in for). Every read
        (a snapshot's, a writer's) adds what changed since the one before to what the next snapshot revises."""
        source = self._node_source()
        indexed = source if isinstance(source, Mapping) else {view.name: view for view in source}
        if indexed is not self._indexed:
            if self._indexed_changes is not None:
                self._indexed_changes |= differing(indexed, self._indexed)
            self._indexed = indexed
        return indexed

    def remember_node(self, before: NodeView | None, written: Mapping[str, Any]) -> None:
        """A node as a write (or a re-read after a 409) returned it, until the index shows it."""
        self._overlays.remember_node(before, NodeView.from_body(written, before))

    # ------------------------------------------------------------ pools and their statuses

    def _pools(self) -> Mapping[str, PoolRecord]:
        """The index's pools, overlaid with a fresher list until the index agrees (or the overlay expires): the
        same mapping as the last time while the source's answer is the same object and no overlay applies."""
        source = self._pool_source()
        if self._pools_read is None or self._pools_read[0] is not source:
            by_name = source if isinstance(source, Mapping) else {record.name: record for record in source}
            self._pools_read = (source, by_name)
        indexed = self._pools_read[1]
        return self._overlays.pools(dict(indexed)) if self._overlays.lists_pools else indexed

    def _derive(self, pools: Mapping[str, PoolRecord], what: str, derive: Callable[[], _T]) -> _T:
        """`derive()`, computed once per mapping of pools `_pools` gave (`what` names it)."""
        cached = self._derived.get(what)
        if cached is not None and cached[0] is pools:
            return cast(_T, cached[1])
        value = derive()
        self._derived[what] = (pools, value)
        return value

    def pool_check_due(self) -> bool:
        listed = self._pools_listed_at
        return self._pools_suspect or listed is None or self._clock() - listed >= POOL_CHECK_SECONDS

    def write_conflicted(self) -> None:
        """A write met a 409: what the index says about pools may be stale too (the next writing pass lists them)."""
        self._pools_suspect = True

    async def check_pools(self, records: Mapping[str, PoolRecord]) -> bool:
        """Lists the pools; True (and an overlay of the listed pools) when `records` disagree with the API.

        Their metadata first: where every pool is the indexed one at the same generation, that is all (500 pools
        with their statuses cost about three times as much to read and copy); otherwise the pools themselves."""
        metadata = await self._client.list(apiserver.POOLS, metadata_only=True)
        self._pools_listed_at = self._clock()
        self._pools_suspect = self._pools_relist = False
        if len(metadata) == len(records) and all(_same_generation(records.get(_name(m)), m) for m in metadata):
            return False
        bodies = {_name(body): body for body in await self._client.list(apiserver.POOLS)}
        listed = {
            name: PoolRecord.from_body(body)
            for name, body in bodies.items()
            if not _same_generation(records.get(name), body)
        }
        stale = {n for n in records if n not in bodies}
        stale |= {n for n, record in listed.items() if not same_pool(records.get(n), record)}
        if not stale:
            return False
        log.warning("the pool index is stale (%s); planning with the listed pools", ", ".join(sorted(stale)[:10]))
        self._overlays.listed_pools({name: listed.get(name) for name in stale})
        return True

    def pool_status(self, record: PoolRecord) -> Mapping[str, Any]:
        """The pool's status as stored: the one this operator wrote until the index holds it, else the index's."""
        return self._overlays.status(record)

    def remember_status(self, record: PoolRecord, written: Mapping[str, Any]) -> None:
        """The status a write stored (its response's), standing in for the index's until the watch delivers it."""
        self._overlays.remember_status(record, written)

    # ------------------------------------------------------------ ConfigMaps, DaemonSets, NodePools

    def configmap(self, name: str) -> dict[str, Any] | None:
        return self._configmaps.get(name)

    def remember_configmap(self, name: str, stored: dict[str, Any] | None) -> None:
        self._configmaps[name] = stored

    def owned_object(self, kind: Owned, name: str) -> dict[str, Any] | None:
        return self._owned[kind].get(name)

    def owned(self, kind: Owned) -> dict[str, dict[str, Any]]:
        """The stored objects of a kind pools own, by name (a copy: change it with `remember_owned`)."""
        return dict(self._owned[kind])

    def remember_owned(self, kind: Owned, name: str, stored: dict[str, Any] | None) -> None:
        self.owned_version += 1
        if stored is None:
            self._owned[kind].pop(name, None)
        else:
            self._owned[kind][name] = stored


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", "?"))


def _same_generation(record: PoolRecord | None, body: Mapping[str, Any]) -> bool:
    """Whether a listed pool is the indexed one at the same generation, neither deleted since: the API server
    counts every change of a custom resource's spec in its generation, so its record would be the same to
    planning (`same_pool`) and need not be made (its status, a copy of which it would hold, is not compared)."""
    metadata = body.get("metadata") or {}
    return (
        record is not None
        and record.generation is not None
        and record.uid == str(metadata.get("uid") or "")
        and record.generation == metadata.get("generation")
        and record.deleting == bool(metadata.get("deletionTimestamp"))
    )


def _managed(obj: Mapping[str, Any]) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return labels.get(conventions.MANAGED_BY_LABEL) == conventions.MANAGED_BY and conventions.POOL_LABEL in labels
