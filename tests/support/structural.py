"""What a Kubernetes API server does with a custom object before its CEL rules run: defaulting and the
structural schema, with strict field validation (what `kubectl apply` asks for by default). Shared by
the admission emulation of accelpool's own CRD (tests/support/admission.py) and of the published CRDs
accelpool writes objects for (tests/contract/test_karpenter_nodepool.py).

Defaulting follows kubernetes/kubernetes staging/src/k8s.io/apiextensions-apiserver/pkg/apiserver/
schema/defaulting/algorithm.go (a default is applied where a property is absent, then defaulting goes
on inside it, in items and in additionalProperties); the schema is checked as JSON Schema, with
`x-kubernetes-list-type: set` items unique as the API server requires.
"""

from __future__ import annotations

from typing import Any

import jsonschema  # type: ignore[import-untyped]

from accelpool_demo.apiserver.structural import apply_defaults

__all__ = ["apply_defaults", "schema_errors", "strict_json_schema"]


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


def schema_errors(schema: dict[str, Any], obj: Any) -> list[str]:
    """Where `obj` (already defaulted) breaks the structural schema: `path: what`, empty when it conforms."""
    validator = jsonschema.Draft7Validator(strict_json_schema(schema))
    return [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]
