"""Sizing on its own (`accelpool.decide.planning.sizing`): what a pool lacks, or which members are surplus."""

from __future__ import annotations

from datetime import timedelta

from accelpool.decide.planning.sizing import SizingDecision, joined, size
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, member


def not_quarantined(view: NodeView) -> bool:
    return False


def sized(members: list[NodeView], desired: int, *, karpenter: bool = False, grace: float = 300.0) -> SizingDecision:
    return size(
        members, desired, karpenter=karpenter, quarantined=not_quarantined, now=NOW, not_ready_grace_seconds=grace
    )


def test_a_pool_short_of_serving_members_needs_the_difference() -> None:
    assert sized([member("m1", "p")], 3) == SizingDecision(need=2)


def test_a_surplus_is_released_most_recently_joined_first() -> None:
    members = [
        member("old", "p", joined="2026-10-01T00:00:00Z"),
        member("new", "p", joined="2026-10-20T00:00:00Z"),
        member("mid", "p", joined="2026-10-10T00:00:00Z"),
    ]
    decision = sized(members, 1)
    assert [v.name for v in decision.surplus] == ["new", "mid"]
    assert decision.need == 0


def test_without_joined_at_the_node_age_decides_then_the_name() -> None:
    bare = member("b", "p", annotations={conventions.JOINED_ANNOTATION: "not a time"})
    assert joined(bare, NOW)[0].year == 1
    assert sorted([joined(bare, NOW), joined(member("a", "p"), NOW)])[0][1] == "b"


def test_members_that_cannot_serve_are_kept_but_not_counted() -> None:
    members = [
        member("q", "p"),
        member("c", "p", unschedulable=True),  # cordoned by someone else
        member("long", "p", ready=False, ready_since="2026-11-01T00:00:00Z"),
        member("ok", "p"),
    ]
    decision = size(
        members,
        2,
        karpenter=False,
        quarantined=lambda view: view.name == "q",
        now=NOW,
        not_ready_grace_seconds=300.0,
    )
    assert decision == SizingDecision(need=1)


def test_a_member_not_ready_within_the_grace_period_counts_and_asks_to_plan_again_when_it_ends() -> None:
    since = (NOW - timedelta(seconds=100)).isoformat()
    decision = sized([member("m1", "p", ready=False, ready_since=since)], 1)
    assert decision == SizingDecision(need=0, requeue_after=200.0)


def test_karpenter_pools_are_never_sized_here() -> None:
    since = (NOW - timedelta(seconds=100)).isoformat()
    members = [member("m1", "p"), member("m2", "p"), member("m3", "p", ready=False, ready_since=since)]
    assert sized(members, 1, karpenter=True) == SizingDecision(requeue_after=200.0)
    assert sized([], 3, karpenter=True) == SizingDecision()
