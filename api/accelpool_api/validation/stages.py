"""`validate_object`: one document through the API server's three stages (decode, schema, webhook).

Each stage's problems come from `accelpool_api.validation.errors` and `accelpool_api.validation.schema`;
this module orders them as the server does and stops at the first stage that objects.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import ValidationError

import accelpool_api as api
from accelpool_api.validation.errors import CEL_RULES, field_problem, merge, unknown_field, webhook_only
from accelpool_api.validation.schema import (
    BLOCKING,
    RULES_NOT_CHECKED,
    checked_anyway,
    int_or_string,
    rule_problems,
    scale_problems,
    without_nulls,
)

Stage = Literal["decode", "schema", "webhook"]


EXAMINED_PER_PROBLEM = 3
"""With a `limit`, errors examined per problem listed: a union's members each report one error for a field."""


@dataclass(frozen=True)
class Verdict:
    """One document's result: the parsed pool when valid, else its problems and the stage that found them."""

    kind: str
    name: str
    pool: api.ComputePool | None
    problems: tuple[api.Problem, ...]
    stage: Stage | None = None
    unexamined: int = 0
    """Errors past the first ones that were counted but not described (`validate_object(limit=...)`)."""

    @property
    def valid(self) -> bool:
        return not self.problems

    @property
    def total(self) -> int:
        """How many problems the object has: those described and those only counted."""
        return len(self.problems) + self.unexamined

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


def validate_object(document: Any, *, limit: int | None = None) -> Verdict:
    """Validate one decoded object (a dict from YAML or the API), stage by stage, as the API server does.

    `limit` bounds the work on a hostile object (the webhook's): past `EXAMINED_PER_PROBLEM` times
    `limit` errors of one kind, the rest are counted (`Verdict.unexamined`), not described.
    """
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
    fields: Mapping[str, Any] = metadata if isinstance(metadata, Mapping) else {}
    unknown_keys = [key for key in fields if key not in OBJECT_META_FIELDS]
    examined = len(unknown_keys) if limit is None else EXAMINED_PER_PROBLEM * limit
    unexamined = max(0, len(unknown_keys) - examined)
    unknown_metadata = [
        api.Problem(f"metadata.{key}", fields[key], f'unknown field "metadata.{key}"', error_type="UnknownField")
        for key in unknown_keys[:examined]
    ]
    unknown_metadata += unknown_in_status(document.get("status"))
    naming = api.name_problems(metadata.get("name", "")) if isinstance(metadata, Mapping) else []
    naming += api.metadata_problems(metadata)
    try:
        # by wire names only: `hold_down` is no field of the API (the models also take Python's names)
        pool = api.ComputePool.model_validate(body, by_name=False, context={"structural_only": True})
    except ValidationError as error:
        errors = error.errors(include_url=False)
        if limit is not None and len(errors) > EXAMINED_PER_PROBLEM * limit:
            unexamined += len(errors) - EXAMINED_PER_PROBLEM * limit
            errors = errors[: EXAMINED_PER_PROBLEM * limit]
        problems = unknown_metadata + naming + int_or_string(merge(field_problem(e) for e in errors))
        problems += checked_anyway(problems)
        unknown = [p for p in problems if p.error_type == "UnknownField"]
        if unknown:
            return Verdict(kind, name, None, tuple(unknown), "decode", unexamined)
        schema = [p for p in problems if not webhook_only(p) and p.message not in CEL_RULES] + scale_problems(body)
        if any(p.error_type in BLOCKING for p in schema):
            # Type, required, enum, length and count errors stop the CEL rules from running
            # (apiextensions-apiserver pkg/registry/customresource/strategy.go hasBlockingErr).
            schema.append(RULES_NOT_CHECKED)
        else:
            schema += rule_problems(api.ComputePoolSpec, body.get("spec"), "spec")
        if schema:
            return Verdict(kind, name, None, tuple(schema), "schema", unexamined)
        return Verdict(kind, name, None, tuple(p for p in problems if webhook_only(p)), "webhook", unexamined)
    if unknown_metadata:
        return Verdict(kind, name, None, tuple(unknown_metadata), "decode", unexamined)
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
