"""The CEL types a rule sees and their worst-case sizes (apiserver's SchemaDeclType)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tests.support.cel_cost.limits import (
    _JSON_DATE_SIZE,
    _MAX_DATETIME_SIZE_JSON,
    _MAX_DURATION_SIZE_JSON,
    _MIN_BOOL_SIZE,
    _MIN_DATETIME_SIZE_JSON,
    _MIN_DURATION_SIZE_JSON,
    _MIN_NUMBER_SIZE,
    _MIN_STRING_SIZE,
    MAX_REQUEST_SIZE_BYTES,
)

# --- the types a rule sees: common/schemas.go SchemaDeclType, types.go ---


@dataclass(eq=False)
class DeclType:
    """A CEL type as the API server declares it for a schema node, with its largest size (MaxElements:
    characters of a string, items of a list, entries of a map) and smallest JSON size."""

    kind: str
    """object, map, list, string, bytes, int, uint, double, bool, duration, timestamp, dyn, null, type."""
    max_elements: int = 0
    min_size: int = 0
    fields: dict[str, DeclType] = field(default_factory=dict)
    elem: DeclType | None = None
    key: DeclType | None = None


_SCALAR_KINDS = frozenset({"bool", "double", "duration", "int", "timestamp", "uint"})
_CEL_RESERVED = frozenset(
    [
        "true",
        "false",
        "null",
        "in",
        "as",
        "break",
        "const",
        "continue",
        "else",
        "for",
        "function",
        "if",
        "import",
        "let",
        "loop",
        "package",
        "namespace",
        "return",
        "var",
        "void",
        "while",
    ]
)


def _string_length_per_request(node: Mapping[str, Any]) -> int:
    """estimateMaxStringLengthPerRequest: an unbounded string fills the largest request."""
    if node.get("x-kubernetes-int-or-string"):
        return MAX_REQUEST_SIZE_BYTES - 2
    return {"duration": _MAX_DURATION_SIZE_JSON, "date": _JSON_DATE_SIZE, "date-time": _MAX_DATETIME_SIZE_JSON}.get(
        node.get("format", ""), MAX_REQUEST_SIZE_BYTES - 2
    )


def _with_type_and_object_meta(node: Mapping[str, Any]) -> dict[str, Any]:
    """WithTypeAndObjectMeta: a resource root always shows apiVersion, kind, metadata.name and generateName."""
    properties = dict(node.get("properties") or {})
    metadata = properties.get("metadata") or {}
    meta_props = metadata.get("properties") or {}
    if (
        (properties.get("kind") or {}).get("type") == "string"
        and (properties.get("apiVersion") or {}).get("type") == "string"
        and metadata.get("type") == "object"
        and (meta_props.get("name") or {}).get("type") == "string"
        and (meta_props.get("generateName") or {}).get("type") == "string"
    ):
        return dict(node)
    string = {"type": "string"}
    properties.update(
        kind=string,
        apiVersion=string,
        metadata={"type": "object", "properties": {"name": string, "generateName": string}},
    )
    return {**node, "properties": properties}


def schema_decl_type(node: Mapping[str, Any], is_resource_root: bool = False) -> DeclType | None:
    """The CEL type of a structural schema node, or None where CEL cannot see it (SchemaDeclType)."""
    if node.get("x-kubernetes-int-or-string"):
        bound = max(node["maxLength"], 0) * 4 if "maxLength" in node else _string_length_per_request(node)
        return DeclType("dyn", max_elements=bound, min_size=1)
    if is_resource_root:
        node = _with_type_and_object_meta(node)
    kind = node.get("type")
    if kind == "array":
        items = node.get("items")
        if items is None:
            return None
        item_type = schema_decl_type(items, bool(items.get("x-kubernetes-embedded-resource")))
        if item_type is None:
            return None
        if "maxItems" in node:
            max_items = max(node["maxItems"], 0)
        else:  # estimateMaxArrayItemsFromMinSize
            max_items = (MAX_REQUEST_SIZE_BYTES - 2) // (item_type.min_size + 1)
        return DeclType("list", max_elements=max_items, min_size=2, elem=item_type)
    if kind == "object":
        additional = node.get("additionalProperties")
        if isinstance(additional, Mapping):
            value_type = schema_decl_type(additional, bool(additional.get("x-kubernetes-embedded-resource")))
            if value_type is None:
                return None
            if "maxProperties" in node:
                max_properties = max(node["maxProperties"], 0)
            else:  # estimateMaxAdditionalPropertiesFromMinSize
                max_properties = (MAX_REQUEST_SIZE_BYTES - 2) // (value_type.min_size + 6)
            # the key is types.go's StringType, whose MaxElements is 0
            key = DeclType("string", max_elements=0, min_size=_MIN_STRING_SIZE)
            return DeclType("map", max_elements=max_properties, min_size=2, key=key, elem=value_type)
        required = set(node.get("required") or [])
        fields: dict[str, DeclType] = {}
        min_size = 2
        for name, prop in (node.get("properties") or {}).items():
            field_type = schema_decl_type(prop, bool(prop.get("x-kubernetes-embedded-resource")))
            if field_type is None:
                continue
            if name.isidentifier() and name.isascii() and name not in _CEL_RESERVED:
                fields[name] = field_type  # names needing escapes (cel.Escape) are left out: a rule using them fails
            if name in required and "default" not in prop:
                min_size += len(name) + field_type.min_size + 4
        return DeclType("object", min_size=min_size, fields=fields)
    if kind == "string":
        fmt = node.get("format")
        if fmt == "byte":
            bound = max(node["maxLength"], 0) if "maxLength" in node else _string_length_per_request(node)
            return DeclType("bytes", max_elements=bound, min_size=_MIN_STRING_SIZE)
        if fmt == "duration":
            return DeclType("duration", max_elements=_MAX_DURATION_SIZE_JSON, min_size=_MIN_DURATION_SIZE_JSON)
        if fmt == "date":
            return DeclType("timestamp", max_elements=_JSON_DATE_SIZE, min_size=_JSON_DATE_SIZE)
        if fmt == "date-time":
            return DeclType("timestamp", max_elements=_MAX_DATETIME_SIZE_JSON, min_size=_MIN_DATETIME_SIZE_JSON)
        if "maxLength" in node:  # estimateMaxElementsFromMaxLength: up to 4 bytes per character
            bound = max(node["maxLength"], 0) * 4
        elif node.get("enum"):  # estimateMaxStringEnumLength
            bound = max(len(str(value).encode()) for value in node["enum"])
        else:
            bound = _string_length_per_request(node)
        return DeclType("string", max_elements=bound, min_size=_MIN_STRING_SIZE)
    if kind == "boolean":
        return DeclType("bool", min_size=_MIN_BOOL_SIZE)
    if kind == "number":
        return DeclType("double", min_size=_MIN_NUMBER_SIZE)
    if kind == "integer":
        return DeclType("int", min_size=_MIN_NUMBER_SIZE)
    return None
