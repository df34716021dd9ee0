"""docs/reference/metrics.md: every metric the operator and the device agent export, read from the code that
declares them.

The collectors build their families at scrape time, from the data they have (`GaugeMetricFamily(...)`,
the agent's `Families.gauge(...)`), so no registry lists them up front; this module reads the declaring
modules' syntax trees instead: each call that makes a family, with its name, help and labels as literal
strings, tuples of them, or names bound to those in the module or the function. A declaration whose
name, help or labels are not such a literal is an error, not a silent gap.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hack.refdocs.markdown import banner, code, table, text

FAMILY_KINDS = {
    "GaugeMetricFamily": "gauge",
    "CounterMetricFamily": "counter",
    "InfoMetricFamily": "info",
    "HistogramMetricFamily": "histogram",
}
FAMILIES_METHODS = {"gauge": "gauge", "counter": "counter"}
"""`accelpool_agent.metrics.families.Families`' methods: (name, doc, key, value, extra label pairs)."""


class DeclarationError(ValueError):
    """A metric declaration the generator cannot read."""


@dataclass(frozen=True)
class Metric:
    name: str
    """The family's name as a scrape shows it (a counter's with `_total`, an info's with `_info`)."""
    kind: str
    help: str
    labels: tuple[str, ...]
    source: str


def exposed_name(name: str, kind: str) -> str:
    """What prometheus_client exposes for a family of `kind` named `name`."""
    if kind == "counter":
        return name.removesuffix("_total") + "_total"
    if kind == "info":
        return name.removesuffix("_info") + "_info"
    return name


class _Values:
    """Evaluates the literal expressions of declarations: strings, tuples/lists of them (with `*` spreads),
    and names bound to such values by a plain assignment in the function or the module (or `known`)."""

    def __init__(self, known: Mapping[str, Any]) -> None:
        self.known = dict(known)

    def bind(self, statements: Iterable[ast.AST]) -> _Values:
        """A scope with the names `statements` bind (nested blocks included); a name bound to two
        different values, or to one that is not a literal, is not known in it."""
        scope = _Values(self.known)
        assigned: set[str] = set()
        nodes = [n for s in statements for n in ast.walk(s) if isinstance(n, ast.Assign) and len(n.targets) == 1]
        for statement in sorted(nodes, key=lambda n: n.lineno):
            target = statement.targets[0]
            if not isinstance(target, ast.Name):
                continue
            try:
                bound = scope.eval(statement.value)
            except DeclarationError:
                bound = None
            if bound is None or (target.id in assigned and scope.known.get(target.id) != bound):
                scope.known.pop(target.id, None)
            else:
                scope.known[target.id] = bound
            assigned.add(target.id)
        return scope

    def eval(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name) and node.id in self.known:
            return self.known[node.id]
        if isinstance(node, (ast.Tuple, ast.List)):
            values: list[Any] = []
            for element in node.elts:
                if isinstance(element, ast.Starred):
                    values += list(self.eval(element.value))
                else:
                    values.append(self.eval(element))
            return tuple(values)
        raise DeclarationError(f"line {node.lineno}: {ast.unparse(node)!r} is not a literal")


def module_constants(tree: ast.Module) -> dict[str, Any]:
    """A module's top-level names bound to literal strings or tuples (label sets such as `GPU_LABELS`)."""
    return _Values({}).bind([s for s in tree.body if isinstance(s, ast.Assign)]).known


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _argument(call: ast.Call, position: int, keyword: str) -> ast.expr | None:
    for item in call.keywords:
        if item.arg == keyword:
            return item.value
    return call.args[position] if len(call.args) > position else None


def declarations(source: str, label: str, known: Mapping[str, Any]) -> list[Metric]:
    """The families declared in one module's `source`, in order; `known`: names it imports (label sets)."""
    tree = ast.parse(source)
    module = _Values(known).bind([s for s in tree.body if isinstance(s, ast.Assign)])
    receivers: dict[str, tuple[str, ...]] = {}
    found: list[Metric] = []
    calls: list[tuple[ast.Call, _Values]] = []
    for function in _functions(tree):
        scope = module.bind(function.body)
        for node in ast.walk(function):
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                callee = node.value.func
                if isinstance(callee, ast.Name) and callee.id == "Families" and len(node.targets) == 1:
                    target = node.targets[0]
                    assert isinstance(target, ast.Name)
                    labels = tuple(scope.eval(node.value.args[0]))
                    if receivers.get(target.id, labels) != labels:
                        raise DeclarationError(f"{label}: `{target.id}` names two label sets")
                    receivers[target.id] = labels
            if isinstance(node, ast.Call):
                calls.append((node, scope))
    for call, scope in sorted(calls, key=lambda c: (c[0].lineno, c[0].col_offset)):
        callee = call.func
        if isinstance(callee, ast.Name) and callee.id in FAMILY_KINDS:
            kind = FAMILY_KINDS[callee.id]
            labels_node = _argument(call, 99, "labels")
            labels = tuple(scope.eval(labels_node)) if labels_node is not None else ()
            if kind == "histogram":
                labels += ("le",)
        elif (
            isinstance(callee, ast.Attribute)
            and callee.attr in FAMILIES_METHODS
            and isinstance(callee.value, ast.Name)
            and callee.value.id in receivers
        ):
            kind = FAMILIES_METHODS[callee.attr]
            extra = _argument(call, 4, "extra")
            pairs = extra.elts if isinstance(extra, (ast.List, ast.Tuple)) else []
            if extra is not None and not isinstance(extra, (ast.List, ast.Tuple)):
                raise DeclarationError(f"{label}:{call.lineno}: extra labels must be a literal list of pairs")
            extra_names = [scope.eval(p.elts[0]) for p in pairs if isinstance(p, ast.Tuple)]
            labels = receivers[callee.value.id] + tuple(extra_names)
        else:
            continue
        name_node, help_node = _argument(call, 0, "name"), _argument(call, 1, "documentation")
        if name_node is None or help_node is None:
            raise DeclarationError(f"{label}:{call.lineno}: a family needs a name and a help text")
        found.append(Metric(exposed_name(scope.eval(name_node), kind), kind, scope.eval(help_node), labels, label))
    return found


def merged(metrics: Sequence[Metric]) -> list[Metric]:
    """One entry per family, the first non-empty help kept; a family declared with two kinds or two label
    sets is an error."""
    by_name: dict[str, Metric] = {}
    for metric in metrics:
        seen = by_name.get(metric.name)
        if seen is None:
            by_name[metric.name] = metric
            continue
        if (seen.kind, seen.labels) != (metric.kind, metric.labels):
            raise DeclarationError(f"{metric.name} is declared twice differently ({seen.source}, {metric.source})")
        if not seen.help:
            by_name[metric.name] = metric
    missing = [m.name for m in by_name.values() if not m.help]
    if missing:
        raise DeclarationError(f"no help text for {', '.join(missing)}")
    return sorted(by_name.values(), key=lambda m: m.name)


def read(root: Path, paths: Sequence[str], shared: Sequence[str] = ()) -> list[Metric]:
    """The families declared in the modules at `paths` (relative to `root`); `shared`: modules whose
    top-level constants they import (label sets)."""
    known: dict[str, Any] = {}
    for path in shared:
        known.update(module_constants(ast.parse((root / path).read_text())))
    found: list[Metric] = []
    for path in paths:
        found += declarations((root / path).read_text(), path, known)
    return merged(found)


OPERATOR_MODULES = ("operator/accelpool/runtime/metrics.py",)
AGENT_PACKAGE = "device-agent/accelpool_agent/metrics"
AGENT_SHARED = (f"{AGENT_PACKAGE}/families.py",)


def agent_modules(root: Path) -> list[str]:
    """The agent's collector modules: every module of its metrics package but `families`, which makes
    the families the others name."""
    modules = sorted(str(p.relative_to(root)) for p in (root / AGENT_PACKAGE).glob("*.py"))
    return [m for m in modules if m not in AGENT_SHARED]


def _rows(metrics: Sequence[Metric]) -> list[list[str]]:
    return [[code(m.name), m.kind, ", ".join(code(label) for label in m.labels), text(m.help)] for m in metrics]


def render(operator: Sequence[Metric], agent: Sequence[Metric]) -> str:
    headers = ["Metric", "Type", "Labels", "Help"]
    return "\n".join(
        [
            "# Metrics reference\n",
            banner("the collectors in operator/accelpool/runtime/metrics.py and device-agent/accelpool_agent/metrics/"),
            "Every metric family the operator and the device agent export, with the help text a scrape shows. "
            "A counter is listed by the name a scrape shows (with `_total`), an info family with `_info` "
            '(value 1, its facts in labels). "No data" is an absent series, never a zero: a reading a device '
            "does not support, a check that was skipped. How to scrape them and what the dashboards and alerts "
            "make of them: [Observability](../tasks/observability.md), [Alerts](alerts.md).\n",
            "## Operator\n",
            "Served on the operator's metrics port (`operator.metricsPort`, 8080), `/metrics`; pool series "
            "carry `pool`. The values are read from the latest reconcile pass at scrape time "
            "([design notes](../design/operator-metrics.md)).\n",
            table(headers, _rows(operator)),
            "## Device agent\n",
            "Served by each agent on port 9402, `/metrics`. Every series carries `node` and `pool`; per-device "
            "series (`accelpool_gpu_*`, `accelpool_check_*`: a GPU there is any accelerator device, an AMD GPU, "
            "a Neuron device or a TPU chip too) also carry `gpu` (the index), `uuid` and `vendor` (nvidia, amd, "
            "aws, google).\n",
            table(headers, _rows(agent)),
        ]
    )


def page(root: Path) -> str:
    return render(read(root, OPERATOR_MODULES), read(root, agent_modules(root), AGENT_SHARED))
