"""The controller's loop against the emulated API server (`accelpool_demo.apiserver`, over HTTP): writes,
overlays, conflicts, backoff, timers, statuses.

The controller runs without kopf: the `Harness` binds it to indexes read from the emulator's stored
objects (what kopf's watches would deliver, refreshed when a test says the watch caught up) and it
writes through a real `KubeClient`. The API server is the one the demo, the integration tests and the
benchmarks run against, with its semantics: admission of pools, resourceVersion conflicts, status
subresources, server-side apply. Failures are injected with `fail()` or kmock's reactions, and
what the controller sent is read from the server's log of served requests (by its User-Agent).

Time-based behaviour runs on looptime's fake clock: a 10-minute hold-down or a backoff ladder
passes in milliseconds. The server and the controller share the test's event loop; looptime moves
the clock only after the loop has had nothing to run and no I/O ready for some cycles, and a request
over loopback is read and answered at once, so requests take no fake time (the backoff test would
see it: its ladder is checked to 10 ms).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import kmock
import pytest

from accelpool.decide.planning import EventIntent
from accelpool.runtime.controller.apiserver import POOLS, Gate
from accelpool.runtime.controller.events import EVENT_REPEAT_SECONDS, EventRecorder
from accelpool.runtime.metrics import PASS_STAGES, OperatorMetrics
from accelpool_api import conventions
from accelpool_demo.apiserver import Served

from .conftest import member, node_body
from .emulated import CONTROLLER, START, Cluster, Harness, pool_body


async def test_a_pass_writes_once_and_a_stale_index_does_not_cause_a_second_write(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 2})])
    first = await harness.controller.reconcile_once()
    assert first.ok
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]
    assert "/api/v1/namespaces/accelpool-system/configmaps" in {w[1] for w in cluster.writes() if w[0] == "POST"}
    assert ("APPLY", "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p") in cluster.writes()
    writes = len(cluster.writes())
    again = await harness.controller.reconcile_once()  # the index has not seen the writes yet
    assert again.ok and len(cluster.writes()) == writes
    harness.catch_up()
    caught_up = await harness.controller.reconcile_once()
    assert caught_up.ok and len(cluster.writes()) == writes
    assert harness.status("p")["nodes"]["members"] == 2, "the pass that planned the status wrote it"
    assert harness.status_writes("p") == [f"{POOLS}/p/status"]
    stages = harness.controller.metrics.stage_seconds
    assert set(stages) == set(PASS_STAGES) and all(seconds > 0 for seconds in stages.values()), stages


async def test_a_conflict_re_reads_the_node_and_the_next_pass_succeeds(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    # Another writer labels the node after the index saw it: the index's resourceVersion is stale.
    await cluster.client.patch("/api/v1/nodes/n1", {"metadata": {"labels": {"example.com/other": "writer"}}})
    result = await harness.controller.reconcile_once()
    assert result.ok and result.conflicts == 1, "a conflict is not an error: no backoff"
    assert [s.path for s in cluster.api.server.conflicts("nodes", agent=CONTROLLER)] == ["/api/v1/nodes/n1"]
    assert harness.status("p") == {}, "nothing is published about a write that did not happen"
    assert "/api/v1/nodes/n1" in cluster.reads()
    retried = await harness.controller.reconcile_once()
    assert retried.ok and retried.conflicts == 0
    assert harness.status("p")["nodes"]["members"] == 1
    labels = cluster.node("n1")["metadata"]["labels"]
    assert labels[conventions.POOL_LABEL] == "p" and labels["example.com/other"] == "writer"


async def test_failed_writes_mark_only_their_pool_and_statuses_of_others_are_published(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("l1", "L4", 1))
    refusal = cluster.api.fail("PATCH /api/v1/nodes/n1", 500)
    harness = await cluster.harness(
        [pool_body("h100", {"accelerator": "H100"}), pool_body("l4", {"accelerator": "L4"})]
    )
    result = await harness.controller.reconcile_once()
    assert not result.ok
    assert result.failed_pools == {"h100"}
    assert harness.status("h100") == {}
    assert harness.status("l4")["phase"] == "Configuring"
    warnings = cluster.events("WriteFailed")
    assert [(e["involvedObject"]["name"], e["type"]) for e in warnings] == [("h100", "Warning")]
    assert "node n1" in warnings[0]["message"] and refusal.message in warnings[0]["message"]


@pytest.mark.looptime
async def test_the_loop_backs_off_between_failing_passes(cluster: Cluster, looptime: float) -> None:
    await cluster.add_nodes(node_body("n1"))
    # Three passes fail: each tries to create the two ConfigMaps.
    cluster.api.fail("POST /api/v1/namespaces", 503, times=6)
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    started = asyncio.get_running_loop().time()
    while harness.controller.last is None or not harness.controller.last.ok:  # noqa: ASYNC110 (looptime's clock)
        await asyncio.sleep(0.001)
    elapsed = asyncio.get_running_loop().time() - started
    task.cancel()
    assert elapsed == pytest.approx(0.5 + 1 + 2, abs=0.01), "exponential backoff: 0.5 s, doubling"
    assert harness.controller.last.number == 4
    assert harness.controller.metrics.reconciles == {"error": 3, "success": 1}


@pytest.mark.looptime
async def test_a_crashing_pass_never_stops_the_loop(cluster: Cluster, looptime: float) -> None:
    await cluster.add_nodes(node_body("n1"))
    # A read of the ConfigMaps is answered with what is not JSON: the client raises what no pass expects.
    cluster.api.server[kmock.action.FETCH, kmock.resource("", "v1", "configmaps")][:1] << b"{not json"
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    harness.controller.indexed()
    harness.controller.task = asyncio.create_task(harness.controller.run())
    try:
        while harness.controller.last is None or not harness.controller.last.ok:  # noqa: ASYNC110 (looptime)
            await asyncio.sleep(0.001)
        assert harness.controller.metrics.reconciles == {"error": 1, "success": 1}
        assert harness.controller.probe()["last_ok"] is True, "alive, and the retried pass went through"
        assert harness.status("p")["phase"] == "Configuring"
    finally:
        harness.controller.task.cancel()


@pytest.mark.looptime
async def test_a_quarantine_is_lifted_when_the_hold_down_ends_without_any_event(
    cluster: Cluster, looptime: float
) -> None:
    since = START.isoformat()
    quarantined = member(
        "m1",
        "p",
        taints=[{"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}],
        health=("True", "AllChecksPassed", "", since),
    )
    await cluster.add_nodes(
        node_body(
            "m1",
            labels=quarantined.labels,
            annotations=quarantined.annotations,
            taints=[t.to_dict() for t in quarantined.taints],
            health=("True", "AllChecksPassed", "", since),
        )
    )
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "health": {"holdDown": "10m"}})])
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    lifted_at = None
    try:
        for _ in range(20):
            await asyncio.sleep(60)
            harness.catch_up()
            taints = cluster.node("m1").get("spec", {}).get("taints") or []
            if not any(t["key"] == conventions.QUARANTINE_TAINT_KEY for t in taints):
                lifted_at = asyncio.get_running_loop().time()
                break
    finally:
        task.cancel()
    assert lifted_at is not None, "never lifted"
    assert 600 <= lifted_at <= 660, "lifted by the requeue timer when the 10-minute hold-down ends"
    assert harness.controller.metrics.remediations[("p", "untaint")] == 1, harness.controller.metrics.remediations


async def test_a_quarantine_is_written_before_the_other_node_writes_of_its_pass(cluster: Cluster) -> None:
    unhealthy = ("False", "XidError79", "fallen off the bus", "2026-11-02T11:00:00Z")
    await cluster.add_nodes(
        node_body("a-spare"),
        node_body("b-spare"),
        node_body("m1", labels={conventions.POOL_LABEL: "p"}, health=unhealthy),
    )
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 2})], write_concurrency=1)
    assert (await harness.controller.reconcile_once()).ok
    assert harness.node_writes()[0] == "/api/v1/nodes/m1", "the fence first, then the joins"
    assert sorted(harness.node_writes()[1:]) == ["/api/v1/nodes/a-spare", "/api/v1/nodes/b-spare"]
    taints = cluster.node("m1").get("spec", {}).get("taints") or []
    assert conventions.QUARANTINE_TAINT_KEY in [t["key"] for t in taints]


async def test_events_are_posted_once(cluster: Cluster) -> None:
    unhealthy = ("False", "XidError79", "fallen off the bus", "2026-11-02T11:00:00Z")
    await cluster.add_nodes(node_body("n1", labels={conventions.POOL_LABEL: "p"}, health=unhealthy))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "health": {"remediation": "none"}})])
    await harness.controller.reconcile_once()
    harness.catch_up()
    await harness.controller.reconcile_once()
    events = [path for verb, path in cluster.writes() if verb == "POST" and path.endswith("/events")]
    reasons = [e["reason"] for e in cluster.events()]
    assert reasons.count("NodeUnhealthy") == 1
    assert len(events) == len(reasons)


async def test_an_event_is_posted_again_only_after_the_window_and_old_ones_are_forgotten(cluster: Cluster) -> None:
    now = [0.0]
    wall = datetime(2026, 11, 2, 11, 0, tzinfo=UTC)
    recorder = EventRecorder("default", cluster.client, OperatorMetrics(), lambda: now[0], lambda: wall, 4)
    permit = Gate().permit()
    first, second = (EventIntent("Node", n, "", "Warning", "NodeUnhealthy", f"{n}: XID 79") for n in ("n1", "n2"))
    assert await recorder.post([first, first], permit) == 1, "the same Event twice in one pass: once"
    now[0] = EVENT_REPEAT_SECONDS / 2
    assert await recorder.post([first, second], permit) == 1, "n1's within the window: only n2's"
    now[0] = EVENT_REPEAT_SECONDS + 1
    assert await recorder.post([first], permit) == 1, "n1's window ended: posted again"
    assert recorder.remembered == 2
    now[0] = 2 * EVENT_REPEAT_SECONDS
    assert await recorder.post([], permit) == 0 and recorder.remembered == 1, "n2's is forgotten, n1's second kept"
    assert sorted(e["involvedObject"]["name"] for e in cluster.events("NodeUnhealthy")) == ["n1", "n1", "n2"]


async def test_a_status_is_written_once_and_not_re_sent_while_the_index_catches_up(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    await harness.controller.reconcile_once()
    written = harness.status("p")
    assert written["observedGeneration"] == 1 and written["phase"] == "Configuring"
    await harness.controller.reconcile_once()  # the pool index has not seen the status yet
    assert len(harness.status_writes("p")) == 1, "the write is in flight: not sent again"
    harness.catch_up()
    harness.catch_up_pools()
    await harness.controller.reconcile_once()
    assert len(harness.status_writes("p")) == 1, "nothing is written while the status is unchanged"

    await cluster.client.patch(f"{POOLS}/p/status", {"status": {"phase": "Ready"}})  # someone else writes it
    harness.catch_up_pools()
    await harness.controller.reconcile_once()
    assert len(harness.status_writes("p")) == 2 and harness.status("p") == written, "put right by the next pass"


@pytest.mark.looptime
async def test_a_status_the_pool_watch_never_delivered_is_compared_again_within_the_status_interval(
    cluster: Cluster, looptime: float
) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = await cluster.harness(
        [pool_body("p", {"accelerator": "H100", "nodes": 1})], status_resync_seconds=40.0, agent_check_seconds=3600.0
    )
    for _ in range(3):  # until a pass plans nothing anew; the pool watch never delivers the statuses written
        await harness.controller.reconcile_once()
        harness.catch_up()
    written, writes = harness.status("p"), len(harness.status_writes("p"))
    await cluster.client.patch(f"{POOLS}/p/status", {"status": {"phase": "Ready"}})  # nor this other writer's
    await asyncio.sleep(35)  # past the written status's overlay: the index's (empty) status is what is stored
    await harness.controller.reconcile_once()
    assert len(harness.status_writes("p")) == writes, "no event said anything changed: not compared yet"
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())  # the loop wakes for the status check by itself
    try:
        await asyncio.sleep(6)
        assert len(harness.status_writes("p")) == writes + 1, "compared again at --status-interval"
        assert harness.status("p")["phase"] == written["phase"] == "Configuring", "the other writer's phase put right"
    finally:
        task.cancel()


@pytest.mark.looptime
async def test_status_changes_in_quick_succession_become_one_write(cluster: Cluster, looptime: float) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 1})], status_settle_seconds=1.0)
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    try:
        await asyncio.sleep(0.5)
        assert harness.status_writes("p") == [], "held for --status-settle"
        await harness.set_pools(
            pool_body("p", {"accelerator": "H100", "nodes": 2})
        )  # a second change within the window
        harness.controller.pool_changed("p", harness.pools[0])
        await asyncio.sleep(0.1)
        assert harness.status_writes("p") == []
        await asyncio.sleep(0.5)  # the loop wakes when the first change's settle time ends
        assert len(harness.status_writes("p")) == 1, "one write carries both changes"
        assert harness.status("p")["nodes"]["desired"] == 2
    finally:
        task.cancel()


async def test_a_paused_controller_writes_nothing_and_resumes_from_what_the_api_holds(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 1})])
    assert harness.controller.active
    await harness.controller.reconcile_once()
    harness.catch_up()
    harness.catch_up_pools()
    writes = len(cluster.writes())

    harness.controller.pause()
    await harness.set_pools(pool_body("p", {"accelerator": "H100", "nodes": 2}))
    paused = await harness.controller.reconcile_once()
    assert paused.paused and not harness.controller.active
    assert len(cluster.writes()) == writes, "a standby writes nothing"

    # Meanwhile the leader wrote: the second node joined, the ConfigMaps and the status were updated.
    leader = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 2})])
    await leader.controller.reconcile_once()
    harness.catch_up()
    harness.catch_up_pools()
    taken_over = len(cluster.writes())
    reads = len(cluster.reads())
    harness.controller.resume()
    resumed = await harness.controller.reconcile_once()
    assert resumed.ok and not resumed.paused
    assert cluster.writes()[taken_over:] == [], "the new leader converges with no duplicate writes"
    assert "/api/v1/namespaces/accelpool-system/configmaps/accelpool-device-plugin-config" in cluster.reads()[reads:]
    assert POOLS in cluster.reads()[reads:], "the pools are listed again"


async def test_a_pass_paused_midway_sends_no_further_write(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "nodes": 2})])

    def pause_after_the_first_write(served: Served) -> None:
        if served.by(CONTROLLER) and served.is_write:
            harness.controller.pause()
            harness.controller.resume()  # resumed at once: the pass in flight still stops
            cluster.api.server.listeners.remove(pause_after_the_first_write)

    cluster.api.server.listeners.append(pause_after_the_first_write)
    result = await harness.controller.reconcile_once()
    assert result.paused
    assert [verb for verb, _ in cluster.writes()] == ["POST"], "the device-plugin ConfigMap only"
    assert (await harness.controller.reconcile_once()).ok
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]


async def test_a_deleted_pool_is_released_and_its_objects_removed(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    await harness.controller.reconcile_once()
    harness.catch_up()
    daemonset = "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p"
    assert cluster.api.get(daemonset) is not None
    await harness.set_pools(pool_body("p", {"accelerator": "H100"}, deleting=True))
    assert harness.pools[0].deleting, "held by the finalizer"
    waiter = asyncio.create_task(harness.controller.wait_released("p", wait_seconds=5))
    await asyncio.sleep(0)
    result = await harness.controller.reconcile_once()
    assert result.released_pools == {"p"}
    assert await waiter
    assert cluster.api.get(daemonset) is None
    labels = cluster.node("n1")["metadata"]["labels"]
    assert conventions.POOL_LABEL not in labels
    configmap = cluster.api.get("/api/v1/namespaces/accelpool-system/configmaps/accelpool-device-plugin-config")
    assert configmap is not None and set(configmap["data"]) == {"default"}


async def test_a_refused_deletion_is_tried_again_by_the_next_pass_though_nothing_changed(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    held = pool_body("held", {"accelerator": "H100"})
    harness = await cluster.harness([held, pool_body("p", {"accelerator": "L4"})])  # p: no member to release
    await harness.controller.reconcile_once()
    harness.catch_up()
    daemonset = "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p"
    assert cluster.api.get(daemonset) is not None
    await harness.set_pools(held, pool_body("p", {"accelerator": "L4"}, deleting=True))
    cluster.api.fail(f"DELETE {daemonset}", 503)
    refused = await harness.controller.reconcile_once()
    assert not refused.ok and "p" not in refused.released_pools
    assert cluster.api.get(daemonset) is not None
    again = await harness.controller.reconcile_once()
    assert again.ok and again.released_pools == {"p"}
    assert cluster.api.get(daemonset) is None
    assert cluster.api.get(daemonset.replace("agent-p", "agent-held")) is not None, "the other pool's agent stays"


async def test_passes_never_overlap(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = await cluster.harness(
        [pool_body("a", {"accelerator": "H100", "nodes": 1}), pool_body("b", {"accelerator": "H100", "nodes": 1})]
    )
    results = await asyncio.gather(*(harness.controller.reconcile_once() for _ in range(3)))
    assert all(r.ok for r in results)
    assert sorted(r.number for r in results) == [1, 2, 3]
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"], "one claim per node, no double claims"
    labels = {n: cluster.node(n)["metadata"]["labels"].get(conventions.POOL_LABEL) for n in ("n1", "n2", "n3")}
    assert labels == {"n1": "a", "n2": "b", "n3": None}


async def test_an_agent_daemonset_is_applied_only_when_what_is_rendered_changes(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    pools = [pool_body("p", {"accelerator": "H100"})]
    first = await cluster.harness(pools)
    await first.controller.reconcile_once()
    path = "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p"
    assert cluster.daemonset_image(path).startswith("ghcr.io/")
    assert [w for w in cluster.writes() if w[1] == path] == [("APPLY", path)]  # created by the apply
    # Restarted with the same settings: nothing to write. With another image: one apply.
    same = await cluster.harness(pools)
    await same.controller.reconcile_once()
    assert [w for w in cluster.writes() if w[1] == path] == [("APPLY", path)]
    upgraded = await cluster.harness(pools, agent_image="registry.example/agent:2")
    await upgraded.controller.reconcile_once()
    assert [w for w in cluster.writes() if w[1] == path] == [("APPLY", path)] * 2
    assert cluster.daemonset_image(path) == "registry.example/agent:2"


@pytest.mark.looptime
async def test_the_agents_are_watched_not_listed_and_a_crash_loop_is_named_at_once(cluster: Cluster) -> None:
    """The agents' DaemonSets, pods and FailedCreate Events are listed once for all pools, then watched: no list per
    pass or per interval, and an agent pod that starts crash-looping is in its pool's AgentReady within a pass."""
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("a", {"accelerator": "H100", "nodes": 1})], agent_check_seconds=30.0)
    namespace = "/api/v1/namespaces/accelpool-system"
    controller = harness.controller
    controller.indexed()
    controller.task = asyncio.create_task(controller.run())
    try:
        await asyncio.sleep(95)  # a pass at once, then nothing happens for three intervals
        listed = [s.path for s in cluster.api.served if s.by(CONTROLLER) and "watch" not in s.url.query]
        assert (listed.count(f"{namespace}/pods"), listed.count(f"{namespace}/events")) == (1, 1)
        assert agent_ready(harness, "a")[1] == "WaitingForAgents"
        passes = controller.last.number if controller.last else 0
        looping = ("CrashLoopBackOff", "back-off 5m0s restarting failed container")
        pod = agent_pod("agent-a-1", "a", "n1", looping)
        await cluster.client.create(f"{namespace}/pods", pod)  # its status as the kubelet reports it:
        await cluster.client.patch(f"{namespace}/pods/agent-a-1/status", {"status": pod["status"]})
        await _until(lambda: agent_ready(harness, "a") == ("False", "AgentCrashLooping"), seconds=5.0)
        assert agent_ready(harness, "a") == ("False", "AgentCrashLooping"), "named within seconds, not an interval"
        assert controller.last is not None and controller.last.number <= passes + 2, "the pod's event, one pass"
    finally:
        controller.task.cancel()


@pytest.mark.looptime
async def test_where_the_agents_cannot_be_watched_they_are_listed_every_check_interval(cluster: Cluster) -> None:
    """RBAC that grants list but not watch (an older chart): the watch's 403 turns into a list every
    `--agent-check-interval`, and a crash loop is named within one."""
    namespace = "/api/v1/namespaces/accelpool-system"
    cluster.api.fail(f"GET {namespace}/pods?watch=", 403, times=None)
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("a", {"accelerator": "H100", "nodes": 1})], agent_check_seconds=30.0)
    controller = harness.controller
    controller.indexed()
    controller.task = asyncio.create_task(controller.run())
    try:
        await asyncio.sleep(95)
        listed = [s.path for s in cluster.api.served if s.by(CONTROLLER) and "watch" not in s.url.query]
        assert listed.count(f"{namespace}/pods") == 4, "at the start, then every 30 s"
        assert listed.count(f"{namespace}/events") == 1, "the Events are watched still"
        pod = agent_pod("agent-a-1", "a", "n1", ("CrashLoopBackOff", "back-off 5m0s restarting failed container"))
        await cluster.client.create(f"{namespace}/pods", pod)
        await cluster.client.patch(f"{namespace}/pods/agent-a-1/status", {"status": pod["status"]})
        await _until(lambda: agent_ready(harness, "a") == ("False", "AgentCrashLooping"), seconds=31.0)
        assert agent_ready(harness, "a") == ("False", "AgentCrashLooping")
    finally:
        controller.task.cancel()


def agent_ready(harness: Harness, pool: str) -> tuple[str, str]:
    found = next(c for c in harness.status(pool)["conditions"] if c["type"] == "AgentReady")
    return found["status"], found["reason"]


def agent_pod(name: str, pool: str, node: str, waiting: tuple[str, str]) -> dict[str, Any]:
    """An agent pod of `pool` on `node` whose container waits (reason, message)."""
    labels = {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: pool}
    container = {"name": "agent", "image": "ghcr.io/accelpool/accelpool-agent:0.1.0", "ready": False}
    return {
        "metadata": {"name": name, "labels": {**labels, "app.kubernetes.io/component": "agent"}},
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": container["image"]}]},
        "status": {
            "phase": "Running",
            "containerStatuses": [{**container, "state": {"waiting": {"reason": waiting[0], "message": waiting[1]}}}],
        },
    }


@pytest.mark.looptime
async def test_the_loops_next_pass_writes_while_the_last_ones_statuses_and_events_are_still_being_sent(
    cluster: Cluster,
) -> None:
    """A pass's statuses and Events (as client-go's recorder posts a controller's Events, apart from it) never hold
    back the next pass's node writes (under a storm, its quarantines); the next pass waits for them only before
    sending its own."""
    unhealthy = ("False", "XidError79", "fallen off the bus", "2026-11-02T11:00:00Z")
    await cluster.add_nodes(node_body("n1", labels={conventions.POOL_LABEL: "p"}, health=unhealthy), node_body("n2"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100", "health": {"remediation": "none"}})])
    held = asyncio.get_running_loop().create_future()
    held_status = asyncio.get_running_loop().create_future()
    cluster.api.server[kmock.action.CREATE, kmock.resource("", "v1", "events")] << held  # every Event waits
    status = kmock.resource("accelpool.io", "v1alpha1", "computepools")
    cluster.api.server[kmock.action.UPDATE, status, kmock.subresource("status")] << held_status  # every status too
    controller = harness.controller
    controller.indexed()
    controller.task = asyncio.create_task(controller.run())
    try:
        await _until(lambda: controller.last is not None)
        assert controller.last is not None and controller.last.ok, "pass 1 ended"
        assert not held.done() and not held_status.done(), "with its status and NodeUnhealthy Event on their way"

        await harness.set_pools(pool_body("p", {"accelerator": "H100", "nodes": 2, "health": {"remediation": "none"}}))
        controller.pool_changed("p", harness.pools[0])
        await _until(lambda: "/api/v1/nodes/n2" in harness.node_writes())
        assert "/api/v1/nodes/n2" in harness.node_writes(), "pass 2 claimed n2 while pass 1's were held"
        assert controller.last.number == 1, "pass 2 waits for pass 1's statuses and Events before sending its own"

        held.set_result({"kind": "Event"})
        await asyncio.sleep(1)
        assert controller.last.number == 1, "and for its statuses too"
        held_status.set_result({"status": {}})
        await _until(lambda: controller.last is not None and controller.last.number == 2)
        assert controller.last.ok
    finally:
        controller.task.cancel()


async def _until(condition: Callable[[], bool], seconds: float = 10.0) -> None:
    """Until `condition` holds, on looptime's fake clock (at most `seconds` of it)."""
    for _ in range(int(seconds / 0.1)):
        if condition():
            return
        await asyncio.sleep(0.1)


async def test_a_status_whose_write_failed_is_due_again_and_the_pass_says_so(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    cluster.api.fail(f"PATCH {POOLS}/p/status", 500)
    failed = await harness.controller.reconcile_once()
    assert not failed.ok and failed.error is not None and "status of pool p" in failed.error
    assert harness.status("p") == {}
    retried = await harness.controller.reconcile_once()
    assert retried.ok and harness.status("p")["nodes"]["members"] == 1, "due again: the next pass wrote it"
    assert harness.status_writes("p") == [f"{POOLS}/p/status"] * 2, "refused once, written once"
