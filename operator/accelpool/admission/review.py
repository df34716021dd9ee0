"""The ComputePool validating admission webhook's decision: an AdmissionReview in, its answer out.

The API server sends an `admission.k8s.io/v1` AdmissionReview for every ComputePool created or
updated through it; `review(document)` answers with the check `accelpool validate` applies,
`validation.validate_object`, so the CLI, the operator's `Valid` condition and admission cannot
disagree. A denial carries the problems twice, as the API server's own validation does: as the
status message (`validation.denial_message`; clients such as client-go show it after
`admission webhook "computepools.accelpool.io" denied the request: `) and as one cause per field
error, which `kubectl` prints instead (k8s.io/kubectl pkg/cmd/util/helpers.go checkErr: an
Invalid status with causes reads `The ComputePool "x" is invalid: spec.mig.profile: Invalid
value: "1g.5gb": ...`), the same lines `accelpool validate` prints.

- CREATE: the object is validated. Its `status` (the operator's, reached only through the
  status subresource, which the webhook is not registered for) is not checked.
- UPDATE: validated too, unless the spec equals the old object's: a metadata-only change (a
  finalizer removed, a label added) is never blocked, even on a pool stored before a rule
  existed; such a pool keeps the operator's `Valid=False` instead. The chart's matchConditions
  keep those requests from reaching the webhook at all; this is the same rule for an API server
  that sends them anyway.
- Any other operation, or a subresource: allowed (not registered; nothing to check here).
- dryRun: answered like any other request; the webhook has no side effects to skip.

A denial is a 422 `Invalid` status with one cause per problem (`field` is the problem's path),
at most `MAX_PROBLEMS` of them and then one saying how many more were left out.
A document that is not an AdmissionReview v1 with a request uid and the objects its operation
needs raises `MalformedReview`, which the server answers with HTTP 400 (the API server then
applies the webhook's failure policy). Pure: called by `accelpool.runtime.webhook`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import accelpool_api as api
from accelpool_api import validation
from accelpool_core.textio import one_line

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
CHECKED_OPERATIONS = ("CREATE", "UPDATE")
PROBLEM_CHARS = 2000
"""A problem longer than this (one quoting a huge value) is cut, as `accelpool validate` cuts it."""
MAX_PROBLEMS = 100
"""A denial lists at most this many problems (as causes and in the message), then says how many
were cut: an object with 100k unknown fields gets an answer of a few hundred kB at most, not 13 MB."""


class MalformedReview(ValueError):
    """The request is not an AdmissionReview this webhook can answer; the message says why."""


def review(document: Any) -> dict[str, Any]:
    """The AdmissionReview answering `document` (a decoded AdmissionReview request)."""
    request = _request(document)
    verdict = check(request)
    response: dict[str, Any] = {"uid": request["uid"], "allowed": verdict is None or verdict.valid}
    if verdict is not None and not verdict.valid:
        response["status"] = denial_status(verdict)
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def check(request: Mapping[str, Any]) -> validation.Verdict | None:
    """The verdict on the object a (well-formed) request would store; None when nothing is checked."""
    if request.get("subResource") or request["operation"] not in CHECKED_OPERATIONS:
        return None
    new = request["object"]
    if request["operation"] == "UPDATE" and _same(new.get("spec"), request["oldObject"].get("spec")):
        return None
    body = {key: value for key, value in new.items() if key != "status"}
    return validation.validate_object(body, limit=MAX_PROBLEMS)


CAUSE_REASONS = {
    "Invalid": "FieldValueInvalid",
    "TypeInvalid": "FieldValueTypeInvalid",
    "Required": "FieldValueRequired",
    "NotSupported": "FieldValueNotSupported",
    "TooMany": "FieldValueTooMany",
    "TooLong": "FieldValueTooLong",
}
"""A field error's type → its StatusCause reason (k8s.io/apimachinery pkg/util/validation/field errors.go)."""


def denial_message(verdict: validation.Verdict) -> str:
    """The status message: the problems as field errors, as `accelpool validate` prints them.

    Past `MAX_PROBLEMS`, the first ones are listed and a last line says how many were cut.
    """
    lines = [one_line(str(problem), PROBLEM_CHARS) for problem in verdict.problems[:MAX_PROBLEMS]]
    cut = cut_note(verdict)
    if cut is None:
        return validation.listed(lines)
    heading = f"{verdict.total} problems, the first {MAX_PROBLEMS} listed:\n"
    return heading + "\n".join(f"* {line}" for line in [*lines, cut])


def cut_note(verdict: validation.Verdict) -> str | None:
    """The line saying how many problems a denial leaves out; None when it lists them all."""
    left_out = verdict.total - MAX_PROBLEMS
    if left_out <= 0:
        return None
    return f"{left_out} more problems not listed ({verdict.total} in all; the webhook reports the first {MAX_PROBLEMS})"


def denial_status(verdict: validation.Verdict) -> dict[str, Any]:
    """A metav1.Status as the API server reports invalid objects: 422, reason Invalid, one cause per problem."""
    return {
        "status": "Failure",
        "code": 422,
        "reason": "Invalid",
        "message": denial_message(verdict),
        "details": {
            "group": api.GROUP,
            "kind": api.KIND,
            "name": verdict.name,
            "causes": [
                {
                    "reason": CAUSE_REASONS.get(problem.error_type, "FieldValueInvalid"),
                    "field": problem.path,
                    "message": one_line(problem.body, PROBLEM_CHARS),
                }
                for problem in verdict.problems[:MAX_PROBLEMS]
            ]
            + _cut_cause(verdict),
        },
    }


def _cut_cause(verdict: validation.Verdict) -> list[dict[str, str]]:
    """One last cause saying how many were cut (kubectl prints the causes, not the message)."""
    cut = cut_note(verdict)
    return [] if cut is None else [{"reason": CAUSE_REASONS["TooMany"], "field": "(problems)", "message": cut}]


def _same(new: Any, old: Any) -> bool:
    """Equal as JSON (so `true` and `1`, `1` and `1.0` differ, as they do to the API server)."""
    return json.dumps(new, sort_keys=True) == json.dumps(old, sort_keys=True)


def _request(document: Any) -> Mapping[str, Any]:
    if not isinstance(document, Mapping):
        raise MalformedReview(f"expected an {KIND} object, got {type(document).__name__}")
    if document.get("apiVersion") != API_VERSION or document.get("kind") != KIND:
        got = f"{document.get('apiVersion')!r}, kind {document.get('kind')!r}"
        raise MalformedReview(f"expected apiVersion {API_VERSION!r}, kind {KIND!r} (got apiVersion {got})")
    request = document.get("request")
    if not isinstance(request, Mapping):
        raise MalformedReview(f"{KIND} has no request")
    if not isinstance(request.get("uid"), str) or not request["uid"]:
        raise MalformedReview("request.uid is missing")
    operation = request.get("operation")
    if not isinstance(operation, str):
        raise MalformedReview("request.operation is missing")
    needed = {"CREATE": ("object",), "UPDATE": ("object", "oldObject")}.get(operation, ())
    for key in needed:
        if not isinstance(request.get(key), Mapping):
            raise MalformedReview(f"request.{key} is missing for operation {operation}")
    return request
