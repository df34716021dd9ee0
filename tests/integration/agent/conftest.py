"""The kmock Kubernetes emulator, taught one rule of the real API server that the reporter relies on.

The emulator merges patches as plain JSON (lists are replaced). A real API server applies a
strategic-merge patch to `status.conditions` by condition `type`, which is why the agent can send
only its own condition without erasing the kubelet's, and refuses a JSON patch whose `test` fails
with 422 (kmock: 500). `StrategicNodeEmulator` emulates exactly that (and nothing more), so the
tests can check that the kubelet's `Ready` condition survives.
"""

from __future__ import annotations

from typing import Any

import kmock
import pytest

from accelpool_core.kube import Credentials, KubeClient
from accelpool_demo.apiserver import check_json_patch


class StrategicNodeEmulator(kmock.KubernetesEmulator):
    async def _handle(self, request: Any) -> Any:
        if request.method == "PATCH" and isinstance(request.data, list) and request.resource is not None:
            check_json_patch(self.objects[request.resource, None, request.name].raw, request.data)
        content_type = request.headers.get("Content-Type", "")
        resource = request.resource
        data = request.data if isinstance(request.data, dict) else {}
        conditions = (data.get("status") or {}).get("conditions")
        merged: list[dict[str, Any]] | None = None
        if (
            request.method == "PATCH"
            and "strategic-merge-patch" in content_type
            and resource is not None
            and resource.plural == "nodes"
            and request.name
            and conditions is not None
        ):
            stored = self.objects[resource, None, request.name].raw
            by_type = {c.get("type"): dict(c) for c in (stored.get("status") or {}).get("conditions") or []}
            for condition in conditions:
                by_type[condition.get("type")] = {**by_type.get(condition.get("type"), {}), **condition}
            merged = list(by_type.values())
        response = await super()._handle(request)  # stores the patch as plain JSON: conditions replaced
        if merged is not None:
            self.objects[resource, None, request.name].patch({"status": {"conditions": merged}})
        return response


NODE = "gpu-a1"


def node_object(name: str = NODE, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"accelpool.io/pool": "llm-training"},
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
            **extra.get("metadata", {}),
        },
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": "2025-12-31T23:59:00Z",
                    "lastTransitionTime": "2025-12-01T00:00:00Z",
                },
                *extra.get("conditions", []),
            ]
        },
    }


@pytest.fixture
def cluster(kmock: kmock.KubernetesEmulator) -> kmock.KubernetesEmulator:
    kmock.resources["v1/nodes"] = kmock.ResourceInfo(kind="Node", namespaced=False)
    kmock.objects["v1/nodes", None, NODE] = node_object()
    return kmock


@pytest.fixture
async def client(cluster: kmock.KubernetesEmulator) -> Any:
    async with KubeClient(Credentials(server=str(cluster.url).rstrip("/"))) as api:
        yield api
