"""The Google TPU backend against a stand-in of libtpu's monitoring SDK and a fake sysfs / dev tree,
and the TPU rules on what it reports."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.tpu import TpuBackend
from accelpool_agent.backends.tpu_chips import V3, V4, V5E, discover
from accelpool_agent.backends.tpu_readings import per_chip
from accelpool_agent.clock import ManualClock
from accelpool_agent.compute import ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, GpuReport, Telemetry
from accelpool_agent.rules import node_verdict
from accelpool_agent.rules.tpu import tpu_checks
from accelpool_core.protocol import Action, AgentConfig, HealthStatus
from tests.unit.agent.fake_libtpu import GIB, FakeHost, FakeTpuMonitoring, install, uninstall


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


def opened(host: FakeHost, *, retry_seconds: float = 30.0, clock: Callable[[], float] = time.time) -> TpuBackend:
    backend = TpuBackend(sysfs_root=host.sysfs, dev_root=host.dev, retry_seconds=retry_seconds, clock=clock)
    backend.open()
    return backend


def reports(backend: TpuBackend) -> list[GpuReport]:
    telemetry = {t.index: t for t in backend.telemetry()}
    return [
        GpuReport(device, telemetry.get(device.index), tpu_checks(telemetry.get(device.index)))
        for device in backend.inventory()
    ]


# ---------------------------------------------------------------------------- a working host


def test_v5p_host_with_four_chips(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v5p", 4)
    install(monkeypatch, FakeTpuMonitoring.busy(4, hbm_gib=95, used_gib=12.5), version="0.0.21")
    backend = opened(host)

    assert backend.error is None
    devices = backend.inventory()
    assert [(d.index, d.model, d.name) for d in devices] == [(n, "TPU-v5p", "TPU v5p chip") for n in range(4)]
    assert [d.pci_bus_id for d in devices] == [host.address(n) for n in range(4)]
    assert devices[0].uuid == "TPU-0000:00:04.0" and devices[0].memory_total_bytes == 95 * GIB
    assert backend.versions().driver == "0.0.21" and backend.versions().cuda is None

    readings = backend.telemetry()
    assert [t.utilization_ratio for t in readings] == [0.45, 0.46, 0.47, 0.48]
    assert [t.tensorcore_utilization_ratio for t in readings] == [0.3, 0.31, 0.32, 0.33]
    assert {(t.memory_used_bytes, t.memory_total_bytes, t.lost, t.error) for t in readings} == {
        (int(12.5 * GIB), 95 * GIB, False, None)
    }
    results = tpu_checks(readings[0])
    assert [(r.check, r.status, r.reason) for r in results] == [(Check.DEVICE, CheckStatus.PASS, "Responding")]
    assert "12.50 GiB of 95.00 GiB" in results[0].message


def test_tensorcore_utilization_under_its_other_sdk_name(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    """Some libtpu releases list the metric as `tensorcore_utilization` (tpu-info's --list_metrics name)."""
    host.add_chips("v5p", 2)
    monitoring = FakeTpuMonitoring.busy(2, hbm_gib=95)
    monitoring.values["tensorcore_utilization"] = monitoring.values.pop("tensorcore_util")
    install(monkeypatch, monitoring)
    assert [t.tensorcore_utilization_ratio for t in opened(host).telemetry()] == [0.3, 0.31]


def test_v5e_host_with_eight_chips_uses_vfio_files(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v5e", 8)
    install(monkeypatch, FakeTpuMonitoring.busy(8, hbm_gib=16))
    backend = opened(host)

    assert [d.model for d in backend.inventory()] == ["TPU-v5e"] * 8
    chips = discover(host.sysfs, host.dev)
    assert [c.device_file for c in chips] == [f"/dev/vfio/{n}" for n in range(8)]
    assert {c.generation for c in chips} == {V5E}
    verdict = node_verdict(reports(backend), expected_gpus=8)
    assert (verdict.status, verdict.reason) == (HealthStatus.HEALTHY, "AllChecksPassed")


def test_generations_outside_the_catalog_are_chips_without_a_model(host: FakeHost) -> None:
    host.add_chips("v4", 2)
    chips = discover(host.sysfs, host.dev)
    assert [(c.generation, c.device_file) for c in chips] == [(V4, "/dev/accel0"), (V4, "/dev/accel1")]


def test_only_google_tpu_functions_are_chips(host: FakeHost) -> None:
    host.add_chips("v3", 1)  # device 0x0027 with subsystem 0x004f
    host.add_function("0000:00:10.0", "0x1ae0", "0x0027", "0x0001")  # v2/v3 device id, unknown subsystem
    host.add_function("0000:00:11.0", "0x1ae0", "0x0042")  # a Google function that is no TPU (e.g. gVNIC)
    host.add_function("0000:00:12.0", "0x10de", "0x0063")  # NVIDIA's vendor id with a TPU's device id
    assert [(c.pci_address, c.generation) for c in discover(host.sysfs, host.dev)] == [(host.address(0), V3)]


def test_device_files_count_the_chips_without_sysfs(host: FakeHost) -> None:
    for name in ("0", "1", "2", "3", "vfio"):  # vfio/vfio is the VFIO container device, no chip
        (host.dev / "vfio").mkdir(parents=True, exist_ok=True)
        (host.dev / "vfio" / name).touch()
    chips = discover(host.sysfs, host.dev)
    assert [(c.pci_address, c.generation, c.device_file) for c in chips] == [
        ("", None, f"/dev/vfio/{n}") for n in range(4)
    ]


def test_no_compute_and_no_error_events(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v6e", 1)
    install(monkeypatch, FakeTpuMonitoring.busy(1, hbm_gib=32))
    backend = opened(host)
    device = backend.inventory()[0]
    assert device.model == "TPU-v6e" and backend.compute_engine is None
    assert backend.compute_job(device, [ComputeTask(Check.SANITY)], ComputeSizes.for_engine("cpu"), 0) is None
    assert backend.drain_xid_events() == []
    assert backend.infiniband() == []


# ---------------------------------------------------------------------------- a chip disappearing


def test_a_chip_that_vanishes_is_lost_and_fails(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v5p", 4)
    monitoring = FakeTpuMonitoring.busy(4, hbm_gib=95)
    install(monkeypatch, monitoring)
    backend = opened(host)
    assert len(backend.inventory()) == 4

    host.remove_chip(2)
    monitoring.values = FakeTpuMonitoring.busy(3, hbm_gib=95, used_gib=20).values  # the runtime sees three
    assert [d.index for d in backend.inventory()] == [0, 1, 2, 3]  # the lost chip stays, as a lost GPU does
    readings = {t.index: t for t in backend.telemetry()}
    assert readings[2].lost and readings[2].error is not None and host.address(2) in readings[2].error
    assert [readings[n].memory_used_bytes for n in (0, 1, 3)] == [20 * GIB] * 3  # paired by position
    assert readings[3].utilization_ratio == 0.47

    (result,) = tpu_checks(readings[2])
    assert (result.status, result.reason, result.action) == (CheckStatus.FAIL, "TpuChipMissing", Action.RESTART_OS)
    verdict = node_verdict(reports(backend), expected_gpus=4)
    assert (verdict.status, verdict.reason, verdict.bad_gpus) == (HealthStatus.UNHEALTHY, "TpuChipMissing", (2,))


def test_readings_that_cannot_be_paired_with_the_chips_are_no_data(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.add_chips("v5e", 4)
    monitoring = FakeTpuMonitoring.busy(4, hbm_gib=16)
    monitoring.values["hbm_capacity_usage"] = ["1", "2", "3"]  # three values for four chips
    install(monkeypatch, monitoring)
    reading = opened(host).telemetry()[0]
    assert reading.memory_used_bytes is None and reading.utilization_ratio == 0.45
    assert reading.error is not None and "gave 3 value(s) for 4 chip(s)" in reading.error


# ---------------------------------------------------------------------------- no runtime


def test_without_libtpu_the_backend_is_unavailable_never_gpu_missing(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    host.add_chips("v5p", 4)
    uninstall(monkeypatch)
    monkeypatch.setenv("PATH", str(host.root / "bin"))  # and no tpu-info command to fall back to
    backend = opened(host)
    assert backend.error is not None and "libtpu" in backend.error and "ModuleNotFoundError" in backend.error
    assert backend.inventory() == [] and backend.telemetry() == []
    verdict = node_verdict([], expected_gpus=4, backend_error=backend.error)
    assert (verdict.status, verdict.reason) == (HealthStatus.UNKNOWN, "BackendUnavailable")


def test_a_failing_runtime_is_unavailable_and_retried(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v5p", 4)
    monitoring = FakeTpuMonitoring.busy(4, hbm_gib=95)
    monitoring.list_error = RuntimeError("TPU runtime not initialised")
    install(monkeypatch, monitoring)
    now = [1000.0]
    backend = opened(host, retry_seconds=30.0, clock=lambda: now[0])
    assert backend.error is not None and "TPU runtime not initialised" in backend.error

    monitoring.list_error = None
    now[0] += 10
    assert backend.inventory() == []  # not retried before retry_seconds
    now[0] += 30
    assert len(backend.inventory()) == 4 and backend.error is None


def test_a_host_without_chips_is_unavailable(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    install(monkeypatch, FakeTpuMonitoring.busy(4, hbm_gib=95))
    backend = opened(host)
    assert backend.error is not None and "no TPU chip found" in backend.error
    assert node_verdict([], expected_gpus=4, backend_error=backend.error).reason == "BackendUnavailable"


def test_an_idle_runtime_passes_with_a_note(host: FakeHost, monkeypatch: pytest.MonkeyPatch) -> None:
    host.add_chips("v5e", 4)
    install(monkeypatch, FakeTpuMonitoring(values={name: [] for name in FakeTpuMonitoring.busy(1, hbm_gib=1).values}))
    backend = opened(host)
    reading = backend.telemetry()[0]
    assert (reading.utilization_ratio, reading.memory_used_bytes, reading.lost) == (None, None, False)
    (result,) = tpu_checks(reading)
    assert (result.status, result.reason, result.noteworthy) == (CheckStatus.PASS, "RuntimeIdle", True)
    verdict = node_verdict(reports(backend), expected_gpus=4)
    assert verdict.status is HealthStatus.HEALTHY


# ---------------------------------------------------------------------------- HBM readings


@pytest.mark.parametrize(
    ("script", "why"),
    [
        ({"raises": {"hbm_capacity_usage": RuntimeError("metric unavailable")}}, "RuntimeError: metric unavailable"),
        ({"supported": ["duty_cycle_pct", "tensorcore_util"]}, "does not support hbm_capacity_usage"),
    ],
)
def test_hbm_unavailable_while_the_runtime_is_up_warns(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch, script: dict[str, object], why: str
) -> None:
    host.add_chips("v5p", 4)
    monitoring = FakeTpuMonitoring.busy(4, hbm_gib=95)
    for name, value in script.items():
        setattr(monitoring, name, value)
    install(monkeypatch, monitoring)
    reading = opened(host).telemetry()[1]
    assert reading.memory_used_bytes is None and reading.utilization_ratio == 0.46
    assert reading.error is not None and why in reading.error
    (result,) = tpu_checks(reading)
    assert (result.status, result.reason, result.action) == (CheckStatus.WARN, "HbmReadingUnavailable", Action.NONE)


def test_hbm_usage_above_capacity_warns() -> None:
    reading = Telemetry(index=0, utilization_ratio=0.5, memory_used_bytes=40 * GIB, memory_total_bytes=32 * GIB)
    (result,) = tpu_checks(reading)
    assert (result.status, result.reason) == (CheckStatus.WARN, "HbmReadingInconsistent")


def test_no_telemetry_skips() -> None:
    (result,) = tpu_checks(None)
    assert (result.status, result.reason) == (CheckStatus.SKIP, "NoTelemetry")


# ---------------------------------------------------------------------------- per-chip values


def test_per_chip_values() -> None:
    assert per_chip(["10.00", "20.5"], 2, 1, summed=False) == (10.0, 20.5)
    # two devices per chip (v2, v3, 7x): memory per device summed, percentages averaged
    assert per_chip(["1", "2", "3", "4"], 2, V3.devices_per_chip, summed=True) == (3.0, 7.0)
    assert per_chip(["10", "20", "30", "40"], 2, V3.devices_per_chip, summed=False) == (15.0, 35.0)
    assert per_chip(["1", "2", "3"], 2, 2, summed=True) is None
    assert per_chip(["1", "n/a"], 2, 1, summed=True) is None


async def test_a_healthy_tpu_node_is_healthy_without_compute_checks(
    host: FakeHost, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TPUs have no compute checks (no JAX in the agent): a full cycle of good readings is Healthy and
    complete, not Unknown for want of checks; a chip that disappears still fails the node."""
    host.add_chips("v5p", 4)
    install(monkeypatch, FakeTpuMonitoring.busy(4, hbm_gib=95, used_gib=12.5))
    backend = TpuBackend(sysfs_root=host.sysfs, dev_root=host.dev)
    settings = AgentSettings(node_name="tpu-v5p-1", backend="tpu")
    agent = Agent(backend, AgentConfig(expected_gpus=4), settings, InlineRunner(), clock=ManualClock())
    agent.open()
    report = await agent.full_cycle()
    assert (report.status, report.reason, report.complete) == (HealthStatus.HEALTHY, "AllChecksPassed", True)
    assert not [c for gpu in report.gpus for c in gpu.checks if c.check.is_compute]

    host.remove_chip(2)
    report = await agent.full_cycle()
    assert report.status is HealthStatus.UNHEALTHY
