"""The drain executor: evicts the pods of the nodes a pass's plan drains, through the Eviction API.

The planner decides which nodes drain (`Plan.drains`, from `accelpool.decide.planning.remediation.ladder`); after the
pass's node writes (which carry each one's `draining` ladder record, behind its quarantine taint
or cordon), `DrainExecutor.drain` visits the due ones, at most `--write-concurrency` at once:

1. one list of the node's pods (`GET /api/v1/pods?fieldSelector=spec.nodeName=<node>`): only
   draining nodes are listed, each at most every `DRAIN_RETRY_SECONDS`, so a 10,000-node cluster
   costs a list per draining node and visit, never one per node and pass;
2. one eviction per pod to move (`accelpool.model.evictions.sort_pods`: DaemonSet, mirror, agent and
   completed pods stay; terminating ones are waited for), a policy/v1 Eviction POSTed to
   `/api/v1/namespaces/<ns>/pods/<pod>/eviction` with the policy's grace period;
3. what came of it (`DrainObservation`: evicted, refused by a PodDisruptionBudget and its message,
   gone, failed, the pods left) is kept in the `ClusterState`, and the next pass plans with it.

Pods are never deleted directly and no PodDisruptionBudget is bypassed: a refused eviction is
tried again on the next visit. API errors are logged, counted (`accelpool_drain_evictions_total
{result="failed"}`, `accelpool_drain_list_errors_total`) and tried again on the next visit.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Collection, Sequence

from accelpool.model import evictions
from accelpool.model.evictions import Answer, DrainOrder, PodRef
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool.runtime.controller.state import ClusterState
from accelpool.runtime.metrics import OperatorMetrics
from accelpool.runtime.settings import OperatorConfig
from accelpool_api import conventions
from accelpool_core.kube import ApiError, KubeClient

log = logging.getLogger("accelpool.runtime.controller")

PODS = "/api/v1/pods"


class DrainExecutor:
    """Visits draining nodes (see the module docstring). One per controller."""

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
        self._visited: dict[tuple[str, str], float] = {}
        """(node, drain) → when it was last visited."""

    async def drain(self, orders: Sequence[DrainOrder], permit: Permit, skip: Collection[str] = ()) -> int:
        """Visits the due nodes among `orders` (not those in `skip`: their ladder record was not written);
        returns the evictions the API server accepted. `Paused` when the permit is revoked."""
        self._state.keep_drains(orders)
        wanted = {(order.node, order.since) for order in orders}
        self._visited = {key: at for key, at in self._visited.items() if key in wanted}
        due = [order for order in orders if order.node not in skip and self._due(order)]
        if not due:
            return 0
        semaphore = asyncio.Semaphore(max(1, self._config.write_concurrency))

        async def visit(order: DrainOrder) -> int:
            async with semaphore:
                return await self._visit(order, permit)

        results = await asyncio.gather(*(visit(order) for order in due), return_exceptions=True)
        evicted = 0
        for result in results:
            if isinstance(result, BaseException):
                raise result  # Paused, or a bug: every other visit has finished
            evicted += result
        return evicted

    def _due(self, order: DrainOrder) -> bool:
        last = self._visited.get((order.node, order.since))
        return last is None or self._clock() - last >= conventions.DRAIN_RETRY_SECONDS

    async def _visit(self, order: DrainOrder, permit: Permit) -> int:
        self._visited[(order.node, order.since)] = self._clock()
        try:
            listed = await self._client.list(PODS, field_selector=f"spec.nodeName={order.node}")
        except TRANSIENT as error:
            log.warning("draining %s: its pods could not be listed: %s", order.node, error)
            self._metrics.drain_list_errors[order.pool] += 1
            return 0
        pods = evictions.sort_pods(listed, order.node)
        answers = []
        for pod in pods.evict:
            permit.check()
            answers.append(await self._evict(order, pod))
        self._state.remember_drain(evictions.observe(order, pods, answers))
        return sum(1 for answer in answers if answer.result == "evicted")

    async def _evict(self, order: DrainOrder, pod: PodRef) -> Answer:
        body = evictions.eviction_body(pod, order.grace_seconds)
        try:
            await self._client.create(evictions.eviction_path(pod), body)
        except ApiError as error:
            answer = evictions.read_answer(pod, error.status, error.message, error.causes)
        except TRANSIENT as error:
            answer = Answer(pod, "failed", str(error) or type(error).__name__)
        else:
            answer = evictions.read_answer(pod, 201)
            self._metrics.write("create", "pods/eviction")
        if answer.result == "failed":
            log.warning("draining %s: evicting %s failed: %s", order.node, pod, answer.message)
        if answer.result != "gone":
            self._metrics.drain_evictions[(order.pool, answer.result)] += 1
        return answer
