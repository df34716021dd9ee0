"""docs/reference/alerts.md: every alert of the chart's rule file, its expression and its runbook.

Read from charts/accelpool/files/alerts.yaml (what the chart's PrometheusRule embeds). Each alert gets a
`### <AlertName>` heading, so its anchor is the name in lower case: the alerts' `runbook_url`
annotations point there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from hack.refdocs.markdown import anchor, banner, code, table, text

ALERTS_FILE = "charts/accelpool/files/alerts.yaml"


class AlertError(ValueError):
    """An alert the page cannot document: no severity, summary or runbook."""


@dataclass(frozen=True)
class Alert:
    name: str
    group: str
    severity: str
    wait: str
    """The rule's `for` (how long the expression holds before the alert fires); "0s" when absent."""
    expr: str
    summary: str
    runbook: str


def alerts(rules: Mapping[str, Any]) -> list[Alert]:
    """The alerting rules of a Prometheus rule file, in file order; recording rules are left out."""
    found = []
    for group in rules.get("groups", ()):
        for rule in group.get("rules", ()):
            if "alert" not in rule:
                continue
            name = rule["alert"]
            annotations = rule.get("annotations") or {}
            missing = [
                what
                for what, present in (
                    ("labels.severity", (rule.get("labels") or {}).get("severity")),
                    ("annotations.summary", annotations.get("summary")),
                    ("annotations.description (the runbook)", annotations.get("description")),
                )
                if not present
            ]
            if missing:
                raise AlertError(f"alert {name} has no {', '.join(missing)}")
            found.append(
                Alert(
                    name=name,
                    group=group["name"],
                    severity=rule["labels"]["severity"],
                    wait=str(rule.get("for", "0s")),
                    expr=str(rule["expr"]).strip(),
                    summary=str(annotations["summary"]).strip(),
                    runbook=str(annotations["description"]).rstrip(),
                )
            )
    return found


def _fenced(body: str, language: str) -> str:
    fence = "````" if "```" in body else "```"
    return f"{fence}{language}\n{body}\n{fence}\n"


def _when(wait: str) -> str:
    if wait.rstrip("smh") in ("", "0"):
        return "fires as soon as the expression holds"
    return f"fires once the expression has held for {code(wait)}"


def render_alert(alert: Alert) -> str:
    return "\n".join(
        [
            f"### {alert.name}\n",
            f"Severity **{alert.severity}**; {_when(alert.wait)}.\n",
            f"> {text(alert.summary)}\n",
            _fenced(alert.expr, "promql"),
            "Runbook:\n",
            _fenced(alert.runbook, "text"),
        ]
    )


def render(found: Sequence[Alert]) -> str:
    rows = [[f"[{a.name}](#{anchor(a.name)})", a.severity, code(a.wait), text(a.summary)] for a in found]
    lines = [
        "# Alerts reference\n",
        banner(ALERTS_FILE),
        f"The {len(found)} alerts the chart ships: a PrometheusRule when `prometheusRule.enabled` "
        "([Helm values](helm-values.md#prometheusrule)), or the plain rule file "
        f"[`{ALERTS_FILE}`](../../{ALERTS_FILE}) for a Prometheus without the operator. Each alert's "
        "description is its runbook, quoted below with the expression it fires on, and its `runbook_url` "
        "annotation links here (under the chart's `docsBaseURL`); the summary and the "
        "runbook name the pool, node or GPU through the alert's labels (`{{ $labels.pool }}`). The "
        "metrics they read: [Metrics](metrics.md). `promtool test rules` tests every alert firing and "
        "staying silent (tests/contract/promtool/), and a contract test evaluates every expression "
        "against a real Prometheus scraping the real operator and agents.\n",
        table(["Alert", "Severity", "For", "Summary"], rows),
    ]
    group = None
    for alert in found:
        if alert.group != group:
            group = alert.group
            lines.append(f"## Group {code(group)}\n")
        lines.append(render_alert(alert))
    return "\n".join(lines)


def page(root: Path) -> str:
    return render(alerts(yaml.safe_load((root / ALERTS_FILE).read_text())))
