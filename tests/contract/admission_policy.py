"""A ValidatingAdmissionPolicy and its binding evaluated the way kube-apiserver evaluates them, with
Google's CEL (accelpool_demo/apiserver/cel.py), and the object a PATCH of a Node hands to admission.

`admit(policy, binding, request)` follows kubernetes/kubernetes,
staging/src/k8s.io/apiserver/pkg/admission/plugin/:

- policy/matching/matching.go with webhook/predicates/rules/rules.go: the policy's
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

`patched_node(old, body, patch_type, subresource)` is what the API server hands to admission for
a PATCH of a Node: the JSON merge patch (RFC 7386) or strategic-merge patch applied (a strategic
patch merges `status.conditions` by `type`, their patchMergeKey in k8s.io/api/core/v1/types.go;
other lists are replaced), then the node registry's PrepareForUpdate (pkg/registry/core/node/
strategy.go: an update of `nodes` keeps the old status, one of `nodes/status` the old spec), then
the field manager's new managedFields entry (apiserver pkg/endpoints/handlers/patch.go), all
before the validating admission of registry/generic/registry/store.go's Update.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from accelpool_demo.apiserver.cel import CompileError, evaluate

_CODES = {"Unauthorized": 401, "Forbidden": 403, "Invalid": 422, "RequestEntityTooLarge": 413}


@dataclass(frozen=True)
class Request:
    """An admission request, as admission.Attributes carries it."""

    operation: str  # CREATE, UPDATE, DELETE (a PATCH is an UPDATE)
    resource: str  # plural, e.g. "nodes"
    name: str
    username: str
    object: dict[str, Any] | None = None
    old_object: dict[str, Any] | None = None
    subresource: str = ""
    extra: Mapping[str, Sequence[str]] = field(default_factory=dict)
    groups: Sequence[str] = ()
    group: str = ""
    version: str = "v1"
    kind: str = "Node"
    namespace: str = ""


@dataclass(frozen=True)
class Decision:
    allowed: bool
    message: str = ""
    code: int = 200
    matched: bool = False
    """Whether the policy applied at all (resource rules and every matchCondition)."""


class _Failed(Exception):
    """An expression that could not be evaluated: its error message."""


_MISSING_KEY = re.compile(r'Key not found in map : "([^"]*)"')


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


def _rule_matches(rule: Mapping[str, Any], request: Request) -> bool:
    """rules.Matcher.Matches: scope, operation, group, version, resource/subresource."""
    scope = rule.get("scope", "*")
    namespaced = request.namespace != ""
    if (scope == "Namespaced" and not namespaced) or (scope == "Cluster" and namespaced):
        return False

    def exact_or_wildcard(items: Sequence[str], requested: str) -> bool:
        return any(item in ("*", requested) for item in items)

    if not exact_or_wildcard(rule.get("operations", []), request.operation):
        return False
    if not exact_or_wildcard(rule.get("apiGroups", []), request.group):
        return False
    if not exact_or_wildcard(rule.get("apiVersions", []), request.version):
        return False
    for entry in rule.get("resources", []):
        resource, _, subresource = entry.partition("/")
        if resource in ("*", request.resource) and subresource in ("*", request.subresource):
            return True
    return False


def _resources_match(match: Mapping[str, Any] | None, request: Request) -> bool:
    """matching.Matcher.Matches without selectors: excluded rules first, then rules (none: all)."""
    match = match or {}
    if any(_rule_matches(rule, request) for rule in match.get("excludeResourceRules", [])):
        return False
    rules = match.get("resourceRules", [])
    return not rules or any(
        _rule_matches(rule, request) and (not rule.get("resourceNames") or request.name in rule["resourceNames"])
        for rule in rules
    )


def admission_request(request: Request) -> dict[str, Any]:
    """cel.CreateAdmissionRequest, as the unstructured converter turns it into CEL's `request`."""
    user: dict[str, Any] = {"username": request.username}
    if request.groups:
        user["groups"] = list(request.groups)
    if request.extra:
        user["extra"] = {key: list(values) for key, values in request.extra.items()}
    gvk = {"group": request.group, "version": request.version, "kind": request.kind}
    gvr = {"group": request.group, "version": request.version, "resource": request.resource}
    body: dict[str, Any] = {
        "kind": gvk,
        "resource": gvr,
        "requestKind": gvk,
        "requestResource": gvr,
        "name": request.name,
        "operation": request.operation,
        "userInfo": user,
        "dryRun": False,
    }
    if request.subresource:
        body["subResource"] = body["requestSubResource"] = request.subresource
    if request.namespace:
        body["namespace"] = request.namespace
    return body


def _activation(request: Request) -> dict[str, Any]:
    return {
        "object": request.object,
        "oldObject": request.old_object,
        "request": admission_request(request),
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


def _denials(spec: Mapping[str, Any], request: Request) -> tuple[bool, list[tuple[str, str]]]:
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


def admit(policy: Mapping[str, Any], binding: Mapping[str, Any], request: Request) -> Decision:
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


# ---- What a PATCH of a Node hands to admission.


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def _strategic(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """A merge patch whose status.conditions merge by `type` (the only merge key a Node patch here uses)."""
    conditions = (patch.get("status") or {}).get("conditions")
    if conditions is None:
        return dict(merge_patch(target, patch))
    rest = merge_patch(patch, {"status": {"conditions": None}})
    result: dict[str, Any] = merge_patch(target, rest)
    merged = [dict(c) for c in (target.get("status") or {}).get("conditions") or []]
    for condition in conditions:
        for index, existing in enumerate(merged):
            if existing.get("type") == condition.get("type"):
                merged[index] = merge_patch(existing, condition)
                break
        else:
            merged.append(dict(condition))
    result.setdefault("status", {})["conditions"] = merged
    return result


def patched_node(
    old: dict[str, Any], body: Any, patch_type: str, *, subresource: str = "", manager: str = "agent"
) -> dict[str, Any]:
    """The Node that validating admission sees for a PATCH of `old` with `body`.

    A JSON patch (RFC 6902) whose `test` fails raises `jsonpatch.JsonPatchTestFailed`: the API server
    answers 422 before admission (k8s.io/apiserver pkg/endpoints/handlers/patch.go)."""
    if patch_type not in ("merge", "strategic", "json"):
        raise ValueError(f"patch type {patch_type!r} is not modelled")
    if patch_type == "json":
        new = jsonpatch.apply_patch(old, body)
    else:
        new = _strategic(old, body) if patch_type == "strategic" else merge_patch(old, body)
    if subresource == "status":
        new["spec"] = copy.deepcopy(old.get("spec", {}))
    elif subresource == "":
        new["status"] = copy.deepcopy(old.get("status", {}))
    else:
        raise ValueError(f"subresource {subresource!r} is not modelled")
    entries = [e for e in old["metadata"].get("managedFields", []) if e.get("manager") != manager]
    entries.append(
        {"manager": manager, "operation": "Update", "subresource": subresource, "time": "2026-01-01T00:00:00Z"}
    )
    new["metadata"]["managedFields"] = entries
    return copy.deepcopy(new)
