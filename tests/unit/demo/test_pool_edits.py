"""Every kind of pool edit reaches the node, exactly: the planner and NVIDIA's simulated components in a
closed loop on a fake clock, with the kubelet's ConfigMap sync delay and the MIG manager's apply time.

NVIDIA's config-manager and MIG manager act only when a node's label value changes, so an edited pool's
configs come under new names (`accelpool.model.nvidia.member_configs`); the pool is Ready only once the node
serves exactly the new layout (per resource, per GPU), never while it still serves the old one. The
planner moves the member to the new configs once they have been stored for the sync delay
(`ConfigSync`, as the controller does), so neither the config-manager nor the MIG manager ever meets a
config it cannot read: no exit, no `failed`, no retry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelpool.decide import patches
from accelpool.decide.planning import ConfigState, ConfigSync, Plan, PlannerOptions, PoolInput, plan
from accelpool.model import nvidia
from accelpool.model.nodes import NodeView
from accelpool_api import conventions
from accelpool_api.validation import validate_spec
from accelpool_demo.apiserver.writes import merge_patch
from accelpool_demo.nvidia import Installation, NodeChanges, Simulation
from tests.support.builders import node_body, ready_condition

START = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
STEP = 5
PROPAGATION = 10.0
HEALTHY = {
    "type": conventions.HEALTH_CONDITION,
    "status": "True",
    "reason": "AllChecksPassed",
    "lastTransitionTime": "2026-11-02T11:00:00Z",
}
GFD_MEMORY = {"H100-80GB": "81559", "A100-40GB": "40960", "L4": "23034"}
"""The memory GFD reads from each model's GPUs (MiB), for its `nvidia.com/gpu.memory` label."""


class Loop:
    """One node, the planner and the simulated NVIDIA components, stepped together every `STEP` seconds."""

    def __init__(self, model: str, count: int) -> None:
        self.body = node_body(
            "n1",
            model,
            count,
            labels={"nvidia.com/gpu.memory": GFD_MEMORY[model]},
            conditions=[ready_condition(), HEALTHY],
        )
        self.simulation = Simulation(
            Installation(propagation_seconds=PROPAGATION, apply_seconds=15.0, restart_seconds=5.0)
        )
        self.config = ConfigState()
        self.second = 0
        self.result: Plan | None = None
        self.spec: Any = None
        self.seen: tuple[dict[str, datetime], dict[str, datetime]] = ({}, {})
        """When each device-plugin key and mig-parted entry was first stored (the controller's `ConfigSync`)."""
        self.sync = True
        self.events: list[str] = []
        self.states: list[str] = []

    def pool(self, spec: dict[str, Any]) -> None:
        checked, problems = validate_spec({**spec, "health": {"burnIn": False}})
        assert checked is not None, problems
        self.spec = checked

    def step(self) -> Plan:
        pools = [PoolInput(name="p", spec=self.spec, uid="uid-p", generation=1)]
        now = START + timedelta(seconds=self.second)
        entries = (self.config.mig or {}).get("mig-configs") or {}
        self.seen = (
            {key: self.seen[0].get(key, now) for key in self.config.device_plugin or {}},
            {name: self.seen[1].get(name, now) for name in entries},
        )
        sync = ConfigSync(PROPAGATION, *self.seen) if self.sync else None
        result = plan(pools, [NodeView.from_body(self.body)], self.config, PlannerOptions(now=now, config_sync=sync))
        self.config = ConfigState(
            device_plugin=result.device_plugin,
            device_plugin_managed=result.device_plugin_managed,
            mig=result.mig_document,
            mig_managed=result.mig_managed,
        )
        change = result.changes.get("n1")
        if change is not None and (body_patch := patches.node_patch(NodeView.from_body(self.body), change)):
            self.body = merge_patch(self.body, body_patch)
        self.body["metadata"]["resourceVersion"] = str(int(self.body["metadata"]["resourceVersion"]) + 1)
        mig_data = {conventions.MIG_CONFIG_DATA_KEY: nvidia.dump(result.mig_document)}
        self.simulation.observe(result.device_plugin, mig_data, float(self.second))
        written = self.simulation.node(self.body, float(self.second))
        self.events += written.events
        if (state := written.labels.get(conventions.MIG_CONFIG_STATE_LABEL)) is not None:
            self.states.append(state)
        labels = self.body["metadata"]["labels"]
        for key, value in written.labels.items():
            if value is None:
                labels.pop(key, None)
            else:
                labels[key] = value
        for key, value in written.resources.items():
            self.body["status"]["capacity"][key] = value
            self.body["status"]["allocatable"][key] = value
        self.second += STEP
        self.result = result
        return result

    def serving(self) -> dict[str, int]:
        allocatable = self.body["status"]["allocatable"]
        return {k: int(v) for k, v in allocatable.items() if k.startswith("nvidia.com/") and int(v) > 0}

    def until_ready(self, wanted: dict[str, int], within: int = 900) -> Plan:
        """Step until the pool is Ready; every Ready pass must find the node serving exactly `wanted`."""
        conditions: Any = None
        for _ in range(within // STEP):
            result = self.step()
            found = result.pool("p")
            assert found is not None and found.status is not None
            conditions = found.status.conditions
            if found.phase == "Ready":
                assert self.serving() == wanted, f"Ready at {self.second} s while serving {self.serving()}"
                assert found.status.capacity.gpus == NodeView.from_body(self.body).gpus
                return result
        raise AssertionError(f"not Ready within {within} s: serving {self.serving()}, {conditions}")


EDITS = [
    pytest.param(
        "L4",
        1,
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 2}}},
        {"nvidia.com/gpu": 2},
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}},
        {"nvidia.com/gpu": 4},
        id="time-slicing-replicas",
    ),
    pytest.param(
        "L4",
        1,
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}},
        {"nvidia.com/gpu": 2},
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 8}}},
        {"nvidia.com/gpu": 8},
        id="mps-replicas",
    ),
    pytest.param(
        "A100-40GB",
        8,
        {"accelerator": "A100-40GB:8", "mig": {"profile": "1g.5gb"}},
        {"nvidia.com/gpu": 56},
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        {"nvidia.com/gpu": 16},
        id="single-profile-change",
    ),
    pytest.param(
        "H100-80GB",
        8,
        {"accelerator": "H100:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        {"nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16},
        {"accelerator": "H100:8", "mig": {"profiles": ["4g.40gb", "2g.20gb", "1g.10gb"]}},
        {"nvidia.com/mig-4g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 8},
        id="mixed-layout-change",
    ),
    pytest.param(
        "A100-40GB",
        8,
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        {"nvidia.com/gpu": 16},
        {"accelerator": "A100-40GB:8"},
        {"nvidia.com/gpu": 8},
        id="mig-on-to-off",
    ),
    pytest.param(
        "A100-40GB",
        8,
        {"accelerator": "A100-40GB:8"},
        {"nvidia.com/gpu": 8},
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        {"nvidia.com/gpu": 16},
        id="mig-off-to-on",
    ),
]


@pytest.mark.parametrize(("model", "count", "before", "serves_before", "after", "serves_after"), EDITS)
def test_an_edited_pool_reaches_its_node_and_is_ready_only_when_it_serves_exactly_the_new_layout(
    model: str,
    count: int,
    before: dict[str, Any],
    serves_before: dict[str, int],
    after: dict[str, Any],
    serves_after: dict[str, int],
) -> None:
    loop = Loop(model, count)
    loop.pool(before)
    loop.until_ready(serves_before)
    old_key = loop.body["metadata"]["labels"][conventions.DEVICE_PLUGIN_CONFIG_LABEL]
    old_entry = loop.body["metadata"]["labels"].get(conventions.MIG_CONFIG_LABEL)
    loop.events, loop.states = [], []

    loop.pool(after)
    loop.until_ready(serves_after)
    assert "failed" not in loop.states, loop.events
    assert not [e for e in loop.events if "exited" in e], "the member moved once its pods could read the new configs"
    labels = loop.body["metadata"]["labels"]
    moved = (labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL], labels.get(conventions.MIG_CONFIG_LABEL))
    assert moved != (old_key, old_entry), "a label value changed: NVIDIA's components act only on a change"
    loop.step()  # the pass after the node moved: no node selects the old configs any more
    assert old_key == labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] or old_key not in (loop.config.device_plugin or {})
    mig_entries = (loop.config.mig or {}).get("mig-configs") or {}
    assert (
        old_entry in (None, labels.get(conventions.MIG_CONFIG_LABEL))
        or old_entry not in mig_entries
        or (old_entry in nvidia.DEFAULT_MIG_CONFIG_NAMES)
    )


def test_a_mig_manager_that_created_nothing_is_retried_once_repaired() -> None:
    """`accelpool demo inject NODE mig-broken`, then `clear`: the MIG manager said success for nothing and
    will not run again by itself; the operator sets the label again after the backoff."""
    loop = Loop("A100-40GB", 8)
    loop.pool({"accelerator": "A100-40GB:8", "mig": {"profile": "1g.5gb"}})
    original = loop.simulation.node

    def broken(
        node: Mapping[str, Any], now: float, *, broken: bool = False, mig_labels: Sequence[str | None] = ()
    ) -> NodeChanges:
        return original(node, now, broken=loop.second < 120, mig_labels=mig_labels)

    loop.simulation.node = broken  # type: ignore[method-assign]  # the demo's mig-broken fault, cleared at 120 s
    loop.until_ready({"nvidia.com/gpu": 56}, within=900)
    assert loop.second > 120
    retried = loop.body["metadata"]["annotations"].get(conventions.MIG_RETRY_ANNOTATION)
    assert retried is None, "a success that serves the layout clears the record"
