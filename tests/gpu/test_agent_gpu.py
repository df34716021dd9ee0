"""The nvml and cuda backends on a real NVIDIA GPU (marked `gpu`; skipped without a GPU and driver).

Run on a GPU machine with `make test-gpu`: it installs the `gpu` dependency group (the device
agent's `cuda` extra, what its image carries, plus torch, which the image does not) and runs
`pytest -m gpu tests/gpu -s`, printing the measured TFLOPS per dtype next to torch.matmul at the
same size, the bandwidth and the cycle time. It checks DESIGN.md's matmul targets: ≥ 90% of
torch.matmul in fp16/bf16, and ≥ 75% of the catalog's dense bf16 peak on H100/H200 SXM. The
numbers RESULTS.md keeps come from `benchmarks/run.py --only agent_gpu` (benchmarks/agent_gpu.py).

Without a GPU and driver every test here skips, saying so. With one, a missing CuPy or torch is a
failure that says how to install them, never a skip: the tier measures what RESULTS.md says.
"""

from __future__ import annotations

import asyncio
import importlib.util
import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

import pytest

from accelpool_agent.agent import Agent
from accelpool_agent.backends.nvml import NvmlBackend
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask
from accelpool_agent.compute.runner import ProcessRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, DeviceInfo
from accelpool_core import catalog
from accelpool_core.protocol import AgentConfig, HealthStatus

NO_GPU = "no NVIDIA GPU/driver on this machine"
INSTALL = "`make test-gpu` installs the gpu dependency group (the agent's cuda extra and torch)"


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
pytestmark = [pytest.mark.gpu, pytest.mark.timeout(600)]
needs_nvml = pytest.mark.skipif(not HAVE_NVML, reason=NO_GPU)


def require(module: str, why: str) -> None:
    """On a GPU machine, a missing module of the gpu group fails the test (it would measure nothing)."""
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{module} is not installed, and the gpu tier needs it {why}: {INSTALL}", pytrace=False)


@pytest.fixture
def cupy_present() -> None:
    require("cupy", "to run the agent's compute checks")


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


@needs_nvml
@pytest.mark.usefixtures("cupy_present")
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


def _torch_tflops_in_this_process(dtypes: tuple[str, ...], n: int, visible_device: str) -> dict[str, float] | str:
    """torch.matmul's TFLOPS per dtype (median of 5 x 20 after warm-up), or why torch cannot measure them."""
    os.environ["CUDA_VISIBLE_DEVICES"] = visible_device
    torch: Any = importlib.import_module("torch")
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} does not see the GPU (a CPU-only build?): {INSTALL}"
    measured = {}
    for dtype in dtypes:
        torch_dtype = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
        torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
        a = torch.randn(n, n, device="cuda", dtype=torch_dtype[dtype])
        b = torch.randn(n, n, device="cuda", dtype=torch_dtype[dtype])
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
        measured[dtype] = float(sorted(samples)[len(samples) // 2]) / 1e12
    return measured


def _torch_tflops(dtypes: tuple[str, ...], n: int, device: DeviceInfo) -> dict[str, float]:
    """torch.matmul's TFLOPS, measured in a spawned process: a CUDA context this process kept would make
    the GPU busy, and the agent checks only idle GPUs (the full-cycle test would find it skipped)."""
    require("torch", "to compare the matmul check with torch.matmul")
    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        measured = pool.submit(_torch_tflops_in_this_process, dtypes, n, device.uuid).result()
    if isinstance(measured, str):
        pytest.fail(measured, pytrace=False)
    return measured


@needs_nvml
@pytest.mark.usefixtures("cupy_present")
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
    torch_measured = _torch_tflops(tuple(measured), n, device)
    for dtype, value in measured.items():
        torch_value = torch_measured[dtype]
        print(f"  {dtype}: {value:.1f} TFLOPS, torch.matmul {torch_value:.1f} ({value / torch_value:.0%})")
        if dtype in ("fp16", "bf16"):
            assert value >= 0.9 * torch_value, f"{dtype}: {value:.1f} TFLOPS < 90% of torch.matmul's {torch_value:.1f}"


@needs_nvml
@pytest.mark.usefixtures("cupy_present")
def test_bf16_matmul_reaches_75_percent_of_the_dense_peak(devices: list[DeviceInfo]) -> None:
    """DESIGN.md's target for H100/H200 SXM: the matmul check's bf16 TFLOPS ≥ 75% of the dense peak.

    The peak is the catalog's (`accelpool_core.catalog`, dense, no sparsity: 989 TFLOPS bf16 for
    both H100 SXM and H200 SXM, NVIDIA's datasheets as collected in shared/reference/hardware.md).
    Large bf16 GEMMs reach about 80% of it there (H100 SXM 794.5 TFLOPS by stas00's MAMF finder,
    H200 790; torch 8192³ ≈ 798 measured on an H100 80GB HBM3, ten products after three warm-ups), so
    75% leaves room for noise only. PCIe and power-limited parts reach 60-80%: for them the target does
    not apply and this skips. On one H200 SXM (driver 580.159, 2026-11-27) the check measured 673 TFLOPS
    (68%) and torch.matmul, a hundred products after three warm-ups, 676: this failed there, torch with it.
    """
    device = devices[0]
    try:
        accelerator = catalog.lookup(device.model or device.name)
    except catalog.UnknownAcceleratorError:
        pytest.skip(f"{device.name} ({device.model!r}) is not in the catalog: no dense peak to compare with")
    if accelerator.model not in ("H100", "H200") or accelerator.form_factor is not catalog.FormFactor.SXM:
        pytest.skip(f"the 75% target is for H100/H200 SXM; this is {accelerator.name} ({accelerator.form_factor})")
    peak = accelerator.peaks.get("bf16")
    assert peak, f"the catalog has no bf16 peak for {accelerator.name}"
    (result,) = _run(device, (ComputeTask(Check.MATMUL, "bf16"),), n=8192)
    assert result.status is CheckStatus.PASS and result.value is not None, result.message
    print(f"\n{device.name}: bf16 {result.value:.1f} TFLOPS = {result.value / peak:.0%} of the {peak:g} dense peak")
    assert result.value >= 0.75 * peak, f"bf16 {result.value:.1f} TFLOPS < 75% of {accelerator.name}'s {peak:g}"


@needs_nvml
@pytest.mark.usefixtures("cupy_present")
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
