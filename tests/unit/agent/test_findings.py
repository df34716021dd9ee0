"""Severity and action of each check, the node's findings and recommended action, and what the
health annotation and /metrics say of them — on the fake backend with each new fault injected."""

from __future__ import annotations

import pytest
from prometheus_client import generate_latest

from accelpool_agent import rules, xids
from accelpool_agent.clock import ManualClock
from accelpool_agent.metrics import build_registry
from accelpool_agent.model import Check, CheckResult, CheckStatus, NodeReport
from accelpool_core.protocol import MAX_FINDINGS, Action, AgentConfig, HealthReport, HealthStatus, Severity

from .conftest import MakeAgent


async def cycle(make_agent: MakeAgent, gpus: str, *faults: str, minutes: float = 0.0) -> NodeReport:
    clock = ManualClock()
    agent = make_agent(gpus, list(faults), clock=clock)
    await agent.tick()
    clock.advance(minutes * 60)
    return await agent.full_cycle()


@pytest.mark.parametrize(
    ("fault", "check", "severity", "reason", "action"),
    [
        ("3:nvlink-down", "nvlink", Severity.CRITICAL, "NvlinkDown", Action.RESET_GPU),
        ("3:nvlink-errors=2", "nvlink", Severity.WARNING, "NvlinkErrorRate", Action.NONE),
        ("3:nvlink-errors=600", "nvlink", Severity.CRITICAL, "NvlinkErrorRate", Action.RESET_GPU),
        ("3:fabric-unregistered", "fabric", Severity.CRITICAL, "FabricNotStarted", Action.RESTART_OS),
        ("3:fabric-degraded", "fabric", Severity.WARNING, "FabricDegraded", Action.RESET_GPU),
        ("3:pcie-gen-low", "pcie_link", Severity.WARNING, "PcieGenDegraded", Action.RESET_GPU),
        ("3:pcie-degraded", "pcie_link", Severity.WARNING, "PcieLinkDegraded", Action.RESET_GPU),
        ("3:power-high", "power", Severity.WARNING, "PowerAboveLimit", Action.SERVICE_REQUIRED),
        ("3:pstate-stuck", "power", Severity.WARNING, "PowerStateStuck", Action.RESET_GPU),
        ("3:clocks-low", "clocks", Severity.WARNING, "ClocksStuckLow", Action.RESET_GPU),
        ("3:ib-down", "infiniband", Severity.CRITICAL, "IbPortDown", Action.RESTART_OS),
        ("3:ib-errors", "infiniband", Severity.WARNING, "IbErrorRate", Action.NONE),
        ("3:ib-flap", "infiniband", Severity.WARNING, "IbLinkFlapping", Action.NONE),
        ("3:reset-required", "recovery", Severity.CRITICAL, "RecoveryGpuReset", Action.RESET_GPU),
        ("3:wrong-results", "correctness", Severity.CRITICAL, "WrongResults", Action.SERVICE_REQUIRED),
        ("3:row-remap-failure", "row_remap", Severity.CRITICAL, "RowRemapFailure", Action.SERVICE_REQUIRED),
        ("3:lost", "device", Severity.CRITICAL, "GpuLost", Action.RESTART_OS),
        ("3:xid=79", "xid", Severity.CRITICAL, "XidError79", Action.RESTART_OS),
        ("3:xid=48", "xid", Severity.CRITICAL, "XidError48", Action.RESET_GPU),
        ("3:xid=13", "xid", Severity.WARNING, "XidError13", Action.DRAIN),
        ("3:xid=43", "xid", Severity.INFO, "InformationalXid", Action.NONE),
    ],
)
async def test_each_fault_gives_its_finding(
    make_agent: MakeAgent, fault: str, check: str, severity: Severity, reason: str, action: Action
) -> None:
    report = await cycle(make_agent, "H100:8", fault, minutes=10)
    first = report.findings[0]
    assert (first.check, first.severity, first.reason, first.action) == (check, severity, reason, action)
    assert first.gpus == ([] if check == "infiniband" else [3])
    expected_node_action = action if severity is Severity.CRITICAL else Action.NONE
    assert report.action is expected_node_action
    assert report.status is (HealthStatus.UNHEALTHY if severity is Severity.CRITICAL else HealthStatus.HEALTHY)


async def test_a_healthy_node_has_no_findings_and_no_action(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "H100:8")
    assert report.findings == ()
    assert report.action is Action.NONE
    health = report.health_report()
    assert (health.action, health.findings, health.complete) == (Action.NONE, [], True)
    assert (health.driver_version, health.cuda_version) == ("550.54.15", "12.4")


async def test_pcie_cards_have_no_links_fabric_or_infiniband(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "L4:1", "0:nvlink-down", "0:ib-down", "0:fabric-unregistered")
    assert report.status is HealthStatus.HEALTHY and report.findings == ()
    (gpu,) = report.gpus
    assert gpu.check(Check.NVLINK) is not None and gpu.check(Check.NVLINK).status is CheckStatus.SKIP  # type: ignore[union-attr]
    assert gpu.check(Check.FABRIC).status is CheckStatus.SKIP  # type: ignore[union-attr]
    assert [c.reason for c in report.checks if c.check is Check.INFINIBAND] == ["NoPorts"]


async def test_findings_are_grouped_worst_first_and_the_strongest_critical_action_wins(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "H100:8", "1,2:nvlink-down", "5:row-remap-failure", "6:hot", "7:xid=79")
    assert [(f.severity, f.reason, f.gpus) for f in report.findings] == [
        (Severity.CRITICAL, "RowRemapFailure", [5]),
        (Severity.CRITICAL, "XidError79", [7]),
        (Severity.CRITICAL, "NvlinkDown", [1, 2]),
        (Severity.WARNING, "ThermalThrottle", [6]),
    ]
    assert report.action is Action.SERVICE_REQUIRED
    text = report.health_report().to_annotation()
    assert HealthReport.from_annotation(text).action is Action.SERVICE_REQUIRED
    assert "NVLink 0 down" in text  # stable detail: the summary, without measured numbers


async def test_the_annotation_keeps_at_most_max_findings(make_agent: MakeAgent) -> None:
    faults = [f"{i}:xid={xid}" for i, xid in enumerate((13, 31, 68, 94, 63, 92, 154, 8))]
    faults += ["all:nvlink-down", "all:hot", "all:power-high", "all:pcie-degraded", "all:fabric-degraded"]
    faults += ["0:ib-flap", "0:row-remap-pending", "1:slow-matmul=3", "2:low-bandwidth=3", "3:wrong-results"]
    report = await cycle(make_agent, "H100:8", *faults)
    assert len(report.findings) > MAX_FINDINGS
    assert len(report.health_report().findings) == MAX_FINDINGS


async def test_gpu_missing_is_a_critical_node_finding_asking_for_an_os_restart(make_agent: MakeAgent) -> None:
    clock = ManualClock()
    agent = make_agent("H100:7", clock=clock, config=AgentConfig(pool="p", expected_gpus=8, check_timeout_seconds=5))
    report = await agent.full_cycle()
    assert (report.status, report.reason) == (HealthStatus.UNHEALTHY, "GpuMissing")
    assert [(f.check, f.severity, f.action) for f in report.findings] == [
        ("gpu_count", Severity.CRITICAL, Action.RESTART_OS)
    ]


async def test_an_unknown_node_says_why_as_an_unknown_finding(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "H100:2", "all:busy")
    assert report.status is HealthStatus.UNKNOWN
    assert [(f.severity, f.reason) for f in report.findings] == [(Severity.UNKNOWN, "ChecksSkipped")]
    assert report.action is Action.NONE


async def test_metrics_show_the_action_findings_driver_and_links(make_agent: MakeAgent) -> None:
    clock = ManualClock()
    agent = make_agent("H100:8", ["3:nvlink-down", "2:ib-down", "4:nvlink-errors=60", "0:old-driver"], clock=clock)
    await agent.tick()
    clock.advance(600)
    await agent.full_cycle()
    text = generate_latest(build_registry(lambda: agent.snapshot)).decode()
    node = 'node="gpu-a1",pool="llm-training"'
    assert f'accelpool_node_recommended_action{{action="restart-os",{node}}} 1.0' in text
    assert f'accelpool_node_recommended_action{{action="reset-gpu",{node}}} 0.0' in text
    assert f'accelpool_node_findings{{{node},severity="CRITICAL"}} 3.0' in text
    assert f'accelpool_node_check_status{{check="infiniband",{node},reason="IbPortDown"}} 2.0' in text
    assert f'accelpool_node_driver_info{{cuda_version="12.2",driver_version="535.104.05",{node}}} 1.0' in text
    assert 'accelpool_gpu_nvlink_links_active{gpu="3",' in text
    port = 'device="mlx5_2",link_layer="InfiniBand",node="gpu-a1",pool="llm-training",port="1"'
    assert f"accelpool_ib_port_state{{{port}}} 1.0" in text
    replay = [
        line
        for line in text.splitlines()
        if line.startswith('accelpool_gpu_nvlink_errors_total{counter="replay",gpu="4"')
    ]
    assert replay and float(replay[0].rsplit(" ", 1)[1]) == 600.0  # 60 per minute for 10 minutes


def test_every_catalog_bucket_has_a_ladder_step() -> None:
    assert set(xids.LADDER) == {action for _, action in xids.CATALOG.values()}
    assert xids.ladder_action(63) is Action.RESET_GPU  # the catalog: reset the GPU for the pending remap
    assert xids.ladder_action(99999) is Action.SERVICE_REQUIRED


def test_severity_of_each_status() -> None:
    def result(status: CheckStatus, noteworthy: bool = False) -> CheckResult:
        return CheckResult(Check.NVLINK, status, "R", "m", noteworthy=noteworthy)

    assert [rules.severity(result(s)) for s in CheckStatus] == [
        Severity.PASS,
        Severity.WARNING,
        Severity.CRITICAL,
        Severity.UNKNOWN,
    ]
    assert rules.severity(result(CheckStatus.PASS, noteworthy=True)) is Severity.INFO
    assert rules.with_action(result(CheckStatus.FAIL)).action is Action.NONE  # a reason asking for nothing
