"""The health rules as pure functions: each threshold, each "no data" case, the node verdict."""

from __future__ import annotations

import pytest

from accelpool_agent import rules
from accelpool_agent.model import (
    Check,
    CheckResult,
    CheckStatus,
    DeviceInfo,
    EccCounts,
    GpuReport,
    Measurement,
    PcieLink,
    RetiredPages,
    RowRemap,
    Telemetry,
)
from accelpool_core.protocol import HealthStatus

POLICY = rules.Policy(dtype="bf16", min_efficiency=0.6, min_bandwidth_efficiency=0.6, check_timeout_seconds=30)
H100 = rules.Expected(tflops={"bf16": 989.0, "fp32": 67.0}, bandwidth_bytes_per_second=3.35e12)


def t(**kw: object) -> Telemetry:
    return Telemetry(index=0, **kw)  # type: ignore[arg-type]


def test_device_rule() -> None:
    assert rules.device_rule(None).status is CheckStatus.SKIP
    assert rules.device_rule(t()).reason == "Responding"
    lost = rules.device_rule(t(lost=True, error="nvmlDeviceGetMemoryInfo: GPU is lost"))
    assert (lost.status, lost.reason) == (CheckStatus.FAIL, "GpuLost")
    assert "GPU is lost" in lost.message


def test_xid_rule_classes_and_window() -> None:
    record = rules.XidRecord().add(43, at=100.0)
    assert rules.xid_rule(record, now=100.0, window_seconds=60).reason == "InformationalXid"
    record = record.add(94, at=100.0)
    warned = rules.xid_rule(record, now=150.0, window_seconds=60)
    assert (warned.status, warned.reason) == (CheckStatus.WARN, "XidError94")
    assert rules.xid_rule(record, now=161.0, window_seconds=60).status is CheckStatus.PASS
    record = record.add(79, at=200.0).add(48, at=300.0)
    failed = rules.xid_rule(record, now=10_000.0, window_seconds=60)
    assert (failed.status, failed.reason) == (CheckStatus.FAIL, "XidError48")  # the most recent fatal one
    assert "also XID 79" in failed.message
    assert failed.value == 4.0
    assert rules.xid_rule(rules.XidRecord(), now=0, window_seconds=60).reason == "NoXidErrors"


def test_ecc_rule() -> None:
    assert rules.ecc_rule(t(), None).status is CheckStatus.SKIP
    clean = EccCounts(volatile_single=5, volatile_double=0, aggregate_single=9, aggregate_double=2)
    assert rules.ecc_rule(t(ecc=clean), baseline_aggregate_double=2).status is CheckStatus.PASS
    volatile = EccCounts(volatile_double=1, aggregate_double=3)
    assert rules.ecc_rule(t(ecc=volatile), baseline_aggregate_double=3).reason == "EccDoubleBitError"
    grew = EccCounts(volatile_double=0, aggregate_double=3)
    result = rules.ecc_rule(t(ecc=grew), baseline_aggregate_double=2)
    assert (result.status, result.reason) == (CheckStatus.FAIL, "EccDoubleBitError")
    assert "rose from 2 to 3" in result.message
    # an old lifetime count alone (before the agent started, driver reloaded since) is not a new error
    assert rules.ecc_rule(t(ecc=EccCounts(volatile_double=0, aggregate_double=7)), 7).status is CheckStatus.PASS


def test_row_remap_rule() -> None:
    assert rules.row_remap_rule(t()).status is CheckStatus.SKIP
    assert rules.row_remap_rule(t(row_remap=RowRemap(0, 0, False, False))).status is CheckStatus.PASS
    assert rules.row_remap_rule(t(row_remap=RowRemap(0, 1, True, False))).reason == "RowRemapPending"
    failed = rules.row_remap_rule(t(row_remap=RowRemap(0, 2, False, True)))
    assert (failed.status, failed.reason, failed.value) == (CheckStatus.FAIL, "RowRemapFailure", 2.0)


def test_retired_pages_rule() -> None:
    assert rules.retired_pages_rule(t()).status is CheckStatus.SKIP
    assert rules.retired_pages_rule(t(retired_pages=RetiredPages(3, 1, False))).status is CheckStatus.PASS
    assert rules.retired_pages_rule(t(retired_pages=RetiredPages(3, 1, True))).reason == "RetiredPagesPending"
    assert rules.retired_pages_rule(t(retired_pages=RetiredPages(50, 10, False))).reason == "RetiredPagesLimit"


def test_thermal_rule() -> None:
    assert rules.thermal_rule(t()).status is CheckStatus.SKIP
    cool = t(temperature_celsius=40.0, slowdown_temperature_celsius=87.0, throttle_reasons=frozenset({"gpu_idle"}))
    assert rules.thermal_rule(cool).reason == "NotThrottled"
    power_cap = t(temperature_celsius=70.0, throttle_reasons=frozenset({"sw_power_cap"}))
    assert rules.thermal_rule(power_cap).status is CheckStatus.PASS  # the normal state of a GPU at full load
    hot = t(temperature_celsius=88.0, slowdown_temperature_celsius=87.0, throttle_reasons=frozenset())
    assert rules.thermal_rule(hot).reason == "ThermalThrottle"
    sw = t(temperature_celsius=80.0, throttle_reasons=frozenset({"sw_thermal_slowdown"}))
    assert rules.thermal_rule(sw).reason == "ThermalThrottle"
    brake = t(throttle_reasons=frozenset({"hw_power_brake_slowdown"}))
    assert (rules.thermal_rule(brake).status, rules.thermal_rule(brake).reason) == (CheckStatus.WARN, "PowerThrottle")


def test_pcie_rule() -> None:
    assert rules.pcie_rule(t()).status is CheckStatus.SKIP
    assert rules.pcie_rule(t(pcie=PcieLink(1, 16, 5, 16))).status is CheckStatus.PASS  # idle links drop their gen
    assert rules.pcie_rule(t(pcie=PcieLink(5, 8, 5, 16))).reason == "PcieLinkDegraded"


def m(check: Check, value: float | None = None, dtype: str | None = None, **kw: object) -> Measurement:
    defaults: dict[str, object] = {"status": CheckStatus.PASS, "reason": "Measured", "message": "ok"}
    defaults.update(kw)
    return Measurement(check, value=value, dtype=dtype, **defaults)  # type: ignore[arg-type]


def test_matmul_efficiency_threshold() -> None:
    ok = rules.compute_checks([m(Check.MATMUL, 600.0, "bf16")], policy=POLICY, expected=H100, now=0)
    assert [(c.status, c.reason) for c in ok.checks] == [(CheckStatus.PASS, "EfficiencyOk")]
    assert ok.matmul_efficiency["bf16"] == pytest.approx(600 / 989)
    slow = rules.compute_checks([m(Check.MATMUL, 590.0, "bf16")], policy=POLICY, expected=H100, now=0)
    assert [(c.status, c.reason) for c in slow.checks] == [(CheckStatus.FAIL, "SlowMatmul")]
    assert slow.checks[0].summary == "bf16 matmul below 60% of peak"
    assert "590.0 TFLOPS" in slow.checks[0].message


def test_matmul_other_dtypes_inform_but_their_errors_fail() -> None:
    fine = rules.compute_checks(
        [m(Check.MATMUL, 10.0, "fp32"), m(Check.MATMUL, 800.0, "bf16")], policy=POLICY, expected=H100, now=0
    )
    assert fine.checks[0].status is CheckStatus.PASS  # slow fp32 is not the policy dtype
    assert fine.matmul_tflops == {"fp32": 10.0, "bf16": 800.0}
    broken = rules.compute_checks(
        [m(Check.MATMUL, None, "fp32", status=CheckStatus.FAIL, reason="CudaError"), m(Check.MATMUL, 800.0, "bf16")],
        policy=POLICY,
        expected=H100,
        now=0,
    )
    assert (broken.checks[0].status, broken.checks[0].reason) == (CheckStatus.FAIL, "CudaError")


def test_matmul_without_expected_peak_passes_with_a_note() -> None:
    result = rules.compute_checks([m(Check.MATMUL, 1.5, "bf16")], policy=POLICY, expected=rules.Expected(), now=0)
    assert (result.checks[0].status, result.checks[0].reason) == (CheckStatus.PASS, "NoExpectedPeak")


def test_bandwidth_threshold() -> None:
    good = rules.compute_checks([m(Check.BANDWIDTH, 2.9e12)], policy=POLICY, expected=H100, now=0)
    assert good.checks[0].reason == "BandwidthOk"
    assert good.bandwidth_efficiency == pytest.approx(2.9e12 / 3.35e12)
    low = rules.compute_checks([m(Check.BANDWIDTH, 1.9e12)], policy=POLICY, expected=H100, now=0)
    assert (low.checks[0].status, low.checks[0].reason) == (CheckStatus.FAIL, "LowBandwidth")


def test_correctness_combines_dtypes() -> None:
    result = rules.compute_checks(
        [
            m(Check.CORRECTNESS, 1e-6, "fp32", reason="ResultsCorrect"),
            m(Check.CORRECTNESS, 5.0, "bf16", status=CheckStatus.FAIL, reason="WrongResults"),
        ],
        policy=POLICY,
        expected=H100,
        now=0,
    )
    (check,) = result.checks
    assert (check.status, check.reason, check.dtype) == (CheckStatus.FAIL, "WrongResults", "bf16")
    assert check.summary == "wrong bf16 matmul results (silent data corruption)"


def test_timeout_summary_names_the_check_and_timeout() -> None:
    result = rules.compute_checks(
        [m(Check.BANDWIDTH, None, status=CheckStatus.FAIL, reason="CheckTimeout")], policy=POLICY, expected=H100, now=0
    )
    assert result.checks[0].summary == "bandwidth check timed out after 30 s"


def test_peer_outliers() -> None:
    assert rules.peer_outliers({0: 800.0, 1: 790.0}, 0.85) == {}  # too few to compare
    slow = rules.peer_outliers({0: 800.0, 1: 790.0, 2: 805.0, 3: 600.0}, 0.85)
    assert list(slow) == [3]


def gpu(index: int, *statuses: CheckStatus, summary: str = "broken") -> GpuReport:
    checks = tuple(
        CheckResult(Check.XID, status, "XidError79" if status is CheckStatus.FAIL else "Ok", "m", summary=summary)
        for status in statuses
    )
    device = DeviceInfo(index=index, uuid=f"GPU-{index}", name="x", pci_bus_id="", memory_total_bytes=None)
    return GpuReport(device=device, telemetry=None, checks=checks)


def test_node_verdicts() -> None:
    assert rules.node_verdict([]).status is HealthStatus.UNKNOWN
    assert rules.node_verdict([], backend_error="NVML initialisation failed: x").reason == "BackendUnavailable"
    assert rules.node_verdict([gpu(0, CheckStatus.SKIP)]).reason == "NothingChecked"
    healthy = rules.node_verdict([gpu(0, CheckStatus.PASS), gpu(1, CheckStatus.PASS, CheckStatus.SKIP)])
    assert (healthy.status, healthy.reason, healthy.message) == (
        HealthStatus.HEALTHY,
        "AllChecksPassed",
        "2 GPUs passed all checks",
    )
    warned = rules.node_verdict([gpu(0, CheckStatus.PASS), gpu(1, CheckStatus.WARN, summary="thermal throttling")])
    assert (warned.status, warned.message) == (HealthStatus.HEALTHY, "thermal throttling on GPU 1")
    failed = rules.node_verdict([gpu(0, CheckStatus.FAIL), gpu(1, CheckStatus.PASS), gpu(2, CheckStatus.FAIL)])
    assert (failed.status, failed.reason, failed.bad_gpus) == (HealthStatus.UNHEALTHY, "XidError79", (0, 2))
    missing = rules.node_verdict([gpu(0, CheckStatus.PASS)], expected_gpus=2)
    assert (missing.status, missing.reason) == (HealthStatus.UNHEALTHY, "GpuMissing")
