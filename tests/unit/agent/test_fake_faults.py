"""Every fault of the fake backend, through a full cycle of the agent, gives the right verdict."""

from __future__ import annotations

import pytest

from accelpool_agent.backends.fake import FakeBackend
from accelpool_agent.clock import ManualClock
from accelpool_agent.faults import parse_fault_spec
from accelpool_agent.model import Check, CheckStatus, GpuReport, NodeReport
from accelpool_core.protocol import AgentConfig, HealthStatus

from .conftest import MakeAgent


async def cycle(make_agent: MakeAgent, *faults: str, gpus: str = "H100:8", **kw: object) -> NodeReport:
    agent = make_agent(gpus, faults, **kw)
    return await agent.full_cycle()


def check(gpu: GpuReport, name: Check) -> tuple[CheckStatus, str]:
    result = gpu.check(name)
    assert result is not None, f"GPU {gpu.device.index} has no {name} result"
    return result.status, result.reason


async def test_healthy_node(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent)
    assert report.status is HealthStatus.HEALTHY
    assert report.reason == "AllChecksPassed"
    assert report.message == "8 GPUs passed all checks"
    assert report.bad_gpus == ()
    assert {c.check for c in report.checks} == {Check.GPU_COUNT, Check.INFINIBAND}
    for gpu in report.gpus:
        assert gpu.status is CheckStatus.PASS
        assert {c.check for c in gpu.checks} == {c for c in Check if not c.is_node_wide}
        assert check(gpu, Check.MATMUL) == (CheckStatus.PASS, "EfficiencyOk")
        assert check(gpu, Check.CORRECTNESS) == (CheckStatus.PASS, "ResultsCorrect")
        assert check(gpu, Check.BANDWIDTH) == (CheckStatus.PASS, "BandwidthOk")
    # H100 SXM bf16 dense peak 989 TFLOPS; large GEMMs reach ~80% of it
    bf16 = [g.matmul_tflops["bf16"] for g in report.gpus]
    assert all(0.78 * 989 <= v <= 0.82 * 989 for v in bf16)
    assert report.tflops == pytest.approx(sum(bf16))
    # 3.35 TB/s spec; copies reach ~88% of it
    assert all(0.86 * 3.35e12 <= (g.bandwidth_bytes_per_second or 0) <= 0.90 * 3.35e12 for g in report.gpus)


@pytest.mark.parametrize(
    ("fault", "check_name", "status", "reason"),
    [
        ("xid=79", Check.XID, CheckStatus.FAIL, "XidError79"),
        ("xid=48", Check.XID, CheckStatus.FAIL, "XidError48"),
        ("xid=64", Check.XID, CheckStatus.FAIL, "XidError64"),
        ("xid=74", Check.XID, CheckStatus.FAIL, "XidError74"),
        ("xid=95", Check.XID, CheckStatus.FAIL, "XidError95"),
        ("xid=119", Check.XID, CheckStatus.FAIL, "XidError119"),
        ("xid=120", Check.XID, CheckStatus.FAIL, "XidError120"),
        ("xid=140", Check.XID, CheckStatus.FAIL, "XidError140"),
        ("xid=63", Check.XID, CheckStatus.WARN, "XidError63"),
        ("xid=94", Check.XID, CheckStatus.WARN, "XidError94"),
        ("xid=109", Check.XID, CheckStatus.FAIL, "XidError109"),  # NVIDIA's catalog: RESET_GPU
        ("xid=13", Check.XID, CheckStatus.WARN, "XidError13"),
        ("xid=31", Check.XID, CheckStatus.WARN, "XidError31"),
        ("xid=68", Check.XID, CheckStatus.WARN, "XidError68"),
        ("xid=43", Check.XID, CheckStatus.PASS, "InformationalXid"),
        ("xid=45", Check.XID, CheckStatus.PASS, "InformationalXid"),
        ("xid=999", Check.XID, CheckStatus.WARN, "XidError999"),
        ("ecc-dbe", Check.ECC, CheckStatus.FAIL, "EccDoubleBitError"),
        ("slow-matmul=2", Check.MATMUL, CheckStatus.FAIL, "SlowMatmul"),
        ("slow-matmul=0.5", Check.MATMUL, CheckStatus.FAIL, "SlowMatmul"),
        ("slow-matmul=1.2", Check.MATMUL, CheckStatus.WARN, "SlowerThanPeers"),
        ("wrong-results", Check.CORRECTNESS, CheckStatus.FAIL, "WrongResults"),
        ("hang", Check.SANITY, CheckStatus.FAIL, "CheckTimeout"),
        ("crash", Check.SANITY, CheckStatus.FAIL, "ComputeCrashed"),
        ("cuda-error", Check.SANITY, CheckStatus.FAIL, "CudaError"),
        ("lost", Check.DEVICE, CheckStatus.FAIL, "GpuLost"),
        ("hot", Check.THERMAL, CheckStatus.WARN, "ThermalThrottle"),
        ("throttle", Check.THERMAL, CheckStatus.WARN, "PowerThrottle"),
        ("row-remap-failure", Check.ROW_REMAP, CheckStatus.FAIL, "RowRemapFailure"),
        ("row-remap-pending", Check.ROW_REMAP, CheckStatus.WARN, "RowRemapPending"),
        ("low-bandwidth", Check.BANDWIDTH, CheckStatus.FAIL, "LowBandwidth"),
        ("pcie-degraded", Check.PCIE_LINK, CheckStatus.WARN, "PcieLinkDegraded"),
    ],
)
async def test_fault_verdicts(
    make_agent: MakeAgent, fault: str, check_name: Check, status: CheckStatus, reason: str
) -> None:
    report = await cycle(make_agent, f"3:{fault}")
    gpu = report.gpus[3]
    assert check(gpu, check_name) == (status, reason)
    assert gpu.status is status
    others = [g for g in report.gpus if g.device.index != 3]
    assert all(g.status is CheckStatus.PASS for g in others), [g.reason for g in others]
    if status is CheckStatus.FAIL:
        assert report.status is HealthStatus.UNHEALTHY
        assert report.reason == reason
        assert report.bad_gpus == (3,)
        assert report.message.endswith("on GPU 3")
        assert not report.healthy
    else:
        assert report.status is HealthStatus.HEALTHY
        assert report.bad_gpus == ()
        expected = "ChecksPassedWithWarnings" if status is CheckStatus.WARN else "AllChecksPassed"
        assert report.reason == expected


async def test_xid_79_message_names_the_gpu_and_meaning(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "3:xid=79")
    assert report.message == "XID 79 (GPU has fallen off the bus) on GPU 3"


async def test_fault_on_all_gpus(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "all:ecc-dbe", gpus="A100-80GB:4")
    assert report.bad_gpus == (0, 1, 2, 3)
    assert report.message == "uncorrectable (double-bit) ECC errors on GPUs 0, 1, 2, 3"


async def test_hang_stops_the_gpus_later_checks_only(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "2:hang")
    gpu = report.gpus[2]
    assert check(gpu, Check.SANITY) == (CheckStatus.FAIL, "CheckTimeout")
    for name in (Check.CORRECTNESS, Check.MATMUL, Check.BANDWIDTH):
        assert check(gpu, name) == (CheckStatus.SKIP, "NotRun")
    assert "sanity check timed out after 5 s" in report.message


async def test_lost_gpu_skips_compute(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "5:lost")
    gpu = report.gpus[5]
    assert gpu.telemetry is not None and gpu.telemetry.lost
    assert check(gpu, Check.MATMUL) == (CheckStatus.SKIP, "GpuLost")
    assert report.message == "GPU lost (not answering) on GPU 5"


async def test_busy_gpu_is_not_checked_unless_forced(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "1:busy")
    assert check(report.gpus[1], Check.MATMUL) == (CheckStatus.SKIP, "GpuBusy")
    assert report.gpus[1].status is CheckStatus.PASS
    # never checked is not "passed": the node is Unknown until GPU 1 has been checked once
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "ChecksSkipped")
    assert report.message.startswith("compute checks not run: GpuBusy on GPU 1")
    forced = await cycle(make_agent, "1:busy", config=AgentConfig(force=True, check_timeout_seconds=5))
    assert check(forced.gpus[1], Check.MATMUL) == (CheckStatus.PASS, "EfficiencyOk")


async def test_busy_gpu_keeps_its_last_failure(make_agent: MakeAgent) -> None:
    """A GPU that failed and is busy now must not turn healthy: the old result stays, marked stale."""
    agent = make_agent("H100:4", ["2:wrong-results"])
    first = await agent.full_cycle()
    assert first.bad_gpus == (2,)
    backend = agent.backend
    assert isinstance(backend, FakeBackend)
    backend.faults[2] = (*backend.faults[2], *parse_fault_spec("2:busy").faults)
    second = await agent.full_cycle()
    result = second.gpus[2].check(Check.CORRECTNESS)
    assert result is not None and result.stale and result.status is CheckStatus.FAIL
    assert second.status is HealthStatus.UNHEALTHY


async def test_a_failure_stands_until_a_check_of_the_same_kind_passes(make_agent: MakeAgent) -> None:
    """Wrong results, then a cycle whose correctness check cannot run (sanity hangs first): the
    WrongResults verdict stays in force; only a later correctness check that passes clears it."""
    agent = make_agent("H100:4", ["2:wrong-results"])
    backend = agent.backend
    assert isinstance(backend, FakeBackend)
    first = await agent.full_cycle()
    assert check(first.gpus[2], Check.CORRECTNESS) == (CheckStatus.FAIL, "WrongResults")
    since = first.gpus[2].verdicts[Check.CORRECTNESS].since
    backend.faults[2] = (*backend.faults[2], *parse_fault_spec("2:hang").faults)
    agent.clock.advance(900)  # type: ignore[attr-defined]
    second = await agent.full_cycle()
    assert check(second.gpus[2], Check.SANITY) == (CheckStatus.FAIL, "CheckTimeout")
    kept = second.gpus[2].check(Check.CORRECTNESS)
    assert kept is not None and (kept.status, kept.reason, kept.stale) == (CheckStatus.FAIL, "WrongResults", True)
    assert second.gpus[2].verdicts[Check.CORRECTNESS].since == since  # the same verdict, not a new one
    backend.faults[2] = ()
    agent.clock.advance(900)  # type: ignore[attr-defined]
    third = await agent.full_cycle()
    assert check(third.gpus[2], Check.CORRECTNESS) == (CheckStatus.PASS, "ResultsCorrect")
    assert (third.status, third.reason) == (HealthStatus.HEALTHY, "AllChecksPassed")


async def test_fatal_xid_is_sticky_and_warning_xid_expires(make_agent: MakeAgent) -> None:
    clock = ManualClock()
    agent = make_agent("H100:2", ["0:xid=79", "1:xid=94"], clock=clock)
    first = await agent.full_cycle()
    assert check(first.gpus[0], Check.XID)[0] is CheckStatus.FAIL
    assert check(first.gpus[1], Check.XID)[0] is CheckStatus.WARN
    clock.advance(2 * 3600)
    later = await agent.tick()
    assert check(later.gpus[0], Check.XID) == (CheckStatus.FAIL, "XidError79")
    assert check(later.gpus[1], Check.XID) == (CheckStatus.PASS, "NoRecentXidErrors")
    assert later.gpus[1].xid_counts == {94: 1}


async def test_several_failing_gpus_are_grouped(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "1:xid=79", "6:xid=79", "4:ecc-dbe")
    assert report.bad_gpus == (1, 4, 6)
    assert report.reason == "XidError79"
    assert report.message == (
        "XID 79 (GPU has fallen off the bus) on GPUs 1, 6; uncorrectable (double-bit) ECC errors on GPU 4"
    )


async def test_missing_gpus_make_the_node_unhealthy(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, gpus="H100:7", config=AgentConfig(expected_gpus=8, check_timeout_seconds=5))
    assert report.status is HealthStatus.UNHEALTHY
    assert report.reason == "GpuMissing"
    assert report.message == "found 7 of 8 GPUs"


async def test_no_gpus_is_unknown(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, gpus="H100:0")
    assert report.status is HealthStatus.UNKNOWN
    assert report.reason == "NoDevices"


async def test_models_without_a_dtype_skip_it(make_agent: MakeAgent) -> None:
    """T4 has no bf16: the policy dtype cannot be measured there; fp16 can."""
    report = await cycle(make_agent, gpus="T4:1")
    gpu = report.gpus[0]
    assert check(gpu, Check.MATMUL) == (CheckStatus.SKIP, "DtypeUnsupported")
    assert set(gpu.matmul_tflops) == {"fp32", "fp16"}
    assert report.status is HealthStatus.HEALTHY
    fp16 = await cycle(make_agent, gpus="T4:1", config=AgentConfig.model_validate({"matmul": {"dtype": "fp16"}}))
    assert check(fp16.gpus[0], Check.MATMUL) == (CheckStatus.PASS, "EfficiencyOk")


async def test_policy_min_efficiency_is_applied(make_agent: MakeAgent) -> None:
    strict = AgentConfig.model_validate({"matmul": {"dtype": "bf16", "minEfficiency": 0.9}, "checkTimeoutSeconds": 5})
    report = await cycle(make_agent, gpus="H100:2", config=strict)
    assert all(check(g, Check.MATMUL) == (CheckStatus.FAIL, "SlowMatmul") for g in report.gpus)
    assert report.message == "bf16 matmul below 90% of peak on GPUs 0, 1"


async def test_config_peaks_override_the_catalog(make_agent: MakeAgent) -> None:
    config = AgentConfig(expected_tflops={"bf16": 2000.0}, check_timeout_seconds=5)
    report = await cycle(make_agent, gpus="H100:1", config=config)
    assert check(report.gpus[0], Check.MATMUL) == (CheckStatus.FAIL, "SlowMatmul")
    assert report.gpus[0].matmul_efficiency["bf16"] == pytest.approx(report.gpus[0].matmul_tflops["bf16"] / 2000.0)


async def test_same_seed_same_report_other_seed_other_values(make_agent: MakeAgent) -> None:
    a = (await cycle(make_agent, seed=7)).to_json()
    b = (await cycle(make_agent, seed=7)).to_json()
    c = (await cycle(make_agent, seed=8)).to_json()
    assert a == b
    assert a["gpus"][0]["matmul_tflops"] != c["gpus"][0]["matmul_tflops"]
    assert a["gpus"][0]["uuid"] != c["gpus"][0]["uuid"]


@pytest.mark.parametrize("gpus", ["H100:8", "A100-40GB:8", "L4:1", "B200:8", "H200:8", "MI300X:8", "T4:4"])
async def test_fake_telemetry_is_realistic(make_agent: MakeAgent, gpus: str) -> None:
    from accelpool_core import catalog

    accelerator = catalog.lookup(gpus.split(":")[0])
    report = await cycle(make_agent, gpus=gpus)
    for gpu in report.gpus:
        t = gpu.telemetry
        assert t is not None
        assert t.memory_total_bytes == accelerator.memory_gb * 2**30
        assert t.memory_used_bytes is not None and 0 < t.memory_used_bytes < t.memory_total_bytes
        assert t.power_limit_watts == accelerator.tdp_watts
        assert t.power_watts is not None and 0.05 * accelerator.tdp_watts < t.power_watts < 0.2 * accelerator.tdp_watts
        assert t.temperature_celsius is not None and 25 < t.temperature_celsius < 45
        assert t.sm_clock_hertz is not None and t.sm_clock_max_hertz is not None
        assert 0 < t.sm_clock_hertz <= t.sm_clock_max_hertz
        assert gpu.status is CheckStatus.PASS


async def test_a_bad_gpu_is_named_by_uuid_so_it_can_be_quarantined_alone(make_agent: MakeAgent) -> None:
    report = await cycle(make_agent, "3:xid=79")
    wire = report.health_report()
    assert [(d.index, d.uuid, d.reason) for d in wire.bad_devices] == [(3, report.gpus[3].device.uuid, "XidError79")]
    assert wire.gpu_scoped()


async def test_a_node_wide_finding_is_not_gpu_scoped(make_agent: MakeAgent) -> None:
    config = AgentConfig(pool="llm-training", check_timeout_seconds=5, expected_gpus=9)
    report = await cycle(make_agent, "3:xid=79", config=config)
    wire = report.health_report()
    assert wire.bad_devices and not wire.gpu_scoped(), wire.findings
