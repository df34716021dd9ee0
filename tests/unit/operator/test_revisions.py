"""Name-keyed mappings that know what changed since the one they were made from (`accelpool.model.revisions`)."""

from __future__ import annotations

import asyncio
import gc
import random
from collections.abc import Mapping

import pytest

from accelpool.model.nodes import NodeView
from accelpool.model.revisions import Revision, differing, replaced
from accelpool.runtime.controller import state as state_module
from accelpool.runtime.controller.state import ClusterState
from accelpool.runtime.settings import OperatorConfig

from .conftest import node_body
from .emulated import Cluster


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


def test_replaced_names_equal_values_that_are_other_objects_and_reads_as_little_as_differing() -> None:
    equal_a, equal_b, kept = int("1234567890"), int("1234567890"), int("987654321")  # equal ints, two objects
    assert equal_a == equal_b and equal_a is not equal_b
    base = Revision({"a": equal_a, "k": kept, **{f"n{i}": i for i in range(1000)}})
    revised = base.revised({"a": equal_b, "k": kept, "gone": None, "new": 5})
    assert differing(revised, base) == {"new"}, "an equal value is no difference"
    assert replaced(revised, base) == {"a", "new"}, "but another object: a reader of what equality leaves out sees it"
    assert replaced(base, revised) == {"a", "new"}
    Counted.reads = 0
    plain = Counted(dict(base))
    assert replaced(revised, plain) == {"a", "new"}, "a mapping revised from another: every key looked at"
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


def test_a_line_of_revisions_reads_as_the_dict_it_stands_for_through_every_fold() -> None:
    rng = random.Random(11)
    reference = {f"n{i}": rng.randrange(1000) for i in range(300)}
    current: Revision[int] = Revision(reference)
    kept = [(current, dict(reference))]  # older revisions stay as they were
    for _ in range(400):
        updates: dict[str, int | None] = {}
        for _ in range(rng.randrange(1, 12)):
            name = f"n{rng.randrange(340)}"
            updates[name] = None if rng.random() < 0.3 else rng.randrange(1000)
        current = current.revised(updates)
        for name, value in updates.items():
            if value is None:
                reference.pop(name, None)
            else:
                reference[name] = value
        kept.append((current, dict(reference)))
    for revision, expected in kept[::37] + kept[-3:]:
        assert dict(revision) == expected and revision == expected
        assert len(revision) == len(expected) and sorted(revision) == sorted(expected)
        assert sorted(revision.values()) == sorted(expected.values())
        assert all(name in revision for name in expected) and "n999" not in revision
        assert revision.get("n999", -1) == -1


def test_a_revision_does_not_keep_the_ones_before_it_alive() -> None:
    base = Revision({"a": 1})
    revised = base.revised({"a": 2})
    del base
    gc.collect()
    assert not revised.made_from({"a": 1}), "its base is gone: it was made from nothing alive"
    assert differing(revised, {"a": 1}) == {"a"}


async def test_a_snapshot_revises_the_last_ones_nodes_with_what_changed_since_whoever_read_the_index(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cluster.add_nodes(node_body("n1"), node_body("n2"), node_body("n3"))
    index = Revision({view.name: view for view in cluster.node_views()})
    state = ClusterState(OperatorConfig(), cluster.client, asyncio.get_running_loop().time)
    state.bind(nodes=lambda: index, pools=lambda: ())
    first = (await state.snapshot()).nodes
    assert set(first) == {"n1", "n2", "n3"}

    along_a_line: list[bool] = []  # each comparison of the nodes: of a revision with the one it was made from?

    def spied(new: Mapping[str, object], old: Mapping[str, object]) -> set[str]:
        along_a_line.append(isinstance(new, Revision) and new.made_from(old))
        return differing(new, old)

    monkeypatch.setattr(state_module, "differing", spied)
    relabelled = NodeView.from_body(node_body("n1", labels={"example.com/rack": "r7"}))
    index = index.revised({"n1": relabelled})
    assert state.indexed_nodes() is index  # a writer read the index between two snapshots
    index = index.revised({"n2": None})
    second = (await state.snapshot()).nodes

    assert isinstance(second, Revision) and second.made_from(first)
    assert second.changed_keys == {"n1", "n2"}, "both changes, though the index was read in between"
    assert dict(second) == {"n1": relabelled, "n3": first["n3"]}
    assert differing(second, first) == {"n1", "n2"}
    assert along_a_line and all(along_a_line), "no comparison fell back to comparing every node"
