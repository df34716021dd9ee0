"""The fake backend simulates each vendor's devices as that vendor's backend reports them, and its faults
are judged by that vendor's own rules (`accelpool_agent.rules.vendor`), as the real devices are."""

from __future__ import annotations

import pytest

from accelpool_agent.backends.fake import FakeBackend, parse_fake_gpus
from accelpool_agent.faults import faults_by_gpu, parse_fault_spec
from accelpool_agent.model import Check, CheckStatus
from accelpool_core.protocol import Action, AgentConfig, HealthStatus

from .conftest import MakeAgent


def fake(spec: str, faults: str = "") -> FakeBackend:
    accelerator, count = parse_fake_gpus(spec)
    specs = [parse_fault_spec(f"0:{faults}")] if faults else []
    return FakeBackend(accelerator, count, faults=faults_by_gpu(specs, count))


def test_mi300x_devices_are_named_as_amd_smi_names_them_with_xgmi_links() -> None:
    backend = fake("MI300X:8")
    device = backend.inventory()[0]
    assert (device.name, device.memory_total_bytes, device.compute_capability) == (
        "AMD Instinct MI300X",
        192 * 2**30,
        None,
    )
    assert not device.uuid.startswith("GPU-")
    reading = backend.telemetry()[0]
    assert reading.xgmi_links is not None and len(reading.xgmi_links) == 7  # amdsmi's XGMI link status
    assert reading.nvlinks is None and reading.fabric is None and reading.row_remap is None
    assert reading.ras_blocks is not None and set(reading.ras_blocks) == {"UMC", "XGMI_WAFL"}
    assert backend.versions().cuda is None
    assert backend.judged_as == "amdsmi"


def test_trainium2_and_tpu_devices_have_no_links_and_their_catalog_memory() -> None:
    for spec, name, memory_gb in (("Trainium2:16", "Trainium2", 96), ("TPU-v5p:4", "TPU v5p", 95)):
        backend = fake(spec)
        device = backend.inventory()[0]
        assert (device.name, device.memory_total_bytes) == (name, memory_gb * 2**30)
        reading = backend.telemetry()[0]
        assert reading.nvlinks is None and reading.fabric is None
        assert backend.infiniband() == []


def test_a_trainium2_device_reports_what_neuron_monitor_gives_per_neuroncore() -> None:
    backend = fake("Trainium2:16", "busy")
    assert backend.judged_as == "neuron"
    reading = backend.telemetry()[0]
    assert reading.core_utilization_ratios is not None and len(reading.core_utilization_ratios) == 4  # LNC=2
    assert all(0.9 <= ratio <= 1.0 for ratio in reading.core_utilization_ratios)
    assert reading.utilization_ratio == pytest.approx(sum(reading.core_utilization_ratios) / 4, abs=1e-4)
    assert reading.execution_errors == dict.fromkeys(
        ("generic", "numerical", "transient", "model", "runtime", "hardware"), 0
    )
    assert reading.sram_ecc is not None and reading.ecc is not None
    assert (reading.temperature_celsius, reading.power_watts, reading.pcie) == (None, None, None)  # not in the report
    assert fake("Trainium:16").telemetry()[0].core_utilization_ratios == (0.0, 0.0)


def test_a_tpu_chip_reports_what_libtpu_gives() -> None:
    backend = fake("TPU-v5p:4", "busy")
    assert backend.judged_as == "tpu"
    reading = backend.telemetry()[0]
    assert reading.utilization_ratio is not None and reading.tensorcore_utilization_ratio is not None
    assert reading.memory_used_bytes is not None and reading.memory_total_bytes == 95 * 2**30
    assert (reading.ecc, reading.temperature_celsius, reading.power_watts) == (None, None, None)


def test_every_vendor_loses_a_device_and_reports_its_old_driver() -> None:
    for spec in ("MI300X:8", "Trainium2:16", "TPU-v5p:4"):
        assert fake(spec, "lost").telemetry()[0].lost
        assert fake(spec, "old-driver").versions() != fake(spec).versions()


@pytest.mark.parametrize(
    ("gpus", "check", "reason", "action"),
    [
        ("H100:8", Check.XID, "XidError79", Action.RESTART_OS),
        ("MI300X:8", Check.XID, "AmdEventRingHang", Action.RESET_GPU),
        ("Trainium2:16", Check.XID, "NeuronHardwareError", Action.SERVICE_REQUIRED),
        ("TPU-v5p:4", Check.DEVICE, "TpuChipMissing", Action.RESTART_OS),
    ],
)
async def test_the_fatal_fault_is_each_vendors_own_fatal_error_judged_by_its_rules(
    make_agent: MakeAgent, gpus: str, check: Check, reason: str, action: Action
) -> None:
    report = await make_agent(gpus, ["1:fatal"], config=AgentConfig(pool="p", check_timeout_seconds=5)).full_cycle()
    assert (report.status, report.bad_gpus) == (HealthStatus.UNHEALTHY, (1,))
    result = report.gpus[1].check(check)
    assert result is not None and (result.status, result.reason, result.action) == (CheckStatus.FAIL, reason, action)
    assert report.gpus[0].status is CheckStatus.PASS


@pytest.mark.parametrize(
    ("gpus", "reason"),
    [("MI300X:8", "EccUncorrectableError"), ("Trainium2:16", "NeuronHbmUncorrectable")],
)
async def test_an_uncorrectable_ecc_error_is_judged_by_the_vendors_rules(
    make_agent: MakeAgent, gpus: str, reason: str
) -> None:
    report = await make_agent(gpus, ["2:ecc-dbe"]).full_cycle()
    result = report.gpus[2].check(Check.ECC)
    assert result is not None and (result.status, result.reason) == (CheckStatus.FAIL, reason)


async def test_neuron_and_tpu_devices_are_judged_without_compute_checks(make_agent: MakeAgent) -> None:
    for gpus in ("Trainium2:16", "TPU-v5p:4"):
        report = await make_agent(gpus, ["0:slow-matmul=4"]).full_cycle()
        assert (report.status, report.complete) == (HealthStatus.HEALTHY, True), gpus
        assert report.gpus[0].check(Check.MATMUL) is None


async def test_xid_faults_are_nvidias_only(make_agent: MakeAgent) -> None:
    report = await make_agent("MI300X:8", ["1:xid=79"]).full_cycle()
    assert report.status is HealthStatus.HEALTHY
