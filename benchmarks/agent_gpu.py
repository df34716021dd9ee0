"""The device agent's compute checks on a real NVIDIA GPU, beside torch doing the same work.

Needs an NVIDIA GPU and driver, CuPy (the agent's `cuda` extra) and torch. Run on a GPU node with
`make bench-gpu` (it installs them, then runs `benchmarks/run.py --only agent_gpu`); `make bench`
leaves it out, so a machine without a GPU never overwrites what a GPU measured.

Each round runs, one after the other on an idle GPU:

- the agent's whole check cycle, as `accelpool-agent check` runs it (`Agent.full_cycle`: NVML
  telemetry, then the compute checks in spawned CuPy children, then telemetry again), timed
  wall to wall; its matmul TFLOPS per dtype and its copy bandwidth come from the cycle's report;
- torch doing the same work: the same job (`Agent.cycle_job`: tasks, sizes and seed), through the
  same check code (`accelpool_agent.compute.kernels`) with torch as the array library, in a
  spawned process per GPU, timed from the spawn (importing torch and creating its context
  included, as the agent's children import CuPy and create theirs). Its matmuls are
  `torch.matmul(a, b, out=c)` timed by CUDA events, median of the same trials; its copy is
  `Tensor.copy_`.

Several rounds alternate the two; each number is the median over rounds. Targets (DESIGN.md):
each dtype's TFLOPS ≥ 90% of torch.matmul's, bf16 ≥ 75% of the dense peak on H100/H200 SXM, a
full cycle of 8 GPUs ≤ 60 s.
"""

from __future__ import annotations

import argparse
import asyncio
import faulthandler
import importlib
import importlib.metadata
import os
import statistics
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from multiprocessing import get_context
from typing import Any

import numpy as np

from accelpool_agent.agent import Agent
from accelpool_agent.backends.nvml import NvmlBackend
from accelpool_agent.compute import ComputeJob, kernels
from accelpool_agent.compute.runner import ProcessRunner
from accelpool_agent.config import AgentSettings
from accelpool_agent.model import Check, CheckStatus, Measurement
from accelpool_agent.model.reports import NodeReport
from accelpool_core import catalog
from accelpool_core.protocol import AgentConfig
from report import print_results

CYCLE_TARGET_SECONDS = 60.0
"""DESIGN.md: one full check cycle of an 8-GPU node within 60 s."""


class TorchEngine:
    """The compute checks' array engine (`kernels.ArrayEngine`) with torch on the child's one GPU."""

    def __init__(self, *, tf32: bool) -> None:
        torch: Any = importlib.import_module("torch")
        torch.set_default_device("cuda")
        matmul = torch.backends.cuda.matmul
        if hasattr(matmul, "fp32_precision"):  # torch ≥ 2.9 refuses a mix of this and allow_tf32
            matmul.fp32_precision = "tf32" if tf32 else "ieee"
        else:
            matmul.allow_tf32 = tf32
        self.xp: Any = torch
        self._torch: Any = torch
        self._capability = torch.cuda.get_device_capability(0)
        self._tf32 = tf32
        self.name = f"torch:{torch.cuda.get_device_name(0)}"

    def unsupported(self, dtype: str) -> str | None:
        if dtype in ("tf32", "bf16") and self._capability < (8, 0):
            return f"{dtype} needs compute capability 8.0+"
        if dtype == "tf32" and not self._tf32:
            return "tf32 runs with allow_tf32 set"
        return None

    def host_dtype(self, dtype: str) -> Any:
        import ml_dtypes

        return {"fp32": np.float32, "tf32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}[dtype]

    def _dtype(self, dtype: str) -> Any:
        torch = self._torch
        return {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]

    def asarray(self, host: np.ndarray[Any, Any]) -> Any:
        torch = self._torch
        if host.dtype.name == "bfloat16":  # torch reads no ml_dtypes array: move the bits
            return torch.from_numpy(np.ascontiguousarray(host).view(np.int16)).cuda().view(torch.bfloat16)
        return torch.from_numpy(np.ascontiguousarray(host)).cuda()

    def to_host(self, array: Any) -> np.ndarray[Any, Any]:
        torch = self._torch
        if array.dtype == torch.bfloat16:
            import ml_dtypes

            bits: np.ndarray[Any, Any] = array.view(torch.int16).cpu().numpy()
            return bits.view(ml_dtypes.bfloat16)
        host: np.ndarray[Any, Any] = array.cpu().numpy()
        return host

    def random(self, shape: tuple[int, ...], dtype: str, seed: int) -> Any:
        torch = self._torch
        generator = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(shape, generator=generator, dtype=torch.float32).to(self._dtype(dtype))

    def time(self, fn: Callable[[], object], repeats: int) -> float:
        cuda = self._torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        for _ in range(repeats):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) / 1000.0

    def copy(self, dst: Any, src: Any) -> None:
        dst.copy_(src)

    def verify_dtype_mode(self, dtype: str) -> str | None:
        return None

    def release(self) -> None:
        self._torch.cuda.synchronize()
        self._torch.cuda.empty_cache()

    def error_reason(self, error: BaseException) -> str:
        return "OutOfMemory" if isinstance(error, self._torch.cuda.OutOfMemoryError) else "CudaError"


def torch_checks(job: ComputeJob) -> list[Measurement]:
    """In a spawned process: the job's tasks with torch, the tf32 ones after the others (as the agent splits them)."""
    if job.visible_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = job.visible_device
    measurements = []
    for tf32 in (False, True):
        tasks = [task for task in job.tasks if (task.dtype == "tf32") == tf32]
        if tasks:
            engine = TorchEngine(tf32=tf32)
            measurements += [kernels.run_task(engine, task, job.sizes, job.seed) for task in tasks]
    return measurements


def torch_cycle(jobs: list[ComputeJob]) -> tuple[float, list[list[Measurement]]]:
    """Wall seconds from spawning one torch process per GPU to the last one's measurements, and those."""
    started = time.perf_counter()
    with ProcessPoolExecutor(max_workers=len(jobs), mp_context=get_context("spawn")) as pool:
        measured = list(pool.map(torch_checks, jobs))
    return time.perf_counter() - started, measured


def agent_cycle(agent: Agent) -> tuple[float, NodeReport]:
    started = time.perf_counter()
    report = asyncio.run(agent.full_cycle())
    return time.perf_counter() - started, report


def _passed(measurements: list[Measurement], check: Check, dtype: str | None = None) -> float:
    for m in measurements:
        if m.check is check and m.dtype == dtype:
            if m.status is not CheckStatus.PASS or m.value is None:
                raise SystemExit(f"torch {check.value}[{dtype}] did not pass: {m.reason}: {m.message}")
            return m.value
    raise SystemExit(f"torch ran no {check.value}[{dtype}]")


def _version(distribution: str) -> str:
    for name in (distribution, f"{distribution}-cuda13x", f"{distribution}-cuda12x"):
        try:
            return f"{name} {importlib.metadata.version(name)}"
        except importlib.metadata.PackageNotFoundError:
            continue
    return f"{distribution} (version unknown)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    faulthandler.enable()  # a crash in a driver's library says where

    backend = NvmlBackend()
    settings = AgentSettings(node_name="benchmark", backend="nvml")
    agent = Agent(backend, AgentConfig(check_timeout_seconds=300), settings, ProcessRunner())
    agent.open()
    try:
        devices = backend.inventory()
        if not devices:
            raise SystemExit(f"no NVIDIA GPU answers NVML here ({backend.error or 'no device'})")
        jobs = [job for device in devices if (job := agent.cycle_job(device)) is not None]
        agent_walls, torch_walls, cycle_durations = [], [], []
        agent_tflops: dict[str, list[float]] = {}
        torch_tflops: dict[str, list[float]] = {}
        agent_bandwidth, torch_bandwidth = [], []
        report: NodeReport | None = None
        for _ in range(args.rounds):
            wall, report = agent_cycle(agent)
            agent_walls.append(wall)
            cycle_durations.append(report.cycle_duration_seconds or 0.0)
            gpu = report.gpus[0]
            failed = [c for c in gpu.checks if c.status is CheckStatus.FAIL and c.check.is_compute]
            if failed or not gpu.matmul_tflops:
                raise SystemExit(
                    f"the agent's cycle did not pass on {gpu.device.name}: {report.reason} {report.message}"
                )
            for dtype, value in gpu.matmul_tflops.items():
                agent_tflops.setdefault(dtype, []).append(value)
            agent_bandwidth.append(gpu.bandwidth_bytes_per_second or 0.0)

            wall, measured = torch_cycle(jobs)
            torch_walls.append(wall)
            for dtype in gpu.matmul_tflops:
                torch_tflops.setdefault(dtype, []).append(_passed(measured[0], Check.MATMUL, dtype))
            torch_bandwidth.append(_passed(measured[0], Check.BANDWIDTH))
    finally:
        agent.close()
    assert report is not None
    device = devices[0]
    card = f"{device.name} (driver {report.driver_version}, CUDA {report.cuda_version})"
    versions = f"{_version('cupy')}, {_version('torch')}"
    median = statistics.median
    rounds = f"median of {args.rounds} rounds"
    n = agent.sizes.matmul_n
    results: list[dict[str, Any]] = []
    for dtype in sorted(agent_tflops, key=["fp32", "tf32", "fp16", "bf16"].index):
        ours, theirs = median(agent_tflops[dtype]), median(torch_tflops[dtype])
        results.append(
            {
                "what": f"{dtype} matmul {n}³: agent / torch.matmul",
                "value": round(ours / theirs, 3),
                "unit": "ratio",
                "target": "≥ 0.9",
                "met": ours >= 0.9 * theirs,
                "note": f"{dtype}: agent {ours:.1f} TFLOPS, torch.matmul {theirs:.1f} TFLOPS on {card}, {rounds}",
            }
        )
    try:
        accelerator: catalog.Accelerator | None = catalog.lookup(device.model or device.name)
    except catalog.UnknownAcceleratorError:
        accelerator = None
    if accelerator is not None and "bf16" in agent_tflops:
        peak = accelerator.peaks.get("bf16")
        sxm = accelerator.model in ("H100", "H200") and accelerator.form_factor is catalog.FormFactor.SXM
        if peak:
            share = median(agent_tflops["bf16"]) / peak
            results.append(
                {
                    "what": f"bf16 matmul / {accelerator.name}'s dense bf16 peak",
                    "value": round(share, 3),
                    "unit": "ratio",
                    "target": "≥ 0.75 (H100/H200 SXM)" if sxm else "- (H100/H200 SXM only)",
                    "met": share >= 0.75 if sxm else None,
                    "note": f"bf16 peak {peak:g} TFLOPS dense, from the catalog",
                }
            )
    ours, theirs = median(agent_bandwidth), median(torch_bandwidth)
    spec = (
        f"; {ours / 1e9 / accelerator.bandwidth_gbps:.0%} of the {accelerator.bandwidth_gbps:g} GB/s spec"
        if accelerator
        else ""
    )
    results.append(
        {
            "what": f"copy bandwidth {agent.sizes.bandwidth_bytes >> 20} MiB: agent / torch copy_",
            "value": round(ours / theirs, 3),
            "unit": "ratio",
            "target": "-",
            "met": None,
            "note": f"agent {ours / 1e9:.0f} GB/s, torch {theirs / 1e9:.0f} GB/s (read + write){spec}, {rounds}",
        }
    )
    ours, theirs = median(agent_walls), median(torch_walls)
    results.append(
        {
            "what": f"full check cycle, {len(devices)} GPU(s): agent / torch, same checks",
            "value": round(ours / theirs, 3),
            "unit": "ratio",
            "target": "-",
            "met": None,
            "note": (
                f"agent {ours:.1f} s wall (its compute cycle {median(cycle_durations):.1f} s), torch {theirs:.1f} s "
                f"from spawn (import and context included), {rounds}; {versions}"
            ),
        }
    )
    results.append(
        {
            "what": f"full check cycle, {len(devices)} GPU(s)",
            "value": round(ours, 2),
            "unit": "s",
            "target": f"≤ {CYCLE_TARGET_SECONDS:g} s (8 GPUs)",
            "met": ours <= CYCLE_TARGET_SECONDS,
            "note": f"{len(devices)} GPU(s) here; the agent checks up to {settings.parallelism} GPUs side by side",
        }
    )
    print_results(f"The device agent on a GPU: {device.name}", results, as_json=args.json)


if __name__ == "__main__":
    main()
