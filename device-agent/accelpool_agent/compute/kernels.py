"""The compute checks themselves, written once for any NumPy-like array module.

The CUDA engine (CuPy) and the CPU engine (NumPy) both run these functions, so the CPU backend
exercises the same code a GPU node runs. Imported only inside compute children.

- sanity: allocate, run elementwise and reduction kernels, read back, compare exactly.
- correctness: a seeded matmul on the device against a float64 NumPy reference on the CPU,
  with a dtype-aware tolerance on the error normalised by |A|·|B| (catches silent corruption).
- matmul: 2-D GEMMs after warm-up, timed with the engine's timer (CUDA events on a GPU),
  median of several trials, TFLOPS = 2·n³ / time.
- bandwidth: device-to-device copies, bytes counted as read + write.
"""

from __future__ import annotations

import contextlib
import math
import statistics
import time
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from accelpool_agent.compute import ComputeSizes, ComputeTask
from accelpool_agent.model import Check, CheckStatus, Measurement

TOLERANCE: dict[str, float] = {"fp32": 1e-4, "tf32": 4e-3, "fp16": 1e-2, "bf16": 2e-2}
"""Largest allowed |C - C_ref| / (|A|·|B|): fp32 accumulation error, plus input rounding for
tf32 (10-bit mantissa) and output rounding for fp16 (11 bits) and bf16 (8 bits)."""


class ArrayEngine(Protocol):
    """What the checks need from an array library and its device."""

    name: str
    xp: Any

    def unsupported(self, dtype: str) -> str | None:
        """Why this dtype cannot run here, or None when it can."""

    def host_dtype(self, dtype: str) -> Any:
        """The NumPy dtype that holds values of this check dtype on the host."""

    def asarray(self, host: np.ndarray[Any, Any]) -> Any: ...

    def to_host(self, array: Any) -> np.ndarray[Any, Any]: ...

    def random(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        """Standard-normal values of the check dtype, generated where the data will live."""

    def time(self, fn: Callable[[], object], repeats: int) -> float:
        """Seconds for `repeats` calls of fn, measured on the device's own clock."""

    def copy(self, dst: Any, src: Any) -> None: ...

    def verify_dtype_mode(self, dtype: str) -> str | None:
        """After a GEMM: why the requested math mode was not in effect (e.g. TF32), or None."""

    def release(self) -> None:
        """Return pooled device memory (nothing is held between checks)."""

    def error_reason(self, error: BaseException) -> str:
        """The CamelCase reason for an exception raised by the device (CudaError, OutOfMemory, ...)."""


def normalized_error(result: np.ndarray[Any, Any], a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> float:
    """max |C - A·B| / (|A|·|B|) elementwise, in float64; infinity if C has NaN or Inf."""
    r = np.asarray(result, dtype=np.float64)
    if not np.all(np.isfinite(r)):
        return math.inf
    a64 = np.asarray(a, dtype=np.float64)
    b64 = np.asarray(b, dtype=np.float64)
    reference = a64 @ b64
    scale = np.abs(a64) @ np.abs(b64)
    return float(np.max(np.abs(r - reference) / np.maximum(scale, np.finfo(np.float64).tiny)))


def run_task(engine: ArrayEngine, task: ComputeTask, sizes: ComputeSizes, seed: int) -> Measurement:
    """Run one task, turning device errors into a failed measurement; free memory afterwards."""
    started = time.perf_counter()
    try:
        if task.dtype is not None:
            why = engine.unsupported(task.dtype)
            if why is not None:
                return Measurement(task.check, CheckStatus.SKIP, "DtypeUnsupported", why, dtype=task.dtype)
        if task.check is Check.SANITY:
            return sanity(engine)
        if task.check is Check.CORRECTNESS:
            return correctness(engine, task.dtype or "fp32", sizes.correctness_n, seed)
        if task.check is Check.MATMUL:
            return matmul(engine, task.dtype or "fp32", sizes)
        if task.check is Check.BANDWIDTH:
            return bandwidth(engine, sizes)
        raise ValueError(f"{task.check} is not a compute check")
    except Exception as error:
        reason = engine.error_reason(error)
        return Measurement(
            task.check,
            CheckStatus.FAIL,
            reason,
            f"{task} failed on {engine.name}: {type(error).__name__}: {error}"[:500],
            dtype=task.dtype,
            duration_seconds=time.perf_counter() - started,
        )
    finally:
        with contextlib.suppress(Exception):  # a broken device already failed the check above
            engine.release()


def sanity(engine: ArrayEngine) -> Measurement:
    """Context, allocation, an elementwise kernel and a reduction, checked exactly on the host."""
    started = time.perf_counter()
    xp = engine.xp
    n = 4096
    x = xp.arange(n, dtype=xp.int64)
    y = x * 2 + 1  # elementwise kernel
    total = int(y.sum())  # reduction kernel + device-to-host copy
    head = engine.to_host(y[:4]).tolist()
    block = xp.ones((16 << 20) // 4, dtype=xp.float32)  # a 16 MiB allocation, written by a kernel
    block_sum = float(block.sum())
    del x, y, block
    elapsed = time.perf_counter() - started
    expected_total = n * n  # sum of the first n odd numbers
    if total != expected_total or head != [1, 3, 5, 7] or block_sum != float((16 << 20) // 4):
        return Measurement(
            Check.SANITY,
            CheckStatus.FAIL,
            "SanityMismatch",
            f"kernels returned wrong values: sum {total} (expected {expected_total}), head {head}",
            duration_seconds=elapsed,
        )
    return Measurement(
        Check.SANITY,
        CheckStatus.PASS,
        "SanityPassed",
        f"context, allocation and kernels work on {engine.name}",
        value=elapsed,
        unit="seconds",
        duration_seconds=elapsed,
    )


def correctness(engine: ArrayEngine, dtype: str, n: int, seed: int) -> Measurement:
    """A seeded nxn matmul on the device against a float64 reference computed on the host."""
    started = time.perf_counter()
    rng = np.random.default_rng(seed)
    host_dtype = engine.host_dtype(dtype)
    a = rng.standard_normal((n, n), dtype=np.float32).astype(host_dtype)
    b = rng.standard_normal((n, n), dtype=np.float32).astype(host_dtype)
    product = engine.xp.matmul(engine.asarray(a), engine.asarray(b))
    result = engine.to_host(product)
    del product
    error = normalized_error(result, a, b)
    tolerance = TOLERANCE[dtype]
    elapsed = time.perf_counter() - started
    if error <= tolerance:
        return Measurement(
            Check.CORRECTNESS,
            CheckStatus.PASS,
            "ResultsCorrect",
            f"{dtype} {n}x{n} matmul matches the CPU reference (error {error:.2e} <= {tolerance:.0e})",
            value=error,
            unit="ratio",
            dtype=dtype,
            duration_seconds=elapsed,
        )
    return Measurement(
        Check.CORRECTNESS,
        CheckStatus.FAIL,
        "WrongResults",
        f"{dtype} {n}x{n} matmul differs from the CPU reference: error {error:.2e} > tolerance {tolerance:.0e}",
        value=error if math.isfinite(error) else None,
        unit="ratio",
        dtype=dtype,
        duration_seconds=elapsed,
    )


def matmul(engine: ArrayEngine, dtype: str, sizes: ComputeSizes) -> Measurement:
    """Median TFLOPS of `trials` timed batches of nxnxn GEMMs, after warm-up."""
    started = time.perf_counter()
    n = sizes.matmul_n
    xp = engine.xp
    a = engine.random((n, n), dtype, 1)
    b = engine.random((n, n), dtype, 2)
    c = xp.empty_like(a)

    def gemm() -> object:
        return xp.matmul(a, b, out=c)

    engine.time(gemm, max(1, sizes.warmup))
    single = engine.time(gemm, 1)
    repeats = max(1, min(1000, math.ceil(sizes.min_trial_seconds / max(single, 1e-9))))
    flops = 2.0 * n * n * n * repeats
    samples = [flops / max(engine.time(gemm, repeats), 1e-12) for _ in range(max(1, sizes.trials))]
    tflops = statistics.median(samples) / 1e12
    mode_problem = engine.verify_dtype_mode(dtype)
    elapsed = time.perf_counter() - started
    if mode_problem is not None:
        return Measurement(
            Check.MATMUL,
            CheckStatus.SKIP,
            "MathModeUnavailable",
            mode_problem,
            value=tflops,
            unit="TFLOPS",
            dtype=dtype,
            duration_seconds=elapsed,
        )
    return Measurement(
        Check.MATMUL,
        CheckStatus.PASS,
        "Measured",
        f"{dtype} {n}x{n} GEMM: {tflops:.1f} TFLOPS (median of {len(samples)} x {repeats})",
        value=tflops,
        unit="TFLOPS",
        dtype=dtype,
        duration_seconds=elapsed,
    )


def bandwidth(engine: ArrayEngine, sizes: ComputeSizes) -> Measurement:
    """Device-to-device copy bandwidth in bytes/s, counting each byte read and written."""
    started = time.perf_counter()
    xp = engine.xp
    count = sizes.bandwidth_bytes // 4
    src = xp.ones(count, dtype=xp.float32)
    dst = xp.empty_like(src)
    nbytes = int(src.nbytes)

    def copy() -> object:
        engine.copy(dst, src)
        return None

    engine.time(copy, max(1, sizes.warmup))
    single = engine.time(copy, 1)
    repeats = max(1, min(1000, math.ceil(sizes.min_trial_seconds / max(single, 1e-9))))
    samples = [2.0 * nbytes * repeats / max(engine.time(copy, repeats), 1e-12) for _ in range(max(1, sizes.trials))]
    intact = bool(engine.to_host(dst[-4:]).tolist() == [1.0, 1.0, 1.0, 1.0])
    rate = statistics.median(samples)
    elapsed = time.perf_counter() - started
    if not intact:
        return Measurement(
            Check.BANDWIDTH,
            CheckStatus.FAIL,
            "CopyMismatch",
            "device-to-device copy produced wrong data",
            value=rate,
            unit="bytes_per_second",
            duration_seconds=elapsed,
        )
    return Measurement(
        Check.BANDWIDTH,
        CheckStatus.PASS,
        "Measured",
        f"device-to-device copy of {nbytes / 2**20:.0f} MiB: {rate / 1e9:.0f} GB/s (read + write)",
        value=rate,
        unit="bytes_per_second",
        duration_seconds=elapsed,
    )
