"""Hot standby: two real `accelpool run --peering` processes; the standby writes nothing, and when the
leader is killed (SIGKILL: no goodbye in the peering object) it takes over and converges without
repeating a write the leader made.

Each replica talks to the emulator through a port of its own, so every request is attributed to
the replica that sent it (`Replica.writes`). kopf's peering CRD is served as the chart's
crds/kopf.dev_clusterkopfpeerings.yaml declares it, with one ClusterKopfPeering object as the
chart creates it. A short peer lifetime (3 s, renewed every second) keeps the takeover quick.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import kmock
import pytest

from accelpool.runtime import leadership
from accelpool_demo.apiserver import VERBS
from tests.support.builders import node_body

from .conftest import DP_CONFIGMAP, MIG_CONFIGMAP, NAMESPACE, POOLS, Cluster, seed

PEERING = "accelpool"
PEERINGS = f"{leadership.PEERING_GROUP}/{leadership.PEERING_VERSION}/{leadership.PEERING_PLURAL}"
LIFETIME_SECONDS = 3
TAKEOVER_SECONDS = 60.0
"""Generous: the standby needs the leader's record to age out (3 s), then kopf's listing and a pass."""


class Replica:
    """One `accelpool run --peering` process, reaching the emulator through its own server (port)."""

    def __init__(self, cluster: Cluster, server: kmock.Server, name: str, priority: int, log: Path) -> None:
        self.cluster, self.server, self.name, self.priority, self.log = cluster, server, name, priority, log
        self.process: asyncio.subprocess.Process | None = None

    async def start(self, *extra_args: str) -> None:
        command = [
            str(Path(sys.executable).parent / "accelpool"),
            "run",
            f"--server={str(self.server.url).rstrip('/')}",
            f"--namespace={NAMESPACE}",
            f"--device-plugin-configmap={DP_CONFIGMAP}",
            f"--mig-configmap={MIG_CONFIGMAP}",
            "--metrics-port=0",
            "--liveness-port=0",
            "--webhook-port=0",
            "--debounce=0.02",
            "--status-settle=0.2",
            "--agent-check-interval=0.3",
            "--agent-image=registry.example/accelpool-agent:test",
            f"--peering={PEERING}",
            f"--priority={self.priority}",
            f"--peering-lifetime={LIFETIME_SECONDS}",
            "--log-level=verbose",
            *extra_args,
        ]
        with self.log.open("ab") as out:
            self.process = await asyncio.create_subprocess_exec(
                *command, stdout=out, stderr=out, env={**os.environ, "POD_ID": self.name}
            )

    async def kill(self) -> None:
        """SIGKILL: no cleanup, so its peering record stays until its lifetime runs out."""
        if self.process is not None and self.process.returncode is None:
            self.process.send_signal(signal.SIGKILL)
            await self.process.wait()

    def _sent(self) -> list[Any]:
        return [request for request in self.cluster.emulator.writes() if request.url.port == self.server.port]

    def writes(self) -> list[Any]:
        """Every write this replica sent, kopf's peering keepalives excepted."""
        return [r for r in self._sent() if not r.url.path.startswith(f"/apis/{PEERINGS}/")]

    def peering_writes(self) -> list[Any]:
        """kopf's writes to the peering object: its keepalives (every second or so, paused or not)
        and, once leading, the removal of dead peers' records."""
        return [r for r in self._sent() if r.url.path.startswith(f"/apis/{PEERINGS}/")]

    def keepalives(self) -> int:
        return len(self.peering_writes())

    def said(self, text: str) -> bool:
        return text in self.log.read_text()


def peers(cluster: Cluster) -> dict[str, Any]:
    found = cluster.emulator.objects[PEERINGS, None, PEERING]
    return dict(found.raw.get("status") or {})


def described(requests: list[Any]) -> list[str]:
    return [f"{r.method.value} {r.url.path}" for r in requests]


@pytest.fixture
async def replicas(cluster: Cluster, tmp_path: Path) -> AsyncIterator[tuple[Replica, Replica]]:
    """kopf's ClusterKopfPeering served, its object created, and two replicas (not started)."""
    info = kmock.ResourceInfo(kind="ClusterKopfPeering", singular="clusterkopfpeering", namespaced=False)
    info.verbs.update(VERBS)
    cluster.emulator.resources[PEERINGS] = info
    cluster.emulator.objects[PEERINGS, None, PEERING] = {
        "apiVersion": f"{leadership.PEERING_GROUP}/{leadership.PEERING_VERSION}",
        "kind": "ClusterKopfPeering",
        "metadata": {"name": PEERING, "uid": "peering-uid", "resourceVersion": "1"},
    }
    async with kmock.Server(cluster.emulator) as server_a, kmock.Server(cluster.emulator) as server_b:
        leader = Replica(cluster, server_a, "replica-a", 20, tmp_path / "replica-a.log")
        standby = Replica(cluster, server_b, "replica-b", 10, tmp_path / "replica-b.log")
        try:
            yield leader, standby
        finally:
            for replica in (leader, standby):
                await replica.kill()
                with contextlib.suppress(OSError):
                    print(f"---- {replica.name}\n{replica.log.read_text()[-20000:]}")  # shown when a test fails
            cluster.emulator.close_watches()


async def lead_then_yield(cluster: Cluster, first: Replica, second: Replica, *first_args: str) -> None:
    """`first` starts alone and leads; `second`, with a higher priority, joins, and kopf pauses `first`."""
    await first.start(*first_args)
    await cluster.wait_for(lambda: first.writes(), what="the first replica's first pass")
    await second.start()
    await cluster.wait_for(lambda: second.name in peers(cluster), what="the second one's record")
    await cluster.wait_for(lambda: first.said("Pausing operations in favour of"), what="first pauses")
    await cluster.wait_for(lambda: second.said("Resuming operations"), what="second runs")


async def test_a_replica_kopf_pauses_stops_writing(cluster: Cluster, replicas: tuple[Replica, Replica]) -> None:
    """The standby re-reads the NVIDIA ConfigMaps every 0.2 s: were its loop still running on its
    frozen indexes (no pool), it would take the leader's new config keys back out at once."""
    leader, standby = replicas
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await lead_then_yield(cluster, standby, leader, "--resync-interval=0.2")
    paused_at = len(standby.writes())

    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2, what="two members")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Configuring", what="train Configuring")
    dp = cluster.configmap(DP_CONFIGMAP)
    assert dp is not None and any(k.startswith("accelpool-train-") for k in dp["data"])
    seen = standby.keepalives()
    await cluster.wait_for(lambda: standby.keepalives() >= seen + 2, what="two more keepalives of the standby")

    assert described(standby.writes()[paused_at:]) == []
    assert any(k.startswith("accelpool-train-") for k in (cluster.configmap(DP_CONFIGMAP) or {}).get("data", {}))


async def test_the_standby_takes_over_when_the_leader_dies_and_repeats_none_of_its_writes(
    cluster: Cluster, replicas: tuple[Replica, Replica]
) -> None:
    """The standby led once (its caches hold the cluster as it was then): taking over, it reads
    everything again, so it neither re-applies the leader's DaemonSet nor rewrites its ConfigMaps."""
    leader, standby = replicas
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await lead_then_yield(cluster, standby, leader)
    paused_at = len(standby.writes())
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 2, what="two members")
    await cluster.wait_for(lambda: cluster.daemonset("train") and cluster.configmap(DP_CONFIGMAP), what="objects")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Configuring", what="train Configuring")
    assert cluster.members("train") == ["h100-1", "h100-2"]
    assert described(standby.writes()[paused_at:]) == []
    led = described(leader.writes())
    assert {"PATCH /api/v1/nodes/h100-1", "PATCH /api/v1/nodes/h100-2"} <= set(led)

    await leader.kill()
    await cluster.patch_pool("train", {"nodes": 3})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 3, within=TAKEOVER_SECONDS, what="takeover")
    await cluster.wait_for(
        lambda: len(cluster.status("train").get("members") or []) == 3, within=TAKEOVER_SECONDS, what="status"
    )

    taken_over = described(standby.writes()[paused_at:])
    news = ("POST /api/v1/namespaces/default/events", f"PATCH {POOLS}/train/status")  # about the third member
    # Not h100-1 or -2, the ConfigMaps, the DaemonSet, or kopf's finalizer on the pool: the leader wrote them.
    assert [w for w in taken_over if w not in news] == ["PATCH /api/v1/nodes/h100-3"], (taken_over, led)
    assert "replica-a" not in peers(cluster)  # the dead leader's record, cleaned up by the new leader
    peering = cluster.emulator.objects[PEERINGS, None, PEERING].raw
    assert not peering["metadata"].get("finalizers"), "the leadership daemon must not hold the peering object"
    for write in leader.peering_writes() + standby.peering_writes():  # records only (the emulator stamps versions)
        assert set(write.request.data) <= {"status", "metadata"}
        assert set(write.request.data.get("metadata", {})) <= {"resourceVersion"}


async def test_a_leader_that_stops_cleanly_hands_over_at_once(
    cluster: Cluster, replicas: tuple[Replica, Replica]
) -> None:
    """SIGTERM (an upgrade, a drain): kopf stops the leader's daemon and removes its record as it
    exits, so the standby takes over well before that record's 60 s lifetime would run out."""
    leader, standby = replicas
    seed(cluster, *(node_body(f"h100-{i}") for i in range(1, 4)))
    await leader.start("--peering-lifetime=60")
    await cluster.wait_for(lambda: leader.writes(), what="the leader's first pass")
    await standby.start("--peering-lifetime=60")
    await cluster.wait_for(lambda: "replica-b" in peers(cluster), what="the standby's record")
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Configuring", what="train Configuring")
    assert standby.writes() == []

    assert leader.process is not None
    leader.process.send_signal(signal.SIGTERM)
    assert await leader.process.wait() == 0
    assert "replica-a" not in peers(cluster)
    await cluster.patch_pool("train", {"nodes": 3})
    await cluster.wait_for(lambda: len(cluster.members("train")) == 3, within=30, what="a takeover before 60 s")
    news = ("POST /api/v1/namespaces/default/events", f"PATCH {POOLS}/train/status")
    assert [w for w in described(standby.writes()) if w not in news] == ["PATCH /api/v1/nodes/h100-3"]
