"""The generated CRD: fresh, a valid apiextensions.k8s.io/v1 object, structural, and — evaluated with
Google's CEL like the API server would — agreeing with the models on every shared validation case."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import accelpool_api as api
from accelpool.admission.review import PROBLEM_CHARS
from accelpool_api import crd
from accelpool_api.validation import validate_object
from accelpool_core.kube import ApiError
from accelpool_core.textio import one_line
from accelpool_demo.apiserver import serving
from tests.support.admission import Answer, Create
from tests.support.builders import pool_body
from tests.support.cases import CASES, Case
from tests.unit.api.test_examples import expected_rejection
from tests.unit.api.test_properties import JSONISH, SPECS

pytestmark = pytest.mark.contract
ROOT = Path(__file__).resolve().parents[2]
CRD_FILE = ROOT / "crds" / "accelpool.io_computepools.yaml"
EXAMPLES = sorted(p for p in (ROOT / "examples").glob("**/*.yaml") if "kind: ComputePool" in p.read_text())


def version_schema(crd: dict[str, Any]) -> dict[str, Any]:
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


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
    assert names == ["ACCELERATOR", "NODES", "READY", "GPUS", "PHASE", "AGE", "REASON", "QUARANTINED", "TFLOPS"]
    wide = [c["name"] for c in version["additionalPrinterColumns"] if c.get("priority", 0) == 1]
    assert wide == ["Reason", "Quarantined", "TFLOPS"], "`kubectl get -o wide` only"


def _resolve(schema: dict[str, Any], json_path: str) -> dict[str, Any] | None:
    """The schema of the field at a printer column's JSONPath; a filter (`[?(@.type=="Ready")]`) selects an item
    of an array, whose `@.` field must exist."""
    node: dict[str, Any] | None = schema
    for part in re.findall(r'\[\?\(@\.[A-Za-z]+=="[^"]*"\)\]|[^.\[]+', json_path):
        if node is None:
            return None
        if part == "metadata" and node is schema:
            return {"type": "object"}
        if part.startswith("[?"):
            key = part[len("[?(@.") :].split("==")[0]
            node = node.get("items") if node.get("type") == "array" else None
            if node is None or key not in (node.get("properties") or {}):
                return None
            continue
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
        expected = {"integer": "integer", "string": "string", "number": "number"}[column["type"]]
        assert field["type"] == expected, column
    for key, json_path in version["subresources"]["scale"].items():
        assert _resolve(schema, json_path) is not None, f"scale {key} points at missing {json_path}"
    # The server reads specReplicasPath as an int64 on every write and on every GET of /scale: one
    # shape only, and a default so that a pool that never set it has a scale to read.
    replicas = _resolve(schema, version["subresources"]["scale"]["specReplicasPath"])
    assert replicas is not None and replicas["type"] == "integer" and replicas["minimum"] == 0
    assert "default" in replicas and "x-kubernetes-preserve-unknown-fields" not in replicas


def _agree(create: Create, obj: dict[str, Any]) -> tuple[Answer, Any]:
    """The emulated API server (calling the operator's webhook over HTTPS) and `accelpool validate` agree."""
    answer = create(obj)
    verdict = validate_object(obj)
    assert answer.stage == verdict.stage, (answer, [str(p) for p in verdict.problems])
    said = [str(p) for p in verdict.problems]
    if verdict.stage == "webhook":  # the webhook sends each on one line, as the CLI prints it
        said = [one_line(line, PROBLEM_CHARS) for line in said]
    # A real server's order of several schema errors is not fixed (kube-openapi walks Go maps).
    assert sorted(answer.errors) == sorted(said)
    return answer, verdict


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_api_server_says_what_validate_says(case: Case, api_server_create: Create) -> None:
    """Every shared case through the emulated API server (strict decoding, schema, scale, CEL, webhook):
    the same stage rejects it with the same field errors, word for word, as `accelpool validate`."""
    answer, _ = _agree(api_server_create, pool_body(case.id, case.spec))
    assert answer.stage == (None if case.layer == "valid" else case.layer)


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: str(p.relative_to(ROOT)))
def test_examples_through_admission(path: Path, api_server_create: Create) -> None:
    """Every ComputePool under examples/ as `kubectl apply -f` sends it: valid ones stored, invalid ones
    rejected at the stage and with the words their `# expect:` comment quotes."""
    pools = [o for o in yaml.safe_load_all(path.read_text()) if isinstance(o, dict) and o.get("kind") == "ComputePool"]
    assert pools
    for obj in pools:
        answer, verdict = _agree(api_server_create, obj)
        if path.parent.name == "invalid":
            assert "\n".join(line.rstrip() for line in verdict.rejection.splitlines()) == expected_rejection(path)
        else:
            assert answer.accepted, answer.errors


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(spec=SPECS)
def test_any_spec_gets_the_same_answer_from_the_api_server_and_validate(
    spec: dict[str, Any], api_server_create: Create
) -> None:
    """Arbitrary specs, right and wrong in every way at once: the same stage, the same field errors."""
    try:
        json.dumps(spec, allow_nan=False)
    except ValueError:
        assume(False)  # NaN and infinities are not JSON: no API request can carry them
    _agree(api_server_create, pool_body("case", spec))


DOCUMENTS = st.builds(
    lambda metadata, spec, extra: (
        {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": metadata, "spec": spec} | extra
    ),
    st.fixed_dictionaries(
        {"name": st.one_of(st.from_regex(r"[a-z0-9]{1,70}", fullmatch=True), st.text(max_size=5), st.just("Bad_Name"))},
        optional={"labels": st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=2), "lables": JSONISH},
    ),
    SPECS,
    st.dictionaries(st.sampled_from(["status", "foo"]), JSONISH, max_size=1),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(document=DOCUMENTS)
def test_any_document_gets_the_same_answer_from_the_api_server_and_validate(
    document: dict[str, Any], api_server_create: Create
) -> None:
    """Names (ObjectMeta's rules, then the schema's maxLength), misspelled metadata, a status with
    unknown fields (strict decoding reads it; a create drops it), an unknown top-level field."""
    try:
        json.dumps(document, allow_nan=False)
    except ValueError:
        assume(False)
    _agree(api_server_create, document)


def test_unknown_fields_are_dropped_for_clients_that_do_not_ask_for_strict_validation(
    api_server_create: Create,
) -> None:
    """The API's default (fieldValidation=Warn: client-go, Helm) stores the object without the field."""
    obj = pool_body("case", {"accelerator": "H100", "gpus": 8})
    assert api_server_create(obj).stage == "decode"
    warned = api_server_create(obj, field_validation="Warn")
    assert warned.accepted and warned.warnings == ['unknown field "spec.gpus"']
    assert warned.stored is not None and "gpus" not in warned.stored["spec"]
    ignored = api_server_create(obj, field_validation="Ignore")
    assert ignored.accepted and ignored.warnings == []


def test_pool_names_fit_a_label_value(api_server_create: Create) -> None:
    """Names become `accelpool.io/pool` label values: the API server and `accelpool validate` stop at 63."""
    long_name = pool_body("x" * 64, {"accelerator": "H100"})
    answer, _ = _agree(api_server_create, long_name)
    assert answer.errors[0] == "metadata.name: Too long: may not be more than 63 bytes"
    _agree(api_server_create, pool_body("x" * 63, {"accelerator": "H100"}))


async def test_a_rule_that_errors_rejects(definition: dict[str, Any]) -> None:
    """As on a real server, a CEL rule that cannot be evaluated rejects the object; it does not pass (the
    pool CRD's schema with a broken rule, served as a CRD of another group)."""
    broken = copy.deepcopy(definition)
    broken["metadata"]["name"] = "computepools.broken.example.com"
    broken["spec"]["group"] = "broken.example.com"
    spec = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    spec["x-kubernetes-validations"] = [{"rule": "self.nodes / 0 == 1", "message": "never"}]
    obj = {**pool_body("case", {"accelerator": "H100"}), "apiVersion": f"broken.example.com/{api.VERSION}"}
    async with serving() as running, running.client() as client:
        await client.create("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", broken)
        with pytest.raises(ApiError) as refused:
            await client.create(f"/apis/broken.example.com/{api.VERSION}/{api.PLURAL}", obj)
    assert refused.value.status == 422
    assert 'spec: Invalid value: "object": division by zero evaluating rule: never' in refused.value.message


def test_a_misspelled_metadata_field_fails_strict_decoding(api_server_create: Create) -> None:
    """metadata is decoded as metav1.ObjectMeta: `lables` is as unknown there as `gpus` is in spec."""
    obj = pool_body("case", {"accelerator": "H100"})
    obj["metadata"]["lables"] = {"team": "ml"}
    answer, verdict = _agree(api_server_create, obj)
    assert answer.errors == ['unknown field "metadata.lables"'] and verdict.stage == "decode"
