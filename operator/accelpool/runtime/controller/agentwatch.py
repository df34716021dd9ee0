"""The agents as Kubernetes sees them: their DaemonSets, pods and FailedCreate Events, each collection kept
by an informer (`informer.py`), grouped by pool for the pools' `AgentReady` (`accelpool.model.agents`).

A list of every agent pod at every check cost the API server and the operator a full copy of them (at 8,000
nodes, tens of megabytes every `--agent-check-interval`); watched, a change costs its own event. A pod's or
a FailedCreate Event's change nudges the controller at once (an agent that cannot start is named in its
pool's status within a pass). A DaemonSet's change is mostly its controller counting pods as a rollout goes
on, which only refines the `WaitingForAgents` message: it is planned with at the next pass, and at the
latest `--agent-check-interval` after it came (`due`), so a rollout of 500 pools' agents does not make 500
status writes a second. Where the chart's RBAC grants list alone (an older chart), each collection is listed
every `--agent-check-interval` instead (`Informer`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from accelpool.model import agents
from accelpool.model.agents import AgentObservation, AgentPod, CreateFailure, DaemonSetState
from accelpool.runtime.controller import apiserver
from accelpool.runtime.controller.informer import Informer
from accelpool_api import conventions
from accelpool_core.kube import KubeClient

_T = TypeVar("_T")


class AgentWatch:
    """The agents' objects in `namespace`, watched; `observed()` gives them by pool. `on_change()` is called
    whenever a pod or an Event changes after all three were listed, `on_due()` when a DaemonSet's change makes
    `due` say a time; `clock` dates that change."""

    def __init__(
        self,
        client: KubeClient,
        namespace: str,
        on_change: Callable[[], None],
        on_due: Callable[[], None],
        clock: Callable[[], float],
        *,
        poll_seconds: float,
    ) -> None:
        self._on_change = on_change
        self._on_due = on_due
        self._clock = clock
        self._check_seconds = poll_seconds
        self._stale = True
        self._counted_at: float | None = None
        """When a DaemonSet changed that no `observed()` has grouped since (None: none)."""
        self._observed: dict[str, AgentObservation] = {}
        self.daemonsets: Informer[tuple[str, DaemonSetState]] = Informer(
            client,
            apiserver.daemonsets(namespace),
            _fresh(agents.daemonset_of),
            self._counted,
            what="agent DaemonSets",
            label_selector=f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY}",
            poll_seconds=poll_seconds,
        )
        self.pods: Informer[tuple[str, AgentPod]] = Informer(
            client,
            f"/api/v1/namespaces/{namespace}/pods",
            _fresh(agents.agent_pod_of),
            self._changed,
            what="agent pods",
            label_selector=agents.POD_LABEL_SELECTOR,
            poll_seconds=poll_seconds,
        )
        self.failures: Informer[CreateFailure] = Informer(
            client,
            f"/api/v1/namespaces/{namespace}/events",
            _fresh(CreateFailure.from_event),
            self._changed,
            what="agents' FailedCreate Events",
            field_selector=agents.EVENT_FIELD_SELECTOR,
            poll_seconds=poll_seconds,
        )
        self._informers = (self.daemonsets, self.pods, self.failures)

    async def run(self) -> None:
        """The three informers, until cancelled (they log and retry their errors)."""
        await asyncio.gather(*(informer.run() for informer in self._informers))

    async def tried(self) -> None:
        """Until each collection's first list has come in or failed."""
        for informer in self._informers:
            await informer.tried.wait()

    def observed(self) -> Mapping[str, AgentObservation] | None:
        """Each pool's observation; None until all three collections were listed. A pool whose observation is
        as it was keeps the same object (planning compares them by identity first)."""
        if not all(informer.listed for informer in self._informers):
            return None
        if self._stale:
            fresh = agents.group(self.daemonsets.items.values(), self.pods.items.values(), self.failures.items.values())
            before = self._observed
            self._counted_at = None
            self._observed = {
                pool: before[pool] if before.get(pool) == found else found for pool, found in fresh.items()
            }
            self._stale = False
        return self._observed

    def due(self) -> float | None:
        """When a pass must plan with a DaemonSet's change (None: no change waits)."""
        return None if self._counted_at is None else self._counted_at + self._check_seconds

    def _counted(self, _name: str, _value: Any) -> None:
        self._stale = True
        if self._counted_at is None and all(informer.listed for informer in self._informers):
            self._counted_at = self._clock()
            self._on_due()

    def _changed(self, _name: str, _value: Any) -> None:
        self._stale = True
        if all(informer.listed for informer in self._informers):
            self._on_change()


def _fresh(parse: Callable[[Mapping[str, Any]], _T | None]) -> Callable[[Mapping[str, Any], _T | None], _T | None]:
    """`parse` as an informer's parser: each object parsed anew (its last value is not lent)."""
    return lambda body, _last: parse(body)
