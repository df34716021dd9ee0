"""Everything accelpool writes stays bounded whatever the cluster hands it, and says so where it left something out:
a 5,000-node pool's status, the Events of a fault across a fleet, the annotations on one node."""

from __future__ import annotations

import json
from collections import Counter
from datetime import timedelta

import pytest

import accelpool_api as api
from accelpool.decide.planning import Plan
from accelpool.model.nodes import NodeView, format_time
from accelpool_api import conventions
from accelpool_api.status import MAX_CONDITION_MESSAGE
from accelpool_core.protocol import Action, HealthReport, HealthStatus

from .conftest import NOW, member, pool, run

NODES = 5_000
HEALTHY = ("True", "AllChecksPassed", "8 GPUs passed all checks", "2026-11-02T00:00:00Z")
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus) on GPU 3", "2026-11-02T11:00:00Z")
STATUS_BYTES = 64 * 1024
"""What a pool's status may take, far under the 1.5 MiB etcd takes per object (and the status is written often)."""
NODE_ANNOTATION_BYTES = 8 * 1024
"""What accelpool's own annotations on one node may take, far under the API server's 256 KiB for all of them."""


def long_name(i: int) -> str:
    """A node name near the 253-character limit, as some clouds' long FQDN names come."""
    return f"gpu-{i:05d}." + "rack-17.zone-b.example-cloud-provider.internal." * 5 + "x"


def fleet(unhealthy_every: int) -> list[NodeView]:
    return [member(long_name(i), "p", health=XID79 if i % unhealthy_every == 0 else HEALTHY) for i in range(NODES)]


def pool_status(result: Plan) -> api.ComputePoolStatus:
    found = result.pool("p")
    assert found is not None and found.status is not None
    return found.status


def test_a_5000_node_pools_status_lists_100_members_those_in_trouble_first_and_counts_the_rest() -> None:
    nodes = fleet(unhealthy_every=97)  # 52 unhealthy, spread through the name order
    result = run([pool("p", {"accelerator": "H100", "nodes": NODES})], nodes)
    status = pool_status(result)
    document = status.model_dump(mode="json", by_alias=True, exclude_none=True)
    size = len(json.dumps(document, separators=(",", ":")))
    assert size < STATUS_BYTES, size
    assert len(status.members) == api.MAX_STATUS_MEMBERS
    assert document["membersOmitted"] == NODES - api.MAX_STATUS_MEMBERS
    assert status.nodes.members == NODES
    troubled = {v.name for v in nodes if v.health is not None and v.health.unhealthy}
    listed = [m.node for m in status.members]
    assert troubled <= set(listed), "every quarantined node is listed, however late in the name order"
    assert listed == sorted(listed)
    assert sum(m.health == "Quarantined" for m in status.members) == len(troubled)


def test_a_pool_that_lists_every_member_says_nothing_was_left_out() -> None:
    nodes = [member(f"m{i}", "p", health=HEALTHY) for i in range(api.MAX_STATUS_MEMBERS)]
    status = pool_status(run([pool("p", {"accelerator": "H100", "nodes": len(nodes)})], nodes))
    assert "membersOmitted" not in status.model_dump(mode="json", by_alias=True, exclude_none=True)
    assert [m.node for m in status.members] == sorted(v.name for v in nodes)


def test_a_fault_across_the_fleet_posts_a_bounded_number_of_events_and_says_how_many_it_left_out() -> None:
    """Every node fails at once (a bad driver rollout): the breaker holds all but one, with one Warning naming a
    few and counting the rest, and no reason gets more than a handful of Events on the pool in a pass."""
    nodes = fleet(unhealthy_every=1)
    result = run([pool("p", {"accelerator": "H100", "nodes": NODES, "health": {"maxUnavailable": 1}})], nodes)
    on_pool = Counter(e.reason for e in result.events if e.kind == "ComputePool")
    [breaker] = [e.message for e in result.events if e.reason == "CircuitBreakerOpen"]
    assert breaker.startswith(f"not quarantining {long_name(1)} (XID 79 (GPU fallen off the bus) on GPU 3), ")
    named = breaker.count("(XID 79 (GPU fallen off the bus) on GPU 3)")
    assert named >= 2, "as many named as fit"
    assert breaker.endswith(
        f" and {NODES - 1 - named} more: 1 of {NODES} nodes already quarantined and maxUnavailable 1 allows 1"
    ), "the count and the reason are never cut off"
    assert len(breaker) <= conventions.MAX_MESSAGE
    assert sum(r.action == "circuit_breaker" for r in result.remediations) == NODES - 1, "each counted in metrics"
    assert max(on_pool.values()) <= conventions.MAX_EVENTS_PER_REASON + 1, on_pool
    healthy = pool_status(result).conditions
    assert next(c for c in healthy if c.type == "Healthy").message.startswith(breaker)


def test_remediation_none_across_the_fleet_folds_the_pools_events() -> None:
    nodes = fleet(unhealthy_every=1)[:500]
    result = run([pool("p", {"accelerator": "H100", "nodes": 500, "health": {"remediation": "none"}})], nodes)
    unhealthy = [e.message for e in result.events if e.reason == "NodeUnhealthy" and e.kind == "ComputePool"]
    assert len(unhealthy) == conventions.MAX_EVENTS_PER_REASON + 1
    assert unhealthy[-1] == (
        f"and {500 - conventions.MAX_EVENTS_PER_REASON} more NodeUnhealthy Events on this pass, not posted one by "
        f"one (at most {conventions.MAX_EVENTS_PER_REASON} a pass for one ComputePool and reason)"
    )


def test_what_accelpool_writes_on_one_node_stays_small_whatever_it_was_handed() -> None:
    """An agent's report as long as the API server lets it be, a pod name at the limit, a hand-written history of
    10,000 quarantines: the annotations accelpool writes on the node stay a few KiB, and say what they cut."""
    report = HealthReport(
        status=HealthStatus.UNHEALTHY,
        reason="XidError79" * 20,
        message="XID 79 (GPU fallen off the bus) " * 5_000,
        gpus=8,
        bad_gpus=list(range(8)),
        action=Action.SERVICE_REQUIRED,
    ).to_annotation()
    history = json.dumps({"quarantines": [format_time(NOW - timedelta(seconds=i)) for i in range(10_000)]})
    condition = ("False", "XidError79" * 20, "XID 79 " * 20_000, "2026-11-02T11:00:00Z")
    node = member(
        "m1",
        "p",
        health=condition,
        annotations={conventions.HEALTH_ANNOTATION: report, conventions.QUARANTINE_HISTORY_ANNOTATION: history},
    )
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], [node, member("m2", "p", health=HEALTHY)])
    written = {k: v for k, v in result.changes["m1"].annotations.items() if v is not None}
    assert {conventions.REMEDIATION_ANNOTATION, conventions.QUARANTINE_HISTORY_ANNOTATION} <= set(written)
    after = {**node.annotations, **written}
    own = {
        k: v for k, v in after.items() if k.startswith(f"{conventions.DOMAIN}/") and k != conventions.HEALTH_ANNOTATION
    }
    size = sum(len(k) + len(v.encode()) for k, v in own.items())
    assert size < NODE_ANNOTATION_BYTES, {k: len(v) for k, v in own.items()}
    record = json.loads(written[conventions.REMEDIATION_ANNOTATION])
    assert record["message"].endswith(conventions.CUT_MARK)
    assert json.loads(written[conventions.QUARANTINE_HISTORY_ANNOTATION])["omitted"] == (
        10_000 + 1 - conventions.MAX_QUARANTINE_HISTORY
    ), "the quarantine of this pass added, the oldest counted"


@pytest.mark.parametrize(
    ("items", "chars", "most", "said"),
    [
        (["a", "b", "c"], 100, 20, "a, b, c"),
        (["a", "b", "c"], 100, 2, "a, b and 1 more"),
        (["alpha", "beta", "gamma"], 20, 20, "alpha and 2 more"),
        ([f"n{i}" for i in range(5000)], 40, 20, "n0, n1, n2, n3, n4, n5, n6 and 4993 more"),
        (["x" * 50, "y"], 30, 20, "x" * 11 + conventions.CUT_MARK + ", y"),
        (["x" * 50, "y" * 20], 30, 20, "x" * 11 + conventions.CUT_MARK + " and 1 more"),
        ([], 10, 20, ""),
    ],
)
def test_a_list_in_a_message_keeps_its_count_of_what_it_left_out(
    items: list[str], chars: int, most: int, said: str
) -> None:
    text = conventions.some_of(items, chars, most=most)
    assert text == said
    assert len(text) <= max(chars, len(said))


def test_the_healthy_condition_names_a_few_and_always_counts_the_rest() -> None:
    """Agents' messages as long as accelpool keeps them: five would not fit in a condition message, and the count
    of the nodes left out must not be what is cut off."""
    long_fault = ("False", "XidError79", "XID 79 (GPU fallen off the bus) " * 100, "2026-11-02T11:00:00Z")
    nodes = [member(long_name(i), "p", health=long_fault) for i in range(15)]
    for spec in ({"remediation": "none"}, {"maxUnavailable": "100%"}):
        result = run([pool("p", {"accelerator": "H100", "nodes": 15, "health": spec})], nodes)
        healthy = next(c for c in pool_status(result).conditions if c.type == "Healthy")
        assert healthy.reason in ("NodeUnhealthy", "NodeQuarantined")
        assert len(healthy.message) <= MAX_CONDITION_MESSAGE
        named = healthy.message.count(": XID 79")
        assert 1 <= named < 5 and healthy.message.endswith(f"; and {15 - named} more"), healthy.message[-200:]
