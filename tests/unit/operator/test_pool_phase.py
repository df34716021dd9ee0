"""A pool's phase from its census and findings, and its capacity (`accelpool.decide.poolstatus.phase`, `.capacity`)."""

from __future__ import annotations

from accelpool.decide.poolstatus import Finding, Member, Selection
from accelpool.decide.poolstatus.capacity import capacity
from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.layout import Layout, PoolShape, judge_layout
from accelpool.decide.poolstatus.phase import PhaseDecision, configuring, decide_phase, degradations
from accelpool_api import conventions
from accelpool_core import catalog

from .conftest import member, pool

HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T00:00:00Z")
UNKNOWN = ("Unknown", "Starting", "", "2026-11-02T00:00:00Z")
XID = ("False", "XidError79", "XID 79", "2026-11-02T11:00:00Z")
SELECTED = Finding(True, "Selected", "2 of 2 nodes selected")
SHORT = Finding(False, "InsufficientNodes", "1 of 2: only 1 free nodes match H100-80GB")
REPORTING = Finding(True, "Reporting", "")


def h100_census(*views: object, layout: Layout | None = None) -> Census:
    spec = pool("p", {"accelerator": "H100"}).spec
    assert spec is not None
    shape = PoolShape("p", spec, spec.resolve())
    found = tuple(Member(v) for v in views)  # type: ignore[arg-type]
    return Census.take(found, shape, layout or judge_layout(found, shape, shape.resources_per_gpu()))


def test_no_members_is_pending_or_provisioning_with_the_nodes_selected_message() -> None:
    empty = h100_census()
    assert decide_phase(Selection(desired=2), empty, SHORT, [], []) == PhaseDecision("Pending", SHORT.message)
    karpenter = Selection(desired=2, provisioner="karpenter")
    assert decide_phase(karpenter, empty, SHORT, [], []).phase == "Provisioning"
    assert decide_phase(Selection(desired=0), empty, SELECTED, [], []) == PhaseDecision("Ready", "0 of 0 nodes ready")


def test_degraded_outranks_configuring_and_a_shortfall_degrades() -> None:
    one = h100_census(member("m1", "p", health=HEALTHY))
    decided = decide_phase(Selection(desired=1), one, SELECTED, ["1 unhealthy"], ["MIG pending on 1"])
    assert decided == PhaseDecision("Degraded", "1 unhealthy")
    assert decide_phase(Selection(desired=2), one, SHORT, [], []) == PhaseDecision("Degraded", SHORT.message)
    karpenter = Selection(desired=2, provisioner="karpenter")
    assert decide_phase(karpenter, one, SHORT, [], []) == PhaseDecision("Provisioning", SHORT.message)
    assert decide_phase(Selection(desired=1), one, SELECTED, [], ["1 agents not reporting"]) == PhaseDecision(
        "Configuring", "1 agents not reporting"
    )


def test_ready_is_a_condition_of_the_phase() -> None:
    assert PhaseDecision("Ready", "2 of 2 nodes ready").ready() == Finding(True, "Ready", "2 of 2 nodes ready")
    assert PhaseDecision("Degraded", "1 quarantined").ready() == Finding(False, "Degraded", "1 quarantined")


def test_degradations_name_each_kind_of_trouble() -> None:
    quarantine = [{"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}]
    found = h100_census(
        member("q1", "p", health=XID, taints=quarantine),
        member("u1", "p", health=XID),
        member("n1", "p", health=HEALTHY, ready=False),
        member("c1", "p", health=HEALTHY, unschedulable=True),
    )
    blocked = Finding(False, "ImagePullFailed", "")
    assert degradations(found, Layout(), blocked) == [
        "1 quarantined",
        "1 unhealthy",
        "1 not Ready (n1)",
        "1 cordoned (c1)",
        "agents cannot run (ImagePullFailed)",
    ]
    waiting = Finding(False, "WaitingForAgents", "")
    assert degradations(h100_census(member("m1", "p")), Layout(), waiting) == []


def test_configuring_names_what_is_on_its_way() -> None:
    found = h100_census(member("s1", "p"), member("w1", "p", health=UNKNOWN))
    assert configuring(found, Layout(), nvidia_pool=True, device_plugin_written=False) == [
        "device plugin config pending",
        "1 agents not reporting",
        "1 health Unknown",
    ]
    ready = h100_census(member("m1", "p", health=HEALTHY))
    assert configuring(ready, Layout(), nvidia_pool=True, device_plugin_written=True) == []


def test_capacity_counts_serving_members_only_and_the_others_apart_by_why() -> None:
    report = '{"status":"Healthy","reason":"AllChecksPassed","tflops":900.5,"dtype":"bf16"}'
    quarantine = [{"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}]
    burn_in = [{"key": conventions.BURN_IN_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}]
    annotated = {conventions.HEALTH_ANNOTATION: report}
    census = h100_census(
        member("m1", "p", health=HEALTHY, annotations=annotated),
        member("m2", "p", health=HEALTHY, annotations=annotated, taints=quarantine),
        member("m3", "p", health=HEALTHY, annotations=annotated, taints=[*quarantine, *burn_in]),
        member("m4", "p", health=HEALTHY, annotations=annotated, taints=burn_in),
        member("m5", "p", health=HEALTHY, annotations=annotated, ready=False),
    )
    found = capacity(census, catalog.BY_NAME["H100-80GB"], {"nvidia.com/gpu": 1}, "bf16")
    assert (found.gpus, found.memory_gib, found.measured_tflops) == (8, 640, 900.5)
    assert found.resources == {"nvidia.com/gpu": 8}
    assert (found.quarantined_gpus, found.burn_in_gpus, found.unschedulable_gpus) == (16, 8, 8)
    assert found.unconfigured_gpus == 0


def test_capacity_counts_only_members_that_serve_the_config_exactly() -> None:
    still_mig = {conventions.MIG_CONFIG_STATE_LABEL: "pending"}
    census = h100_census(
        member("m1", "p", health=HEALTHY),
        member("m2", "p", health=HEALTHY, labels=still_mig),  # its MIG manager has not turned MIG off yet
        member("m3", "p", health=HEALTHY, allocatable={"nvidia.com/gpu": "16"}),  # another config's replicas
    )
    found = capacity(census, catalog.BY_NAME["H100-80GB"], {"nvidia.com/gpu": 1}, "bf16")
    assert (found.gpus, found.memory_gib, found.resources) == (8, 640, {"nvidia.com/gpu": 8})
    assert (found.unconfigured_gpus, found.unschedulable_gpus) == (16, 0)
    other_dtype = capacity(census, catalog.BY_NAME["H100-80GB"], {}, "fp32")
    assert other_dtype.measured_tflops is None


def test_burn_in_is_on_its_way_and_a_failed_burn_in_degrades() -> None:
    pending = [{"key": conventions.BURN_IN_TAINT_KEY, "value": "pending", "effect": "NoSchedule"}]
    failed = [{"key": conventions.BURN_IN_TAINT_KEY, "value": "failed", "effect": "NoSchedule"}]
    found = h100_census(
        member("b1", "p", health=HEALTHY, taints=pending), member("f1", "p", health=HEALTHY, taints=failed)
    )
    assert [m.name for m in found.burn_in] == ["b1", "f1"]
    assert [m.name for m in found.burn_in_failed] == ["f1"]
    assert found.serving == () and found.ready == (), "a member in burn-in serves nothing yet"
    assert configuring(found, Layout(), nvidia_pool=False, device_plugin_written=True) == ["1 in burn-in (b1)"]
    assert degradations(found, Layout(), REPORTING) == ["1 failed burn-in (f1)"]
    all_in_burn_in = h100_census(member("b1", "p", health=HEALTHY, taints=pending))
    pending_only = configuring(all_in_burn_in, Layout(), nvidia_pool=False, device_plugin_written=True)
    decided = decide_phase(Selection(desired=1), all_in_burn_in, SELECTED, [], pending_only)
    assert decided == PhaseDecision("Configuring", "1 in burn-in (b1)")
