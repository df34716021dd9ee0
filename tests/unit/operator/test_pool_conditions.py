"""Each status condition function on its own: explicit inputs in, one finding out (`accelpool.decide.poolstatus`)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

import accelpool_api as api
from accelpool.decide.poolstatus import Breaker, Finding, Member, Selection
from accelpool.decide.poolstatus.census import Census
from accelpool.decide.poolstatus.compose import ConditionHistory
from accelpool.decide.poolstatus.conditions import (
    agent_ready,
    device_plugin_configured,
    healthy,
    invalid,
    mig_configured,
    nodes_selected,
    valid,
)
from accelpool.decide.poolstatus.layout import Layout, PoolShape, judge_layout
from accelpool.model import agents
from accelpool_api import conventions

from .conftest import NOW, member, mig_entry_name, pool

HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T00:00:00Z")
UNKNOWN = ("Unknown", "Starting", "", "2026-11-02T00:00:00Z")
XID = ("False", "XidError79", "XID 79 (GPU fallen off the bus)", "2026-11-02T11:00:00Z")
QUARANTINE_TAINT = {"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}


def shape(spec: dict[str, Any], name: str = "p") -> PoolShape:
    checked = pool(name, spec).spec
    assert checked is not None
    return PoolShape(name, checked, checked.resolve())


def members(*views: Any) -> tuple[Member, ...]:
    return tuple(Member(v) for v in views)


def census(pool_shape: PoolShape, found: tuple[Member, ...], layout: Layout | None = None) -> Census:
    return Census.take(found, pool_shape, layout or Layout())


# ---------------------------------------------------------------- Valid


def test_valid_names_the_accelerator_and_size_invalid_says_why() -> None:
    assert valid("H100-80GB x8", 3) == Finding(True, "Valid", "H100-80GB x8, 3 node(s)")
    assert invalid(["spec.nodes: bad", "spec.mig: worse"], unplannable=False) == Finding(
        False, "InvalidSpec", "spec.nodes: bad; spec.mig: worse"
    )
    assert invalid(["KeyError: x"], unplannable=True).reason == "PlanningFailed"


# ---------------------------------------------------------------- NodesSelected


@pytest.mark.parametrize(
    ("selection", "count", "expected"),
    [
        (Selection(desired=2), 2, (True, "Selected", "2 of 2 nodes selected")),
        (
            Selection(desired=3, shortfall="1 cordoned"),
            1,
            (False, "InsufficientNodes", "1 of 3: only 1 free nodes match H100-80GB (1 cordoned)"),
        ),
        (Selection(desired=3), 1, (False, "InsufficientNodes", "1 of 3: only 1 free nodes match H100-80GB")),
        (
            Selection(desired=2, provisioner="karpenter"),
            0,
            (False, "Provisioning", "0 of 2: waiting for Karpenter NodePool accelpool-p"),
        ),
        (
            Selection(desired=2, provisioner="karpenter", karpenter_available=False),
            0,
            (False, "KarpenterNotInstalled", "0 of 2: the karpenter.sh/v1 NodePool API is not served by this cluster"),
        ),
        (Selection(desired=1, provisioner="karpenter", karpenter_available=False), 1, (True, "Selected", None)),
    ],
)
def test_nodes_selected(selection: Selection, count: int, expected: tuple[bool, str, str | None]) -> None:
    found = nodes_selected("p", selection, count, "H100-80GB")
    assert (found.ok, found.reason) == expected[:2]
    if expected[2] is not None:
        assert found.message == expected[2]


# ---------------------------------------------------------------- MigConfigured and the layout it reads

MIG = {"accelerator": "A100-40GB", "nodes": 2, "mig": {"profile": "3g.20gb"}}


def mig_member(name: str, state: str | None, **kwargs: Any) -> Any:
    labels = {conventions.MIG_CONFIG_LABEL: mig_entry_name("p", MIG), **kwargs.pop("labels", {})}
    if state is not None:
        labels[conventions.MIG_CONFIG_STATE_LABEL] = state
    if state == "success":
        labels.setdefault(conventions.GFD_MIG_STRATEGY_LABEL, "single")
        kwargs.setdefault("allocatable", {"nvidia.com/gpu": "16"})
    return member(name, "p", "A100-40GB", labels=labels, **kwargs)


def layout_of(pool_shape: PoolShape, found: tuple[Member, ...]) -> Layout:
    return judge_layout(found, pool_shape, pool_shape.resources_per_gpu())


def test_the_layout_sorts_members_by_what_nvidia_publishes() -> None:
    mig = shape(MIG)
    found = members(
        mig_member("done", "success"),
        mig_member("failed", "failed"),
        mig_member("pending", "pending"),
        mig_member("mixed", "success", labels={conventions.GFD_MIG_STRATEGY_LABEL: "mixed"}),
        mig_member("empty", "success", allocatable={"nvidia.com/gpu": "0"}),
        mig_member("invalid", "success", labels={conventions.GFD_PRODUCT_LABEL: "NVIDIA-A100-SXM4-40GB-MIG-INVALID"}),
    )
    layout = layout_of(mig, found)
    assert layout.done == {"done"}
    assert [m.name for m in layout.failed] == ["failed"]
    assert [m.name for m in layout.pending] == ["pending"]
    assert [(m.name, why) for m, why in layout.overridden] == [("mixed", "mixed")]
    assert [(m.name, why) for m, why in layout.not_advertised] == [
        ("empty", "advertises nvidia.com/gpu=0 of 16"),
        ("invalid", "is labelled nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB-MIG-INVALID by GFD"),
    ]


def test_mig_configured_reports_the_worst_first() -> None:
    mig = shape(MIG)
    both = members(mig_member("m1", "failed"), mig_member("m2", "pending"))
    failed = mig_configured(mig, layout_of(mig, both), 2)
    assert (failed.ok, failed.reason) == (False, "Failed")
    assert failed.message.startswith(f"nvidia.com/mig.config.state=failed for {mig.mig_config} on m1; retried with")
    pending = members(mig_member("m1", "success"), mig_member("m2", None))
    assert mig_configured(mig, layout_of(mig, pending), 2) == Finding(
        False, "Pending", f"1 of 2 members applying {mig.mig_config}: m2"
    )
    done = members(mig_member("m1", "success"), mig_member("m2", "success"))
    assert mig_configured(mig, layout_of(mig, done), 2) == Finding(
        True, "Configured", "2x 3g.20gb per GPU on 2 members"
    )


def test_mig_configured_names_a_cluster_wide_strategy_override_and_its_fix() -> None:
    mig = shape(MIG)
    found = members(mig_member("m1", "success", labels={conventions.GFD_MIG_STRATEGY_LABEL: "mixed"}))
    finding = mig_configured(mig, layout_of(mig, found), 1)
    assert (finding.ok, finding.reason) == (False, "MigStrategyOverridden")
    assert "GFD on m1 runs the mixed MIG strategy" in finding.message
    assert "clusterpolicies.nvidia.com/cluster-policy" in finding.message


def test_mig_configured_gives_up_after_the_last_retry() -> None:
    mig = shape(MIG)
    record = {conventions.MIG_RETRY_ANNOTATION: f"{conventions.MIG_RETRIES}@2026-11-02T11:00:00Z"}
    found = members(mig_member("m1", "failed", annotations=record))
    finding = mig_configured(mig, layout_of(mig, found), 1)
    assert finding.message.endswith("gave up after 5 retries: see the MIG manager's log on the node")


def test_mig_is_not_requested_of_other_vendors_or_gpus_without_mig() -> None:
    for spec in ({"accelerator": "MI300X"}, {"accelerator": "L4"}):
        assert mig_configured(shape(spec), Layout(), 1) == Finding(True, "NotRequested", "the pool does not use MIG")
    whole = shape({"accelerator": "H100"})
    off = members(member("m1", "p"))  # all-disabled, and the MIG manager said success
    assert mig_configured(whole, layout_of(whole, off), 1) == Finding(
        True, "Disabled", "MIG off on 1 members (whole GPUs)"
    )


# ---------------------------------------------------------------- DevicePluginConfigured


def test_device_plugin_configured_waits_for_every_member_to_select_the_key() -> None:
    h100 = shape({"accelerator": "H100", "sharing": {"timeSlicing": {"replicas": 4}}})
    found = members(
        member(
            "m1", "p", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: h100.key}, allocatable={"nvidia.com/gpu": "32"}
        ),
        member("m2", "p", labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: "other"}),
    )
    groups = census(h100, found, layout_of(h100, found))
    assert [m.name for m in groups.device_plugin_missing] == ["m2"]
    pending = device_plugin_configured(h100, Layout(), groups.device_plugin_missing, 2, written=True)
    assert pending == Finding(False, "Pending", f"1 of 2 members do not select {h100.key} yet: m2")
    unwritten = device_plugin_configured(h100, Layout(), (), 2, written=False)
    assert unwritten.reason == "Pending"
    configured = device_plugin_configured(h100, Layout(), (), 2, written=True)
    assert configured == Finding(
        True,
        "Configured",
        f"nvidia.com/device-plugin.config={h100.key} on 2 members (migStrategy none, timeSlicing x4)",
    )


def test_device_plugin_configured_checks_what_gpus_without_mig_advertise() -> None:
    l4 = shape({"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}})
    found = members(member("m1", "p", "L4", allocatable={"nvidia.com/gpu": "1"}))
    finding = device_plugin_configured(l4, layout_of(l4, found), (), 1, written=True)
    assert finding == Finding(
        False, "NotAdvertised", f"the device plugin does not serve {l4.key} yet: m1 advertises nvidia.com/gpu=1 of 4"
    )
    more = members(member("m1", "p", "L4", allocatable={"nvidia.com/gpu": "8"}))  # the previous config's replicas
    finding = device_plugin_configured(l4, layout_of(l4, more), (), 1, written=True)
    assert finding.reason == "NotAdvertised" and "nvidia.com/gpu=8 of 4" in finding.message, "exactly, not at least"
    amd = device_plugin_configured(shape({"accelerator": "MI300X"}), Layout(), (), 1, written=False)
    assert amd == Finding(True, "NotApplicable", "amd devices")


# ---------------------------------------------------------------- AgentReady


def test_agent_ready_waits_for_silent_members() -> None:
    h100 = shape({"accelerator": "H100"})
    found = members(member("m1", "p", health=HEALTHY), member("m2", "p"))
    waiting = agent_ready(None, census(h100, found), NOW)
    assert waiting == Finding(False, "WaitingForAgents", "1 of 2 members have no live AcceleratorHealthy report: m2")
    observed = agent_ready(agents.AgentObservation(), census(h100, found), NOW)
    assert observed.message.endswith("; the agent DaemonSet does not exist yet")
    reporting = members(member("m1", "p", "MI300X", health=UNKNOWN))
    amd = agent_ready(None, census(shape({"accelerator": "MI300X"}), reporting), NOW)
    assert amd == Finding(True, "Reporting", "1 of 1 members report health")


# ---------------------------------------------------------------- Healthy


def test_healthy_names_quarantined_then_unhealthy_members() -> None:
    h100 = shape({"accelerator": "H100"})
    quarantined = members(*(member(f"q{i}", "p", health=XID, taints=[QUARANTINE_TAINT]) for i in range(7)))
    finding = healthy(Breaker(), census(h100, quarantined))
    assert (finding.ok, finding.reason) == (False, "NodeQuarantined")
    assert finding.message.startswith("q0: XID 79 (GPU fallen off the bus); q1: ")
    assert finding.message.endswith("; and 2 more")
    unhealthy = healthy(Breaker(), census(h100, members(member("m1", "p", health=XID))))
    assert unhealthy == Finding(False, "NodeUnhealthy", "m1: XID 79 (GPU fallen off the bus)")


def test_an_open_breaker_says_why_and_who_is_quarantined() -> None:
    h100 = shape({"accelerator": "H100"})
    found = members(member("q1", "p", health=XID, taints=[QUARANTINE_TAINT]), member("m2", "p", health=XID))
    finding = healthy(Breaker(open=True, message="not quarantining m2"), census(h100, found))
    assert finding == Finding(
        False, "CircuitBreakerOpen", "not quarantining m2; quarantined: q1: XID 79 (GPU fallen off the bus)"
    )


def test_healthy_is_unknown_until_someone_reports() -> None:
    h100 = shape({"accelerator": "H100"})
    silent = healthy(Breaker(), census(h100, members(member("m1", "p"), member("m2", "p", health=UNKNOWN))))
    assert silent == Finding(None, "NotReported", "none of 2 members has reported health yet")
    some = healthy(Breaker(), census(h100, members(member("m1", "p", health=HEALTHY), member("m2", "p"))))
    assert some == Finding(True, "AllHealthy", "1 of 2 members healthy")
    assert healthy(Breaker(), census(h100, ())) == Finding(True, "AllHealthy", "0 of 0 members healthy")


# ---------------------------------------------------------------- transition times


def test_a_condition_keeps_its_transition_time_while_its_status_holds() -> None:
    before = ConditionHistory(None, NOW, 1).condition("Healthy", Finding(True, "AllHealthy", "1 of 1"))
    previous = api.ComputePoolStatus(conditions=[before])
    later = ConditionHistory(previous, NOW + timedelta(hours=1), 2)
    held = later.condition("Healthy", Finding(True, "AllHealthy", "2 of 2"))
    assert (held.last_transition_time, held.observed_generation, held.message) == ("2026-11-02T12:00:00Z", 2, "2 of 2")
    flipped = later.condition("Healthy", Finding(None, "NotReported", "none"))
    assert (flipped.status, flipped.last_transition_time) == ("Unknown", "2026-11-02T13:00:00Z")
