"""What a Kubernetes API server does with a custom object before its CEL rules run: defaulting and the
structural schema, with strict field validation (what `kubectl apply` asks for by default). Shared by
the admission emulation of accelpool's own CRD (tests/admission.py) and of the published CRDs
accelpool writes objects for (tests/contract/test_karpenter_nodepool.py).

Defaulting follows kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/
schema/defaulting/algorithm.go (a default is applied where a property is absent, then defaulting goes
on inside it, in items and in additionalProperties); the schema is checked as JSON Schema, with
`x-kubernetes-list-type: set` items unique as the API server requires.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonschema  # type: ignore[import-untyped]


def strict_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI structural schema → JSON Schema; unknown fields rejected where the schema lists properties."""
    result = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-") and k not in ("default",)}
    if "properties" in node:
        result["properties"] = {k: strict_json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            result["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        result["additionalProperties"] = strict_json_schema(node["additionalProperties"])
    if "items" in node:
        result["items"] = strict_json_schema(node["items"])
    if node.get("x-kubernetes-list-type") == "set":
        result["uniqueItems"] = True
    return result


def apply_defaults(node: dict[str, Any], value: Any) -> None:
    """Fill in the schema's defaults, in place, where the object leaves a property out."""
    if isinstance(value, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
            if name in value:
                apply_defaults(prop, value[name])
        if isinstance(node.get("additionalProperties"), dict):
            for item in value.values():
                apply_defaults(node["additionalProperties"], item)
    elif isinstance(value, list) and "items" in node:
        for item in value:
            apply_defaults(node["items"], item)


def schema_errors(schema: dict[str, Any], obj: Any) -> list[str]:
    """Where `obj` (already defaulted) breaks the structural schema: `path: what`, empty when it conforms."""
    validator = jsonschema.Draft7Validator(strict_json_schema(schema))
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]
