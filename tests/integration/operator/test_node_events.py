"""The node relevance filter on the real operator: node events no plan reads start no pass, the rest do.

Counted by `accelpool_node_events_total{relevant=...}` (the controller's verdict on every node watch
event); the writes the emulator served show that nothing was written for the irrelevant ones.
"""

from __future__ import annotations

import asyncio

import pytest

from accelpool.runtime.controller import overlays
from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import Cluster, Operator, seed

RELEVANT = 'accelpool_node_events_total{relevant="true"}'
IRRELEVANT = 'accelpool_node_events_total{relevant="false"}'


async def wait_metric(operator: Operator, sample: str, at_least: float, attempts: int = 1000) -> float:
    """Until the operator's sample reaches `at_least` (polled: the operator runs in another thread)."""
    for _ in range(attempts):
        value = await operator.metric(sample)
        if value >= at_least:
            return value
        await asyncio.sleep(0.02)
    raise AssertionError(f"{sample} did not reach {at_least}")


async def ready_pool(cluster: Cluster, operator: Operator, spec: dict[str, object]) -> None:
    await operator.start()
    await cluster.apply_pool("train", spec)
    await cluster.wait_for(lambda: len(cluster.members("train")) == spec["nodes"], what="members")
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="Ready")


async def unrelated_changes(cluster: Cluster, nodes: list[str]) -> None:
    """What other controllers and kubelets do all day: labels and annotations of their own, heartbeats."""
    for index, node in enumerate(nodes):
        await cluster.client.patch(
            f"/api/v1/nodes/{node}",
            {
                "metadata": {
                    "labels": {"example.com/rack": f"r{index}"},
                    "annotations": {"example.com/seen": str(index)},
                }
            },
        )
        conditions = (cluster.node(node).get("status") or {}).get("conditions") or []
        beat = [c | {"lastHeartbeatTime": f"2026-11-23T00:00:{index % 60:02d}Z"} if c["type"] == "Ready" else c
                for c in conditions]  # fmt: skip
        await cluster.client.patch(f"/api/v1/nodes/{node}/status", {"status": {"conditions": beat}})


def operator_writes(cluster: Cluster, since: int) -> list[str]:
    return [
        f"{w.method.value} {w.path}"
        for w in cluster.emulator.writes(since=since)
        if w.user_agent == "accelpool" or w.user_agent.startswith("kopf/")
    ]


async def test_unrelated_node_changes_start_no_pass_and_write_nothing(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 5)))
    await ready_pool(cluster, operator, {"accelerator": "H100:8", "nodes": 2})
    relevant, irrelevant = await operator.metric(RELEVANT), await operator.metric(IRRELEVANT)
    since = cluster.emulator.request_count

    await unrelated_changes(cluster, ["h100-1", "h100-2", "h100-3", "h100-4"])

    # 4 nodes x (a label and annotation patch + a status patch) = 8 events, all judged irrelevant.
    await wait_metric(operator, IRRELEVANT, irrelevant + 8)
    assert await operator.metric(RELEVANT) == relevant
    assert operator_writes(cluster, since) == []


async def test_a_label_a_pool_selects_on_is_relevant(cluster: Cluster, operator: Operator) -> None:
    racked = {"example.com/rack": "r1"}
    seed(cluster, *(node_body(f"h100-{i}", labels=racked if i < 3 else {}) for i in range(1, 4)))
    await ready_pool(cluster, operator, {"accelerator": "H100:8", "nodes": 2, "nodeSelector": racked})
    relevant = await operator.metric(RELEVANT)

    await cluster.client.patch("/api/v1/nodes/h100-3", {"metadata": {"labels": racked}})

    await wait_metric(operator, RELEVANT, relevant + 1)
    await cluster.client.patch("/api/v1/nodes/h100-1", {"metadata": {"labels": {"example.com/rack": "r2"}}})
    # h100-1 no longer matches the selector: the plan replaces it with h100-3.
    await cluster.wait_for(lambda: cluster.members("train") == ["h100-2", "h100-3"], what="h100-3 replaces h100-1")


async def test_a_quarantine_happens_amid_unrelated_changes(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 5)))
    await ready_pool(cluster, operator, {"accelerator": "H100:8", "nodes": 2, "health": {"remediation": "taint"}})
    relevant = await operator.metric(RELEVANT)
    stream = asyncio.create_task(unrelated_changes(cluster, ["h100-1", "h100-2", "h100-3", "h100-4"] * 3))

    await cluster.report_health("h100-1", healthy=False, reason="XidError79")

    def quarantined() -> bool:
        return any(t["key"] == conventions.QUARANTINE_TAINT_KEY for t in cluster.taints("h100-1"))

    await cluster.wait_for(quarantined, what="quarantine taint")
    await stream
    assert await operator.metric(RELEVANT) > relevant


async def test_a_stored_status_is_not_written_again_at_each_status_interval(
    cluster: Cluster, operator: Operator, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ACCELPOOL_STATUS_INTERVAL", "0.2")  # a pass every 0.2 s compares every status
    # What the operator wrote stands in for the index for this long; after it, the index must hold the status.
    monkeypatch.setattr(overlays, "OVERLAY_TTL_SECONDS", 0.2)
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await ready_pool(cluster, operator, {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: cluster.status("train").get("members"), what="status written")
    await operator.wait_passes(await operator.passes() + 3)  # the status written is in the pool index
    since = cluster.emulator.request_count

    await operator.wait_passes(await operator.passes() + 10)

    assert operator_writes(cluster, since) == []
