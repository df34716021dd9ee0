"""`accelpool uninstall` (what the chart's pre-delete hook runs) against the real operator: every pool is
deleted, the operator releases every member (pool label and taint, burn-in and quarantine taints), and the
command returns once nothing is left; without an operator it names what is stuck and why, and fails."""

from __future__ import annotations

import asyncio
import json
import sys

from accelpool_api import conventions
from tests.support.builders import node_body, pool_body

from .conftest import POOLS, Cluster, Operator, seed

ACCELPOOL_TAINTS = {conventions.POOL_TAINT_KEY, conventions.BURN_IN_TAINT_KEY, conventions.QUARANTINE_TAINT_KEY}
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
HANG_GUARD = "90s"
"""The command's --timeout in the test that succeeds: only a guard against hanging (the operator runs on real
time, slower on a loaded machine); the test checks what is left, not how long it took."""


async def uninstall(server: str, within: str) -> tuple[int, str, str]:
    """`accelpool uninstall` as the hook's container runs it: a process of its own (the operator's KopfRunner
    holds this process's standard output while it runs)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "accelpool.cli",
        "uninstall",
        "--server",
        server,
        "--timeout",
        within,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def accelpool_marks(cluster: Cluster, node: str) -> tuple[dict[str, str], list[str]]:
    """The node's accelpool.io labels and the keys of its accelpool taints."""
    labels = {k: v for k, v in cluster.labels(node).items() if k.startswith(f"{conventions.DOMAIN}/")}
    return labels, sorted(t["key"] for t in cluster.taints(node) if t["key"] in ACCELPOOL_TAINTS)


async def test_every_pool_is_deleted_and_every_node_released(cluster: Cluster, operator: Operator) -> None:
    seed(
        cluster,
        *(node_body(f"h100-{i}", taints=[GPU_TAINT]) for i in (1, 2, 3)),
        node_body("a100-1", "A100-40GB"),
        node_body("spare-1", labels={"example.com/team": "ml"}),
    )
    before = {n["metadata"]["name"]: n for n in cluster.nodes()}
    await operator.start()
    health = {"remediation": "taint", "holdDown": "10m", "maxUnavailable": 1}
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2, "health": health})
    await cluster.apply_pool("slices", {"accelerator": "A100-40GB", "mig": {"profiles": ["3g.20gb"]}})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2 and cluster.members("slices") == ["a100-1"])
    train = cluster.members("train")
    await cluster.wait_for(
        lambda: all(conventions.BURN_IN_TAINT_KEY in accelpool_marks(cluster, n)[1] for n in train), what="burn-in"
    )
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="train Ready")
    # A member fails: quarantined (its taint), the spare claimed in its place (burn-in taint).
    await cluster.report_health(train[0], healthy=False, reason="XidError79", message="XID 79", bad_gpus=(3,))
    await cluster.wait_for(
        lambda: conventions.QUARANTINE_TAINT_KEY in accelpool_marks(cluster, train[0])[1], what="quarantine"
    )
    await cluster.wait_for(lambda: len(cluster.members("train")) == 3, what="the spare claimed")
    marked = {n for n in before if accelpool_marks(cluster, n) != ({}, [])}
    assert marked == {"h100-1", "h100-2", "h100-3", "a100-1"}
    assert accelpool_marks(cluster, train[0])[1] == sorted(
        {conventions.POOL_TAINT_KEY, conventions.QUARANTINE_TAINT_KEY}
    )

    code, out, err = await uninstall(cluster.server, HANG_GUARD)

    assert code == 0, err
    assert out.splitlines() == [
        "released slices, train: no ComputePool is left and no node is labelled accelpool.io/pool"
    ]
    assert "ComputePool slices: deleted; waiting for the operator to release its nodes" in err
    assert "ComputePool train: deleted; waiting for the operator to release its nodes" in err
    assert cluster.pool("train") is None and cluster.pool("slices") is None
    for name, node in before.items():
        assert accelpool_marks(cluster, name) == ({}, []), name
        assert cluster.taints(name) == (node.get("spec") or {}).get("taints", []), name
        annotations = cluster.node(name)["metadata"].get("annotations") or {}
        assert not [k for k in annotations if k.startswith(f"{conventions.DOMAIN}/")], (name, annotations)
    assert cluster.daemonset("train") is None and cluster.daemonset("slices") is None


async def test_no_pools_is_nothing_to_do(cluster: Cluster) -> None:
    code, out, err = await uninstall(cluster.server, "5s")
    assert (code, out.strip()) == (
        0,
        "released no pools: no ComputePool is left and no node is labelled accelpool.io/pool",
    ), err


async def test_without_an_operator_it_names_what_is_stuck_and_fails(cluster: Cluster) -> None:
    """What a stopped (or crash-looping) operator left: a pool on its finalizer, a labelled, tainted member.
    The command deletes the pool, which stays (nobody removes the finalizer), and gives up after --timeout
    naming both, the cause and the ways out; helm uninstall then stops before removing anything."""
    member = node_body(
        "h100-1",
        labels={conventions.POOL_LABEL: "train"},
        taints=[{"key": conventions.POOL_TAINT_KEY, "value": "train", "effect": "NoSchedule"}],
    )
    seed(cluster, member)
    await cluster.client.create(
        POOLS, pool_body("train", {"accelerator": "H100:8"}, finalizers=["accelpool.io/finalizer"])
    )

    code, out, err = await uninstall(cluster.server, "1s")

    assert code == 1 and out == ""
    assert "ComputePool train: deleted; waiting for the operator to release its nodes" in err
    assert (
        "error: not released within 1s; still there: ComputePools train (finalizers: accelpool.io/finalizer); "
        "nodes h100-1 (accelpool.io/pool=train)."
    ) in err
    assert "The operator removes accelpool.io/finalizer once it has released a pool's nodes: is it running" in err
    assert "helm uninstall --no-hooks" in err
    pool = cluster.pool("train")
    assert pool is not None and pool["metadata"].get("deletionTimestamp"), "deleted, held by its finalizer"
    assert cluster.labels("h100-1")[conventions.POOL_LABEL] == "train", "the node is left as it was"


async def test_a_taint_on_a_node_in_no_pool_is_named_with_the_command_to_remove_it(cluster: Cluster) -> None:
    stray = {"key": conventions.BURN_IN_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}
    seed(cluster, node_body("h100-9", taints=[GPU_TAINT, stray]))
    code, _, err = await uninstall(cluster.server, "5s")
    assert code == 0, err
    assert (
        "warning: node h100-9 is in no pool but carries accelpool.io/burn-in=pending:NoSchedule; the operator "
        "releases members only: kubectl taint node h100-9 accelpool.io/burn-in-"
    ) in err
    assert json.dumps(cluster.taints("h100-9")) == json.dumps([GPU_TAINT, stray]), "reported, not changed"
