"""Agents that cannot start, in the running demo: `accelpool demo inject NODE no-runtime-class` deletes the
`nvidia` RuntimeClass and NODE's agent pod; the simulated DaemonSet controller's attempts to create the pod
again are refused, and the pool's AgentReady (and the demo's table) names the RuntimeClass and the fix."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_demo import cluster
from accelpool_demo.run import NAMESPACE, POOLS_PATH, inject, pool_rows, simulated_cluster
from tests.support.waiting import HANG_GUARD, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]

FLEET = """
kind: DemoCluster
groups:
  - {prefix: h100, count: 2, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
"""
POOL = {
    "apiVersion": "accelpool.io/v1alpha1",
    "kind": "ComputePool",
    "metadata": {"name": "training"},
    "spec": {"accelerator": "H100:8", "nodes": 2},
}


async def test_a_missing_runtime_class_shows_in_agent_ready_until_cleared() -> None:
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo:
        await demo.client.create(POOLS_PATH, POOL)
        status: dict[str, Any] = {}

        async def phase_is(phase: str) -> bool:
            status.clear()
            status.update((await demo.client.get(f"{POOLS_PATH}/training")).get("status") or {})
            return status.get("phase") == phase

        def agent_ready() -> dict[str, Any]:
            return next((c for c in status.get("conditions") or [] if c["type"] == "AgentReady"), {})

        await eventually(lambda: phase_is("Ready"), "the pool Ready")
        said = await inject(demo.server, "h100-1", "no-runtime-class")
        assert "RuntimeClass nvidia deleted" in said

        async def blocked() -> bool:
            return await phase_is("Degraded") and agent_ready().get("reason") == "RuntimeClassNotFound"

        await eventually(blocked, "AgentReady=False/RuntimeClassNotFound")
        assert agent_ready()["status"] == "False"
        assert 'pod rejected: RuntimeClass "nvidia" not found' in agent_ready()["message"]
        assert "--agent-runtime-class" in agent_ready()["message"]
        pool = await demo.client.get(f"{POOLS_PATH}/training")
        assert pool_rows([pool])[1][-2:] == ("Degraded", "AgentReady=False/RuntimeClassNotFound")
        events = await demo.client.list(f"/api/v1/namespaces/{NAMESPACE}/events")
        assert any(e["reason"] == "FailedCreate" and e["involvedObject"]["kind"] == "DaemonSet" for e in events)

        async def no_agent() -> bool:
            return "h100-1" not in demo.kubelet.agents

        await eventually(no_agent, "no pod on h100-1, no agent")

        await inject(demo.server, "h100-1", "clear")  # the RuntimeClass is back
        await eventually(lambda: phase_is("Ready"), "the pool Ready again")
        assert agent_ready()["reason"] == "Reporting"
