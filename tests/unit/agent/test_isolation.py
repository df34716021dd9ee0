"""Compute checks run in spawned child processes: a hung check is killed at its timeout, a dying
child is reported, and results are the same as in-process."""

from __future__ import annotations

import time

import pytest

from accelpool_agent.compute import ComputeJob, ComputeSizes, ComputeTask, FakeProfile, split_for_tf32
from accelpool_agent.compute.runner import InlineRunner, ProcessRunner
from accelpool_agent.faults import parse_fault_spec
from accelpool_agent.model import Check, CheckStatus

TASKS = (
    ComputeTask(Check.SANITY),
    ComputeTask(Check.CORRECTNESS, "fp32"),
    ComputeTask(Check.MATMUL, "bf16"),
    ComputeTask(Check.BANDWIDTH),
)


def fake_job(*faults: str) -> ComputeJob:
    parsed = tuple(f for text in faults for f in parse_fault_spec(f"0:{text}").faults)
    profile = FakeProfile(index=0, peaks=(("bf16", 989.0),), bandwidth_gbps=3350, faults=parsed)
    return ComputeJob(engine="fake", gpu_index=0, tasks=TASKS, sizes=ComputeSizes(), fake=profile)


def test_hung_check_is_killed_at_its_timeout() -> None:
    started = time.monotonic()
    results = ProcessRunner(kill_grace_seconds=2).run(fake_job("hang"), timeout_seconds=1.5)
    elapsed = time.monotonic() - started
    assert [(r.check, r.status, r.reason) for r in results] == [
        (Check.SANITY, CheckStatus.FAIL, "CheckTimeout"),
        (Check.CORRECTNESS, CheckStatus.SKIP, "NotRun"),
        (Check.MATMUL, CheckStatus.SKIP, "NotRun"),
        (Check.BANDWIDTH, CheckStatus.SKIP, "NotRun"),
    ]
    assert "did not finish within 1.5 s" in results[0].message
    assert elapsed >= 1.5, "killed at its timeout, not before"  # a hang past it: pytest-timeout's to catch


def test_dead_child_is_reported() -> None:
    results = ProcessRunner().run(fake_job("crash"), timeout_seconds=30)
    assert (results[0].status, results[0].reason) == (CheckStatus.FAIL, "ComputeCrashed")
    assert "exit code 70" in results[0].message
    assert all(r.reason == "NotRun" for r in results[1:])


def test_child_results_equal_inline_results() -> None:
    job = fake_job("slow-matmul=2")
    in_child = ProcessRunner().run(job, timeout_seconds=30)
    in_process = InlineRunner().run(job, timeout_seconds=30)
    assert in_child == in_process
    assert [r.status for r in in_child] == [CheckStatus.PASS] * 4
    matmul = in_child[2]
    assert matmul.value is not None and abs(matmul.value - 989 * 0.8 / 2) < 989 * 0.8 / 2 * 0.02


def test_cpu_engine_runs_in_a_child() -> None:
    sizes = ComputeSizes(matmul_n=64, correctness_n=32, bandwidth_bytes=1 << 20, trials=1, warmup=1)
    job = ComputeJob(engine="cpu", gpu_index=0, tasks=TASKS[:2], sizes=sizes)
    results = ProcessRunner().run(job, timeout_seconds=60)
    assert [(r.status, r.reason) for r in results] == [
        (CheckStatus.PASS, "SanityPassed"),
        (CheckStatus.PASS, "ResultsCorrect"),
    ]


def test_tf32_runs_in_its_own_cuda_child() -> None:
    tasks = (ComputeTask(Check.SANITY), ComputeTask(Check.MATMUL, "tf32"), ComputeTask(Check.MATMUL, "bf16"))
    plain, tf32 = split_for_tf32(ComputeJob(engine="cuda", gpu_index=0, tasks=tasks))
    assert (plain.tf32, [str(t) for t in plain.tasks]) == (False, ["sanity", "matmul[bf16]"])
    assert (tf32.tf32, [str(t) for t in tf32.tasks]) == (True, ["matmul[tf32]"])
    assert split_for_tf32(ComputeJob(engine="fake", gpu_index=0, tasks=tasks))[0].tasks == tasks


def test_missing_cupy_skips_instead_of_failing() -> None:
    """Without CuPy (this machine) a cuda job reports CudaUnavailable, not a broken GPU."""
    import importlib.util

    if importlib.util.find_spec("cupy") is not None:
        pytest.skip("CuPy is installed here: tests/gpu covers the real engine")
    results = InlineRunner().run(ComputeJob(engine="cuda", gpu_index=0, tasks=TASKS, visible_device="GPU-x"), 10)
    assert {(r.status, r.reason) for r in results} == {(CheckStatus.SKIP, "CudaUnavailable")}
