"""What the agent shows: an immutable `AgentSnapshot` that /metrics, the daemon and the CLI read.

The agent replaces its snapshot (never mutates it) on the event loop, after every telemetry
tick, compute cycle and report; a reader on any thread holds one consistent snapshot for as
long as it needs it. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from accelpool_agent.model import NodeReport


@dataclass(frozen=True)
class ReportStats:
    """What the node reporter did (for the agent's own metrics)."""

    writes: dict[str, int] = field(default_factory=dict)
    errors: int = 0


@dataclass(frozen=True)
class AgentSnapshot:
    """Everything /metrics shows, as of the last tick or cycle. Replaced, never mutated."""

    node: str
    pool: str | None
    backend: str
    backend_error: str | None
    report: NodeReport | None
    started_at: float
    ticks_total: int = 0
    cycles_total: int = 0
    last_cycle_at: float | None = None
    last_cycle_duration_seconds: float | None = None
    compute_running: bool = False
    report_stats: ReportStats = ReportStats()
