"""The ValidatingAdmissionPolicy emulator of tests/contract/admission_policy.py keeps the API server's
rules that the node-restriction tests rely on (sources cited in that module)."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_demo.apiserver.webhooks import Attributes
from tests.contract.admission_policy import admit, merge_patch, node_write, patched_node

pytestmark = pytest.mark.contract

BINDING = {"metadata": {"name": "b"}, "spec": {"policyName": "p", "validationActions": ["Deny"]}}
NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1", "labels": {"a": "1"}}, "spec": {}, "status": {}}


def policy(**spec: Any) -> dict[str, Any]:
    rules = [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}]
    return {
        "metadata": {"name": "p"},
        "spec": {"failurePolicy": "Fail", "matchConstraints": {"resourceRules": rules}, **spec},
    }


def update(subresource: str = "", username: str = "u", **extra: list[str]) -> Attributes:
    return node_write(
        operation="UPDATE", resource="nodes", subresource=subresource, name="n1", username=username,
        extra=extra, object=NODE, old_object=NODE,
    )  # fmt: skip


def test_resource_rules_match_resource_and_subresource_exactly() -> None:
    deny_all = policy(validations=[{"expression": "false", "message": "no"}])
    assert not admit(deny_all, BINDING, update()).allowed
    assert admit(deny_all, BINDING, update("status")).allowed  # "nodes" is not "nodes/status"
    wildcard = policy(validations=[{"expression": "false"}])
    wildcard["spec"]["matchConstraints"]["resourceRules"][0]["resources"] = ["nodes/*"]
    assert not admit(wildcard, BINDING, update("status")).allowed
    assert not admit(wildcard, BINDING, update()).allowed  # rules.go: a "*" subresource matches none too


def test_match_conditions_false_skips_and_an_error_fails_closed() -> None:
    deny = [{"expression": "false", "message": "no"}]
    other_user = [{"name": "c", "expression": "request.userInfo.username == 'x'"}]
    skipped = admit(policy(matchConditions=other_user, validations=deny), BINDING, update())
    assert skipped.allowed and not skipped.matched
    broken = [{"name": "c", "expression": "request.nothing == 'x'"}]
    failing = admit(policy(matchConditions=broken, validations=deny), BINDING, update())
    assert not failing.allowed and failing.code == 422 and "resulted in error" in failing.message


def test_a_failing_variable_denies_only_where_it_is_used() -> None:
    variables = [{"name": "broken", "expression": "object.metadata.nothing"}, {"name": "ok", "expression": "1"}]
    unused = policy(variables=variables, validations=[{"expression": "variables.ok == 1"}])
    assert admit(unused, BINDING, update()).allowed
    used = policy(variables=variables, validations=[{"expression": "variables.broken == 1"}])
    decision = admit(used, BINDING, update())
    assert not decision.allowed and "composited variable 'broken' fails to evaluate" in decision.message


def test_the_first_denial_speaks_message_expression_then_message_then_the_expression() -> None:
    own = {"expression": "1 == 2", "messageExpression": "'own ' + request.name", "message": "x", "reason": "Forbidden"}
    validations = [{"expression": "true", "message": "never"}, own, {"expression": "false", "message": "second"}]
    decision = admit(policy(validations=validations), BINDING, update())
    assert decision.message == "ValidatingAdmissionPolicy 'p' with binding 'b' denied request: own n1"
    assert decision.code == 403
    broken = [{"expression": "false", "messageExpression": "request.nothing", "message": "static"}]
    assert admit(policy(validations=broken), BINDING, update()).message.endswith(": static")
    bare = [{"expression": "size(request.name) > 5"}]
    message = admit(policy(validations=bare), BINDING, update()).message
    assert message.endswith(": failed expression: size(request.name) > 5")


def test_the_request_variable_has_no_extra_for_a_user_without_one() -> None:
    has_extra = [{"expression": "has(request.userInfo.extra)"}]
    assert not admit(policy(validations=has_extra), BINDING, update()).allowed
    assert admit(policy(validations=has_extra), BINDING, update(k=["v"])).allowed


def test_a_node_patch_keeps_what_the_registry_keeps() -> None:
    ready = {"type": "Ready", "status": "True"}
    old = merge_patch(NODE, {"spec": {"unschedulable": True}, "status": {"conditions": [ready]}})
    body = {"spec": {"unschedulable": None}, "status": {"conditions": [{"type": "X", "status": "True"}]}}
    via_node = patched_node(old, body, "strategic")
    assert via_node["spec"] == {} and via_node["status"] == old["status"]
    via_status = patched_node(old, body, "strategic", subresource="status")
    assert via_status["spec"] == old["spec"]
    assert [c["type"] for c in via_status["status"]["conditions"]] == ["Ready", "X"]
    replaced = patched_node(old, body, "merge", subresource="status")
    assert [c["type"] for c in replaced["status"]["conditions"]] == ["X"]
    assert via_node["metadata"]["managedFields"] != old["metadata"].get("managedFields")
