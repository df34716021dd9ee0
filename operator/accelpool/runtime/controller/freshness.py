"""How long each node's agent health has gone unchanged, by the operator's own clock.

An agent rewrites its `AcceleratorHealthy` condition at least every heartbeat period
(`lastHeartbeatTime`); one that stops leaves its last verdict behind, which planning reads as
Unknown/AgentSilent once it is stale (`accelpool.decide.planning.membership.judge_health`). Whether it
is stale is judged as the node lifecycle controller judges a kubelet's Ready condition
(kubernetes, pkg/controller/nodelifecycle/node_lifecycle_controller.go `tryUpdateNodeHealth`): it
keeps, per node, a `probeTimestamp` on its own clock, set to its own now when it first sees the
node ("Missing timestamp for Node. Assuming now as a timestamp") and whenever the observed
`LastHeartbeatTime` (or the Lease's renewTime) differs from the one it saw before, and reads the
node's conditions as Unknown once its now is past that timestamp plus the grace period. The times the writer put in the
condition are only compared with what it wrote before, never with the operator's clock: an agent dead for
two hours whose clock runs a day ahead is found silent, one whose clock is 20 minutes behind and
which keeps writing stays fresh, and a condition without `lastHeartbeatTime` ages like any other.

`HealthFreshness.observe(view, at)` takes every node the operator sees (each watch event and each
pass's snapshot, overlays of its own writes included): a condition seen for the first time, a
condition that differs in anything (status, reason, message, times), or a new agent report
(`accelpool.io/health`) counts as a change at `at`. The operator's own write that takes a released
node's report away is no sign of life and does not count. So after an operator restart every agent
gets one full period from the operator's first sight of its condition before it can read as silent,
as the lifecycle controller gives every node it first sees (its `probeTimestamp` starts at its own
now). A standby replica's controller watches the nodes all along and takes over with what it
observed.

Times are the controller's loop clock (monotonic): a step of the operator's wall clock changes no
age. `ClusterState` (`accelpool.runtime.controller.state`) owns one: its ages go to planning
(`PlannerOptions.health_unchanged_for`), the age before an event to the relevance filter
(`accelpool.runtime.controller.relevance`), and the moment the next fresh condition turns stale is one of
the loop's deadlines, so a silent node is found without any event.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from accelpool.model import conventions
from accelpool.model.nodes import HealthCondition, NodeView


@dataclass
class _Seen:
    condition: HealthCondition
    report: str | None
    """The agent's report annotation as last seen (None: none)."""
    at: float
    """When the condition or the report last changed, by the operator's clock."""


class HealthFreshness:
    """Per node with an `AcceleratorHealthy` condition: when the operator last saw it or its report change."""

    def __init__(self) -> None:
        self._seen: dict[str, _Seen] = {}

    def observe(self, view: NodeView, at: float) -> None:
        """The node as seen at `at`: a first sight, or a changed condition or report, counts as a change then."""
        condition = view.health
        if condition is None:
            self._seen.pop(view.name, None)
            return
        report = view.annotations.get(conventions.HEALTH_ANNOTATION)
        seen = self._seen.get(view.name)
        if seen is None or seen.condition != condition or (report is not None and report != seen.report):
            self._seen[view.name] = _Seen(condition, report, at)
        else:
            seen.report = report  # taken away (by this operator, releasing the node): no sign of life

    def forget(self, name: str) -> None:
        """The node is gone."""
        self._seen.pop(name, None)

    def keep(self, names: Collection[str]) -> None:
        """Forget every node not in `names` (the nodes that exist)."""
        for name in [n for n in self._seen if n not in names]:
            del self._seen[name]

    def unchanged_for(self, name: str, at: float) -> float | None:
        """Seconds from the node's last change to `at` (None: it has no condition)."""
        seen = self._seen.get(name)
        return None if seen is None else at - seen.at

    def ages(self, at: float) -> dict[str, float]:
        """`unchanged_for` of every node with a condition."""
        return {name: at - seen.at for name, seen in self._seen.items()}

    def turns_stale(self, stale_seconds: float, after: float) -> float | None:
        """The first moment past `after` at which a condition has been unchanged for `stale_seconds` (None: none)."""
        return min((s.at + stale_seconds for s in self._seen.values() if s.at + stale_seconds > after), default=None)
