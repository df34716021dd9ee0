"""The body of a compute child process: set up the device, run the tasks, report each result.

`child_main` is the `multiprocessing` target (spawn start method). It sets CUDA_VISIBLE_DEVICES
and CUPY_TF32 *before* anything imports CuPy, then sends one `Measurement` per task through the
pipe as soon as it is known, so the parent can time each check separately. When sanity fails,
the remaining tasks are reported as not run. Everything the child allocated dies with it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

from accelpool_agent.compute import ComputeJob, ComputeTask
from accelpool_agent.model import Check, CheckStatus, Measurement


def not_run(task: ComputeTask, why: str, reason: str = "NotRun") -> Measurement:
    return Measurement(task.check, CheckStatus.SKIP, reason, why, dtype=task.dtype)


def child_main(job: ComputeJob, conn: Connection) -> None:
    """Entry point of the spawned child."""
    try:
        for measurement in execute(job):
            conn.send(measurement)
    finally:
        conn.close()


def execute(job: ComputeJob, *, in_child: bool = True) -> Iterator[Measurement]:
    """Run the job's tasks in order, yielding one measurement per task."""
    if job.engine == "fake":
        yield from _execute_fake(job, in_child=in_child)
        return
    if job.visible_device is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = job.visible_device
    if job.tf32:
        os.environ["CUPY_TF32"] = "1"  # before the first GEMM: CuPy caches the compute type
    from accelpool_agent.compute import kernels

    try:
        engine = _make_engine(job)
    except Exception as error:
        from accelpool_agent.compute.engines import cuda_error_reason

        reason = cuda_error_reason(error)
        text = f"{job.engine} engine unavailable: {type(error).__name__}: {error}"[:500]
        for position, task in enumerate(job.tasks):
            if reason == "CudaUnavailable":
                yield not_run(task, text, reason)
            elif position == 0:
                yield Measurement(task.check, CheckStatus.FAIL, reason, text, dtype=task.dtype)
            else:
                yield not_run(task, f"not run: {job.tasks[0]} failed")
        return
    yield from _run_all(job, lambda task: kernels.run_task(engine, task, job.sizes, job.seed))


def _make_engine(job: ComputeJob) -> Any:
    from accelpool_agent.compute import engines

    if job.engine == "cpu":
        return engines.NumpyEngine()
    if job.engine == "cuda":
        return engines.CupyEngine(tf32=job.tf32)
    raise ValueError(f"unknown compute engine {job.engine!r}")


def _execute_fake(job: ComputeJob, *, in_child: bool) -> Iterator[Measurement]:
    from accelpool_agent.compute.fake import FakeEngine

    if job.fake is None:
        raise ValueError("a fake compute job needs a FakeProfile")
    engine = FakeEngine(job.fake, job.sizes, in_child=in_child)
    yield from _run_all(job, lambda task: engine.run(task, job.seed))


def _run_all(job: ComputeJob, run: Any) -> Iterator[Measurement]:
    for position, task in enumerate(job.tasks):
        measurement: Measurement = run(task)
        yield measurement
        if task.check is Check.SANITY and measurement.status is CheckStatus.FAIL:
            for later in job.tasks[position + 1 :]:
                yield not_run(later, "not run: the sanity check failed")
            return
