"""The alert rules (charts/accelpool/files/alerts.yaml) with the real promtool: the file is valid,
every alert is documented like a runbook, and the unit tests in tests/contract/promtool/ pass —
each alert has a case where it fires and a case where it stays silent.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.environment import require_tool

pytestmark = pytest.mark.contract

ROOT = Path(__file__).resolve().parents[2]
ALERTS = ROOT / "charts" / "accelpool" / "files" / "alerts.yaml"
PROMTOOL_TESTS = sorted((Path(__file__).resolve().parent / "promtool").glob("*.yaml"))
SEVERITIES = {"critical", "warning", "info"}
DOCS_BASE = "https://github.com/accelpool/accelpool/blob/main"
"""The chart's docsBaseURL default (charts/accelpool/values.yaml), under which the file's runbook_url points."""


def _alerts() -> list[dict[str, Any]]:
    document = yaml.safe_load(ALERTS.read_text())
    return [rule for group in document["groups"] for rule in group["rules"] if "alert" in rule]


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    binary = require_tool("promtool")
    return subprocess.run([binary, *args], capture_output=True, text=True, timeout=120, check=False, cwd=ROOT)


def test_promtool_check_rules() -> None:
    result = _promtool("check", "rules", "--lint=all", "--lint-fatal", str(ALERTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {len(_alerts())} rules found" in result.stdout


def test_promtool_unit_tests_pass() -> None:
    assert PROMTOOL_TESTS, "no promtool unit tests in tests/contract/promtool/"
    result = _promtool("test", "rules", *map(str, PROMTOOL_TESTS))
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count("SUCCESS") == len(PROMTOOL_TESTS), result.stdout


def _expectations() -> dict[str, tuple[int, int]]:
    """alertname → (cases where it fires, cases where it must not) across every promtool test."""
    seen: dict[str, tuple[int, int]] = {}
    for path in PROMTOOL_TESTS:
        for test in yaml.safe_load(path.read_text())["tests"]:
            for case in test.get("alert_rule_test") or []:
                fires, silent = seen.get(case["alertname"], (0, 0))
                if case.get("exp_alerts"):
                    fires += 1
                else:
                    silent += 1
                seen[case["alertname"]] = (fires, silent)
    return seen


@pytest.mark.parametrize("alert", [a["alert"] for a in _alerts()])
def test_each_alert_is_unit_tested_firing_and_silent(alert: str) -> None:
    fires, silent = _expectations().get(alert, (0, 0))
    assert fires >= 1, f"{alert}: no promtool case where it fires"
    assert silent >= 1, f"{alert}: no promtool case where it stays silent"


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: str(rule["alert"]))
def test_each_alert_reads_like_a_runbook(rule: dict[str, Any]) -> None:
    name = rule["alert"]
    assert name.startswith("AccelPool"), name
    assert rule["labels"]["severity"] in SEVERITIES, name
    assert "for" in rule, f"{name}: no `for:`; a single bad scrape would page"
    annotations = rule["annotations"]
    assert set(annotations) >= {"summary", "description"}, name
    assert "{{ $labels." in annotations["summary"], f"{name}: the summary names no pool/node/gpu"
    description = annotations["description"]
    assert "First steps:" in description, f"{name}: the description has no 'First steps:'"
    assert re.search(r"\b(kubectl|curl|nvidia-smi)\b", description), f"{name}: no command to start with"


@pytest.mark.parametrize("rule", _alerts(), ids=lambda rule: str(rule["alert"]))
def test_each_alert_links_its_runbook(rule: dict[str, Any]) -> None:
    """kube-prometheus users' convention: `runbook_url`, here the alert's section of docs/reference/alerts.md
    (a `### <AlertName>` heading, whose GitHub anchor is the name lowercased). The promtool unit tests
    expect it on every alert they fire."""
    name = rule["alert"]
    assert rule["annotations"].get("runbook_url") == f"{DOCS_BASE}/docs/reference/alerts.md#{name.lower()}", name


def test_the_runbook_base_is_the_charts_default() -> None:
    values = yaml.safe_load((ROOT / "charts" / "accelpool" / "values.yaml").read_text())
    assert values["docsBaseURL"] == DOCS_BASE


def test_every_runbook_anchor_is_a_heading_of_the_alerts_reference() -> None:
    """docs/reference/alerts.md (generated) has a `### <AlertName>` heading per alert: GitHub's anchor for it is
    the name lowercased, which is what each runbook_url ends in."""
    headings = {
        line.removeprefix("### ").strip().lower()
        for line in (ROOT / "docs" / "reference" / "alerts.md").read_text().splitlines()
        if line.startswith("### ")
    }
    anchors = {rule["annotations"]["runbook_url"].rsplit("#", 1)[1] for rule in _alerts()}
    assert anchors and anchors <= headings, sorted(anchors - headings)
