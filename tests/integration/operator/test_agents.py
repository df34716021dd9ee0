"""The agents' DaemonSets with a DaemonSet controller behind them: written without conflicts, and when the
controller cannot create their pods, the pool's AgentReady says why and what to change."""

from __future__ import annotations

from typing import Any

from accelpool import conventions
from accelpool.demo import daemonsets

from .conftest import Cluster, Operator, gpu_node, seed


def settled(daemonset: dict[str, Any] | None, desired: int) -> bool:
    """The controller has observed the DaemonSet's current generation and counted its nodes."""
    if daemonset is None:
        return False
    status = daemonset.get("status") or {}
    return (
        status.get("observedGeneration") == daemonset["metadata"]["generation"]
        and status.get("desiredNumberScheduled") == desired
    )


def status_writes(cluster: Cluster) -> int:
    return len(
        [
            r
            for r in cluster.emulator.writes(agent=daemonsets.USER_AGENT)
            if r.resource is not None and r.resource.plural == "daemonsets" and r.subresource == "status"
        ]
    )


async def test_daemonset_edits_do_not_conflict_with_the_controllers_status_writes(
    cluster: Cluster, operator: Operator
) -> None:
    seed(cluster, gpu_node("h100-1"), gpu_node("h100-2"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: settled(cluster.daemonset("train"), 2), what="the controller's status")

    for interval in ("7m", "9m"):  # each edit changes the agents' config, so the DaemonSet's template
        daemonset = cluster.daemonset("train")
        assert daemonset is not None
        generation: int = daemonset["metadata"]["generation"]
        writes = status_writes(cluster)
        await cluster.patch_pool("train", {"health": {"interval": interval}})

        def rewritten(generation: int = generation, writes: int = writes) -> bool:
            current = cluster.daemonset("train")
            return (
                settled(current, 2)
                and current is not None
                and current["metadata"]["generation"] > generation
                and status_writes(cluster) > writes
            )

        await cluster.wait_for(rewritten, what=f"the DaemonSet rewritten for interval {interval}, its status observed")

    assert cluster.emulator.conflicts("daemonsets", agent="accelpool") == []
    daemonset = cluster.daemonset("train")
    assert daemonset is not None
    pods = cluster.pods("train")
    assert len(pods) == 2 and {p["spec"]["nodeName"] for p in pods} == {"h100-1", "h100-2"}
    config = next(
        e["value"]
        for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
        if e["name"] == "ACCELPOOL_AGENT_CONFIG"
    )
    assert '"intervalSeconds":540.0' in config
    assert daemonset["metadata"]["labels"][conventions.POOL_LABEL] == "train"
