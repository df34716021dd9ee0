"""Server-side printing: the `meta.k8s.io/v1` Table kubectl asks for (`Accept: application/json;as=Table;...`),
and the PartialObjectMetadataList a metadata-only list asks for (`as=PartialObjectMetadataList`, `metadata_list`).

Pure. ComputePools print the CRD's additionalPrinterColumns (as the API server's table convertor
does for a CRD); Nodes print what kube-apiserver's node printer prints (pkg/printers/internalversion:
NAME STATUS ROLES AGE VERSION, and with `-o wide` INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION
CONTAINER-RUNTIME); PodDisruptionBudgets what its PDB printer prints (NAME MIN AVAILABLE MAX
UNAVAILABLE ALLOWED DISRUPTIONS AGE, `N/A` for the bound not set); core Events what `printEvent` prints
(LAST SEEN TYPE REASON OBJECT MESSAGE, the object as `kind/name` in lower case; `-o wide` adds SUBOBJECT
SOURCE FIRST SEEN COUNT NAME); every other resource prints NAME AGE
(the default convertor; a real API server prints more columns for its built-in kinds, such as a pod's
READY STATUS RESTARTS).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accelpool_api import crd
from accelpool_demo.apiserver.resources import BUDGETS, EVENTS, NODES, POOLS
from accelpool_demo.apiserver.writes import JsonObject

ROLE_LABEL_PREFIX = "node-role.kubernetes.io/"
Column = tuple[str, str, int, str]
"""(name, type, priority, description): a column definition."""


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def wants_metadata_list(accept: str) -> bool:
    """`Accept: application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1` (client-go's metadata client)."""
    return "as=PartialObjectMetadataList" in accept and "v=v1" in accept


def metadata_list(items: Sequence[Mapping[str, Any]], list_metadata: JsonObject) -> JsonObject:
    """The listed objects' metadata alone: a `meta.k8s.io/v1` PartialObjectMetadataList whose items are
    PartialObjectMetadata holding each object's whole `metadata` (k8s.io/apiserver/pkg/endpoints/handlers/response.go
    `asPartialObjectMetadataList`, which copies each item's ObjectMeta through `meta.AsPartialObjectMetadata`)."""
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadataList",
        "metadata": list_metadata,
        "items": [
            {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": item["metadata"]}
            for item in items
        ],
    }


def age(timestamp: str | None, now: datetime.datetime | None = None) -> str:
    """`5m`, `3h`, `2d` (kubectl's short duration); `<unknown>` without a timestamp."""
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = int(((now or datetime.datetime.now(datetime.UTC)) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


_STEP = re.compile(r'\.([A-Za-z0-9_-]+)|\[\?\(@\.([A-Za-z0-9_-]+)=="([^"]*)"\)\]|\[([0-9]+)\]')


def _json_path(obj: Any, path: str) -> Any:
    """The first value at a printer column's JSONPath (`.status.nodes.ready`, `.status.conditions[?(@.type==
    "Ready")].reason`, `.items[0]`), None when there is none: as the CRD table convertor prints a column, from
    the first result only (apiextensions-apiserver pkg/registry/customresource/tableconvertor/tableconvertor.go)."""
    found = [obj]
    for field, key, wanted, index in _STEP.findall(path):
        step: list[Any] = []
        for value in found:
            if field and isinstance(value, Mapping) and field in value:
                step.append(value[field])
            elif key and isinstance(value, list):
                step.extend(v for v in value if isinstance(v, Mapping) and str(v.get(key)) == wanted)
            elif index and isinstance(value, list) and int(index) < len(value):
                step.append(value[int(index)])
        found = step
    return found[0] if found else None


def _pool_cells(pool: Mapping[str, Any]) -> list[Any]:
    cells: list[Any] = [pool["metadata"]["name"]]
    for column in crd.PRINTER_COLUMNS:
        value = _json_path(pool, column["jsonPath"])
        cells.append(age(value) if column["type"] == "date" else ("" if value is None else value))
    return cells


def node_status(node: Mapping[str, Any]) -> str:
    """`Ready`, `NotReady`, `Unknown`, with `,SchedulingDisabled` for a cordoned node."""
    ready = next((c for c in (node.get("status") or {}).get("conditions") or [] if c.get("type") == "Ready"), None)
    status = "Unknown" if ready is None else {"True": "Ready", "False": "NotReady"}.get(ready.get("status"), "Unknown")
    if (node.get("spec") or {}).get("unschedulable"):
        status += ",SchedulingDisabled"
    return status


def _address(node: Mapping[str, Any], kind: str) -> str:
    addresses = (node.get("status") or {}).get("addresses") or []
    return next((a.get("address", "") for a in addresses if a.get("type") == kind), "<none>")


def _node_cells(node: Mapping[str, Any]) -> list[Any]:
    labels = node["metadata"].get("labels") or {}
    roles = sorted(key.removeprefix(ROLE_LABEL_PREFIX) for key in labels if key.startswith(ROLE_LABEL_PREFIX))
    info = (node.get("status") or {}).get("nodeInfo") or {}
    return [
        node["metadata"]["name"],
        node_status(node),
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        _address(node, "InternalIP"),
        _address(node, "ExternalIP"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _budget_cells(budget: Mapping[str, Any]) -> list[Any]:
    spec = budget.get("spec") or {}
    bounds = ["N/A" if spec.get(field) is None else str(spec[field]) for field in ("minAvailable", "maxUnavailable")]
    allowed = (budget.get("status") or {}).get("disruptionsAllowed", 0)
    return [budget["metadata"]["name"], *bounds, allowed, age(budget["metadata"].get("creationTimestamp"))]


def _event_cells(event: Mapping[str, Any]) -> list[Any]:
    """As kubernetes pkg/printers/internalversion/printers.go `printEvent`: a repeated Event's LAST SEEN reads
    `<last> (x<count> over <first>)`."""
    involved = event.get("involvedObject") or {}
    first = event.get("firstTimestamp") or event.get("eventTime") or event["metadata"].get("creationTimestamp")
    last = event.get("lastTimestamp") or first
    count = int(event.get("count") or 1)
    seen = age(last) if count <= 1 else f"{age(last)} (x{count} over {age(first)})"
    source = event.get("source") or {}
    return [
        seen,
        event.get("type", ""),
        event.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        involved.get("fieldPath", ""),
        ", ".join(str(part) for part in (source.get("component"), source.get("host")) if part),
        event.get("message", ""),
        age(first),
        count,
        event["metadata"]["name"],
    ]


NAME: Column = ("Name", "string", 0, "Name must be unique within a namespace.")
NAME_WIDE: Column = ("Name", "string", 1, "Name must be unique within a namespace.")
"""The name as a `-o wide` column (Events print it last, only there)."""
NODE_COLUMNS: list[Column] = [
    NAME,
    ("Status", "string", 0, "The status of the node"),
    ("Roles", "string", 0, "The roles of the node"),
    ("Age", "string", 0, "CreationTimestamp is a timestamp representing the server time when this object was created."),
    ("Version", "string", 0, "Kubelet Version reported by the node."),
    ("Internal-IP", "string", 1, "List of internal IPs for the node."),
    ("External-IP", "string", 1, "List of external IPs for the node."),
    ("OS-Image", "string", 1, "OS image reported by the node."),
    ("Kernel-Version", "string", 1, "Kernel version reported by the node."),
    ("Container-Runtime", "string", 1, "Container runtime version reported by the node."),
]
POOL_COLUMNS: list[Column] = [NAME] + [
    (c["name"], c["type"], c.get("priority", 0), c.get("description", "")) for c in crd.PRINTER_COLUMNS
]
BUDGET_COLUMNS: list[Column] = [
    NAME,
    ("Min Available", "string", 0, "The minimum number of pods that must be available."),
    ("Max Unavailable", "string", 0, "The maximum number of pods that may be unavailable."),
    ("Allowed Disruptions", "integer", 0, "Calculated number of pods that may be disrupted at this time."),
    ("Age", "string", 0, "CreationTimestamp is a timestamp representing the server time when this object was created."),
]
EVENT_COLUMNS: list[Column] = [
    ("Last Seen", "string", 0, "The time at which the most recent occurrence of this event was recorded."),
    ("Type", "string", 0, "Type of this event (Normal, Warning), new types could be added in the future"),
    (
        "Reason",
        "string",
        0,
        "This should be a short, machine understandable string that gives the reason for "
        "the transition into the object's current status.",
    ),
    ("Object", "string", 0, "The object that this event is about."),
    ("Subobject", "string", 1, "The field of the object this event is about (involvedObject.fieldPath)."),
    ("Source", "string", 1, "The component reporting this event."),
    ("Message", "string", 0, "A human-readable description of the status of this operation."),
    ("First Seen", "string", 1, "The time at which the event was first recorded."),
    ("Count", "string", 1, "The number of times this event has occurred."),
    NAME_WIDE,
]
DEFAULT_COLUMNS: list[Column] = [NAME, ("Age", "date", 0, "")]
PRINTERS: dict[str, tuple[list[Column], Callable[[Mapping[str, Any]], list[Any]]]] = {
    POOLS: (POOL_COLUMNS, _pool_cells),
    NODES: (NODE_COLUMNS, _node_cells),
    BUDGETS: (BUDGET_COLUMNS, _budget_cells),
    EVENTS: (EVENT_COLUMNS, _event_cells),
}


def _default_cells(obj: Mapping[str, Any]) -> list[Any]:
    return [obj["metadata"]["name"], age(obj["metadata"].get("creationTimestamp"))]


def table(
    resource_key: str, items: Sequence[Mapping[str, Any]], resource_version: str, *, headers: bool = True
) -> JsonObject:
    """The Table of these objects of a resource (its rows carry each object's metadata). Without `headers`
    (TableOptions `NoHeaders`: every watch event after the first) `columnDefinitions` is null, as the table
    convertors leave it (k8s.io/apiserver/pkg/registry/rest/table.go, apiextensions-apiserver's
    tableconvertor.go: the headers only `if !opts.NoHeaders`)."""
    columns, cells = PRINTERS.get(resource_key, (DEFAULT_COLUMNS, _default_cells))
    return {
        "apiVersion": "meta.k8s.io/v1",
        "kind": "Table",
        "metadata": {"resourceVersion": resource_version},
        "columnDefinitions": [
            {
                "name": name,
                "type": type_,
                "format": "name" if column in (NAME, NAME_WIDE) else "",
                "description": text,
                "priority": priority,
            }
            for column in columns
            for name, type_, priority, text in [column]
        ]
        if headers
        else None,
        "rows": [
            {
                "cells": cells(item),
                "object": {
                    "apiVersion": "meta.k8s.io/v1",
                    "kind": "PartialObjectMetadata",
                    "metadata": item["metadata"],
                },
            }
            for item in items
        ],
    }
