"""The demo as a user meets it: every example pool Ready on the simulated cluster, real kubectl
against its API server, an injected XID quarantining a node that a spare then replaces, the
operator's endpoints on 127.0.0.1 only, and nothing left in the temporary directory afterwards."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from accelpool_api import conventions
from accelpool_demo.run import (
    NAMESPACE,
    POOLS_PATH,
    SimulatedCluster,
    all_ready,
    example_pools,
    inject,
    load_fleet,
    simulated_cluster,
)
from tests.support.environment import require_tool
from tests.support.waiting import HANG_GUARD, SAFETY_SECONDS, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]
ROOT = Path(__file__).resolve().parents[3]


def kubectl(kubectl_bin: str, server: str, *args: str) -> str:
    return subprocess.run(
        [kubectl_bin, "--server", server, *args], capture_output=True, text=True, check=True, timeout=SAFETY_SECONDS
    ).stdout


async def test_examples_become_ready_kubectl_sees_them_and_a_fault_quarantines() -> None:
    kubectl_bin = require_tool("kubectl")
    pools = example_pools((ROOT / "examples",))
    assert len(pools) == 8
    async with simulated_cluster(load_fleet()) as demo:
        for pool in pools:
            await demo.client.create(POOLS_PATH, pool)

        async def every_pool_ready() -> bool:
            return all_ready(await demo.client.list(POOLS_PATH))

        await eventually(every_pool_ready, "every example pool Ready")

        table = await asyncio.to_thread(kubectl, kubectl_bin, demo.server, "get", "cpool")
        header, *rows = table.splitlines()
        assert header.split() == ["NAME", "ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE"]
        assert {row.split()[0] for row in rows} == {p["metadata"]["name"] for p in pools}
        training = next(row.split() for row in rows if row.startswith("llm-training"))
        assert training[1:6] == ["H100-80GB", "x8", "2/2", "2", "16"]
        labels = await asyncio.to_thread(kubectl, kubectl_bin, demo.server, "get", "nodes", "--show-labels")
        assert "accelpool.io/pool=llm-training" in labels
        assert "nvidia.com/mig.config=accelpool-h100-mixed-" in labels, "an entry named by its content"

        training_pool: dict[str, Any] = await demo.client.get(f"{POOLS_PATH}/llm-training")
        victim = sorted(m["node"] for m in training_pool["status"]["members"])[0]
        await inject(demo.server, victim, "xid=79")

        async def quarantined_and_replaced() -> bool:
            node = await demo.client.get(f"/api/v1/nodes/{victim}")
            taints = {t["key"]: t.get("value") for t in node.get("spec", {}).get("taints") or []}
            status = (await demo.client.get(f"{POOLS_PATH}/llm-training")).get("status") or {}
            counts = status.get("nodes") or {}
            return (
                taints.get("accelpool.io/quarantined") == "XidError79"
                and counts.get("quarantined") == 1
                and counts.get("ready") == 2
            )

        await eventually(quarantined_and_replaced, f"{victim} quarantined and replaced by a spare")

        # A health policy edit: the operator applies the pool's changed agent DaemonSet (server-side
        # apply), the DaemonSet controller replaces its pods, and the kubelet runs their agents with
        # the new config.
        daemonset_path = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/{conventions.agent_name('llm-training')}"
        old_config = _agent_config(await demo.client.get(daemonset_path))
        members = {n for n, a in demo.kubelet.agents.items() if a.config == old_config}
        old_pids = {demo.kubelet.agents[n].process.pid for n in members}
        assert members, "the pool's agents run with its DaemonSet's config"
        await demo.client.patch(f"{POOLS_PATH}/llm-training", {"spec": {"health": {"interval": "7m"}}})

        async def rolled_out() -> bool:
            config = _agent_config(await demo.client.get(daemonset_path))
            agents = [demo.kubelet.agents.get(name) for name in members]
            return config != old_config and all(
                agent is not None
                and agent.process.returncode is None
                and _environment(agent.process.pid).get("ACCELPOOL_AGENT_CONFIG") == config
                for agent in agents
            )

        await eventually(rolled_out, "the pool's agents restarted with the edited health policy")
        assert not old_pids & {demo.kubelet.agents[n].process.pid for n in members}
        operator_log = (demo.log_dir / "operator.log").read_text()
        assert not [line for line in operator_log.splitlines() if "daemonsets" in line and " 404 " in line]

        listening = listening_addresses(demo.operator.pid)
        assert len(listening) >= 2, f"/metrics and /healthz: {listening}"
        assert {host for host, _ in listening} == {"127.0.0.1"}
    assert not demo.log_dir.exists()


def _agent_config(daemonset: dict[str, Any]) -> str:
    (container,) = daemonset["spec"]["template"]["spec"]["containers"]
    return str(next(e["value"] for e in container["env"] if e["name"] == "ACCELPOOL_AGENT_CONFIG"))


def _environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)


def listening_addresses(pid: int) -> set[tuple[str, int]]:
    """The (address, port) of every TCP socket PID listens on, from /proc (IPv4 and IPv6)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            target = os.readlink(fd)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    found = set()
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            if state == "0A" and inode in inodes:  # TCP_LISTEN
                address, port = local.split(":")
                found.add((_address(address), int(port, 16)))
    return found


def _address(hex_address: str) -> str:
    """/proc/net/tcp writes addresses as hex, each 32-bit word in the host's (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return str(ipaddress.ip_address(words))


async def test_an_error_inside_the_demo_still_stops_it_and_removes_its_directory() -> None:
    started: list[SimulatedCluster] = []

    async def failing_demo() -> None:
        async with simulated_cluster([]) as demo:
            started.append(demo)
            assert demo.log_dir.is_dir()
            raise RuntimeError("a failure")

    with pytest.raises(RuntimeError, match="a failure"):
        await failing_demo()
    (demo,) = started
    assert not demo.log_dir.exists()
    assert demo.operator.returncode is not None
