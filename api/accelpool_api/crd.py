"""Generates the ComputePool CustomResourceDefinition from the pydantic models in `accelpool_api`.

The models' JSON schema is turned into a Kubernetes structural schema (refs inlined, optional
fields unwrapped, descriptions kept), each model's `rules` become `x-kubernetes-validations`
(CEL), and the names, subresources and printer columns are added. `make crds` writes the
result to crds/; a test fails when the committed file differs. Pure: returns data.
"""

from __future__ import annotations

import copy
from typing import Any

import yaml

import accelpool_api as api
from accelpool_api import status

JsonSchema = dict[str, Any]

_KEEP = (
    "description",
    "type",
    "format",
    "pattern",
    "enum",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "x-kubernetes-int-or-string",
)

_UNION_SCHEMAS: dict[str, JsonSchema] = {
    # CEL cannot see a field that takes two shapes (the API server leaves untyped
    # x-kubernetes-preserve-unknown-fields out of CEL): the admission webhook checks it, with
    # `accelpool validate`'s code.
    "accelerator": {"x-kubernetes-preserve-unknown-fields": True},
}


def _described(model: type[api.Model], field: str) -> str:
    description = model.model_fields[field].description
    assert description, f"{model.__name__}.{field} has no description for its printer column"
    return description.rstrip(".")


PRINTER_COLUMNS: list[JsonSchema] = [
    {
        "name": "Accelerator",
        "type": "string",
        "jsonPath": ".status.accelerator",
        "description": "Resolved accelerator",
    },
    {
        "name": "Nodes",
        "type": "string",
        "jsonPath": ".status.nodes.summary",
        "description": "Members / desired",
    },
    {
        "name": "Ready",
        "type": "integer",
        "jsonPath": ".status.nodes.ready",
        "description": "Healthy, configured members",
    },
    {
        "name": "GPUs",
        "type": "integer",
        "jsonPath": ".status.capacity.gpus",
        "description": "Devices on serving members: what pods can use now",
    },
    {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
    # `kubectl get -o wide` only (priority 1), described as the status model describes them.
    {
        "name": "Reason",
        "type": "string",
        "jsonPath": '.status.conditions[?(@.type=="Ready")].reason',
        "description": "The Ready condition's reason: why the pool is not Ready",
        "priority": 1,
    },
    {
        "name": "Quarantined",
        "type": "integer",
        "jsonPath": ".status.nodes.quarantined",
        "description": _described(status.NodeCounts, "quarantined"),
        "priority": 1,
    },
    {
        "name": "TFLOPS",
        "type": "number",
        "jsonPath": ".status.capacity.measuredTFLOPS",
        "description": _described(status.Capacity, "measured_tflops"),
        "priority": 1,
    },
]


def _rules_by_title() -> dict[str, tuple[api.Rule, ...]]:
    models: list[type[api.Model]] = [
        api.ComputePoolSpec,
        api.MigSpec,
        api.SharingSpec,
        api.HealthSpec,
        api.DrainPolicy,
    ]
    return {model.__name__: model.rules for model in models}


def structural(schema: JsonSchema, defs: dict[str, JsonSchema], rules: dict[str, tuple[api.Rule, ...]]) -> JsonSchema:
    """One pydantic JSON-schema node → one Kubernetes structural-schema node."""
    node = copy.deepcopy(schema)
    if "$ref" in node:
        name = node.pop("$ref").rsplit("/", 1)[-1]
        return structural({**defs[name], **node}, defs, rules)
    union = node.get("x-accelpool-union")
    if union:
        return {"description": node.get("description", ""), **_UNION_SCHEMAS[union]}
    if "anyOf" in node:
        options = [option for option in node.pop("anyOf") if option.get("type") != "null"]
        if node.get("x-kubernetes-int-or-string"):
            int_or_string: JsonSchema = {k: v for k, v in node.items() if k in (*_KEEP, "default")}
            int_or_string["anyOf"] = [{"type": "integer"}, {"type": "string"}]
            return int_or_string
        if len(options) != 1:
            raise ValueError(f"cannot express a union of {len(options)} shapes structurally: {options}")
        merged = {**options[0], **{k: v for k, v in node.items() if k in ("description", "default")}}
        return structural(merged, defs, rules)
    if "const" in node:
        node["enum"] = [node.pop("const")]
    result: JsonSchema = {key: node[key] for key in _KEEP if key in node}
    kind = node.get("type")
    default = node.get("default")
    if default is not None and not isinstance(default, (dict, list)):
        result["default"] = default
    if kind == "object":
        properties = node.get("properties")
        if properties:
            result["properties"] = {name: structural(prop, defs, rules) for name, prop in properties.items()}
            required = [name for name in node.get("required", []) if name in properties]
            if required:
                result["required"] = required
        elif isinstance(node.get("additionalProperties"), dict):
            result["additionalProperties"] = structural(node["additionalProperties"], defs, rules)
        else:
            result["x-kubernetes-preserve-unknown-fields"] = True
        cel = [_validation(rule) for rule in rules.get(node.get("title", ""), ()) if rule.cel]
        if cel:
            result["x-kubernetes-validations"] = cel
    elif kind == "array":
        result["items"] = structural(node["items"], defs, rules)
    if "description" not in result and "title" in node and kind != "object":
        result["description"] = node["title"]
    return result


def _validation(rule: api.Rule) -> JsonSchema:
    validation: JsonSchema = {"rule": rule.cel, "message": rule.message}
    if rule.message_expression:
        validation["messageExpression"] = rule.message_expression
    if rule.field:
        validation["fieldPath"] = f".{rule.field}"
    return validation


def model_schema(model: type[api.Model]) -> JsonSchema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    return structural(raw, defs, _rules_by_title())


def openapi_schema() -> JsonSchema:
    """The version's openAPIV3Schema: apiVersion/kind/metadata, spec and status."""
    spec = model_schema(api.ComputePoolSpec)
    spec["description"] = "What the pool should be: accelerator, node count, layout, health policy."
    status = model_schema(api.ComputePoolStatus)
    status["description"] = "What the pool is, as observed by the operator."
    return {
        "type": "object",
        "description": "A pool of accelerator nodes: selected, labelled, configured, health-checked.",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {
                "type": "object",
                # A pool's name is the value of the accelpool.io/pool label on its nodes. The schema
                # may restrict only name and generateName of metadata.
                "properties": {"name": {"type": "string", "maxLength": api.MAX_POOL_NAME}},
            },
            "spec": spec,
            "status": status,
        },
    }


def custom_resource_definition() -> JsonSchema:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": f"{api.PLURAL}.{api.GROUP}",
            "labels": {"app.kubernetes.io/name": "accelpool", "app.kubernetes.io/part-of": "accelpool"},
        },
        "spec": {
            "group": api.GROUP,
            "scope": "Cluster",
            "names": {
                "kind": api.KIND,
                "listKind": f"{api.KIND}List",
                "plural": api.PLURAL,
                "singular": api.SINGULAR,
                "shortNames": list(api.SHORT_NAMES),
                "categories": list(api.CATEGORIES),
            },
            "versions": [
                {
                    "name": api.VERSION,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": openapi_schema()},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.nodes",
                            "statusReplicasPath": ".status.nodes.members",
                            "labelSelectorPath": ".status.selector",
                        },
                    },
                    "additionalPrinterColumns": PRINTER_COLUMNS,
                }
            ],
        },
    }


HEADER = "# Generated by `make crds` (accelpool crd) from api/accelpool_api/. Do not edit.\n"


def render_yaml() -> str:
    return HEADER + yaml.safe_dump(custom_resource_definition(), sort_keys=False, width=120)
