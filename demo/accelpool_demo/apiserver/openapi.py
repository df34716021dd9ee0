"""The OpenAPI v3 documents the API server publishes for its custom resources, so `kubectl explain` works.

Pure. kubectl (1.27 and later) reads `/openapi/v3` (the index of group-version documents), then the
document of a group-version, and finds a kind's schema by its `x-kubernetes-group-version-kind`; it
also reads the PATCH operations' parameters to learn that the server takes `fieldValidation` (then
`kubectl create`/`apply` ask for strict field validation). Published: ComputePools (the CRD's
schema, as apiextensions-apiserver publishes it) and CustomResourceDefinitions (a path only, which
is where kubectl looks for `fieldValidation` for kinds without a document of their own). Not
published: the built-in kinds' schemas (`kubectl explain nodes` finds nothing) and OpenAPI v2.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from accelpool import api, crd
from accelpool_demo.apiserver.writes import JsonObject

ROOT = "/openapi/v3"
POOLS_DOCUMENT = f"apis/{api.GROUP}/{api.VERSION}"
CRDS_DOCUMENT = "apis/apiextensions.k8s.io/v1"
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


def pools_document() -> JsonObject:
    name = f"io.accelpool.{api.VERSION}.{api.KIND}"
    schema = crd.openapi_schema()
    schema["properties"]["metadata"] = {
        "description": "Standard object's metadata. More info: "
        "https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata",
        "type": "object",
    }
    schema["x-kubernetes-group-version-kind"] = _gvk(api.GROUP, api.VERSION, api.KIND)
    ref = f"#/components/schemas/{name}"
    base = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
    item = _operations(api.GROUP, api.VERSION, api.KIND, ref)
    return _document({base: item, base + "/{name}": item, base + "/{name}/status": item}, {name: schema})


def crds_document() -> JsonObject:
    base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}"
    return _document({base: _operations("apiextensions.k8s.io", "v1", "CustomResourceDefinition", None)}, {})


DOCUMENTS = {POOLS_DOCUMENT: pools_document, CRDS_DOCUMENT: crds_document}


def _hash(document: JsonObject) -> str:
    return hashlib.sha512(json.dumps(document, sort_keys=True).encode()).hexdigest()[:64].upper()


def index() -> JsonObject:
    """`/openapi/v3`: each group-version document's URL (its hash in the query, as the API server does)."""
    return {
        "paths": {
            path: {"serverRelativeURL": f"{ROOT}/{path}?hash={_hash(document())}"}
            for path, document in DOCUMENTS.items()
        }
    }


def document(path: str) -> JsonObject | None:
    """The document at `/openapi/v3/<path>`; None for one not published."""
    build = DOCUMENTS.get(path.removeprefix(ROOT).strip("/"))
    return build() if build is not None else None
