"""Kubernetes' CEL through Google's implementation, held to what a real API server answered.

The recorded kube-apiserver v1.36.2 (../shared/fidelity/kubernetes/crd-admission-and-apply.yaml)
refused CRDs whose rules do not compile, citing cel-go's errors; accelpool_demo/apiserver/cel.py must refuse the same
rules with the same words, and accept every rule of every CRD the server stored. The rules accelpool
ships (its CRD, the chart's ValidatingAdmissionPolicy) and the published CRDs it writes to (Kueue,
Karpenter, ../shared/crds) must compile and type-check the same way.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from cel_expr_python import cel

from accelpool_api import DURATION_PATTERN
from accelpool_api.rules import cel_string
from accelpool_demo.apiserver.cel import CompileError, check_rules, environment, evaluate, rules_of
from tests.conformance import transcripts
from tests.contract.chart import one, render
from tests.support.cel_cost import UnmodelledCEL, estimate_schema
from tests.support.environment import require_shared

pytestmark = pytest.mark.contract
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
COMPILATION_FAILED = "compilation failed: "
VAP_VARIABLES = ("request", "object", "oldObject", "params", "namespaceObject", "variables")


def _crd_creations() -> list[tuple[str, Any, Any]]:
    """(step id and note, the CRD sent, the answer) of each CRD creation the recorded server was sent."""
    transcripts.require()
    return [
        (f"{step.id}: {step.note}", step.request["body"], step.response)
        for scenario in transcripts.load("crd-admission-and-apply")
        for step in scenario.steps
        if step.request is not None and step.request["method"] == "POST" and step.request["path"] == CRDS_PATH
    ]


def test_the_recorded_server_refused_and_accepted_the_same_rules() -> None:
    """Each CRD the real server was sent: the rules it refused for not compiling are the ones refused
    here, with its message (after "compilation failed: "), field for field; the others compile."""
    creations = _crd_creations()
    assert len(creations) >= 4
    refused_somewhere = False
    for note, crd, response in creations:
        (version,) = crd["spec"]["versions"]
        ours = {
            (problem.field, problem.detail.removeprefix(COMPILATION_FAILED))
            for problem in check_rules(version["schema"]["openAPIV3Schema"], "spec.validation.openAPIV3Schema")
        }
        causes = (response["body"].get("details") or {}).get("causes") or [] if response["code"] == 422 else []
        recorded = {
            (cause["field"], cause["message"].split(COMPILATION_FAILED, 1)[1])
            for cause in causes
            if COMPILATION_FAILED in cause["message"]
        }
        refused_somewhere |= bool(recorded)
        assert ours == recorded, note
    assert refused_somewhere, "the transcript no longer holds a CRD refused for a rule that does not compile"


def test_the_recorded_server_refused_the_same_rules_for_their_cost() -> None:
    """The cost estimate (tests/support/cel_cost) of each CRD the real server was sent whose rules compile: the
    Forbidden causes it answers are the server's, field for field and word for word. A rule the estimate
    does not model (`UnmodelledCEL`) is allowed only where the server refused nothing for cost."""
    refused_for_cost = 0
    for note, crd, response in _crd_creations():
        causes = (response["body"].get("details") or {}).get("causes") or [] if response["code"] == 422 else []
        if any(COMPILATION_FAILED in cause["message"] for cause in causes):
            continue  # refused before any cost is estimated
        recorded = {(cause["field"], cause["message"]) for cause in causes if "cost" in cause["message"]}
        (version,) = crd["spec"]["versions"]
        try:
            estimated = estimate_schema(version["schema"]["openAPIV3Schema"], "spec.validation.openAPIV3Schema")
        except UnmodelledCEL:
            assert not recorded, note
            continue
        assert {tuple(error.split(": ", 1)) for error in estimated.errors()} == recorded, note
        refused_for_cost += bool(recorded)
    assert refused_for_cost, "the transcript no longer holds a CRD refused for its rules' cost"


def test_an_unescaped_pattern_is_refused_as_the_server_refuses_it() -> None:
    """The rule that broke `helm install`: a regular expression's `\\.` written raw into a CEL literal."""
    raw = f"self.matches('{DURATION_PATTERN}')"
    with pytest.raises(CompileError, match=r"Syntax error: token recognition error at: ''\^\(\[0-9\]\{1,5\}\(\\\."):
        evaluate(raw, {"self": "1h"})
    escaped = f"self.matches({cel_string(DURATION_PATTERN)})"
    assert evaluate(escaped, {"self": "1.5h"}).value is True
    assert evaluate(escaped, {"self": "1,5h"}).value is False


def test_type_checking_sees_the_schema() -> None:
    """`self` has the schema's type: a misspelt field, a wrong operand or a non-bool rule is refused."""
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "nodes": {"type": "integer"},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                },
                "x-kubernetes-validations": [
                    {"rule": "self.nodes > 0 && self.labels.all(k, self.labels[k].size() < 64)"},
                    {"rule": "self.node > 0"},
                    {"rule": "self.nodes == 'one'"},
                    {"rule": "self.nodes"},
                ],
            }
        },
    }
    problems = {problem.field.rsplit("[", 1)[1]: problem.detail for problem in check_rules(schema)}
    assert set(problems) == {"1].rule", "2].rule", "3].rule"}
    assert "undefined field 'node'" in problems["1].rule"]
    assert "no matching overload for '_==_' applied to '(int, string)'" in problems["2].rule"]
    assert problems["3].rule"] == "cel expression must evaluate to a bool"


@pytest.mark.parametrize(
    "crd_file", ["crds/accelpool.io_computepools.yaml", "charts/accelpool/crds/accelpool.io_computepools.yaml"]
)
def test_accelpool_crd_rules_type_check(crd_file: str) -> None:
    crd = yaml.safe_load((Path(__file__).resolve().parents[2] / crd_file).read_text())
    for version in crd["spec"]["versions"]:
        schema = version["schema"]["openAPIV3Schema"]
        assert sum(1 for _ in rules_of(schema)) >= 10
        assert [str(problem) for problem in check_rules(schema)] == []


@pytest.mark.parametrize(
    "name",
    [
        "karpenter.sh_nodepools.yaml",
        "kueue.x-k8s.io_clusterqueues.yaml",
        "kueue.x-k8s.io_resourceflavors.yaml",
        "resource.nvidia.com_computedomains.yaml",
    ],
)
def test_published_crds_type_check(name: str) -> None:
    """The CRDs accelpool writes to are stored by real servers: our typing of `self` must accept them all."""
    crd = yaml.safe_load(require_shared(f"crds/{name}").read_text())
    for version in crd["spec"]["versions"]:
        assert [str(problem) for problem in check_rules(version["schema"]["openAPIV3Schema"])] == []


def test_the_agent_admission_policy_compiles(helm: str) -> None:
    """Every expression of the chart's ValidatingAdmissionPolicy compiles in Kubernetes' environment, with
    `request`, `object`, `oldObject`, `params`, `namespaceObject` and `variables` declared (the objects as
    `dyn`: the API server types them from its OpenAPI, which is not here)."""
    policy = one(render(helm), "ValidatingAdmissionPolicy")
    spec = policy["spec"]
    expressions = [
        *(c["expression"] for c in spec["matchConditions"]),
        *(v["expression"] for v in spec["variables"]),
        *(e for v in spec["validations"] for e in (v["expression"], v.get("messageExpression")) if e),
    ]
    assert len(expressions) >= 20
    env = environment(dict.fromkeys(VAP_VARIABLES, cel.Type.DYN))
    for expression in expressions:
        env.compile(expression)
