"""The SDK's errors: a spec the API would refuse, and a pool that did not become Ready.

`InvalidSpecError` carries the same `accelpool_api.Problem`s `accelpool validate` and the API server
report (field path, bad value, what would be valid), prefixed with the Python call that made them.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence

import accelpool_api as api
from accelpool_api.validation import listed


class InvalidSpecError(ValueError):
    """What the Python call asked for is not a valid ComputePool: `problems` say where and why."""

    def __init__(self, where: str, problems: Sequence[api.Problem]) -> None:
        self.where = where
        self.problems = tuple(problems)
        super().__init__(f"{where}: {listed([str(p) for p in self.problems])}")


class PoolNotReadyError(TimeoutError):
    """`wait_until_ready` ran out of time; `status` is the last the operator wrote (None: none yet)."""

    def __init__(self, name: str, timeout: float, summary: str, status: api.ComputePoolStatus | None) -> None:
        self.name = name
        self.status = status
        super().__init__(f"ComputePool {name} not Ready after {timeout:g}s: {summary}")


class PoolFailedError(RuntimeError):
    """The operator reports the pool Failed (its spec is invalid on this cluster): waiting cannot help."""

    def __init__(self, name: str, summary: str, status: api.ComputePoolStatus) -> None:
        self.name = name
        self.status = status
        super().__init__(f"ComputePool {name} Failed: {summary}")


class PoolGoneError(LookupError):
    """The pool does not exist (never applied, or deleted while waiting)."""
