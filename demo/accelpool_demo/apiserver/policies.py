"""ValidatingAdmissionPolicies and their bindings, evaluated the way kube-apiserver evaluates them, with
Google's CEL (`cel`).

`admit(policy, binding, attributes)` follows kubernetes/kubernetes,
staging/src/k8s.io/apiserver/pkg/admission/plugin/:

- policy/matching/matching.go with webhook/predicates/rules/rules.go (`webhooks.rule_matches`): the policy's
  `matchConstraints.resourceRules` (then the binding's `matchResources`, empty: everything) match
  on scope, operation, apiGroup, apiVersion and "resource/subresource" ("*" wildcards). PATCH is
  an UPDATE to admission.
- policy/validating/validator.go with webhook/matchconditions/matcher.go: any `matchCondition`
  false → the policy does not apply; all true → validations; an error and no false → the
  failurePolicy (Fail: deny with the error).
- cel/filter.go, cel/compile.go: the variables `object` and `oldObject` (null on CREATE and on
  DELETE respectively), `request` (an AdmissionRequest, `userInfo.extra` left out when empty: the
  unstructured converter omits an empty map), `params` (null here), `namespaceObject` (null for a
  cluster-scoped resource) and `variables`; an expression that fails is "expression '<expr>'
  resulted in error: <error>".
- cel/composition.go: `variables` in declared order, each seeing the ones before it; one that
  fails to evaluate is an error where it is used, nowhere else (evaluated eagerly here and left
  out of `variables`: an expression that reads it fails with its error).
- policy/validating/validator.go: a validation that is not `true` denies with its
  `messageExpression` (a string, trimmed, refused if it has a newline), else `message`, else
  "failed expression: <expr>"; one that errors denies (failurePolicy Fail) with the error.
- policy/validating/dispatcher.go: with `validationActions: [Deny]` the request is refused with
  the first denied decision: "ValidatingAdmissionPolicy '<policy>' with binding '<binding>' denied
  request: <message>", HTTP code from the validation's `reason` (Invalid: 422 when unset).
- cel/environment/base.go: Kubernetes' environment, with cel-go's strings extension (`join`).

Not modelled (the accelpool policy uses none of it): paramKind and params, namespace and object
selectors, matchPolicy Equivalent, `authorizer`, audit annotations, Warn and Audit actions, type
checking and the CEL cost budget.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from accelpool_demo.apiserver.cel import CompileError, evaluate
from accelpool_demo.apiserver.resources import ADMISSION_POLICIES, ADMISSION_POLICY_BINDINGS, refused
from accelpool_demo.apiserver.webhooks import Attributes, admission_request, rule_matches

_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}
_REASONS = {code: reason for reason, code in _CODES.items()}


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    code: int = 200
    matched: bool = False
    """Whether the policy applied at all (resource rules and every matchCondition)."""


class _Failed(Exception):
    """An expression that could not be evaluated: its error message."""


_MISSING_KEY = re.compile(r"^no such key: ([A-Za-z_][A-Za-z0-9_]*)$")


def _evaluate(expression: str, activation: Mapping[str, Any], failed: Mapping[str, str] | None = None) -> Any:
    """`expression`'s value. `failed`: the variables that could not be evaluated, by name, with their error;
    they are absent from `variables`, so an expression fails with their error only where it reads one
    (`true || variables.failed` is true, as in cel-go)."""
    try:
        outcome = evaluate(expression, activation)
    except CompileError as error:
        raise _Failed(f"compilation error: {error}") from error
    if outcome.error is not None:
        missing = _MISSING_KEY.search(outcome.error)
        if failed and missing and missing.group(1) in failed:
            raise _Failed(f"expression '{expression}' resulted in error: {failed[missing.group(1)]}")
        raise _Failed(f"expression '{expression}' resulted in error: {outcome.error}")
    return outcome.value


def _true(result: Any) -> bool:
    return result is True


def _resources_match(match: Mapping[str, Any] | None, request: Attributes) -> bool:
    """matching.Matcher.Matches without selectors: excluded rules first, then rules (none: all)."""
    match = match or {}
    if any(rule_matches(rule, request) for rule in match.get("excludeResourceRules", [])):
        return False
    rules = match.get("resourceRules", [])
    return not rules or any(
        rule_matches(rule, request) and (not rule.get("resourceNames") or request.name in rule["resourceNames"])
        for rule in rules
    )


def _activation(request: Attributes) -> dict[str, Any]:
    """cel.CreateAdmissionRequest: the AdmissionRequest without its uid and objects, which are variables."""
    admission = {k: v for k, v in admission_request(request, "").items() if k not in ("uid", "object", "oldObject")}
    return {
        "object": request.object,
        "oldObject": request.old_object,
        "request": admission,
        "params": None,
        "namespaceObject": None,
    }


@dataclass
class _Scope:
    """The variables an expression sees: the request's, `variables`, and the variables that failed."""

    activation: dict[str, Any]
    failed: dict[str, str]

    def evaluate(self, expression: str) -> Any:
        return _evaluate(expression, self.activation, self.failed)


def _with_variables(spec: Mapping[str, Any], activation: Mapping[str, Any]) -> _Scope:
    variables: dict[str, Any] = {}
    scope = _Scope({**activation, "variables": variables}, {})
    for variable in spec.get("variables", []):
        name = variable["name"]
        try:
            variables[name] = scope.evaluate(variable["expression"])
        except _Failed as error:  # an error where the variable is used, nowhere else
            scope.failed[name] = f"composited variable {name!r} fails to evaluate: {error}"
    return scope


def _message(validation: Mapping[str, Any], scope: _Scope) -> str:
    if "messageExpression" in validation:
        try:
            result = scope.evaluate(validation["messageExpression"])
        except _Failed:
            result = None
        if isinstance(result, str) and "\n" not in result.strip() and result.strip():
            return result.strip()
    if validation.get("message", "").strip():
        return str(validation["message"]).strip()
    return f"failed expression: {validation['expression'].strip()}"


def _denials(spec: Mapping[str, Any], request: Attributes) -> tuple[bool, list[tuple[str, str]]]:
    """(matched, [(message, reason)] of each denying validation, in order)."""
    fail = spec.get("failurePolicy", "Fail") == "Fail"
    plain = _activation(request)
    errors = []
    for condition in spec.get("matchConditions", []):
        try:
            result = _evaluate(condition["expression"], plain)
        except _Failed as error:
            errors.append(str(error))
            continue
        if not _true(result):
            return False, []
    if errors:
        return True, [("; ".join(errors), "Invalid")] if fail else []
    scope = _with_variables(spec, plain)
    denied = []
    for validation in spec.get("validations", []):
        try:
            result = scope.evaluate(validation["expression"])
        except _Failed as error:
            if fail:
                denied.append((str(error), "Invalid"))
            continue
        if not _true(result):
            denied.append((_message(validation, scope), validation.get("reason", "Invalid")))
    return True, denied


def admit(policy: Mapping[str, Any], binding: Mapping[str, Any], request: Attributes) -> Decision:
    """Whether the API server admits `request` under this one policy and binding."""
    spec, binding_spec = policy["spec"], binding["spec"]
    assert binding_spec["policyName"] == policy["metadata"]["name"], "the binding names another policy"
    if not _resources_match(spec.get("matchConstraints"), request):
        return Decision(allowed=True)
    if not _resources_match(binding_spec.get("matchResources"), request):
        return Decision(allowed=True)
    matched, denied = _denials(spec, request)
    if not denied or "Deny" not in binding_spec.get("validationActions", []):
        return Decision(allowed=True, matched=matched)
    message, reason = denied[0]
    return Decision(
        allowed=False,
        matched=True,
        code=_CODES.get(reason, 422),
        message=(
            f"ValidatingAdmissionPolicy '{policy['metadata']['name']}' with binding "
            f"'{binding['metadata']['name']}' denied request: {message}"
        ),
    )


class Policies:
    """The stored policies and their bindings, judging every write they match (dispatcher.go: each
    binding of each policy, in name order; the first denial refuses the write)."""

    def __init__(self, stored: Callable[[str], list[Mapping[str, Any]]]) -> None:
        self._stored = stored

    def validate(self, request: Attributes) -> None:
        """Raise the API server's refusal when a policy bound with the Deny action denies the write."""
        policies = {str(p["metadata"]["name"]): p for p in self._stored(ADMISSION_POLICIES)}
        if not policies:
            return
        for binding in sorted(self._stored(ADMISSION_POLICY_BINDINGS), key=lambda b: str(b["metadata"]["name"])):
            policy = policies.get(str((binding.get("spec") or {}).get("policyName")))
            if policy is None:
                continue
            decision = admit(policy, binding, request)
            if not decision.allowed:
                raise refused(decision.code, _REASONS.get(decision.code, "Invalid"), decision.message)
