"""Compute checks (sanity, correctness, matmul, bandwidth) and how they run in a child process.

A `ComputeJob` is the picklable description the agent hands to a child process (spawned, so no
CUDA state is ever inherited): which engine (`cuda`, `cpu` or `fake`), which device, which
tasks in which order, and the sizes. The child (`compute.child`) answers with one
`Measurement` per task; the parent (`compute.runner`) enforces a per-check timeout and kills a
child that hangs. The agent process itself never creates a CUDA context.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from accelpool_agent.faults import Fault
from accelpool_agent.model import Check


@dataclass(frozen=True)
class ComputeTask:
    check: Check
    dtype: str | None = None

    def __str__(self) -> str:
        return f"{self.check.value}[{self.dtype}]" if self.dtype else self.check.value


@dataclass(frozen=True)
class ComputeSizes:
    """Problem sizes: large on a GPU (so a GEMM runs at full speed), small on the CPU."""

    matmul_n: int = 8192
    correctness_n: int = 512
    bandwidth_bytes: int = 1 << 30
    trials: int = 5
    warmup: int = 3
    min_trial_seconds: float = 0.05

    @classmethod
    def for_engine(cls, engine: str) -> ComputeSizes:
        if engine == "cpu":
            return cls(
                matmul_n=512,
                correctness_n=128,
                bandwidth_bytes=64 << 20,
                trials=3,
                warmup=1,
                min_trial_seconds=0.02,
            )
        return cls()


@dataclass(frozen=True)
class FakeProfile:
    """What a simulated GPU would measure: the catalog peaks, a realistic fraction, its faults."""

    index: int
    peaks: tuple[tuple[str, float], ...]
    """Dense peak TFLOPS per dtype (dtypes without a peak are unsupported)."""
    bandwidth_gbps: float
    faults: tuple[Fault, ...] = ()
    seed: int = 0
    matmul_efficiency: float = 0.8
    """Large GEMMs reach ~75-87% of dense peak on SXM parts (hardware.md)."""
    bandwidth_efficiency: float = 0.88
    """Device-to-device copies reach ~83-90% of spec bandwidth on HBM GPUs (hardware.md)."""


@dataclass(frozen=True)
class ComputeJob:
    """Everything a compute child needs; plain data so it pickles across `spawn`."""

    engine: str
    """`cuda`, `cpu` or `fake`."""
    gpu_index: int
    tasks: tuple[ComputeTask, ...]
    sizes: ComputeSizes = ComputeSizes()
    seed: int = 0
    visible_device: str | None = None
    """CUDA_VISIBLE_DEVICES for the child: the GPU's (or MIG device's) UUID, so ordering never matters."""
    tf32: bool = False
    """Set CUPY_TF32=1 in the child before its first GEMM (CuPy caches the compute type per dtype)."""
    fake: FakeProfile | None = None


def split_for_tf32(job: ComputeJob) -> list[ComputeJob]:
    """On CUDA, TF32 tasks run in a child of their own: CUPY_TF32 applies to every fp32 GEMM of a process."""
    if job.engine != "cuda":
        return [job]
    plain = tuple(task for task in job.tasks if task.dtype != "tf32")
    tf32 = tuple(task for task in job.tasks if task.dtype == "tf32")
    jobs = []
    if plain:
        jobs.append(replace(job, tasks=plain, tf32=False))
    if tf32:
        jobs.append(replace(job, tasks=tf32, tf32=True))
    return jobs
