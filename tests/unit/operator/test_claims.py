"""Claims on their own (`accelpool.decide.planning.claims`): which free nodes the pools that lack members take."""

from __future__ import annotations

from collections import Counter

from accelpool.decide.planning.claims import Claim, ClaimRequest, ReservingTaints, claim, not_claimable
from accelpool.decide.planning.pools import NodeFilter
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import node

H100 = NodeFilter(frozenset({"H100-80GB"}), None, {})
TOLERATED = conventions.ACCELERATOR_TAINTS


def free(*views: NodeView) -> dict[str, NodeView]:
    return {v.name: v for v in views}


def test_requests_take_free_nodes_in_name_order_and_in_request_order() -> None:
    nodes = free(node("n3"), node("n1"), node("n2"), node("n4"))
    found = claim(
        [ClaimRequest("older", H100, 2, 0), ClaimRequest("newer", H100, 1, 0)],
        nodes,
        held=Counter(),
        tolerated_taints=TOLERATED,
    )
    assert [v.name for v in found["older"].nodes] == ["n1", "n2"]
    assert [v.name for v in found["newer"].nodes] == ["n3"]
    assert found["older"].shortfall == found["newer"].shortfall == ""


def test_a_shortfall_counts_why_the_others_do_not_qualify() -> None:
    nodes = free(
        node("a-cordoned", unschedulable=True),
        node("b-not-ready", ready=False),
        node("c-team", taints=[{"key": "dedicated", "value": "team", "effect": "NoSchedule"}]),
        node("d-small", count=2),
        node("e-l4", "L4"),
        node("f-ok"),
    )
    wants_eight = NodeFilter(frozenset({"H100-80GB"}), 8, {})
    found = claim(
        [ClaimRequest("p", wants_eight, 3, 1)], nodes, held=Counter({"H100-80GB": 3}), tolerated_taints=TOLERATED
    )
    assert found["p"] == Claim(
        (nodes["f-ok"],),
        "1 cordoned, 2 held by other pools, 1 not Ready, 1 smaller or not selected, 1 tainted dedicated",
    )


def test_pools_with_the_same_filter_share_a_cursor_and_skip_what_others_took() -> None:
    zone_a = NodeFilter(frozenset({"H100-80GB"}), None, {"zone": "a"})
    nodes = free(node("n1", labels={"zone": "a"}), node("n2", labels={"zone": "b"}), node("n3", labels={"zone": "a"}))
    found = claim(
        [ClaimRequest("any", H100, 1, 0), ClaimRequest("zonal", zone_a, 2, 0)],
        nodes,
        held=Counter(),
        tolerated_taints=TOLERATED,
    )
    assert [v.name for v in found["any"].nodes] == ["n1"]
    assert [v.name for v in found["zonal"].nodes] == ["n3"]
    assert found["zonal"].shortfall == "1 smaller or not selected, 1 taken by other pools"


def test_why_a_free_node_cannot_be_claimed() -> None:
    reserving = ReservingTaints(TOLERATED)
    control_plane = node("cp", labels={"node-role.kubernetes.io/control-plane": ""})
    assert not_claimable(control_plane, reserving) == "control-plane"
    quarantined = node("q", taints=[{"key": conventions.QUARANTINE_TAINT_KEY, "value": "x", "effect": "NoSchedule"}])
    assert not_claimable(quarantined, reserving) == "quarantined"
    unhealthy = node("u", health=("False", "XidError79", "", "2026-11-02T11:00:00Z"))
    assert not_claimable(unhealthy, reserving) == "unhealthy"
    gpu_marked = node("g", taints=[{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}])
    assert not_claimable(gpu_marked, reserving) is None


def test_a_node_filter_gives_current_members_the_benefit_of_the_doubt() -> None:
    wants_eight = NodeFilter(frozenset({"H100-80GB"}), 8, {"zone": "a"})
    unlabelled = NodeView.from_body({"metadata": {"name": "x", "labels": {"zone": "a"}}})
    assert wants_eight.matches(unlabelled, current=True)
    assert not wants_eight.matches(unlabelled, current=False)
    assert not wants_eight.matches(node("n1", labels={"zone": "b"}), current=True)
    assert wants_eight.matches(node("n1", labels={"zone": "a"}), current=False)
    assert wants_eight.key == NodeFilter(frozenset({"H100-80GB"}), 8, {"zone": "a"}).key
