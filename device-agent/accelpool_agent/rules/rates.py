"""Rates of error counters over a sliding window, as DCGM's health watch judges NVLink errors.

Hardware error counters (NVLink, InfiniBand) only grow, from when the driver loaded or the port
came up; a total says little about now. `CounterWindow` keeps a few samples spanning the last
`window_seconds` and gives each counter's increase per minute between the oldest of them and the
latest reading. The elapsed time counts as at least one minute, so a single error seen over two
seconds reads as 1 per minute, not 30. A counter that went down was reset (driver reload, port
reset) and counts from zero; one that stopped at its maximum (InfiniBand's narrow counters
saturate) shows no increase. Pure data.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

MIN_MINUTES = 1.0
SAMPLES_PER_WINDOW = 10
"""Samples kept per window (one every window/10 seconds), plus the latest reading."""

Sample = tuple[float, Mapping[str, int]]


@dataclass(frozen=True)
class CounterWindow:
    """Samples of monotonic counters (name → value) over the last `window_seconds`. Replaced, never mutated."""

    samples: tuple[Sample, ...] = ()
    latest: Sample | None = None

    def add(self, at: float, values: Mapping[str, int], window_seconds: float) -> CounterWindow:
        kept = [sample for sample in self.samples if at - sample[0] <= window_seconds]
        if not kept or at - kept[-1][0] >= window_seconds / SAMPLES_PER_WINDOW:
            kept.append((at, dict(values)))
        return CounterWindow(tuple(kept), (at, dict(values)))

    def per_minute(self) -> dict[str, float]:
        """Each counter's increase per minute over the window; empty until two readings exist."""
        if not self.samples or self.latest is None:
            return {}
        (start_at, start), (end_at, end) = self.samples[0], self.latest
        if end_at <= start_at:
            return {}
        minutes = max((end_at - start_at) / 60.0, MIN_MINUTES)
        rates: dict[str, float] = {}
        for name, value in end.items():
            first = start.get(name)
            if first is None:
                continue
            increase = value - first if value >= first else value
            rates[name] = increase / minutes
        return rates
