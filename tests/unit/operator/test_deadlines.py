"""The controller's deadlines: set ones and watched ones, and the earliest of them all is the next wake-up."""

from __future__ import annotations

from accelpool.runtime.controller.deadlines import Deadlines


def test_the_next_wake_up_is_the_earliest_set_or_watched_deadline_with_its_reason() -> None:
    deadlines = Deadlines()
    assert deadlines.next() is None
    resync: list[float | None] = [None]
    deadlines.watch("resync", lambda: resync[0])
    deadlines.set("requeue", 30.0)
    assert deadlines.next() == (30.0, "requeue")
    resync[0] = 12.0  # asked at every wake-up: the owner's clock, not a copy of it
    assert deadlines.next() == (12.0, "resync")
    assert deadlines.at("resync") == 12.0


def test_a_deadline_set_to_none_is_gone() -> None:
    deadlines = Deadlines()
    deadlines.set("retry", 5.0)
    deadlines.set("retry", None)
    assert deadlines.at("retry") is None and deadlines.next() is None
    deadlines.watch("status due", lambda: None)
    assert deadlines.next() is None
