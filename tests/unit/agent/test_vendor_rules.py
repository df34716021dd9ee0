"""A vendor backend's rules (`accelpool_agent.rules.vendor`) join the generic telemetry rules in each device's
report: a vendor result replaces the generic one of the same check; the others are added."""

from __future__ import annotations

from accelpool_agent import rules
from accelpool_agent.model import Check, CheckResult, CheckStatus, DeviceInfo, EccCounts, Telemetry
from accelpool_agent.rules import vendor as vendor_rules
from accelpool_agent.state import AgentState, Readings

NOW = 1_000.0
DEVICE = DeviceInfo(index=0, uuid="chip-0", name="TPU v5p", pci_bus_id="0000:00:04.0", memory_total_bytes=95 * 2**30)


def result(check: Check, reason: str) -> CheckResult:
    return CheckResult(check, CheckStatus.PASS, reason, "")


def test_a_vendor_result_replaces_the_generic_one_of_its_check_and_new_checks_are_added() -> None:
    generic = [result(Check.DEVICE, "Generic"), result(Check.ECC, "GenericEcc")]
    vendor = [result(Check.ECC, "VendorEcc"), result(Check.XID, "VendorEvents")]
    assert [r.reason for r in vendor_rules.merged(generic, vendor)] == ["Generic", "VendorEcc", "VendorEvents"]


def test_only_the_vendor_backends_have_vendor_rules() -> None:
    assert set(vendor_rules.BY_BACKEND) == {"amdsmi", "neuron", "tpu"}
    assert vendor_rules.for_backend("nvml") is None and vendor_rules.for_backend("fake") is None


def report(backend: str, *readings: Telemetry) -> list[CheckResult]:
    vendor = vendor_rules.for_backend(backend)
    state = AgentState(devices=(DEVICE,))
    for at, reading in enumerate(readings):
        state = state.with_readings(
            Readings(telemetry=(reading,), xid_events=(), backend_error=None), NOW + 60 * at, vendor=vendor
        )
    policy = rules.Policy()
    (gpu,) = state.gpu_reports(now=NOW, policy=policy, expected=lambda _: rules.Expected(), vendor=vendor)
    return list(gpu.checks)


def test_a_lost_tpu_chip_is_judged_by_the_tpu_rules() -> None:
    checks = report("tpu", Telemetry(index=0, lost=True, error="PCI function vanished"))
    device = next(c for c in checks if c.check is Check.DEVICE)
    assert (device.status, device.reason) == (CheckStatus.FAIL, "TpuChipMissing")
    assert [c.check for c in checks].count(Check.DEVICE) == 1


def test_neuron_counters_rising_over_the_window_reach_the_neuron_rules() -> None:
    def reading(corrected: int) -> Telemetry:
        return Telemetry(index=0, ecc=EccCounts(volatile_single=corrected, volatile_double=0))

    checks = report("neuron", reading(0), reading(500))
    ecc = next(c for c in checks if c.check is Check.ECC)
    assert ecc.reason == "NeuronEccCorrectedRising"
