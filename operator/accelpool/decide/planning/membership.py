"""Membership: which pool each node belongs to at the start of a pass, and which nodes leave.

A node labelled `accelpool.io/pool=<p>` belongs to pool p (the label is the source of truth,
also across operator restarts). It stays a member while it still matches the pool's
`NodeFilter` (a member whose accelerator labels vanish for a while is kept). Nodes of deleted
pools, of pools that no longer exist (when `release_orphans`) and members that stopped matching
are released (`Ledger.release`); nodes of invalid pools are held untouched; a node in no pool
loses what an agent wrote after its release (`Ledger.clear_agent_leftovers`).

Before that, `judge_health` reads a health condition its agent stopped rewriting (judged by the
operator's clock, `accelpool.runtime.controller.freshness`), or that another pool's agent wrote, as
Unknown/AgentSilent. Called by the planning pass.
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime

from accelpool.decide.planning.ledger import Ledger
from accelpool.decide.planning.mig_retry import parse_mig_retry
from accelpool.decide.planning.model import PoolInput
from accelpool.decide.planning.pools import PoolWork
from accelpool.model import remediation_record
from accelpool.model.nodes import HealthCondition, NodeView, format_time, parse_time
from accelpool_api import conventions


@dataclass
class Roster:
    """The nodes that are not members of a valid pool, as membership left them."""

    free: dict[str, NodeView] = field(default_factory=dict)
    """Nodes in no pool (released ones included, as they are after the release): the claims' candidates."""
    held_invalid: dict[str, list[NodeView]] = field(default_factory=lambda: defaultdict(list))
    """Members of invalid pools, by pool: held as they are."""
    in_pools: Counter[str] = field(default_factory=Counter)
    """Nodes labelled with any pool, by detected accelerator (a claim's shortfall counts them)."""


def judge_health(
    view: NodeView, now: datetime, stale_seconds: float, unchanged_for: Mapping[str, float] | None = None
) -> NodeView:
    """The node with a health condition its agent stopped rewriting, or that another pool's agent wrote,
    read as Unknown/AgentSilent.

    A crash-looping or removed agent leaves its last verdict behind: a stale True must not count
    as healthy, and a stale False must not keep a repaired node out of every pool forever. The
    writer is the `pool` of the agent's health annotation. Stale: unchanged for `stale_seconds` by
    the operator's own clock (`unchanged_for`, see `PlannerOptions.health_unchanged_for`), never by
    the timestamps the agent writes, which its clock made; without `unchanged_for` (an offline plan),
    the condition's `lastHeartbeatTime` against `now`.
    """
    health = view.health
    if health is None:
        return view
    writer = view.report.pool if view.report is not None else None
    if unchanged_for is not None:
        age: float | None = unchanged_for.get(view.name, 0.0)
        seen = f"has not changed in {stale_seconds:.0f} s by the operator's clock"  # stable: no status churn
    elif health.heartbeat is not None:
        age = (now - health.heartbeat).total_seconds()
        seen = f"was last written {format_time(health.heartbeat)}"
    else:
        age, seen = None, ""  # an offline plan cannot tell how old a condition without a heartbeat is
    if view.pool is not None and writer is not None and writer != view.pool:
        why = f"was written by the agent of pool {writer}, not of {view.pool}"
    elif age is not None and age >= stale_seconds:
        why = f"{seen}; its agent has stopped reporting"
    else:
        return view
    silent = HealthCondition(
        status="Unknown",
        reason=conventions.SILENT_AGENT_REASON,
        message=f"{conventions.HEALTH_CONDITION} ({health.status}: {health.reason}) {why}",
        since=health.since,
        heartbeat=health.heartbeat,
    )
    return replace(view, health=silent)


def input_problems(view: NodeView) -> list[str]:
    """`key: problem` for every value accelpool reads from the node that it ignores for its shape."""
    annotations = view.annotations
    texts = (
        annotations.get(conventions.REMEDIATION_ANNOTATION),
        annotations.get(conventions.JOINED_ANNOTATION),
        annotations.get(conventions.MIG_RETRY_ANNOTATION),
        annotations.get(conventions.PRIOR_LABELS_ANNOTATION),
    )
    short = sum(len(text) for text in texts if text) <= _REMEMBERED_CHARS
    found = _remembered_problems(*texts) if short else _annotation_problems(*texts)
    return [*view.input_problems, *found][: conventions.MAX_LISTED]


_REMEMBERED_CHARS = 1024
"""Annotations as short as accelpool writes them are remembered (`_remembered_problems`); longer ones, which
only a hand or a hostile writer makes, are read each time rather than kept."""


def _annotation_problems(
    remediation: str | None, joined: str | None, mig_retry: str | None, prior_labels: str | None
) -> tuple[str, ...]:
    """The problems of accelpool's own annotations on a node."""
    problems: list[str] = []
    text = remediation
    if text:
        problem = remediation_record.parse(text)[1]
        if problem is not None:
            problems.append(f"{conventions.REMEDIATION_ANNOTATION}: {problem}")
    text = joined
    if text and parse_time(text) is None:
        problems.append(f"{conventions.JOINED_ANNOTATION}: {conventions.cut(text, 40)!r} is not an RFC 3339 time")
    text = mig_retry
    if text and parse_mig_retry(text)[1] is None:
        problems.append(f"{conventions.MIG_RETRY_ANNOTATION}: {conventions.cut(text, 40)!r} is not <retries>@<time>")
    text = prior_labels
    if text:
        try:
            loaded = json.loads(text)
        except (ValueError, RecursionError):
            loaded = None
        if not isinstance(loaded, dict):
            problems.append(f"{conventions.PRIOR_LABELS_ANNOTATION}: not a JSON object")
    return tuple(problems)


_remembered_problems = functools.lru_cache(maxsize=16384)(_annotation_problems)
"""`_annotation_problems` remembered by the annotations' texts: every pass reads every node's, and they change
only when accelpool writes them (most members share a few joined times)."""


def sort_nodes(
    nodes: Sequence[NodeView],
    pools: Mapping[str, PoolInput],
    works: Mapping[str, PoolWork],
    ledger: Ledger,
    *,
    release_orphans: bool,
) -> Roster:
    """Append each node that stays a member to its `PoolWork.members`; release the ones that leave.

    `pools`: every pool by name; `works`: the valid, live ones.
    """
    roster = Roster()
    for view in nodes:
        if view.label_problems:
            ledger.event(
                "Node",
                view.name,
                view.uid,
                "Warning",
                "AcceleratorLabelsInvalid",
                "not recognised as an accelerator node: " + "; ".join(view.label_problems),
            )
        problems = input_problems(view)
        if problems:
            ledger.event(
                "Node",
                view.name,
                view.uid,
                "Warning",
                "NodeInputInvalid",
                conventions.cut(f"{view.name}: ignored what accelpool cannot read: " + "; ".join(problems)),
            )
        owner = view.pool
        if owner is None:
            roster.free[view.name] = ledger.clear_agent_leftovers(view)
            continue
        if view.detected is not None:
            roster.in_pools[view.detected.accelerator.name] += 1
        pool = pools.get(owner)
        if pool is None or pool.deleting:
            if pool is not None or release_orphans:
                roster.free[view.name] = ledger.release(view, owner)
            continue
        work = works.get(owner)
        if work is None:
            roster.held_invalid[owner].append(view)
        elif work.filter.matches(view, current=True):
            work.members.append(view)
        else:
            roster.free[view.name] = ledger.release(view, owner)
            ledger.event(
                "ComputePool",
                work.name,
                work.input.uid,
                "Normal",
                "NodeNoLongerMatches",
                f"released {view.name}: it no longer matches {work.resolved.display}"
                + (f" and {work.spec.node_selector}" if work.spec.node_selector else ""),
            )
    return roster
