"""Claims: which free nodes the pools that lack members take.

Pools (in claim priority: oldest first, then by name) take free nodes in name order: Ready,
uncordoned, not quarantined, not unhealthy, not a control-plane node, matching the pool's
filter, and not reserved for someone else by a taint (taints that only mark an accelerator
node, `PlannerOptions.tolerated_taints`, do not count). Free nodes are bucketed by detected
accelerator once, and pools with the same filter share a cursor, so a pass costs
O(nodes + pools) for any realistic mix of pool shapes. A pool that finds too few is told why
the others do not qualify (its `shortfall`).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelpool.decide.planning.pools import NodeFilter
from accelpool.model.nodes import NodeView, Taint, tolerated
from accelpool_api import conventions


@dataclass(frozen=True)
class ClaimRequest:
    """A pool that lacks `need` serving members and holds `members` nodes now."""

    pool: str
    filter: NodeFilter
    need: int
    members: int


@dataclass(frozen=True)
class Claim:
    nodes: tuple[NodeView, ...]
    """The free nodes the pool takes, in name order."""
    shortfall: str = ""
    """Why there were not enough (`2 cordoned, 1 held by other pools`); empty when the need was met."""


class ReservingTaints:
    """The first taint that reserves a node for someone else (nodes share few taint sets: cached)."""

    def __init__(self, tolerated_taints: Sequence[str]) -> None:
        self._tolerated = tolerated_taints
        self._found: dict[tuple[Taint, ...], Taint | None] = {}

    def __call__(self, taints: tuple[Taint, ...]) -> Taint | None:
        if taints not in self._found:
            self._found[taints] = next((t for t in taints if not tolerated(t, self._tolerated)), None)
        return self._found[taints]


def not_claimable(view: NodeView, reserving: ReservingTaints) -> str | None:
    """Why a free node cannot be claimed by any pool, or None."""
    if any(role in view.labels for role in conventions.CONTROL_PLANE_ROLES) or any(
        t.key in conventions.CONTROL_PLANE_ROLES for t in view.taints
    ):
        return "control-plane"
    if not view.ready:
        return "not Ready"
    if view.unschedulable:
        return "cordoned"
    if view.quarantine_taint is not None:
        return "quarantined"
    if view.health is not None and view.health.unhealthy:
        return "unhealthy"
    taint = reserving(view.taints) if view.taints else None
    if taint is not None:
        return f"tainted {taint.key}"
    return None


@dataclass
class _Cursor:
    """Free candidates of one filter in name order, and how far pools took them."""

    items: list[NodeView]
    position: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


def claim(
    requests: Iterable[ClaimRequest],
    free: Mapping[str, NodeView],
    *,
    held: Mapping[str, int],
    tolerated_taints: Sequence[str],
) -> dict[str, Claim]:
    """Serve the requests in the order given. `held`: nodes in any pool, by detected accelerator name."""
    buckets: dict[str, list[NodeView]] = defaultdict(list)
    for name in sorted(free):
        view = free[name]
        if view.detected is not None:
            buckets[view.detected.accelerator.name].append(view)
    reserving = ReservingTaints(tolerated_taints)
    cursors: dict[tuple[Any, ...], _Cursor] = {}
    taken: set[str] = set()
    claims: dict[str, Claim] = {}
    for request in requests:
        cursor = cursors.get(request.filter.key)
        if cursor is None:
            cursor = cursors[request.filter.key] = _Cursor(_candidates(request.filter, buckets))
        nodes = _take(request, cursor, taken, reserving)
        shortfall = ""
        if len(nodes) < request.need:
            shortfall = _shortfall(request, cursor, held)
        claims[request.pool] = Claim(tuple(nodes), shortfall)
    return claims


def _candidates(node_filter: NodeFilter, buckets: Mapping[str, list[NodeView]]) -> list[NodeView]:
    items = [v for name in sorted(node_filter.accelerators) for v in buckets.get(name, ())]
    if len(node_filter.accelerators) > 1:
        items.sort(key=lambda v: v.name)
    return items


def _take(request: ClaimRequest, cursor: _Cursor, taken: set[str], reserving: ReservingTaints) -> list[NodeView]:
    """Move the cursor on until the request's need is met; what it passes over is counted in `skipped`."""
    nodes: list[NodeView] = []
    need, items, matches = request.need, cursor.items, request.filter.matches
    while need > 0 and cursor.position < len(items):
        view = items[cursor.position]
        cursor.position += 1
        if view.name in taken:
            cursor.skipped["taken by other pools"] += 1
            continue
        why = not_claimable(view, reserving)
        if why is None and not matches(view, current=False):
            why = "smaller or not selected"
        if why is not None:
            cursor.skipped[why] += 1
            continue
        taken.add(view.name)
        nodes.append(view)
        need -= 1
    return nodes


def _shortfall(request: ClaimRequest, cursor: _Cursor, held: Mapping[str, int]) -> str:
    in_pools = sum(held.get(name, 0) for name in request.filter.accelerators) - request.members
    reasons = dict(cursor.skipped)
    if in_pools > 0:
        reasons["held by other pools"] = reasons.get("held by other pools", 0) + in_pools
    return ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()) if n)
