"""The operator process's garbage collector, set for a large heap that lives as long as the process.

At 10,000 nodes the informer's views, the plan and its memo are about half a million objects the
collector tracks. With CPython's default thresholds (700, 10, 10) a health storm made a full
collection every 2 to 3 seconds, each 0.4 to 0.5 s long and freeing next to nothing: what the
operator drops is acyclic and freed at once by reference counting. `tune` freezes what start-up
made (modules, classes, schemas: never garbage) and raises the thresholds so that a full
collection comes after about twenty million allocations instead of a hundred thousand; cyclic garbage
still goes, later. Design notes: docs/design/performance.md.
"""

from __future__ import annotations

import gc

THRESHOLDS = (10_000, 20, 100)
"""Allocations before a young collection; young collections before a middle one; middle before a full one."""


def tune() -> None:
    """Freeze what exists now and raise the collector's thresholds (call once, before the operator starts)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)
