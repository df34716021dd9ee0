"""The demo's API server: the kmock Kubernetes emulator, served over HTTP, with what kubectl needs.

kmock stores and streams objects like an API server; this subclass adds the discovery details
kubectl relies on (a core groupVersion of `v1`, list kinds, short names only on resources) and
server-side printing (`kubectl get cpool` shows the CRD's printer columns). Everything else —
the operator's and agents' reads, writes and watches — is kmock's own behaviour.
"""

from __future__ import annotations

import datetime
import itertools
import uuid
from typing import Any

import attrs
import kmock
from kmock._internal import rendering  # the request type kmock hands to its serving hooks

from accelpool import api, crd

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
RESOURCES: dict[str, kmock.ResourceInfo] = {
    "v1/namespaces": kmock.ResourceInfo(kind="Namespace", singular="namespace", namespaced=False, shortnames={"ns"}),
    "v1/nodes": kmock.ResourceInfo(
        kind="Node", singular="node", namespaced=False, shortnames={"no"}, subresources={"status"}
    ),
    "v1/events": kmock.ResourceInfo(kind="Event", singular="event", namespaced=True, shortnames={"ev"}),
    "v1/configmaps": kmock.ResourceInfo(kind="ConfigMap", singular="configmap", namespaced=True, shortnames={"cm"}),
    "apps/v1/daemonsets": kmock.ResourceInfo(
        kind="DaemonSet", singular="daemonset", namespaced=True, shortnames={"ds"}
    ),
    "apiextensions.k8s.io/v1/customresourcedefinitions": kmock.ResourceInfo(
        kind="CustomResourceDefinition", singular="customresourcedefinition", namespaced=False, shortnames={"crd"}
    ),
    f"{api.GROUP}/{api.VERSION}/{api.PLURAL}": kmock.ResourceInfo(
        kind=api.KIND,
        singular=api.SINGULAR,
        namespaced=False,
        shortnames=set(api.SHORT_NAMES),
        categories=set(api.CATEGORIES),
        subresources={"status"},
    ),
}
"""Every resource accelpool reads or writes, as the emulator must declare them for discovery and
watches (the demo, the operator's integration tests and the convergence benchmark share it)."""
for _info in RESOURCES.values():
    _info.verbs.update(VERBS)


def register_resources(emulator: kmock.KubernetesEmulator) -> None:
    """Declare every resource accelpool reads or writes, so discovery and watches work."""
    for key, info in RESOURCES.items():
        emulator.resources[key] = info


def _json_path(obj: Any, path: str) -> Any:
    for part in path.lstrip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = int((datetime.datetime.now(datetime.UTC) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


@attrs.define(kw_only=True)
class DemoApiServer(kmock.KubernetesEmulator):
    """kmock's emulator with kubectl-friendly discovery, list kinds and ComputePool tables."""

    _versions: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        register_resources(self)

    async def _handle(self, request: rendering.Request) -> Any:
        """Stamp what a real API server sets on creation (uid, creationTimestamp, generation), and
        merge `status.conditions` by type on strategic-merge patches, as the API server does for
        nodes (kmock replaces lists whole, which would drop the kubelet's Ready condition)."""
        if (
            request.action == kmock.action.UPDATE
            and "strategic-merge-patch" in request.headers.get("Content-Type", "")
            and isinstance(request.data, dict)
            and isinstance(request.data.get("status"), dict)
            and "conditions" in request.data["status"]
        ):
            assert request.resource is not None and request.name is not None
            key = (request.resource, request.namespace, request.name)
            current = self.objects[key].raw if key in self.objects else {}
            merged = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []}
            for condition in request.data["status"]["conditions"] or []:
                merged[condition.get("type")] = {**merged.get(condition.get("type"), {}), **condition}
            request.data["status"]["conditions"] = list(merged.values())
        if request.action == kmock.action.CREATE and isinstance(request.data, dict):
            metadata = request.data.setdefault("metadata", {})
            metadata.setdefault("uid", str(uuid.uuid4()))
            metadata.setdefault("creationTimestamp", datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
            metadata.setdefault("generation", 1)
            metadata["resourceVersion"] = str(next(self._versions))
        return await super()._handle(request)

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload: dict[str, Any] = await super()._serve_version(request)  # type: ignore[assignment]
        if payload.get("groupVersion", "").startswith("/"):
            payload["groupVersion"] = payload["groupVersion"][1:]
        for resource in payload.get("resources", []):
            if "/" in resource["name"]:  # subresources carry no short names or categories
                resource["shortNames"], resource["categories"] = [], []
        return payload

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload: dict[str, Any] = await super()._serve_list(request)  # type: ignore[assignment]
        resource = request.resource
        assert resource is not None
        info = self.resources.get(resource)
        kind = info.kind if isinstance(info, kmock.ResourceInfo) and info.kind else "Object"
        group_version = resource.version if not resource.group else f"{resource.group}/{resource.version}"
        payload = {"apiVersion": group_version, "kind": f"{kind}List", **payload}
        payload["metadata"] = {"resourceVersion": "1"}
        if resource.plural == api.PLURAL and "as=Table" in request.headers.get("Accept", ""):
            return self._pool_table(payload["items"])
        return payload

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_fetch(request)
        resource = request.resource
        if resource is not None and resource.plural == api.PLURAL and "as=Table" in request.headers.get("Accept", ""):
            assert isinstance(payload, dict)
            return self._pool_table([payload])
        return payload

    def _pool_table(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Server-side printing, as the API server does from a CRD's additionalPrinterColumns."""
        columns = crd.PRINTER_COLUMNS
        definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
        definitions += [
            {"name": c["name"], "type": c["type"], "format": "", "description": c.get("description", ""), "priority": 0}
            for c in columns
        ]
        rows = []
        for item in items:
            cells: list[Any] = [item["metadata"]["name"]]
            for column in columns:
                value = _json_path(item, column["jsonPath"])
                cells.append(_age(value) if column["type"] == "date" else ("" if value is None else value))
            rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata", "metadata": item["metadata"]}})
        return {"apiVersion": "meta.k8s.io/v1", "kind": "Table", "columnDefinitions": definitions, "rows": rows}
