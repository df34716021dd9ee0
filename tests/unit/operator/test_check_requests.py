"""A pool's check request copied to its members by the planner (`accelpool.decide.planning.check_requests`)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from accelpool.decide.inputs import PoolRecord, pool_input
from accelpool.decide.planning import Plan, PoolInput
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import applied, member, pool, run

REQUEST = conventions.CHECK_REQUEST_ANNOTATION
COPIED = conventions.POOL_CHECK_REQUEST_ANNOTATION
SPEC = {"accelerator": "H100:8", "nodes": 2}


def training(token: str | None) -> list[PoolInput]:
    return [replace(pool("train", SPEC), check_request=token)]


def annotation_changes(result: Plan, nodes: list[NodeView]) -> dict[str, dict[str, str | None]]:
    """The check-request annotations each node's write changes."""
    before = {n.name: n.annotations for n in nodes}
    found = {
        name: {
            key: value
            for key, value in change.annotations.items()
            if key in (REQUEST, COPIED) and before[name].get(key) != value
        }
        for name, change in result.changes.items()
    }
    return {name: changed for name, changed in found.items() if changed}


def test_the_pools_token_is_copied_to_every_member_once() -> None:
    nodes = [member("h100-1", "train"), member("h100-2", "train")]
    result = run(training("t-1"), nodes)
    assert annotation_changes(result, nodes) == {
        "h100-1": {REQUEST: "t-1", COPIED: "t-1"},
        "h100-2": {REQUEST: "t-1", COPIED: "t-1"},
    }
    again = run(training("t-1"), applied(nodes, result))
    assert annotation_changes(again, applied(nodes, result)) == {}, "copied once: no write on the next pass"


def test_a_users_own_request_on_a_member_stands_until_the_pool_asks_again() -> None:
    copied = {REQUEST: "t-1", COPIED: "t-1"}
    nodes = [member("h100-1", "train", annotations=copied), member("h100-2", "train", annotations=copied)]
    asked_by_user = [nodes[0], member("h100-2", "train", annotations={REQUEST: "by-user", COPIED: "t-1"})]
    assert annotation_changes(run(training("t-1"), asked_by_user), asked_by_user) == {}
    assert annotation_changes(run(training("t-2"), asked_by_user), asked_by_user) == {
        "h100-1": {REQUEST: "t-2", COPIED: "t-2"},
        "h100-2": {REQUEST: "t-2", COPIED: "t-2"},
    }


def test_a_member_already_asked_the_same_token_gets_only_the_record() -> None:
    nodes = [member("h100-1", "train", annotations={REQUEST: "t-1"}), member("h100-2", "train")]
    assert annotation_changes(run(training("t-1"), nodes), nodes)["h100-1"] == {COPIED: "t-1"}


def test_without_a_pool_token_or_with_an_invalid_one_nothing_is_written_and_nothing_removed() -> None:
    nodes = [member("h100-1", "train", annotations={REQUEST: "by-user"}), member("h100-2", "train")]
    assert annotation_changes(run(training(None), nodes), nodes) == {}
    assert annotation_changes(run(training("x" * 64), nodes), nodes) == {}


def test_release_takes_the_record_off_and_leaves_the_users_token() -> None:
    nodes: list[NodeView] = [
        member("h100-1", "train", annotations={REQUEST: "t-1", COPIED: "t-1"}),
        member("h100-2", "train", annotations={REQUEST: "t-1", COPIED: "t-1"}),
    ]
    result = run([], nodes)
    for name in ("h100-1", "h100-2"):
        assert result.changes[name].annotations.get(COPIED, "kept") is None
        assert REQUEST not in result.changes[name].annotations


def test_the_pools_annotation_is_read_and_a_new_token_is_a_change_to_plan() -> None:
    metadata: dict[str, Any] = {"name": "train", "uid": "u1", "annotations": {REQUEST: "t-1", "other": "x"}}
    body = {"metadata": metadata, "spec": SPEC}
    record = PoolRecord.from_body(body)
    assert record.check_request == "t-1" and pool_input(record).check_request == "t-1"
    newer = PoolRecord.from_body({**body, "metadata": {**metadata, "annotations": {REQUEST: "t-2"}}})
    assert newer != record, "the controller's pool event compares records: a new token starts a pass"
