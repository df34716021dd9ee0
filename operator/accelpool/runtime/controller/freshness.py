"""How long each node's agent health has gone unchanged, by the operator's own clock.

How it works and why: docs/design/freshness.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import takewhile

from accelpool.decide.planning.model import HealthAges
from accelpool.model.nodes import HealthCondition, NodeView
from accelpool.model.revisions import Revision
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
        """Oldest change first (a change moves its node to the end; the clock never runs backwards), so the nodes
        stale by now are a prefix: finding them costs as many steps as there are."""
        self._changed_at: Revision[float] = Revision()
        self._touched: set[str] = set()
        """Nodes whose change time moved since `ages` last published them."""

    def observe(self, view: NodeView, at: float) -> None:
        """The node as seen at `at`: a first sight, or a changed condition or report, counts as a change then."""
        condition = view.health
        if condition is None:
            self.forget(view.name)
            return
        report = view.annotations.get(conventions.HEALTH_ANNOTATION)
        seen = self._seen.get(view.name)
        if seen is None or seen.condition != condition or (report is not None and report != seen.report):
            self._seen.pop(view.name, None)
            self._seen[view.name] = _Seen(condition, report, at)
            self._touched.add(view.name)
        else:
            seen.report = report  # taken away (by this operator, releasing the node): no sign of life

    def forget(self, name: str) -> None:
        """The node is gone (or its condition is)."""
        if self._seen.pop(name, None) is not None:
            self._touched.add(name)

    def unchanged_for(self, name: str, at: float) -> float | None:
        """Seconds from the node's last change to `at` (None: it has no condition)."""
        seen = self._seen.get(name)
        return None if seen is None else at - seen.at

    def ages(self, at: float, stale_seconds: float) -> HealthAges:
        """`unchanged_for` of every node with a condition, as a value (later observations do not change it), with
        the nodes unchanged for `stale_seconds` by `at`."""
        if self._touched:
            seen = self._seen
            self._changed_at = self._changed_at.revised(
                {name: s.at if (s := seen.get(name)) is not None else None for name in self._touched}
            )
            self._touched = set()
        stale = frozenset(
            name for name, _ in takewhile(lambda item: at - item[1].at >= stale_seconds, self._seen.items())
        )
        return HealthAges(self._changed_at, at, stale_seconds, stale)

    def turns_stale(self, stale_seconds: float, after: float) -> float | None:
        """The first moment past `after` at which a condition has been unchanged for `stale_seconds` (None: none)."""
        for seen in self._seen.values():  # oldest first: past the stale ones, the first is the earliest
            if seen.at + stale_seconds > after:
                return seen.at + stale_seconds
        return None
