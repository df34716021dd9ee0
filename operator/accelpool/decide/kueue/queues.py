"""A ClusterQueue's `spec.resourceGroups` with accelpool's flavors set or removed, the rest left as it is.

A ClusterQueue belongs to its user: accelpool edits only the entries of its own flavors (the
ResourceFlavors it keeps for pools), and keeps the groups as Kueue requires them
(kubernetes-sigs/kueue pkg/webhooks/clusterqueue_webhook.go `validateResourceGroups`, and the
CRD's rule `self.flavors.all(x, size(x.resources) == size(self.coveredResources))`): every
resource and every flavor in one group at most, each flavor listing exactly the group's
`coveredResources`, in that order.

`edit_groups(groups, wanted, ours)` sets each wanted flavor's nominal quota per resource:

- in the group that already holds the flavor, when that group covers all of its resources;
- else in the group that covers all of them (the flavor appended, Kueue's lowest preference);
- else, when no group covers any of them, in a new group covering exactly them;
- else, when one group covers some of them and lists only accelpool's flavors, in that group, its
  `coveredResources` extended by the rest (accelpool's other flavors there get quota 0 for them);
- else (its resources are split over groups, or a user's group covers part of them) nowhere: a
  `QueueConflict` says why.

A covered resource the pool does not offer gets nominal quota 0 in the flavor's entry (one that was
there keeps its value); a resource's `borrowingLimit` and `lendingLimit` are kept. Flavors in `ours`
that are not wanted are removed, and a group they leave empty goes with them.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping, Sequence, Set
from dataclasses import dataclass
from typing import Any

Groups = list[dict[str, Any]]
_PLAIN_NUMBER = re.compile(r"^[+]?[0-9]+(\.0*)?$")


@dataclass(frozen=True)
class QueueConflict:
    """A flavor accelpool could not place in the queue's groups without rewriting the user's."""

    flavor: str
    message: str


def edit_groups(
    groups: Sequence[Mapping[str, Any]], wanted: Mapping[str, Mapping[str, int]], ours: Set[str]
) -> tuple[Groups, list[QueueConflict]]:
    """`groups` with the `wanted` flavors' quotas (flavor → resource → nominal quota) and the rest of `ours` gone."""
    wanted = {flavor: quota for flavor, quota in wanted.items() if quota}  # nothing to offer: not listed
    edited: Groups = [copy.deepcopy(dict(g)) for g in groups]
    for group in edited:
        group["flavors"] = [f for f in group.get("flavors") or [] if f.get("name") not in ours - set(wanted)]
    conflicts: list[QueueConflict] = []
    for flavor, quota in sorted(wanted.items()):
        conflict = _place(edited, flavor, quota, ours)
        if conflict is not None:
            conflicts.append(conflict)
            for group in edited:
                group["flavors"] = [f for f in group["flavors"] if f.get("name") != flavor]
    return [g for g in edited if g["flavors"]], conflicts


def nominal_quota(groups: Sequence[Mapping[str, Any]], flavor: str) -> dict[str, int]:
    """The flavor's nominal quota per resource as the groups say (plain numbers only)."""
    for group in groups:
        for entry in group.get("flavors") or []:
            if entry.get("name") == flavor:
                return {
                    str(r.get("name")): number
                    for r in entry.get("resources") or []
                    if (number := quantity_number(r.get("nominalQuota"))) is not None
                }
    return {}


def quantity_number(value: Any) -> int | None:
    """A whole-number Kubernetes quantity (`8`, `"8"`), as stored by whoever wrote it; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and _PLAIN_NUMBER.match(value):
        return int(float(value))
    return None


def same_groups(a: Sequence[Mapping[str, Any]], b: Sequence[Mapping[str, Any]]) -> bool:
    """Whether two resourceGroups say the same (`8` and `"8"` are the same quantity)."""
    return bool(_normal(a) == _normal(b))


def _normal(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _normal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normal(v) for v in value]
    number = quantity_number(value) if isinstance(value, str) else None
    return number if number is not None else value


def _place(groups: Groups, flavor: str, quota: Mapping[str, int], ours: Set[str]) -> QueueConflict | None:
    resources = set(quota)
    holding = next((g for g in groups if any(f.get("name") == flavor for f in g["flavors"])), None)
    if holding is not None and resources <= set(holding.get("coveredResources") or []):
        _set_entry(holding, flavor, quota)
        return None
    if holding is not None:
        holding["flavors"] = [f for f in holding["flavors"] if f.get("name") != flavor]
    covering = [g for g in groups if resources & set(g.get("coveredResources") or [])]
    if not covering:
        groups.append({"coveredResources": sorted(resources), "flavors": []})
        _set_entry(groups[-1], flavor, quota)
        return None
    if len(covering) == 1 and resources <= set(covering[0].get("coveredResources") or []):
        _set_entry(covering[0], flavor, quota)
        return None
    if len(covering) == 1 and all(f.get("name") in ours for f in covering[0]["flavors"]):
        _extend(covering[0], sorted(resources - set(covering[0].get("coveredResources") or [])))
        _set_entry(covering[0], flavor, quota)
        return None
    described = "; ".join(f"group {groups.index(g)} covers {', '.join(g['coveredResources'])}" for g in covering)
    return QueueConflict(
        flavor,
        f"no resource group covers all of {', '.join(sorted(resources))} ({described}): accelpool adds its flavor to "
        "the group that covers all of the pool's resources, or to a new group when none covers any of them",
    )


def _extend(group: dict[str, Any], resources: Sequence[str]) -> None:
    """The group (of accelpool's flavors only) covering `resources` too, each of its flavors at quota 0 for them."""
    group["coveredResources"] = [*(group.get("coveredResources") or []), *resources]
    for entry in group["flavors"]:
        entry["resources"] = [*(entry.get("resources") or []), *({"name": r, "nominalQuota": 0} for r in resources)]


def _set_entry(group: dict[str, Any], flavor: str, quota: Mapping[str, int]) -> None:
    """The flavor's entry in the group: its resources in `coveredResources` order, quotas set, limits kept."""
    flavors: list[dict[str, Any]] = group["flavors"]
    index = next((i for i, f in enumerate(flavors) if f.get("name") == flavor), None)
    before = {r.get("name"): r for r in (flavors[index].get("resources") or [])} if index is not None else {}
    resources = []
    for name in group.get("coveredResources") or []:
        entry = dict(before.get(name) or {"name": name, "nominalQuota": 0})
        if name in quota:
            entry["nominalQuota"] = quota[name]
        resources.append(entry)
    if index is None:
        flavors.append({"name": flavor, "resources": resources})
    else:
        flavors[index] = {**flavors[index], "resources": resources}
