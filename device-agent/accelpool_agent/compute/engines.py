"""Array engines for the compute checks: CuPy on a CUDA device, NumPy on the CPU.

Imported only inside compute children, after the child has set CUDA_VISIBLE_DEVICES and (for
TF32) CUPY_TF32, so the agent process never loads CUDA. bfloat16 comes from `ml_dtypes` (CuPy
≥ 14 accepts it); a missing `ml_dtypes` makes bf16 "unsupported", not a failure.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np


def _bfloat16() -> Any | None:
    try:
        import ml_dtypes
    except ImportError:
        return None
    return ml_dtypes.bfloat16


class NumpyEngine:
    """The CPU engine: the same checks, timed with perf_counter."""

    name = "cpu"

    def __init__(self) -> None:
        self.xp: Any = np

    def unsupported(self, dtype: str) -> str | None:
        if dtype == "tf32":
            return "tf32 is a tensor-core mode; the CPU has none"
        if dtype == "bf16" and _bfloat16() is None:
            return "bf16 needs the ml_dtypes package"
        return None

    def host_dtype(self, dtype: str) -> Any:
        return {"fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "bf16": _bfloat16()}[dtype]

    def asarray(self, host: np.ndarray[Any, Any]) -> Any:
        return np.ascontiguousarray(host)

    def to_host(self, array: Any) -> np.ndarray[Any, Any]:
        return np.asarray(array)

    def random(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        rng = np.random.default_rng(seed)
        return rng.standard_normal(shape, dtype=np.float32).astype(self.host_dtype(dtype))

    def time(self, fn: Callable[[], object], repeats: int) -> float:
        started = time.perf_counter()
        for _ in range(repeats):
            fn()
        return time.perf_counter() - started

    def copy(self, dst: Any, src: Any) -> None:
        np.copyto(dst, src)

    def verify_dtype_mode(self, dtype: str) -> str | None:
        return None

    def release(self) -> None:
        return None

    def error_reason(self, error: BaseException) -> str:
        return "OutOfMemory" if isinstance(error, MemoryError) else "ComputeError"


class CupyEngine:
    """The CUDA engine: CuPy ≥ 14 on device 0 of the child's CUDA_VISIBLE_DEVICES.

    GEMMs are 2-D (`cupy.matmul` → cublasGemmEx with fp32 accumulation; batched fp16 would be
    upcast). Timing uses CUDA events; memory pools are emptied after every check.
    """

    name = "cuda"

    def __init__(self, *, tf32: bool) -> None:
        import cupy

        self.xp: Any = cupy
        self._cupy: Any = cupy
        self._tf32 = tf32
        self._device: Any = cupy.cuda.Device(0)
        self._device.use()  # creates the context: the sanity check's first step
        self._capability = int(self._device.compute_capability)
        props = cupy.cuda.runtime.getDeviceProperties(0)
        raw_name = props.get("name", b"CUDA device")
        self.name = f"cuda:{raw_name.decode() if isinstance(raw_name, bytes) else raw_name}"

    def unsupported(self, dtype: str) -> str | None:
        if dtype == "tf32":
            if self._capability < 80:
                return f"tf32 needs compute capability 8.0+ (this device: {self._capability / 10:.1f})"
            if not self._tf32:
                return "tf32 runs in a child started with CUPY_TF32=1"
        if dtype == "bf16":
            if self._capability < 80:
                return f"bf16 GEMMs need compute capability 8.0+ (this device: {self._capability / 10:.1f})"
            if _bfloat16() is None:
                return "bf16 needs the ml_dtypes package"
        if dtype == "fp16" and self._capability < 53:
            return "fp16 needs compute capability 5.3+"
        return None

    def host_dtype(self, dtype: str) -> Any:
        return {"fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "bf16": _bfloat16()}[dtype]

    def asarray(self, host: np.ndarray[Any, Any]) -> Any:
        return self._cupy.asarray(host)

    def to_host(self, array: Any) -> np.ndarray[Any, Any]:
        host: np.ndarray[Any, Any] = self._cupy.asnumpy(array)
        return host

    def random(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        cupy = self._cupy
        values = cupy.random.default_rng(seed).standard_normal(shape, dtype=cupy.float32)
        target = self.host_dtype(dtype)
        if np.dtype(target) == np.dtype(np.float32):
            return values
        try:
            return values.astype(target)
        except Exception:
            host = cupy.asnumpy(values).astype(target)
            del values
            return cupy.asarray(host)

    def time(self, fn: Callable[[], object], repeats: int) -> float:
        cuda = self._cupy.cuda
        start, end = cuda.Event(), cuda.Event()
        start.record()
        for _ in range(repeats):
            fn()
        end.record()
        end.synchronize()
        return float(cuda.get_elapsed_time(start, end)) / 1000.0

    def copy(self, dst: Any, src: Any) -> None:
        dst.data.copy_from_device_async(src.data, src.nbytes)

    def verify_dtype_mode(self, dtype: str) -> str | None:
        if dtype != "tf32":
            return None
        try:
            from cupy._core import _routines_linalg as linalg
        except ImportError:  # private module moved: trust CUPY_TF32
            return None
        if linalg.get_compute_type(np.float32) != linalg.COMPUTE_TYPE_TF32:
            return "CuPy did not select the TF32 compute type for fp32 GEMMs"
        return None

    def release(self) -> None:
        cupy = self._cupy
        cupy.cuda.Device().synchronize()
        cupy.get_default_memory_pool().free_all_blocks()
        cupy.get_default_pinned_memory_pool().free_all_blocks()

    def error_reason(self, error: BaseException) -> str:
        cupy = self._cupy
        if isinstance(error, cupy.cuda.memory.OutOfMemoryError):
            return "OutOfMemory"
        return "CudaError"


def cuda_error_reason(error: BaseException) -> str:
    """Reason code for an error raised before a CupyEngine exists (context creation)."""
    if isinstance(error, ImportError):
        return "CudaUnavailable"
    return "CudaError"
