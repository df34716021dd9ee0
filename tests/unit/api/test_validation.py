"""The shared validation cases through the models and through `accelpool validate` (the CRD side is
tests/contract/test_crd.py): same cases, same verdicts, errors naming path, value and remedy."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

from accelpool import cli
from accelpool_api.validation import validate_object, validate_spec
from accelpool_core import catalog
from tests.support.builders import pool_body
from tests.support.cases import CASES, Case


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_models(case: Case) -> None:
    spec, problems = validate_spec(case.spec)
    if case.layer == "valid":
        assert spec is not None and problems == (), problems
        return
    assert spec is None
    assert [p for p in problems if p.path == case.path and case.says in str(p)], (
        f"expected {case.path}: ...{case.says}..., got {[str(p) for p in problems]}"
    )


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_cli(case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "pool.yaml"
    path.write_text(yaml.safe_dump(pool_body(case.id, case.spec)))
    code = cli.main(["validate", "-f", str(path)])
    out = capsys.readouterr().out
    if case.layer == "valid":
        assert code == 0 and f"ComputePool/{case.id}: valid" in out
    elif case.layer == "decode":
        assert code == 1
        assert f'ComputePool/{case.id}: unknown field "{case.path}"' in out, out
    else:
        assert code == 1
        assert f"ComputePool/{case.id}: {case.path}: " in out and case.says in out, out


def test_a_stream_reports_each_object(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good, bad = next(c for c in CASES if c.layer == "valid"), next(c for c in CASES if c.layer == "webhook")
    path = tmp_path / "many.yaml"
    path.write_text(yaml.safe_dump_all([pool_body("good", good.spec), pool_body("bad", bad.spec)]))
    assert cli.main(["validate", "-f", str(path), "-o", "json"]) == 1
    report = yaml.safe_load(capsys.readouterr().out)
    assert [(r["object"], r["valid"]) for r in report] == [("ComputePool/good", True), ("ComputePool/bad", False)]
    assert report[1]["problems"][0]["path"] == bad.path


def test_non_objects_are_problems_not_crashes() -> None:
    assert not validate_object(["just", "a list"]).valid
    wrong_kind = validate_object(yaml.safe_load("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {}\n"))
    assert [p.path for p in wrong_kind.problems][:2] == ["apiVersion", "kind"]


def test_unreadable_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["validate", "-f", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_resolution_of_valid_specs() -> None:
    spec, _ = validate_spec({"accelerator": {"name": "h100", "formFactor": "PCIe", "count": 4}})
    assert spec is not None
    resolved = spec.resolve()
    assert resolved.entry.name == "H100-80GB-PCIE" and resolved.count == 4
    assert [m.name for m in resolved.matches] == ["H100-80GB-PCIE"]
    spec, _ = validate_spec({"accelerator": "H100:8"})
    assert spec is not None
    assert [m.name for m in spec.resolve().matches] == ["H100-80GB", "H100-80GB-PCIE"]
    assert spec.resolve().display == "H100-80GB x8"


@pytest.mark.parametrize(
    ("value", "desired", "limit"), [("50%", 4, 2), ("50%", 1, 1), ("0%", 8, 0), ("25%", 10, 2), (3, 10, 3)]
)
def test_circuit_breaker_limit(value: int | str, desired: int, limit: int) -> None:
    spec, _ = validate_spec({"accelerator": "H100", "health": {"maxUnavailable": value}})
    assert spec is not None and spec.health.max_unavailable_nodes(desired) == limit


@pytest.mark.parametrize("value", [[1], {"n": 1}, 1.5, True, None])
def test_a_max_unavailable_of_another_type_is_a_schema_error_not_a_crash(value: object) -> None:
    """int-or-string given a list, a map, a float or a bool: refused by the schema (the API server's type error
    on the field), never a traceback from the rule that reads it."""
    verdict = validate_object(pool_body("case", {"accelerator": "H100", "health": {"maxUnavailable": value}}))
    if value is None:  # a null is pruned, and the default (50%) applies
        assert verdict.valid, [str(p) for p in verdict.problems]
    else:
        assert verdict.stage == "schema"
        assert any(p.path == "spec.health.maxUnavailable" for p in verdict.problems)


def test_a_form_factor_without_memory_picks_the_variant_that_comes_in_it() -> None:
    spec, problems = validate_spec({"accelerator": {"name": "H100", "formFactor": "NVL"}})
    assert spec is not None, problems
    resolved = spec.resolve()
    assert resolved.entry.name == "H100-94GB-NVL"
    assert [m.name for m in resolved.matches] == ["H100-94GB-NVL"]
    assert [p.message for p in problems] == []


def test_a_form_factor_in_several_memory_sizes_needs_the_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """No model of the catalog comes so today; a V100 in two PCIe sizes other than the named 16GB stands in."""
    v100 = catalog.BY_NAME["V100-16GB"]
    pcie = [
        dataclasses.replace(
            v100, name=f"V100-{gb}GB-PCIE", memory_gb=gb, form_factor=catalog.FormFactor.PCIE, aliases=()
        )
        for gb in (32, 48)
    ]
    monkeypatch.setattr("accelpool_core.catalog.index.ACCELERATORS", (*catalog.ACCELERATORS, *pcie))
    problems = validate_spec({"accelerator": {"name": "V100", "formFactor": "PCIe"}})[1]
    assert [(p.path, p.message) for p in problems] == [
        ("spec.accelerator.memory", "V100 PCIe comes with 32GB, 48GB: say which with memory")
    ]
    spec, _ = validate_spec({"accelerator": {"name": "V100", "memory": "48GB", "formFactor": "PCIe"}})
    assert spec is not None and spec.resolve().entry.name == "V100-48GB-PCIE"


def test_a_directory_is_read_flat_and_recursive_descends(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """kubectl's semantics: `-f DIR` reads the directory's files; `-R` the directories below it too."""
    good = next(c for c in CASES if c.layer == "valid")
    (tmp_path / "sub" / "deeper").mkdir(parents=True)
    for place, name in (("", "top"), ("sub", "middle"), ("sub/deeper", "bottom")):
        (tmp_path / place / f"{name}.yaml").write_text(yaml.safe_dump(pool_body(name, good.spec)))
    assert cli.main(["validate", "-f", str(tmp_path)]) == 0
    assert "1 valid, 0 invalid" in capsys.readouterr().err
    assert cli.main(["validate", "-R", "-f", str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert [line.split(": ")[1] for line in out] == ["ComputePool/bottom", "ComputePool/middle", "ComputePool/top"]


def test_every_example_is_reached_by_validate_recursive(capsys: pytest.CaptureFixture[str]) -> None:
    """`accelpool validate -R -f examples/` (what the docs show) checks every pool in examples/, the
    Karpenter ones included; those in examples/invalid/ are invalid on purpose."""
    examples = Path(__file__).resolve().parents[3] / "examples"
    files = sorted(p for p in examples.glob("**/*.yaml") if "kind: ComputePool" in p.read_text())
    assert any(p.parent.name == "karpenter" for p in files)
    assert cli.main(["validate", "--recursive", "-o", "json", "-f", str(examples)]) == 1
    report = yaml.safe_load(capsys.readouterr().out)
    assert sorted({Path(r["file"]) for r in report}) == files
    assert all(r["valid"] == (Path(r["file"]).parent.name != "invalid") for r in report)
