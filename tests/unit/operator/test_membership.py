"""Membership and the ledger on their own (`accelpool.decide.planning.membership`, `.ledger`)."""

from __future__ import annotations

from datetime import timedelta

from accelpool.decide.planning.ledger import Ledger
from accelpool.decide.planning.membership import judge_health, sort_nodes
from accelpool.decide.planning.pools import pool_works
from accelpool.model.nodes import NodeView, format_time
from accelpool_api import conventions

from .conftest import NOW, device_plugin_key, member, node, node_body, pool

HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T00:00:00Z")
QUARANTINE = {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}


def test_stale_or_foreign_health_reads_as_a_silent_agent() -> None:
    body = node_body("m1", labels={conventions.POOL_LABEL: "p"})
    heartbeat = format_time(NOW - timedelta(seconds=600))
    body["status"]["conditions"].append(
        {"type": conventions.HEALTH_CONDITION, "status": "True", "reason": "Ok", "lastHeartbeatTime": heartbeat}
    )
    stale = NodeView.from_body(body)
    judged = judge_health(stale, NOW, 90.0)
    assert judged.health is not None and judged.health.silent
    assert "its agent has stopped reporting" in judged.health.message
    assert judge_health(stale, NOW, 900.0) is stale
    foreign = member(
        "m2",
        "p",
        health=HEALTHY,
        annotations={conventions.HEALTH_ANNOTATION: '{"status":"Healthy","reason":"x","pool":"q"}'},
    )
    found = judge_health(foreign, NOW, 90.0).health
    assert found is not None and "was written by the agent of pool q, not of p" in found.message


def test_nodes_are_sorted_into_members_held_free_and_released() -> None:
    pools = [
        pool("p", {"accelerator": "H100"}),
        pool("bad", {"accelerator": "nope"}),
        pool("gone", {"accelerator": "H100"}, deleting=True),
    ]
    by_name = {p.name: p for p in pools}
    works = pool_works(pools)
    nodes = [
        member("a-member", "p"),
        member("b-l4", "p", "L4"),
        member("c-held", "bad"),
        member("d-deleted", "gone", taints=[QUARANTINE]),
        member("e-orphan", "nobody"),
        node("f-free"),
    ]
    ledger = Ledger(
        frozenset({device_plugin_key("p", {"accelerator": "H100"}), device_plugin_key("gone", {"accelerator": "H100"})})
    )
    roster = sort_nodes(nodes, by_name, works, ledger, release_orphans=True)
    assert [v.name for v in works["p"].members] == ["a-member"]
    assert {k: [v.name for v in vs] for k, vs in roster.held_invalid.items()} == {"bad": ["c-held"]}
    assert sorted(roster.free) == ["b-l4", "d-deleted", "e-orphan", "f-free"]
    assert dict(ledger.released_by) == {"p": ["b-l4"], "gone": ["d-deleted"], "nobody": ["e-orphan"]}
    assert [(e.name, e.reason) for e in ledger.events] == [
        ("p", "NodeNoLongerMatches"),
        ("d-deleted", "QuarantineReleased"),
    ]
    released = ledger.changes()["d-deleted"]
    assert released.pool is None and released.labels[conventions.POOL_LABEL] is None
    assert released.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] is None
    assert {t.key for t in released.remove_taints} == {conventions.POOL_TAINT_KEY, conventions.QUARANTINE_TAINT_KEY}
    offline = sort_nodes(nodes, by_name, pool_works(pools), Ledger(frozenset()), release_orphans=False)
    assert "e-orphan" not in offline.free


def test_the_ledger_keeps_the_earliest_requeue_and_at_least_a_second() -> None:
    ledger = Ledger(frozenset())
    ledger.requeue(None)
    assert ledger.requeue_after is None
    ledger.requeue(30.0)
    ledger.requeue(0.2)
    ledger.requeue(10.0)
    assert ledger.requeue_after == 1.0
    assert ledger.ours("accelpool-p") is False
