"""Where a stored ComputePool stands, for `wait_until_ready`: ready, failed, or on its way, in one line.

A pool is ready when the operator's status says `Ready` for the spec now stored (its
`observedGeneration` is the object's `metadata.generation`: a Ready written for the previous spec does
not count), and failed when it says `Failed` for that spec (an invalid spec: waiting cannot help).

The status is read as the operator reads its own (`accelpool_api.read_status`): the fields this version
knows, so a newer operator's additions do not break an older client.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import accelpool_api as api

Stage = Literal["ready", "failed", "waiting"]


@dataclass(frozen=True)
class Progress:
    """One look at a pool while waiting: `wait_until_ready`'s progress callback gets one per change."""

    name: str
    stage: Stage
    status: api.ComputePoolStatus | None
    summary: str
    """E.g. `Configuring, nodes 2/2 (0 ready), 0 devices serving: MIG pending on 2`."""


ProgressCallback = Callable[[Progress], None]


def judge(obj: Mapping[str, Any]) -> Progress:
    """Where the stored pool `obj` stands."""
    metadata = obj.get("metadata") or {}
    name = str(metadata.get("name", "?"))
    status = api.read_status(obj.get("status"))
    if status is None:
        return Progress(name, "waiting", None, "no status yet (is the operator running?)")
    current = status.observed_generation is not None and status.observed_generation >= (metadata.get("generation") or 0)
    summary = describe(status) if current else f"{describe(status)} (for an earlier spec)"
    if current and status.phase == "Ready":
        return Progress(name, "ready", status, summary)
    if current and status.phase == "Failed":
        return Progress(name, "failed", status, summary)
    return Progress(name, "waiting", status, summary)


def describe(status: api.ComputePoolStatus) -> str:
    """The phase, the nodes and what serves, and why it is not Ready (the Ready condition's message)."""
    nodes = status.nodes
    line = f"{status.phase}, nodes {nodes.summary} ({nodes.ready} ready), {status.capacity.gpus} devices serving"
    ready = next((c for c in status.conditions if c.type == "Ready"), None)
    if ready is not None and ready.status != "True" and ready.message:
        line += f": {ready.message}"
    elif status.phase == "Failed":
        invalid = next((c for c in status.conditions if c.type == "Valid" and c.status == "False"), None)
        if invalid is not None:
            line += f": {invalid.message}"
    return line


def printer(progress: Progress) -> None:
    """The default progress callback: one line per change."""
    print(f"ComputePool {progress.name}: {progress.summary}", flush=True)
