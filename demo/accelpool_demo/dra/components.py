"""The drivers of `accelpool_demo.dra`: NVIDIA's DRA kubelet plugin on every node, and kube-scheduler with
kube-controller-manager's resourceclaim controller, talking to the API server over HTTP. Thin: they list,
call the pure cores, and send what those decide.

- `DraNodeComponents` steps `nodes.KubeletPlugins` for every node (the GPUs and MIG layout the NVIDIA
  simulation says the node has now) and writes each node's ResourceSlice (`nodes.reconcile`). With
  `plugin_namespace` it also keeps the chart's kubelet-plugin DaemonSet pods there, one per node the plugin
  runs on (`plugin_pod`), and a pod deleted (as accelpool's operator does after a static-MIG change) is a
  plugin restarted: rediscovery, no taints. A new value of the node annotation
  `accelpool.io/demo-dra-plugin-restart` restarts it too. The XIDs of the demo's agent-fault annotation
  (`accelpool demo inject NODE xid=79`) reach its health monitor once per value (NVML's events are
  edges: clearing the fault does not clear the taint, only a restart does).
- `DraScheduler` runs, at each step, the resourceclaim controller (claims made from templates and
  recorded in the pods' `status.resourceClaimStatuses`, the Warning Event `FailedResourceClaimCreation`;
  claims released and deallocated when their pods are gone or done, generated ones deleted) and then
  the scheduler for every pod it should place (oldest first): claim finalizer and status
  (allocation, reservedFor), the pod bound (`spec.nodeName`: the emulator has no `pods/binding`; a merge
  patch does what a Binding does) with its PodScheduled condition and the Normal Event `Scheduled`; or
  the PodScheduled condition False/Unschedulable and the Warning Event `FailedScheduling`, written again
  only when the message changes. `honour_device_taint_rules` is the scheduler's DRADeviceTaintRules gate
  (on, as from 1.37; off, as the recorded 1.36 scheduler), `rules_path` where it lists the rules
  (`/apis/resource.k8s.io/v1/devicetaintrules` from 1.37, `v1beta2` on 1.36 with the gate); a server that
  does not serve them (404) has none.

Both take the pure cores' objects for tests to drive (`plugins`, `Pending`) and `step()` for a test to call
between its own writes; `run()` steps every `POLL_SECONDS`. Started by `accelpool_demo.run` beside the
NVIDIA components.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accelpool_agent.faults import FaultKind, FaultSpecError, faults_by_gpu, find, parse_fault_spec
from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError
from accelpool_demo import nvidia
from accelpool_demo.dra import claims as claim_controller
from accelpool_demo.dra.nodes import KubeletPlugins, node_slices, reconcile
from accelpool_demo.dra.scheduler import (
    SCHEDULER_NAME,
    Bound,
    ClaimUpdate,
    Cluster,
    Pending,
    Unschedulable,
    schedule,
    wants_scheduling,
)
from accelpool_demo.injection import agent_fault_argument

log = logging.getLogger("accelpool_demo.dra")

RESOURCE_API = "/apis/resource.k8s.io/v1"
SLICES = f"{RESOURCE_API}/resourceslices"
RESTART_ANNOTATION = "accelpool.io/demo-dra-plugin-restart"
"""A new value restarts the node's DRA kubelet plugin (the demo's stand-in for deleting its pod)."""
SCHEDULER_USER_AGENT = "kube-scheduler/v1.36.0 (linux/amd64) kubernetes/scheduler"
CHART = "dra-driver-nvidia-gpu"
PLUGIN_DAEMONSET = f"{CHART}-kubelet-plugin"
PLUGIN_COMPONENT_LABEL = f"{CHART}-component"
PLUGIN_COMPONENT = "kubelet-plugin"
PLUGIN_IMAGE = "registry.k8s.io/dra-driver-nvidia/dra-driver-nvidia-gpu:v0.4.1"
POLL_SECONDS = 0.5


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name"))


def _namespace(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("namespace") or "")


async def _list_or_none(client: KubeClient, path: str) -> list[dict[str, Any]] | None:
    """A list; None where the server does not serve the resource (no DRA on it, or not that version)."""
    try:
        return await client.list(path)
    except NotFoundError:
        return None


async def _list_or_empty(client: KubeClient, path: str) -> list[dict[str, Any]]:
    return await _list_or_none(client, path) or []


def _xids(annotation: str | None, gpu_count: int) -> list[tuple[int, int]]:
    """(GPU index, XID) of every `xid=<n>` fault in the demo's agent-fault annotation; none for anything else."""
    if not annotation:
        return []
    try:
        by_gpu = faults_by_gpu([parse_fault_spec(agent_fault_argument(annotation))], gpu_count)
    except FaultSpecError:
        return []
    return [(index, int(f.value or 0)) for index, faults in by_gpu.items() for f in find(faults, FaultKind.XID)]


@dataclass
class DraNodeComponents:
    """NVIDIA's DRA kubelet plugin on every node (`nodes.KubeletPlugins`), writing the nodes' ResourceSlices."""

    client: KubeClient
    simulation: nvidia.Simulation | None = None
    """The NVIDIA components' simulation, whose per-node GPUs carry the MIG layouts the MIG manager applied."""
    plugins: KubeletPlugins = field(default_factory=KubeletPlugins)
    fault_annotation: str | None = None
    """The node annotation whose agent faults the GPUs have (`accelpool_demo.simulators.FAULT_ANNOTATION`)."""
    plugin_namespace: str | None = None
    """Where NVIDIA's chart runs its kubelet-plugin DaemonSet: its pods are kept there, one per plugin, and a pod
    deleted is a plugin restarted (None: no pods, restarts only by `RESTART_ANNOTATION`)."""
    _restarts: dict[str, str | None] = field(default_factory=dict)
    _pods: dict[str, str] = field(default_factory=dict)
    """Node → the uid of its plugin pod, as last seen."""
    _faults: dict[str, str | None] = field(default_factory=dict)

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except (ApiError, OSError) as error:
                log.warning("dra kubelet plugins: %s", error)
            await asyncio.sleep(POLL_SECONDS)

    def gpus(self, node: Mapping[str, Any]) -> tuple[nvidia.Gpu, ...] | None:
        """The node's GPUs now: the NVIDIA simulation's (with their MIG layout), else as its labels say."""
        name = _name(node)
        if self.simulation is not None and name in self.simulation.nodes:
            return self.simulation.nodes[name].gpus
        metadata = node.get("metadata") or {}
        return nvidia.inventory(metadata.get("labels") or {}, (node.get("status") or {}).get("capacity") or {})

    async def step(self) -> None:
        slices = await _list_or_none(self.client, SLICES)
        if slices is None:
            return  # the server has no DRA: no plugin can register
        nodes = await self.client.list("/api/v1/nodes")
        pods: dict[str, Mapping[str, Any]] = {}
        if self.plugin_namespace is not None:
            path = f"/api/v1/namespaces/{self.plugin_namespace}/pods"
            for pod in await self.client.list(path, label_selector=f"{PLUGIN_COMPONENT_LABEL}={PLUGIN_COMPONENT}"):
                if not (pod.get("metadata") or {}).get("deletionTimestamp"):
                    pods[str((pod.get("spec") or {}).get("nodeName"))] = pod
        for node in nodes:
            await self._node(node, slices, pods.get(_name(node)))

    async def _node(
        self, node: Mapping[str, Any], slices: Sequence[Mapping[str, Any]], pod: Mapping[str, Any] | None
    ) -> None:
        metadata = node.get("metadata") or {}
        name, annotations = _name(node), metadata.get("annotations") or {}
        gpus = self.gpus(node)
        devices = self.plugins.node(name, metadata.get("labels") or {}, gpus)
        restart = annotations.get(RESTART_ANNOTATION)
        restarted = name in self._restarts and self._restarts[name] != restart
        self._restarts[name] = restart
        if self.plugin_namespace is not None:
            restarted |= await self._plugin_pod(name, devices is not None, pod)
        if restarted and gpus and self.plugins.restart(name, gpus):
            log.info("%s: the DRA kubelet plugin restarted", name)
        fault = annotations.get(self.fault_annotation) if self.fault_annotation else None
        if devices is not None and self._faults.get(name) != fault:
            for index, code in _xids(fault, len(gpus or ())):
                if self.plugins.xid(name, index, code):
                    log.info("%s: XID %d on GPU %d: the DRA kubelet plugin taints its device", name, code, index)
        self._faults[name] = fault if devices is not None else None
        if devices is not None:
            devices = self.plugins.plugins[name].devices()
        for write in reconcile(name, str(metadata.get("uid", "")), devices, node_slices(slices, name)):
            if write.method == "POST":
                await self.client.create(SLICES, dict(write.body or {}))
            elif write.method == "PUT":
                try:
                    await self.client.replace(f"{SLICES}/{write.name}", dict(write.body or {}))
                except ConflictError:
                    log.info("%s: ResourceSlice %s changed meanwhile: written at the next step", name, write.name)
            else:
                await self.client.delete(f"{SLICES}/{write.name}")

    async def _plugin_pod(self, node: str, running: bool, pod: Mapping[str, Any] | None) -> bool:
        """The kubelet-plugin DaemonSet's pod on the node: created where the plugin runs (and reported Running,
        as its kubelet would), deleted where it no longer does. True when the node's pod was replaced since the
        last step (deleted, by accelpool's operator after a static-MIG change, say): a new plugin process."""
        path = f"/api/v1/namespaces/{self.plugin_namespace}/pods"
        known = self._pods.get(node)
        if not running:
            self._pods.pop(node, None)
            if pod is not None:
                await self.client.delete(f"{path}/{_name(pod)}")
            return False
        if pod is None:
            created = await self.client.create(path, plugin_pod(node, str(self.plugin_namespace)))
            status = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
            await self.client.patch(f"{path}/{_name(created)}/status", {"status": status})
            self._pods[node] = str(created["metadata"]["uid"])
            return known is not None
        uid = str((pod.get("metadata") or {}).get("uid"))
        self._pods[node] = uid
        return known is not None and known != uid


def plugin_pod(node: str, namespace: str) -> dict[str, Any]:
    """A pod of NVIDIA's chart's kubelet-plugin DaemonSet (`deployments/helm/dra-driver-nvidia-gpu/templates/
    kubeletplugin.yaml`: `<chart>-kubelet-plugin`, the chart's template and selector labels) on one node."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "generateName": f"{PLUGIN_DAEMONSET}-",
            "namespace": namespace,
            "labels": {
                "app.kubernetes.io/name": CHART,
                "app.kubernetes.io/instance": CHART,
                PLUGIN_COMPONENT_LABEL: PLUGIN_COMPONENT,
            },
        },
        "spec": {
            "nodeName": node,
            "containers": [{"name": "gpus", "image": PLUGIN_IMAGE}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


@dataclass
class DraScheduler:
    """kube-scheduler's DRA path and the resourceclaim controller, against the API."""

    client: KubeClient
    honour_device_taint_rules: bool = True
    rules_path: str = f"{RESOURCE_API}/devicetaintrules"
    clock: Callable[[], str] = _now
    """The time written into allocations, conditions and events."""
    pending: Pending = field(default_factory=Pending)
    _events: itertools.count[int] = field(default_factory=itertools.count)

    async def run(self) -> None:
        while True:
            try:
                await self.step()
            except (ApiError, OSError) as error:
                log.warning("dra scheduler: %s", error)
            await asyncio.sleep(POLL_SECONDS)

    async def step(self) -> None:
        found = await _list_or_none(self.client, f"{RESOURCE_API}/resourceclaims")
        if found is None:
            return  # the server has no DRA: nothing to allocate
        claims = found
        pods = await self.client.list("/api/v1/pods")
        if await self._controller(pods, claims):
            pods = await self.client.list("/api/v1/pods")
            claims = await _list_or_empty(self.client, f"{RESOURCE_API}/resourceclaims")
        nodes = await self.client.list("/api/v1/nodes")
        classes = {_name(c): c for c in await _list_or_empty(self.client, f"{RESOURCE_API}/deviceclasses")}
        slices = await _list_or_empty(self.client, SLICES)
        rules = await _list_or_empty(self.client, self.rules_path) if self.honour_device_taint_rules else []
        waiting = sorted(
            (p for p in pods if wants_scheduling(p)),
            key=lambda p: (str((p.get("metadata") or {}).get("creationTimestamp", "")), _namespace(p), _name(p)),
        )
        self.pending.forget({f"{_namespace(p)}/{_name(p)}" for p in waiting})
        by_key = {(_namespace(c), _name(c)): c for c in claims}
        for pod in waiting:
            cluster = Cluster(nodes, pods, list(by_key.values()), classes, slices, rules)
            outcome = schedule(pod, cluster, honour_rules=self.honour_device_taint_rules, now=self.clock())
            if isinstance(outcome, Bound):
                for update in outcome.claims:
                    by_key[(update.namespace, update.name)] = await self._write_claim(update)
                bound = await self._bind(pod, outcome)
                pods = [bound if p is pod else p for p in pods]
            elif isinstance(outcome, Unschedulable):
                for update in outcome.claims:
                    by_key[(update.namespace, update.name)] = await self._write_claim(update)
                if self.pending.changed(f"{_namespace(pod)}/{_name(pod)}", outcome.message):
                    await self._unschedulable(pod, outcome.message)

    # ---------------------------------------------------------------- the resourceclaim controller

    async def _controller(self, pods: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]]) -> bool:
        """One pass of the resourceclaim controller; True when it wrote something."""
        wrote = False
        templates_by_namespace: dict[str, dict[str, Mapping[str, Any]]] = {}
        for pod in pods:
            if not (pod.get("spec") or {}).get("resourceClaims"):
                continue
            namespace = _namespace(pod)
            if namespace not in templates_by_namespace:
                path = f"{RESOURCE_API}/namespaces/{namespace}/resourceclaimtemplates"
                templates_by_namespace[namespace] = {_name(t): t for t in await _list_or_empty(self.client, path)}
            made = claim_controller.pod_claims_to_create(
                pod, templates_by_namespace[namespace], claim_controller.claims_by_name(claims, namespace)
            )
            created: dict[str, str] = {}
            for entry, body in made.create.items():
                stored = await self.client.create(f"{RESOURCE_API}/namespaces/{namespace}/resourceclaims", body)
                created[entry] = _name(stored)
            for failure in made.failures:
                await self._event(pod, "Warning", "FailedResourceClaimCreation", failure, "resource_claim")
            statuses = made.statuses(pod, created)
            if statuses is not None:
                status = {"status": {"resourceClaimStatuses": statuses}}
                await self.client.patch(f"/api/v1/namespaces/{namespace}/pods/{_name(pod)}/status", status)
                wrote = True
        pods_by_namespace: dict[str, dict[str, Mapping[str, Any]]] = {}
        for pod in pods:
            pods_by_namespace.setdefault(_namespace(pod), {})[_name(pod)] = pod
        for claim in claims:
            release = claim_controller.claim_release(claim, pods_by_namespace.get(_namespace(claim), {}))
            if release:
                await self._release(claim, release)
                wrote = True
        return wrote

    async def _release(self, claim: Mapping[str, Any], release: claim_controller.ClaimRelease) -> None:
        path = f"{RESOURCE_API}/namespaces/{_namespace(claim)}/resourceclaims/{_name(claim)}"
        try:
            if release.reserved_for is not None or release.deallocate:
                status: dict[str, Any] = {}
                if release.reserved_for is not None:
                    status["reservedFor"] = release.reserved_for or None
                if release.deallocate:
                    status["allocation"] = None
                await self.client.patch(f"{path}/status", {"status": status})
            if release.finalizers is not None:
                await self.client.patch(path, {"metadata": {"finalizers": release.finalizers or None}})
            if release.delete:
                await self.client.delete(path)
        except (ConflictError, NotFoundError) as error:
            log.info(
                "claim %s/%s changed meanwhile (%s): released at the next step", _namespace(claim), _name(claim), error
            )

    # ---------------------------------------------------------------- the scheduler's writes

    async def _write_claim(self, update: ClaimUpdate) -> dict[str, Any]:
        """PreBind: the finalizer first (a claim must not be deleted while allocated), then the status."""
        path = f"{RESOURCE_API}/namespaces/{update.namespace}/resourceclaims/{update.name}"
        version = update.resource_version
        if update.finalizers is not None:
            stored = await self.client.patch(
                path, {"metadata": {"resourceVersion": version, "finalizers": update.finalizers}}
            )
            version = str(stored["metadata"]["resourceVersion"])
        status = {"allocation": None, "reservedFor": None, **update.status}
        return await self.client.patch(f"{path}/status", {"metadata": {"resourceVersion": version}, "status": status})

    async def _bind(self, pod: Mapping[str, Any], outcome: Bound) -> dict[str, Any]:
        namespace, name = _namespace(pod), _name(pod)
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        bound = await self.client.patch(path, {"spec": {"nodeName": outcome.node}})
        condition = {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": self.clock(),
        }
        await self.client.patch(f"{path}/status", {"status": {"conditions": [condition]}}, patch_type="strategic")
        await self._event(pod, "Normal", "Scheduled", outcome.message, SCHEDULER_NAME)
        log.info("%s", outcome.message)
        return bound

    async def _unschedulable(self, pod: Mapping[str, Any], message: str) -> None:
        condition = {
            "type": "PodScheduled",
            "observedGeneration": int((pod.get("metadata") or {}).get("generation") or 1),
            "status": "False",
            "lastProbeTime": None,
            "lastTransitionTime": self.clock(),
            "reason": "Unschedulable",
            "message": message,
        }
        path = f"/api/v1/namespaces/{_namespace(pod)}/pods/{_name(pod)}/status"
        try:
            await self.client.patch(path, {"status": {"conditions": [condition]}}, patch_type="strategic")
        except NotFoundError:
            return
        await self._event(pod, "Warning", "FailedScheduling", message, SCHEDULER_NAME)
        log.info("%s/%s: %s", _namespace(pod), _name(pod), message)

    async def _event(self, pod: Mapping[str, Any], kind: str, reason: str, message: str, component: str) -> None:
        """kube-scheduler records through events.k8s.io/v1 (pkg/scheduler/schedule_one.go: action `Scheduling`
        or `Binding`); kube-controller-manager's resourceclaim controller through a core/v1 recorder."""
        metadata = pod.get("metadata") or {}
        namespace = _namespace(pod)
        regarding = {
            "kind": "Pod",
            "namespace": namespace,
            "name": _name(pod),
            "uid": metadata.get("uid"),
            "apiVersion": "v1",
        }
        name = f"{_name(pod)}.dra.{next(self._events)}"
        if component == SCHEDULER_NAME:
            await self.client.create(
                f"/apis/events.k8s.io/v1/namespaces/{namespace}/events",
                {
                    "apiVersion": "events.k8s.io/v1",
                    "kind": "Event",
                    "metadata": {"name": name, "namespace": namespace},
                    "eventTime": self.clock().replace("Z", ".000000Z"),
                    "reportingController": SCHEDULER_NAME,
                    "reportingInstance": f"{SCHEDULER_NAME}-demo",
                    "action": "Binding" if reason == "Scheduled" else "Scheduling",
                    "reason": reason,
                    "regarding": regarding,
                    "note": message,
                    "type": kind,
                },
            )
            return
        await self.client.create(
            f"/api/v1/namespaces/{namespace}/events",
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": name, "namespace": namespace},
                "involvedObject": regarding,
                "reason": reason,
                "message": message,
                "type": kind,
                "source": {"component": component},
            },
        )
