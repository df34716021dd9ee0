"""Runs compute jobs in child processes with a per-check timeout.

`ProcessRunner` spawns one child per job (`multiprocessing` spawn context: a fresh interpreter,
no inherited CUDA state), waits for each task's result at most `timeout_seconds`, and kills the
child when a check overruns: that check is reported as failed with reason `CheckTimeout`, the
ones after it as not run. A child that dies is reported as `ComputeCrashed`. `close` (SIGTERM)
kills every running child at once, and what they did not finish is reported as not run. Blocking calls:
the agent runs them in worker threads. `InlineRunner` runs jobs in-process for fast tests.
"""

from __future__ import annotations

import logging
import multiprocessing
import threading
import time
from typing import Any, Protocol

from accelpool_agent.compute import ComputeJob, ComputeTask
from accelpool_agent.compute.child import child_main, execute, not_run
from accelpool_agent.model import CheckStatus, Measurement

log = logging.getLogger(__name__)


class ComputeRunner(Protocol):
    def run(self, job: ComputeJob, timeout_seconds: float) -> list[Measurement]: ...

    def close(self) -> None:
        """Stop: kill running children at once; later jobs are not run (the agent is exiting)."""


def timed_out(task: ComputeTask, timeout_seconds: float) -> Measurement:
    return Measurement(
        task.check,
        CheckStatus.FAIL,
        "CheckTimeout",
        f"the {task} check did not finish within {timeout_seconds:g} s; its process was killed",
        dtype=task.dtype,
        duration_seconds=timeout_seconds,
    )


def crashed(task: ComputeTask, exitcode: int | None) -> Measurement:
    return Measurement(
        task.check,
        CheckStatus.FAIL,
        "ComputeCrashed",
        f"the compute process died during the {task} check (exit code {exitcode})",
        dtype=task.dtype,
    )


class ProcessRunner:
    """One spawned child per job; every task must answer within the timeout."""

    def __init__(self, *, kill_grace_seconds: float = 5.0) -> None:
        self._context = multiprocessing.get_context("spawn")
        self._kill_grace = kill_grace_seconds
        self._lock = threading.Lock()
        self._live: set[Any] = set()
        self._closed = False

    def close(self) -> None:
        with self._lock:
            self._closed = True
            live = list(self._live)
        for process in live:
            log.info("stopping: killing compute child pid %s", process.pid)
            process.kill()  # its pipe closes: the waiting thread returns at once

    def run(self, job: ComputeJob, timeout_seconds: float) -> list[Measurement]:
        receiver, sender = self._context.Pipe(duplex=False)
        process = self._context.Process(
            target=child_main, args=(job, sender), name=f"accelpool-check-gpu{job.gpu_index}", daemon=True
        )
        results: list[Measurement] = []
        started = time.monotonic()
        with self._lock:
            if self._closed:
                receiver.close()
                sender.close()
                return [not_run(t, "not run: the agent is stopping") for t in job.tasks]
            process.start()
            self._live.add(process)
        sender.close()  # the child holds the only writer: EOF means it died
        try:
            for position, task in enumerate(job.tasks):
                if not receiver.poll(timeout_seconds):
                    log.warning(
                        "GPU %d: %s overran %g s; killing pid %s", job.gpu_index, task, timeout_seconds, process.pid
                    )
                    process.kill()
                    results.append(timed_out(task, timeout_seconds))
                    results.extend(
                        not_run(t, f"not run: the {task} check timed out") for t in job.tasks[position + 1 :]
                    )
                    break
                try:
                    message: Measurement = receiver.recv()
                except EOFError:
                    if self._closed:  # killed because the agent stops: not a verdict on the GPU
                        results.extend(not_run(t, "not run: the agent is stopping") for t in job.tasks[position:])
                        break
                    process.join(self._kill_grace)
                    log.warning("GPU %d: compute child died during %s (exit %s)", job.gpu_index, task, process.exitcode)
                    results.append(crashed(task, process.exitcode))
                    results.extend(not_run(t, f"not run: the {task} check crashed") for t in job.tasks[position + 1 :])
                    break
                results.append(message)
        finally:
            receiver.close()
            process.join(self._kill_grace)
            if process.is_alive():  # finished its tasks but will not exit, or ignored SIGKILL (stuck in the driver)
                process.kill()
                process.join(1.0)
            with self._lock:
                self._live.discard(process)
            log.debug(
                "GPU %d: job %s took %.2f s", job.gpu_index, [str(t) for t in job.tasks], time.monotonic() - started
            )
        return results


class InlineRunner:
    """Runs jobs in the calling process: no isolation, for tests of the fake and CPU engines.

    A `hang` fault is reported as a timeout straight away, a `crash` fault as a crash.
    """

    def close(self) -> None:
        return None

    def run(self, job: ComputeJob, timeout_seconds: float) -> list[Measurement]:
        from accelpool_agent.compute.fake import SimulatedCrash

        results: list[Measurement] = []
        try:
            for measurement in execute(job, in_child=False):
                results.append(measurement)
        except SimulatedCrash as crash:
            task = job.tasks[len(results)]
            results.append(crashed(task, int(crash.args[0]) if crash.args else None))
            results.extend(not_run(t, f"not run: the {task} check crashed") for t in job.tasks[len(results) :])
        except TimeoutError:
            task = job.tasks[len(results)]
            results.append(timed_out(task, timeout_seconds))
            results.extend(not_run(t, f"not run: the {task} check timed out") for t in job.tasks[len(results) :])
        return results
