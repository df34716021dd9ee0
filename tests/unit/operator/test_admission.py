"""`accelpool.admission.review`: AdmissionReviews answered with `accelpool validate`'s verdict and words."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool import cli
from accelpool.admission import review
from accelpool_api import validation
from tests.support.builders import pool_body
from tests.support.cases import CASES

ROOT = Path(__file__).resolve().parents[3]
INVALID_EXAMPLES = sorted((ROOT / "examples" / "invalid").glob("*.yaml"))
VALID = {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}
NOT_OFFERED = {"accelerator": "H100:8", "mig": {"profile": "1g.5gb"}}
"""A catalog rule: the CRD admits it, `accelpool validate` does not."""


def review_document(operation: str, obj: Any, old: Any = None, **request: Any) -> dict[str, Any]:
    payload: dict[str, Any] = {"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": operation, **request}
    if obj is not None:
        payload["object"] = obj
    if old is not None:
        payload["oldObject"] = old
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": payload}


def answer(document: dict[str, Any]) -> dict[str, Any]:
    result = review.review(document)
    assert result["apiVersion"] == "admission.k8s.io/v1" and result["kind"] == "AdmissionReview"
    assert result["response"]["uid"] == document["request"]["uid"]
    response: dict[str, Any] = result["response"]
    return response


def cli_formatted(obj: dict[str, Any]) -> str:
    """The problems `accelpool validate` prints for `obj`, as the denial's message lists them."""
    return validation.denial_message(validation.validate_object(obj).problems)


def test_create_of_a_valid_pool_is_allowed() -> None:
    assert answer(review_document("CREATE", pool_body("case", VALID))) == {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "allowed": True,
    }


def test_create_breaking_a_catalog_rule_is_denied_as_invalid_with_validates_message() -> None:
    obj = pool_body("wrong-profile", NOT_OFFERED)
    response = answer(review_document("CREATE", obj))
    assert response["allowed"] is False
    status = response["status"]
    assert (status["status"], status["code"], status["reason"]) == ("Failure", 422, "Invalid")
    assert status["message"] == cli_formatted(obj) == review.denial_message(validation.validate_object(obj))
    assert status["message"].startswith(
        'spec.mig.profile: Invalid value: "1g.5gb": mig profile 1g.5gb is not offered by H100-80GB; valid: '
    )
    assert status["details"]["name"] == "wrong-profile" and status["details"]["kind"] == "ComputePool"
    [cause] = status["details"]["causes"]
    assert cause["field"] == "spec.mig.profile" and cause["reason"] == "FieldValueInvalid"
    # kubectl prints `field: message` of each cause, after `The ComputePool "wrong-profile" is invalid: `
    assert status["message"] == f"spec.mig.profile: {cause['message']}"


def test_every_problem_is_reported_a_line_each() -> None:
    obj = pool_body("case", {"accelerator": "H100", "mig": {"profiles": ["4g.40gb", "4g.40gb"]}})
    verdict = validation.validate_object(obj)
    assert len(verdict.problems) == 2
    status = answer(review_document("CREATE", obj))["status"]
    assert status["message"] == "2 problems:\n" + "\n".join(f"* {p}" for p in verdict.problems)
    assert [f"{c['field']}: {c['message']}" for c in status["details"]["causes"]] == [str(p) for p in verdict.problems]


@pytest.mark.parametrize("path", INVALID_EXAMPLES, ids=lambda p: p.stem)
def test_the_denial_says_what_accelpool_validate_prints(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/invalid/: the same problems, in the same order and words, as the CLI's lines."""
    [obj] = [d for d in yaml.safe_load_all(path.read_text()) if d]
    assert cli.main(["validate", "-f", str(path)]) == 1
    prefix = f"{path}: ComputePool/{obj['metadata']['name']}: "
    printed = [line.removeprefix(prefix) for line in capsys.readouterr().out.splitlines()]
    response = answer(review_document("CREATE", obj))
    assert response["allowed"] is False
    causes = response["status"]["details"]["causes"]
    assert printed and len(printed) == len(causes)
    for line, cause, problem in zip(printed, causes, validation.validate_object(obj).problems, strict=True):
        assert cause["field"] == problem.path
        assert line.startswith(str(problem)), (line, problem)  # the CLI may add a hint in parentheses


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_admission_agrees_with_validate_on_every_case(case: Any) -> None:
    obj = pool_body("case", case.spec)
    verdict = validation.validate_object(obj)
    response = answer(review_document("CREATE", obj))
    assert response["allowed"] is verdict.valid is (case.layer == "valid")
    if not verdict.valid:
        assert response["status"]["message"] == review.denial_message(verdict)


def test_update_that_keeps_the_spec_of_an_invalid_pool_is_allowed() -> None:
    """A finalizer removed or a label added on a pool stored before a rule existed (or with the
    webhook off) must go through; the operator keeps reporting Valid=False for it."""
    old = pool_body("case", NOT_OFFERED)
    old["metadata"].update(finalizers=["accelpool.io/finalizer"], labels={"team": "a"})
    new = copy.deepcopy(old)
    new["metadata"]["finalizers"] = []
    new["metadata"]["labels"]["team"] = "b"
    assert validation.validate_object(new).problems
    assert answer(review_document("UPDATE", new, old))["allowed"] is True


def test_update_that_changes_the_spec_is_validated() -> None:
    old = pool_body("case", NOT_OFFERED)
    still_invalid = pool_body("case", {**NOT_OFFERED, "nodes": 3})
    response = answer(review_document("UPDATE", still_invalid, old))
    assert response["allowed"] is False and response["status"]["message"] == cli_formatted(still_invalid)
    assert answer(review_document("UPDATE", pool_body("case", VALID), old))["allowed"] is True
    broken = answer(review_document("UPDATE", pool_body("case", NOT_OFFERED), pool_body("case", VALID)))
    assert broken["allowed"] is False and broken["status"]["message"] == cli_formatted(pool_body("case", NOT_OFFERED))


def test_a_changed_json_type_is_a_changed_spec() -> None:
    """`true` and `1` are equal in Python, not on the wire."""
    old = pool_body("case", {**VALID, "dedicated": True})
    new = pool_body("case", {**VALID, "dedicated": 1})
    assert answer(review_document("UPDATE", new, old))["allowed"] is False


def test_status_is_not_checked() -> None:
    """The operator writes status through the status subresource, which the webhook does not see."""
    obj = pool_body("case", VALID)
    obj["status"] = {"phase": "Unheard-of", "extra": [1]}
    assert answer(review_document("CREATE", obj))["allowed"] is True


def test_dry_run_is_answered_the_same() -> None:
    assert answer(review_document("CREATE", pool_body("case", NOT_OFFERED), dryRun=True))["allowed"] is False
    assert answer(review_document("CREATE", pool_body("case", VALID), dryRun=True))["allowed"] is True


def test_operations_and_subresources_not_registered_are_allowed() -> None:
    invalid = pool_body("case", NOT_OFFERED)
    assert answer(review_document("DELETE", None, invalid))["allowed"] is True
    assert answer(review_document("UPDATE", invalid, pool_body("case", VALID), subResource="status"))["allowed"] is True


def test_a_huge_value_is_cut_in_the_message() -> None:
    obj = pool_body("case", {"accelerator": ["H" * 10_000]})
    message = answer(review_document("CREATE", obj))["status"]["message"]
    assert len(message) <= review.PROBLEM_CHARS and message.endswith("…")


def test_line_breaks_in_a_message_are_escaped() -> None:
    obj = pool_body("case", {"accelerator": "H100\nsecond line"})
    message = answer(review_document("CREATE", obj))["status"]["message"]
    assert "\n" not in message and "\\n" in message


@pytest.mark.parametrize(
    ("document", "says"),
    [
        ([], "expected an AdmissionReview object, got list"),
        ({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": {}}, "'admission.k8s.io/v1'"),
        ({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"}, "AdmissionReview has no request"),
        ({**review_document("CREATE", pool_body("case", VALID)), "kind": "Pod"}, "kind 'Pod'"),
        (review_document("CREATE", pool_body("case", VALID), uid=""), "request.uid is missing"),
        (review_document("CREATE", None), "request.object is missing for operation CREATE"),
        (review_document("UPDATE", pool_body("case", VALID)), "request.oldObject is missing for operation UPDATE"),
        (
            review_document("UPDATE", "a string", pool_body("case", VALID)),
            "request.object is missing for operation UPDATE",
        ),
    ],
    ids=["not-a-mapping", "v1beta1", "no-request", "wrong-kind", "no-uid", "create-no-object", "update-no-old", "str"],
)
def test_a_malformed_review_is_refused_with_the_reason(document: Any, says: str) -> None:
    with pytest.raises(review.MalformedReview) as refused:
        review.review(document)
    assert says in str(refused.value)
