"""Claims: which free nodes the pools that lack members take.

Pools (in claim priority: oldest first, then by name) take free nodes in name order: Ready,
uncordoned, not quarantined, not unhealthy, not a control-plane node, matching the pool's
filter, and not reserved for someone else by a taint (taints that only mark an accelerator
node, `PlannerOptions.tolerated_taints`, do not count). Free nodes are bucketed by detected
accelerator once, and pools with the same filter share a cursor, so a pass costs
O(nodes + pools) for any realistic mix of pool shapes. A pool that finds too few is told why
the others do not qualify (its `shortfall`).

A pool with `spec.nvlink.sameClique` (`NodeFilter.same_clique`) keeps its members in one NVLink
clique (`nvidia.com/gpu.clique`): with members it claims only in the clique most of them carry
(ties: the first by name), so a quarantined member is replaced from its own clique; without
members it takes the clique with the most free nodes it could claim (ties: the first by name).
Nodes without the label never qualify. Such pools bucket their filter's candidates by clique,
one cursor per (filter, clique), and keep a count of what each clique still offers, lowered as
any pool takes a node (a heap finds the most offered in O(log cliques)): the cliques' pools stay
O(nodes + pools log cliques). Called by `accelpool.decide.planning.cluster_pass`.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
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
    cliques: tuple[str, ...] = ()
    """The `nvidia.com/gpu.clique` of each member that carries one (`member_cliques`): a same-clique pool's."""


@dataclass(frozen=True)
class Claim:
    nodes: tuple[NodeView, ...]
    """The free nodes the pool takes, in name order."""
    shortfall: str = ""
    """Why there were not enough (`2 cordoned, 1 held by other pools`); empty when the need was met."""


def member_cliques(members: Iterable[NodeView]) -> tuple[str, ...]:
    """The clique label of each member that carries one, for `ClaimRequest.cliques`."""
    return tuple(c for c in (v.labels.get(conventions.GPU_CLIQUE_LABEL) for v in members) if c)


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
    """Free candidates of one filter (or one clique of it) in name order, and how far pools took them."""

    items: list[NodeView]
    position: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    available: int = 0
    """Same-clique cursors: the items no pool has taken that the filter's pools could claim."""


@dataclass
class _Cliques:
    """A same-clique filter's free candidates by clique."""

    cursors: dict[str, _Cursor]
    """Clique → its cursor."""
    labelled: int
    unlabelled: int
    offers: list[tuple[int, str]]
    """A heap of (-available, clique) as last seen: takes only lower `available`, so an entry may overstate."""

    def most_offered(self) -> str | None:
        """The clique whose cursor offers the most (ties: the first by name); None when none offers a node.

        A top entry that overstates is corrected and pushed back; one that is right is the largest, since
        every other entry states at least what its clique offers. O(log cliques) per take, amortized.
        """
        while self.offers:
            stated, clique = self.offers[0]
            available = self.cursors[clique].available
            if -stated == available:
                return clique if available > 0 else None
            heapq.heapreplace(self.offers, (-available, clique))
        return None


class _Taken:
    """The nodes claimed so far; each take lowers what the same-clique cursors holding the node still offer."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.offered_by: dict[str, list[_Cursor]] = defaultdict(list)

    def __contains__(self, name: str) -> bool:
        return name in self.names

    def add(self, view: NodeView) -> None:
        self.names.add(view.name)
        for cursor in self.offered_by.pop(view.name, ()):
            cursor.available -= 1


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
    cliques: dict[tuple[Any, ...], _Cliques] = {}
    taken = _Taken()
    claims: dict[str, Claim] = {}
    for request in requests:
        if request.filter.same_clique:
            found = cliques.get(request.filter.key)
            if found is None:
                found = cliques[request.filter.key] = _by_clique(request.filter, buckets, reserving, taken)
            claims[request.pool] = _claim_in_clique(request, found, taken, reserving, held)
            continue
        cursor = cursors.get(request.filter.key)
        if cursor is None:
            cursor = cursors[request.filter.key] = _Cursor(_candidates(request.filter, buckets))
        nodes = _take(request, cursor, taken, reserving)
        shortfall = ""
        if len(nodes) < request.need:
            shortfall = _shortfall(request, cursor.skipped, held)
        claims[request.pool] = Claim(tuple(nodes), shortfall)
    return claims


def _candidates(node_filter: NodeFilter, buckets: Mapping[str, list[NodeView]]) -> list[NodeView]:
    items = [v for name in sorted(node_filter.accelerators) for v in buckets.get(name, ())]
    if len(node_filter.accelerators) > 1:
        items.sort(key=lambda v: v.name)
    return items


def _by_clique(
    node_filter: NodeFilter, buckets: Mapping[str, list[NodeView]], reserving: ReservingTaints, taken: _Taken
) -> _Cliques:
    """The filter's candidates by clique, each clique's cursor counting what the filter's pools could claim."""
    grouped: dict[str, list[NodeView]] = defaultdict(list)
    unlabelled = 0
    for view in _candidates(node_filter, buckets):
        clique = view.labels.get(conventions.GPU_CLIQUE_LABEL)
        if clique:
            grouped[clique].append(view)
        else:
            unlabelled += 1
    cursors: dict[str, _Cursor] = {}
    for clique, items in grouped.items():
        cursor = cursors[clique] = _Cursor(items)
        for view in items:
            if view.name not in taken and _claimable(node_filter, view, reserving):
                cursor.available += 1
                taken.offered_by[view.name].append(cursor)
    offers = [(-cursor.available, clique) for clique, cursor in cursors.items()]
    heapq.heapify(offers)
    labelled = sum(len(c.items) for c in cursors.values())
    return _Cliques(cursors, labelled=labelled, unlabelled=unlabelled, offers=offers)


def _claimable(node_filter: NodeFilter, view: NodeView, reserving: ReservingTaints) -> bool:
    return not_claimable(view, reserving) is None and node_filter.matches(view, current=False)


def _claim_in_clique(
    request: ClaimRequest, found: _Cliques, taken: _Taken, reserving: ReservingTaints, held: Mapping[str, int]
) -> Claim:
    """A same-clique pool's claim: in its members' clique, else in the one that offers the most."""
    unlabelled = {f"without {conventions.GPU_CLIQUE_LABEL}": found.unlabelled}
    if request.cliques:
        votes = Counter(request.cliques)
        clique = min(votes, key=lambda c: (-votes[c], c))
        if len(votes) > 1:
            share = f"{votes[clique]} of {len(request.cliques)} members there"
            where = f"members in {len(votes)} cliques, claiming in {clique} ({share})"
        else:
            where = f"clique {clique}"
    elif request.members:
        return Claim((), f"no member carries {conventions.GPU_CLIQUE_LABEL} yet: its clique is not known")
    else:
        best = found.most_offered()
        if best is None:
            skipped: Counter[str] = Counter()
            for cursor in found.cursors.values():  # nothing offered now is offered later: pass them all, once
                _take(replace(request, need=len(cursor.items)), cursor, taken, reserving)
                skipped.update(cursor.skipped)
            return Claim((), _shortfall(request, skipped + Counter(unlabelled), held))
        clique = best
        where = f"clique {clique}"
    cursor = found.cursors.get(clique) or _Cursor([])
    nodes = _take(request, cursor, taken, reserving)
    if len(nodes) >= request.need:
        return Claim(tuple(nodes))
    elsewhere = {"in another clique": found.labelled - len(cursor.items), **unlabelled}
    reasons = _shortfall(request, cursor.skipped + Counter(elsewhere), held)
    return Claim(tuple(nodes), f"{where}: {reasons}" if reasons else where)


def _take(request: ClaimRequest, cursor: _Cursor, taken: _Taken, reserving: ReservingTaints) -> list[NodeView]:
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
        taken.add(view)
        nodes.append(view)
        need -= 1
    return nodes


def _shortfall(request: ClaimRequest, skipped: Mapping[str, int], held: Mapping[str, int]) -> str:
    in_pools = sum(held.get(name, 0) for name in request.filter.accelerators) - request.members
    reasons = dict(skipped)
    if in_pools > 0:
        reasons["held by other pools"] = reasons.get("held by other pools", 0) + in_pools
    return ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()) if n)
