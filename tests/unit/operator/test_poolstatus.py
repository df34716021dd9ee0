"""Pool status: phases, conditions and their transition times, capacity, members, scheduling."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

import pytest

import accelpool_api as api
from accelpool.decide.planning import PoolInput
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, conditions, member, mig_entry_name, pool, run

HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T00:00:00Z")
REPORT = '{"status":"Healthy","reason":"AllChecksPassed","tflops":6000.5,"dtype":"bf16"}'


def mig_member(name: str, state: str | None, **kwargs: object) -> NodeView:
    """A member of the MIG pool `p` (8 x A100-40GB, 2 x 3g.20gb each, single strategy) as NVIDIA's side left it:
    after `success` the device plugin advertises the 16 MIG devices as nvidia.com/gpu and GFD says single."""
    labels = {conventions.MIG_CONFIG_LABEL: mig_entry_name("p", MIG), **dict(kwargs.pop("labels", {}) or {})}  # type: ignore[call-overload]
    if state is not None:
        labels[conventions.MIG_CONFIG_STATE_LABEL] = state
    if state == "success":
        labels.setdefault(conventions.GFD_MIG_STRATEGY_LABEL, "single")
        kwargs.setdefault("allocatable", {"nvidia.com/gpu": "16"})
    return member(name, "p", "A100-40GB", labels=labels, **kwargs)  # type: ignore[arg-type]


MIG = {"accelerator": "A100-40GB", "nodes": 2, "mig": {"profile": "3g.20gb"}}


@pytest.mark.parametrize(
    ("states", "reason", "phase"),
    [
        (("success", "success"), "Configured", "Ready"),
        (("success", "pending"), "Pending", "Configuring"),
        (("success", None), "Pending", "Configuring"),
        (("failed", "success"), "Failed", "Degraded"),
    ],
)
def test_mig_configured_follows_the_mig_manager(states: tuple[str | None, ...], reason: str, phase: str) -> None:
    nodes = [mig_member(f"m{i}", s, health=HEALTHY) for i, s in enumerate(states)]
    result = run([pool("p", MIG)], nodes)
    assert conditions(result, "p")["MigConfigured"][1] == reason
    found = result.pool("p")
    assert found is not None and found.phase == phase


def test_phases_from_empty_to_ready() -> None:
    assert run([pool("p", {"accelerator": "H100"})], []).pool("p").phase == "Pending"  # type: ignore[union-attr]
    karpenter = {"accelerator": "H200", "nodes": 1, "maxNodes": 2, "provisioner": {"type": "karpenter"}}
    assert run([pool("k", karpenter)], []).pool("k").phase == "Provisioning"  # type: ignore[union-attr]
    silent = run([pool("p", {"accelerator": "H100"})], [member("m1", "p")])
    assert silent.pool("p").phase == "Configuring"  # type: ignore[union-attr]
    assert conditions(silent, "p")["AgentReady"] == ("False", "WaitingForAgents")
    assert conditions(silent, "p")["Healthy"] == ("Unknown", "NotReported")
    ready = run([pool("p", {"accelerator": "H100"})], [member("m1", "p", health=HEALTHY)])
    assert ready.pool("p").phase == "Ready"  # type: ignore[union-attr]
    assert conditions(ready, "p")["Ready"] == ("True", "Ready")
    zero = run([pool("p", {"accelerator": "H100", "nodes": 0})], [])
    assert zero.pool("p").phase == "Ready"  # type: ignore[union-attr]


def test_every_vendors_pool_is_ready_only_when_its_agents_report_healthy() -> None:
    unknown = ("Unknown", "DeviceUnavailable", "no devices yet", "2026-11-02T00:00:00Z")
    for name, accelerator in (("h100", "H100-80GB"), ("amd", "MI300X"), ("trn", "Trainium2"), ("tpu", "TPU-v5p")):
        waiting = run([pool(name, {"accelerator": accelerator})], [member("m1", name, accelerator, health=unknown)])
        assert waiting.pool(name).phase == "Configuring", accelerator  # type: ignore[union-attr]
        ready = run([pool(name, {"accelerator": accelerator})], [member("m1", name, accelerator, health=HEALTHY)])
        assert ready.pool(name).phase == "Ready", accelerator  # type: ignore[union-attr]


def test_transition_times_are_kept_while_a_condition_holds() -> None:
    first = run([pool("p", {"accelerator": "H100"})], [member("m1", "p", health=HEALTHY)])
    status = first.pool("p").status  # type: ignore[union-attr]
    assert status is not None
    later = NOW + timedelta(hours=1)
    previous = pool("p", {"accelerator": "H100"})
    previous = api_replace(previous, status)
    unhealthy = ("False", "XidError48", "double-bit ECC", "2026-11-02T12:30:00Z")
    second = run([previous], [member("m1", "p", health=unhealthy)], now=later)
    second_status = second.pool("p").status  # type: ignore[union-attr]
    assert second_status is not None
    times = {c.type: c.last_transition_time for c in second_status.conditions}
    assert times["Valid"] == "2026-11-02T12:00:00Z", "unchanged condition keeps its time"
    assert times["Healthy"] == "2026-11-02T13:00:00Z", "changed condition gets the new time"
    assert all(c.observed_generation == 1 for c in second_status.conditions)


def test_a_steady_status_is_built_of_the_last_ones_parts_and_a_change_gets_new_ones() -> None:
    spec = {"accelerator": "H100", "nodes": 2}
    nodes = [member("m1", "p", health=HEALTHY), member("m2", "p", health=HEALTHY)]
    first = run([pool("p", spec)], nodes).pool("p").status  # type: ignore[union-attr]
    assert first is not None
    later = NOW + timedelta(minutes=5)
    steady = run([api_replace(pool("p", spec), first)], nodes, now=later).pool("p").status  # type: ignore[union-attr]
    assert steady == first
    assert all(a is b for a, b in zip(steady.conditions, first.conditions, strict=True)), "unchanged: the same"
    assert all(a is b for a, b in zip(steady.members, first.members, strict=True))

    unhealthy = ("False", "XidError48", "double-bit ECC", "2026-11-02T12:30:00Z")
    changed_nodes = [member("m1", "p", health=unhealthy), nodes[1]]
    changed = run([api_replace(pool("p", spec), first)], changed_nodes, now=later).pool("p").status  # type: ignore[union-attr]
    assert changed is not None
    by_node = {m.node: m for m in changed.members}
    assert by_node["m1"].health == "Quarantined" and by_node["m1"] is not first.members[0]
    assert by_node["m2"] is next(m for m in first.members if m.node == "m2"), "the unchanged member's entry is kept"
    healthy = next(c for c in changed.conditions if c.type == "Healthy")
    assert healthy.status == "False" and healthy.last_transition_time == "2026-11-02T12:05:00Z"
    valid = next(c for c in changed.conditions if c.type == "Valid")
    assert valid is next(c for c in first.conditions if c.type == "Valid")


def api_replace(pool_input: PoolInput, status: api.ComputePoolStatus) -> PoolInput:
    return replace(pool_input, previous=status)


def test_capacity_members_and_measured_tflops() -> None:
    nodes = [
        member("m1", "p", health=HEALTHY, annotations={conventions.HEALTH_ANNOTATION: REPORT}),
        member("m2", "p", health=HEALTHY),
    ]
    result = run([pool("p", {"accelerator": "H100:8", "nodes": 2})], nodes)
    status = result.pool("p").status  # type: ignore[union-attr]
    assert status is not None
    assert status.capacity.gpus == 16
    assert status.capacity.memory_gib == 1280
    assert status.capacity.measured_tflops == 6000.5
    assert status.nodes == api.NodeCounts(desired=2, members=2, ready=2, quarantined=0, summary="2/2")
    assert status.selector == "accelpool.io/pool=p"
    assert status.accelerator == "H100-80GB x8"
    assert [m.model_dump(exclude_none=True) for m in status.members] == [
        {"node": "m1", "gpus": 8, "health": "Healthy", "since": "2026-11-02T00:00:00Z", "tflops": 6000.5},
        {"node": "m2", "gpus": 8, "health": "Healthy", "since": "2026-11-02T00:00:00Z"},
    ]
    expected = result.pool("p").expected_tflops  # type: ignore[union-attr]
    assert expected == 989 * 16


def test_status_members_are_bounded_and_counted_in_full() -> None:
    nodes = [member(f"m{i:03d}", "p", health=HEALTHY) for i in range(150)]
    result = run([pool("p", {"accelerator": "H100", "nodes": 150})], nodes)
    status = result.pool("p").status  # type: ignore[union-attr]
    assert status is not None
    assert len(status.members) == api.MAX_STATUS_MEMBERS
    assert status.nodes.members == 150


def test_scheduling_tolerates_lasting_foreign_taints_only() -> None:
    taints = [
        {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
        {"key": "dedicated", "effect": "NoExecute"},
        {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        {"key": "karpenter.sh/disrupted", "effect": "NoSchedule"},
        {"key": "nvidia.com/gpu-xid-error", "value": "true", "effect": "NoSchedule"},
        {"key": "soft", "effect": "PreferNoSchedule"},
    ]
    result = run([pool("p", {"accelerator": "H100"})], [member("m1", "p", taints=taints)])
    status = result.pool("p").status  # type: ignore[union-attr]
    assert status is not None
    assert [t.model_dump(exclude_none=True) for t in status.scheduling.tolerations] == [
        {"key": "accelpool.io/pool", "operator": "Equal", "value": "p", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Exists", "effect": "NoExecute"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
