"""AWS Neuron rules on recorded neuron-monitor reports: ECC, execution errors, a lost device."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from accelpool_agent.backends.neuron_report import parse_report
from accelpool_agent.backends.neuron_state import MonitorState
from accelpool_agent.model import Check, CheckResult, CheckStatus, EccCounts, Telemetry
from accelpool_agent.rules import CounterWindow, severity
from accelpool_agent.rules.neuron import neuron_checks, neuron_counters
from accelpool_core.protocol import Action, Severity

FIXTURES = Path(__file__).parents[2] / "fixtures" / "agent" / "neuron"
WINDOW = 600.0


def readings(name: str, *, seconds_apart: float = 5.0) -> list[tuple[float, dict[int, Telemetry]]]:
    """Each report of a recorded file in turn: (time, device → telemetry), `seconds_apart` apart."""
    state = MonitorState()
    seen = []
    for position, line in enumerate((FIXTURES / name).read_text().splitlines()):
        state = state.with_report(parse_report(line))
        seen.append((position * seconds_apart, {t.index: t for t in state.telemetry()}))
    return seen


def checks_of(name: str, device: int) -> dict[Check, CheckResult]:
    """The rules on one device after every report of `name`, rates over the window as the agent keeps them."""
    window = CounterWindow()
    results: list[CheckResult] = []
    for at, telemetry in readings(name):
        reading = telemetry[device]
        window = window.add(at, neuron_counters(reading), WINDOW)
        results = neuron_checks(reading, rates=window.per_minute(), now=at)
    return {r.check: r for r in results}


def test_a_healthy_trn2_passes_every_rule() -> None:
    for device in (0, 5, 15):
        checks = checks_of("trn2_healthy.jsonl", device)
        assert {c: r.status for c, r in checks.items()} == {
            Check.DEVICE: CheckStatus.PASS,
            Check.ECC: CheckStatus.PASS,
            Check.XID: CheckStatus.PASS,
        }


def test_uncorrected_hbm_ecc_is_critical_and_asks_for_service() -> None:
    ecc = checks_of("trn2_hbm_uncorrected.jsonl", 1)[Check.ECC]
    assert (ecc.status, ecc.reason, ecc.value) == (CheckStatus.FAIL, "NeuronHbmUncorrectable", 2.0)
    assert severity(ecc) is Severity.CRITICAL
    assert ecc.action is Action.SERVICE_REQUIRED
    assert checks_of("trn2_hbm_uncorrected.jsonl", 2)[Check.ECC].status is CheckStatus.PASS


def test_uncorrected_sram_ecc_is_critical() -> None:
    healthy = readings("trn2_idle.jsonl")[0][1][3]
    broken = replace(healthy, sram_ecc=EccCounts(volatile_single=0, volatile_double=1))
    ecc = {r.check: r for r in neuron_checks(broken, rates={}, now=0.0)}[Check.ECC]
    assert (ecc.status, ecc.reason, ecc.action) == (
        CheckStatus.FAIL,
        "NeuronSramUncorrectable",
        Action.SERVICE_REQUIRED,
    )


def test_rising_corrected_sram_ecc_warns_without_action() -> None:
    checks = checks_of("trn2_sram_corrected_rising.jsonl", 4)
    ecc = checks[Check.ECC]
    assert (ecc.status, ecc.reason, ecc.action) == (CheckStatus.WARN, "NeuronEccCorrectedRising", Action.NONE)
    assert "sram_ecc_corrected +6/min" in ecc.message
    # the transient errors of the job (devices 0-1) warn there, not on device 4
    assert checks[Check.XID].status is CheckStatus.PASS
    transient = checks_of("trn2_sram_corrected_rising.jsonl", 0)[Check.XID]
    assert (transient.status, transient.reason) == (CheckStatus.WARN, "NeuronExecutionErrors")


def test_a_steady_corrected_count_passes() -> None:
    # device 5 reported 2 corrected HBM events in the first period, none in the second: nothing new
    assert checks_of("trn2_healthy.jsonl", 5)[Check.ECC].status is CheckStatus.PASS


def test_hardware_execution_errors_are_critical() -> None:
    xid = checks_of("trn2_hardware_errors.jsonl", 0)[Check.XID]
    assert (xid.status, xid.reason, xid.value) == (CheckStatus.FAIL, "NeuronHardwareError", 3.0)
    assert xid.action is Action.SERVICE_REQUIRED


def test_application_errors_are_noted_not_judged() -> None:
    xid = checks_of("trn2_application_errors.jsonl", 1)[Check.XID]
    assert (xid.status, xid.reason) == (CheckStatus.PASS, "NeuronApplicationErrors")
    assert severity(xid) is Severity.INFO


def test_a_device_gone_from_the_report_is_lost_and_asks_for_a_restart() -> None:
    device = checks_of("trn2_device_disappears.jsonl", 7)[Check.DEVICE]
    assert (device.status, device.reason, device.action) == (CheckStatus.FAIL, "GpuLost", Action.RESTART_OS)


def test_no_telemetry_skips() -> None:
    results = neuron_checks(None, rates={}, now=0.0)
    assert [r.status for r in results] == [CheckStatus.SKIP] * 3
