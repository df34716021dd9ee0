"""A pass never writes from a stale view of the pools.

After a pause (SIGSTOP, a long GC, a dropped watch) kopf's pool index can still hold pools that
were deleted meanwhile. A pass that would write lists the pools first when it has not done so
for `POOL_CHECK_SECONDS` or after a 409, and plans with what the API server says.
"""

from __future__ import annotations

import asyncio

import pytest

from accelpool.runtime.controller.apiserver import POOLS
from accelpool_api import conventions

from .conftest import node_body
from .emulated import Cluster, pool_body


async def _forget_pool_in_the_api(cluster: Cluster, pool: str) -> None:
    """What the cluster did while the operator was stopped: the pool, its DaemonSet and its marks are gone."""
    await cluster.client.delete(f"{POOLS}/{pool}")
    await cluster.client.patch(f"{POOLS}/{pool}", {"metadata": {"finalizers": None}})  # kopf let it go
    await cluster.client.delete(f"/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-{pool}")
    for node in cluster.api.list("/api/v1/nodes"):
        if node["metadata"]["labels"].get(conventions.POOL_LABEL) != pool:
            continue
        taints = [t for t in node["spec"].get("taints", []) if not t["key"].startswith("accelpool")]
        unmarked = {conventions.POOL_LABEL: None, conventions.DEVICE_PLUGIN_CONFIG_LABEL: None}
        await cluster.client.patch(
            f"/api/v1/nodes/{node['metadata']['name']}", {"metadata": {"labels": unmarked}, "spec": {"taints": taints}}
        )


@pytest.mark.looptime
async def test_a_resumed_operator_writes_nothing_for_pools_deleted_while_it_was_paused(
    cluster: Cluster, looptime: float
) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = await cluster.harness(
        [pool_body("p", {"accelerator": "H100", "nodes": 2}), pool_body("q", {"accelerator": "H100"})]
    )
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    await _forget_pool_in_the_api(cluster, "p")
    await _forget_pool_in_the_api(cluster, "q")
    assert cluster.api.list(POOLS) == []
    harness.catch_up()  # the node watch delivered; the pool index still holds p and q

    await asyncio.sleep(13 * 60)  # stopped for 13 minutes
    writes = len(cluster.writes())
    result = await harness.controller.reconcile_once()

    assert result.ok
    after = cluster.writes()[writes:]
    assert [w for w in after if w[1].startswith("/api/v1/nodes/")] == [], "no node is labelled or tainted"
    assert [w for w in after if w[0] in ("POST", "PUT", "APPLY")] == [], "no DaemonSet or ConfigMap is created for them"
    assert {w[0] for w in after} <= {"DELETE", "PATCH"}, "only their leftovers are cleaned up"
    assert harness.status("p") == {}

    harness.catch_up_pools()  # the index catches up
    assert harness.pools == []
    settled = len(cluster.writes())
    again = await harness.controller.reconcile_once()
    assert again.ok and cluster.writes()[settled:] == []


async def test_a_conflict_makes_the_next_writing_pass_list_the_pools_again(cluster: Cluster) -> None:
    await cluster.add_nodes(node_body("n1"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"})])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    assert cluster.reads().count(POOLS) == 1, "the first writing pass lists the pools"

    await cluster.add_nodes(node_body("n2"))
    harness.catch_up()
    await cluster.client.patch("/api/v1/nodes/n2", {"metadata": {"labels": {"example.com/other": "writer"}}})
    await harness.set_pools(
        pool_body("p", {"accelerator": "H100", "nodes": 2})
    )  # n2 changed; the index has not seen it
    conflicted = await harness.controller.reconcile_once()
    assert conflicted.conflicts == 1
    assert cluster.reads().count(POOLS) == 1, "within POOL_CHECK_SECONDS and no 409 yet: the index is trusted"

    retried = await harness.controller.reconcile_once()
    assert retried.ok and retried.conflicts == 0
    assert cluster.reads().count(POOLS) == 2, "after a 409 the next writing pass lists the pools again"


@pytest.mark.looptime
async def test_a_spec_changed_behind_the_index_is_planned_as_listed_and_an_unchanged_one_is_trusted(
    cluster: Cluster, looptime: float
) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = await cluster.harness([pool_body("p", {"accelerator": "H100"}), pool_body("q", {"accelerator": "H100"})])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    await cluster.store_pools([pool_body("p", {"accelerator": "H100", "nodes": 2})])
    stale_index = cluster.pool_records()  # what the pool watch delivered last: p wants 2 nodes
    await cluster.store_pools([pool_body("p", {"accelerator": "H100", "nodes": 1})])  # and back, not delivered
    harness.pools = stale_index
    generations = {r.name: r.generation for r in cluster.pool_records()}
    assert generations["p"] == 3 and {r.name: r.generation for r in stale_index}["p"] == 2

    await asyncio.sleep(60)  # past POOL_CHECK_SECONDS
    reads, writes = cluster.reads().count(POOLS), len(cluster.writes())
    result = await harness.controller.reconcile_once()

    assert result.ok
    assert cluster.reads().count(POOLS) == reads + 2, (
        "the pass would have claimed a node for p: it listed the pools' metadata first, then, p's generation having"
        " moved, the pools themselves"
    )
    assert [w for w in cluster.writes()[writes:] if w[1].startswith("/api/v1/nodes/")] == [], "p as listed: 1 node"
    assert harness.status("p")["observedGeneration"] == 3
