"""Every kind of pool edit reaches its GPUs on the demo, exactly, with the real operator.

One demo cluster (the API server, NVIDIA's simulated GFD, device plugin, config-manager and MIG
manager with the kubelet's ConfigMap sync delay, the agents, the real operator process) holds six
pools, one per kind of edit: time-slicing replicas, MPS replicas, a single-strategy profile, a mixed
layout, MIG on → off and off → on. Each is edited once it is Ready, all at the same time, and
followed until it is Ready for its new generation.

Every version the API server stores of the pools and of the nodes is recorded (`waiting.recorded`),
and its resourceVersions come from one counter, so each status the operator wrote can be set beside
what its members were when it was written. No status of the new generation may say Ready, or count
a member's GPUs, while that member serves anything but the new layout: other resources or counts,
GFD's product for another layout, a MIG manager not done. At the end each node serves exactly the
new layout, and `status.capacity` and the GPUS column equal what the members serve.

The members move to the new configs once NVIDIA's pods can read them (the demo's operator runs with
`--config-sync` equal to the simulated kubelet's ConfigMap sync delay): no MIG manager fails and no
config-manager exits on the way, so each edit takes about that delay and the MIG manager's apply time.

A node in no pool that its owner labelled with one of NVIDIA's default MIG configs
(`nvidia.com/mig.config=all-1g.10gb`) gets that layout from accelpool's ConfigMap and serves it
through all of this.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest

from accelpool_api import conventions
from accelpool_demo import cluster
from accelpool_demo.run import POOLS_PATH, simulated_cluster
from tests.support.waiting import HANG_GUARD, History, eventually, recorded

pytestmark = [pytest.mark.integration, HANG_GUARD]

SELECTOR = {"example.com/pool-edits": "pooled"}
FLEET = """
kind: DemoCluster
groups:
  - {prefix: l4, count: 2, accelerator: L4, gpus: 1, labels: gfd, instanceType: g6.xlarge,
     extraLabels: {example.com/pool-edits: pooled}}
  - {prefix: h100, count: 2, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge,
     extraLabels: {example.com/pool-edits: pooled}}
  - {prefix: a100, count: 2, accelerator: A100-40GB, gpus: 8, labels: gfd, instanceType: p4d.24xlarge,
     extraLabels: {example.com/pool-edits: pooled}}
  - {prefix: owned, count: 1, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge,
     extraLabels: {nvidia.com/mig.config: all-1g.10gb}}
"""
OWNED = "owned-1"
MIG_STATE = conventions.MIG_CONFIG_STATE_LABEL
H100, A100, L4 = "NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB", "NVIDIA-L4"


@dataclass(frozen=True)
class Layout:
    """What a member serves: the device plugin's resources (nonzero) and GFD's product label."""

    resources: dict[str, int]
    product: str


@dataclass(frozen=True)
class Edit:
    pool: str
    before: dict[str, Any]
    serves_before: Layout
    patch: dict[str, Any]
    serves_after: Layout
    gpus: int


EDITS = (
    Edit(
        "time-slicing",
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 2}}},
        Layout({"nvidia.com/gpu": 2}, f"{L4}-SHARED"),
        {"sharing": {"timeSlicing": {"replicas": 4}}},
        Layout({"nvidia.com/gpu": 4}, f"{L4}-SHARED"),
        1,
    ),
    Edit(
        "mps",
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}},
        Layout({"nvidia.com/gpu": 2}, f"{L4}-SHARED"),
        {"sharing": {"mps": {"replicas": 8}}},
        Layout({"nvidia.com/gpu": 8}, f"{L4}-SHARED"),
        1,
    ),
    Edit(
        "single-profile",
        {"accelerator": "H100:8", "mig": {"profile": "1g.10gb"}},
        Layout({"nvidia.com/gpu": 56}, f"{H100}-MIG-1g.10gb"),
        {"mig": {"profile": "3g.40gb"}},
        Layout({"nvidia.com/gpu": 16}, f"{H100}-MIG-3g.40gb"),
        8,
    ),
    Edit(
        "mixed-layout",
        {"accelerator": "H100:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        Layout({"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16}, H100),
        {"mig": {"profiles": ["4g.40gb", "2g.20gb", "1g.10gb"]}},
        Layout({"nvidia.com/mig-4g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 8}, H100),
        8,
    ),
    Edit(
        "mig-off",
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        Layout({"nvidia.com/gpu": 16}, f"{A100}-MIG-3g.20gb"),
        {"mig": None},
        Layout({"nvidia.com/gpu": 8}, A100),
        8,
    ),
    Edit(
        "mig-on",
        {"accelerator": "A100-40GB:8"},
        Layout({"nvidia.com/gpu": 8}, A100),
        {"mig": {"profile": "3g.20gb"}},
        Layout({"nvidia.com/gpu": 16}, f"{A100}-MIG-3g.20gb"),
        8,
    ),
)


def serving(node: dict[str, Any]) -> Layout:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    resources = {k: int(v) for k, v in allocatable.items() if k.startswith("nvidia.com/") and int(v) > 0}
    return Layout(resources, str(node["metadata"]["labels"].get(conventions.GFD_PRODUCT_LABEL)))


def serves(node: dict[str, Any] | None, layout: Layout) -> bool:
    """The node serves exactly `layout`, and its MIG manager (where it has a config) is done."""
    if node is None:
        return False
    labels = node["metadata"]["labels"]
    mig_done = conventions.MIG_CONFIG_LABEL not in labels or labels.get(conventions.MIG_CONFIG_STATE_LABEL) == "success"
    return serving(node) == layout and mig_done


def members(pool: dict[str, Any]) -> list[str]:
    return [m["node"] for m in (pool.get("status") or {}).get("members") or []]


def ready_for(pool: dict[str, Any] | None, generation: int) -> bool:
    status = (pool or {}).get("status") or {}
    return status.get("phase") == "Ready" and status.get("observedGeneration") == generation


def misreports(edit: Edit, generation: int, pools: History, nodes: History, through: int) -> list[str]:
    """Every status of `generation` (up to resourceVersion `through`) that is Ready, or counts a member's GPUs
    or resources, while that member (as it was when the status was written) does not serve the new layout."""
    found: list[str] = []
    for version, pool in pools.all(edit.pool):
        if pool is None or version > through:
            continue
        status = pool.get("status") or {}
        if status.get("observedGeneration") != generation:
            continue
        names = members(pool)
        then = {name: nodes.as_of(name, version) for name in names}
        wrong = {
            name: serving(node) if node else None for name, node in then.items() if not serves(node, edit.serves_after)
        }
        counted = (status.get("capacity") or {}).get("gpus", 0)
        right_gpus = edit.gpus * (len(names) - len(wrong))
        if status.get("phase") == "Ready" and wrong:
            found.append(f"{edit.pool} at {version}: Ready while {wrong}")
        if counted > right_gpus:
            found.append(f"{edit.pool} at {version}: GPUS {counted}, but only {right_gpus} serve the layout ({wrong})")
    return found


async def test_each_kind_of_pool_edit_reaches_its_node_exactly_and_ready_waits_for_it() -> None:
    async with simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo:
        for edit in EDITS:
            spec = {**edit.before, "nodes": 1, "nodeSelector": SELECTOR}
            body = {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool", "metadata": {"name": edit.pool}}
            await demo.client.create(POOLS_PATH, {**body, "spec": spec})

        async with (
            recorded(demo.client, POOLS_PATH) as pools,
            recorded(demo.client, "/api/v1/nodes") as nodes,
            recorded(demo.client, "/api/v1/namespaces/default/events") as events,
        ):

            def all_ready_as_created(history: History) -> bool:
                return all(ready_for(history.latest(e.pool), 1) for e in EDITS)

            await pools.until(all_ready_as_created, "every pool Ready as created")
            for edit in EDITS:
                (member,) = members(pools.latest(edit.pool) or {})
                assert serves(nodes.latest(member), edit.serves_before), (edit.pool, nodes.latest(member))

            started = time.monotonic()
            edited_at = int((await demo.client.request("GET", POOLS_PATH))["metadata"]["resourceVersion"])
            generations: dict[str, int] = {}
            for edit in EDITS:
                patched = await demo.client.patch(f"{POOLS_PATH}/{edit.pool}", {"spec": edit.patch})
                generations[edit.pool] = int(patched["metadata"]["generation"])
            took: dict[str, float] = {}

            def all_ready_as_edited(history: History) -> bool:
                for edit in EDITS:
                    if edit.pool not in took and ready_for(history.latest(edit.pool), generations[edit.pool]):
                        took[edit.pool] = time.monotonic() - started
                return len(took) == len(EDITS)

            await pools.until(all_ready_as_edited, "every edited pool Ready for its new generation")
            print("Ready after the edit (s):", {k: round(v, 1) for k, v in sorted(took.items())})

            through = await pools.complete(demo.client)
            await nodes.complete(demo.client)
            assert not pools.gaps and not nodes.gaps, "the watches saw every version"
            found = [m for e in EDITS for m in misreports(e, generations[e.pool], pools, nodes, through)]
            assert not found, "\n".join(found)
            # The members moved once NVIDIA's pods could read the new configs (`--config-sync`): no MIG manager
            # failed and no config-manager exited on the way.
            failed = [
                (name, version)
                for name in nodes.versions
                for version, node in nodes.all(name)
                if version > edited_at and node and node["metadata"]["labels"].get(MIG_STATE) == "failed"
            ]
            assert not failed, failed
            told = [e["message"] for n in events.versions for v, e in events.all(n) if v > edited_at and e]
            assert not [m for m in told if "failed" in m or "exited" in m], told
            assert [m for m in told if m.startswith("mig-manager: applied accelpool-")], "what they did is told"

            stored = {p["metadata"]["name"]: p for p in await demo.client.list(POOLS_PATH)}
            for edit in EDITS:
                status = stored[edit.pool]["status"]
                (member,) = members(stored[edit.pool])
                node = await demo.client.get(f"/api/v1/nodes/{member}")
                assert serves(node, edit.serves_after), (edit.pool, serving(node))
                assert status["capacity"]["gpus"] == edit.gpus, edit.pool
                assert status["capacity"]["resources"] == edit.serves_after.resources, edit.pool
                assert status["capacity"].get("unconfiguredGPUs", 0) == 0, edit.pool
            assert await gpus_column(demo.server) == {e.pool: str(e.gpus) for e in EDITS}

        # The node in no pool: NVIDIA's default entry from accelpool's ConfigMap, through every edit above.
        async def owned_serves_its_entry() -> bool:
            node = await demo.client.get(f"/api/v1/nodes/{OWNED}")
            return serves(node, Layout({"nvidia.com/gpu": 56}, f"{H100}-MIG-1g.10gb"))

        await eventually(owned_serves_its_entry, f"{OWNED} serves all-1g.10gb: 7 slices on each of 8 GPUs")
        labels = (await demo.client.get(f"/api/v1/nodes/{OWNED}"))["metadata"]["labels"]
        assert labels[conventions.MIG_CONFIG_LABEL] == "all-1g.10gb", "its owner's label, untouched"
        assert conventions.POOL_LABEL not in labels and conventions.DEVICE_PLUGIN_CONFIG_LABEL not in labels


async def gpus_column(server: str) -> dict[str, str]:
    """The GPUS column of `kubectl get cpool`, as the API server prints it (a Table)."""
    accept = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
    async with (
        aiohttp.ClientSession() as session,
        session.get(f"{server}{POOLS_PATH}", headers={"Accept": accept}) as got,
    ):
        table = await got.json()
    names = [c["name"] for c in table["columnDefinitions"]]
    return {str(row["cells"][0]): str(row["cells"][names.index("GPUs")]) for row in table["rows"]}
