"""The amdsmi backend and the AMD rules against a scripted stand-in of AMD's `amdsmi` module.

The stand-in (`fake_amdsmi`) is installed under the name `amdsmi` in `sys.modules`, so the backend
imports it exactly as it imports the real library; it raises amdsmi's exception classes with the
status codes of amdsmi.h.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.amdsmi import AmdSmiBackend
from accelpool_agent.backends.amdsmi_device import detect_model
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute import ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, EccCounts, Telemetry
from accelpool_agent.rules import Policy, XidRecord
from accelpool_agent.rules.amd import amd_checks
from accelpool_core.protocol import Action, AgentConfig, HealthStatus

from .amdsmi_api import (
    STATUS_INIT_ERROR,
    STATUS_NOT_INIT,
    STATUS_NOT_SUPPORTED,
    STATUS_RETRY,
    AmdSmiEvtNotificationType,
    AmdSmiRetCodeFirstReleases,
    AmdSmiTimeoutException,
)
from .fake_amdsmi import FakeAmdSmi, GpuScript

POLICY = Policy()


def opened(fake: FakeAmdSmi, monkeypatch: pytest.MonkeyPatch, clock: ManualClock | None = None) -> AmdSmiBackend:
    fake.install(monkeypatch)
    backend = AmdSmiBackend(retry_seconds=30, clock=(clock or ManualClock()).time, compute_engine="cuda")
    backend.open()
    return backend


def checks(
    reading: Telemetry, record: XidRecord | None = None, baseline: EccCounts | None = None
) -> dict[Check, tuple[CheckStatus, str]]:
    results = amd_checks(reading, record or XidRecord(), baseline=baseline, now=1000.0, policy=POLICY)
    return {r.check: (r.status, r.reason) for r in results}


def test_healthy_mi300x_node(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = opened(FakeAmdSmi(gpus=8), monkeypatch)
    assert backend.error is None
    devices = backend.inventory()
    assert [d.index for d in devices] == list(range(8))
    first = devices[0]
    assert first.name == "AMD Instinct MI300X"
    assert first.model == "MI300X"  # `AMD Instinct MI300X OAM` is the catalog's amd.com/gpu.product-name
    assert first.pci_bus_id == "0000:05:00.0"
    assert first.memory_total_bytes == 196_592 * 2**20
    assert first.compute_capability == "gfx942"
    assert backend.versions().driver == "6.10.5" and backend.versions().cuda is None

    readings = backend.telemetry()
    assert len(readings) == 8
    reading = readings[0]
    assert reading.utilization_ratio == pytest.approx(0.35)
    assert reading.memory_utilization_ratio == pytest.approx(0.10)
    assert reading.memory_used_bytes == 1024 * 2**20
    assert (reading.temperature_celsius, reading.slowdown_temperature_celsius) == (48.0, 105.0)  # hotspot
    assert (reading.power_watts, reading.power_limit_watts) == (320.0, 750.0)
    assert reading.energy_joules == pytest.approx(15.3)
    assert (reading.sm_clock_hertz, reading.sm_clock_max_hertz, reading.memory_clock_hertz) == (2100e6, 2100e6, 1300e6)
    assert reading.pcie is not None and (reading.pcie.generation, reading.pcie.width) == (5, 16)
    assert (reading.pcie.max_generation, reading.pcie.max_width) == (5, 16)
    assert reading.ecc == EccCounts(volatile_single=0, volatile_double=0)
    assert reading.ras_blocks is not None and set(reading.ras_blocks) == {"UMC", "XGMI_WAFL"}
    assert reading.xgmi_links is not None and len(reading.xgmi_links) == 7  # the disabled 8th is no link
    assert reading.throttle_reasons == frozenset()
    assert reading.compute_processes == 0
    assert reading.to_json()["xgmi_links"][0] == {"link": 0, "active": True, "errors": {}}

    verdicts = checks(reading)
    assert all(status is CheckStatus.PASS for status, _ in verdicts.values()), verdicts
    assert verdicts[Check.NVLINK] == (CheckStatus.PASS, "XgmiLinksUp")


def test_not_supported_is_no_data(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=1)
    for function in (
        "amdsmi_get_violation_status",
        "amdsmi_get_gpu_metrics_info",
        "amdsmi_get_gpu_xgmi_link_status",
        "amdsmi_get_gpu_total_ecc_count",
    ):
        fake.errors[(function, None)] = STATUS_NOT_SUPPORTED
    fake.scripts[0].gfx_activity = "N/A"  # amdsmi's marker for a value the firmware does not give
    backend = opened(fake, monkeypatch)
    (reading,) = backend.telemetry()
    assert not reading.lost and backend.error is None
    assert reading.throttle_reasons is None and reading.xgmi_links is None and reading.ecc is None
    assert reading.utilization_ratio is None
    assert reading.power_watts == 320.0  # the rest still reads
    assert not backend.call_errors  # "not supported" is no data, not a failed call
    verdicts = checks(reading)
    assert verdicts[Check.ECC] == (CheckStatus.SKIP, "EccUnavailable")
    assert verdicts[Check.NVLINK] == (CheckStatus.SKIP, "NoXgmi")


def test_missing_library_is_an_error_not_missing_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", None)  # `import amdsmi` raises ImportError
    backend = AmdSmiBackend()
    backend.open()
    assert backend.error is not None and "amdsmi initialisation failed" in backend.error
    assert backend.inventory() == [] and backend.telemetry() == [] and backend.drain_xid_events() == []


def test_library_without_libamd_smi_is_an_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The PyPI package without ROCm's libamd_smi.so: amdsmi 7.0.2's import raises KeyError('libamd_smi.so')."""
    package = tmp_path / "amdsmi"
    package.mkdir()
    (package / "__init__.py").write_text("raise KeyError('libamd_smi.so')\n")
    monkeypatch.delitem(sys.modules, "amdsmi", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    backend = AmdSmiBackend()
    backend.open()
    assert backend.error is not None and "KeyError" in backend.error and "libamd_smi.so" in backend.error
    assert backend.inventory() == []


def test_init_failure_is_survived_and_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=2, init_error=STATUS_INIT_ERROR)
    clock = ManualClock()
    backend = opened(fake, monkeypatch, clock)
    assert backend.error is not None and "code: 18" in backend.error
    assert backend.telemetry() == []
    fake.init_error = None
    clock.advance(29)
    assert backend.inventory() == []  # not yet time to retry
    clock.advance(2)
    assert len(backend.inventory()) == 2 and backend.error is None


def test_library_dying_mid_run(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=2)
    backend = opened(fake, monkeypatch)
    fake.errors[("amdsmi_get_gpu_activity", None)] = STATUS_NOT_INIT
    assert backend.telemetry() == []
    assert backend.error is not None and "amdsmi_get_gpu_activity" in backend.error


def test_gpu_disappearing(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=8)
    backend = opened(fake, monkeypatch)
    uuids = [d.uuid for d in backend.inventory()]
    fake.lose(3)
    devices = backend.inventory()
    assert [d.uuid for d in devices] == uuids  # the lost GPU keeps its place; the others keep their index
    readings = backend.telemetry()
    assert [r.index for r in readings if r.lost] == [3]
    assert checks(readings[3])[Check.DEVICE] == (CheckStatus.FAIL, "GpuLost")
    assert checks(readings[4])[Check.DEVICE] == (CheckStatus.PASS, "Responding")


def test_gpu_answering_not_found_is_lost(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=2)
    backend = opened(fake, monkeypatch)
    fake.errors[("amdsmi_get_gpu_activity", 1)] = 31  # AMDSMI_STATUS_NOT_FOUND
    first, second = backend.telemetry()
    assert not first.lost and second.lost and "amdsmi_get_gpu_activity" in (second.error or "")


def test_statuses_are_read_by_their_name_in_the_librarys_own_numbering(monkeypatch: pytest.MonkeyPatch) -> None:
    """amdsmi's first releases numbered NOT_FOUND 10 and NOT_INIT 1009 (ROCm 6: 31 and 32, and 10 is NO_PERM):
    the backend reads a status through the module's own `AmdSmiRetCode`, so each means the same everywhere."""
    fake = FakeAmdSmi(gpus=2, ret_codes=AmdSmiRetCodeFirstReleases)
    backend = opened(fake, monkeypatch)
    fake.errors[("amdsmi_get_gpu_activity", 1)] = AmdSmiRetCodeFirstReleases.ERR_NOT_FOUND
    fake.errors[("amdsmi_get_gpu_metrics_info", None)] = AmdSmiRetCodeFirstReleases.ERR_NOT_SUPPORTED
    first, second = backend.telemetry()
    assert not first.lost and second.lost and not backend.call_errors
    fake.errors[("amdsmi_get_gpu_vram_usage", None)] = AmdSmiRetCodeFirstReleases.NOT_INIT
    assert backend.telemetry() == [] and "amdsmi_get_gpu_vram_usage" in (backend.error or "")


def test_a_retry_or_another_failure_of_one_call_is_counted_not_fatal(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=1)
    backend = opened(fake, monkeypatch)
    fake.errors[("amdsmi_get_power_info", None)] = STATUS_RETRY  # amdsmi raises AmdSmiRetryException's status
    (reading,) = backend.telemetry()
    assert reading.power_watts is None and not reading.lost and backend.error is None
    assert backend.call_errors["amdsmi_get_power_info"] == 1


def test_the_first_releases_clock_keys_and_unfiltered_no_value_readings(monkeypatch: pytest.MonkeyPatch) -> None:
    """amdsmi's first releases returned `cur_clk` (today `clk`) and passed 0xFFFF through where today's
    interface says "N/A"; an activity above 100% is no value either (`_validate_if_max_uint`)."""
    fake = FakeAmdSmi(gpus=1)
    fake.scripts[0].gfx_activity = 0xFFFF
    fake.scripts[0].socket_power_w = 0xFFFF
    module = fake.module()
    module.amdsmi_get_clock_info = lambda handle, kind: {"cur_clk": 1500, "max_clk": 2100, "min_clk": 500}  # type: ignore[attr-defined]
    backend = AmdSmiBackend(module, compute_engine="cuda")
    backend.open()
    (reading,) = backend.telemetry()
    assert (reading.sm_clock_hertz, reading.sm_clock_max_hertz) == (1500e6, 2100e6)
    assert reading.utilization_ratio is None and reading.power_watts is None
    assert reading.memory_utilization_ratio == pytest.approx(0.10)


def test_uncorrectable_ecc_fails_with_the_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=2)
    fake.scripts[1] = GpuScript(uncorrectable=2, correctable=5, blocks={"UMC": (5, 2), "XGMI_WAFL": (0, 0)})
    backend = opened(fake, monkeypatch)
    reading = backend.telemetry()[1]
    assert reading.ecc == EccCounts(volatile_single=5, volatile_double=2)
    assert reading.ras_blocks is not None and reading.ras_blocks["UMC"].volatile_double == 2
    results = amd_checks(reading, XidRecord(), baseline=None, now=1.0, policy=POLICY)
    ecc = next(r for r in results if r.check is Check.ECC)
    assert (ecc.status, ecc.reason, ecc.action) == (CheckStatus.FAIL, "EccUncorrectableError", Action.RESET_GPU)
    assert "UMC 2" in ecc.message


def test_correctable_errors_rising_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=1)
    fake.scripts[0].correctable = 7
    (reading,) = opened(fake, monkeypatch).telemetry()
    assert checks(reading, baseline=EccCounts(volatile_single=7))[Check.ECC] == (
        CheckStatus.PASS,
        "NoUncorrectableErrors",
    )
    assert checks(reading, baseline=EccCounts(volatile_single=3))[Check.ECC] == (
        CheckStatus.WARN,
        "EccCorrectableRising",
    )


def test_retired_vram_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=3)
    fake.scripts[1].bad_pages = [0, 1]  # one retired, one awaiting retirement
    fake.scripts[2].bad_pages = [0] * 4
    fake.scripts[2].bad_page_threshold = 4
    healthy, pending, worn = opened(fake, monkeypatch).telemetry()
    assert healthy.retired_pages is not None and healthy.retired_pages.double_bit == 0
    assert pending.retired_pages is not None and pending.retired_pages.pending
    assert checks(healthy)[Check.RETIRED_PAGES] == (CheckStatus.PASS, "NoPendingRetirement")
    assert checks(pending)[Check.RETIRED_PAGES] == (CheckStatus.WARN, "BadPagesPending")
    results = amd_checks(worn, XidRecord(), baseline=None, now=1.0, policy=POLICY)
    pages = next(r for r in results if r.check is Check.RETIRED_PAGES)
    assert (pages.status, pages.reason, pages.action) == (CheckStatus.FAIL, "BadPageThreshold", Action.SERVICE_REQUIRED)


def test_xgmi_link_down_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=8)
    fake.scripts[5].xgmi = ["U", "U", "D", "U", "U", "U", "U", "X"]
    reading = opened(fake, monkeypatch).telemetry()[5]
    results = amd_checks(reading, XidRecord(), baseline=None, now=1.0, policy=POLICY)
    link = next(r for r in results if r.check is Check.NVLINK)
    assert (link.status, link.reason, link.action) == (CheckStatus.FAIL, "XgmiLinkDown", Action.RESTART_OS)
    assert "XGMI link 2 down (6 of 7 up)" in link.message


@pytest.mark.parametrize(
    ("flag", "reason"),
    [
        ("active_prochot_thrm", "ThermalThrottle"),
        ("active_hbm_thrm", "ThermalThrottle"),
        ("active_ppt_pwr", "PowerThrottle"),
    ],
)
def test_violation_status_throttling_warns(monkeypatch: pytest.MonkeyPatch, flag: str, reason: str) -> None:
    fake = FakeAmdSmi(gpus=1)
    fake.scripts[0].violations = {flag: True}
    (reading,) = opened(fake, monkeypatch).telemetry()
    assert checks(reading)[Check.THERMAL] == (CheckStatus.WARN, reason)


def test_firmware_throttlers_when_there_is_no_violation_status(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=2)
    fake.errors[("amdsmi_get_violation_status", None)] = STATUS_NOT_SUPPORTED  # before MI300
    fake.errors[("amdsmi_get_gpu_activity", None)] = STATUS_NOT_SUPPORTED
    fake.scripts[1].throttlers = 1 << 36  # SMU_THROTTLER_TEMP_HOTSPOT_BIT
    idle, hot = opened(fake, monkeypatch).telemetry()
    assert idle.throttle_reasons == frozenset() and idle.utilization_ratio == pytest.approx(0.35)  # from the metrics
    assert hot.throttle_reasons == frozenset({"hw_thermal_slowdown"})
    assert checks(hot)[Check.THERMAL] == (CheckStatus.WARN, "ThermalThrottle")


def test_pcie_below_maximum_width_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=1)
    fake.scripts[0].pcie_width = 8
    (reading,) = opened(fake, monkeypatch).telemetry()
    assert checks(reading)[Check.PCIE_LINK] == (CheckStatus.WARN, "PcieLinkDegraded")


def test_events_become_error_events(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=4)
    backend = opened(fake, monkeypatch)
    assert backend.drain_xid_events() == []  # AMDSMI_STATUS_NO_DATA: nothing waiting
    fake.events = [(2, "RING_HANG", "ring gfx_0.0.0 timeout"), (0, "VMFAULT", "page fault")]
    events = backend.drain_xid_events()
    assert [(e.index, e.xid, e.event) for e in events] == [
        (2, int(AmdSmiEvtNotificationType.RING_HANG), "RING_HANG"),
        (0, int(AmdSmiEvtNotificationType.VMFAULT), "VMFAULT"),
    ]
    record = XidRecord().add(events[0].xid, 990.0)
    reading = backend.telemetry()[2]
    results = amd_checks(reading, record, baseline=None, now=1000.0, policy=POLICY)
    event = next(r for r in results if r.check is Check.XID)
    assert (event.status, event.reason, event.action) == (CheckStatus.FAIL, "AmdEventRingHang", Action.RESET_GPU)
    vmfault = XidRecord().add(events[1].xid, 1000.0 - 2 * POLICY.xid_warning_window_seconds)
    assert checks(reading, vmfault)[Check.XID] == (CheckStatus.PASS, "NoAmdEvents")  # outside the window


def test_no_event_waiting_may_be_a_timeout_exception(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """amdsmi_interface.py's `_check_res` raises `AmdSmiTimeoutException` for AMDSMI_STATUS_TIMEOUT."""
    fake = FakeAmdSmi(gpus=1, no_event=AmdSmiTimeoutException)
    backend = opened(fake, monkeypatch)
    with caplog.at_level("WARNING"):
        assert backend.drain_xid_events() == []
    assert not caplog.records


def test_compute_job_targets_the_hip_ordinal(monkeypatch: pytest.MonkeyPatch) -> None:
    backend = opened(FakeAmdSmi(gpus=2), monkeypatch)
    device = backend.inventory()[1]
    job = backend.compute_job(device, [ComputeTask(Check.SANITY)], ComputeSizes(), 0)
    assert job is not None and job.engine == "cuda" and job.visible_device == "1"


def test_no_cupy_rocm_means_no_compute(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAmdSmi(gpus=1).install(monkeypatch)
    backend = AmdSmiBackend()  # this host has no cupy-rocm-* wheel
    backend.open()
    assert backend.compute_job(backend.inventory()[0], [ComputeTask(Check.SANITY)], ComputeSizes(), 0) is None
    assert backend.compute_unavailable is not None and "cupy-rocm" in backend.compute_unavailable


def agent_on(fake: FakeAmdSmi, monkeypatch: pytest.MonkeyPatch) -> Agent:
    fake.install(monkeypatch)
    settings = AgentSettings(node_name="mi300x-a1", backend="amdsmi")
    agent = Agent(AmdSmiBackend(compute_engine=None), AgentConfig(), settings, InlineRunner(), clock=ManualClock())
    agent.open()
    return agent


async def test_agent_on_a_healthy_mi300x_node_without_cupy_rocm(monkeypatch: pytest.MonkeyPatch) -> None:
    report = await agent_on(FakeAmdSmi(gpus=8), monkeypatch).full_cycle()
    assert len(report.gpus) == 8 and report.gpus[0].device.model == "MI300X"
    assert not [c for gpu in report.gpus for c in gpu.checks if c.status in (CheckStatus.WARN, CheckStatus.FAIL)]
    # no compute engine (no cupy-rocm): the agent's rule for any backend that cannot compute
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "ChecksSkipped")


async def test_agent_without_amdsmi_is_unknown_not_missing_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    report = await agent_on(FakeAmdSmi(gpus=8, init_error=STATUS_INIT_ERROR), monkeypatch).full_cycle()
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "BackendUnavailable")
    assert "amdsmi initialisation failed" in report.message


@pytest.mark.parametrize(
    ("names", "model"),
    [
        (("AMD Instinct MI300X OAM", "AMD Instinct MI300X"), "MI300X"),
        ((None, "AMD Instinct MI300X"), "MI300X"),
        (("N/A", "AMD Instinct MI250X / MI250"), "MI250X"),
        (("N/A", "0x74a1"), None),  # amdsmi gives the device id when it has no market name
    ],
)
def test_product_names_map_to_the_catalog(names: tuple[str | None, str], model: str | None) -> None:
    found = detect_model(*names)
    assert (found.name if found else None) == model


def test_a_library_failure_of_its_own_is_counted_not_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeAmdSmi(gpus=1)
    module = fake.install(monkeypatch)

    def unknown_link_state(handle: object) -> object:
        raise KeyError(7)  # amdsmi_get_gpu_xgmi_link_status looking up a link state its enum lacks

    module.amdsmi_get_gpu_xgmi_link_status = unknown_link_state  # type: ignore[attr-defined]
    backend = AmdSmiBackend(compute_engine="cuda")
    backend.open()
    (reading,) = backend.telemetry()
    assert reading.xgmi_links is None and not reading.lost
    assert backend.call_errors["amdsmi_get_gpu_xgmi_link_status"] == 1
