"""The fake engine: compute checks of a simulated GPU, run inside a real compute child.

Throughput comes from the catalog (a realistic fraction of the dense peak and of the memory
bandwidth, with a small deterministic jitter) instead of burning seconds; durations are the
simulated ones, so output is reproducible. Faults act where a real GPU would misbehave:
`wrong-results` corrupts a real (small) matmul that goes through the real comparison with the
CPU reference, `hang` blocks the child until the parent kills it, `crash` makes it die.
"""

from __future__ import annotations

import math
import os
import random
import threading

import numpy as np

from accelpool_agent import faults as fault_kinds
from accelpool_agent.compute import ComputeSizes, ComputeTask, FakeProfile
from accelpool_agent.compute.kernels import TOLERANCE, normalized_error
from accelpool_agent.faults import FaultKind
from accelpool_agent.model import Check, CheckStatus, Measurement

_CORRECTNESS_N = 64
_CONTEXT_SECONDS = 0.4
"""Simulated cost of creating a CUDA context in a fresh child."""


class SimulatedCrash(Exception):
    """Raised instead of dying when the fake engine runs in-process (InlineRunner)."""


def hang_forever() -> None:
    """What a hung kernel looks like from the host: a wait that never returns."""
    threading.Event().wait()


class FakeEngine:
    name = "fake"

    def __init__(self, profile: FakeProfile, sizes: ComputeSizes, *, in_child: bool = True) -> None:
        self.profile = profile
        self.sizes = sizes
        self.in_child = in_child
        self._first = True

    def _jitter(self, task: ComputeTask) -> float:
        rng = random.Random(f"{self.profile.seed}:{self.profile.index}:{task}")
        return 1.0 + rng.uniform(-0.01, 0.01)

    def _faults(self, kind: FaultKind) -> list[fault_kinds.Fault]:
        return fault_kinds.find(self.profile.faults, kind)

    def run(self, task: ComputeTask, seed: int) -> Measurement:
        first, self._first = self._first, False
        if first and self._faults(FaultKind.CRASH):
            if not self.in_child:
                raise SimulatedCrash(70)
            os._exit(70)  # the child dies mid-check, as on a driver crash
        if first and self._faults(FaultKind.HANG):
            if not self.in_child:
                raise TimeoutError("hang fault (simulated without a child process)")
            hang_forever()
        if task.check is Check.SANITY:
            return self._sanity()
        if task.check is Check.CORRECTNESS:
            return self._correctness(task.dtype or "fp32", seed)
        if task.check is Check.MATMUL:
            return self._matmul(task)
        if task.check is Check.BANDWIDTH:
            return self._bandwidth(task)
        raise ValueError(f"{task.check} is not a compute check")

    def _sanity(self) -> Measurement:
        if self._faults(FaultKind.CUDA_ERROR):
            return Measurement(
                Check.SANITY,
                CheckStatus.FAIL,
                "CudaError",
                "cudaErrorDevicesUnavailable: CUDA-capable device(s) is/are busy or unavailable (simulated)",
                duration_seconds=_CONTEXT_SECONDS,
            )
        duration = _CONTEXT_SECONDS + 0.01
        return Measurement(
            Check.SANITY,
            CheckStatus.PASS,
            "SanityPassed",
            "context, allocation and kernels work on the simulated GPU",
            value=duration,
            unit="seconds",
            duration_seconds=duration,
        )

    def _correctness(self, dtype: str, seed: int) -> Measurement:
        rng = np.random.default_rng(seed)
        n = _CORRECTNESS_N
        # small integers: every product and sum is exact, so a clean result has error 0 on any BLAS
        a = rng.integers(-4, 5, size=(n, n)).astype(np.float32)
        b = rng.integers(-4, 5, size=(n, n)).astype(np.float32)
        result = a @ b
        if self._faults(FaultKind.WRONG_RESULTS):
            result[3, 5] = -result[3, 5] + 1.0  # a flipped sign
            result[n - 1, 7] *= 256.0  # an exponent bit flip
        error = normalized_error(result, a, b)
        tolerance = TOLERANCE[dtype]
        duration = 0.05 + 2.0 * n**3 / 1e9
        if error <= tolerance:
            return Measurement(
                Check.CORRECTNESS,
                CheckStatus.PASS,
                "ResultsCorrect",
                f"{dtype} matmul matches the CPU reference (error {error:.2e} <= {tolerance:.0e})",
                value=error,
                unit="ratio",
                dtype=dtype,
                duration_seconds=duration,
            )
        return Measurement(
            Check.CORRECTNESS,
            CheckStatus.FAIL,
            "WrongResults",
            f"{dtype} matmul differs from the CPU reference: error {error:.2e} > tolerance {tolerance:.0e}",
            value=error if math.isfinite(error) else None,
            unit="ratio",
            dtype=dtype,
            duration_seconds=duration,
        )

    def _timed_duration(self, seconds_per_op: float) -> float:
        sizes = self.sizes
        repeats = max(1, math.ceil(sizes.min_trial_seconds / max(seconds_per_op, 1e-9)))
        return 0.05 + seconds_per_op * (sizes.warmup + 1 + sizes.trials * repeats)

    def _matmul(self, task: ComputeTask) -> Measurement:
        dtype = task.dtype or "fp32"
        peak = dict(self.profile.peaks).get(dtype)
        if not peak:
            return Measurement(
                Check.MATMUL, CheckStatus.SKIP, "DtypeUnsupported", f"{dtype} is not supported by this GPU", dtype=dtype
            )
        slowdown = math.prod(f.factor for f in self._faults(FaultKind.SLOW_MATMUL))
        tflops = peak * self.profile.matmul_efficiency * self._jitter(task) / slowdown
        n = self.sizes.matmul_n
        duration = self._timed_duration(2.0 * n**3 / (tflops * 1e12))
        return Measurement(
            Check.MATMUL,
            CheckStatus.PASS,
            "Measured",
            f"{dtype} {n}x{n} GEMM: {tflops:.1f} TFLOPS (simulated)",
            value=tflops,
            unit="TFLOPS",
            dtype=dtype,
            duration_seconds=duration,
        )

    def _bandwidth(self, task: ComputeTask) -> Measurement:
        slowdown = math.prod(f.factor for f in self._faults(FaultKind.LOW_BANDWIDTH))
        rate = self.profile.bandwidth_gbps * 1e9 * self.profile.bandwidth_efficiency * self._jitter(task) / slowdown
        nbytes = self.sizes.bandwidth_bytes
        duration = self._timed_duration(2.0 * nbytes / rate)
        return Measurement(
            Check.BANDWIDTH,
            CheckStatus.PASS,
            "Measured",
            f"device-to-device copy of {nbytes / 2**20:.0f} MiB: {rate / 1e9:.0f} GB/s (simulated)",
            value=rate,
            unit="bytes_per_second",
            duration_seconds=duration,
        )
