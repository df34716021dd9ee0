"""Where a stored pool stands while the Python API waits for it: the status as typed, and ready only for the
spec now stored."""

from __future__ import annotations

from typing import Any

import accelpool_api as api
from accelpool_sdk import waiting


def stored(generation: int, status: dict[str, Any] | None) -> dict[str, Any]:
    return {"metadata": {"name": "p", "generation": generation}, **({"status": status} if status else {})}


def test_a_newer_operators_status_fields_are_left_out_not_fatal() -> None:
    status = api.read_status({"phase": "Ready", "observedGeneration": 1, "fleetSchedule": {"window": "nightly"}})
    assert status is not None and status.phase == "Ready"
    assert api.read_status({}) is None
    assert api.read_status({"phase": "Sleeping"}) is None


def test_ready_and_failed_count_only_for_the_spec_now_stored() -> None:
    assert waiting.judge(stored(1, None)).stage == "waiting"
    assert waiting.judge(stored(2, {"phase": "Ready", "observedGeneration": 2})).stage == "ready"
    earlier = waiting.judge(stored(3, {"phase": "Ready", "observedGeneration": 2}))
    assert (earlier.stage, earlier.summary) == (
        "waiting",
        "Ready, nodes 0/0 (0 ready), 0 devices serving (for an earlier spec)",
    )
    assert waiting.judge(stored(2, {"phase": "Failed", "observedGeneration": 2})).stage == "failed"
    assert waiting.judge(stored(2, {"phase": "Failed", "observedGeneration": 1})).stage == "waiting"


def test_the_summary_says_why_a_pool_is_not_ready() -> None:
    status = {
        "phase": "Degraded",
        "observedGeneration": 1,
        "nodes": {"desired": 4, "members": 4, "ready": 3, "quarantined": 1, "summary": "4/4"},
        "capacity": {"gpus": 24},
        "conditions": [
            {"type": "Healthy", "status": "False", "reason": "Quarantined", "message": "h100-2 quarantined"},
            {"type": "Ready", "status": "False", "reason": "Degraded", "message": "1 quarantined"},
        ],
    }
    assert (
        waiting.judge(stored(1, status)).summary == "Degraded, nodes 4/4 (3 ready), 24 devices serving: 1 quarantined"
    )
