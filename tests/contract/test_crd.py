"""The generated CRD: fresh, a valid apiextensions.k8s.io/v1 object, structural, and — evaluated with
cel-python like the API server would — agreeing with the models on every shared validation case."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import celpy
import kubernetes_validate
import pytest
import yaml

from accelpool import crd
from accelpool.validation import validate_object
from tests.cases import CASES, Case, pool
from tests.crd_admission import admission_errors, version_schema

pytestmark = pytest.mark.contract
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "accelpool.io_computepools.yaml"


@pytest.fixture(scope="module")
def definition() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(CRD_FILE.read_text())
    return loaded


def test_committed_crd_is_fresh() -> None:
    assert CRD_FILE.read_text() == crd.render_yaml(), "crds/ is stale: run `make crds`"


def test_validates_as_apiextensions_v1_object(definition: dict[str, Any]) -> None:
    kubernetes_validate.validate(definition, kubernetes_validate.latest_version(), strict=True)


def _walk(node: dict[str, Any], path: str = "") -> list[tuple[str, dict[str, Any]]]:
    found = [(path, node)]
    for name, child in (node.get("properties") or {}).items():
        found += _walk(child, f"{path}.{name}")
    if isinstance(node.get("additionalProperties"), dict):
        found += _walk(node["additionalProperties"], f"{path}.*")
    if "items" in node:
        found += _walk(node["items"], f"{path}[]")
    return found


def test_schema_is_structural(definition: dict[str, Any]) -> None:
    """Every node has a type, except int-or-string and the two-shape fields (preserve-unknown-fields)."""
    for path, node in _walk(version_schema(definition)):
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], path
            continue
        if "type" not in node:
            assert node.get("x-kubernetes-preserve-unknown-fields") is True, f"{path} has no type"
        for option in node.get("anyOf", []):
            assert "description" not in option and "default" not in option, path
        assert "$ref" not in node and "title" not in node and "nullable" not in node, path


def test_every_field_is_described(definition: dict[str, Any]) -> None:
    schema = version_schema(definition)
    for root in ("spec", "status"):
        for path, node in _walk(schema["properties"][root], root):
            if path.endswith("[]") or path.endswith(".*"):
                continue
            assert node.get("description"), f"{path} has no description"


def test_names_subresources_and_columns(definition: dict[str, Any]) -> None:
    spec = definition["spec"]
    assert spec["scope"] == "Cluster"
    assert spec["names"]["shortNames"] == ["cpool"]
    assert spec["names"]["categories"] == ["accelpool"]
    version = spec["versions"][0]
    assert version["subresources"]["status"] == {}
    assert version["subresources"]["scale"]["specReplicasPath"] == ".spec.nodes"
    names = [column["name"].upper() for column in version["additionalPrinterColumns"]]
    assert names == ["ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE"]


def _resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    node: dict[str, Any] | None = schema
    for part in json_path.lstrip(".").split("."):
        if node is None:
            return None
        if part == "metadata" and node is schema:
            return {"type": "object"}
        node = (node.get("properties") or {}).get(part)
    return node


def test_printer_columns_and_scale_paths_point_at_fields(definition: dict[str, Any]) -> None:
    version = definition["spec"]["versions"][0]
    schema = version_schema(definition)
    for column in version["additionalPrinterColumns"]:
        if column["jsonPath"] == ".metadata.creationTimestamp":
            continue
        field = _resolve(schema, column["jsonPath"])
        assert field is not None, f"printer column {column['name']} points at missing {column['jsonPath']}"
        expected = {"integer": "integer", "string": "string"}[column["type"]]
        assert field["type"] == expected, column
    for key, json_path in version["subresources"]["scale"].items():
        assert _resolve(schema, json_path) is not None, f"scale {key} points at missing {json_path}"


def test_cel_rules_compile(definition: dict[str, Any]) -> None:
    environment = celpy.Environment()
    rules = [rule for _, node in _walk(version_schema(definition)) for rule in node.get("x-kubernetes-validations", [])]
    assert len(rules) >= 5
    for rule in rules:
        environment.compile(rule["rule"])
        assert rule["message"]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_agrees_with_the_models(definition: dict[str, Any], case: Case) -> None:
    errors = admission_errors(definition, pool(case.spec))
    if case.layer == "crd":
        assert errors, f"the CRD admits {case.spec}, which the models reject"
    else:
        assert errors == [], f"the CRD rejects a case the models {'accept' if case.layer == 'valid' else 'own'}"


def test_pool_names_fit_a_label_value(definition: dict[str, Any]) -> None:
    """Names become `accelpool.io/pool` label values: the API server and the models stop at 63."""
    long_name = pool({"accelerator": "H100"}, name="x" * 64)
    assert admission_errors(definition, long_name) == [": a pool's name is a node label value: at most 63 characters"]
    assert admission_errors(definition, pool({"accelerator": "H100"}, name="x" * 63)) == []
    verdict = validate_object(long_name)
    assert [p.path for p in verdict.problems] == ["metadata.name"]
