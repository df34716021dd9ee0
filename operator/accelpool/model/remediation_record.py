"""The remediation ladder's records on a node: the `accelpool.io/remediation` and `accelpool.io/quarantine-history`
annotations, read and written.

A member accelpool quarantines carries one `LadderRecord`, written in the same patch as its
quarantine taint or cordon:

```json
{"step": "draining", "cause": "XidError79", "action": "reset-gpu",
 "message": "XID 79 (GPU fallen off the bus) on GPU 3",
 "since": "2026-11-02T12:00:00Z", "stepSince": "2026-11-02T12:00:15Z"}
```

`step` climbs quarantined → draining → drained → handed-off (`accelpool.decide.planning.remediation.ladder` decides
when); `cause` and `message` are the fault that caused the quarantine, kept as they were whatever
the agent reports later, so Events and the pool's status name the cause and not the last check
cycle; `action` is the agent's recommended action (`HealthReport.action`), raised when a later
report asks for more. `blocked` and `timedOut` note what was reported once in the current step
(a `DrainBlocked`, a `DrainTimedOut`). `earlier` counts the node's quarantines in the `api.FLAP_MEMORY`
before this one: each doubles its hold-down (`api.HealthSpec.damped_hold_down_seconds`). Other tools read
this annotation and the `accelpool.io/remediation-action` label of a handed-off node (docs/concepts/health.md, "The
remediation ladder").

The record goes with the quarantine; what `earlier` is counted from stays: a `QuarantineHistory`, in
`accelpool.io/quarantine-history`, of when the node was quarantined, newest `conventions.MAX_QUARANTINE_HISTORY`
kept and the rest counted (`{"quarantines": ["2026-11-02T12:00:00Z", ...], "omitted": 3}`), so the annotation
stays a few hundred bytes whatever it was handed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any, Literal, get_args

import accelpool_api as api
from accelpool.model.nodes import NodeView, format_time, parse_time
from accelpool_api import conventions
from accelpool_core.protocol import Action

Step = Literal["quarantined", "draining", "drained", "handed-off"]
STEPS: tuple[Step, ...] = get_args(Step)


@dataclass(frozen=True)
class LadderRecord:
    """Where a quarantined node stands on the ladder, and why it is there."""

    step: Step
    cause: str
    """The health reason that caused the quarantine (`XidError79`), as in the quarantine taint's value."""
    message: str
    """What the agent said about the cause (`XID 79 (GPU fallen off the bus) on GPU 3`)."""
    action: Action
    """The recommended action: what a hand-off asks for."""
    since: datetime
    """When the node was quarantined."""
    step_since: datetime
    """When the current step began (a drain's timeout counts from it)."""
    blocked: str = ""
    """The pod whose refused eviction was reported (`DrainBlocked`) in this step."""
    timed_out: bool = False
    """`DrainTimedOut` was reported in this step."""
    earlier: int = 0
    """The node's quarantines in the `api.FLAP_MEMORY` before this one (each doubles its hold-down)."""

    def at(self, step: Step, now: datetime) -> LadderRecord:
        """The record on the next step, which begins now."""
        return replace(self, step=step, step_since=now, blocked="", timed_out=False)

    @property
    def hand_off_action(self) -> Action | None:
        """The action a hand-off asks for; None when the node only needs a drain (or nothing)."""
        return self.action if self.action in conventions.HAND_OFF_ACTIONS else None

    def to_annotation(self) -> str:
        data: dict[str, Any] = {
            "step": self.step,
            "cause": conventions.cut(self.cause, 128),
            "action": self.action.value,
            "since": format_time(self.since),
            "message": conventions.cut(self.message),
            "stepSince": format_time(self.step_since),
        }
        if self.blocked:
            data["blocked"] = conventions.cut(self.blocked, 253)
        if self.timed_out:
            data["timedOut"] = True
        if self.earlier:
            data["earlier"] = self.earlier
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, text: str) -> LadderRecord | None:
        """The record, or None for text that is not one (hand-edited, or from a future version)."""
        return parse(text)[0]


_TEXT_FIELDS = ("step", "cause", "message", "action", "since", "stepSince", "blocked")


def parse(text: str) -> tuple[LadderRecord | None, str | None]:
    """The record in an annotation's text, or None and why it is not one. Fields of the wrong shape never
    raise: a record that names no step, action or time it can be read by is not a record."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None, "not JSON"
    if not isinstance(data, dict):
        return None, f"a JSON {type(data).__name__}, not an object"
    wrong = [key for key in _TEXT_FIELDS if key in data and data[key] is not None and not isinstance(data[key], str)]
    if wrong:
        shapes = ", ".join(f"{key} is a {type(data[key]).__name__}" for key in wrong)
        return None, f"{shapes}, not a string"
    step, action = data.get("step"), data.get("action") or Action.NONE.value
    since = parse_time(data.get("since"))
    if step not in STEPS:
        return None, f"step {conventions.cut(str(step), 40)!r} is none of {', '.join(STEPS)}"
    if action not in {a.value for a in Action}:
        return None, f"action {conventions.cut(action, 40)!r} is none of {', '.join(a.value for a in Action)}"
    if since is None:
        return None, "since is not an RFC 3339 time"
    record = LadderRecord(
        step=step,
        cause=conventions.cut(data.get("cause") or "Unhealthy", 128),
        message=conventions.cut(data.get("message") or ""),
        action=Action(action),
        since=since,
        step_since=parse_time(data.get("stepSince")) or since,
        blocked=conventions.cut(data.get("blocked") or "", 253),
        timed_out=data.get("timedOut") is True,
        earlier=_count(data.get("earlier")),
    )
    return record, None


def _count(value: Any) -> int:
    """A count as written (a non-negative integer, at most what a history keeps); 0 for anything else."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        return 0
    return min(value, conventions.MAX_QUARANTINE_HISTORY)


def record_of(view: NodeView) -> LadderRecord | None:
    """The node's ladder record, if it carries a readable one."""
    text = view.annotations.get(conventions.REMEDIATION_ANNOTATION)
    return LadderRecord.from_annotation(text) if text else None


_FLAP_MEMORY = timedelta(seconds=api.parse_duration(api.FLAP_MEMORY))


@dataclass(frozen=True)
class QuarantineHistory:
    """When a member was quarantined lately: what makes a flapping node's hold-down grow."""

    times: tuple[datetime, ...] = ()
    """Oldest first; at most `conventions.MAX_QUARANTINE_HISTORY`, the newest."""
    omitted: int = 0
    """Quarantines before `times[0]` that were not kept."""

    def recent(self, now: datetime) -> int:
        """The quarantines kept within `api.FLAP_MEMORY` before `now`: exact up to the number kept, which is more
        than the hold-down's doublings need."""
        return sum(1 for t in self.times if now - _FLAP_MEMORY < t <= now)

    def pruned(self, now: datetime) -> QuarantineHistory:
        """Without the quarantines older than `api.FLAP_MEMORY` (those not kept are older than any kept)."""
        kept = tuple(t for t in self.times if t > now - _FLAP_MEMORY)
        return self if len(kept) == len(self.times) else QuarantineHistory(kept, 0)

    def added(self, moment: datetime) -> QuarantineHistory:
        """With a quarantine at `moment`, the oldest dropped (and counted) past the limit."""
        return _bounded((*self.times, moment), self.omitted)

    def to_annotation(self) -> str | None:
        """The annotation's text; None when there is nothing to remember."""
        if not self.times:
            return None
        data: dict[str, Any] = {"quarantines": [format_time(t) for t in self.times]}
        if self.omitted:
            data["omitted"] = self.omitted
        return json.dumps(data, separators=(",", ":"))

    @classmethod
    def from_annotation(cls, text: str | None) -> QuarantineHistory:
        """The history in an annotation's text; entries that are not RFC 3339 times are skipped, text that is no
        history is an empty one (never raises)."""
        if not text:
            return cls()
        try:
            data = json.loads(text)
        except (ValueError, RecursionError):
            return cls()
        if not isinstance(data, dict) or not isinstance(data.get("quarantines"), list):
            return cls()
        times = [t for t in (parse_time(item) for item in data["quarantines"]) if t is not None]
        omitted = data.get("omitted")
        return _bounded(sorted(times), omitted if isinstance(omitted, int) and not isinstance(omitted, bool) else 0)


def _bounded(times: tuple[datetime, ...] | list[datetime], omitted: int) -> QuarantineHistory:
    keep = conventions.MAX_QUARANTINE_HISTORY
    dropped = max(0, len(times) - keep)
    return QuarantineHistory(tuple(times[dropped:]), min(max(0, omitted) + dropped, _MAX_OMITTED))


_MAX_OMITTED = 1_000_000
"""A count handed in larger than any node's quarantines in a day is kept at this (the annotation stays short)."""


def history_of(view: NodeView) -> QuarantineHistory:
    """The member's quarantine history (empty when it has none, or none readable)."""
    return QuarantineHistory.from_annotation(view.annotations.get(conventions.QUARANTINE_HISTORY_ANNOTATION))
