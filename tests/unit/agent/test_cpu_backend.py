"""The CPU backend: the same compute checks a GPU runs, on NumPy at small sizes; /proc readings."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from accelpool_agent.backends.cpu import CpuBackend
from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask, kernels
from accelpool_agent.compute.engines import NumpyEngine
from accelpool_agent.compute.runner import InlineRunner
from accelpool_agent.model import Check, CheckStatus

SMALL = ComputeSizes(
    matmul_n=128, correctness_n=64, bandwidth_bytes=4 << 20, trials=2, warmup=1, min_trial_seconds=0.001
)
HAS_ML_DTYPES = importlib.util.find_spec("ml_dtypes") is not None


def run(task: ComputeTask, engine: Any = None) -> Any:
    return kernels.run_task(engine or NumpyEngine(), task, SMALL, seed=1)


def test_sanity() -> None:
    result = run(ComputeTask(Check.SANITY))
    assert (result.status, result.reason) == (CheckStatus.PASS, "SanityPassed")


NEEDS_ML_DTYPES = pytest.mark.skipif(not HAS_ML_DTYPES, reason="bf16 on the CPU needs ml_dtypes (the gpu extra)")


@pytest.mark.parametrize("dtype", ["fp32", "fp16", pytest.param("bf16", marks=NEEDS_ML_DTYPES)])
def test_correctness_within_tolerance(dtype: str) -> None:
    result = run(ComputeTask(Check.CORRECTNESS, dtype))
    assert (result.status, result.reason) == (CheckStatus.PASS, "ResultsCorrect"), result.message
    assert result.value is not None and result.value <= kernels.TOLERANCE[dtype]


class CorruptingEngine(NumpyEngine):
    """A device that silently flips one element of every result it returns."""

    def to_host(self, array: Any) -> np.ndarray[Any, Any]:
        host = np.array(array, copy=True)
        if host.ndim == 2:
            host[1, 2] = host[1, 2] * -1.0 + 3.0
        return host


def test_correctness_catches_silent_corruption() -> None:
    result = run(ComputeTask(Check.CORRECTNESS, "fp32"), CorruptingEngine())
    assert (result.status, result.reason) == (CheckStatus.FAIL, "WrongResults")
    assert result.value is not None and result.value > kernels.TOLERANCE["fp32"]


def test_correctness_catches_nan() -> None:
    class NanEngine(NumpyEngine):
        def to_host(self, array: Any) -> np.ndarray[Any, Any]:
            host = np.array(array, dtype=np.float32, copy=True)
            host[0, 0] = np.nan
            return host

    result = run(ComputeTask(Check.CORRECTNESS, "fp32"), NanEngine())
    assert result.reason == "WrongResults"


def test_normalized_error_tolerances_are_dtype_aware() -> None:
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64), dtype=np.float32)
    b = rng.standard_normal((64, 64), dtype=np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    assert kernels.normalized_error(exact.astype(np.float32), a, b) < 1e-6
    half = exact.astype(np.float16)  # output rounding of an fp16 GEMM
    assert kernels.TOLERANCE["fp32"] < kernels.normalized_error(half, a, b) <= kernels.TOLERANCE["fp16"]


def test_matmul_measures_flops() -> None:
    result = run(ComputeTask(Check.MATMUL, "fp32"))
    assert (result.status, result.unit) == (CheckStatus.PASS, "TFLOPS")
    assert result.value is not None and 1e-5 < result.value < 100  # a CPU, not a GPU


def test_tf32_is_unsupported_on_cpu() -> None:
    result = run(ComputeTask(Check.MATMUL, "tf32"))
    assert (result.status, result.reason) == (CheckStatus.SKIP, "DtypeUnsupported")


def test_bandwidth_counts_read_and_write() -> None:
    result = run(ComputeTask(Check.BANDWIDTH))
    assert (result.status, result.unit) == (CheckStatus.PASS, "bytes_per_second")
    assert result.value is not None and 1e8 < result.value < 1e13


def test_device_errors_become_failed_checks() -> None:
    class FullEngine(NumpyEngine):
        def random(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
            raise MemoryError("out of memory")

    result = run(ComputeTask(Check.MATMUL, "fp32"), FullEngine())
    assert (result.status, result.reason) == (CheckStatus.FAIL, "OutOfMemory")


def test_cpu_job_through_the_runner() -> None:
    tasks = (ComputeTask(Check.SANITY), ComputeTask(Check.CORRECTNESS, "fp32"), ComputeTask(Check.MATMUL, "fp32"))
    results = InlineRunner().run(ComputeJob(engine="cpu", gpu_index=0, tasks=tasks, sizes=SMALL), 30)
    assert [r.status for r in results] == [CheckStatus.PASS] * 3


def test_proc_readings(tmp_path: Path) -> None:
    (tmp_path / "cpuinfo").write_text("processor\t: 0\nmodel name\t: Test CPU 9000\n")
    (tmp_path / "meminfo").write_text("MemTotal:       1000 kB\nMemAvailable:    250 kB\n")
    (tmp_path / "stat").write_text("cpu  100 0 100 800 0 0 0 0 0 0\n")
    backend = CpuBackend(proc=tmp_path)
    backend.open()
    (device,) = backend.inventory()
    assert device.name.startswith("Test CPU 9000")
    assert device.memory_total_bytes == 1000 * 1024
    first = backend.telemetry()[0]
    assert first.memory_used_bytes == 750 * 1024
    assert first.utilization_ratio is None  # needs two readings
    (tmp_path / "stat").write_text("cpu  200 0 200 900 0 0 0 0 0 0\n")
    assert backend.telemetry()[0].utilization_ratio == pytest.approx(200 / 300, abs=1e-4)
    job = backend.compute_job(device, [ComputeTask(Check.SANITY)], SMALL, 0)
    assert job is not None and job.engine == "cpu"
