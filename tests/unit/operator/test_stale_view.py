"""A pass never writes from a stale view of the pools.

After a pause (SIGSTOP, a long GC, a dropped watch) kopf's pool index can still hold pools that
were deleted meanwhile. A pass that would write lists the pools first when it has not done so
for `POOL_CHECK_SECONDS` or after a 409, and plans with what the API server says.
"""

from __future__ import annotations

import asyncio

import pytest

from accelpool import conventions
from accelpool.controller.apiserver import POOLS

from .conftest import node_body
from .test_reconciler import Harness, cluster, record


def _forget_pool_in_the_api(harness: Harness, pool: str) -> None:
    """What the cluster did while the operator was stopped: the pool, its DaemonSet and its marks are gone."""
    fake = harness.fake
    for path in [p for p in fake.objects if p == f"{POOLS}/{pool}" or "/daemonsets/" in p]:
        del fake.objects[path]
    for path, obj in fake.objects.items():
        if path.startswith("/api/v1/nodes/"):
            obj["metadata"]["labels"].pop(conventions.POOL_LABEL, None)
            obj["metadata"]["labels"].pop(conventions.DEVICE_PLUGIN_CONFIG_LABEL, None)
            obj["spec"]["taints"] = [t for t in obj["spec"].get("taints", []) if not t["key"].startswith("accelpool")]
            fake._bump(obj)


@pytest.mark.looptime
async def test_a_resumed_operator_writes_nothing_for_pools_deleted_while_it_was_paused(looptime: float) -> None:
    fake = cluster(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = Harness(fake, [record("p", {"accelerator": "H100", "nodes": 2}), record("q", {"accelerator": "H100"})])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    _forget_pool_in_the_api(harness, "p")
    _forget_pool_in_the_api(harness, "q")
    harness.catch_up()  # the node watch delivered; the pool index still holds p and q

    await asyncio.sleep(13 * 60)  # stopped for 13 minutes
    writes = len(fake.writes)
    result = await harness.controller.reconcile_once()

    assert result.ok
    after = fake.writes[writes:]
    assert [w for w in after if w[1].startswith("/api/v1/nodes/")] == [], "no node is labelled or tainted"
    assert [w for w in after if w[0] in ("POST", "PUT")] == [], "no DaemonSet or ConfigMap is created for them"
    assert {w[0] for w in after} <= {"DELETE", "PATCH"}, "only their leftovers are cleaned up"
    assert harness.status("p") == {}

    harness.pools = []  # the index catches up
    settled = len(fake.writes)
    again = await harness.controller.reconcile_once()
    assert again.ok and fake.writes[settled:] == []


async def test_a_conflict_makes_the_next_writing_pass_list_the_pools_again() -> None:
    fake = cluster(node_body("n1"))
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    assert (await harness.controller.reconcile_once()).ok
    harness.catch_up()
    assert fake.reads.count(POOLS) == 1, "the first writing pass lists the pools"

    fake.add_node(node_body("n2", resource_version="5"))
    harness.catch_up()
    fake.node("n2")["metadata"]["resourceVersion"] = "6"  # changed again; the index has not seen it
    harness.pools = [record("p", {"accelerator": "H100", "nodes": 2})]
    conflicted = await harness.controller.reconcile_once()
    assert conflicted.conflicts == 1
    assert fake.reads.count(POOLS) == 1, "within POOL_CHECK_SECONDS and no 409 yet: the index is trusted"

    retried = await harness.controller.reconcile_once()
    assert retried.ok and retried.conflicts == 0
    assert fake.reads.count(POOLS) == 2, "after a 409 the next writing pass lists the pools again"
