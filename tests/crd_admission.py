"""What a Kubernetes API server does with a custom object, emulated for tests: defaulting, the
structural schema (with strict field validation, as kubectl applies by default) and the CRD's
CEL rules evaluated by cel-python. It answers "would `kubectl apply` accept this object?".
"""

from __future__ import annotations

import copy
from typing import Any

from tests.k8s_cel import evaluate_rules
from tests.structural import apply_defaults, schema_errors


def version_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def admission_errors(crd: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Why the API server would reject `obj`; empty when it would store it."""
    schema = version_schema(crd)
    obj = copy.deepcopy(obj)
    apply_defaults(schema, obj)
    errors = schema_errors(schema, obj)
    if errors:
        return errors
    return evaluate_rules(schema, obj).errors
