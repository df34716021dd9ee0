"""The OpenAPI v3 documents the API server publishes for its custom resources, so `kubectl explain` works.

Pure. kubectl (1.27 and later) reads `/openapi/v3` (the index of group-version documents), then the
document of a group-version, and finds a kind's schema by its `x-kubernetes-group-version-kind`; it
also reads the PATCH operations' parameters to learn that the server takes `fieldValidation` (then
`kubectl create`/`apply` leave field validation to the server and ask it to be strict). Published:
every served resource's paths, and the ComputePool's schema (the CRD's, as apiextensions-apiserver
publishes it). Not published: the other kinds' schemas (`kubectl explain nodes` finds no fields)
and OpenAPI v2.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

import kmock

import accelpool_api as api
from accelpool_api import crd
from accelpool_demo.apiserver import resources
from accelpool_demo.apiserver.writes import JsonObject

ROOT = "/openapi/v3"
QUERY_PARAMETERS = ("fieldManager", "fieldValidation", "dryRun", "force")


def _gvk(group: str, version: str, kind: str) -> list[dict[str, str]]:
    return [{"group": group, "version": version, "kind": kind}]


def _operations(group: str, version: str, kind: str, schema_ref: str | None) -> dict[str, Any]:
    """A collection's and an object's path items with GET and PATCH (what kubectl inspects)."""
    parameters = [
        {"name": name, "in": "query", "schema": {"type": "string", "uniqueItems": True}} for name in QUERY_PARAMETERS
    ]
    response = (
        {"200": {"description": "OK", "content": {"application/json": {"schema": {"$ref": schema_ref}}}}}
        if schema_ref
        else {"200": {"description": "OK"}}
    )
    extension = {"x-kubernetes-group-version-kind": _gvk(group, version, kind)[0]}
    return {
        "get": {"responses": response, **extension, "x-kubernetes-action": "get"},
        "patch": {"parameters": parameters, "responses": response, **extension, "x-kubernetes-action": "patch"},
    }


def _document(paths: dict[str, Any], schemas: dict[str, Any]) -> JsonObject:
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": "v1.35.0"},
        "paths": paths,
        "components": {"schemas": schemas},
    }


def _group_version(resource_key: str) -> tuple[str, str, str]:
    """`apps/v1/daemonsets` → (`apps`, `v1`, `apis/apps/v1`); `v1/nodes` → (``, `v1`, `api/v1`)."""
    parts = resource_key.split("/")
    group, version = ("", parts[0]) if len(parts) == 2 else (parts[0], parts[1])
    return group, version, f"apis/{group}/{version}" if group else f"api/{version}"


def _paths(resource_key: str, info: kmock.ResourceInfo, schema_ref: str | None) -> dict[str, Any]:
    group, version, document = _group_version(resource_key)
    plural = resource_key.rsplit("/", 1)[1]
    base = f"/{document}/namespaces/{{namespace}}/{plural}" if info.namespaced else f"/{document}/{plural}"
    item = _operations(group, version, str(info.kind), schema_ref)
    return {base: item, base + "/{name}": item}


def _pool_schema() -> JsonObject:
    schema = crd.openapi_schema()
    schema["properties"]["metadata"] = {
        "description": "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        "type": "object",
    }
    schema["x-kubernetes-group-version-kind"] = _gvk(api.GROUP, api.VERSION, api.KIND)
    return schema


POOL_SCHEMA = f"io.accelpool.{api.VERSION}.{api.KIND}"


def documents(served: Mapping[str, kmock.ResourceInfo] | None = None) -> dict[str, JsonObject]:
    """Every group-version's document: each resource's paths (`resources.RESOURCES`, and those of the release:
    `served`), and the ComputePool's schema."""
    found: dict[str, JsonObject] = {}
    for key, info in {**resources.RESOURCES, **(served or {})}.items():
        path = _group_version(key)[2]
        document = found.setdefault(path, _document({}, {}))
        is_pool = key == resources.POOLS
        document["paths"].update(_paths(key, info, f"#/components/schemas/{POOL_SCHEMA}" if is_pool else None))
        if is_pool:
            document["components"]["schemas"][POOL_SCHEMA] = _pool_schema()
    return found


def _hash(document: JsonObject) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:64].upper()


def index(served: Mapping[str, kmock.ResourceInfo] | None = None) -> JsonObject:
    """`/openapi/v3`: each group-version document's URL (its hash in the query, as the API server does)."""
    return {
        "paths": {
            path: {"serverRelativeURL": f"{ROOT}/{path}?hash={_hash(doc)}"} for path, doc in documents(served).items()
        }
    }


def document(path: str, served: Mapping[str, kmock.ResourceInfo] | None = None) -> JsonObject | None:
    """The document at `/openapi/v3/<path>`; None for one not published."""
    return documents(served).get(path.removeprefix(ROOT).strip("/"))
