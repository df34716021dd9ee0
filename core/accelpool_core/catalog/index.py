"""Finding catalog entries: by name or alias (case-insensitive), by model, and the closest names for
a typo."""

from __future__ import annotations

import difflib
import re

from accelpool_core.catalog.data import ACCELERATORS
from accelpool_core.catalog.model import Accelerator, FormFactor


class UnknownAcceleratorError(ValueError):
    """A name that no catalog entry or alias answers to; carries the closest known names."""

    def __init__(self, name: str, suggestions: list[str]) -> None:
        self.name = name
        self.suggestions = suggestions
        hint = f"; did you mean {', '.join(suggestions)}?" if suggestions else ""
        super().__init__(f"unknown accelerator {name!r}{hint} (`accelpool catalog` lists them all)")


def _key(name: str) -> str:
    """Normalise a name for lookup: case-insensitive; runs of spaces and `_` fold into `-`."""
    return re.sub(r"[\s_]+", "-", name.strip().lower())


def _build_index() -> dict[str, Accelerator]:
    index: dict[str, Accelerator] = {}
    for accelerator in ACCELERATORS:
        for alias in (accelerator.name, *accelerator.aliases):
            key = _key(alias)
            if key in index and index[key] is not accelerator:
                raise AssertionError(f"catalog alias {alias!r} names both {index[key].name} and {accelerator.name}")
            index[key] = accelerator
    return index


_INDEX = _build_index()
BY_NAME: dict[str, Accelerator] = {accelerator.name: accelerator for accelerator in ACCELERATORS}


def lookup(name: str) -> Accelerator:
    """The catalog entry for a name or alias (case-insensitive), or UnknownAcceleratorError."""
    found = _INDEX.get(_key(name))
    if found is None:
        raise UnknownAcceleratorError(name, suggest(name))
    return found


def suggest(name: str, limit: int = 3) -> list[str]:
    """The closest known names, canonical spelling where the alias belongs to one entry."""
    key = _key(name)
    matches = difflib.get_close_matches(key, list(_INDEX), n=limit * 3, cutoff=0.5)
    if not matches:
        matches = [k for k in _INDEX if key and (key in k or k in key)]
    names: list[str] = []
    for match in matches:
        canonical = _INDEX[match].name
        if canonical not in names:
            names.append(canonical)
    return names[:limit]


def variants(accelerator: Accelerator) -> list[Accelerator]:
    """Entries of the same model and memory size (form-factor variants), the given one first."""
    same = [a for a in ACCELERATORS if a.model == accelerator.model and a.memory_gb == accelerator.memory_gb]
    return sorted(same, key=lambda a: a is not accelerator)


def find(model: str, memory_gb: int | None = None, form_factor: FormFactor | None = None) -> list[Accelerator]:
    """Entries of a model, narrowed by memory size and form factor where given."""
    return [
        a
        for a in ACCELERATORS
        if a.model.lower() == model.lower()
        and (memory_gb is None or a.memory_gb == memory_gb)
        and (form_factor is None or a.form_factor == form_factor)
    ]
