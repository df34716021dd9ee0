"""Where the emulated API server answers otherwise than the real kube-apiserver, and why that is
acceptable for the demo: the one list of them. Each step listed here is expected to differ (an
xfail(strict=True)): when a difference disappears, its test fails until its entry is removed.

Keys are step ids (`FILE/SCENARIO/NN`), or a scenario id (`FILE/SCENARIO`) for every step of a
scenario that is not listed on its own and not in `Known.except_steps`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    reason: str
    except_steps: tuple[int, ...] = ()
    """For a scenario-wide entry: the steps that match all the same."""


PENDING = "not yet brought in line with the real server: the step's own failure says how it differs"

KNOWN: dict[str, Known] = {
    "nodes-patch/node-create-and-merge-patch": Known(PENDING, except_steps=()),
    "nodes-patch/node-strategic-merge-patch": Known(PENDING, except_steps=()),
    "nodes-patch/node-json-patch": Known(PENDING, except_steps=()),
    "nodes-patch/node-preconditions-and-conflicts": Known(PENDING, except_steps=()),
    "list-watch-events/list-selectors-pagination": Known(
        PENDING, except_steps=(5, 6, 7, 8, 9, 10, 12, 13, 14, 22, 23, 27)
    ),
    "list-watch-events/watch-bookmarks": Known(PENDING, except_steps=(0, 1, 2, 3, 4, 6)),
    "list-watch-events/events": Known(PENDING, except_steps=()),
    "crd-admission-and-apply/crd-install": Known(PENDING, except_steps=()),
    "crd-admission-and-apply/crd-schema-and-cel": Known(PENDING, except_steps=()),
    "crd-admission-and-apply/crd-field-validation": Known(PENDING, except_steps=()),
    "crd-admission-and-apply/crd-status-and-scale": Known(PENDING, except_steps=()),
    "crd-admission-and-apply/server-side-apply": Known(PENDING, except_steps=()),
    "ownerrefs-gc-eviction/ownerreferences-gc": Known(PENDING, except_steps=()),
    "ownerrefs-gc-eviction/pod-eviction-pdb": Known(PENDING, except_steps=(5, 6, 7, 8, 16)),
    "dra/dra-objects": Known(PENDING, except_steps=()),
    "dra/dra-scheduling": Known(PENDING, except_steps=(2, 5, 8, 11, 14, 17)),
    "dra/dra-device-taint-eviction": Known(PENDING, except_steps=()),
}


def known(step_id: str) -> Known | None:
    """The known difference of a step, if it has one."""
    if step_id in KNOWN:
        return KNOWN[step_id]
    scenario, _, index = step_id.rpartition("/")
    found = KNOWN.get(scenario)
    if found is not None and int(index) not in found.except_steps:
        return found
    return None
