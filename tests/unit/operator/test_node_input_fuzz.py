"""Every annotation, label and condition accelpool reads from a node is untrusted input.

A value of the wrong shape (a list where a string belongs, a number where a time belongs, NaN,
text that is not JSON) is ignored for that node, with a Warning Event naming the node, the key and
the problem: it never stops planning, never sets its pool aside, and never touches another pool.
The property test puts one wrong-shaped value in one field of a quarantined member of pool `a`
and checks that an XID on pool `b` is still quarantined in the same pass.

Budget: derandomized and small (`FUZZ_EXAMPLES`, 120 per test); `ACCELPOOL_FUZZ_EXAMPLES=5000`
for a deeper local run.
"""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from accelpool.decide.planning import Plan
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import member, node_body, pool, run

FUZZ = settings(
    max_examples=int(os.environ.get("ACCELPOOL_FUZZ_EXAMPLES", "120")),
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)

XID = ("False", "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 0", "2026-11-02T11:00:00Z")
QUARANTINE = {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}
RECORD = {
    "step": "quarantined",
    "cause": "XidError79",
    "action": "reset-gpu",
    "message": "XID 79 on GPU 0",
    "since": "2026-11-02T11:00:00Z",
    "stepSince": "2026-11-02T11:00:00Z",
}
REPORT = {
    "status": "Unhealthy",
    "reason": "XidError79",
    "message": "XID 79",
    "gpus": 8,
    "badGpus": [0],
    "tflops": 5000.0,
    "dtype": "bf16",
    "pool": "a",
    "action": "reset-gpu",
    "findings": [{"check": "xid", "severity": "critical", "reason": "XidError79", "action": "reset-gpu"}],
    "complete": True,
}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.sampled_from(["reset-gpu", "quarantined", "2026-11-02T11:00:00Z", "²@2026-11-02T11:00:00Z", "", "True"]),
)
anything = st.recursive(
    scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)),
    max_leaves=8,
)
texts = st.one_of(st.text(max_size=40), anything.map(lambda v: json.dumps(v, allow_nan=True)))


def the_world(victim: dict[str, Any]) -> tuple[list[Any], list[NodeView]]:
    """Pool `a` with the quarantined `victim`, pool `b` with an XID on b1 that must be quarantined."""
    pools = [pool("a", {"accelerator": "H100", "nodes": 2}), pool("b", {"accelerator": "H100", "nodes": 2})]
    nodes = [
        NodeView.from_body(victim),
        member("a2", "a"),
        member("b1", "b", health=XID),
        member("b2", "b"),
    ]
    return pools, nodes


def victim_body() -> dict[str, Any]:
    """a1: a quarantined member of `a` with a ladder record, a health report and every accelpool annotation."""
    view = member(
        "a1",
        "a",
        health=XID,
        annotations={
            conventions.REMEDIATION_ANNOTATION: json.dumps(RECORD),
            conventions.HEALTH_ANNOTATION: json.dumps(REPORT),
            conventions.MIG_RETRY_ANNOTATION: "1@2026-11-02T11:00:00Z",
            conventions.PRIOR_LABELS_ANNOTATION: "{}",
            conventions.CORDONED_ANNOTATION: "true",
        },
        taints=[QUARANTINE],
    )
    body = node_body("a1", labels=dict(view.labels), annotations=dict(view.annotations))
    body["spec"]["taints"] = [t.to_dict() for t in view.taints]
    return body


def assert_b_unaffected(result: Plan) -> None:
    assert "b" not in result.unplannable
    quarantine = [t for t in result.changes["b1"].add_taints if t.key == conventions.QUARANTINE_TAINT_KEY]
    assert quarantine and quarantine[0].value == "XidError79"


def warnings_for(result: Plan, node: str) -> list[str]:
    return [e.message for e in result.events if e.name == node and e.reason == "NodeInputInvalid"]


def test_a_ladder_record_with_a_list_for_its_action_is_ignored_with_a_warning() -> None:
    body = victim_body()
    body["metadata"]["annotations"][conventions.REMEDIATION_ANNOTATION] = json.dumps(
        {**RECORD, "action": ["reset-gpu"]}
    )
    result = run(*the_world(body))
    assert_b_unaffected(result)
    assert "a" not in result.unplannable
    [warning] = warnings_for(result, "a1")
    assert "a1" in warning and conventions.REMEDIATION_ANNOTATION in warning and "action is a list" in warning
    # the node stays quarantined, with a record accelpool can read again
    rewritten = result.changes["a1"].annotations[conventions.REMEDIATION_ANNOTATION]
    assert rewritten is not None and json.loads(rewritten)["action"] in {"none", "reset-gpu"}


@pytest.mark.parametrize("length", [10, 5000], ids=["short", "longer than any accelpool writes"])
def test_an_unreadable_annotation_is_warned_about_on_every_pass(length: int) -> None:
    """Its problems are remembered by its text when short, read again when long: the same warning either way."""
    body = victim_body()
    body["metadata"]["annotations"][conventions.PRIOR_LABELS_ANNOTATION] = "[" * length
    for _ in range(2):
        result = run(*the_world(body))
        assert_b_unaffected(result)
        [warning] = warnings_for(result, "a1")
        assert f"{conventions.PRIOR_LABELS_ANNOTATION}: not a JSON object" in warning


@FUZZ
@given(field=st.sampled_from([*RECORD, "blocked", "timedOut"]), value=anything)
def test_any_field_of_the_ladder_record(field: str, value: Any) -> None:
    body = victim_body()
    body["metadata"]["annotations"][conventions.REMEDIATION_ANNOTATION] = json.dumps(
        {**RECORD, field: value}, allow_nan=True
    )
    result = run(*the_world(body))
    assert_b_unaffected(result)
    assert "a" not in result.unplannable


@FUZZ
@given(field=st.sampled_from([*REPORT, "verdicts", "agent", "checkRequest", "driverVersion"]), value=anything)
def test_any_field_of_the_health_report(field: str, value: Any) -> None:
    body = victim_body()
    body["metadata"]["annotations"][conventions.HEALTH_ANNOTATION] = json.dumps(
        {**REPORT, field: value}, allow_nan=True
    )
    result = run(*the_world(body))
    assert_b_unaffected(result)
    assert "a" not in result.unplannable
    measured = result.pool("a")
    assert measured is not None and measured.status is not None
    tflops = measured.status.capacity.measured_tflops
    assert tflops is None or 0 <= tflops <= 4 * 989 * 8 * 2


@FUZZ
@given(
    key=st.sampled_from(
        [
            conventions.REMEDIATION_ANNOTATION,
            conventions.HEALTH_ANNOTATION,
            conventions.JOINED_ANNOTATION,
            conventions.MIG_RETRY_ANNOTATION,
            conventions.PRIOR_LABELS_ANNOTATION,
            conventions.CORDONED_ANNOTATION,
            conventions.CHECK_REQUEST_ANNOTATION,
            conventions.POOL_CHECK_REQUEST_ANNOTATION,
        ]
    ),
    text=texts,
)
def test_any_annotation_text(key: str, text: str) -> None:
    body = victim_body()
    body["metadata"]["annotations"][key] = text
    result = run(*the_world(body))
    assert_b_unaffected(result)


@FUZZ
@given(
    key=st.sampled_from(
        [
            conventions.POOL_LABEL,
            conventions.DEVICE_PLUGIN_CONFIG_LABEL,
            conventions.MIG_CONFIG_LABEL,
            conventions.MIG_CONFIG_STATE_LABEL,
            conventions.GFD_PRODUCT_LABEL,
            conventions.GFD_COUNT_LABEL,
            conventions.REMEDIATION_ACTION_LABEL,
            "nvidia.com/gpu.memory",
        ]
    ),
    text=st.text(max_size=63),
)
def test_any_label_value(key: str, text: str) -> None:
    body = victim_body()
    body["metadata"]["labels"][key] = text
    result = run(*the_world(body))
    assert_b_unaffected(result)


@FUZZ
@given(
    condition=st.sampled_from([conventions.HEALTH_CONDITION, "Ready"]),
    field=st.sampled_from(["type", "status", "reason", "message", "lastTransitionTime", "lastHeartbeatTime"]),
    value=anything,
)
def test_any_field_of_a_condition(condition: str, field: str, value: Any) -> None:
    body = victim_body()
    for raw in body["status"]["conditions"]:
        if raw["type"] == condition:
            raw[field] = value
    result = run(*the_world(body))
    assert_b_unaffected(result)


@FUZZ
@given(
    where=st.sampled_from(["taint", "taints", "conditions", "labels", "annotations", "allocatable", "spec", "status"]),
    value=anything,
)
def test_any_shape_of_the_node_itself(where: str, value: Any) -> None:
    body = copy.deepcopy(victim_body())
    if where == "taint":
        body["spec"]["taints"][0] = {**body["spec"]["taints"][0], "timeAdded": value, "value": value}
    elif where == "taints":
        body["spec"]["taints"] = value
    elif where in ("labels", "annotations"):
        body["metadata"][where] = value
    elif where in ("conditions", "allocatable"):
        body["status"][where] = value
    else:
        body[where] = value
    result = run(*the_world(body))
    assert_b_unaffected(result)


def test_agent_numbers_that_cannot_be_true_are_not_believed() -> None:
    """NaN would make the status invalid JSON; 1e308 would pass as capacity."""
    pools = [pool("p", {"accelerator": "H100", "nodes": 3})]
    healthy = ("True", "AllChecksPassed", "ok", "2026-11-02T11:00:00Z")

    def reporting(name: str, tflops: str) -> NodeView:
        text = '{"status":"Healthy","reason":"AllChecksPassed","gpus":8,"tflops":%s,"pool":"p","complete":true}'
        return member(name, "p", health=healthy, annotations={conventions.HEALTH_ANNOTATION: text % tflops})

    result = run(pools, [reporting("n1", "NaN"), reporting("n2", "1e308"), reporting("n3", "5000.5")])
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.status.capacity.measured_tflops == 5000.5
    assert "NaN" not in found.status.model_dump_json()
    assert "tflops nan" in " ".join(warnings_for(result, "n1"))
    assert "implausible" in " ".join(warnings_for(result, "n2"))


def test_an_agents_huge_message_is_cut_everywhere_accelpool_writes_it() -> None:
    huge = "x" * 240_000
    report = json.dumps({**REPORT, "pool": "b", "message": huge})
    pools = [pool("b", {"accelerator": "H100", "nodes": 2})]
    nodes = [
        member(
            "b1",
            "b",
            health=("False", "XidError79", huge, "2026-11-02T11:00:00Z"),
            annotations={conventions.HEALTH_ANNOTATION: report},
        ),
        member("b2", "b"),
    ]
    result = run(pools, nodes)
    record = result.changes["b1"].annotations[conventions.REMEDIATION_ANNOTATION]
    assert record is not None and len(record) < 4096
    assert json.loads(record)["message"].endswith(conventions.CUT_MARK)
    found = result.pool("b")
    assert found is not None and found.status is not None
    assert len(found.status.model_dump_json()) < 16_384
    assert any(c.message.endswith(conventions.CUT_MARK) for c in found.status.conditions)
    assert all(len(e.message) <= conventions.MAX_MESSAGE for e in result.events)
