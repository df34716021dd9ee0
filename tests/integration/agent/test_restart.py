"""Compute verdicts survive an agent restart, through the node annotation (the emulated API server).

A GPU that computed wrong results is quarantined; the agent restarts while a workload keeps the
GPU busy, so the check cannot run again. The new agent reads the verdict back from the
`accelpool.io/health` annotation and keeps the node Unhealthy; only a later correctness check
that passes releases it. The annotation names its writer (`pool`, `agent`).
"""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.daemon import Daemon
from accelpool_agent.faults import faults_by_gpu, parse_fault_spec
from accelpool_agent.model import Check
from accelpool_agent.reporter import NodeReporter
from accelpool_core.kube import KubeClient
from accelpool_core.protocol import CONDITION_TYPE, HEALTH_ANNOTATION, AgentConfig, HealthReport, HealthStatus
from accelpool_demo.apiserver import ApiServer

from .conftest import NODE

pytestmark = [pytest.mark.integration]


def agent(clock: ManualClock, *faults: str) -> Agent:
    accelerator, count = parse_fake_gpus("H100:2")
    backend = FakeBackend(accelerator, count, faults=faults_by_gpu([parse_fault_spec(f) for f in faults], count))
    config = AgentConfig(pool="llm-training", check_timeout_seconds=5)
    result = Agent(backend, config, AgentSettings(node_name=NODE, backend="fake"), InlineRunner(), clock=clock)
    result.open()
    return result


def daemon(client: KubeClient, the_agent: Agent, clock: ManualClock, pod: str) -> Daemon:
    reporter = NodeReporter(client, NODE, heartbeat_seconds=300, clock=clock, agent_name=pod)
    return Daemon(the_agent, reporter=reporter, telemetry_interval=2.0)


async def start_and_cycle(client: KubeClient, clock: ManualClock, pod: str, *faults: str) -> Any:
    the_agent = agent(clock, *faults)
    the_daemon = daemon(client, the_agent, clock, pod)
    await the_daemon.restore()
    report = await the_agent.full_cycle()
    await the_daemon.publish(report)
    return report


def condition(cluster: ApiServer) -> dict[str, Any]:
    raw = cluster.objects["v1/nodes", None, NODE].raw
    (found,) = [c for c in raw["status"]["conditions"] if c["type"] == CONDITION_TYPE]
    return dict(found)


def annotation(cluster: ApiServer) -> HealthReport:
    raw = cluster.objects["v1/nodes", None, NODE].raw
    return HealthReport.from_annotation(raw["metadata"]["annotations"][HEALTH_ANNOTATION])


async def test_a_wrong_results_verdict_survives_a_restart_while_the_gpu_is_busy(
    cluster: ApiServer, client: KubeClient
) -> None:
    clock = ManualClock()
    first = await start_and_cycle(client, clock, "agent-a", "0:wrong-results")
    assert (first.status, first.reason) == (HealthStatus.UNHEALTHY, "WrongResults")
    uuid = first.gpus[0].device.uuid
    health = annotation(cluster)
    assert (health.pool, health.agent) == ("llm-training", "agent-a")
    verdict = health.verdicts[uuid]["correctness"]
    assert (verdict.status, verdict.reason) == ("fail", "WrongResults")
    assert health.verdicts[first.gpus[1].device.uuid]["correctness"].status == "pass"

    clock.advance(20)  # the agent restarts; a workload now keeps GPU 0 busy
    second = await start_and_cycle(client, clock, "agent-b", "0:wrong-results,busy")
    assert (second.status, second.reason) == (HealthStatus.UNHEALTHY, "WrongResults")
    kept = second.gpus[0].check(Check.CORRECTNESS)
    assert kept is not None and kept.stale and "before the agent restarted" in kept.message
    assert (condition(cluster)["status"], condition(cluster)["reason"]) == ("False", "WrongResults")

    clock.advance(900)  # restarted again; GPU 0 is idle and computes correctly now
    third = await start_and_cycle(client, clock, "agent-c")
    assert (third.status, third.reason) == (HealthStatus.HEALTHY, "AllChecksPassed")
    assert condition(cluster)["status"] == "True"
    assert annotation(cluster).verdicts[uuid]["correctness"].status == "pass"


async def test_a_busy_gpu_with_no_recorded_verdict_is_unknown_not_healthy(
    cluster: ApiServer, client: KubeClient
) -> None:
    report = await start_and_cycle(client, ManualClock(), "agent-a", "1:busy")
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "ChecksSkipped")
    assert condition(cluster)["status"] == "Unknown"


async def test_a_pass_recorded_before_the_restart_keeps_a_busy_gpu_checked(
    cluster: ApiServer, client: KubeClient
) -> None:
    clock = ManualClock()
    await start_and_cycle(client, clock, "agent-a")
    clock.advance(20)
    report = await start_and_cycle(client, clock, "agent-b", "all:busy")
    assert (report.status, report.reason) == (HealthStatus.HEALTHY, "AllChecksPassed")
    assert all((c := gpu.check(Check.MATMUL)) is not None and c.stale for gpu in report.gpus)
