"""On-demand check requests on the emulated API server: the agent's node watch hears of a token set on
its Node, a full cycle runs at once, and the health annotation answers the token; the watch resumes
after the server ends its stream and lists again when its resourceVersion has expired."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.daemon import Daemon
from accelpool_agent.node_watch import Backoff, NodeWatch
from accelpool_agent.reporter import NodeReporter
from accelpool_core.kube import KubeClient
from accelpool_core.protocol import CHECK_REQUEST_ANNOTATION, HEALTH_ANNOTATION, AgentConfig, HealthReport
from accelpool_demo.apiserver import ApiServer
from accelpool_demo.apiserver.events import EventLog

from .conftest import NODE

SAFETY_SECONDS = 90.0
"""How long one wait may take before the test fails: a guard against waiting forever, not a timing."""
pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

QUICK = Backoff(initial=0.05, cap=0.2)
"""Retries in tens of milliseconds: the tests wait for what happens, never for how long."""


async def eventually(predicate: Callable[[], bool], what: str) -> None:
    """Until `predicate()` holds; only a hang is failed (`SAFETY_SECONDS`), however slow the machine."""
    try:
        async with asyncio.timeout(SAFETY_SECONDS):
            while not predicate():  # noqa: ASYNC110 (the agent's threads and the emulator change what it reads)
                await asyncio.sleep(0.05)
    except TimeoutError:
        raise AssertionError(f"still waiting after {SAFETY_SECONDS:g} s (a hang guard): {what}") from None


def node_annotations(cluster: ApiServer) -> dict[str, str]:
    found: dict[str, str] = cluster.objects["v1/nodes", None, NODE].raw["metadata"].get("annotations") or {}
    return found


def answered(cluster: ApiServer) -> str | None:
    text = node_annotations(cluster).get(HEALTH_ANNOTATION)
    return HealthReport.from_annotation(text).check_request if text else None


async def ask(client: KubeClient, token: str) -> None:
    await client.patch(f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": {CHECK_REQUEST_ANNOTATION: token}}})


def fake_agent() -> Agent:
    accelerator, count = parse_fake_gpus("H100:2")
    config = AgentConfig(pool="llm-training", check_timeout_seconds=5, interval_seconds=3600)
    agent = Agent(
        FakeBackend(accelerator, count), config, AgentSettings(node_name=NODE, backend="fake"), InlineRunner()
    )
    agent.open()
    return agent


@contextlib.asynccontextmanager
async def running_daemon(client: KubeClient, watch: NodeWatch | None = None) -> AsyncIterator[Daemon]:
    """A fake-backend agent's daemon with its reporter and node watch, on the emulated API server."""
    reporter = NodeReporter(client, NODE, heartbeat_seconds=300, agent_name="agent-pod")
    daemon = Daemon(
        fake_agent(), reporter=reporter, telemetry_interval=0.5, watch=watch or NodeWatch(client, NODE, backoff=QUICK)
    )
    stop = asyncio.Event()
    task = asyncio.create_task(daemon.run(stop))
    try:
        yield daemon
    finally:
        stop.set()
        await task


def cycles(daemon: Daemon) -> int:
    return daemon.agent.snapshot.cycles_total


async def test_a_token_on_the_node_runs_a_full_cycle_and_the_annotation_answers_it(
    cluster: ApiServer, client: KubeClient
) -> None:
    async with running_daemon(client) as daemon:
        await eventually(lambda: HEALTH_ANNOTATION in node_annotations(cluster), "the first cycle's report")
        assert cycles(daemon) == 1 and answered(cluster) is None
        await ask(client, "2026-01-01T00:00:00Z-a1b2")
        await eventually(lambda: answered(cluster) == "2026-01-01T00:00:00Z-a1b2", "the request answered")
        assert cycles(daemon) == 2, "a cycle of its own, not the hour's interval"
        health = HealthReport.from_annotation(node_annotations(cluster)[HEALTH_ANNOTATION])
        assert (health.status.value, health.reason, health.agent) == ("Healthy", "AllChecksPassed", "agent-pod")

        await ask(client, "x" * 64)  # not a token: the agent logs it and runs nothing
        await ask(client, "second")
        await eventually(lambda: answered(cluster) == "second", "the second request answered")
        assert cycles(daemon) == 3, "the invalid token started no cycle"


@pytest.mark.parametrize("on_node", ["asked-before", "answered-before"])
async def test_at_start_only_a_token_not_answered_yet_is_run(
    cluster: ApiServer, client: KubeClient, on_node: str
) -> None:
    """The previous agent answered `answered-before`. A token it did not answer is answered by the new agent's
    first cycle; one it answered is not run again: either way, the next request is the second cycle."""
    previous = HealthReport.model_validate(
        {"status": "Healthy", "reason": "AllChecksPassed", "checkRequest": "answered-before"}
    )
    await client.patch(
        f"/api/v1/nodes/{NODE}",
        {"metadata": {"annotations": {HEALTH_ANNOTATION: previous.to_annotation(), CHECK_REQUEST_ANNOTATION: on_node}}},
    )
    async with running_daemon(client) as daemon:
        await eventually(lambda: cycles(daemon) == 1 and answered(cluster) == on_node, "the first cycle's answer")
        await ask(client, "next")
        await eventually(lambda: answered(cluster) == "next", "the next request answered")
        assert cycles(daemon) == 2


class Seen:
    """The node watch's callback: the check-request annotations it was handed."""

    def __init__(self) -> None:
        self.tokens: list[str | None] = []

    def __call__(self, node: Mapping[str, Any]) -> None:
        self.tokens.append(((node.get("metadata") or {}).get("annotations") or {}).get(CHECK_REQUEST_ANNOTATION))


@contextlib.asynccontextmanager
async def watching(watch: NodeWatch, seen: Seen) -> AsyncIterator[None]:
    task = asyncio.create_task(watch.run(seen))
    try:
        yield
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


async def test_the_watch_resumes_after_the_server_ends_its_stream(cluster: ApiServer, client: KubeClient) -> None:
    """Each watch asks to be ended after 1-2 s (`timeoutSeconds`): a token set between two streams is seen
    by the next one, which resumes from the last resourceVersion without listing again."""
    watch = NodeWatch(client, NODE, min_timeout_seconds=1, backoff=QUICK)
    seen = Seen()
    async with watching(watch, seen):
        await eventually(lambda: watch.watches == 1 and seen.tokens == [None], "listed, then watching")
        await ask(client, "first")
        await eventually(lambda: seen.tokens[-1:] == ["first"], "the token seen")
        await eventually(lambda: watch.watches >= 3, "the server ended two streams")
        await ask(client, "second")
        await eventually(lambda: seen.tokens[-1:] == ["second"], "the token seen by a later stream")
    assert watch.lists == 1
    watched = [s for s in cluster.served if s.method == "GET" and "watch=true" in str(s.url)]
    versions = [s.url.query["resourceVersion"] for s in watched]  # the streams that ended (logged when answered)
    assert len(versions) >= 2 and len(set(versions)) == len(versions), "each resumed from a newer resourceVersion"
    assert all(s.url.query["fieldSelector"] == f"metadata.name={NODE}" for s in watched)
    assert all(1 <= int(s.url.query["timeoutSeconds"]) <= 2 for s in watched)


async def test_the_watch_lists_again_when_its_resource_version_expired(cluster: ApiServer, client: KubeClient) -> None:
    watch = NodeWatch(client, NODE, min_timeout_seconds=1, backoff=QUICK)
    seen = Seen()
    async with watching(watch, seen):
        await eventually(lambda: watch.watches == 1, "watching")
        cluster.store.events = EventLog(capacity=2)  # the watch cache forgets: the stream's version is gone
        for other in ("b", "c", "d"):
            await client.create("/api/v1/nodes", {"metadata": {"name": f"other-{other}"}})
        await ask(client, "asked-meanwhile")
        await eventually(lambda: watch.lists == 2, "a second list after 410 Expired")
        await eventually(lambda: seen.tokens[-1:] == ["asked-meanwhile"], "the token seen by the list")
    relist = [
        s for s in cluster.served if s.method == "GET" and s.url.path == "/api/v1/nodes" and "watch" not in s.url.query
    ]
    assert [s.url.query.get("resourceVersion") for s in relist] == ["0", None], "then a consistent read"


async def test_the_watch_backs_off_and_retries_after_errors(cluster: ApiServer, client: KubeClient) -> None:
    cluster.fail("GET /api/v1/nodes", 503, times=3)
    watch = NodeWatch(client, NODE, backoff=QUICK)
    seen = Seen()
    async with watching(watch, seen):
        await ask(client, "after-errors")
        await eventually(lambda: seen.tokens[-1:] == ["after-errors"], "the token, once the server answers")
    refused = [s for s in cluster.served if s.method == "GET" and s.status == 503]
    assert len(refused) == 3


async def test_the_watch_reads_a_node_larger_than_aiohttps_line_limit(client: KubeClient) -> None:
    """Nodes carry image lists and annotations of other tools: one event is easily over 128 KiB."""
    big = {"example.com/inventory": "x" * 200_000}
    await client.patch(f"/api/v1/nodes/{NODE}", {"metadata": {"annotations": big}})
    watch = NodeWatch(client, NODE, backoff=QUICK)
    seen = Seen()
    async with watching(watch, seen):
        await eventually(lambda: watch.watches == 1, "watching")
        await ask(client, "on-a-big-node")
        await eventually(lambda: seen.tokens[-1:] == ["on-a-big-node"], "the token in a 200 KB event")
    assert watch.watches == 1, "read in one stream, no error"
