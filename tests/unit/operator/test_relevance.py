"""`accelpool.runtime.controller.relevance`: which node changes could change a plan."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta
from typing import Any

from accelpool.model.nodes import NodeView
from accelpool.runtime.controller.relevance import same_for_planning, selector_keys
from accelpool_api import conventions

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


def body(heartbeat: datetime = NOW) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "h100-1",
            "resourceVersion": "10",
            "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"},
        },
        "status": {
            "conditions": [
                {"type": "Ready", "status": "True", "lastTransitionTime": "2026-11-01T00:00:00Z"},
                {
                    "type": conventions.HEALTH_CONDITION,
                    "status": "True",
                    "reason": "AllChecksPassed",
                    "lastHeartbeatTime": heartbeat.isoformat(),
                },
            ]
        },
    }


def changed(base: dict[str, Any], **edits: Any) -> dict[str, Any]:
    result = copy.deepcopy(base)
    result["metadata"]["resourceVersion"] = "11"
    for key, value in edits.items():
        result["metadata"].setdefault(key, {}).update(value)
    return result


def same(
    before: dict[str, Any], after: dict[str, Any], keys: frozenset[str] = frozenset(), unchanged_for: float = 0.0
) -> bool:
    """`unchanged_for`: how long the operator had seen `before`'s health condition unchanged when `after` came."""
    return same_for_planning(
        NodeView.from_body(before), NodeView.from_body(after), selector_keys=keys, unchanged_for=unchanged_for
    )


def test_a_new_resource_version_or_a_label_no_plan_reads_is_not_relevant() -> None:
    assert same(body(), changed(body()))
    assert same(body(), changed(body(), labels={"example.com/rack": "r7"}, annotations={"example.com/x": "1"}))


def test_labels_planning_reads_are_relevant() -> None:
    assert not same(body(), changed(body(), labels={conventions.POOL_LABEL: "train"}))
    assert not same(body(), changed(body(), labels={"nvidia.com/mig.config.state": "success"}))
    assert not same(
        body(),
        changed(body(), labels={"example.com/rack": "r7"}),
        selector_keys([{"nodeSelector": {"example.com/rack": "r1"}}]),
    )


def test_the_health_verdict_is_relevant_and_a_fresh_heartbeat_is_not() -> None:
    fresher = body(heartbeat=NOW + timedelta(seconds=5))
    assert same(body(), fresher)
    unhealthy = copy.deepcopy(body())
    unhealthy["status"]["conditions"][1] |= {"status": "False", "reason": "XidError79"}
    assert not same(body(), unhealthy)


def test_a_heartbeat_after_a_stale_one_is_relevant() -> None:
    """Stale by the operator's clock (`accelpool.runtime.controller.freshness`), whatever time the agent wrote."""
    stale = conventions.HEALTH_STALE_SECONDS
    assert not same(body(), body(heartbeat=NOW + timedelta(seconds=5)), unchanged_for=stale)
    assert same(body(), body(heartbeat=NOW + timedelta(seconds=5)), unchanged_for=stale - 1)


def test_a_node_that_appears_or_goes_is_relevant() -> None:
    view = NodeView.from_body(body())
    assert not same_for_planning(None, view, selector_keys=())
    assert not same_for_planning(view, None, selector_keys=())
