"""Driver and CUDA versions across a pool's members (`accelpool.decide.poolstatus.drivers`) and what serves now.

A pool whose members' agents report different driver versions is DriversConsistent=False naming the
minority's nodes, with a Warning Event; nothing is quarantined and the phase does not change. Capacity
counts only what pods can use now: the demo's pool of 2 with one quarantined member and a spare in
burn-in serves 8 GPUs, not 24.
"""

from __future__ import annotations

import json
from typing import Any

from accelpool.decide.poolstatus import Member
from accelpool.decide.poolstatus.drivers import drivers_consistent
from accelpool_api import conventions
from accelpool_core import catalog

from .conftest import applied, member, members, node, pool, run

HEALTHY = ("True", "AllChecksPassed", "8 GPUs passed all checks", "2026-11-02T11:00:00Z")
XID79 = ("False", "XidError79", "XID 79 (GPU fallen off the bus)", "2026-11-02T11:59:00Z")


def with_driver(name: str, driver: str | None, cuda: str | None = "12.4", pool_name: str = "p", **kwargs: Any) -> Any:
    report: dict[str, Any] = {"status": "Healthy", "reason": "AllChecksPassed", "pool": pool_name, "complete": True}
    if driver is not None:
        report |= {"driverVersion": driver, "cudaVersion": cuda}
    annotations = {conventions.HEALTH_ANNOTATION: json.dumps(report)}
    return member(name, "p", health=HEALTHY, annotations=annotations, **kwargs)


def test_one_version_on_every_member_is_consistent() -> None:
    found = drivers_consistent([Member(with_driver(f"m{i}", "550.54.15")) for i in range(3)], "p")
    assert found == (True, "Consistent", "driver 550.54.15 (CUDA 12.4) on 3 of 3 members")


def test_members_that_disagree_are_named_with_their_versions() -> None:
    views = [with_driver(f"m{i}", "550.54.15") for i in range(3)]
    views += [with_driver("m3", "535.104.05", "12.2"), with_driver("m4", None)]
    found = drivers_consistent([Member(v) for v in views], "p")
    assert found == (
        False,
        "DriverVersionMismatch",
        "members run 2 driver versions: driver 550.54.15 (CUDA 12.4) on 3 of 4; driver 535.104.05 (CUDA 12.2) on m3",
    )


def test_a_report_of_another_pools_agent_and_no_report_at_all_say_nothing() -> None:
    views = [with_driver("m0", "550.54.15"), with_driver("m1", "535.104.05", pool_name="other")]
    assert drivers_consistent([Member(v) for v in views], "p").ok is True
    assert drivers_consistent([Member(member("m2", "p"))], "p") == (
        True,
        "NotReported",
        "no member reports its driver version: nothing disagrees",
    )


def test_a_mismatch_warns_and_counts_versions_but_quarantines_nothing_and_keeps_the_phase() -> None:
    nodes = [with_driver("m0", "550.54.15"), with_driver("m1", "535.104.05", "12.2")]
    result = run([pool("p", {"accelerator": "H100", "nodes": 2})], nodes)
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.driver_versions == 2
    drivers = next(c for c in found.status.conditions if c.type == "DriversConsistent")
    assert (drivers.status, drivers.reason) == ("False", "DriverVersionMismatch")
    event = next(e for e in result.events if e.reason == "DriverVersionMismatch")
    assert (event.kind, event.name, event.type, event.message) == ("ComputePool", "p", "Warning", drivers.message)
    assert result.remediations == ()
    assert found.status.nodes.quarantined == 0
    same = [with_driver("m0", "550.54.15"), with_driver("m1", "550.54.15")]
    consistent = run([pool("p", {"accelerator": "H100", "nodes": 2})], same)
    plan = consistent.pool("p")
    assert plan is not None and plan.status is not None
    assert plan.status.phase == found.status.phase, "a mismatch does not change the phase"


def test_capacity_of_a_pool_with_a_quarantined_member_and_a_spare_is_what_serves() -> None:
    spec = {"accelerator": "H100", "nodes": 2}
    nodes = [member("m1", "p", health=XID79), member("m2", "p", health=HEALTHY), node("spare", health=HEALTHY)]
    result = run([pool("p", spec)], nodes)
    assert members(result, "p") == ["m1", "m2", "spare"]
    found = result.pool("p")
    assert found is not None and found.status is not None
    capacity = found.status.capacity
    assert (capacity.gpus, capacity.quarantined_gpus, capacity.burn_in_gpus, capacity.unschedulable_gpus) == (
        8,
        8,
        8,
        0,
    )
    assert capacity.memory_gib == 640
    assert found.expected_tflops == round((catalog.BY_NAME["H100-80GB"].peaks.get("bf16") or 0) * 8, 1), (
        "of what serves"
    )
    report = '{"status":"Healthy","reason":"AllChecksPassed","pool":"p","complete":true}'
    passed = [
        member(
            "spare",
            "p",
            health=HEALTHY,
            annotations={conventions.HEALTH_ANNOTATION: report},
            taints=[{"key": conventions.BURN_IN_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}],
        )
        if n.name == "spare"
        else n
        for n in applied(nodes, result)
    ]
    after = run([pool("p", spec)], passed)
    served = after.pool("p")
    assert served is not None and served.status is not None
    assert (served.status.capacity.gpus, served.status.capacity.quarantined_gpus) == (16, 8)
