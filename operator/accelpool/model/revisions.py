"""Name-keyed mappings that know which keys changed since the mapping they were made from.

A pass of the controller reads every node of the cluster, but between two passes only the few that a
watch event or a write touched have changed. A `Revision` is an immutable mapping made from the previous
one by `revised(updates)`; `differing(new, old)` then costs as many steps as keys were updated, not as
many as the mapping holds (10,000 at scale). Compared with any other mapping it compares every key, so a
caller never has to know where a mapping came from: the answer is the same, only its cost differs.
"""

from __future__ import annotations

import weakref
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Generic, TypeVar, overload

_V = TypeVar("_V")
_D = TypeVar("_D")
_MISSING: Any = object()


class Revision(Mapping[str, _V], Generic[_V]):
    """An immutable mapping that remembers the revision it was made from (weakly: older ones may be freed) and
    the keys `revised` updated since."""

    __slots__ = ("__weakref__", "_base", "_changed", "_data")

    def __init__(self, data: Mapping[str, _V] | None = None) -> None:
        self._data: dict[str, _V] = dict(data or {})
        self._base: weakref.ref[Revision[_V]] | None = None
        self._changed: frozenset[str] = frozenset()

    def revised(self, updates: Mapping[str, _V | None]) -> Revision[_V]:
        """This mapping with `updates` applied (a value of None removes the key); itself when none changes it."""
        data = self._data
        changed = [
            key
            for key, value in updates.items()
            if (value is None and key in data) or (value is not None and data.get(key, _MISSING) is not value)
        ]
        if not changed:
            return self
        found: Revision[_V] = Revision()
        found._data = dict(data)
        for key in changed:
            value = updates[key]
            if value is None:
                del found._data[key]
            else:
                found._data[key] = value
        found._base = weakref.ref(self)
        found._changed = frozenset(changed)
        return found

    def made_from(self, other: Mapping[str, Any]) -> bool:
        """Whether `revised` made this mapping from `other` (then only `changed_keys` may differ)."""
        return self._base is not None and self._base() is other

    @property
    def changed_keys(self) -> frozenset[str]:
        """The keys `revised` updated, added or removed when it made this mapping."""
        return self._changed

    def __getitem__(self, key: str) -> _V:
        return self._data[key]

    @overload
    def get(self, key: str, /) -> _V | None: ...
    @overload
    def get(self, key: str, default: _V | _D, /) -> _V | _D: ...
    def get(self, key: str, default: Any = None, /) -> Any:
        return self._data.get(key, default)

    def __contains__(self, key: object) -> bool:
        return key in self._data

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> KeysView[str]:
        return self._data.keys()

    def values(self) -> ValuesView[_V]:
        return self._data.values()

    def items(self) -> ItemsView[str, _V]:
        return self._data.items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Revision):
            return self._data == other._data
        if isinstance(other, Mapping):
            return self._data == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Revision({self._data!r})"


def differing(new: Mapping[str, Any], old: Mapping[str, Any]) -> set[str]:
    """The keys whose values differ between two mappings (present in one only, or neither the same object nor
    equal): in as many steps as keys were updated where `new` was revised from `old`, else in as many as both
    hold."""
    if new is old:
        return set()
    if isinstance(new, Revision) and new.made_from(old):
        keys: Any = new.changed_keys
    elif isinstance(old, Revision) and old.made_from(new):
        keys = old.changed_keys
    else:
        keys = new.keys() | old.keys()
    found = set()
    for key in keys:
        a, b = new.get(key, _MISSING), old.get(key, _MISSING)
        if a is not b and (a is _MISSING or b is _MISSING or a != b):
            found.add(key)
    return found
