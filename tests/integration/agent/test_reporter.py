"""The node reporter against the emulated API server (accelpool_demo.apiserver): what it writes, and what it does not.

Counts requests to prove the least-traffic promise: one read at start, a write only on change,
a condition rewrite every heartbeat, nothing for TFLOPS noise.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

import pytest

from accelpool_agent.clock import ManualClock
from accelpool_agent.model import NodeReport
from accelpool_agent.reporter import NodeReporter
from accelpool_core.credentials import Credentials
from accelpool_core.kube import KubeClient
from accelpool_core.protocol import CONDITION_TYPE, HEALTH_ANNOTATION, HealthReport, HealthStatus
from accelpool_demo.apiserver import ApiServer

from .conftest import NODE, node_object

pytestmark = [pytest.mark.integration]

HEARTBEAT = 300.0


def report(
    status: HealthStatus = HealthStatus.HEALTHY,
    reason: str = "AllChecksPassed",
    message: str = "8 GPUs passed all checks",
    tflops: float | None = 6345.4,
    bad: tuple[int, ...] = (),
) -> NodeReport:
    return NodeReport(
        node=NODE,
        pool="llm-training",
        backend="fake",
        status=status,
        reason=reason,
        message=message,
        gpus=(),
        bad_gpus=bad,
        dtype="bf16",
        tflops=tflops,
        checked_at=1_767_225_600.0,
    )


def stored_node(cluster: ApiServer) -> dict[str, Any]:
    raw: dict[str, Any] = cluster.objects["v1/nodes", None, NODE].raw
    return raw


def condition(cluster: ApiServer) -> dict[str, Any]:
    (found,) = [c for c in stored_node(cluster)["status"]["conditions"] if c["type"] == CONDITION_TYPE]
    return dict(found)


def annotation(cluster: ApiServer) -> HealthReport:
    return HealthReport.from_annotation(stored_node(cluster)["metadata"]["annotations"][HEALTH_ANNOTATION])


def writes(cluster: ApiServer) -> list[str]:
    return [r.url.path for r in cluster if r.method == "PATCH"]


def reads(cluster: ApiServer) -> int:
    return len([r for r in cluster if r.method == "GET"])


def iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


async def test_condition_and_annotation_are_written(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    assert await reporter.report(report()) == ["condition", "annotation"]
    assert reads(cluster) == 1
    assert writes(cluster) == [f"/api/v1/nodes/{NODE}/status", f"/api/v1/nodes/{NODE}"]
    written = condition(cluster)
    assert written == {
        "type": "AcceleratorHealthy",
        "status": "True",
        "reason": "AllChecksPassed",
        "message": "8 GPUs passed all checks",
        "lastHeartbeatTime": iso(clock.now),
        "lastTransitionTime": iso(clock.now),
    }
    ready = [c for c in stored_node(cluster)["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["reason"] == "KubeletReady"  # appended to the list: the kubelet's stays
    health = annotation(cluster)
    assert (health.status, health.reason, health.tflops, health.dtype) == (
        HealthStatus.HEALTHY,
        "AllChecksPassed",
        6350.0,  # three significant figures: noise does not rewrite the node
        "bf16",
    )
    assert stored_node(cluster)["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] == "0", "others' stay"
    status_patch, node_patch = [r for r in cluster if r.method == "PATCH"]
    pool_test = {"op": "test", "path": "/metadata/labels/accelpool.io~1pool", "value": "llm-training"}
    for patch in (status_patch, node_patch):  # both refused by the API server once the node left the pool
        assert patch.headers["Content-Type"] == "application/json-patch+json"
        assert patch.data[0] == pool_test
    assert status_patch.data[1:] == [{"op": "add", "path": "/status/conditions/-", "value": written}]
    assert node_patch.data[1]["path"] == "/metadata/annotations/accelpool.io~1health"
    assert reporter.stats.writes == {"condition": 1, "annotation": 1}


async def test_a_node_that_left_the_agents_pool_gets_no_report(cluster: ApiServer, client: KubeClient) -> None:
    """The operator released the node (the pool was deleted) while the agent's pod still runs: the
    agent's writes are refused in the same request, and it writes nothing more until the node is back."""
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    assert await reporter.report(report()) == ["condition", "annotation"]
    index = [c["type"] for c in stored_node(cluster)["status"]["conditions"]].index(CONDITION_TYPE)
    # The operator's release: the pool label, the annotation and the condition go.
    cluster.objects["v1/nodes", None, NODE].patch(
        {"metadata": {"labels": {"accelpool.io/pool": None}, "annotations": {HEALTH_ANNOTATION: None}}}
    )
    conditions = [c for c in stored_node(cluster)["status"]["conditions"] if c["type"] != CONDITION_TYPE]
    cluster.objects["v1/nodes", None, NODE].patch({"status": {"conditions": conditions}})
    released = stored_node(cluster)

    failing = report(HealthStatus.UNHEALTHY, "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 3", bad=(3,))
    assert await reporter.report(failing) == []  # the checks killed at SIGTERM, say
    assert stored_node(cluster) == released, "nothing written on a node of no pool"
    assert index == 1 and reporter.stats.errors == 1
    patches = len(writes(cluster))
    clock.advance(HEARTBEAT)
    assert await reporter.report(failing) == []
    assert len(writes(cluster)) == patches, "it knows: no more writes, only a read now and then"

    cluster.objects["v1/nodes", None, NODE].patch({"metadata": {"labels": {"accelpool.io/pool": "llm-training"}}})
    clock.advance(60)
    assert await reporter.report(failing) == ["condition", "annotation"]
    assert condition(cluster)["status"] == "False"


async def test_nothing_is_rewritten_when_nothing_changed(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    await reporter.report(report())
    before = len(list(cluster))
    for step in range(50):
        clock.advance(2)  # telemetry ticks, 100 s in all
        noisy = report(tflops=6345.4 * (1 + 0.01 * ((-1) ** step)))  # ±1% TFLOPS noise
        assert await reporter.report(noisy) == []
    assert len(list(cluster)) == before  # not even a read


async def test_condition_is_rewritten_after_the_heartbeat(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    await reporter.report(report())
    first = condition(cluster)
    clock.advance(HEARTBEAT - 1)
    assert await reporter.report(report()) == []
    clock.advance(1)
    assert await reporter.report(report()) == ["condition"]  # the annotation carries no heartbeat
    second = condition(cluster)
    assert second["lastHeartbeatTime"] == iso(clock.now) != first["lastHeartbeatTime"]
    assert second["lastTransitionTime"] == first["lastTransitionTime"]
    assert len(writes(cluster)) == 3


async def test_transition_time_changes_only_with_the_status(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    await reporter.report(report())
    healthy_since = condition(cluster)["lastTransitionTime"]
    clock.advance(60)
    xid = report(HealthStatus.UNHEALTHY, "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 3", bad=(3,))
    assert await reporter.report(xid) == ["condition", "annotation"]
    failed = condition(cluster)
    assert (failed["status"], failed["reason"]) == ("False", "XidError79")
    assert failed["lastTransitionTime"] == iso(clock.now) != healthy_since
    assert annotation(cluster).bad_gpus == [3]
    clock.advance(60)
    ecc = replace(xid, reason="EccDoubleBitError", message="uncorrectable (double-bit) ECC errors on GPU 3")
    assert await reporter.report(ecc) == ["condition", "annotation"]
    assert condition(cluster)["reason"] == "EccDoubleBitError"
    assert condition(cluster)["lastTransitionTime"] == failed["lastTransitionTime"]  # still False since then


async def test_meaningful_tflops_change_rewrites_the_annotation_only(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    await reporter.report(report(tflops=6345.4))
    assert await reporter.report(report(tflops=5900.0)) == []  # details wait a minute after a write
    clock.advance(60)
    assert await reporter.report(report(tflops=5900.0)) == ["annotation"]
    assert annotation(cluster).tflops == 5900.0


async def test_new_driver_versions_and_findings_rewrite_the_annotation(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    await reporter.report(report())
    clock.advance(60)
    upgraded = replace(report(), driver_version="550.54.15", cuda_version="12.4")
    assert await reporter.report(upgraded) == ["annotation"]
    assert (annotation(cluster).driver_version, annotation(cluster).cuda_version) == ("550.54.15", "12.4")
    clock.advance(60)
    assert await reporter.report(upgraded) == []


async def test_a_flapping_warning_is_written_at_most_once_a_minute(cluster: ApiServer, client: KubeClient) -> None:
    clock = ManualClock()
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    quiet = report()
    throttling = report(reason="ChecksPassedWithWarnings", message="thermal throttling on GPU 2")
    for step in range(300):  # 10 minutes of 2-second ticks, the warning toggling every tick
        await reporter.report(throttling if step % 2 else quiet)
        clock.advance(2)
    assert 5 <= len(writes(cluster)) <= 2 * 11  # condition + annotation, at most one each a minute
    assert condition(cluster)["status"] == "True"
    failing = report(HealthStatus.UNHEALTHY, "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 3", bad=(3,))
    assert await reporter.report(failing) == ["condition", "annotation"]  # a status change is never delayed


async def test_a_restarted_agent_keeps_the_transition_time_and_writes_nothing_new(
    cluster: ApiServer, client: KubeClient
) -> None:
    clock = ManualClock()
    await NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock).report(report())
    since = condition(cluster)["lastTransitionTime"]
    clock.advance(30)
    restarted = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=clock)
    assert await restarted.report(report()) == []
    assert reads(cluster) == 2 and len(writes(cluster)) == 2
    clock.advance(HEARTBEAT)
    assert await restarted.report(report()) == ["condition"]
    assert condition(cluster)["lastTransitionTime"] == since


async def test_api_errors_are_survived_and_retried(cluster: ApiServer, client: KubeClient) -> None:
    cluster["patch"][f"/api/v1/nodes/{NODE}/status"][:1] << 500
    reporter = NodeReporter(client, NODE, heartbeat_seconds=HEARTBEAT, clock=ManualClock())
    assert await reporter.report(report()) == ["annotation"]
    assert reporter.stats.errors == 1
    assert await reporter.report(report()) == ["condition"]  # retried on the next report
    assert condition(cluster)["status"] == "True"


async def test_missing_node_is_an_error_not_a_crash(cluster: ApiServer) -> None:
    async with KubeClient(Credentials(server=str(cluster.url).rstrip("/"))) as api:
        reporter = NodeReporter(api, "no-such-node", heartbeat_seconds=HEARTBEAT, clock=ManualClock())
        assert await reporter.report(report()) == []
        assert reporter.stats.errors == 1
        cluster.objects["v1/nodes", None, "no-such-node"] = node_object("no-such-node")
        assert await reporter.report(report()) == ["condition", "annotation"]


async def test_unreachable_api_is_an_error_not_a_crash() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with KubeClient(Credentials(server=f"http://127.0.0.1:{port}"), timeout=2) as api:
        reporter = NodeReporter(api, NODE, heartbeat_seconds=HEARTBEAT, clock=ManualClock())
        assert await reporter.report(report()) == []
        assert reporter.stats.errors == 1


async def test_agent_daemon_reports_an_xid_on_the_node(cluster: ApiServer) -> None:
    """`accelpool-agent run` on the fake backend: an XID 79 reaches the node as False/XidError79.
    How fast is a benchmark's question (benchmarks/agent_xid_report.py), not this test's."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "accelpool_agent",
        "run",
        "--backend",
        "fake",
        "--fake-gpus",
        "H100:8",
        "--fault",
        "3:xid=79",
        "--server",
        str(cluster.url).rstrip("/"),
        "--node-name",
        NODE,
        "--listen",
        "127.0.0.1:0",
        "--telemetry-interval",
        "0.5",
        env={**os.environ, "LOG_LEVEL": "WARNING"},
    )
    try:
        found: dict[str, Any] = {}
        async with asyncio.timeout(90):  # a hang guard, not a timing
            while not found:
                conditions = [c for c in stored_node(cluster)["status"]["conditions"] if c["type"] == CONDITION_TYPE]
                if conditions and HEALTH_ANNOTATION in stored_node(cluster)["metadata"].get("annotations", {}):
                    found = conditions[0]
                await asyncio.sleep(0.05)
        assert (found.get("status"), found.get("reason")) == ("False", "XidError79"), found
        health = json.loads(stored_node(cluster)["metadata"]["annotations"][HEALTH_ANNOTATION])
        assert health["status"] == "Unhealthy" and health["badGpus"] == [3]
    finally:
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 15) == 0
