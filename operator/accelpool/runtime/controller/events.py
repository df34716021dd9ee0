"""Kubernetes Events a pass decided on (`accelpool.decide.planning.EventIntent`), posted at most once per window.

The planner asks for an Event on every pass that sees its cause (a node turned unhealthy, a
breaker opened), so `EventRecorder` posts each (object, reason, message) at most once in
`EVENT_REPEAT_SECONDS`. Events are best effort: one that cannot be posted is logged, not retried.
A pass's Events are posted `concurrency` at a time (`--write-concurrency`): a storm asks for hundreds
in one pass, and one at a time they held the next pass back for seconds.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from datetime import datetime

import accelpool_api as api
from accelpool.decide.planning import EventIntent
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool.runtime.metrics import OperatorMetrics
from accelpool_api import conventions
from accelpool_core.kube import KubeClient

log = logging.getLogger("accelpool.runtime.controller")

EVENT_REPEAT_SECONDS = 600.0
"""The same Event (object, reason, message) is posted at most once in this window."""


class EventRecorder:
    """Posts Events into one namespace, remembering what it posted (one per operator)."""

    def __init__(
        self,
        namespace: str,
        client: KubeClient,
        metrics: OperatorMetrics,
        clock: Callable[[], float],
        wall_clock: Callable[[], datetime],
        concurrency: int = 1,
    ) -> None:
        self._concurrency = max(1, concurrency)
        self._namespace = namespace
        self._client = client
        self._metrics = metrics
        self._clock = clock
        self._now = wall_clock
        self._posted: OrderedDict[tuple[str, str, str, str], float] = OrderedDict()
        """What was posted when, oldest first: those older than the window are dropped from the front."""
        self._instance = socket.gethostname()

    async def post(self, intents: Iterable[EventIntent], permit: Permit) -> int:
        """Posts the intents not posted within the window; returns how many were posted."""
        stamp = self._now().strftime("%Y-%m-%dT%H:%M:%SZ")
        self._forget_expired()
        semaphore = asyncio.Semaphore(self._concurrency)
        posted = 0

        async def post(intent: EventIntent) -> None:
            nonlocal posted
            permit.check()
            if not self._due((intent.kind, intent.name, intent.reason, intent.message)):
                return
            async with semaphore:
                permit.check()
                try:
                    await self._client.create(f"/api/v1/namespaces/{self._namespace}/events", self._body(intent, stamp))
                except TRANSIENT as error:
                    log.info("event %s/%s not posted: %s", intent.kind, intent.name, error)
                    return
                self._metrics.write("create", "events")
                posted += 1

        results = await asyncio.gather(*(post(intent) for intent in intents), return_exceptions=True)
        for result in results:
            if isinstance(result, BaseException):
                raise result  # Paused, or a bug: every other Event's post has finished
        return posted

    def _forget_expired(self) -> None:
        """Drops what was posted longer than the window ago, from the front: O(1) amortized per Event (a storm at
        10,000 nodes remembers tens of thousands, and sweeping them all on every post held passes back)."""
        now, posted = self._clock(), self._posted
        while posted:
            oldest, at = next(iter(posted.items()))
            if now - at < EVENT_REPEAT_SECONDS:
                return
            del posted[oldest]

    def _due(self, key: tuple[str, str, str, str]) -> bool:
        """Whether the Event is due (not posted within the window), remembering it as posted now if so."""
        if key in self._posted:
            return False
        self._posted[key] = self._clock()
        return True

    @property
    def remembered(self) -> int:
        """How many Events are remembered as posted within the window."""
        return len(self._posted)

    def _body(self, intent: EventIntent, stamp: str) -> dict[str, object]:
        api_version = "v1" if intent.kind == "Node" else api.API_VERSION
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{intent.name}.{uuid.uuid4().hex[:16]}", "namespace": self._namespace},
            "involvedObject": {"apiVersion": api_version, "kind": intent.kind, "name": intent.name}
            | ({"uid": intent.uid} if intent.uid else {}),
            "reason": intent.reason,
            "message": conventions.cut(intent.message),
            "type": intent.type,
            "source": {"component": "accelpool"},
            "reportingComponent": "accelpool",
            "reportingInstance": self._instance,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
