"""The Grafana dashboards: the committed JSON is what the code generates, `accelpool dashboards`
writes and checks it, and each dashboard has the variables, panels and wiring Grafana needs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelpool import cli
from accelpool.cli import dashboards

ROOT = Path(__file__).resolve().parents[3]
COMMITTED = ROOT / "charts" / "accelpool" / "dashboards"


def test_committed_dashboards_are_fresh() -> None:
    rendered = dashboards.render()
    assert sorted(p.name for p in COMMITTED.glob("*.json")) == sorted(rendered)
    for name, text in rendered.items():
        assert (COMMITTED / name).read_text() == text, f"{name} is stale: run `make dashboards`"


def test_rendering_is_deterministic() -> None:
    assert dashboards.render() == dashboards.render()


def test_the_command_writes_checks_and_prunes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["dashboards", "--check", "-o", str(tmp_path)]) == 1
    (tmp_path / "old-dashboard.json").write_text("{}")
    assert cli.main(["dashboards", "-o", str(tmp_path)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(dashboards.render())
    assert cli.main(["dashboards", "--check", "-o", str(tmp_path)]) == 0
    (tmp_path / "gpu-node.json").write_text("{}\n")
    assert cli.main(["dashboards", "--check", "-o", str(tmp_path)]) == 1
    assert "gpu-node.json: stale" in capsys.readouterr().err


@pytest.fixture(params=["accelerator-pools.json", "gpu-node.json"])
def document(request: pytest.FixtureRequest) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(dashboards.render()[request.param])
    return loaded


def test_panels_are_wired_to_the_datasource_variable(document: dict[str, Any]) -> None:
    panels = [p for p in document["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in document["panels"]}) == len(document["panels"])
    for panel in panels:
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}, panel["title"]
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(set(refs)) == len(refs), panel["title"]
        assert all(t["expr"].strip() for t in panel["targets"]), panel["title"]
        assert panel["description"], panel["title"]
        assert 0 < panel["gridPos"]["w"] <= 24, panel["title"]


def test_variables(document: dict[str, Any]) -> None:
    variables = {v["name"]: v for v in document["templating"]["list"]}
    assert variables["datasource"]["type"] == "datasource" and variables["datasource"]["query"] == "prometheus"
    wanted = {"pool", "node", "vendor", "gpu"} if document["uid"] == dashboards.NODE_UID else {"pool", "node", "vendor"}
    assert set(variables) - {"datasource"} == wanted
    for name in wanted:
        assert variables[name]["includeAll"] and variables[name]["multi"] and variables[name]["allValue"] == ".*"
        assert variables[name]["query"].startswith("label_values(")


def test_pools_dashboard_covers_what_the_design_promises() -> None:
    document = json.loads(dashboards.render()["accelerator-pools.json"])
    exprs = " ".join(expr for _, expr in dashboards.expressions(document))
    for metric in (
        "accelpool_pool_nodes",  # members, ready, quarantined, desired
        "accelpool_pool_gpus",
        "accelpool_gpu_utilization_ratio",
        "accelpool_gpu_memory_used_bytes",
        "accelpool_gpu_power_watts",
        "accelpool_gpu_temperature_celsius",
        "accelpool_pool_measured_tflops",
        "accelpool_pool_expected_tflops",
        "accelpool_gpu_xid_errors_total",
        "accelpool_gpu_ecc_errors_total",
    ):
        assert metric in exprs, metric
    assert "$pool" in exprs


def test_node_dashboard_drills_down_per_gpu() -> None:
    document = json.loads(dashboards.render()["gpu-node.json"])
    per_gpu = [expr for _, expr in dashboards.expressions(document) if 'gpu=~"$gpu"' in expr]
    assert len(per_gpu) >= 10
    assert all('node=~"$node"' in expr for expr in per_gpu)
