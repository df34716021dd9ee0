"""docs/reference/api.md: the ComputePool API, field by field, from the CRD the pydantic models generate.

The page is rendered from `accelpool_api.crd.custom_resource_definition()` (what `make crds`
writes), so a field's type, default, constraints and CEL rules are those the API server enforces, by
construction. A field that takes two shapes (`spec.accelerator`: a string or an object) is opaque to
the CRD's schema; its object form is documented from its own model's schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from hack.refdocs.markdown import anchor, banner, code, table, text, value

Schema = Mapping[str, Any]


@dataclass(frozen=True)
class Section:
    """One object of the API: its path (`spec.health.drain`), its schema, and the shape it documents."""

    path: str
    node: Schema


def type_of(path: str, node: Schema, unions: Mapping[str, Schema]) -> str:
    """A field's type as the page writes it, linking an object to its own section."""
    if node.get("x-kubernetes-int-or-string"):
        return "integer or string"
    if path in unions:
        return f"string or [object](#{anchor(path)})"
    kind = node.get("type")
    if kind == "object":
        if node.get("properties"):
            return f"[object](#{anchor(path)})"
        if isinstance(node.get("additionalProperties"), Mapping):
            return "map of " + type_of(f"{path}.*", node["additionalProperties"], unions)
        return "object"
    if kind == "array":
        return "array of " + type_of(f"{path}[]", node["items"], unions)
    if kind is None:
        return "any"
    return f"{kind} ({node['format']})" if "format" in node else str(kind)


def _range(low: Any, high: Any, unit: str = "") -> str:
    if low is not None and high is not None:
        return f"{low} to {high}{unit}"
    return f"≥ {low}{unit}" if low is not None else f"≤ {high}{unit}"


def constraints(node: Schema) -> list[str]:
    """The schema's checks on one value: enum, range, length, items, pattern (an array's item's too)."""
    found: list[str] = []
    if "enum" in node:
        found.append("one of " + ", ".join(value(v) for v in node["enum"]))
    if "minimum" in node or "maximum" in node:
        found.append(_range(node.get("minimum"), node.get("maximum")))
    if "exclusiveMinimum" in node:
        found.append(f"> {node['exclusiveMinimum']}")
    if "exclusiveMaximum" in node:
        found.append(f"< {node['exclusiveMaximum']}")
    if "minLength" in node or "maxLength" in node:
        found.append("length " + _range(node.get("minLength"), node.get("maxLength")))
    if "minItems" in node or "maxItems" in node:
        found.append(_range(node.get("minItems"), node.get("maxItems"), " items"))
    if "pattern" in node:
        found.append("matches " + code(node["pattern"]))
    items = node.get("items")
    if node.get("type") == "array" and isinstance(items, Mapping) and items.get("type") != "object":
        found += [f"each item {c}" for c in constraints(items)]
    return found


def _rules(node: Schema) -> tuple[dict[str, list[str]], list[str]]:
    """The object's CEL rules' messages: by the field their fieldPath names, and those about the whole object."""
    by_field: dict[str, list[str]] = {}
    whole: list[str] = []
    properties = node.get("properties") or {}
    for rule in node.get("x-kubernetes-validations", ()):
        target = str(rule.get("fieldPath", "")).removeprefix(".")
        if target in properties:
            by_field.setdefault(target, []).append(text(rule["message"]))
        else:
            whole.append(f"{code(target)}: {text(rule['message'])}" if target else text(rule["message"]))
    return by_field, whole


def sections(path: str, node: Schema, unions: Mapping[str, Schema]) -> Iterator[Section]:
    """Every object below `path` that has fields, depth first, in the schema's order."""
    if path in unions:
        node = unions[path]
    kind = node.get("type")
    if kind == "object" and node.get("properties"):
        yield Section(path, node)
        for name, child in node["properties"].items():
            yield from sections(f"{path}.{name}", child, unions)
    elif kind == "object" and isinstance(node.get("additionalProperties"), Mapping):
        yield from sections(f"{path}.*", node["additionalProperties"], unions)
    elif kind == "array":
        yield from sections(f"{path}[]", node["items"], unions)


class UndocumentedField(ValueError):
    """A field of the spec or status whose description is missing or only repeats its name."""


def undocumented(section: Section) -> list[str]:
    """The fields of `section` a reader would learn nothing about: no description, or pydantic's title
    (the name, capitalised) in its place."""
    found = []
    for name, child in section.node["properties"].items():
        description = str(child.get("description", "")).strip()
        if description.replace(" ", "").lower() in ("", name.lower()):
            found.append(f"{section.path}.{name}")
    return found


def render_section(section: Section, unions: Mapping[str, Schema]) -> str:
    node = section.node
    level = "##" if "." not in section.path else "###"
    parts = [f"{level} {section.path}\n"]
    if node.get("description"):
        parts.append(text(node["description"].strip()) + "\n")
    by_field, whole = _rules(node)
    if whole:
        parts.append("Rules (CEL, checked by the API server):\n\n" + "".join(f"- {m}\n" for m in whole))
    required = set(node.get("required", ()))
    rows = []
    for name, child in node["properties"].items():
        checks = (["required"] if name in required else []) + constraints(child)
        checks += [f"rule: {m}" for m in by_field.get(name, ())]
        default = value(child["default"]) if "default" in child else ""
        rows.append(
            [
                code(name),
                type_of(f"{section.path}.{name}", child, unions),
                default,
                "; ".join(checks),
                text(str(child.get("description", ""))),
            ]
        )
    parts.append(table(["Field", "Type", "Default", "Validation", "Description"], rows))
    return "\n".join(parts)


def render(definition: Schema, unions: Mapping[str, Schema]) -> str:
    """The page, from a CustomResourceDefinition and the object form of each two-shape field (by path)."""
    spec = definition["spec"]
    names = spec["names"]
    version = spec["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    scale = version.get("subresources", {}).get("scale")
    intro = (
        f"`{names['kind']}` (`{spec['group']}/{version['name']}`), {spec['scope'].lower()}-scoped: "
        f"{text(schema['description'])} `kubectl get {names['plural']}`; short names "
        + ", ".join(code(n) for n in names.get("shortNames", ()))
        + "; categories "
        + ", ".join(code(c) for c in names.get("categories", ()))
        + "."
    )
    if scale:
        intro += (
            f" The scale subresource reads and writes `{scale['specReplicasPath']}` (`kubectl scale --replicas`), "
            f"reports `{scale['statusReplicasPath']}` and selects with `{scale['labelSelectorPath']}`."
        )
    lines = [
        f"# {names['kind']} API reference\n",
        banner("the pydantic models in api/accelpool_api/, through the CRD they generate"),
        intro + "\n",
        "Every field below is checked by the CRD's schema when an object is written; a *rule* is one of its "
        "CEL validations, quoted by the message the API server answers with. The checks that need the "
        "accelerator catalog (names, MIG profiles and layouts, memory variants) are the admission webhook's "
        "and `accelpool validate`'s: [Validation](../concepts/validation.md). What the fields do together: "
        "[The ComputePool](../concepts/computepool.md).\n",
    ]
    columns = [
        [code(c["name"]), code(c["jsonPath"]), str(c.get("priority", 0)), text(str(c.get("description", "")))]
        for c in version.get("additionalPrinterColumns", ())
    ]
    lines.append("## Columns of `kubectl get`\n\n" + table(["Column", "JSONPath", "Priority", "Description"], columns))
    every = [s for root in ("spec", "status") for s in sections(root, schema["properties"][root], unions)]
    missing = [path for s in every for path in undocumented(s)]
    if missing:
        raise UndocumentedField("fields without a description in the models: " + ", ".join(missing))
    lines += [render_section(s, unions) for s in every]
    return "\n".join(lines)


def union_forms() -> dict[str, Schema]:
    """The object form of each two-shape field of the spec, from its model, by path."""
    import accelpool_api as api
    from accelpool_api import crd

    raw = api.ComputePoolSpec.model_json_schema(by_alias=True, mode="validation")
    forms: dict[str, Schema] = {}
    for name, prop in raw["properties"].items():
        if prop.get("x-accelpool-union"):
            model = getattr(api, prop["$ref"].rsplit("/", 1)[-1])
            forms[f"spec.{name}"] = crd.model_schema(model)
    return forms


def page() -> str:
    from accelpool_api import crd

    return render(crd.custom_resource_definition(), union_forms())
