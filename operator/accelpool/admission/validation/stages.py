"""`validate_object`: one document through the API server's three stages (decode, schema, webhook).

Each stage's problems come from `accelpool.admission.validation.errors` and `accelpool.admission.validation.schema`;
this module orders them as the server does and stops at the first stage that objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

from accelpool import api
from accelpool.admission.validation.errors import CEL_RULES, field_problem, merge, unknown_field, webhook_only
from accelpool.admission.validation.schema import (
    BLOCKING,
    RULES_NOT_CHECKED,
    checked_anyway,
    int_or_string,
    rule_problems,
    scale_problems,
    without_nulls,
)

Stage = Literal["decode", "schema", "webhook"]


@dataclass(frozen=True)
class Verdict:
    """One document's result: the parsed pool when valid, else its problems and the stage that found them."""

    kind: str
    name: str
    pool: api.ComputePool | None
    problems: tuple[api.Problem, ...]
    stage: Stage | None = None

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def label(self) -> str:
        return f"{self.kind}/{self.name}"

    @property
    def rejection(self) -> str:
        """What `kubectl apply` prints when the API server refuses to create this object.

        A schema or CEL error and a webhook denial read alike: kubectl rebuilds both from the
        status causes (k8s.io/kubectl pkg/cmd/util/helpers.go checkErr), and the webhook sends one
        cause per field error as the server's own validation does (`accelpool.admission.review`). Other
        clients print the status message instead; for a denial that is `admission webhook
        "computepools.accelpool.io" denied the request: ` and `denial_message`.
        """
        if self.stage == "decode":
            found = ", ".join(p.message for p in self.problems)
            return (
                f'{self.kind} in version "{api.VERSION}" cannot be handled as a {self.kind}: '
                f"strict decoding error: {found}"
            )
        # kubectl rebuilds the message from the status causes (k8s.io/kubectl pkg/cmd/util/helpers.go).
        if len(self.problems) == 1:
            return f'The {self.kind} "{self.name}" is invalid: {self.problems[0]}'
        return f'The {self.kind} "{self.name}" is invalid: \n' + "\n".join(f"* {p}" for p in self.problems)


def denial_message(problems: Iterable[api.Problem]) -> str:
    """What the admission webhook denies an object with: its field error, or each of them on a line."""
    return listed([str(p) for p in problems])


def listed(lines: list[str]) -> str:
    """One line alone; several as `N problems:` and a `* ` line each."""
    if len(lines) == 1:
        return lines[0]
    return f"{len(lines)} problems:\n" + "\n".join(f"* {line}" for line in lines)


def validate_object(document: Any) -> Verdict:
    """Validate one decoded object (a dict from YAML or the API), stage by stage, as the API server does."""
    if not isinstance(document, Mapping):
        return Verdict(
            "?", "?", None, (api.Problem("(document)", document, "expected a mapping (a Kubernetes object)"),)
        )
    kind = str(document.get("kind", "?"))
    metadata = document.get("metadata")
    name = str(metadata.get("name", "?")) if isinstance(metadata, Mapping) else "?"
    # The status subresource: a create or update of the object never writes status (the server drops it).
    body = {key: api.as_sent(value) for key, value in document.items() if key != "status"}
    if isinstance(body.get("spec"), Mapping):
        body["spec"] = without_nulls(api.ComputePoolSpec, body["spec"])
    unknown_metadata = [
        api.Problem(f"metadata.{key}", value, f'unknown field "metadata.{key}"', error_type="UnknownField")
        for key, value in (metadata.items() if isinstance(metadata, Mapping) else ())
        if key not in OBJECT_META_FIELDS
    ]
    unknown_metadata += unknown_in_status(document.get("status"))
    naming = api.name_problems(metadata.get("name", "")) if isinstance(metadata, Mapping) else []
    naming += api.metadata_problems(metadata)
    try:
        # by wire names only: `hold_down` is no field of the API (the models also take Python's names)
        pool = api.ComputePool.model_validate(body, by_name=False, context={"structural_only": True})
    except ValidationError as error:
        problems = unknown_metadata + naming + int_or_string(merge(field_problem(e) for e in error.errors()))
        problems += checked_anyway(problems)
        unknown = [p for p in problems if p.error_type == "UnknownField"]
        if unknown:
            return Verdict(kind, name, None, tuple(unknown), "decode")
        schema = [p for p in problems if not webhook_only(p) and p.message not in CEL_RULES] + scale_problems(body)
        if any(p.error_type in BLOCKING for p in schema):
            # Type, required, enum, length and count errors stop the CEL rules from running
            # (apiextensions-apiserver pkg/registry/customresource/strategy.go hasBlockingErr).
            schema.append(RULES_NOT_CHECKED)
        else:
            schema += rule_problems(api.ComputePoolSpec, body.get("spec"), "spec")
        if schema:
            return Verdict(kind, name, None, tuple(schema), "schema")
        return Verdict(kind, name, None, tuple(p for p in problems if webhook_only(p)), "webhook")
    if unknown_metadata:
        return Verdict(kind, name, None, tuple(unknown_metadata), "decode")
    schema = naming + scale_problems(body)
    if any(p.error_type in BLOCKING for p in schema):
        schema.append(RULES_NOT_CHECKED)
    if schema:
        return Verdict(kind, name, None, tuple(schema), "schema")
    found = tuple(api.spec_problems(pool.spec))
    return Verdict(kind, name, None if found else pool, found, "webhook" if found else None)


def unknown_in_status(status: Any) -> list[api.Problem]:
    """Strict decoding reads `status` too, though a create or update then drops it: its unknown fields."""
    if not isinstance(status, Mapping):
        return []
    try:
        api.ComputePoolStatus.model_validate(api.as_sent(status), by_name=False)
    except ValidationError as error:
        return [
            unknown_field(("status", *e["loc"]), e.get("input"))
            for e in error.errors()
            if e["type"] == "extra_forbidden"
        ]
    return []


def validate_spec(spec: Mapping[str, Any]) -> tuple[api.ComputePoolSpec | None, tuple[api.Problem, ...]]:
    """Validate a bare spec (what the operator gets from kopf)."""
    verdict = validate_object(
        {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "x"}, "spec": spec}
    )
    return (verdict.pool.spec if verdict.pool else None), verdict.problems


OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
"""metav1.ObjectMeta's fields (k8s.io/apimachinery pkg/apis/meta/v1 types.go): strict decoding refuses others."""
