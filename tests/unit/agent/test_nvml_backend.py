"""The NVML backend against a scripted `pynvml` stand-in (and the real one, which finds no driver here)."""

from __future__ import annotations

import pynvml
import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.nvml import NvmlBackend
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute import ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus
from accelpool_core.protocol import AgentConfig, HealthStatus

from .fake_nvml import FakeNvml


def backend(nvml: FakeNvml, clock: ManualClock | None = None) -> NvmlBackend:
    clock = clock or ManualClock()
    result = NvmlBackend(nvml, retry_seconds=30, clock=clock.time)
    result.open()
    return result


def test_inventory() -> None:
    devices = backend(FakeNvml(gpus=2)).inventory()
    assert [d.index for d in devices] == [0, 1]
    first = devices[0]
    assert first.name == "NVIDIA H100 80GB HBM3"
    assert first.model == "H100-80GB"  # recognised through the catalog's GFD product names
    assert first.uuid == "GPU-00000000-1111-2222-3333-444444444444"
    assert first.pci_bus_id == "00000000:18:00.0"
    assert first.memory_total_bytes == 81559 * 2**20
    assert first.compute_capability == "9.0"
    assert not first.mig_enabled and first.mig_devices == ()


def test_mig_devices() -> None:
    devices = backend(FakeNvml(gpus=2, mig_gpu=1)).inventory()
    mig = devices[1]
    assert mig.mig_enabled
    assert [(m.profile, m.gpu_instance_id, m.memory_total_bytes) for m in mig.mig_devices] == [
        ("3g.40gb", 1, 40 * 2**30),
        ("3g.40gb", 2, 40 * 2**30),
    ]
    job = backend(FakeNvml(gpus=2, mig_gpu=1)).compute_job(mig, [ComputeTask(Check.SANITY)], ComputeSizes(), 0)
    assert job is not None and job.visible_device == mig.mig_devices[0].uuid and job.engine == "cuda"


def test_telemetry_units() -> None:
    (reading, _) = backend(FakeNvml(gpus=2)).telemetry()
    assert reading.utilization_ratio == pytest.approx(0.37)
    assert reading.memory_utilization_ratio == pytest.approx(0.12)
    assert reading.memory_used_bytes == 530 * 2**20
    assert reading.temperature_celsius == 41.0
    assert reading.slowdown_temperature_celsius == 87.0
    assert reading.power_watts == pytest.approx(123.456)
    assert reading.power_limit_watts == 700.0
    assert reading.energy_joules == 5000.0
    assert reading.sm_clock_hertz == 1755e6
    assert reading.sm_clock_max_hertz == 1980e6
    assert reading.memory_clock_hertz == 2619e6
    assert reading.throttle_reasons == frozenset({"sw_power_cap", "hw_thermal_slowdown"})
    assert reading.ecc is not None
    assert (reading.ecc.volatile_single, reading.ecc.volatile_double) == (3, 0)
    assert (reading.ecc.aggregate_single, reading.ecc.aggregate_double) == (10, 1)
    assert reading.retired_pages is None  # NOT_SUPPORTED is "no data"
    assert reading.row_remap is not None and reading.row_remap.correctable == 2 and not reading.row_remap.failure
    assert reading.pcie is not None and (reading.pcie.generation, reading.pcie.width) == (5, 16)
    assert reading.compute_processes == 0


def test_not_supported_is_no_data_not_an_error() -> None:
    nvml = FakeNvml(gpus=1)
    for name in ("nvmlDeviceGetPowerUsage", "nvmlDeviceGetEccMode", "nvmlDeviceGetRemappedRows"):
        nvml.errors[(name, None)] = pynvml.NVML_ERROR_NOT_SUPPORTED
    b = backend(nvml)
    (reading,) = b.telemetry()
    assert reading.power_watts is None and reading.ecc is None and reading.row_remap is None
    assert reading.temperature_celsius == 41.0
    assert not reading.lost and b.error is None
    assert sum(b.call_errors.values()) == 0


def test_other_errors_are_counted_and_read_as_no_data() -> None:
    nvml = FakeNvml(gpus=1)
    nvml.errors[("nvmlDeviceGetTemperature", 0)] = pynvml.NVML_ERROR_UNKNOWN
    b = backend(nvml)
    assert b.telemetry()[0].temperature_celsius is None
    assert b.call_errors["nvmlDeviceGetTemperature"] == 1


def test_lost_gpu_is_reported_and_others_still_read() -> None:
    nvml = FakeNvml(gpus=2)
    b = backend(nvml)
    nvml.errors[("nvmlDeviceGetMemoryInfo", 1)] = pynvml.NVML_ERROR_GPU_IS_LOST
    first, second = b.telemetry()
    assert not first.lost and first.temperature_celsius == 41.0
    assert second.lost and "GPU is lost" in (second.error or "")
    # the next inventory keeps the lost GPU's identity instead of dropping it
    assert [d.uuid for d in b.inventory()] == [
        "GPU-00000000-1111-2222-3333-444444444444",
        "GPU-00000001-1111-2222-3333-444444444444",
    ]


def test_dead_nvml_is_survived_and_retried() -> None:
    clock = ManualClock()
    nvml = FakeNvml(gpus=2, init_error=pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
    b = backend(nvml, clock)
    assert b.error is not None and "Driver Not Loaded" in b.error
    assert b.inventory() == [] and b.telemetry() == [] and b.drain_xid_events() == []
    nvml.init_error = None
    assert b.telemetry() == []  # not retried before retry_seconds
    clock.advance(31)
    assert len(b.telemetry()) == 2 and b.error is None
    nvml.errors[("nvmlDeviceGetUtilizationRates", None)] = pynvml.NVML_ERROR_UNINITIALIZED
    assert b.telemetry() == [] and b.error is not None


def test_xid_events_are_drained() -> None:
    nvml = FakeNvml(gpus=2, events=[(1, 79), (0, 13)])
    b = backend(nvml)
    events = b.drain_xid_events()
    assert [(e.index, e.xid, e.gpu_instance_id) for e in events] == [(1, 79, None), (0, 13, None)]
    assert b.drain_xid_events() == []


def agent_on(nvml: FakeNvml, config: AgentConfig | None = None) -> Agent:
    settings = AgentSettings(node_name="gpu-a1", backend="nvml")
    agent = Agent(
        NvmlBackend(nvml, compute_engine=None), config or AgentConfig(), settings, InlineRunner(), clock=ManualClock()
    )
    agent.open()
    return agent


async def test_agent_verdicts_from_nvml() -> None:
    nvml = FakeNvml(gpus=2, events=[(1, 79)])
    nvml.processes[0] = 1
    report = await agent_on(nvml).full_cycle()
    assert report.status is HealthStatus.UNHEALTHY
    assert report.reason == "XidError79" and report.bad_gpus == (1,)
    gpu0 = report.gpus[0]
    assert gpu0.check(Check.THERMAL) is not None
    assert gpu0.check(Check.THERMAL).reason == "ThermalThrottle"  # type: ignore[union-attr]
    matmul = gpu0.check(Check.MATMUL)
    assert matmul is not None and (matmul.status, matmul.reason) == (CheckStatus.SKIP, "GpuBusy")


async def test_real_pynvml_without_a_driver_is_unknown() -> None:
    """This machine has no NVIDIA driver: the real library fails to initialise and the node is Unknown."""
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError:
        pass
    else:
        pynvml.nvmlShutdown()
        pytest.skip("an NVIDIA driver is present: tests/gpu covers the real backend")
    settings = AgentSettings(node_name="n", backend="nvml")
    agent = Agent(NvmlBackend(), AgentConfig(), settings, InlineRunner(), clock=ManualClock())
    agent.open()
    report = await agent.full_cycle()
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "BackendUnavailable")
    assert "NVML initialisation failed" in report.message
    assert agent.snapshot.backend_error is not None


@pytest.mark.parametrize(
    "error",
    [pynvml.NVMLError_LibraryNotFound, pynvml.NVMLError_DriverNotLoaded, pynvml.NVMLError_Uninitialized],
)
async def test_unavailable_nvml_is_unknown_not_missing_gpus(error: type[pynvml.NVMLError]) -> None:
    """A runtime misconfiguration (no library, no driver) must not quarantine a node as GpuMissing."""
    agent = agent_on(FakeNvml(gpus=8, init_error=error), AgentConfig(expected_gpus=8))
    report = await agent.full_cycle()
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "BackendUnavailable")
    assert "NVML initialisation failed" in report.message
    assert report.bad_gpus == ()


async def test_nvml_dying_mid_run_is_unknown_not_missing_gpus() -> None:
    nvml = FakeNvml(gpus=8)
    agent = agent_on(nvml, AgentConfig(expected_gpus=8))
    nvml.errors[("nvmlDeviceGetUtilizationRates", None)] = pynvml.NVML_ERROR_UNINITIALIZED
    report = await agent.tick()
    assert (report.status, report.reason) == (HealthStatus.UNKNOWN, "BackendUnavailable")
    assert "Uninitialized" in report.message


async def test_working_nvml_with_fewer_gpus_is_gpu_missing() -> None:
    agent = agent_on(FakeNvml(gpus=6), AgentConfig(expected_gpus=8))
    report = await agent.full_cycle()
    assert (report.status, report.reason) == (HealthStatus.UNHEALTHY, "GpuMissing")
    assert report.message.startswith("found 6 of 8 GPUs")
