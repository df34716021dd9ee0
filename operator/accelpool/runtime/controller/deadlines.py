"""Every time-based reason for a controller pass, by name, and the one rule for the next wake-up.

The loop sleeps until a nudge or the earliest deadline (`next`). A deadline is either set by the
controller when it decides it (`set`: the plan's requeue, a failed pass's retry) or computed on
demand by the part that owns the clock it depends on (`watch`: the cluster state's resync, agent
check and stale health; the status writer's due statuses and status check), so that nothing copies
another part's "last done at".
"""

from __future__ import annotations

from collections.abc import Callable


class Deadlines:
    """Named deadlines on the controller's clock (seconds, as `loop.time()`)."""

    def __init__(self) -> None:
        self._set: dict[str, float] = {}
        self._watched: dict[str, Callable[[], float | None]] = {}

    def set(self, reason: str, at: float | None) -> None:
        """`reason` falls due at `at` (None: not at all)."""
        if at is None:
            self._set.pop(reason, None)
        else:
            self._set[reason] = at

    def at(self, reason: str) -> float | None:
        """When `reason` falls due (None: not set, or its source says none)."""
        if reason in self._watched:
            return self._watched[reason]()
        return self._set.get(reason)

    def watch(self, reason: str, source: Callable[[], float | None]) -> None:
        """`reason` falls due when `source()` says, asked at every wake-up."""
        self._watched[reason] = source

    def next(self) -> tuple[float, str] | None:
        """The earliest deadline and its reason (None: nothing is due at any time)."""
        due = [(at, reason) for reason, at in self._set.items()]
        due += [(at, reason) for reason, source in self._watched.items() if (at := source()) is not None]
        return min(due, default=None)
