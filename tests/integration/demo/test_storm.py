"""A storm of MIG pool changes and operator crashes on the demo converges, and deleting every pool leaves nothing.

The demo cluster (the API server, NVIDIA's simulated GFD, device plugin, config-manager and MIG manager with the
kubelet's ConfigMap sync delay, the agents, the real operator process) has three A100 and three H100 nodes. A
seeded storm (`storm`) creates MIG pools of each (one of a few layouts, or MIG off), deletes them, creates them
again, scales them and edits their layouts, a fraction of a second apart, while the operator is killed
(SIGKILL: a new process is started, as its Deployment would) or stopped (SIGSTOP, for up to a few seconds, pool
writes waiting on its webhook meanwhile). Every storm starts with an A100 and an H100 MIG pool, so the others
are created while the mig-parted ConfigMap exists: their entries are new when their first members join.

Every version the API server stores of the nodes, pools and Events is recorded (`waiting.recorded`), and:

- no MIG manager ever reports `failed` for the entry its node is labelled with: a member labelled with an entry
  the MIG manager cannot read yet (the kubelet projects a ConfigMap's update seconds to a minute later) fails,
  and only a retry changes its label again, a backoff later (60 s first, `accelpool.decide.planning.mig_retry`: twenty
  of the demo's config syncs). So no `MigConfigRetried` Event either: the storm converges in sync periods, with
  no retry;
- every pool ends `MigConfigured=True` and `DevicePluginConfigured=True` for its last generation, with all
  its nodes: the wait ends on that, or at the first `failed` above; its deadline (`waiting.SAFETY_SECONDS`)
  only guards against a hang, such as the Pending that never ended when a retry's label came and went
  between two looks of the simulated MIG manager;
- deleting every pool leaves nothing of accelpool's: no pool, no DaemonSet, no `accelpool.io/` label or
  annotation, no config label naming an `accelpool-` key, only NVIDIA's default entries and accelpool's
  `default` key in the ConfigMaps; MIG nodes end in `all-disabled`.

`SEEDS` are storms that failed before a joining node waited for its MIG entry (`accelpool.decide.planning.changes`):
a member of a pool created mid-storm was labelled with an entry its MIG manager could not read yet, reported
`failed`, and waited for the retry. Left to the retry, such a storm converged a minute after it ended, or
never: the retry takes the label off and puts it back on the next pass, and the simulated MIG manager, which
then read the label from a list every half second, saw no change, so the node kept the `pending` the
operator wrote (the simulation now sees every value, as the real MIG manager's informer does). Any seed can
be run: `STORM_SEED=42 pytest tests/integration/demo/test_storm.py`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import signal
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from accelpool.model import nvidia
from accelpool_api import conventions
from accelpool_core.kube import KubeClient
from accelpool_demo import cluster
from accelpool_demo.run import (
    DEVICE_PLUGIN_CONFIG_MAP,
    MIG_CONFIG_MAP,
    NAMESPACE,
    POOLS_PATH,
    SimulatedCluster,
    simulated_cluster,
)
from accelpool_demo.simulators import DEMO_INSTALLATION
from tests.support.waiting import HANG_GUARD, History, eventually, recorded

pytestmark = [pytest.mark.integration, HANG_GUARD]

FLEET = """
kind: DemoCluster
groups:
  - {prefix: a100, count: 3, accelerator: A100-40GB, gpus: 8, labels: gfd, instanceType: p4d.24xlarge}
  - {prefix: h100, count: 3, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
"""
NODES_PER_MODEL = 3
ACCELERATORS = {"a1": "A100-40GB:8", "a2": "A100-40GB:8", "h1": "H100-80GB:8", "h2": "H100-80GB:8"}
LAYOUTS: dict[str, tuple[dict[str, Any] | None, ...]] = {
    "A100-40GB:8": (
        {"profile": "1g.5gb"},
        {"profile": "3g.20gb"},
        {"profiles": ["3g.20gb", "2g.10gb", "1g.5gb"]},
        None,
    ),
    "H100-80GB:8": (
        {"profile": "1g.10gb"},
        {"profile": "3g.40gb"},
        {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]},
        None,
    ),
}
OPERATIONS = 16
SEEDS = (3,)
MIG = conventions.MIG_CONFIG_LABEL
MIG_STATE = conventions.MIG_CONFIG_STATE_LABEL
EVENTS = "/api/v1/namespaces/default/events"
OWN = "accelpool-"
"""How accelpool's content-named config keys and mig-parted entries begin (`accelpool.model.nvidia.member_configs`)."""


# ---------------------------------------------------------------- the storm, from its seed


@dataclass(frozen=True)
class Step:
    """One operation of the storm, `pause` seconds after the previous one."""

    action: str
    """create, delete, scale, edit, kill (SIGKILL the operator, start another) or stop (SIGSTOP it for `seconds`)."""
    pause: float
    pool: str = ""
    spec: dict[str, Any] | None = None
    seconds: float = 0.0


def storm(seed: int, operations: int = OPERATIONS) -> list[Step]:
    """The storm of `seed`: an A100 and an H100 MIG pool, then `operations` random ones. Pure.

    Pools never ask for more nodes than their model has, so every storm can converge; each operation is one a
    user could send at that point (an edit or a scale of a pool that exists, a pool created again after it was
    deleted)."""
    rng = random.Random(seed)
    pools: dict[str, dict[str, Any]] = {}
    steps: list[Step] = []

    def free(model: str, without: str = "") -> int:
        used = sum(int(p["nodes"]) for n, p in pools.items() if ACCELERATORS[n] == model and n != without)
        return NODES_PER_MODEL - used

    def create(name: str, layout: dict[str, Any] | None, pause: float) -> None:
        spec: dict[str, Any] = {"accelerator": ACCELERATORS[name], "nodes": 1}
        if layout is not None:
            spec["mig"] = layout
        pools[name] = spec
        steps.append(Step("create", pause, name, dict(spec)))

    create("a1", LAYOUTS[ACCELERATORS["a1"]][rng.randrange(3)], 0.0)
    create("h1", LAYOUTS[ACCELERATORS["h1"]][rng.randrange(3)], rng.uniform(0, 0.5))
    while len(steps) < operations + 2:
        action = rng.choices(("create", "delete", "scale", "edit", "kill", "stop"), (4, 2, 2, 3, 1, 1))[0]
        name = rng.choice(sorted(ACCELERATORS))
        model = ACCELERATORS[name]
        pause = rng.uniform(0, 0.8)
        if action == "create" and name not in pools and free(model) >= 1:
            create(name, rng.choice(LAYOUTS[model]), pause)
        elif action == "delete" and name in pools:
            del pools[name]
            steps.append(Step("delete", pause, name))
        elif action == "scale" and name in pools:
            nodes = rng.randint(1, min(2, free(model, without=name)))
            if nodes != pools[name]["nodes"]:
                pools[name]["nodes"] = nodes
                steps.append(Step("scale", pause, name, {"nodes": nodes}))
        elif action == "edit" and name in pools:
            layout = rng.choice(LAYOUTS[model])
            if layout != pools[name].get("mig"):
                pools[name]["mig"] = layout
                # A merge patch: the other way to give the layout goes (`profile` and `profiles` exclude each other).
                patch = None if layout is None else {"profile": None, "profiles": None, **layout}
                steps.append(Step("edit", pause, name, {"mig": patch}))
        elif action == "kill":
            steps.append(Step("kill", rng.uniform(0, 0.3)))
        elif action == "stop":
            steps.append(Step("stop", rng.uniform(0, 0.3), seconds=rng.uniform(0.3, 3.0)))
    return steps


def final_pools(steps: list[Step]) -> dict[str, dict[str, Any]]:
    """The pools (name → spec) once every step of the storm went through."""
    pools: dict[str, dict[str, Any]] = {}
    for step in steps:
        if step.action == "create" and step.spec is not None:
            pools[step.pool] = dict(step.spec)
        elif step.action == "delete":
            del pools[step.pool]
        elif step.action in ("scale", "edit") and step.spec is not None:
            pools[step.pool] = merged(pools[step.pool], step.spec)
    return pools


def merged(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) applied to `target`."""
    result = dict(target)
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, dict):
            inner = result.get(key)
            result[key] = merged(inner if isinstance(inner, dict) else {}, value)
        else:
            result[key] = value
    return result


class Storm:
    """Sends a storm's steps to the demo; keeps the operator continued once a stop is over."""

    def __init__(self, demo: SimulatedCluster) -> None:
        self.demo = demo
        self.log: list[str] = []
        self._resume: asyncio.Task[None] | None = None
        self._started = time.monotonic()

    async def run(self, steps: list[Step]) -> None:
        for step in steps:
            await asyncio.sleep(step.pause)
            await self.send(step)
            self.log.append(f"{time.monotonic() - self._started:5.1f}s {step.action} {step.pool} {step.spec or ''}")
        await self.resumed()

    async def send(self, step: Step) -> None:
        client, path = self.demo.client, f"{POOLS_PATH}/{step.pool}"
        if step.action == "create":
            await gone(client, step.pool)  # a pool deleted just before is gone once its finalizer is removed
            body = {"apiVersion": "accelpool.io/v1alpha1", "kind": "ComputePool", "metadata": {"name": step.pool}}
            await client.create(POOLS_PATH, {**body, "spec": step.spec})
        elif step.action == "delete":
            await client.delete(path)
        elif step.action in ("scale", "edit"):
            await client.patch(path, {"spec": step.spec})
        elif step.action == "kill":
            await self.resumed()
            await self.demo.kill_operator()
            await self.demo.start_operator()
        elif step.action == "stop":
            await self.resumed()
            os.kill(self.demo.operator.pid, signal.SIGSTOP)
            self._resume = asyncio.create_task(self._continue_after(step.seconds))

    async def _continue_after(self, seconds: float) -> None:
        try:
            await asyncio.sleep(seconds)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.demo.operator.pid, signal.SIGCONT)

    async def resumed(self) -> None:
        """The operator runs (a stop in progress is over)."""
        if self._resume is not None:
            await self._resume
            self._resume = None

    @contextlib.asynccontextmanager
    async def sent(self) -> AsyncIterator[Storm]:
        try:
            yield self
        finally:
            if self._resume is not None:
                self._resume.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._resume


async def gone(client: KubeClient, pool: str) -> None:
    async def absent() -> bool:
        return await client.get_or_none(f"{POOLS_PATH}/{pool}") is None

    await eventually(absent, f"pool {pool} gone")


# ---------------------------------------------------------------- what the histories show


def failed_for_own_label(nodes: History) -> list[str]:
    """Every stored version of a node whose MIG manager reports `failed` for the accelpool entry it is labelled with."""
    found = []
    for name in sorted(nodes.versions):
        for version, node in nodes.all(name):
            labels = (node or {}).get("metadata", {}).get("labels") or {}
            if labels.get(MIG_STATE) == "failed" and str(labels.get(MIG, "")).startswith(OWN):
                found.append(f"{name} at {version}: {MIG}={labels[MIG]} failed")
    return found


def condition(pool: dict[str, Any], kind: str) -> dict[str, Any]:
    return next((c for c in (pool.get("status") or {}).get("conditions") or [] if c.get("type") == kind), {})


def converged(pool: dict[str, Any] | None, spec: dict[str, Any]) -> bool:
    """The pool is configured for its last generation (the storm's last write to it: `spec`), on all its nodes:
    MIG and the device plugin."""
    if pool is None or pool["metadata"].get("deletionTimestamp"):
        return False
    status = pool.get("status") or {}
    return (
        status.get("observedGeneration") == pool["metadata"]["generation"]
        and (status.get("nodes") or {}).get("members") == spec["nodes"]
        and condition(pool, "MigConfigured").get("status") == "True"
        and condition(pool, "DevicePluginConfigured").get("status") == "True"
    )


def where_they_stand(pools: History, nodes: History) -> str:
    """The pools' MIG conditions and the nodes' MIG labels now (for a failure's message)."""
    lines = []
    for name in sorted(pools.versions):
        pool = pools.latest(name)
        if pool is not None:
            found = condition(pool, "MigConfigured")
            lines.append(f"{name}: MigConfigured={found.get('status')}/{found.get('reason')} {found.get('message')}")
    for name in sorted(nodes.versions):
        labels = (nodes.latest(name) or {}).get("metadata", {}).get("labels") or {}
        retry = ((nodes.latest(name) or {}).get("metadata", {}).get("annotations") or {}).get(
            conventions.MIG_RETRY_ANNOTATION
        )
        lines.append(f"{name}: {labels.get(conventions.POOL_LABEL)} {labels.get(MIG)} {labels.get(MIG_STATE)} {retry}")
    return "\n".join(lines)


def leftovers(node: dict[str, Any]) -> list[str]:
    """What accelpool left on a node once every pool is deleted."""
    metadata = node["metadata"]
    labels, annotations = metadata.get("labels") or {}, metadata.get("annotations") or {}
    found = [f"label {k}={v}" for k, v in labels.items() if k.startswith("accelpool.io/") or str(v).startswith(OWN)]
    found += [f"annotation {k}" for k in annotations if k.startswith("accelpool.io/")]
    found += [f"taint {t['key']}" for t in (node.get("spec") or {}).get("taints") or [] if "accelpool" in t["key"]]
    if labels.get(MIG) not in (None, conventions.MIG_DISABLED_CONFIG):
        found.append(f"{MIG}={labels.get(MIG)}")
    return found


# ---------------------------------------------------------------- the test


def seeds() -> tuple[int, ...]:
    chosen = os.environ.get("STORM_SEED")
    return (int(chosen),) if chosen else SEEDS


@pytest.mark.parametrize("seed", seeds())
async def test_a_storm_of_mig_pools_and_operator_crashes_converges_and_leaves_nothing(seed: int) -> None:
    steps = storm(seed)
    wanted = final_pools(steps)
    sync_seconds = DEMO_INSTALLATION.propagation_seconds  # the demo's operator runs with --config-sync this long
    async with (
        simulated_cluster(cluster.nodes(cluster.parse(FLEET))) as demo,
        recorded(demo.client, "/api/v1/nodes") as nodes,
        recorded(demo.client, POOLS_PATH) as pools,
        recorded(demo.client, EVENTS) as events,
        Storm(demo).sent() as sender,
    ):
        started = time.monotonic()
        await sender.run(steps)
        storm_over = time.monotonic()

        def settled(history: History) -> bool:
            pools_now = {n for n in history.versions if history.latest(n) is not None}
            done = pools_now == set(wanted) and all(converged(history.latest(n), s) for n, s in wanted.items())
            return done or bool(failed_for_own_label(nodes))

        await pools.until(settled, f"every pool configured after the storm of seed {seed}")
        took = time.monotonic() - storm_over
        story = "\n".join(sender.log)
        assert not failed_for_own_label(nodes), (
            f"seed {seed}: a MIG manager failed for its node's entry; the storm:\n{story}\n"
            + "\n".join(failed_for_own_label(nodes))
            + "\n"
            + where_they_stand(pools, nodes)
        )
        print(
            f"seed {seed}: a storm of {storm_over - started:.1f} s, every pool configured {took:.1f} s after it "
            f"({took / sync_seconds:.1f} config syncs)"
        )
        retried = [
            str(event.get("message"))
            for name in events.versions
            for _, event in events.all(name)
            if event is not None and event.get("reason") == "MigConfigRetried"
        ]
        assert not retried, f"seed {seed}: {retried}\n{story}"

        for name in wanted:
            await demo.client.delete(f"{POOLS_PATH}/{name}")
        for name in wanted:
            await gone(demo.client, name)
        for node in await demo.client.list("/api/v1/nodes"):
            assert not leftovers(node), (node["metadata"]["name"], leftovers(node))
        base = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
        device_plugin = await demo.client.get(f"{base}/{DEVICE_PLUGIN_CONFIG_MAP}")
        assert set(device_plugin.get("data") or {}) == {conventions.DEFAULT_DEVICE_PLUGIN_KEY}
        mig = await demo.client.get(f"{base}/{MIG_CONFIG_MAP}")
        document = yaml.safe_load(mig["data"][conventions.MIG_CONFIG_DATA_KEY])
        assert set(document["mig-configs"]) == set(nvidia.DEFAULT_MIG_CONFIG_NAMES)
        daemonsets = await demo.client.list(f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets")
        assert not [d["metadata"]["name"] for d in daemonsets], "every pool's agent DaemonSet is deleted"


def test_a_storm_is_its_seed() -> None:
    """The same seed, the same storm; every storm begins with an A100 and an H100 MIG pool, and its pools fit."""
    assert storm(7) == storm(7) and storm(7) != storm(8)
    for seed in range(50):
        steps = storm(seed)
        assert [(s.action, s.pool) for s in steps[:2]] == [("create", "a1"), ("create", "h1")]
        assert all("mig" in s.spec for s in steps[:2] if s.spec is not None)
        for model in set(ACCELERATORS.values()):
            assert sum(p["nodes"] for n, p in final_pools(steps).items() if ACCELERATORS[n] == model) <= NODES_PER_MODEL
