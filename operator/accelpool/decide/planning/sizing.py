"""Sizing: how many nodes a static pool lacks, or which of its members are surplus.

Members that cannot serve (quarantined after this pass, cordoned by someone else, NotReady for
longer than the grace period) are kept but not counted; the claims then look for spares so the
serving count returns to `nodes`. A surplus of serving members is released most recently joined
first (`accelpool.io/joined-at`, else the node's age). A NotReady member is reported, never
dropped: it is replaced only after the grace period and released only by scale-down or deletion.
Karpenter pools are sized by Karpenter: nothing is claimed or released for them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from accelpool.model.nodes import NodeView, parse_time


@dataclass(frozen=True)
class SizingDecision:
    surplus: tuple[NodeView, ...] = ()
    """Serving members to release, most recently joined first."""
    need: int = 0
    """Serving members the pool lacks (what the claims look for)."""
    requeue_after: float | None = None
    """Seconds until the grace period of a NotReady member runs out."""


def size(
    members: Sequence[NodeView],
    desired: int,
    *,
    karpenter: bool,
    quarantined: Callable[[NodeView], bool],
    now: datetime,
    not_ready_grace_seconds: float,
) -> SizingDecision:
    """`quarantined`: whether a member is quarantined once this pass's remediation is written."""
    serving: list[NodeView] = []
    waits: list[float] = []
    for view in members:
        if quarantined(view) or view.cordoned_by_others:
            continue
        if view.ready:
            serving.append(view)
            continue
        if view.ready_since is None:
            continue
        waited = (now - view.ready_since).total_seconds()
        if waited < not_ready_grace_seconds:
            serving.append(view)  # NotReady within the grace period still counts
            waits.append(not_ready_grace_seconds - waited)
    requeue_after = min(waits) if waits else None
    if karpenter:
        return SizingDecision(requeue_after=requeue_after)
    surplus = len(serving) - desired
    if surplus <= 0:
        return SizingDecision(need=-surplus, requeue_after=requeue_after)
    newest_first = sorted(serving, key=lambda view: joined(view, now), reverse=True)
    return SizingDecision(surplus=tuple(newest_first[:surplus]), requeue_after=requeue_after)


def joined(view: NodeView, now: datetime) -> tuple[datetime, str]:
    """When a member joined: its joined-at annotation, else (written by hand, older versions) the node's age."""
    oldest = datetime.min.replace(tzinfo=now.tzinfo)
    return (view.joined_at or parse_time(view.created) or oldest, view.name)
