"""Agent health goes stale by the operator's clock, never by the agent's (`accelpool.runtime.controller.freshness`).

The operator records, on its own clock, when it last saw each node's `AcceleratorHealthy` condition
(or the agent's report) change, as the node lifecycle controller keeps its `probeTimestamp`; a
condition unchanged for `--agent-silent-after` reads as Unknown/AgentSilent. So an agent whose clock
runs a day ahead is still found silent once it stops, a condition without `lastHeartbeatTime` ages
like any other, and an agent whose clock runs 20 minutes behind stays fresh while it keeps writing.

The pure parts take their times as arguments; the controller's tests run on looptime's fake clock (the
controller's wall clock starts at `START`), the test playing the agent.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import json
from datetime import datetime, timedelta
from typing import Any

import pytest

from accelpool.decide.planning.membership import judge_health
from accelpool.model.nodes import NodeView, format_time
from accelpool.runtime.controller.freshness import HealthFreshness
from accelpool.runtime.controller.relevance import same_for_planning
from accelpool.runtime.settings import OperatorConfig, add_arguments
from accelpool_api import conventions

from .conftest import NOW, member, node_body
from .emulated import NODES, START, Cluster, Harness, pool_body

STALE = conventions.HEALTH_STALE_SECONDS
DAY = timedelta(days=1)


def health_body(name: str, *, heartbeat: datetime | None, pool: str = "p", status: str = "True") -> dict[str, Any]:
    """A member of `pool` with its agent's report and condition (`heartbeat`: its lastHeartbeatTime, None: none)."""
    view = member(name, pool)
    report = {"status": "Healthy" if status == "True" else "Unhealthy", "reason": "AllChecksPassed", "pool": pool}
    annotations = {**view.annotations, conventions.HEALTH_ANNOTATION: json.dumps(report | {"complete": True})}
    body = node_body(name, labels=dict(view.labels), annotations=annotations)
    body["spec"]["taints"] = [t.to_dict() for t in view.taints]
    condition: dict[str, Any] = {
        "type": conventions.HEALTH_CONDITION,
        "status": status,
        "reason": "AllChecksPassed",
        "message": "8 GPUs passed all checks",
        "lastTransitionTime": "2026-11-01T00:00:00Z",
    }
    if heartbeat is not None:
        condition["lastHeartbeatTime"] = format_time(heartbeat)
    body["status"]["conditions"].append(condition)
    return body


def health_view(name: str = "m1", *, heartbeat: datetime | None, report: bool = True) -> NodeView:
    body = health_body(name, heartbeat=heartbeat)
    if not report:
        del body["metadata"]["annotations"][conventions.HEALTH_ANNOTATION]
    return NodeView.from_body(body)


# ---------------------------------------------------------------- what the operator saw change, on its clock


def test_a_condition_ages_from_the_operators_first_sight_and_each_change() -> None:
    seen = HealthFreshness()
    beat = NOW + DAY  # the agent's clock: never compared with the operator's
    seen.observe(health_view(heartbeat=beat), at=100.0)
    assert seen.unchanged_for("m1", 100.0) == 0.0, "first sight: changed now (one full period to come)"
    seen.observe(health_view(heartbeat=beat), at=400.0)
    assert seen.unchanged_for("m1", 1000.0) == 900.0, "the same condition again changes nothing"
    seen.observe(health_view(heartbeat=beat + timedelta(minutes=5)), at=1000.0)
    assert seen.unchanged_for("m1", 1000.0) == 0.0, "a new heartbeat, whatever its time, is a sign of life"
    assert seen.unchanged_for("m9", 1000.0) is None, "a node without a condition has no age"


def test_a_report_written_counts_and_one_taken_away_does_not() -> None:
    seen = HealthFreshness()
    seen.observe(health_view(heartbeat=None, report=False), at=0.0)
    seen.observe(health_view(heartbeat=None), at=50.0)
    assert seen.unchanged_for("m1", 50.0) == 0.0, "the agent wrote its report"
    seen.observe(health_view(heartbeat=None, report=False), at=80.0)  # the operator released the node
    assert seen.unchanged_for("m1", 80.0) == 30.0


def test_a_condition_taken_away_is_forgotten_and_starts_anew() -> None:
    seen = HealthFreshness()
    seen.observe(health_view(heartbeat=NOW), at=0.0)
    seen.observe(NodeView.from_body(node_body("m1")), at=10.0)
    assert seen.unchanged_for("m1", 10.0) is None
    seen.observe(health_view(heartbeat=NOW), at=20.0)
    assert seen.unchanged_for("m1", 20.0) == 0.0
    seen.forget("m1")  # the node is gone
    assert seen.ages(30.0, STALE) == {}


def test_the_next_condition_to_turn_stale() -> None:
    seen = HealthFreshness()
    seen.observe(health_view("a", heartbeat=NOW), at=0.0)
    seen.observe(health_view("b", heartbeat=NOW), at=100.0)
    assert seen.turns_stale(STALE, after=50.0) == STALE, "a planned fresh: it turns stale at its period's end"
    assert seen.turns_stale(STALE, after=STALE) == 100.0 + STALE, "a was planned stale already"
    assert seen.turns_stale(STALE, after=100.0 + STALE) is None


def test_the_ages_are_a_value_and_name_the_stale_nodes_whatever_the_order_of_changes() -> None:
    seen = HealthFreshness()
    for at, name in enumerate(["a", "b", "c"]):
        seen.observe(health_view(name, heartbeat=NOW), at=float(at))
    seen.observe(health_view("a", heartbeat=NOW + timedelta(minutes=5)), at=10.0)  # a lives: it ages anew
    ages = seen.ages(STALE + 5.0, STALE)
    assert dict(ages) == {"a": STALE - 5.0, "b": STALE + 4.0, "c": STALE + 3.0}
    assert ages.stale == {"b", "c"} == ages.reached(STALE)
    assert ages.reached(STALE - 5.0) == {"a", "b", "c"}, "another limit ages every node"
    assert seen.turns_stale(STALE, after=STALE + 5.0) == STALE + 10.0, "past the stale ones: a"
    seen.observe(health_view("b", heartbeat=NOW + timedelta(minutes=5)), at=STALE + 6.0)
    seen.forget("c")
    assert dict(ages) == {"a": STALE - 5.0, "b": STALE + 4.0, "c": STALE + 3.0}, "a pass's ages stay as planned"
    later = seen.ages(STALE + 6.0, STALE)
    assert dict(later) == {"a": STALE - 4.0, "b": 0.0} and later.stale == frozenset()


# ---------------------------------------------------------------- planning reads the operator's ages


def test_a_dead_agent_with_its_clock_a_day_ahead_is_found_silent() -> None:
    view = health_view(heartbeat=NOW + DAY)
    assert judge_health(view, NOW, STALE, {"m1": STALE - 1}) is view
    judged = judge_health(view, NOW, STALE, {"m1": 2 * 3600.0}).health
    assert judged is not None and judged.silent and judged.status == "Unknown"
    assert judged.message == (
        "AcceleratorHealthy (True: AllChecksPassed) has not changed in 900 s by the operator's clock; "
        "its agent has stopped reporting"
    )


def test_a_condition_without_a_heartbeat_ages_like_any_other() -> None:
    view = health_view(heartbeat=None)
    assert judge_health(view, NOW, STALE, {"m1": STALE - 1}) is view
    judged = judge_health(view, NOW, STALE, {"m1": STALE}).health
    assert judged is not None and judged.silent


def test_a_live_agent_with_its_clock_behind_stays_fresh() -> None:
    view = health_view(heartbeat=NOW - timedelta(minutes=20))
    assert judge_health(view, NOW, STALE, {"m1": 60.0}) is view
    assert judge_health(view, NOW, STALE, {}) is view, "not seen yet by the operator: seen now"


def test_an_offline_plan_reads_the_heartbeat_for_want_of_an_observer() -> None:
    """`accelpool plan` of one snapshot has no history: lastHeartbeatTime is the only hint of an age."""
    written = NOW - timedelta(seconds=STALE)
    judged = judge_health(health_view(heartbeat=written), NOW, STALE).health
    assert judged is not None and judged.silent
    assert judged.message.endswith(f"was last written {format_time(written)}; its agent has stopped reporting")
    unknown_age = health_view(heartbeat=None)
    assert judge_health(unknown_age, NOW, STALE) is unknown_age


# ---------------------------------------------------------------- relevance: heartbeats wake the loop only when stale


def test_a_heartbeat_is_relevant_only_after_the_condition_went_stale_by_the_operators_clock() -> None:
    before = health_view(heartbeat=NOW + DAY)
    after = health_view(heartbeat=NOW + DAY + timedelta(minutes=5))
    assert same_for_planning(before, after, selector_keys=(), unchanged_for=STALE - 1)
    assert not same_for_planning(before, after, selector_keys=(), unchanged_for=2 * 3600.0)
    assert not same_for_planning(before, after, selector_keys=(), unchanged_for=STALE, stale_seconds=STALE)


def test_a_label_no_plan_reads_on_a_silent_node_is_not_relevant() -> None:
    body = health_body("m1", heartbeat=NOW)
    relabelled = copy.deepcopy(body)
    relabelled["metadata"]["labels"]["example.com/rack"] = "r7"
    before, after = NodeView.from_body(body), NodeView.from_body(relabelled)
    assert same_for_planning(before, after, selector_keys=(), unchanged_for=2 * 3600.0)


# ---------------------------------------------------------------- the controller, on looptime's clock


async def agent_writes(cluster: Cluster, name: str, heartbeat: datetime | None) -> None:
    """What the pool's agent does at every heartbeat: rewrite its condition (`heartbeat` by its own clock)."""
    body = health_body(name, heartbeat=heartbeat)
    conditions = [c for c in cluster.node(name)["status"]["conditions"] if c["type"] != conventions.HEALTH_CONDITION]
    conditions.append(body["status"]["conditions"][-1])
    await cluster.client.patch(f"{NODES}/{name}/status", {"status": {"conditions": conditions}})


async def pass_(harness: Harness) -> tuple[str, str]:
    """One pass with the API's current nodes: the pool's AgentReady (status, reason)."""
    harness.catch_up()
    result = await harness.controller.reconcile_once()
    assert result.ok, result.error
    return agent_ready(harness)


def agent_ready(harness: Harness) -> tuple[str, str]:
    found = next(c for c in harness.status("p")["conditions"] if c["type"] == "AgentReady")
    return found["status"], found["reason"]


async def with_member(cluster: Cluster, heartbeat: datetime | None, **config: Any) -> Harness:
    await cluster.add_nodes(health_body("m1", heartbeat=heartbeat))
    return await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 1})], **config)


@pytest.mark.looptime
async def test_the_controller_finds_a_dead_agent_silent_though_its_clock_runs_a_day_ahead(cluster: Cluster) -> None:
    harness = await with_member(cluster, START + DAY)
    assert await pass_(harness) == ("True", "Reporting")
    await asyncio.sleep(STALE - 1)
    assert await pass_(harness) == ("True", "Reporting"), "one period from the operator's first sight"
    await asyncio.sleep(1)
    assert await pass_(harness) == ("False", "WaitingForAgents")
    found = harness.status("p")["members"][0]
    assert (found["health"], found["reason"]) == ("Unknown", conventions.SILENT_AGENT_REASON)


@pytest.mark.looptime
async def test_the_controller_ages_a_condition_without_a_heartbeat(cluster: Cluster) -> None:
    harness = await with_member(cluster, None)
    assert await pass_(harness) == ("True", "Reporting")
    await asyncio.sleep(STALE)
    assert await pass_(harness) == ("False", "WaitingForAgents")


@pytest.mark.looptime
async def test_the_controller_keeps_a_live_agent_with_its_clock_20_minutes_behind_fresh(cluster: Cluster) -> None:
    harness = await with_member(cluster, START - timedelta(minutes=20))
    heartbeat = conventions.HEALTH_STALE_SECONDS / 3  # the agents' heartbeat period
    for _ in range(6):
        assert await pass_(harness) == ("True", "Reporting")
        await asyncio.sleep(heartbeat)
        wall = START + timedelta(seconds=asyncio.get_running_loop().time())
        await agent_writes(cluster, "m1", wall - timedelta(minutes=20))
    assert await pass_(harness) == ("True", "Reporting")


@pytest.mark.looptime
async def test_the_loop_wakes_when_a_condition_turns_stale_without_any_event(cluster: Cluster) -> None:
    """No resync, agent check or status check for an hour: only the condition's staleness can start a pass."""
    hour = 3600.0
    harness = await with_member(
        cluster, START + DAY, resync_seconds=hour, agent_check_seconds=hour, status_resync_seconds=hour
    )
    harness.controller.indexed()
    harness.controller.task = asyncio.create_task(harness.controller.run())
    try:
        await asyncio.sleep(STALE - 0.5)
        assert harness.controller.last is not None and harness.controller.last.number == 1
        assert agent_ready(harness) == ("True", "Reporting")
        await asyncio.sleep(1)
        assert harness.controller.last.number == 2, "one pass, when the condition turned stale"
        assert agent_ready(harness) == ("False", "WaitingForAgents")
    finally:
        harness.controller.task.cancel()


def test_the_period_is_a_hidden_setting_for_tests() -> None:
    """A real cluster's agents heartbeat every 5 minutes; tests that run the operator need a shorter period."""
    assert OperatorConfig.from_env({}).health_stale_seconds == STALE == 900
    assert OperatorConfig.from_env({"ACCELPOOL_AGENT_SILENT_AFTER": "2s"}).health_stale_seconds == 2.0
    parser = argparse.ArgumentParser()
    add_arguments(parser, {})
    assert OperatorConfig.from_args(parser.parse_args(["--agent-silent-after=1m"])).health_stale_seconds == 60.0
    assert "agent-silent-after" not in parser.format_help()
