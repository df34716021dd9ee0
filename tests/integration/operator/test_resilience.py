"""The operator converges through API errors, conflicts, dropped watches and its own restarts."""

from __future__ import annotations

import asyncio
from typing import Any

import kmock

from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import DP_CONFIGMAP, WAIT_GUARD_SECONDS, Cluster, Operator, seed

NODES = kmock.resource("", "v1", "nodes")
CONFIGMAPS = kmock.resource("", "v1", "configmaps")


def node_patches(cluster: Cluster, since: int = 0) -> list[Any]:
    return [
        r
        for r in cluster.emulator.writes(agent="accelpool", since=since)
        if r.method.value == "PATCH"
        and r.resource == NODES
        and not r.headers.get("User-Agent", "").startswith("accelpool-test")
    ]


async def test_converges_through_server_errors_and_conflicts(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 7)))
    # The emulator applies a write before a reaction answers it: these are writes whose answers got lost.
    cluster.emulator[kmock.method.PATCH, NODES][:3] << 500
    cluster.emulator[kmock.method.PATCH, NODES][:2] << 409
    cluster.emulator[kmock.method.POST, CONFIGMAPS][:1] << 503
    await operator.start()
    await cluster.apply_pool("a", {"accelerator": "H100:8", "nodes": 3})
    await cluster.apply_pool("b", {"accelerator": "H100:8", "nodes": 3})
    await cluster.wait_for(lambda: len(cluster.members("a")) == 3 and len(cluster.members("b")) == 3, what="claims")
    assert set(cluster.members("a")).isdisjoint(cluster.members("b"))
    await cluster.wait_for(lambda: cluster.configmap(DP_CONFIGMAP))
    await cluster.settle_members("a")
    await cluster.settle_members("b")
    await cluster.wait_for(
        lambda: cluster.status("a").get("phase") == "Ready" and cluster.status("b").get("phase") == "Ready"
    )
    assert await operator.metric("accelpool_reconcile_errors_total") >= 1


async def test_a_real_conflict_is_re_read_and_retried(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 3)))
    raced: list[str] = []

    def other_writer(request: Any) -> None:
        # Someone else writes the node between the operator's read and its write.
        if request.resource == NODES and request.headers.get("User-Agent") == "accelpool":
            stored = cluster.emulator.objects[NODES, None, request.name]
            other = str(10**9)  # the resourceVersion someone else's write gave it
            stored.patch({"metadata": {"labels": {"example.com/other-writer": "yes"}, "resourceVersion": other}})
            raced.append(request.name)
        else:
            cluster.emulator.before_update.append(other_writer)

    cluster.emulator.before_update.append(other_writer)
    await operator.start()
    await cluster.apply_pool("a", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: len(cluster.members("a")) == 2, what="claims despite a conflict")
    assert len(raced) == 1
    assert cluster.labels(raced[0])["example.com/other-writer"] == "yes", "the other writer's change survives"
    assert cluster.labels(raced[0])[conventions.POOL_LABEL] == "a", "the operator re-read and retried"
    statuses = [r for r in node_patches(cluster) if r.name == raced[0]]
    assert len(statuses) == 2, "one rejected write (409), one retried after reading the node again"


async def test_converges_after_dropped_watches(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    # The first two watch streams end at once, as when an API server or a load balancer drops them.
    cluster.emulator[kmock.action.WATCH, NODES][:2] << b""
    await operator.start()
    await cluster.apply_pool("a", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: len(cluster.members("a")) == 2)
    await cluster.client.delete("/api/v1/nodes/" + cluster.members("a")[0])
    await cluster.wait_for(lambda: len(cluster.members("a")) == 2, what="replacement seen through a new watch")
    watches = [r for r in cluster.emulator if r.action == kmock.action.WATCH and r.resource == NODES]
    assert len(watches) >= 3


async def test_a_restart_midway_never_claims_a_node_twice(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 9)))
    gate = asyncio.Event()
    writes_seen = asyncio.Event()

    async def hold(_: Any) -> None:
        writes_seen.set()
        await gate.wait()  # the write is already stored; its answer never comes before the restart

    cluster.emulator[kmock.method.PATCH, NODES][:2] << hold
    await operator.start()
    await cluster.apply_pool("a", {"accelerator": "H100:8", "nodes": 3})
    await cluster.apply_pool("b", {"accelerator": "H100:8", "nodes": 3})
    await asyncio.wait_for(writes_seen.wait(), WAIT_GUARD_SECONDS)  # a hang guard, not a timing
    await cluster.wait_for(lambda: len(cluster.members("a")) + len(cluster.members("b")) >= 2)
    before = {name: cluster.labels(name).get(conventions.POOL_LABEL) for name in (f"h100-{i}" for i in range(1, 9))}
    await operator.stop()
    gate.set()

    await cluster.apply_pool("c", {"accelerator": "H100:8", "nodes": 3})  # created while the operator is down
    await operator.start()
    await cluster.wait_for(
        lambda: len(cluster.members("a")) == 3 and len(cluster.members("b")) == 3 and len(cluster.members("c")) == 2,
        what="every pool filled after the restart",
    )
    a, b, c = (set(cluster.members(p)) for p in "abc")
    assert not (a & b or a & c or b & c)
    for name, pool in before.items():
        if pool is not None:
            assert cluster.labels(name)[conventions.POOL_LABEL] == pool, f"{name} changed pools across the restart"
