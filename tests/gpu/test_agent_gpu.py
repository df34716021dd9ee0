"""The nvml and cuda backends on a real NVIDIA GPU (marked `gpu`; skipped without a GPU and driver).

Run on a GPU machine with `pytest -m gpu -s tests/gpu` to also print the measured TFLOPS per
dtype (next to torch.matmul at the same size when torch is installed), bandwidth, and cycle time.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from typing import Any

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.nvml import NvmlBackend
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import ProcessRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, DeviceInfo
from accelpool_core.protocol import AgentConfig, HealthStatus

NO_GPU = "no NVIDIA GPU/driver on this machine"


def _nvml_gpus() -> int:
    try:
        import pynvml

        pynvml.nvmlInit()
        try:
            count: int = pynvml.nvmlDeviceGetCount()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return 0
    return count


HAVE_NVML = _nvml_gpus() > 0
HAVE_CUPY = importlib.util.find_spec("cupy") is not None
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]
needs_nvml = pytest.mark.skipif(not HAVE_NVML, reason=NO_GPU)
needs_cuda = pytest.mark.skipif(not (HAVE_NVML and HAVE_CUPY), reason=NO_GPU)


@pytest.fixture(scope="module")
def devices() -> list[DeviceInfo]:
    if not HAVE_NVML:
        pytest.skip(NO_GPU)
    backend = NvmlBackend()
    backend.open()
    try:
        found = backend.inventory()
    finally:
        backend.close()
    return found


@needs_nvml
def test_nvml_inventory(devices: list[DeviceInfo]) -> None:
    assert devices
    for device in devices:
        assert device.uuid.startswith("GPU-")
        assert device.name and device.pci_bus_id
        assert device.memory_total_bytes and device.memory_total_bytes > 2**30
        assert device.compute_capability
        for mig in device.mig_devices:
            assert mig.uuid.startswith("MIG-")


@needs_nvml
def test_nvml_telemetry() -> None:
    backend = NvmlBackend()
    backend.open()
    try:
        readings = backend.telemetry()
        events = backend.drain_xid_events()
    finally:
        backend.close()
    assert backend.error is None
    assert readings and not any(r.lost for r in readings)
    for reading in readings:
        assert reading.temperature_celsius is not None and 10 < reading.temperature_celsius < 110
        assert reading.memory_total_bytes and reading.memory_used_bytes is not None
        assert reading.memory_used_bytes <= reading.memory_total_bytes
        if reading.power_watts is not None:
            assert 5 < reading.power_watts < 1500
        assert reading.sm_clock_hertz is not None and reading.sm_clock_hertz > 1e8
        assert reading.throttle_reasons is not None
        assert reading.compute_processes is not None
    assert isinstance(events, list)
    print("\n", readings[0].to_json())


def _run(device: DeviceInfo, tasks: tuple[ComputeTask, ...], *, tf32: bool = False, n: int = 8192) -> list[Any]:
    sizes = ComputeSizes(matmul_n=n)
    job = ComputeJob(
        engine="cuda", gpu_index=device.index, tasks=tasks, sizes=sizes, visible_device=device.uuid, tf32=tf32
    )
    return ProcessRunner().run(job, timeout_seconds=300)


@needs_cuda
def test_cuda_sanity_and_correctness(devices: list[DeviceInfo]) -> None:
    device = devices[0]
    tasks = (
        ComputeTask(Check.SANITY),
        ComputeTask(Check.CORRECTNESS, "fp32"),
        ComputeTask(Check.CORRECTNESS, "fp16"),
        ComputeTask(Check.CORRECTNESS, "bf16"),
    )
    results = _run(device, tasks)
    for result in results:
        if result.reason == "DtypeUnsupported":
            continue
        assert result.status is CheckStatus.PASS, result.message
    tf32 = _run(device, (ComputeTask(Check.CORRECTNESS, "tf32"),), tf32=True)[0]
    assert tf32.status in (CheckStatus.PASS, CheckStatus.SKIP), tf32.message


def _torch_tflops(dtype: str, n: int) -> float | None:
    if importlib.util.find_spec("torch") is None:
        return None
    torch: Any = importlib.import_module("torch")
    if not torch.cuda.is_available():
        return None
    torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    a = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    b = torch.randn(n, n, device="cuda", dtype=torch_dtype)
    for _ in range(3):
        torch.matmul(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(5):
        start.record()
        for _ in range(20):
            torch.matmul(a, b)
        end.record()
        torch.cuda.synchronize()
        samples.append(2 * n**3 * 20 / (start.elapsed_time(end) / 1000))
    del a, b
    torch.cuda.empty_cache()
    return float(sorted(samples)[len(samples) // 2]) / 1e12


@needs_cuda
def test_cuda_matmul_and_bandwidth(devices: list[DeviceInfo]) -> None:
    device = devices[0]
    n = 8192
    tasks = (*(ComputeTask(Check.MATMUL, d) for d in ("fp32", "fp16", "bf16")), ComputeTask(Check.BANDWIDTH))
    plain = _run(device, tasks, n=n)
    tf32 = _run(device, (ComputeTask(Check.MATMUL, "tf32"),), tf32=True, n=n)
    measured = {r.dtype: r.value for r in [*plain, *tf32] if r.check is Check.MATMUL and r.status is CheckStatus.PASS}
    assert "fp32" in measured and measured["fp32"] > 1.0
    capability = float(device.compute_capability or 0)
    if capability >= 8.0:
        assert {"tf32", "fp16", "bf16"} <= set(measured)
        assert measured["tf32"] > measured["fp32"] * 1.5  # tensor cores really were used
        assert measured["bf16"] > measured["tf32"]
    bandwidth = next(r for r in plain if r.check is Check.BANDWIDTH)
    assert bandwidth.status is CheckStatus.PASS and bandwidth.value and bandwidth.value > 1e11
    print(f"\n{device.name} (n={n}): bandwidth {bandwidth.value / 1e9:.0f} GB/s (read + write)")
    for dtype, value in measured.items():
        torch_value = _torch_tflops(dtype, n)
        versus = f", torch.matmul {torch_value:.1f} ({value / torch_value:.0%})" if torch_value else ""
        print(f"  {dtype}: {value:.1f} TFLOPS{versus}")
        if torch_value and dtype in ("fp16", "bf16"):
            assert value >= 0.9 * torch_value


@needs_cuda
def test_full_cycle_on_this_node() -> None:
    settings = AgentSettings(node_name="gpu-test", backend="nvml", parallelism=8)
    agent = Agent(NvmlBackend(), AgentConfig(check_timeout_seconds=300), settings, ProcessRunner())
    agent.open()
    started = time.monotonic()
    try:
        report = asyncio.run(agent.full_cycle())
    finally:
        agent.close()
    elapsed = time.monotonic() - started
    print(f"\nfull cycle on {len(report.gpus)} GPU(s): {elapsed:.1f} s; {report.status.value} {report.reason}")
    print(f"  {report.message}")
    for gpu in report.gpus:
        print(f"  GPU {gpu.device.index} {gpu.device.name}: {gpu.reason} {dict(gpu.matmul_tflops)}")
    assert report.status is not HealthStatus.UNKNOWN
    for gpu in report.gpus:
        sanity = gpu.check(Check.SANITY)
        assert sanity is not None
        assert sanity.status in (CheckStatus.PASS, CheckStatus.SKIP), sanity.message
    assert elapsed < 120
