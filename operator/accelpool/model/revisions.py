"""Name-keyed mappings that know which keys changed since the mapping they were made from.

A pass of the controller reads every node of the cluster, but between two passes only the few that a
watch event or a write touched have changed. A `Revision` is an immutable mapping made from the previous
one by `revised(updates)`; `differing(new, old)` then costs as many steps as keys were updated, not as
many as the mapping holds (10,000 at scale). Compared with any other mapping it compares every key, so a
caller never has to know where a mapping came from: the answer is the same, only its cost differs.

Making a revision does not copy the mapping either: revisions share a base dict that none of them
changes, each holding what differs from it (the keys set since, the keys removed); when that grows past
an eighth of the base, the next revision folds it into a base of its own. So a revision costs as many
steps as keys were updated, amortized, and a lookup two or three dict lookups; the first walk over a
revision makes it one dict, so that walks and lookups after it cost what a dict's do.
"""

from __future__ import annotations

import weakref
from collections.abc import ItemsView, Iterable, Iterator, KeysView, Mapping, ValuesView
from typing import Any, Generic, TypeVar, overload

_V = TypeVar("_V")
_D = TypeVar("_D")
_MISSING: Any = object()
FOLD_SHARE = 8
"""A revision folds its differences into a new base once they exceed 1/FOLD_SHARE of the base (and 64 keys)."""


class Revision(Mapping[str, _V], Generic[_V]):
    """An immutable mapping that remembers the revision it was made from (weakly: older ones may be freed) and
    the keys `revised` updated since."""

    __slots__ = ("__weakref__", "_base", "_changed", "_flat", "_gone", "_len", "_made_from", "_set")

    def __init__(self, data: Mapping[str, _V] | None = None) -> None:
        self._base: dict[str, _V] = dict(data or {})
        """Shared with other revisions: never changed."""
        self._set: dict[str, _V] = {}
        """Keys whose values differ from the base's, or that it lacks."""
        self._gone: frozenset[str] = frozenset()
        """Keys of the base this mapping lacks."""
        self._len = len(self._base)
        self._made_from: weakref.ref[Revision[_V]] | None = None
        self._changed: frozenset[str] = frozenset()
        self._flat: dict[str, _V] | None = None
        """The whole mapping as one dict, made at the first walk over it (a walk then costs what a dict's does)."""

    def revised(self, updates: Mapping[str, _V | None]) -> Revision[_V]:
        """This mapping with `updates` applied (a value of None removes the key); itself when none changes it."""
        changed = [
            key
            for key, value in updates.items()
            if (value is None and key in self) or (value is not None and self.get(key, _MISSING) is not value)
        ]
        if not changed:
            return self
        found: Revision[_V] = Revision()
        base, set_, gone, length = self._base, dict(self._set), set(self._gone), self._len
        for key in changed:
            value = updates[key]
            present = key in set_ or (key in base and key not in gone)
            if value is None:
                set_.pop(key, None)
                if key in base:
                    gone.add(key)
                length -= 1
            else:
                if key in base and base[key] is value:
                    set_.pop(key, None)
                else:
                    set_[key] = value
                gone.discard(key)
                length += 0 if present else 1
        if len(set_) + len(gone) > max(64, len(base) // FOLD_SHARE):
            folded = {key: value for key, value in base.items() if key not in gone}
            folded.update(set_)
            base, set_, gone = folded, {}, set()
        found._base, found._set, found._gone, found._len = base, set_, frozenset(gone), length
        found._flat = base if not set_ and not gone else None
        found._made_from = weakref.ref(self)
        found._changed = frozenset(changed)
        return found

    def made_from(self, other: Mapping[str, Any]) -> bool:
        """Whether `revised` made this mapping from `other` (then only `changed_keys` may differ)."""
        return self._made_from is not None and self._made_from() is other

    @property
    def changed_keys(self) -> frozenset[str]:
        """The keys `revised` updated, added or removed when it made this mapping."""
        return self._changed

    def __getitem__(self, key: str) -> _V:
        value = self.get(key, _MISSING)
        if value is _MISSING:
            raise KeyError(key)
        return value

    @overload
    def get(self, key: str, /) -> _V | None: ...
    @overload
    def get(self, key: str, default: _V | _D, /) -> _V | _D: ...
    def get(self, key: str, default: Any = None, /) -> Any:
        if self._flat is not None:
            return self._flat.get(key, default)
        value = self._set.get(key, _MISSING)
        if value is not _MISSING:
            return value
        if key in self._gone:
            return default
        return self._base.get(key, default)

    def __contains__(self, key: object) -> bool:
        if self._flat is not None:
            return key in self._flat
        return key in self._set or (key in self._base and key not in self._gone)

    def _whole(self) -> dict[str, _V]:
        if self._flat is None:
            gone = self._gone
            flat = {key: value for key, value in self._base.items() if key not in gone}
            flat.update(self._set)
            self._flat = flat
        return self._flat

    def __iter__(self) -> Iterator[str]:
        return iter(self._whole())

    def __len__(self) -> int:
        return self._len

    def keys(self) -> KeysView[str]:
        return self._whole().keys()

    def values(self) -> ValuesView[_V]:
        return self._whole().values()

    def items(self) -> ItemsView[str, _V]:
        return self._whole().items()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return len(self) == len(other) and all(other.get(k, _MISSING) == v for k, v in self.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"Revision({dict(self.items())!r})"


def differing(new: Mapping[str, Any], old: Mapping[str, Any]) -> set[str]:
    """The keys whose values differ between two mappings (present in one only, or neither the same object nor
    equal): in as many steps as keys were updated where `new` was revised from `old`, else in as many as both
    hold."""
    found = set()
    for key in _updated(new, old):
        a, b = new.get(key, _MISSING), old.get(key, _MISSING)
        if a is not b and (a is _MISSING or b is _MISSING or a != b):
            found.add(key)
    return found


def replaced(new: Mapping[str, Any], old: Mapping[str, Any]) -> set[str]:
    """The keys whose values are not the very same objects in both mappings (present in one only included), for
    values whose equality leaves out what the caller reads: in as many steps as `differing`."""
    return {key for key in _updated(new, old) if new.get(key, _MISSING) is not old.get(key, _MISSING)}


def _updated(new: Mapping[str, Any], old: Mapping[str, Any]) -> Iterable[str]:
    """The keys that may hold other values: those updated between the two along a line of revisions, else all."""
    if new is old:
        return ()
    if isinstance(new, Revision) and new.made_from(old):
        return new.changed_keys
    if isinstance(old, Revision) and old.made_from(new):
        return old.changed_keys
    return set(new) | set(old)
