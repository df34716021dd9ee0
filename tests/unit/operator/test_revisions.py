"""Name-keyed mappings that know what changed since the one they were made from (`accelpool.model.revisions`)."""

from __future__ import annotations

import gc
import random

from accelpool.model.revisions import Revision, differing


class Counted(dict[str, int]):
    """A plain mapping that counts the keys read from it."""

    reads = 0

    def get(self, key: str, default: object = None) -> object:  # type: ignore[override]
        Counted.reads += 1
        return super().get(key, default)


def test_a_revision_applies_updates_and_removals_and_leaves_its_base_as_it_was() -> None:
    base = Revision({"a": 1, "b": 2})
    revised = base.revised({"a": 10, "b": None, "c": 3})
    assert dict(revised) == {"a": 10, "c": 3} and dict(base) == {"a": 1, "b": 2}
    assert revised.made_from(base) and not base.made_from(revised)
    assert revised.changed_keys == {"a", "b", "c"}
    assert revised == {"a": 10, "c": 3} and revised != base


def test_updates_that_change_nothing_give_the_same_revision() -> None:
    value = object()
    base: Revision[object] = Revision({"a": value})
    assert base.revised({"a": value, "gone": None}) is base
    assert base.revised({}) is base


def test_differing_reads_only_the_updated_keys_of_a_revision_and_every_key_otherwise() -> None:
    base = Revision({f"n{i}": i for i in range(1000)})
    revised = base.revised({"n1": 1, "n2": 20, "n3": None, "new": 5})  # n1 as it was: not changed
    assert differing(revised, base) == {"n2", "n3", "new"}
    assert differing(base, revised) == {"n2", "n3", "new"}, "either way round"
    Counted.reads = 0
    plain = Counted(dict(base))
    assert differing(revised, plain) == {"n2", "n3", "new"}, "a mapping revised from another: every key compared"
    assert Counted.reads >= 1000


def test_differing_agrees_with_a_full_comparison_over_random_revisions() -> None:
    rng = random.Random(7)
    current: Revision[int] = Revision({f"n{i}": rng.randrange(5) for i in range(200)})
    for _ in range(200):
        updates: dict[str, int | None] = {}
        for _ in range(rng.randrange(6)):
            name = f"n{rng.randrange(220)}"
            updates[name] = None if rng.random() < 0.2 else rng.randrange(5)
        revised = current.revised(updates)
        full = {k for k in dict(current).keys() | dict(revised).keys() if dict(current).get(k) != dict(revised).get(k)}
        assert differing(revised, current) == full
        current = revised


def test_a_revision_does_not_keep_the_ones_before_it_alive() -> None:
    base = Revision({"a": 1})
    revised = base.revised({"a": 2})
    del base
    gc.collect()
    assert not revised.made_from({"a": 1}), "its base is gone: it was made from nothing alive"
    assert differing(revised, {"a": 1}) == {"a"}
