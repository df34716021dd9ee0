"""The planner and NVIDIA's simulated components in a closed loop, on a fake clock.

The MIG manager reads a ConfigMap the kubelet projects into its pod up to a minute after the
operator writes it; a node labelled with an entry the mounted file does not hold yet goes
`failed`, and NVIDIA's MIG manager never retries by itself. The operator must not leave the node
there: it takes the label off and puts it back after a backoff, and the pool becomes Ready once
the node advertises the layout.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from accelpool.decide import patches
from accelpool.decide.planning import ConfigState, Plan, PlannerOptions, PoolInput, plan
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions
from accelpool_api.validation import validate_spec
from accelpool_demo.apiserver.writes import merge_patch
from accelpool_demo.nvidia import Installation, Simulation
from tests.support.builders import node_body, ready_condition

START = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
HEALTHY = {
    "type": conventions.HEALTH_CONDITION,
    "status": "True",
    "reason": "AllChecksPassed",
    "lastTransitionTime": "2026-11-02T11:00:00Z",
}


def _mig_state(result: Plan) -> tuple[str, str]:
    found = result.pool("p")
    assert found is not None and found.status is not None
    condition = next(c for c in found.status.conditions if c.type == "MigConfigured")
    return condition.status, condition.reason


def test_a_mig_node_that_failed_on_a_config_not_yet_mounted_is_configured_after_a_retry() -> None:
    spec, problems = validate_spec({"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}})
    assert spec is not None, problems
    pools = [PoolInput(name="p", spec=spec, uid="uid-p", generation=1)]
    simulation = Simulation(Installation(propagation_seconds=45.0, apply_seconds=5.0))
    body = node_body(
        "h100-1",
        "H100-80GB",
        labels={"nvidia.com/gpu.memory": "81559"},  # what GFD reads from the GPUs
        conditions=[ready_condition(), HEALTHY],
    )
    # The cluster ran before the pool: both ConfigMaps exist and NVIDIA's pods have mounted them.
    before = plan([], [NodeView.from_body(body)], ConfigState(), PlannerOptions(now=START - timedelta(minutes=10)))
    simulation.observe(
        before.device_plugin, {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(before.mig_document)}, -600.0
    )
    simulation.node(body, -300.0)
    config = ConfigState(
        device_plugin=before.device_plugin,
        device_plugin_managed=before.device_plugin_managed,
        mig=before.mig_document,
        mig_managed=before.mig_managed,
    )
    seen_failed = retried = False
    result: Plan | None = None
    for second in range(0, 900, 5):
        now = START + timedelta(seconds=second)
        result = plan(pools, [NodeView.from_body(body)], config, PlannerOptions(now=now))
        config = ConfigState(
            device_plugin=result.device_plugin,
            device_plugin_managed=result.device_plugin_managed,
            mig=result.mig_document,
            mig_managed=result.mig_managed,
        )
        retried = retried or any(e.reason == "MigConfigRetried" for e in result.events)
        change = result.changes.get("h100-1")
        if change is not None:
            body_patch = patches.node_patch(NodeView.from_body(body), change)
            if body_patch is not None:
                body = merge_patch(body, body_patch)
        body["metadata"]["resourceVersion"] = str(int(body["metadata"]["resourceVersion"]) + 1)
        simulation.observe(
            result.device_plugin, {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(result.mig_document)}, float(second)
        )
        written = simulation.node(body, float(second))
        for key, value in written.labels.items():
            if value is None:
                body["metadata"]["labels"].pop(key, None)
            else:
                body["metadata"]["labels"][key] = value
        for key, value in written.resources.items():
            body["status"]["capacity"][key] = value
            body["status"]["allocatable"][key] = value
        seen_failed = seen_failed or body["metadata"]["labels"].get(conventions.MIG_CONFIG_STATE_LABEL) == "failed"
        if _mig_state(result) == ("True", "Configured"):
            break
    assert seen_failed, "the MIG manager met a label ahead of its mounted file"
    assert retried, "the operator set the label again"
    assert result is not None and _mig_state(result) == ("True", "Configured")
    assert body["status"]["allocatable"]["nvidia.com/gpu"] == "16", "8 GPUs x 2 x 3g.40gb under single"
    assert conventions.MIG_RETRY_ANNOTATION not in body["metadata"].get("annotations", {})
