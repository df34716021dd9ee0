"""Stand-ins for the node-side components a real GPU cluster runs, talking to the API over HTTP.

- `NvidiaComponents` runs `accelpool_demo.nvidia` (GFD, the device plugin and its config-manager
  sidecar, the MIG manager, the kubelet's ConfigMap sync delay) against every NVIDIA node:
  GFD labels, `nvidia.com/mig.config.state`, and the plugin's resources in capacity/allocatable;
  what they report (a missing config key, a failed MIG config) is logged and recorded as Events.
- `Kubelet` plays the kubelet for the agent pods the DaemonSet controller
  (`accelpool_demo.daemonsets`) creates: one real `accelpool-agent` process (fake backend) per pod,
  configured from the pod's env, reported Running and Ready in the pod's status; stopped when its
  pod goes (a changed DaemonSet's pods are replaced by the controller, so its agents restart with the
  new config), and restarted with `--fault` when the node carries the demo's fault annotation. A
  node whose pod could not be created (the controller's FailedCreate) runs no agent.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accelpool_api import conventions
from accelpool_core import catalog
from accelpool_core.kube import ApiError, GoneError, KubeClient
from accelpool_demo import nvidia
from accelpool_demo.injection import agent_fault_argument

log = logging.getLogger("accelpool_demo")

FAULT_ANNOTATION = "accelpool.io/demo-fault"
"""`accelpool demo inject NODE xid=79` sets it; the simulated kubelet restarts that node's agent."""
MIG_FAULT_ANNOTATION = "accelpool.io/demo-mig-fault"
"""`accelpool demo inject NODE mig-broken` sets it to `broken`: the MIG manager reports success and creates nothing."""
GPU_OPERATOR_CONFIG_MAP = "accelpool-demo-gpu-operator"
"""Stands in for the GPU Operator's ClusterPolicy: `MIG_STRATEGY` is its `spec.mig.strategy` (the env it sets
on the device plugin and GFD); `accelpool demo inject NODE strategy-override=single` writes it."""
MIG_STRATEGY_KEY = "MIG_STRATEGY"
DEMO_INSTALLATION = nvidia.Installation(
    strategy_override=None,
    default_config=conventions.DEFAULT_DEVICE_PLUGIN_KEY,
    fallback="empty",
    propagation_seconds=3.0,
    apply_seconds=1.0,
    restart_seconds=5.0,
)
"""The GPU Operator's wiring as accelpool's install guide sets it up (no cluster-wide MIG strategy;
`devicePlugin.config.default: default`, so a node without `nvidia.com/device-plugin.config` runs accelpool's
`default` key), with a ConfigMap sync delay of seconds where real kubelets take up to a minute."""
POLL_SECONDS = 0.5


def _labels(node: dict[str, Any]) -> dict[str, str]:
    labels: dict[str, str] = node.get("metadata", {}).get("labels") or {}
    return labels


async def follow(
    client: KubeClient,
    collection: str,
    on_list: Callable[[list[dict[str, Any]]], None],
    on_event: Callable[[str, dict[str, Any]], None],
) -> None:
    """Follow a collection as an informer does: `on_list` with its objects after each list (at the start, and
    after a 410 Gone: what came between is lost), `on_event` with each watch event's type and object."""
    after: str | None = None
    while True:
        try:
            if after is None:
                listed = await client.request("GET", collection)
                on_list(list(listed.get("items") or []))
                after = str(listed["metadata"]["resourceVersion"])
            async for event in client.watch(collection, resource_version=after, timeout_seconds=60):
                obj: dict[str, Any] = event["object"]
                after = str(obj["metadata"]["resourceVersion"])
                if event["type"] in ("ADDED", "MODIFIED", "DELETED"):
                    on_event(str(event["type"]), obj)
        except GoneError:
            after = None
        except (ApiError, OSError) as error:
            log.warning("watch of %s: %s", collection, error)
            await asyncio.sleep(POLL_SECONDS)


@dataclass
class LabelHistory:
    """Every value one node label took, from a watch of the nodes: what an informer's UpdateFunc is handed.

    NVIDIA's MIG manager follows `nvidia.com/mig.config` with an informer, which sees each watch event
    (`accelpool_demo.nvidia.MigManager`), while the components here step every `POLL_SECONDS` from a list of
    the nodes: a value that came and went between two lists (a label taken off and put back) is in the
    history. After a 410 the watch lists again and what came between is lost, as an informer's relist loses it.
    """

    label: str
    _values: dict[str, list[tuple[int, str | None]]] = field(default_factory=dict)

    def event(self, kind: str, node: dict[str, Any]) -> None:
        metadata = node["metadata"]
        if kind != "DELETED":
            value = (metadata.get("labels") or {}).get(self.label)
            self._values.setdefault(str(metadata["name"]), []).append((int(metadata["resourceVersion"]), value))

    def take(self, node: str, version: str) -> list[str | None]:
        """The values of `node`'s events up to its resourceVersion `version` (as just listed), oldest first; each
        is handed over once."""
        values = self._values.pop(node, [])
        later = [(v, value) for v, value in values if v > int(version)]
        if later:
            self._values[node] = later
        return [value for v, value in values if v <= int(version)]


@dataclass
class NvidiaComponents:
    """Drives `accelpool_demo.nvidia.Simulation` against the API: NVIDIA's GFD, device plugin, config-manager
    sidecar and MIG manager on every NVIDIA node, reading the operator's two ConfigMaps.

    Two watches run beside the steps, as the real components' informers do: one of the two ConfigMaps, which
    the kubelet watches (its ConfigMap manager's default `Watch` change-detection strategy), so the projection
    delay counts from when a ConfigMap was written, not from the next step; and one of the nodes, which hands
    the MIG manager every value its node's `nvidia.com/mig.config` took between two steps (`LabelHistory`)."""

    client: KubeClient
    namespace: str
    device_plugin_config_map: str
    mig_config_map: str
    simulation: nvidia.Simulation = field(default_factory=lambda: nvidia.Simulation(DEMO_INSTALLATION))
    clock: Callable[[], float] = time.monotonic
    _events: itertools.count[int] = field(default_factory=itertools.count)
    _mig_labels: LabelHistory = field(default_factory=lambda: LabelHistory(conventions.MIG_CONFIG_LABEL))
    _config_maps: dict[str, dict[str, str] | None] = field(default_factory=dict)

    async def run(self) -> None:
        async with self.watching():
            while True:
                try:
                    await self.step()
                except (ApiError, OSError) as error:
                    log.warning("nvidia components: %s", error)
                await asyncio.sleep(POLL_SECONDS)

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """The two watches, for as long as the block runs (`run` steps inside it; a test may call `step`)."""
        configmaps = f"/api/v1/namespaces/{self.namespace}/configmaps"
        watches = [
            asyncio.create_task(follow(self.client, configmaps, self._configmaps_listed, self._configmap_event)),
            asyncio.create_task(follow(self.client, "/api/v1/nodes", lambda _: None, self._mig_labels.event)),
        ]
        try:
            yield
        finally:
            for watch in watches:
                watch.cancel()
            await asyncio.gather(*watches, return_exceptions=True)

    def _configmaps_listed(self, items: list[dict[str, Any]]) -> None:
        listed = {str(item["metadata"]["name"]): item for item in items}
        for name in (self.device_plugin_config_map, self.mig_config_map):
            self._config_maps[name] = _data(listed.get(name))
        self._observe()

    def _configmap_event(self, kind: str, config_map: dict[str, Any]) -> None:
        name = str(config_map["metadata"]["name"])
        if name in (self.device_plugin_config_map, self.mig_config_map):
            self._config_maps[name] = None if kind == "DELETED" else _data(config_map)
            self._observe()

    def _observe(self) -> None:
        self.simulation.observe(
            self._config_maps.get(self.device_plugin_config_map),
            self._config_maps.get(self.mig_config_map),
            self.clock(),
        )

    async def step(self) -> None:
        now = self.clock()
        base = f"/api/v1/namespaces/{self.namespace}/configmaps"
        policy = await self.client.get_or_none(f"{base}/{GPU_OPERATOR_CONFIG_MAP}")
        override = ((policy or {}).get("data") or {}).get(MIG_STRATEGY_KEY) or None
        self.simulation.set_strategy_override(override if override in ("single", "mixed") else None, now)
        for node in await self.client.list("/api/v1/nodes"):
            name = node["metadata"]["name"]
            broken = (node["metadata"].get("annotations") or {}).get(MIG_FAULT_ANNOTATION) == "broken"
            history = self._mig_labels.take(name, node["metadata"]["resourceVersion"])
            changes = self.simulation.node(node, now, broken=broken, mig_labels=history)
            if changes.labels:
                await self.client.patch(f"/api/v1/nodes/{name}", {"metadata": {"labels": changes.labels}})
            if changes.resources:
                status = {"capacity": changes.resources, "allocatable": changes.resources}
                await self.client.patch(f"/api/v1/nodes/{name}/status", {"status": status})
            for message in changes.events:
                await self._event(name, message)

    async def _event(self, node: str, message: str) -> None:
        """Log it, and record it as a Warning or Normal Event on the node (`kubectl get events`)."""
        log.info("%s: %s", node, message)
        warning = "failed" in message or "exited" in message
        await self.client.create(
            "/api/v1/namespaces/default/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{node}.nvidia.{next(self._events)}", "namespace": "default"},
                "involvedObject": {"kind": "Node", "name": node, "apiVersion": "v1"},
                "reason": "NvidiaComponents",
                "message": message,
                "type": "Warning" if warning else "Normal",
                "source": {"component": "nvidia-simulation", "host": node},
            },
        )


def _data(config_map: dict[str, Any] | None) -> dict[str, str] | None:
    return None if config_map is None else {str(k): str(v) for k, v in (config_map.get("data") or {}).items()}


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
    pod: str = ""


@dataclass
class Kubelet:
    """Runs one real agent process (fake backend) per agent pod bound to a node, keyed by node."""

    client: KubeClient
    server: str
    namespace: str
    log_dir: Path
    agents: dict[str, AgentProcess] = field(default_factory=dict)
    _reported: set[str] = field(default_factory=set)
    """Pods whose Running/Ready status this kubelet has written."""

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
        pods = await self.client.list(f"/api/v1/namespaces/{self.namespace}/pods")
        nodes = {n["metadata"]["name"]: n for n in await self.client.list("/api/v1/nodes")}
        wanted: dict[str, tuple[str, str, str | None]] = {}
        for item in sorted(pods, key=lambda p: str(p["metadata"]["name"])):
            node_name = str((item.get("spec") or {}).get("nodeName") or "")
            if node_name not in nodes or node_name in wanted or item["metadata"].get("deletionTimestamp"):
                continue
            fault = (nodes[node_name]["metadata"].get("annotations") or {}).get(FAULT_ANNOTATION)
            wanted[node_name] = (str(item["metadata"]["name"]), _agent_config(item.get("spec") or {}), fault)
        for name in list(self.agents):
            agent = self.agents[name]
            if (
                name not in wanted
                or wanted[name] != (agent.pod, agent.config, agent.fault)
                or agent.process.returncode is not None
            ):
                await self._stop(name)
        started = False
        for name, (pod, config, fault) in wanted.items():
            if name not in self.agents:
                self.agents[name] = await self._start(name, nodes[name], config, fault, pod)
                started = True
            if pod not in self._reported:
                await self._report_running(pod)
        self._reported &= {pod for pod, _, _ in wanted.values()}
        if started or len(self.agents) != len(wanted):
            listing = "".join(f"{a.node}  http://127.0.0.1:{a.port}/metrics\n" for a in self.agents.values())
            (self.log_dir / "agents.txt").write_text(listing)

    async def _report_running(self, pod: str) -> None:
        """The pod's status as the kubelet writes it once its container runs and its readinessProbe passes."""
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        conditions = [
            {"type": kind, "status": "True", "lastTransitionTime": now}
            for kind in ("PodScheduled", "Initialized", "ContainersReady", "Ready")
        ]
        status = {
            "phase": "Running",
            "conditions": conditions,
            "containerStatuses": [
                {
                    "name": "agent",
                    "ready": True,
                    "started": True,
                    "restartCount": 0,
                    "state": {"running": {"startedAt": now}},
                }
            ],
        }
        try:
            await self.client.patch(f"/api/v1/namespaces/{self.namespace}/pods/{pod}/status", {"status": status})
        except ApiError as error:
            log.info("kubelet: pod %s: %s", pod, error)
            return
        self._reported.add(pod)

    async def _start(
        self, node_name: str, node: dict[str, Any], config: str, fault: str | None, pod: str = ""
    ) -> AgentProcess:
        port = free_port()
        model, count = fake_gpus(node)
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
            command += ["--fault", agent_fault_argument(fault)]
        env = {**os.environ, "ACCELPOOL_AGENT_CONFIG": config, "NODE_NAME": node_name, "POD_NAME": pod or node_name}
        log_file = (self.log_dir / f"agent-{node_name}.log").open("ab")
        process = await asyncio.create_subprocess_exec(*command, env=env, stdout=log_file, stderr=log_file)
        log_file.close()
        return AgentProcess(node=node_name, port=port, fault=fault, config=config, process=process, pod=pod)

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


def fake_gpus(node: dict[str, Any]) -> tuple[str, int]:
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
