"""docs/reference/helm-values.md and charts/accelpool/README.md: every value of the chart.

Two files make the chart's values and both are read: values.schema.json gives each value's type and
constraints (it is what Helm enforces), values.yaml its default and its description: the comment
block above the key, from its `# --` marker on (helm-docs' convention). A key whose value is a
mapping is documented by its children, unless its own comment has a `# --`: then it is one value, its
whole mapping the default (the children the comment leaves out are covered by it). A plain comment
(no `# --`) above a mapping describes the group; above a top-level key, the section. A value that no
`# --` comment and no schema `description` describes is an error, and so is a key the schema allows
that values.yaml neither sets nor covers.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hack.refdocs.api import constraints
from hack.refdocs.markdown import anchor, banner, code, table, text, value

CHART = "charts/accelpool"
HELM_OWN = ("global",)
"""Keys Helm itself gives every chart: not the chart's values."""


class ValuesError(ValueError):
    """A value the page cannot document."""


@dataclass(frozen=True)
class Row:
    path: str
    type: str
    default: Any
    constraints: tuple[str, ...]
    description: str
    group: bool = False
    """A group of values (a plain comment above a mapping): no default of its own."""


@dataclass(frozen=True)
class Section:
    key: str
    intro: str
    rows: tuple[Row, ...]


@dataclass(frozen=True)
class Comment:
    described: str
    """The text from the `# --` marker on; empty when the block has none."""
    plain: str
    """The text before the marker (the whole block when there is none)."""


def comment_above(lines: Sequence[str], line: int) -> Comment:
    """The comment block right above `line` (0-based), without a blank line between."""
    start = line
    while start > 0 and lines[start - 1].lstrip().startswith("#"):
        start -= 1
    block = [re.sub(r"^\s*#", "", lines[i]) for i in range(start, line)]
    marker = next((i for i, b in enumerate(block) if b.lstrip().startswith("-- ")), None)
    if marker is None:
        return Comment("", _prose(block))
    block[marker] = block[marker].lstrip().removeprefix("-- ")
    return Comment(_prose(block[marker:]), _prose(block[:marker]))


def _prose(block: Sequence[str]) -> str:
    """Comment lines joined as prose; a line indented beyond the block's (an example) as a code span."""
    words = []
    for line in block:
        if line.startswith("   ") and line.strip():
            words.append(code(line.strip()))
        else:
            words.append(line.strip())
    return " ".join(w for w in words if w)


def _resolve(schema: Mapping[str, Any], root: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in schema:
        target = root["definitions"][schema["$ref"].rsplit("/", 1)[-1]]
        schema = {**target, **{k: v for k, v in schema.items() if k != "$ref"}}
    return schema


def _child(schema: Mapping[str, Any] | None, key: str, root: Mapping[str, Any]) -> Mapping[str, Any] | None:
    if schema is None:
        return None
    properties = _resolve(schema, root).get("properties") or {}
    return _resolve(properties[key], root) if key in properties else None


def type_name(schema: Mapping[str, Any] | None, root: Mapping[str, Any]) -> str:
    if schema is None:
        return ""
    schema = _resolve(schema, root)
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(kind)
    if kind == "array":
        items = schema.get("items")
        inner = type_name(items, root) if isinstance(items, Mapping) else ""
        return f"list of {inner}" if inner else "list"
    if kind == "object" and isinstance(schema.get("additionalProperties"), Mapping) and not schema.get("properties"):
        return "map of " + type_name(schema["additionalProperties"], root)
    if kind is None and "enum" in schema:
        return "string"
    return str(kind or "any")


def _schema_only(
    schema: Mapping[str, Any] | None, values: Mapping[str, Any], path: str, root: Mapping[str, Any]
) -> list[str]:
    """The keys the schema allows beside `values` that values.yaml does not set."""
    properties = (_resolve(schema, root).get("properties") or {}) if schema else {}
    return [
        f"{path}{key}: values.schema.json allows it, values.yaml neither sets nor describes it"
        for key in properties
        if key not in values and key not in HELM_OWN
    ]


def rows(
    node: yaml.MappingNode,
    lines: Sequence[str],
    schema: Mapping[str, Any] | None,
    root: Mapping[str, Any],
    path: str,
    problems: list[str],
) -> Iterator[Row]:
    """The documented values under one mapping of values.yaml, in file order; what cannot be documented
    goes to `problems`."""
    data = yaml.safe_load(yaml.serialize(node))
    if path:  # the top level is checked once, by `sections`
        problems += _schema_only(schema, data, path, root)
    for key_node, value_node in node.value:
        key = key_node.value
        name = f"{path}{key}"
        child = _child(schema, key, root)
        if child is None:
            problems.append(f"{name}: set in values.yaml, unknown to values.schema.json")
            continue
        comment = comment_above(lines, key_node.start_mark.line)
        default = data[key]
        described = comment.described or str(child.get("description", ""))
        if described and comment.plain:
            described = f"{comment.plain} {described}"
        # A mapping the schema gives fields is documented by them; a free-form one (resources) is one value.
        mapping = isinstance(value_node, yaml.MappingNode) and bool(value_node.value)
        if mapping and not _resolve(child, root).get("properties") and not described:
            problems.append(f"{name}: no description (a `# --` comment above it in values.yaml)")
            continue

        if described:
            yield Row(name, type_name(child, root), default, tuple(constraints(child)), described)
            if mapping:
                assert isinstance(value_node, yaml.MappingNode)
                yield from _described_below(value_node, lines, child, root, f"{name}.")
        elif mapping:
            assert isinstance(value_node, yaml.MappingNode)
            if comment.plain and path:
                yield Row(name, "object", None, (), comment.plain, group=True)
            yield from rows(value_node, lines, child, root, f"{name}.", problems)
        else:
            problems.append(f"{name}: no description (a `# --` comment above it in values.yaml)")


def _described_below(
    node: yaml.MappingNode, lines: Sequence[str], schema: Mapping[str, Any] | None, root: Mapping[str, Any], path: str
) -> Iterator[Row]:
    """Inside a value documented whole: the keys that have a `# --` comment of their own."""
    for key_node, value_node in node.value:
        name = f"{path}{key_node.value}"
        child = _child(schema, key_node.value, root)
        comment = comment_above(lines, key_node.start_mark.line)
        if comment.described:
            default = yaml.safe_load(yaml.serialize(value_node))
            yield Row(name, type_name(child, root), default, tuple(constraints(child or {})), comment.described)
        if isinstance(value_node, yaml.MappingNode):
            yield from _described_below(value_node, lines, child, root, f"{name}.")


def sections(values_text: str, schema: Mapping[str, Any]) -> list[Section]:
    """values.yaml's top-level keys, each with its plain comment as intro and its values' rows."""
    lines = values_text.splitlines()
    top = yaml.compose(values_text)
    if not isinstance(top, yaml.MappingNode):
        raise ValuesError("values.yaml is not a mapping")
    problems = _schema_only(schema, yaml.safe_load(values_text), "", schema)
    found = []
    for key_node, value_node in top.value:
        single = yaml.MappingNode(top.tag, [(key_node, value_node)])
        comment = comment_above(lines, key_node.start_mark.line)
        section = tuple(rows(single, lines, schema, schema, "", problems))
        found.append(Section(key_node.value, comment.plain, section))
    if problems:
        raise ValuesError("values the chart's reference cannot document:\n  " + "\n  ".join(problems))
    return found


def values_table(found: Sequence[Section]) -> str:
    """Each section: its heading, its intro, the table of its values."""
    parts = []
    for section in found:
        parts.append(f"### {section.key}\n")
        if section.intro:
            parts.append(text(section.intro) + "\n")
        body = [
            [
                code(r.path),
                r.type,
                "" if r.group else value(r.default),
                "; ".join(r.constraints),
                ("*Group:* " if r.group else "") + text(r.description),
            ]
            for r in section.rows
        ]
        parts.append(table(["Key", "Type", "Default", "Validation", "Description"], body))
    return "\n".join(parts)


def reference_page(found: Sequence[Section]) -> str:
    keys = ", ".join(f"[`{s.key}`](#{anchor(s.key)})" for s in found)
    return "\n".join(
        [
            "# Helm values reference\n",
            banner(f"{CHART}/values.schema.json and the comments of {CHART}/values.yaml"),
            "Every value of the `accelpool` chart: its type and the checks `values.schema.json` makes (Helm "
            "refuses unknown keys and mistyped values at install), its default in `values.yaml`, and what it "
            "does. Pool settings (accelerator, nodes, MIG, health policy) are not values: they live in "
            "ComputePool objects ([API](api.md)). Installing: [Install](../install/README.md).\n",
            f"Sections: {keys}.\n",
            "## Values\n",
            values_table(found),
        ]
    )


def chart_readme(chart: Mapping[str, Any], found: Sequence[Section]) -> str:
    """charts/accelpool/README.md, helm-docs' layout: what the chart is and installs, how, then every value."""
    return "\n".join(
        [
            f"# {chart['name']}\n",
            banner(f"{CHART}/Chart.yaml, values.schema.json and the comments of values.yaml"),
            f"![Version: {chart['version']}](https://img.shields.io/badge/Version-{chart['version']}-informational) "
            f"![AppVersion: {chart['appVersion']}](https://img.shields.io/badge/AppVersion-{chart['appVersion']}-informational)\n",
            text(" ".join(str(chart["description"]).split())) + "\n",
            "## What it installs\n",
            "- The CRDs (`crds/`): `ComputePool` (`accelpool.io/v1alpha1`) and kopf's `ClusterKopfPeering`, "
            "for the operator's hot standby. Helm installs them on `helm install` only.\n"
            "- The operator: a Deployment (`operator.replicas`, one leader and standbys through kopf peering), "
            "its ServiceAccount and RBAC, a Service for its metrics and the admission webhook (`webhook.*`), "
            "a PodDisruptionBudget.\n"
            "- The device agents' ServiceAccount and RBAC, and their ValidatingAdmissionPolicy "
            "(`agent.nodeRestriction`). The agents themselves are DaemonSets the operator renders, one per "
            "ComputePool, from `agent.*`.\n"
            "- Optional: NetworkPolicies (`networkPolicy.enabled`), a ServiceMonitor and a PodMonitor "
            "(`metrics.*`), the alerts as a PrometheusRule (`prometheusRule.enabled`), the Grafana dashboards "
            "as ConfigMaps for Grafana's sidecar (`dashboards.enabled`).\n",
            "## Installing\n",
            f"Kubernetes `{chart.get('kubeVersion', '')}`. Beside NVIDIA's GPU Operator, in its namespace:\n",
            "```bash\nhelm install accelpool charts/accelpool -n gpu-operator\n```\n",
            "Before a real install read [Install](../../docs/install/README.md) (supported versions, images) "
            "and [Beside the GPU Operator](../../docs/install/gpu-operator.md). The same values, with their "
            "sections: [Helm values reference](../../docs/reference/helm-values.md).\n",
            "## Values\n",
            values_table(found),
        ]
    )


def read(root: Path) -> list[Section]:
    import json

    schema = json.loads((root / CHART / "values.schema.json").read_text())
    return sections((root / CHART / "values.yaml").read_text(), schema)


def chart_metadata(root: Path) -> Mapping[str, Any]:
    loaded: Mapping[str, Any] = yaml.safe_load((root / CHART / "Chart.yaml").read_text())
    return loaded
