"""The last stage of a pass: each pool's status, written by the pass that computed it.

After its writes, a pass hands the planned statuses to `StatusWriter.publish` (not those of pools
whose writes failed: they would describe writes that did not happen), then takes those due
(`take_due`) and `send`s them while the next pass runs: each pool's `/status`
subresource PATCHed with the JSON merge diff from the stored status to the planned one
(`observedGeneration` included), compared when it is sent; one whose write fails is due again. What
it writes:

- nothing while a pool's stored status already says what was planned;
- a change only once it has waited `--status-settle` seconds, so changes in quick succession (a
  pool going Configuring → Ready as the MIG manager and the agents report) become one write: the
  first change makes the pool's status due, the loop wakes for the earliest due time, and that
  pass writes whatever it has planned by then;
- against the status this operator last wrote until the pool index holds it (a status overlay
  in `ClusterState`), so a written status is never re-sent while the watch catches up.

The planned statuses are also the next pass's `previous` statuses (conditions keep their
transition times, transitions become Events once). A pass runs at least every `--status-interval`
while there are pools, so a status someone else changed is put right within that time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

import accelpool_api as api
from accelpool.decide import patches
from accelpool.decide.inputs import PoolRecord
from accelpool.decide.planning import Plan, PoolPlan
from accelpool.model.revisions import Revision, replaced
from accelpool.runtime.controller import apiserver
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool.runtime.controller.deadlines import Deadlines
from accelpool.runtime.controller.state import ClusterState
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_core.kube import KubeClient, NotFoundError

log = logging.getLogger("accelpool.runtime.controller")


@dataclass
class _Planned:
    status: api.ComputePoolStatus
    document: dict[str, Any]
    due: float | None
    """When the status is to be written (None: the stored one already says it)."""
    stored: Mapping[str, Any] | None = None
    """The stored status it was compared with (the same status against the same stored one: the same outcome)."""


@dataclass(frozen=True)
class _Published:
    """What the last `StatusWriter.publish` compared: the pool plans, the records, the unpublished pools, and when
    every pool was last compared."""

    plans: tuple[PoolPlan, ...]
    pools: Mapping[str, PoolRecord]
    unpublished: frozenset[str]
    walked_at: float


Taken = list[tuple[PoolRecord, _Planned]]
"""Statuses `StatusWriter.take_due` took, to be sent: each pool's record and its planned status."""


@dataclass(frozen=True)
class StatusWrites:
    count: int = 0
    first_error: str | None = None


class StatusWriter:
    """Holds each pool's planned status until it is written (see the module docstring). One per controller."""

    def __init__(
        self,
        config: OperatorConfig,
        client: KubeClient,
        state: ClusterState,
        metrics: OperatorMetrics,
        clock: Callable[[], float],
    ) -> None:
        self._config = config
        self._client = client
        self._state = state
        self._metrics = metrics
        self._clock = clock
        self._planned: dict[str, _Planned] = {}
        self._statuses: Revision[api.ComputePoolStatus] = Revision()
        self._published: _Published | None = None
        self._written: set[str] = set()
        """The pools whose status was written since the last publish (what is stored for them changed)."""

    @property
    def previous(self) -> Mapping[str, api.ComputePoolStatus]:
        """The status the last pass planned for each pool (written or about to be): a `Revision` of the one the pass
        before planned, updated for the pools whose status changed."""
        return self._statuses

    def publish(self, plan: Plan, unpublished: Collection[str], pools: Mapping[str, PoolRecord]) -> None:
        """Takes the plan's statuses, except those of `unpublished` pools (their last published one is kept).

        Only the pools that may have changed since the last publish are compared again (`_to_compare`); every pool is,
        at least every `--status-interval`."""
        now = self._clock()
        names = self._to_compare(plan, unpublished, pools, now)
        before = self._planned
        planned = dict(before) if names is not None else {}
        if names is None:
            in_plan = [pool.name for pool in plan.pools]
            walked = [*in_plan, *(before.keys() - set(in_plan))]
        else:
            walked = sorted(names)
        updates: dict[str, api.ComputePoolStatus | None] = {}
        for name in walked:
            earlier = before.get(name)
            found = self._planned_status(plan.pool(name), pools.get(name), earlier, name in unpublished, now)
            if found is None:
                planned.pop(name, None)
            else:
                planned[name] = found
            status = found.status if found is not None else None
            if status is not (earlier.status if earlier is not None else None):
                updates[name] = status
        self._planned = planned
        self._statuses = self._statuses.revised(updates)
        walked_at = now if names is None or self._published is None else self._published.walked_at
        self._published = _Published(plan.pools, pools, frozenset(unpublished), walked_at)
        self._written = set()

    def _planned_status(
        self,
        pool: PoolPlan | None,
        record: PoolRecord | None,
        earlier: _Planned | None,
        unpublished: bool,
        now: float,
    ) -> _Planned | None:
        """A pool's planned status from this pass's plan, None when it has none (it is gone or being deleted)."""
        if pool is None or pool.status is None or record is None:
            return None  # a pool being deleted has no status to write
        if unpublished:
            return earlier
        stored = self._state.pool_status(record)
        if earlier is not None and earlier.status is pool.status and earlier.stored is stored:
            return earlier  # planned and stored as the last pass saw them: nothing to compare
        document = pool.status.model_dump(mode="json", by_alias=True, exclude_none=True)
        if patches.merge_diff(dict(stored), document) is None:
            due = None
        else:
            due = earlier.due if earlier is not None and earlier.due is not None else now + self._settle
        return _Planned(pool.status, document, due, stored)

    def _to_compare(
        self, plan: Plan, unpublished: Collection[str], pools: Mapping[str, PoolRecord], now: float
    ) -> set[str] | None:
        """The pools whose planned or stored status may differ from what the last publish compared (None: all): those
        planned anew (a pool plan is a value: the very same object, the same status), those whose record changed
        (another writer's status comes with it), those whose status this operator wrote since, and those
        unpublished then or now. All of them after `--status-interval`, for what no event announces (a written
        status the pool index never delivered, its overlay expired)."""
        last = self._published
        if last is None or now - last.walked_at >= self._config.status_resync_seconds:
            return None
        replanned = plan.replanned_since(last.plans)
        if replanned is None:
            return None
        return replanned | replaced(pools, last.pools) | self._written | last.unpublished | set(unpublished)

    def take_due(self, pools: Mapping[str, PoolRecord]) -> Taken:
        """The statuses whose time has come, taken: no longer due (so no deadline wakes the loop for them while
        they are sent); one whose write fails is due again."""
        now = self._clock()
        due = [
            (pools[name], planned)
            for name, planned in self._planned.items()
            if planned.due is not None and planned.due <= now and name in pools
        ]
        for _, planned in due:
            planned.due = None
        return due

    async def send(self, due: Taken, permit: Permit) -> StatusWrites:
        """Writes the statuses `take_due` took (`--write-concurrency` at once)."""
        semaphore = asyncio.Semaphore(max(1, self._config.write_concurrency))
        written: list[str] = []
        errors: list[str] = []

        async def write(record: PoolRecord, planned: _Planned) -> None:
            async with semaphore:
                try:
                    if await self._write(record, planned, permit):
                        written.append(record.name)
                except TRANSIENT as error:  # due again: the next pass tries again
                    planned.due = self._clock()
                    log.warning("status of pool %s: %s", record.name, error)
                    errors.append(f"status of pool {record.name}: {error}")

        results = await asyncio.gather(*(write(record, planned) for record, planned in due), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result  # Paused, or a bug: every other status write has finished
        return StatusWrites(len(written), errors[0] if errors else None)

    async def _write(self, record: PoolRecord, planned: _Planned, permit: Permit) -> bool:
        """Whether the pool's status had to be written (and was)."""
        diff = patches.merge_diff(dict(self._state.pool_status(record)), planned.document)
        if diff is None:
            return False
        permit.check()
        try:
            response = await self._client.patch(apiserver.pool_status(record.name), {"status": diff})
        except NotFoundError:
            return False  # the pool is gone: the watch will say so
        self._metrics.write("patch", "computepools/status")
        self._state.remember_status(record, dict(response.get("status") or {}))
        self._written.add(record.name)
        return True

    def due_at(self, deadlines: Deadlines) -> None:
        """Tell `deadlines` when a pass is needed for statuses: the earliest due one, and the next
        `--status-interval` check."""
        deadlines.watch("status due", self._status_due_at)
        deadlines.watch("status check", self._status_check_at)

    def _status_due_at(self) -> float | None:
        return min((p.due for p in self._planned.values() if p.due is not None), default=None)

    def _status_check_at(self) -> float | None:
        if not self._planned or self._published is None:
            return None
        return self._published.walked_at + self._config.status_resync_seconds

    def forget(self) -> None:
        """Drops every planned status (a resumed controller starts from the stored ones)."""
        self._planned.clear()
        self._statuses = Revision()
        self._published = None

    @property
    def _settle(self) -> float:
        return max(0.0, self._config.status_settle_seconds)
