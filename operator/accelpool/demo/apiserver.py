"""The demo's API server: the kmock Kubernetes emulator, served over HTTP, with what kubectl needs.

kmock stores and streams objects like an API server; this subclass adds what the operator and
kubectl rely on and kmock lacks:

- writes as the API server does them: a new `resourceVersion` on every write, 409 Conflict for a
  stale one, PUT replacing an object (404 for a missing one), uid and timestamps on creation;
- a bounded footprint however long it runs: kmock keeps every request, every object version and
  every error, and finds each request's reaction by scanning all the requests it has kept, which
  made an hour-long demo quadratic and CPU-bound (too busy to shut down on Ctrl-C);
- the discovery details kubectl relies on (a core groupVersion of `v1`, list kinds, short names
  only on resources) and server-side printing (`kubectl get cpool` shows the printer columns).

Reads, patches, deletes and watches are otherwise kmock's own behaviour.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import uuid
from collections.abc import Iterator
from typing import Any

import aiohttp.web
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
        kind="DaemonSet", singular="daemonset", namespaced=True, shortnames={"ds"}, subresources={"status"}
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


ERRORS_KEPT = 100
"""The most recent failed requests the emulator keeps for debugging (kmock keeps them all)."""
VERSIONS_KEPT = 2
"""Versions kept per object: the current one, and the last one before a deletion."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _qualified(resource: kmock.resource) -> str:
    """`daemonsets.apps`, `nodes`: how the API server names a resource in its messages."""
    return f"{resource.plural}.{resource.group}" if resource.group else str(resource.plural)


def _not_found(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(404, "NotFound", f'{_qualified(resource)} "{name}" not found')


def _conflict(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


def _stored(emulator: kmock.KubernetesEmulator, request: rendering.Request) -> dict[str, Any] | None:
    """The object a request names, as stored; None when it does not exist (or was deleted)."""
    assert request.resource is not None and request.name is not None
    key = (request.resource, request.namespace, request.name)
    if key not in emulator.objects or emulator.objects[key].deleted:
        return None
    return emulator.objects[key].raw


async def serve_replace(
    emulator: kmock.KubernetesEmulator, request: rendering.Request, version: str
) -> aiohttp.web.StreamResponse:
    """PUT, as the API server does it: replace the whole object (or only its status, on the status
    subresource); 404 for a missing object, 409 for a stale `metadata.resourceVersion`, an
    unconditional update without one; uid and creationTimestamp kept, `version` as the new
    resourceVersion, and a new generation when the spec changes. The caller serialises writes."""
    resource, name = request.resource, request.name
    assert resource is not None and name is not None
    body = request.data
    if not isinstance(body, dict):
        raise kmock.KubernetesError(400, "BadRequest", "the body of a PUT must be a JSON object")
    sent_metadata = body.get("metadata") or {}
    if sent_metadata.get("name") not in (None, name):
        raise kmock.KubernetesError(
            400,
            "BadRequest",
            f"the name of the object ({sent_metadata['name']}) does not match the name on the URL ({name})",
        )
    if request.subresource not in (None, "status"):
        raise kmock.KubernetesError(
            404, "NotFound", f"the server could not find the requested resource ({request.subresource})"
        )
    info = emulator.resources.get(resource)
    has_status = isinstance(info, kmock.ResourceInfo) and "status" in info.subresources
    async with emulator._lock:
        current = _stored(emulator, request)
        if current is None:
            raise _not_found(resource, name)
        metadata = current.get("metadata") or {}
        sent = sent_metadata.get("resourceVersion")
        if sent and sent != metadata.get("resourceVersion"):
            raise _conflict(resource, name)
        if request.subresource == "status":
            replacement = {**copy.deepcopy(current), "status": copy.deepcopy(body.get("status"))}
        else:
            replacement = copy.deepcopy(body)
            if has_status:  # the status is written through its own subresource only
                replacement["status"] = copy.deepcopy(current.get("status"))
            replacement["metadata"] = {
                **copy.deepcopy(sent_metadata),
                **{k: metadata[k] for k in ("name", "namespace", "uid", "creationTimestamp") if k in metadata},
                "generation": int(metadata.get("generation") or 1) + (replacement.get("spec") != current.get("spec")),
            }
            replacement = {k: v for k, v in replacement.items() if v is not None}
        replacement["metadata"]["resourceVersion"] = version
        stored = emulator.objects[resource, request.namespace, name]
        stored.history.append(replacement)
        raw = stored.raw
        await emulator._buses[resource].put({"type": "MODIFIED", "object": raw})
    return aiohttp.web.json_response(raw)


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
    """kmock's emulator with the API server's write semantics, a bounded footprint, and
    kubectl-friendly discovery, list kinds and ComputePool tables."""

    _versions: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _routing: dict[asyncio.Task[Any], rendering.Request] = attrs.field(factory=dict, init=False)
    _writing: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    """Held from a write's resourceVersion check to its storing, so no other write lands between."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        register_resources(self)

    def __iter__(self) -> Iterator[rendering.Request]:
        """The requests kmock's routing scans to find a request's reaction: only the one being
        routed in the current task (each HTTP request is served in its own task), so finding a
        reaction costs the same in the first minute and the hundredth."""
        task = asyncio.current_task()
        request = self._routing.get(task) if task is not None else None
        return iter(() if request is None else (request,))

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            return await super().__call__(raw_request)
        finally:  # kmock records a failed request's error after its handling, so trim it here
            if self._errors:
                del self._errors[-1][:-ERRORS_KEPT]

    async def _handle(self, request: rendering.Request) -> Any:
        task = asyncio.current_task()
        assert task is not None
        self._routing[task] = request
        try:
            if request.method == kmock.method.PUT and request.resource is not None and request.name is not None:
                async with self._writing:
                    return await serve_replace(self, request, str(next(self._versions)))
            if request.action == kmock.action.UPDATE:
                async with self._writing:
                    self._check_update(request)
                    return await super()._handle(request)
            if request.action == kmock.action.CREATE and isinstance(request.data, dict):
                self._stamp_creation(request.data)
            return await super()._handle(request)
        finally:
            del self._routing[task]
            self._forget(request)

    def _forget(self, request: rendering.Request) -> None:
        """Drop what kmock records of every request (the requests, and those of each reaction) and
        the superseded versions of the object this request wrote."""
        self._requests.clear()
        for reaction in self._payloads:
            reaction._requests.clear()
        if request.resource is not None and request.name is not None:
            key = (request.resource, request.namespace, request.name)
            if key in self.objects:
                del self.objects[key].history[:-VERSIONS_KEPT]

    def _stamp_creation(self, body: dict[str, Any]) -> None:
        """What a real API server sets on creation: uid, creationTimestamp, generation, resourceVersion."""
        metadata = body.setdefault("metadata", {})
        metadata.setdefault("uid", str(uuid.uuid4()))
        metadata.setdefault("creationTimestamp", _now())
        metadata.setdefault("generation", 1)
        metadata["resourceVersion"] = str(next(self._versions))

    def _check_update(self, request: rendering.Request) -> None:
        """A patch, as the API server takes it: 409 for a stale resourceVersion, a new one for every
        write, a new generation when the spec changes, and `status.conditions` merged by type on
        strategic-merge patches (kmock replaces lists whole, which would drop the kubelet's Ready
        condition). A missing object is left to kmock (404)."""
        if request.resource is None or request.name is None:
            return
        current = _stored(self, request)
        if current is None:
            return
        metadata = current.get("metadata") or {}
        version = str(next(self._versions))
        spec_changed = False
        if isinstance(request.data, dict):
            sent = (request.data.get("metadata") or {}).get("resourceVersion")
            if sent is not None and sent != metadata.get("resourceVersion"):
                raise _conflict(request.resource, request.name)
            request.data.setdefault("metadata", {})["resourceVersion"] = version
            spec_changed = "spec" in request.data
            status = request.data.get("status")
            strategic = "strategic-merge-patch" in request.headers.get("Content-Type", "")
            if strategic and isinstance(status, dict) and "conditions" in status:
                merged = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []}
                for condition in status["conditions"] or []:
                    merged[condition.get("type")] = {**merged.get(condition.get("type"), {}), **condition}
                status["conditions"] = list(merged.values())
        elif isinstance(request.data, list):  # a JSON patch
            for op in request.data:
                tests_version = op.get("op") == "test" and op.get("path") == "/metadata/resourceVersion"
                if tests_version and op.get("value") != metadata.get("resourceVersion"):
                    raise kmock.KubernetesError(422, "Invalid", "the test operation failed: resourceVersion")
            request.data.append({"op": "replace", "path": "/metadata/resourceVersion", "value": version})
            spec_changed = any(str(op.get("path", "")).startswith("/spec") for op in request.data)
        if spec_changed and not request.subresource:
            generation = int(metadata.get("generation") or 1) + 1
            if isinstance(request.data, dict):
                request.data["metadata"]["generation"] = generation
            else:
                request.data.append({"op": "replace", "path": "/metadata/generation", "value": generation})

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
