"""The DaemonSet controller of a simulated cluster: pods for every node a DaemonSet selects, and its status.

Used by the demo (`accelpool_demo.run`) and by the operator's integration tests, against their API
emulators, through the API like kube-controller-manager's own controller
(pkg/controller/daemon/daemon_controller.go), whose behaviour it follows where accelpool meets it:

- `syncDaemonSet`: the nodes that should run a daemon pod (`NodeShouldRunDaemonPod`: the template's
  nodeSelector, and its tolerations plus the ones the controller adds to every daemon pod,
  pkg/controller/daemon/util/daemonset_util.go `AddOrUpdateDaemonPodTolerations`, against the node's
  NoSchedule/NoExecute taints); a pod is created for each node without one, pods on other nodes are deleted;
- pod creation: `generateName: <daemonset>-`, the template's labels plus `controller-revision-hash` and
  `pod-template-generation`, a controller ownerReference, and the node pinned (the controller sets a
  node affinity; the scheduler's binding to `spec.nodeName` is folded in here);
- a refused creation (the API server's admission: a missing ServiceAccount or RuntimeClass) is recorded
  as a Warning Event `FailedCreate`, `Error creating: <the API error>` on the DaemonSet
  (pkg/controller/controller_utils.go `RealPodControl.createPods`), and the rest of the batch is skipped
  (`slowStartBatch` starts with one pod);
- `updateDaemonSetStatus`/`storeDaemonSetStatus`: observedGeneration, desired/current/misscheduled/ready/
  updated/available/unavailable counts, written with PUT `daemonsets/<name>/status` carrying the
  resourceVersion it read (a conflict is re-read and retried once), and only when they changed.

Simplified: a template change replaces every old pod at once (the real rolling update honours
`maxUnavailable`); identical failures are folded into one Event whose `count` grows (client-go's event
correlator does this for identical events and, after ten, for similar ones); nothing retries on a timer:
`run` syncs again after each change it is told about, or every `poll_seconds`. Pods become Ready only when
whoever plays the kubelet says so (`status.conditions` Ready).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError

log = logging.getLogger("accelpool_demo.daemonsets")

USER_AGENT = "kube-controller-manager/v1.36.0 (linux/amd64) kubernetes/daemon-set-controller"
COMPONENT = "daemonset-controller"
REVISION_LABEL = "controller-revision-hash"
TEMPLATE_GENERATION_LABEL = "pod-template-generation"
FAILED_CREATE = "FailedCreate"
DAEMON_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
)
"""What the controller adds to every daemon pod (daemonset_util.go `AddOrUpdateDaemonPodTolerations`)."""
_GENERATED_POD = re.compile(r'pods "[^"]*"')


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def tolerates(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """core/v1 `Toleration.ToleratesTaint`: key (empty with Exists: any), value for Equal, effect (empty: any)."""
    for toleration in tolerations:
        effect = toleration.get("effect")
        if effect and effect != taint.get("effect"):
            continue
        key = toleration.get("key")
        operator = toleration.get("operator") or "Equal"
        if key and key != taint.get("key"):
            continue
        if not key and operator != "Exists":
            continue
        if operator == "Exists" or toleration.get("value", "") == taint.get("value", ""):
            return True
    return False


def should_run(pod_spec: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    """`NodeShouldRunDaemonPod`, for what accelpool's DaemonSets use: nodeSelector and taints."""
    labels = (node.get("metadata") or {}).get("labels") or {}
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    tolerations = [*(pod_spec.get("tolerations") or []), *DAEMON_TOLERATIONS]
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerates(tolerations, taint):
            return False
    return True


def template_hash(template: Mapping[str, Any]) -> str:
    """Stands in for the ControllerRevision hash the controller labels pods with."""
    return hashlib.sha256(json.dumps(template, sort_keys=True).encode()).hexdigest()[:10]


def pod_ready(pod: Mapping[str, Any]) -> bool:
    conditions = (pod.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


@dataclass
class _Failure:
    event: str
    message: str
    count: int


@dataclass
class DaemonSetController:
    """Syncs every DaemonSet of `namespace` (see the module docstring)."""

    client: KubeClient
    namespace: str
    _failures: dict[tuple[str, str], _Failure] = field(default_factory=dict)
    _events: int = 0

    async def run(self, wake: asyncio.Event | None = None, poll_seconds: float = 0.5) -> None:
        """Sync, then again after `wake` is set (a change the controller's informers would see) or a poll."""
        while True:
            try:
                await self.sync()
            except (ApiError, OSError) as error:
                log.warning("daemonset controller: %s", error)
            if wake is None:
                await asyncio.sleep(poll_seconds)
                continue
            # asyncio.timeout, not wait_for: on Python 3.11 wait_for can swallow a cancellation that
            # arrives as the wait completes, and the loop would never stop.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(poll_seconds):
                    await wake.wait()
            wake.clear()

    async def sync(self) -> None:
        daemonsets = await self.client.list(f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets")
        if not daemonsets:
            return
        nodes = await self.client.list("/api/v1/nodes")
        pods = await self.client.list(f"/api/v1/namespaces/{self.namespace}/pods")
        for daemonset in daemonsets:
            if not (daemonset.get("metadata") or {}).get("deletionTimestamp"):
                await self._sync_one(daemonset, nodes, pods)

    async def _sync_one(
        self, daemonset: dict[str, Any], nodes: Sequence[Mapping[str, Any]], pods: Sequence[Mapping[str, Any]]
    ) -> None:
        metadata = daemonset["metadata"]
        uid = metadata.get("uid")
        template = (daemonset.get("spec") or {}).get("template") or {}
        pod_spec = template.get("spec") or {}
        revision = template_hash(template)
        wanted = sorted(n["metadata"]["name"] for n in nodes if should_run(pod_spec, n))
        owned = [
            p
            for p in pods
            if any(ref.get("uid") == uid for ref in (p.get("metadata") or {}).get("ownerReferences") or [])
            and not (p.get("metadata") or {}).get("deletionTimestamp")
        ]
        by_node: dict[str, Mapping[str, Any]] = {}
        for pod in owned:
            node = str((pod.get("spec") or {}).get("nodeName") or "")
            current = ((pod.get("metadata") or {}).get("labels") or {}).get(REVISION_LABEL) == revision
            if node in wanted and current and node not in by_node:
                by_node[node] = pod
            else:
                await self.client.delete(f"/api/v1/namespaces/{self.namespace}/pods/{pod['metadata']['name']}")
        for node in wanted:
            if node in by_node:
                continue
            try:
                by_node[node] = await self.client.create(
                    f"/api/v1/namespaces/{self.namespace}/pods", self._pod(daemonset, template, revision, node)
                )
            except ApiError as error:
                await self._failed_create(daemonset, error)
                break  # slowStartBatch: the first failure skips the rest of the batch
        else:
            self._failures = {k: v for k, v in self._failures.items() if k[0] != uid}
        ready = sum(1 for pod in by_node.values() if pod_ready(pod))
        status = {
            "observedGeneration": metadata.get("generation", 1),
            "desiredNumberScheduled": len(wanted),
            "currentNumberScheduled": len(by_node),
            "numberMisscheduled": 0,
            "numberReady": ready,
            "updatedNumberScheduled": len(by_node),
            "numberAvailable": ready,
            "numberUnavailable": len(wanted) - ready,
        }
        await self._store_status(daemonset, status)

    def _pod(
        self, daemonset: Mapping[str, Any], template: Mapping[str, Any], revision: str, node: str
    ) -> dict[str, Any]:
        metadata = daemonset["metadata"]
        template_metadata = template.get("metadata") or {}
        spec = json.loads(json.dumps(template.get("spec") or {}))
        spec["tolerations"] = [*(spec.get("tolerations") or []), *DAEMON_TOLERATIONS]
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
                    ]
                }
            }
        }
        spec["nodeName"] = node
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "generateName": f"{metadata['name']}-",
                "namespace": self.namespace,
                "labels": {
                    **(template_metadata.get("labels") or {}),
                    REVISION_LABEL: revision,
                    TEMPLATE_GENERATION_LABEL: str(metadata.get("generation", 1)),
                },
                "annotations": dict(template_metadata.get("annotations") or {}),
                "ownerReferences": [
                    {
                        "apiVersion": "apps/v1",
                        "kind": "DaemonSet",
                        "name": metadata["name"],
                        "uid": metadata.get("uid"),
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": spec,
        }

    async def _failed_create(self, daemonset: Mapping[str, Any], error: ApiError) -> None:
        """`Error creating: <err>` as a Warning Event on the DaemonSet; a repeat bumps the Event's count."""
        metadata = daemonset["metadata"]
        message = f"Error creating: {error.message}"
        key = (str(metadata.get("uid")), _GENERATED_POD.sub('pods "-"', message))
        now = _now()
        events = f"/api/v1/namespaces/{self.namespace}/events"
        known = self._failures.get(key)
        if known is not None:
            known.count += 1
            with contextlib.suppress(NotFoundError):
                await self.client.patch(
                    f"{events}/{known.event}", {"count": known.count, "lastTimestamp": now, "message": message}
                )
                return
        self._events += 1
        event = f"{metadata['name']}.{int(datetime.now(UTC).timestamp() * 1e9):x}{self._events}"
        await self.client.create(
            events,
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": event, "namespace": self.namespace},
                "involvedObject": {
                    "apiVersion": "apps/v1",
                    "kind": "DaemonSet",
                    "name": metadata["name"],
                    "namespace": self.namespace,
                    "uid": metadata.get("uid"),
                    "resourceVersion": metadata.get("resourceVersion"),
                },
                "reason": FAILED_CREATE,
                "message": message,
                "type": "Warning",
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": "",
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            },
        )
        self._failures[key] = _Failure(event, message, 1)

    async def _store_status(self, daemonset: dict[str, Any], status: dict[str, Any]) -> None:
        """`storeDaemonSetStatus`: skipped when unchanged; PUT with the read resourceVersion, one retry on 409."""
        name = daemonset["metadata"]["name"]
        path = f"/apis/apps/v1/namespaces/{self.namespace}/daemonsets/{name}"
        for attempt in range(2):
            current = daemonset.get("status") or {}
            if all(current.get(k, 0) == v for k, v in status.items()):
                return
            try:
                await self.client.replace(f"{path}/status", {**daemonset, "status": {**current, **status}})
                return
            except ConflictError:
                if attempt:
                    raise
                daemonset = await self.client.get(path)
                status["observedGeneration"] = daemonset["metadata"].get("generation", 1)
