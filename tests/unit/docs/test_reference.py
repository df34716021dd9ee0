"""The reference pages generated from the code (hack/refdocs): each committed page is what the code renders
now, and each generator, on small inputs, documents what it is given and refuses what it cannot document."""

from __future__ import annotations

import argparse
import os
import re
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool.runtime import metrics as operator_metrics
from hack.refdocs import alerts, api, cli, helm_values, markdown, metrics
from hack.refdocs.pages import render_all
from tests.support.environment import ROOT

RENDERED = render_all(ROOT)


@pytest.mark.parametrize("page", sorted(RENDERED))
def test_the_committed_page_is_current(page: str) -> None:
    committed = (ROOT / page).read_text() if (ROOT / page).exists() else ""
    assert committed == RENDERED[page], f"{page} is stale: run `make docs`"


def test_every_reference_page_is_in_the_index() -> None:
    index = (ROOT / "docs" / "README.md").read_text()
    for page in RENDERED:
        if page.startswith("docs/reference/"):
            assert f"]({page.removeprefix('docs/')})" in index, page


# markdown


def test_cells_stay_on_one_line_and_keep_their_pipes() -> None:
    assert markdown.cell("a |\n b") == "a \\| b"


def test_code_spans_hold_backticks() -> None:
    assert markdown.code("a`b") == "``a`b``"
    assert markdown.code("`x`") == "`` `x` ``"
    assert markdown.code("") == '`""`'


def test_prose_keeps_tags_and_globs_visible_outside_code() -> None:
    assert markdown.text("<name> *.yaml `<kept>*`") == "&lt;name> \\*.yaml `<kept>*`"


def test_anchors_are_githubs() -> None:
    assert markdown.anchor("AccelPoolGPUUnhealthy") == "accelpoolgpuunhealthy"
    assert markdown.anchor("status.members[]") == "statusmembers"
    assert markdown.anchor("accelpool demo inject") == "accelpool-demo-inject"


# the API


def _definition(spec: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "spec": {
            "group": "example.io",
            "scope": "Cluster",
            "names": {"kind": "Thing", "plural": "things", "shortNames": ["th"], "categories": []},
            "versions": [
                {
                    "name": "v1",
                    "schema": {
                        "openAPIV3Schema": {
                            "description": "A thing.",
                            "properties": {"spec": spec, "status": {"type": "object", "properties": {}}},
                        }
                    },
                }
            ],
        }
    }


def test_the_api_page_gives_type_default_constraints_and_rules() -> None:
    spec: dict[str, Any] = {
        "type": "object",
        "description": "What it should be.",
        "required": ["size"],
        "properties": {
            "size": {"type": "integer", "minimum": 1, "maximum": 9, "default": 3, "description": "How big."},
            "mode": {"type": "string", "enum": ["a", "b"], "description": "Which <one>."},
            "inner": {
                "type": "object",
                "description": "Nested.",
                "properties": {"x": {"type": "string", "pattern": "^x|y$", "description": "An x."}},
            },
            "shape": {"description": "Two shapes.", "x-kubernetes-preserve-unknown-fields": True},
        },
        "x-kubernetes-validations": [
            {"rule": "self.size > 2", "message": "size must exceed 2", "fieldPath": ".size"},
            {"rule": "true", "message": "the whole object holds"},
        ],
    }
    shape = {
        "type": "object",
        "description": "Typed form.",
        "properties": {"n": {"type": "integer", "description": "N."}},
    }
    page = api.render(_definition(spec), {"spec.shape": shape})
    assert "| `size` | integer | `3` | required; 1 to 9; rule: size must exceed 2 | How big. |" in page
    assert "| `mode` | string |  | one of `a`, `b` | Which &lt;one>. |" in page
    assert "| `inner` | [object](#specinner) |" in page and "### spec.inner\n" in page
    assert "matches `^x\\|y$`" in page
    assert "- the whole object holds" in page
    assert "| `shape` | string or [object](#specshape) |" in page and "### spec.shape\n\nTyped form." in page


def test_a_field_without_a_description_of_its_own_is_an_error() -> None:
    """pydantic gives an undescribed field its name as a title; a page of "Phase: Phase" teaches nothing."""
    spec: dict[str, Any] = {
        "type": "object",
        "description": "What it should be.",
        "properties": {"phase": {"type": "string", "description": "Phase"}, "size": {"type": "integer"}},
    }
    with pytest.raises(api.UndocumentedField, match=r"spec\.phase, spec\.size"):
        api.render(_definition(spec), {})


def test_the_api_page_says_provisioner_is_an_object() -> None:
    """The hand-written table said `provisioner: static|karpenter`; the field is {type, nodeClass}."""
    page = RENDERED["docs/reference/api.md"]
    assert "| `provisioner` | [object](#specprovisioner) |" in page
    assert "| `type` | string | `static` | one of `static`, `karpenter` |" in page
    assert "| `nodeClass` | string | `default` |" in page


# metrics

AGENT_LIKE = """
LABELS = ("node", "pool")


def collect(snapshot):
    f = Families(LABELS)
    doc = "Things seen."
    f.counter("x_things_total", doc, key, 1.0, [("kind", "a")])
    f.counter("x_things_total", "", key, 2.0, [("kind", "b")])
    f.gauge("x_level", "A level.", key, None)
    info = InfoMetricFamily("x_build", "Build facts.", labels=[*LABELS, "version"])
    yield HistogramMetricFamily("x_seconds", "Durations.", buckets=[])
    yield CounterMetricFamily("x_runs", "Runs.", value=3)
"""


def test_declarations_are_read_from_the_collectors_source() -> None:
    found = metrics.merged(metrics.declarations(AGENT_LIKE, "m.py", {}))
    assert [(m.name, m.kind, m.labels, m.help) for m in found] == [
        ("x_build_info", "info", ("node", "pool", "version"), "Build facts."),
        ("x_level", "gauge", ("node", "pool"), "A level."),
        ("x_runs_total", "counter", (), "Runs."),
        ("x_seconds", "histogram", ("le",), "Durations."),
        ("x_things_total", "counter", ("node", "pool", "kind"), "Things seen."),
    ]


def test_a_declaration_that_is_not_literal_is_an_error() -> None:
    source = "def collect():\n    yield GaugeMetricFamily(name_of(x), 'Help.')\n"
    with pytest.raises(metrics.DeclarationError, match="name_of"):
        metrics.declarations(source, "m.py", {})


def test_a_family_declared_twice_differently_is_an_error() -> None:
    source = "def collect():\n    GaugeMetricFamily('a', 'A.', labels=['x'])\n    GaugeMetricFamily('a', 'A.')\n"
    with pytest.raises(metrics.DeclarationError, match="declared twice"):
        metrics.merged(metrics.declarations(source, "m.py", {}))


def _documented(page: str) -> set[str]:
    return set(re.findall(r"^\| `(accelpool_\w+)` \|", page, flags=re.MULTILINE))


def _exposed(exposition: str) -> set[str]:
    """The families of a scrape, by the names the page lists (a counter's with _total)."""
    names = set()
    for kind, name in (
        (m.group(2), m.group(1)) for m in re.finditer(r"^# TYPE (\S+) (\S+)$", exposition, re.MULTILINE)
    ):
        names.add(metrics.exposed_name(name, "counter") if kind == "counter" else name)
    return names


def test_the_page_lists_every_family_a_real_agent_scrape_shows() -> None:
    """Cross-check of the syntax-tree reading: the agent's golden scrape (four fake H100s) shows no family the
    page leaves out."""
    golden = (ROOT / "tests" / "unit" / "agent" / "golden" / "metrics_fake_h100x4.prom").read_text()
    missing = _exposed(golden) - _documented(RENDERED["docs/reference/metrics.md"])
    assert not missing


def test_the_page_lists_every_family_the_operator_exposes() -> None:
    exposition = operator_metrics.exposition(operator_metrics.OperatorMetrics()).decode()
    missing = _exposed(exposition) - _documented(RENDERED["docs/reference/metrics.md"])
    assert not missing


# alerts

RULES: dict[str, Any] = {
    "groups": [
        {
            "name": "g",
            "rules": [
                {"record": "x:sum", "expr": "sum(x)"},
                {
                    "alert": "SomethingWrong",
                    "expr": "x > 1\n",
                    "for": "5m",
                    "labels": {"severity": "critical"},
                    "annotations": {"summary": "x is {{ $value }}", "description": "1. look\n2. fix"},
                },
            ],
        }
    ]
}


def test_each_alert_has_its_heading_expression_and_runbook() -> None:
    page = alerts.render(alerts.alerts(RULES))
    assert "[SomethingWrong](#somethingwrong) | critical | `5m` |" in page
    assert "### SomethingWrong\n" in page and "```promql\nx > 1\n```" in page
    assert "```text\n1. look\n2. fix\n```" in page
    assert "x:sum" not in page


def test_an_alert_without_a_runbook_is_an_error() -> None:
    rule = RULES["groups"][0]["rules"][1]
    broken = {"groups": [{"name": "g", "rules": [{**rule, "annotations": {"summary": "s"}}]}]}
    with pytest.raises(alerts.AlertError, match=r"SomethingWrong has no annotations\.description"):
        alerts.alerts(broken)


def test_the_alerts_page_has_every_alert_of_the_chart_under_its_lower_case_anchor() -> None:
    """The alerts' runbook_url annotations point at <page>#<alert name in lower case>."""
    rules = yaml.safe_load((ROOT / alerts.ALERTS_FILE).read_text())
    names = [r["alert"] for g in rules["groups"] for r in g["rules"] if "alert" in r]
    page = RENDERED["docs/reference/alerts.md"]
    assert len(names) == 22
    for name in names:
        assert f"\n### {name}\n" in page and markdown.anchor(name) == name.lower()


# Helm values

SCHEMA: dict[str, Any] = {
    "type": "object",
    "definitions": {"port": {"type": "integer", "minimum": 1, "maximum": 65535}},
    "properties": {
        "global": {"type": "object"},
        "server": {
            "type": "object",
            "properties": {
                "port": {"$ref": "#/definitions/port"},
                "mode": {"type": "string", "enum": ["a", "b"]},
                "resources": {"type": "object"},
                "tls": {"type": "object", "properties": {"enabled": {"type": "boolean"}}},
            },
        },
    },
}
VALUES = textwrap.dedent(
    """\
    # The server.
    server:
      # -- Where it listens.
      port: 8080
      # Which mode; examples:
      #   mode: b
      # -- a or b.
      mode: a
      # -- Its resources.
      resources:
        requests:
          cpu: 1m
      # TLS settings.
      tls:
        # -- Serve TLS.
        enabled: false
    """
)


def test_values_are_documented_from_the_schema_and_the_comments() -> None:
    [section] = helm_values.sections(VALUES, SCHEMA)
    assert section.key == "server" and section.intro == "The server."
    rows = {r.path: r for r in section.rows}
    assert list(rows) == ["server.port", "server.mode", "server.resources", "server.tls", "server.tls.enabled"]
    assert (rows["server.port"].type, rows["server.port"].default, rows["server.port"].constraints) == (
        "integer",
        8080,
        ("1 to 65535",),
    )
    assert rows["server.mode"].description == "Which mode; examples: `mode: b` a or b."
    assert rows["server.resources"].default == {"requests": {"cpu": "1m"}}
    assert rows["server.tls"].group and rows["server.tls"].description == "TLS settings."


def test_a_value_without_a_description_is_an_error() -> None:
    undescribed = VALUES.replace("  # -- Where it listens.\n", "")
    with pytest.raises(helm_values.ValuesError, match=r"server.port: no description"):
        helm_values.sections(undescribed, SCHEMA)


def test_a_value_the_schema_allows_but_values_yaml_leaves_out_is_an_error() -> None:
    schema = yaml.safe_load(yaml.safe_dump(SCHEMA))
    schema["properties"]["server"]["properties"]["extra"] = {"type": "string"}
    with pytest.raises(helm_values.ValuesError, match=r"server.extra: values.schema.json allows it"):
        helm_values.sections(VALUES, schema)


def test_the_chart_readme_installs_and_lists_every_value() -> None:
    readme = RENDERED["charts/accelpool/README.md"]
    assert "helm install accelpool charts/accelpool" in readme
    for path in ("image.tag", "operator.replicas", "agent.images", "prometheusRule.alertLabels", "dashboards.label"):
        assert f"| `{path}` |" in readme, path


# the command line


def test_commands_flags_defaults_and_choices() -> None:
    parser = argparse.ArgumentParser(prog="tool", description="A tool.")
    commands = parser.add_subparsers(dest="command")
    run = commands.add_parser("run", help="run it", description="Runs it.")
    run.add_argument("-n", "--count", type=int, default=3, metavar="N", help="how many (default %(default)s)")
    run.add_argument("-o", "--output", choices=("text", "json"), default="text")
    run.add_argument("-q", action="store_true", help="quiet")
    run.add_argument("files", nargs="*", help="inputs")
    page = cli.render([parser])
    assert "### tool run\n\nRun it.\n" in page
    assert "| `-n`, `--count` | `N` | `3` | how many (default 3) |" in page
    assert "| `-o`, `--output` | `{text,json}` | `text` |  |" in page
    assert "| `-q` |  |  | quiet |" in page
    assert "| `files` | positional |  | inputs |" in page
    assert "Subcommands: [`tool run`](#tool-run)." in page


def test_the_parsers_are_built_without_the_callers_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NODE_NAME", "my-laptop")
    page = cli.render(cli.parsers())
    assert "my-laptop" not in page
    assert os.environ["NODE_NAME"] == "my-laptop"


def test_the_cli_page_shows_validates_recursive_flag() -> None:
    assert "| `-R`, `--recursive` |" in RENDERED["docs/reference/cli.md"]


def test_every_generated_page_names_its_generator() -> None:
    for page, content in RENDERED.items():
        assert "Generated by `make docs` (hack/refdocs)" in content.split("\n\n")[1], page
        assert Path(page).suffix == ".md"
