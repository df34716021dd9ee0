"""The "plan" stage of a pass: a `Snapshot` → `Desired`, with what planning remembers between passes.

`Planner.decide(snapshot, previous)` builds each pool's `PoolInput` once, straight from its index
record, and calls the pure `accelpool.decide.desired.decide`. Between passes it remembers only:

- the last pass's `Desired`: the next plans only what changed since
  (`accelpool.decide.planning.incremental`, the same plan), except after the cached objects were
  read again (every `--resync-interval`, and after a resume), when it plans the whole cluster: the
  safety net. A pool whose record and previous status are the same objects keeps its `PoolInput`;

- each pool's spec validation, per (uid, spec): a spec is validated once, not on every pass;
- the pools set aside because planning or rendering them raised (per uid and spec, so a spec
  change tries again, as does every reload of the cached objects): they are planned as
  `Valid=False/PlanningFailed` and nothing is written for them, and the error is logged once;
- when the operator first saw each node's AcceleratorHealthy True, for conditions that carry no
  transition time (the hold-down of a quarantine counts from then);
- when it first saw each device-plugin key and mig-parted entry stored in the NVIDIA ConfigMaps: a
  member moves to an edited pool's new config only `--config-sync` after that (`ConfigSync`: the
  kubelet projects a ConfigMap's update into the pods that mount it up to a minute later). After a
  restart every config counts as first seen then, which delays only the moves still to come.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime

import accelpool_api as api
from accelpool.decide import inputs
from accelpool.decide.desired import Desired, decide
from accelpool.decide.inputs import Checked, PoolRecord
from accelpool.decide.planning import ConfigState, ConfigSync, PlannerOptions, PoolInput
from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision, differing, replaced
from accelpool.runtime.controller.state import Snapshot
from accelpool.runtime.settings import OperatorConfig

log = logging.getLogger("accelpool.runtime.controller")


class Planner:
    """Plans passes (see the module docstring). One per controller."""

    def __init__(self, config: OperatorConfig, wall_clock: Callable[[], datetime]) -> None:
        self._config = config
        self._now = wall_clock
        self._validated: dict[tuple[str, str], Checked] = {}
        self._set_aside: dict[tuple[str, str], str] = {}
        self._set_aside_since: float | None = None
        self._healthy_since: Revision[datetime] = Revision()
        self._healthy_transition: dict[str, datetime | None] = {}
        """The lastTransitionTime of the condition each `_healthy_since` entry was first seen True with."""
        self._healthy_seen: Mapping[str, NodeView] = {}
        self._configs_seen: tuple[dict[str, datetime], dict[str, datetime]] = ({}, {})
        self._last: Desired | None = None
        self._pools_seen: Mapping[str, PoolRecord] = {}
        self._inputs_seen: tuple[Mapping[str, PoolRecord], Mapping[str, api.ComputePoolStatus]] = ({}, {})
        """The pools and previous statuses `_pool_inputs` last made inputs of."""
        self._inputs: dict[str, tuple[PoolRecord, Checked, api.ComputePoolStatus | None, PoolInput]] = {}

    def decide(self, snapshot: Snapshot, previous: Mapping[str, api.ComputePoolStatus]) -> Desired:
        """The pass's desired state; `previous`: the status the last pass planned for each pool (a `Revision` of
        the one the pass before gave, so only the pools whose status changed are looked at again)."""
        if snapshot.loaded_at != self._set_aside_since:  # the cache was reloaded: try set-aside pools again
            self._set_aside, self._set_aside_since = {}, snapshot.loaded_at
            self._last = None  # and plan the whole cluster
        self._forget_gone(snapshot.pools)
        pools = self._pool_inputs(snapshot.pools, previous)
        known = {
            record.name: self._set_aside[record.validation_key]
            for record in (snapshot.pools.values() if self._set_aside else ())
            if record.validation_key in self._set_aside
        }
        now = self._now()
        options = PlannerOptions(
            now=now,
            release_orphans=True,
            not_ready_grace_seconds=self._config.not_ready_grace_seconds,
            karpenter_available=snapshot.karpenter,
            health_stale_seconds=self._config.health_stale_seconds,
            health_unchanged_for=snapshot.health_unchanged_for,
            tolerated_taints=self._config.tolerated_taints,
            healthy_since=self._healthy_since_of(snapshot.nodes),
            agents=snapshot.agents,
            drains=snapshot.drains,
            config_sync=self._config_sync(snapshot.config, now),
        )
        desired = decide(
            pools,
            snapshot.nodes,
            snapshot.config,
            options,
            unplannable=known,
            agent=self._config.agent,
            current_mig_text=snapshot.mig_text,
            kueue_observed=snapshot.kueue,
            previous=self._last,
            dra_inputs=snapshot.dra,
        )
        self._last = desired
        for name, why in desired.plan.unplannable.items():
            record = snapshot.pools.get(name)
            if record is not None and record.validation_key not in self._set_aside:
                log.error("pool %s set aside: %s", name, why)
                self._set_aside[record.validation_key] = why
        return desired

    def _forget_gone(self, pools: Mapping[str, PoolRecord]) -> None:
        """Forgets the validations and set-asides of pools and specs no longer there (looking only at the pools that
        changed since the last pass, where `pools` is a `Revision` of its)."""
        for name in differing(pools, self._pools_seen):
            before, now = self._pools_seen.get(name), pools.get(name)
            if before is not None and (now is None or now.validation_key != before.validation_key):
                self._validated.pop(before.validation_key, None)
                self._set_aside.pop(before.validation_key, None)
        self._pools_seen = pools

    def _pool_inputs(
        self, pools: Mapping[str, PoolRecord], previous: Mapping[str, api.ComputePoolStatus]
    ) -> list[PoolInput]:
        """Each pool's `PoolInput`, made again only for the pools whose record or previous status is another object
        than the last pass's (a `Revision` each: found in as many steps as changed); the others keep the very
        object (incremental planning compares inputs by identity first). A pool added since comes last: the order
        changes only when the pools do."""
        kept = self._inputs
        for name in replaced(pools, self._inputs_seen[0]) | replaced(previous, self._inputs_seen[1]):
            record = pools.get(name)
            if record is None:
                kept.pop(name, None)
                continue
            checked, status = self._checked(record), previous.get(name)
            before = kept.get(name)
            if before is None or before[0] is not record or before[1] is not checked or before[2] is not status:
                kept[name] = (record, checked, status, inputs.pool_input(record, checked=checked, previous=status))
        self._inputs_seen = (pools, previous)
        return [entry[3] for entry in kept.values()]

    def _checked(self, record: PoolRecord) -> Checked:
        checked = self._validated.get(record.validation_key)
        if checked is None:
            checked = self._validated[record.validation_key] = inputs.validate(record.spec)
            below = inputs.hold_down_below_floor(record.spec)
            if below is not None:
                log.warning(
                    "pool %s: spec.health.holdDown %s is below the %s floor (stored before it existed): %s is used;"
                    " set holdDown to at least %s",
                    record.name,
                    below,
                    api.MIN_HOLD_DOWN,
                    api.MIN_HOLD_DOWN,
                    api.MIN_HOLD_DOWN,
                )
        return checked

    def _config_sync(self, config: ConfigState, now: datetime) -> ConfigSync:
        """When each config now stored was first seen (`ConfigSync`); configs no longer stored are forgotten. `now`
        is the pass's own (`PlannerOptions.now`): a config first seen this pass has waited exactly 0 s, so a
        `--config-sync` of 0 holds nothing."""
        mig_configs = (config.mig or {}).get("mig-configs") if isinstance(config.mig, dict) else None
        stored = (config.device_plugin or {}, mig_configs if isinstance(mig_configs, dict) else {})
        self._configs_seen = (
            {key: self._configs_seen[0].get(key) or now for key in stored[0]},
            {name: self._configs_seen[1].get(name) or now for name in stored[1]},
        )
        device_plugin, mig = self._configs_seen
        return ConfigSync(self._config.config_sync_seconds, device_plugin, mig)

    def _healthy_since_of(self, nodes: Mapping[str, NodeView]) -> Mapping[str, datetime]:
        """When this operator first saw each node's condition True, on its own clock.

        The hold-down counts from here, not from the agent's `lastTransitionTime`: an agent whose
        clock runs a day behind would otherwise be released at once (as freshness, `controller.freshness`,
        is judged by when the operator saw a change). A new `lastTransitionTime` is a new transition
        (the node failed and recovered between two passes): it starts the count again. After a restart
        the count starts at the first pass, so a quarantine waits at most one hold-down more.

        Only the nodes that changed since the last pass are looked at; the mapping is a `Revision` of the last one
        (the same object when nothing changed), so incremental planning compares only those too.
        """
        updates: dict[str, datetime | None] = {}
        transitions, now = self._healthy_transition, None
        for name in differing(nodes, self._healthy_seen):
            view = nodes.get(name)
            health = view.health if view is not None else None
            if health is None or not health.healthy:
                updates[name] = None
                transitions.pop(name, None)
            elif name not in transitions or transitions[name] != health.since:
                now = now or self._now()
                updates[name], transitions[name] = now, health.since
        self._healthy_seen = nodes
        self._healthy_since = self._healthy_since.revised(updates)
        return self._healthy_since
