"""How long each node's agent health has gone unchanged, by the operator's own clock.

How it works and why: docs/design/freshness.md.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from accelpool.model.nodes import HealthCondition, NodeView
from accelpool_api import conventions


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
