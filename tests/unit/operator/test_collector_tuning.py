"""The operator process's garbage collector settings (`accelpool.runtime.collector_tuning`)."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from accelpool.runtime import collector_tuning


@pytest.fixture
def restored() -> Iterator[None]:
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("restored")
def test_what_start_up_made_is_frozen_and_a_full_collection_waits_for_millions_of_allocations() -> None:
    survivor = [object() for _ in range(10)]
    collector_tuning.tune()
    assert gc.get_freeze_count() >= len(survivor), "start-up's objects are never scanned again"
    young, middle, full = gc.get_threshold()
    assert young * middle * full >= 10_000_000, "a full collection after ten million allocations, not 70,000"

    cycle: list[object] = []
    cycle.append(cycle)
    del cycle
    assert gc.collect() >= 1, "cyclic garbage made after start-up is still collected"
