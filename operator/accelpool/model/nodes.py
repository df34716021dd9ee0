"""The operator's view of a Node: only the fields that planning depends on, parsed once, immutable.

`NodeView.from_body` turns a Node object (from the kopf index, the API or a YAML snapshot) into
a frozen value: labels, accelpool's own annotations, taints, cordon, readiness, the device
agent's `AcceleratorHealthy` condition and `accelpool.io/health` report, and the detected
accelerator. Heartbeat timestamps and other churn are left out, so two views compare equal
exactly when a reconcile could come to a different result. `NodeView.apply` returns the view a
`NodeChange` would produce (the planner uses it to compute statuses after its own writes).
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from accelpool.model.detection import Detected, detect, label_problems
from accelpool_api import conventions
from accelpool_core.protocol import HealthReport

_KEPT_ANNOTATIONS = (conventions.HEALTH_ANNOTATION,)


def _report(
    annotation: str | None, previous: NodeView | None, detected: Detected | None
) -> tuple[HealthReport | None, str | None]:
    """The agent's health report from its annotation (None: none, or not a report; `previous`'s parse if the same
    text) with its numbers checked, and what was wrong with it (None: nothing)."""
    if annotation is None:
        return None, None
    if previous is not None and previous.annotations.get(conventions.HEALTH_ANNOTATION) == annotation:
        report = previous.report
        if report is None:
            return None, "not a health report"
    else:
        try:
            report = HealthReport.from_annotation(annotation)
        except (ValidationError, ValueError, TypeError, RecursionError) as error:
            return None, "not a health report: " + _first_line(error)
    problem = _tflops_problem(report.tflops, detected)
    if problem is not None:
        report = report.model_copy(update={"tflops": None})
    if len(report.message) > conventions.MAX_MESSAGE:
        report = report.model_copy(update={"message": conventions.cut(report.message)})
    return report, problem


def _first_line(error: BaseException) -> str:
    return conventions.cut(str(error).partition("\n")[0], 200)


def _tflops_problem(tflops: float | None, detected: Detected | None) -> str | None:
    """Why a measured TFLOPS figure cannot be believed (None: it can): not finite, negative, or more than
    `PLAUSIBLE_PEAK_FACTOR` times the catalog's best peak for the node's devices."""
    if tflops is None:
        return None
    if not math.isfinite(tflops) or tflops < 0:
        return f"tflops {tflops!r} is not a finite, non-negative number; ignored"
    if detected is None:
        return None
    peaks = [p for p in vars(detected.accelerator.peaks).values() if isinstance(p, int | float)]
    limit = conventions.PLAUSIBLE_PEAK_FACTOR * max(peaks, default=0.0) * max(detected.count, 1)
    if peaks and tflops > limit:
        return (
            f"tflops {tflops:.6g} is implausible for {max(detected.count, 1)} {detected.accelerator.name} "
            f"(over {conventions.PLAUSIBLE_PEAK_FACTOR:g} times their peak, {limit:.6g}); ignored"
        )
    return None


def mapping(value: Any) -> Mapping[str, Any]:
    """`value` if it is a mapping, else an empty one: a field of the wrong shape reads as absent."""
    return value if isinstance(value, Mapping) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def parse_time(text: Any) -> datetime | None:
    """RFC 3339 (`2026-11-01T00:00:00Z`) → aware datetime; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def format_time(moment: datetime) -> str:
    """Aware datetime → RFC 3339 in UTC with second precision, as Kubernetes writes it."""
    return moment.astimezone(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass(frozen=True, slots=True)
class Taint:
    """A node taint. Equality ignores `time_added` (set by the API server on NoExecute taints)."""

    key: str
    effect: str
    value: str | None = None
    time_added: str | None = field(default=None, compare=False)

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Taint:
        value = raw.get("value")
        return cls(
            key=str(raw.get("key", "")),
            effect=str(raw.get("effect", "")),
            value=str(value) if value not in (None, "") else None,
            time_added=_text(raw.get("timeAdded")),
        )

    def to_dict(self) -> dict[str, str]:
        out = {"key": self.key}
        if self.value is not None:
            out["value"] = self.value
        out["effect"] = self.effect
        if self.time_added:
            out["timeAdded"] = self.time_added
        return out

    def same_slot(self, other: Taint) -> bool:
        """The API keys taints by (key, effect): two taints in one slot replace each other."""
        return self.key == other.key and self.effect == other.effect


def tolerated(taint: Taint, patterns: Iterable[str]) -> bool:
    """Whether a taint is covered by `key` or `key=value` patterns; PreferNoSchedule never keeps pods away."""
    if taint.effect == "PreferNoSchedule":
        return True
    for pattern in patterns:
        key, has_value, value = pattern.partition("=")
        if taint.key == key and (not has_value or (taint.value or "") == value):
            return True
    return False


@dataclass(frozen=True)
class HealthCondition:
    """The agent's `AcceleratorHealthy` node condition."""

    status: str
    reason: str = ""
    message: str = ""
    since: datetime | None = None
    heartbeat: datetime | None = None
    """`lastHeartbeatTime`: the agent rewrites the condition at least every heartbeat period."""

    @property
    def silent(self) -> bool:
        """Set by the planner for a condition whose writer stopped (or is not this pool's agent)."""
        return self.reason == conventions.SILENT_AGENT_REASON

    @property
    def healthy(self) -> bool:
        return self.status == "True"

    @property
    def unhealthy(self) -> bool:
        return self.status == "False"


def _health_condition(raw: Mapping[str, Any]) -> tuple[HealthCondition, str | None]:
    """The agent's condition, each field of the wrong shape read as absent, and what was wrong (None: nothing)."""
    wrong = [
        key
        for key in ("status", "reason", "message", "lastTransitionTime", "lastHeartbeatTime")
        if raw.get(key) is not None and not isinstance(raw.get(key), str)
    ]
    status, message = _text(raw.get("status")) or "Unknown", _text(raw.get("message")) or ""
    problems = [f"{', '.join(wrong)} not a string; ignored"] if wrong else []
    if status not in ("True", "False", "Unknown"):
        problems.append(f"status {conventions.cut(status, 40)!r} is not True, False or Unknown; read as Unknown")
        status = "Unknown"
    condition = HealthCondition(
        status=status,
        reason=conventions.cut(_text(raw.get("reason")) or "", 128),
        message=conventions.cut(message),
        since=parse_time(raw.get("lastTransitionTime")),
        heartbeat=parse_time(raw.get("lastHeartbeatTime")),
    )
    return condition, "; ".join(problems) or None


@dataclass(frozen=True)
class NodeView:
    """A Node as planning needs it. Build with `from_body`; never mutate."""

    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    """accelpool.io/* annotations and the agent's health annotation only."""
    taints: tuple[Taint, ...] = ()
    unschedulable: bool = False
    ready: bool = False
    ready_since: datetime | None = None
    health: HealthCondition | None = None
    report: HealthReport | None = None
    detected: Detected | None = None
    allocatable: dict[str, str] = field(default_factory=dict)
    """`status.allocatable`: what the device plugin advertises now (e.g. `nvidia.com/mig-3g.40gb: "16"`)."""
    health_index: int | None = None
    """Position of `AcceleratorHealthy` in `status.conditions` (a JSON patch removes it by position)."""
    label_problems: tuple[str, ...] = ()
    """Accelerator labels out of any real range (the node is then not recognised as an accelerator node)."""
    uid: str = ""
    resource_version: str | None = None
    created: str | None = None
    input_problems: tuple[str, ...] = ()
    """`key: problem` for each value read from the node that had the wrong shape and was ignored (or cut)."""
    capacity: dict[str, str] = field(default_factory=dict, compare=False, repr=False)
    """`status.allocatable` and `status.capacity` merged: what detection read (`detected` says what it made of it)."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any], previous: NodeView | None = None) -> NodeView:
        """The view of a Node object. `previous`, the same node's last view, lends what is parsed from
        inputs that did not change (the detected accelerator, the health report): a node's updates
        mostly touch its status, and the watch sees several per node."""
        metadata = mapping(body.get("metadata"))
        spec = mapping(body.get("spec"))
        status = mapping(body.get("status"))
        problems: list[str] = []
        labels = {str(k): str(v) for k, v in mapping(metadata.get("labels")).items()}
        annotations = {
            str(k): str(v)
            for k, v in mapping(metadata.get("annotations")).items()
            if str(k).startswith(f"{conventions.DOMAIN}/") or k in _KEPT_ANNOTATIONS
        }
        raw_conditions = [c for c in _list(status.get("conditions")) if isinstance(c, Mapping)]
        conditions = {c.get("type"): c for c in raw_conditions if isinstance(c.get("type"), str)}
        ready = conditions.get("Ready") or {}
        health_raw = conditions.get(conventions.HEALTH_CONDITION)
        health = None
        if health_raw:
            health, problem = _health_condition(health_raw)
            if problem is not None:
                problems.append(f"{conventions.HEALTH_CONDITION} condition: {problem}")
        capacity = {
            str(k): str(v) for k, v in {**mapping(status.get("allocatable")), **mapping(status.get("capacity"))}.items()
        }
        if previous is None or previous.labels != labels or previous.capacity != capacity:
            detected, label_issues = detect(labels, capacity), label_problems(labels, capacity)
        else:
            detected, label_issues = previous.detected, previous.label_problems
        report, problem = _report(annotations.get(conventions.HEALTH_ANNOTATION), previous, detected)
        if problem is not None:
            problems.append(f"{conventions.HEALTH_ANNOTATION}: {problem}")
        return cls(
            name=str(metadata.get("name", "")),
            labels=labels,
            annotations=annotations,
            taints=tuple(Taint.from_dict(t) for t in _list(spec.get("taints")) if isinstance(t, Mapping)),
            unschedulable=spec.get("unschedulable") is True,
            ready=ready.get("status") == "True",
            ready_since=parse_time(ready.get("lastTransitionTime")),
            health=health,
            report=report,
            detected=detected,
            label_problems=label_issues,
            health_index=next(
                (
                    i
                    for i, c in enumerate(_list(status.get("conditions")))
                    if isinstance(c, Mapping) and c.get("type") == conventions.HEALTH_CONDITION
                ),
                None,
            ),
            allocatable={str(k): str(v) for k, v in mapping(status.get("allocatable")).items()},
            uid=str(metadata.get("uid") or ""),
            resource_version=_text(metadata.get("resourceVersion")),
            created=_text(metadata.get("creationTimestamp")),
            capacity=capacity,
            input_problems=tuple(problems),
        )

    # ------------------------------------------------------------ derived facts

    @property
    def pool(self) -> str | None:
        return self.labels.get(conventions.POOL_LABEL) or None

    @property
    def quarantine_taint(self) -> Taint | None:
        for taint in self.taints:  # a loop, not a generator: read for every member several times a pass
            if taint.key == conventions.QUARANTINE_TAINT_KEY:
                return taint
        return None

    @property
    def in_burn_in(self) -> bool:
        """Carries accelpool's burn-in taint: it joined its pool and has not passed burn-in, so it serves nothing."""
        return any(t.key == conventions.BURN_IN_TAINT_KEY for t in self.taints)

    @property
    def cordoned_by_us(self) -> bool:
        return self.annotations.get(conventions.CORDONED_ANNOTATION) == "true"

    @property
    def quarantined(self) -> bool:
        """Quarantined by accelpool: its quarantine taint, or a cordon it made."""
        return self.quarantine_taint is not None or (self.cordoned_by_us and self.unschedulable)

    @property
    def cordoned_by_others(self) -> bool:
        return self.unschedulable and not self.cordoned_by_us

    @property
    def joined_at(self) -> datetime | None:
        return parse_time(self.annotations.get(conventions.JOINED_ANNOTATION))

    @functools.cached_property
    def prior_labels(self) -> Mapping[str, str | None]:
        """The labels accelpool replaced when the node joined (parsed once per view; read-only)."""
        raw = self.annotations.get(conventions.PRIOR_LABELS_ANNOTATION)
        if not raw:
            return {}
        try:
            loaded = json.loads(raw)
        except ValueError:
            return {}
        if not isinstance(loaded, dict):
            return {}
        return {str(k): (None if v is None else str(v)) for k, v in loaded.items()}

    @property
    def gpus(self) -> int:
        return self.detected.count if self.detected else 0

    # ------------------------------------------------------------ what a change would make of it

    def apply(self, change: NodeChange) -> NodeView:
        """The view after writing `change` (same semantics as the merge patch the reconciler sends)."""
        new_labels = dict(self.labels)
        for key, value in change.labels.items():
            if value is None:
                new_labels.pop(key, None)
            else:
                new_labels[key] = value
        new_annotations = dict(self.annotations)
        for key, value in change.annotations.items():
            if value is None:
                new_annotations.pop(key, None)
            else:
                new_annotations[key] = value
        return dataclasses.replace(
            self,
            labels=new_labels,
            annotations=new_annotations,
            taints=merge_taints(self.taints, change.add_taints, change.remove_taints),
            unschedulable=self.unschedulable if change.unschedulable is None else change.unschedulable,
            health=None if change.drop_health else self.health,
            health_index=None if change.drop_health else self.health_index,
        )

    def label_after(self, change: NodeChange | None, key: str) -> str | None:
        if change is not None and key in change.labels:
            return change.labels[key]
        return self.labels.get(key)

    def taints_after(self, change: NodeChange | None) -> tuple[Taint, ...]:
        if change is None or (not change.add_taints and not change.remove_taints):
            return self.taints
        return merge_taints(self.taints, change.add_taints, change.remove_taints)

    def unschedulable_after(self, change: NodeChange | None) -> bool:
        if change is not None and change.unschedulable is not None:
            return change.unschedulable
        return self.unschedulable


@dataclass(frozen=True, slots=True)
class NodeChange:
    """What accelpool wants on one node: its own labels, annotations, taints and cordon.

    Declarative: `labels` holds the value of every label accelpool manages on this node (None:
    absent); `add_taints` the taints it must carry; `remove_taints` those accelpool set that
    must go. Writing it twice changes nothing the second time. `pool` is the node's pool after
    the change (None when released).
    """

    node: str
    pool: str | None
    labels: dict[str, str | None] = field(default_factory=dict)
    annotations: dict[str, str | None] = field(default_factory=dict)
    add_taints: tuple[Taint, ...] = ()
    remove_taints: tuple[Taint, ...] = ()
    unschedulable: bool | None = None
    """True: cordon; False: uncordon (only a cordon accelpool made); None: leave as is."""
    drop_health: bool = False
    """Remove the agent's `AcceleratorHealthy` condition (the node left its pool: no agent keeps it true)."""


def merge_taints(current: tuple[Taint, ...], add: tuple[Taint, ...], remove: tuple[Taint, ...]) -> tuple[Taint, ...]:
    """Current taints minus `remove` (matched by key and effect) with `add` replacing or appended, order kept."""
    if not remove:  # a loop, not all(...): every member's taints are merged several times a pass
        for taint in add:
            if taint not in current:
                break
        else:
            return current
    kept = [t for t in current if not any(t.same_slot(r) for r in remove)]
    for taint in add:
        slot = next((i for i, t in enumerate(kept) if t.same_slot(taint)), None)
        if slot is None:
            kept.append(taint)
        elif kept[slot] != taint:
            kept[slot] = taint
    return tuple(kept)
