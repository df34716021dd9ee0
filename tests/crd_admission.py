"""What a Kubernetes API server does with a custom object, emulated for tests: defaulting, the
structural schema (with strict field validation, as kubectl applies by default) and the CRD's
CEL rules evaluated by cel-python. It answers "would `kubectl apply` accept this object?".
"""

from __future__ import annotations

import copy
from typing import Any

import celpy
import jsonschema  # type: ignore[import-untyped]
from celpy.adapter import json_to_cel

_CEL = celpy.Environment()


def version_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _strict_json_schema(node: dict[str, Any]) -> dict[str, Any]:
    """OpenAPI structural schema → JSON Schema; unknown fields rejected where the schema lists properties."""
    result = {k: v for k, v in node.items() if not k.startswith("x-kubernetes-") and k not in ("default",)}
    if "properties" in node:
        result["properties"] = {k: _strict_json_schema(v) for k, v in node["properties"].items()}
        if not node.get("x-kubernetes-preserve-unknown-fields"):
            result["additionalProperties"] = False
    if isinstance(node.get("additionalProperties"), dict):
        result["additionalProperties"] = _strict_json_schema(node["additionalProperties"])
    if "items" in node:
        result["items"] = _strict_json_schema(node["items"])
    return result


def _apply_defaults(node: dict[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name not in value and "default" in prop:
                value[name] = copy.deepcopy(prop["default"])
            if name in value:
                _apply_defaults(prop, value[name])
    elif isinstance(value, list) and "items" in node:
        for item in value:
            _apply_defaults(node["items"], item)


def _cel_errors(node: dict[str, Any], value: Any, path: str) -> list[str]:
    errors: list[str] = []
    for rule in node.get("x-kubernetes-validations") or []:
        program = _CEL.program(_CEL.compile(rule["rule"]))
        try:
            result = program.evaluate({"self": json_to_cel(value)})
        except celpy.evaluation.CELEvalError:  # as on a real API server, a rule that cannot be evaluated rejects
            result = None
        if not (isinstance(result, celpy.celtypes.BoolType) and bool(result)):
            errors.append(f"{path}: {rule['message']}")
    if isinstance(value, dict):
        for name, prop in (node.get("properties") or {}).items():
            if name in value:
                errors += _cel_errors(prop, value[name], f"{path}.{name}")
    elif isinstance(value, list) and "items" in node:
        for index, item in enumerate(value):
            errors += _cel_errors(node["items"], item, f"{path}[{index}]")
    return errors


def admission_errors(crd: dict[str, Any], obj: dict[str, Any]) -> list[str]:
    """Why the API server would reject `obj`; empty when it would store it."""
    schema = version_schema(crd)
    obj = copy.deepcopy(obj)
    _apply_defaults(schema, obj)
    validator = jsonschema.Draft7Validator(_strict_json_schema(schema))
    errors = [f"{'.'.join(str(p) for p in e.absolute_path)}: {e.message}" for e in validator.iter_errors(obj)]
    if errors:
        return errors
    return _cel_errors(schema, obj, "")
