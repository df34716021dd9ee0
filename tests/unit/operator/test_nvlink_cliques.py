"""Pools with `spec.nvlink.sameClique` keep their members in one `nvidia.com/gpu.clique`
(`accelpool.decide.planning.claims`): the clique is chosen, kept, and explained in the shortfall."""

from __future__ import annotations

from collections import Counter
from typing import Any

from accelpool.decide.planning.claims import Claim, ClaimRequest, claim
from accelpool.decide.planning.pools import NodeFilter
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import applied, conditions, member, members, node, pool, run

CLIQUE = conventions.GPU_CLIQUE_LABEL
LABEL = f"without {CLIQUE}"
SAME_CLIQUE = NodeFilter(frozenset({"H100-80GB"}), None, {}, same_clique=True)
H100 = NodeFilter(frozenset({"H100-80GB"}), None, {})
TOLERATED = conventions.ACCELERATOR_TAINTS
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus)", "2026-11-02T11:00:00Z")
FABRIC = "9e8d7c6b-0000-4000-8000-000000000001"
"""The NVLink fabric's cluster UUID: a clique label is `<cluster UUID>.<clique ID>`."""


def clique_id(clique: str) -> str:
    return f"{FABRIC}.{clique}"


def in_clique(name: str, clique: str, **kwargs: Any) -> NodeView:
    """A free H100 node GFD labelled with the clique `clique`."""
    return node(name, labels={CLIQUE: clique_id(clique)}, **kwargs)


def clique_member(name: str, pool_name: str, clique: str, **kwargs: Any) -> NodeView:
    return member(name, pool_name, labels={CLIQUE: clique_id(clique)}, **kwargs)


def nvlink(nodes: int, **spec: Any) -> dict[str, Any]:
    return {"accelerator": "H100-80GB", "nodes": nodes, "nvlink": {}, **spec}


def free(*views: NodeView) -> dict[str, NodeView]:
    return {v.name: v for v in views}


def selected(result: Any, pool_name: str) -> str:
    return str(next(c.message for c in result.pool(pool_name).status.conditions if c.type == "NodesSelected"))


def test_a_pool_of_four_lands_in_the_clique_that_can_hold_it() -> None:
    """Cliques A (3 nodes, first by name) and B (5): all four members come from B."""
    nodes = [in_clique(f"a{i}", "1") for i in range(3)] + [in_clique(f"b{i}", "2") for i in range(5)]
    result = run([pool("train", nvlink(4))], nodes)
    assert members(result, "train") == ["b0", "b1", "b2", "b3"]
    assert conditions(result, "train")["NodesSelected"] == ("True", "Selected")
    anywhere = run([pool("train", nvlink(4, nvlink={"sameClique": False}))], nodes)
    assert members(anywhere, "train") == ["a0", "a1", "a2", "b0"], "without sameClique: in name order"


def test_a_quarantined_member_is_replaced_from_its_own_clique() -> None:
    """The bigger clique B sorts first by name; the spare still comes from the members' clique Z."""
    spec = nvlink(3)
    nodes = [
        clique_member("z0", "train", "7"),
        clique_member("z1", "train", "7", health=XID79),
        clique_member("z2", "train", "7"),
        in_clique("z3", "7"),
        *(in_clique(f"b{i}", "2") for i in range(5)),
    ]
    result = run([pool("train", spec)], nodes)
    assert any(t.key == conventions.QUARANTINE_TAINT_KEY for t in result.changes["z1"].add_taints)
    assert members(result, "train") == ["z0", "z1", "z2", "z3"]
    # No spare left in Z: the next failure is not replaced from B.
    settled = applied(nodes, result)
    failing = [clique_member("z2", "train", "7", health=XID79) if v.name == "z2" else v for v in settled]
    again = run([pool("train", {**spec, "health": {"maxUnavailable": 2}})], failing)
    assert any(t.key == conventions.QUARANTINE_TAINT_KEY for t in again.changes["z2"].add_taints)
    assert members(again, "train") == ["z0", "z1", "z2", "z3"]


def test_nodes_without_the_clique_label_never_qualify() -> None:
    nodes = [node("a0"), node("a1"), node("a2", labels={CLIQUE: ""})]
    result = run([pool("train", nvlink(2))], nodes)
    assert members(result, "train") == []
    assert selected(result, "train") == f"0 of 2: only 0 free nodes match H100-80GB (3 {LABEL})"


def test_the_shortfall_names_the_clique_and_counts_the_nodes_elsewhere() -> None:
    nodes = free(
        *(in_clique(f"a{i}", "A") for i in range(3)),
        *(in_clique(f"b{i}", "B") for i in range(4)),
        in_clique("b4", "B", unschedulable=True),
        node("c0"),
    )
    found = claim([ClaimRequest("train", SAME_CLIQUE, 7, 0)], nodes, held=Counter(), tolerated_taints=TOLERATED)
    assert found["train"] == Claim(
        tuple(nodes[f"b{i}"] for i in range(4)),
        f"clique {clique_id('B')}: 1 cordoned, 3 in another clique, 1 {LABEL}",
    )


def test_members_that_disagree_claim_in_the_clique_most_of_them_share_and_say_so() -> None:
    """After a relabel one member shows clique B: the pool keeps claiming in A, where two of three are."""
    nodes = free(in_clique("a5", "A"), in_clique("b5", "B"))
    cliques = (clique_id("A"), clique_id("B"), clique_id("A"))
    found = claim(
        [ClaimRequest("train", SAME_CLIQUE, 2, 3, cliques)],
        nodes,
        held=Counter({"H100-80GB": 3}),
        tolerated_taints=TOLERATED,
    )
    assert found["train"] == Claim(
        (nodes["a5"],),
        f"members in 2 cliques, claiming in {clique_id('A')} (2 of 3 members there): 1 in another clique",
    )


def test_a_tie_between_members_cliques_goes_to_the_first_by_name() -> None:
    nodes = free(in_clique("b0", "B"), in_clique("z0", "A"))
    cliques = (clique_id("B"), clique_id("A"))
    found = claim(
        [ClaimRequest("train", SAME_CLIQUE, 1, 2, cliques)], nodes, held=Counter(), tolerated_taints=TOLERATED
    )
    assert found["train"] == Claim((nodes["z0"],))


def test_members_without_a_clique_label_claim_nothing_until_it_returns() -> None:
    """GFD relabelling: the pool's clique is unknown, so no node of some clique is taken meanwhile."""
    nodes = free(in_clique("a0", "A"))
    found = claim([ClaimRequest("train", SAME_CLIQUE, 1, 2)], nodes, held=Counter(), tolerated_taints=TOLERATED)
    assert found["train"] == Claim((), f"no member carries {CLIQUE} yet: its clique is not known")


def test_the_choice_counts_what_older_pools_took() -> None:
    """A and B hold 4 nodes each (a tie goes to A by name), but older pools took two of A's first."""
    nodes = free(*(in_clique(f"a{i}", "A") for i in range(4)), *(in_clique(f"b{i}", "B") for i in range(4)))
    tie = claim([ClaimRequest("train", SAME_CLIQUE, 4, 0)], nodes, held=Counter(), tolerated_taints=TOLERATED)
    assert [v.name for v in tie["train"].nodes] == ["a0", "a1", "a2", "a3"]
    found = claim(
        [
            ClaimRequest("oldest", SAME_CLIQUE, 1, 0),
            ClaimRequest("older", H100, 1, 0),
            ClaimRequest("train", SAME_CLIQUE, 3, 0),
        ],
        nodes,
        held=Counter(),
        tolerated_taints=TOLERATED,
    )
    assert [v.name for v in found["oldest"].nodes] == ["a0"]
    assert [v.name for v in found["older"].nodes] == ["a1"]
    assert [v.name for v in found["train"].nodes] == ["b0", "b1", "b2"], "A has 2 left, B 4"
    assert found["train"].shortfall == ""


def test_pools_of_one_clique_filter_share_its_cursors() -> None:
    """Two same-clique pools: the first takes the bigger clique, the second the one left."""
    nodes = free(*(in_clique(f"a{i}", "A") for i in range(2)), *(in_clique(f"b{i}", "B") for i in range(3)))
    found = claim(
        [ClaimRequest("first", SAME_CLIQUE, 3, 0), ClaimRequest("second", SAME_CLIQUE, 2, 0)],
        nodes,
        held=Counter(),
        tolerated_taints=TOLERATED,
    )
    assert [v.name for v in found["first"].nodes] == ["b0", "b1", "b2"]
    assert [v.name for v in found["second"].nodes] == ["a0", "a1"]


def test_when_no_clique_offers_a_node_the_shortfall_counts_every_clique() -> None:
    nodes = free(
        in_clique("a0", "A", unschedulable=True),
        in_clique("b0", "B", ready=False),
        in_clique("b1", "B", unschedulable=True),
        node("c0"),
    )
    requests = [ClaimRequest("first", SAME_CLIQUE, 2, 0), ClaimRequest("second", SAME_CLIQUE, 1, 0)]
    found = claim(requests, nodes, held=Counter(), tolerated_taints=TOLERATED)
    assert found["first"] == Claim((), f"2 cordoned, 1 not Ready, 1 {LABEL}")
    assert found["second"] == found["first"], "the cursors were passed once and keep their counts"


def test_a_same_clique_filter_differs_from_a_plain_one_and_asks_free_nodes_for_the_label() -> None:
    assert SAME_CLIQUE.key != H100.key
    assert not SAME_CLIQUE.matches(node("n1"), current=False)
    assert SAME_CLIQUE.matches(node("n1"), current=True), "a member whose label vanished for a while stays"
    assert SAME_CLIQUE.matches(in_clique("n1", "A"), current=False)
    assert H100.matches(node("n1"), current=False)
