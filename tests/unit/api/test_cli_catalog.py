"""`accelpool catalog` and `accelpool crd` as a user runs them (through the console script too)."""

from __future__ import annotations

import json

import pytest

from accelpool import cli
from accelpool_core import catalog


def test_table_lists_every_entry(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:3] == ["NAME", "VENDOR", "MEMORY"]
    assert [line.split()[0] for line in lines[1:]] == [a.name for a in catalog.ACCELERATORS]


def test_one_entry_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog", "nvidia-h100-80gb", "-o", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert entry["name"] == "H100-80GB"
    assert entry["resource"] == "nvidia.com/gpu"
    assert entry["peakTFLOPS"]["bf16"] == 989
    assert entry["bandwidthGBps"] == 3350
    profiles = {p["name"]: p for p in entry["migProfiles"]}
    assert profiles["3g.40gb"] == {
        "name": "3g.40gb",
        "computeSlices": 3,
        "memorySlices": 4,
        "maxInstances": 2,
        "fillsGPU": 2,
        "resource": "nvidia.com/mig-3g.40gb",
    }


def test_a30_shows_its_own_slice_budgets(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog", "a30", "-o", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert (entry["name"], entry["computeCapability"]) == ("A30", "8.0")
    assert (entry["migComputeSlices"], entry["migMemorySlices"]) == (4, 4)
    assert {p["name"]: p["fillsGPU"] for p in entry["migProfiles"]} == {
        "1g.6gb": 4,
        "1g.6gb+me": 1,
        "2g.12gb": 2,
        "2g.12gb+me": 1,
        "4g.24gb": 1,
    }
    assert [p["resource"] for p in entry["migProfiles"] if p["name"].endswith("+me")] == [
        "nvidia.com/mig-1g.6gb.me",
        "nvidia.com/mig-2g.12gb.me",
    ]
    assert cli.main(["catalog", "a30"]) == 0
    assert "compute/4  memory/4" in capsys.readouterr().out
    assert cli.main(["catalog", "h100"]) == 0
    assert "compute/7  memory/8" in capsys.readouterr().out


def test_unknown_entry_suggests(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog", "H10"]) == 1
    assert "did you mean H100-80GB" in capsys.readouterr().err


def test_whole_catalog_as_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog", "-o", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(catalog.ACCELERATORS)


def test_an_entry_says_its_unit_and_whether_it_trains(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["catalog", "MI250X", "-o", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)
    assert (entry["memoryGB"], entry["unitsPerPackage"], entry["training"]) == (64, 2, True)
    assert cli.main(["catalog", "MI250X"]) == 0
    assert "one of 2 per package (what amd.com/gpu counts)" in capsys.readouterr().out
    assert cli.main(["catalog", "inf2"]) == 0
    assert "inference only" in capsys.readouterr().out
