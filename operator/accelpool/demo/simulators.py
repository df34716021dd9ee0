"""Stand-ins for the node-side components a real GPU cluster runs, talking to the API over HTTP.

- `MigManager` plays NVIDIA's MIG manager: when a node's `nvidia.com/mig.config` label names a
  config, it reports `nvidia.com/mig.config.state` pending, then success, and advertises the
  MIG devices of that config (read from the operator's mig-parted ConfigMap) in the node's
  capacity, the way the device plugin would.
- `Kubelet` plays the kubelet for the operator's agent DaemonSets: one real `accelpool-agent`
  process (fake backend) per node the DaemonSet selects, configured from the DaemonSet's own
  env; restarted with the new config when the operator replaces the DaemonSet (all of the
  pool's agents at once, where a real rollout would honour maxUnavailable), and with `--fault`
  when the node carries the demo's fault annotation.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from accelpool import catalog
from accelpool.kube import ApiError, KubeClient

log = logging.getLogger("accelpool.demo")

MIG_CONFIG_LABEL = "nvidia.com/mig.config"
MIG_STATE_LABEL = "nvidia.com/mig.config.state"
FAULT_ANNOTATION = "accelpool.io/demo-fault"
"""`accelpool demo inject NODE xid=79` sets it; the simulated kubelet restarts that node's agent."""
POLL_SECONDS = 0.5


def _labels(node: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = node.get("metadata", {}).get("labels") or {}
    return labels


@dataclass
class MigManager:
    """Applies mig-parted configs to simulated nodes: pending → (a moment) → success."""

    client: KubeClient
    config_map_path: str
    """e.g. /api/v1/namespaces/accelpool-system/configmaps/accelpool-mig-config"""
    delay_seconds: float = 1.0
    applied: dict[str, str] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except (ApiError, OSError) as error:
                log.warning("mig manager: %s", error)
            await asyncio.sleep(POLL_SECONDS)

    async def step(self) -> None:
        nodes = await self.client.list("/api/v1/nodes")
        pending = [n for n in nodes if self._needs_change(n)]
        if not pending:
            return
        for node in pending:
            await self._label(node, {MIG_STATE_LABEL: "pending"})
        await asyncio.sleep(self.delay_seconds)
        configs = await self._configs()
        for node in pending:
            wanted = _labels(node).get(MIG_CONFIG_LABEL)
            if wanted is None:
                await self._label(node, {MIG_STATE_LABEL: None})
                self.applied.pop(node["metadata"]["name"], None)
                continue
            state = "success" if wanted in configs else "failed"
            await self._advertise(node, configs.get(wanted))
            await self._label(node, {MIG_STATE_LABEL: state})
            self.applied[node["metadata"]["name"]] = wanted

    def _needs_change(self, node: dict[str, Any]) -> bool:
        name = node["metadata"]["name"]
        wanted = _labels(node).get(MIG_CONFIG_LABEL)
        if wanted is None:
            return name in self.applied
        return self.applied.get(name) != wanted

    async def _configs(self) -> dict[str, Any]:
        config_map = await self.client.get_or_none(self.config_map_path)
        if not config_map:
            return {}
        documents = [yaml.safe_load(text) for text in (config_map.get("data") or {}).values()]
        configs: dict[str, Any] = {}
        for document in documents:
            if isinstance(document, dict):
                configs.update(document.get("mig-configs") or {})
        return configs

    async def _advertise(self, node: dict[str, Any], config: Any) -> None:
        """Set the node's MIG resources as the device plugin would (mixed-style names)."""
        capacity: dict[str, Any] = dict(node.get("status", {}).get("capacity") or {})
        gpus = int(capacity.get(catalog.NVIDIA_GPU, _labels(node).get("nvidia.com/gpu.count", "0")) or 0)
        gpus = int(_labels(node).get("nvidia.com/gpu.count", gpus))
        updates: dict[str, Any] = {key: None for key in capacity if key.startswith("nvidia.com/mig-")}
        for entry in config or []:
            if entry.get("mig-enabled"):
                for profile, count in (entry.get("mig-devices") or {}).items():
                    updates[f"nvidia.com/mig-{profile}"] = str(int(count) * gpus)
        if any(value is not None for value in updates.values()):
            updates[catalog.NVIDIA_GPU] = "0"
        elif catalog.NVIDIA_GPU in capacity:
            updates[catalog.NVIDIA_GPU] = str(gpus)
        if updates:
            status = {"capacity": updates, "allocatable": updates}
            await self.client.patch(f"/api/v1/nodes/{node['metadata']['name']}/status", {"status": status})

    async def _label(self, node: dict[str, Any], labels: dict[str, str | None]) -> None:
        await self.client.patch(f"/api/v1/nodes/{node['metadata']['name']}", {"metadata": {"labels": labels}})


STOP_GRACE_SECONDS = 5.0
"""How long a stopped process may take to exit on SIGTERM before it is killed."""


async def stop_process(process: asyncio.subprocess.Process, grace: float = STOP_GRACE_SECONDS) -> None:
    """SIGTERM, up to `grace` seconds to exit, then SIGKILL: bounded however the process behaves."""
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.terminate()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(process.wait(), timeout=grace)
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class AgentProcess:
    node: str
    port: int
    fault: str | None
    config: str
    process: asyncio.subprocess.Process


@dataclass
class Kubelet:
    """Runs one real agent process (fake backend) per node selected by an agent DaemonSet."""

    client: KubeClient
    server: str
    namespace: str
    log_dir: Path
    agents: dict[str, AgentProcess] = field(default_factory=dict)

    async def run(self) -> None:
        try:
            while True:
                try:
                    await self.step()
                except (ApiError, OSError) as error:
                    log.warning("kubelet: %s", error)
                await asyncio.sleep(POLL_SECONDS)
        finally:
            await self.stop_all()

    async def step(self) -> None:
        daemonsets = await self.client.list(f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets")
        nodes = {n["metadata"]["name"]: n for n in await self.client.list("/api/v1/nodes")}
        wanted: dict[str, tuple[str, str | None]] = {}
        for daemonset in daemonsets:
            template = daemonset.get("spec", {}).get("template", {}).get("spec", {})
            selector = template.get("nodeSelector") or {}
            config = _agent_config(template)
            for name, node in nodes.items():
                labels = _labels(node)
                if selector and all(labels.get(k) == v for k, v in selector.items()):
                    fault = (node["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION)
                    wanted[name] = (config, fault)
        for name in list(self.agents):
            agent = self.agents[name]
            if (
                name not in wanted
                or wanted[name] != (agent.config, agent.fault)
                or agent.process.returncode is not None
            ):
                await self._stop(name)
        started = False
        for name, (config, fault) in wanted.items():
            if name not in self.agents:
                self.agents[name] = await self._start(name, nodes[name], config, fault)
                started = True
        if started or len(self.agents) != len(wanted):
            listing = "".join(f"{a.node}  http://127.0.0.1:{a.port}/metrics\n" for a in self.agents.values())
            (self.log_dir / "agents.txt").write_text(listing)

    async def _start(self, node_name: str, node: dict[str, Any], config: str, fault: str | None) -> AgentProcess:
        port = free_port()
        model, count = _fake_gpus(node)
        command = [
            str(Path(sys.executable).parent / "accelpool-agent"),
            "run",
            "--backend",
            "fake",
            "--fake-gpus",
            f"{model}:{count}",
            "--node-name",
            node_name,
            "--listen",
            f"127.0.0.1:{port}",
            "--server",
            self.server,
        ]
        if fault:
            command += ["--fault", fault if ":" in fault.split("=")[0] else f"0:{fault}"]
        env = {**os.environ, "ACCELPOOL_AGENT_CONFIG": config, "NODE_NAME": node_name}
        log_file = (self.log_dir / f"agent-{node_name}.log").open("ab")
        process = await asyncio.create_subprocess_exec(*command, env=env, stdout=log_file, stderr=log_file)
        log_file.close()
        return AgentProcess(node=node_name, port=port, fault=fault, config=config, process=process)

    async def _stop(self, node_name: str) -> None:
        await stop_process(self.agents.pop(node_name).process)

    async def stop_all(self) -> None:
        """Stop every agent at once; each gets the same bounded grace."""
        agents, self.agents = list(self.agents.values()), {}
        await asyncio.gather(*(stop_process(agent.process) for agent in agents))


def _agent_config(pod_spec: dict[str, Any]) -> str:
    for container in pod_spec.get("containers") or []:
        for env in container.get("env") or []:
            if env.get("name") == "ACCELPOOL_AGENT_CONFIG":
                return str(env.get("value", "{}"))
    return "{}"


def _fake_gpus(node: dict[str, Any]) -> tuple[str, int]:
    """The simulated devices of a demo node: its catalog model and count, from its labels."""
    labels = _labels(node)
    product = labels.get("nvidia.com/gpu.product") or labels.get("amd.com/gpu.product-name")
    google = labels.get("cloud.google.com/gke-tpu-accelerator") or labels.get("cloud.google.com/gke-accelerator")
    neuron = labels.get("karpenter.k8s.aws/instance-accelerator-name")
    for entry in catalog.ACCELERATORS:
        names = {*entry.detection.gfd_products, *entry.detection.amd_products, *entry.detection.gke_accelerators}
        if product in names or google in names or neuron in entry.detection.karpenter_names:
            capacity = node.get("status", {}).get("capacity") or {}
            count = (
                labels.get("nvidia.com/gpu.count")
                or labels.get("cloud.google.com/gke-accelerator-count")
                or labels.get("karpenter.k8s.aws/instance-accelerator-count")
                or capacity.get(entry.resource)
                or entry.default_count
            )
            return entry.name, max(int(count), 1)
    return "H100-80GB", 8
