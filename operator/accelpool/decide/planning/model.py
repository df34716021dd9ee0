"""The planner's inputs and outputs: what a pass is given and what it decides, as frozen values.

Inputs: `PoolInput` (a ComputePool), `ConfigState` (the NVIDIA ConfigMaps now) and
`PlannerOptions` (the time and the operator's settings); nodes come as `accelpool.model.nodes.NodeView`.
Outputs: a `Plan`, with one `PoolPlan` per pool, a `NodeChange` per node to write, both
ConfigMaps' desired data, `EventIntent`s and `Remediation` records. Built by the reconciler
(`accelpool.runtime.controller`, `accelpool.decide.inputs`) and `accelpool plan`; read back by the reconciler and
the metrics.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

import accelpool_api as api
from accelpool.model.agents import AgentObservation
from accelpool.model.evictions import DrainObservation, DrainOrder
from accelpool.model.nodes import NodeChange
from accelpool_api import conventions

# ---------------------------------------------------------------- inputs


@dataclass(frozen=True)
class PoolInput:
    """A ComputePool as the planner needs it; `spec` is None when the object is invalid."""

    name: str
    spec: api.ComputePoolSpec | None
    problems: tuple[str, ...] = ()
    uid: str = ""
    generation: int | None = None
    created: str | None = None
    deleting: bool = False
    previous: api.ComputePoolStatus | None = None
    unplannable: bool = False
    """True when the pool was set aside because planning or rendering it failed (`problems` says why)."""
    check_request: str | None = None
    """The pool's `accelpool.io/check-requested` token (`accelpool.decide.planning.check_requests`)."""

    @property
    def valid(self) -> bool:
        return self.spec is not None and not self.problems

    def set_aside(self, why: str) -> PoolInput:
        """This pool as one the operator cannot plan: Valid=False naming `why`, its nodes left as they are."""
        return replace(self, spec=None, problems=(why,), unplannable=True)


@dataclass(frozen=True)
class ConfigState:
    """What the two NVIDIA ConfigMaps hold now (None: the ConfigMap does not exist)."""

    device_plugin: Mapping[str, str] | None = None
    device_plugin_managed: frozenset[str] = frozenset()
    """Keys accelpool wrote (the ConfigMap's `accelpool.io/managed-keys` annotation)."""
    mig: Mapping[str, Any] | None = None
    """The parsed mig-parted document of the MIG ConfigMap."""
    mig_managed: frozenset[str] = frozenset()


@dataclass(frozen=True)
class ConfigSync:
    """When the operator first saw each NVIDIA config stored, and how long pods may take to see it.

    The kubelet projects a ConfigMap's update into the pods that mount it (NVIDIA's config-manager, the
    MIG manager) only at its next sync of the pod: up to about a minute later. A member moved to a config
    its pods cannot read yet fails: the config-manager exits (and crash-loops, backing off), the MIG
    manager reports `failed` and waits for the label to change again. So a member already in a config
    moves to another one only once that one has been stored for `seconds` (`wait`), and a joining node gets
    a MIG entry only then (`accelpool.decide.planning.changes`).
    """

    seconds: float
    device_plugin: Mapping[str, datetime] = field(default_factory=dict)
    """Device-plugin key → when it was first seen in the ConfigMap."""
    mig: Mapping[str, datetime] = field(default_factory=dict)
    """mig-parted entry → when it was first seen in the ConfigMap."""

    def wait(self, seen: Mapping[str, datetime], name: str, now: datetime) -> float:
        """Seconds until pods surely read the config `name` (0: they do); `seen` is `device_plugin` or `mig`."""
        since = seen.get(name)
        if since is None:
            return self.seconds
        return max(0.0, self.seconds - (now - since).total_seconds())


class HealthAges(Mapping[str, float]):
    """`PlannerOptions.health_unchanged_for` as the controller gives it: node → seconds since `changed_at[node]`, as
    of `now`, with the nodes whose age has reached `stale_seconds` found once (`stale`), so that planning again
    after a few changes need not age every node. Made by `accelpool.runtime.controller.freshness`."""

    __slots__ = ("changed_at", "now", "stale", "stale_seconds")

    def __init__(self, changed_at: Mapping[str, float], now: float, stale_seconds: float, stale: frozenset[str]):
        self.changed_at, self.now, self.stale_seconds, self.stale = changed_at, now, stale_seconds, stale

    def __getitem__(self, name: str) -> float:
        return self.now - self.changed_at[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.changed_at)

    def __len__(self) -> int:
        return len(self.changed_at)

    def reached(self, seconds: float) -> frozenset[str]:
        """The nodes unchanged for `seconds` or longer."""
        if seconds == self.stale_seconds:
            return self.stale
        return frozenset(name for name, at in self.changed_at.items() if self.now - at >= seconds)


@dataclass(frozen=True)
class PlannerOptions:
    now: datetime
    release_orphans: bool = True
    """Release nodes labelled with a pool that does not exist (False for offline plans)."""
    not_ready_grace_seconds: float = 300.0
    """A NotReady member is replaced by a spare only after this long."""
    karpenter_available: bool = True
    tolerated_taints: tuple[str, ...] = conventions.ACCELERATOR_TAINTS
    """Taints (`key` or `key=value`) that do not keep a free node from being claimed; any other
    NoSchedule/NoExecute taint reserves the node for someone else."""
    health_stale_seconds: float = conventions.HEALTH_STALE_SECONDS
    """A health condition not rewritten for this long is read as Unknown (its agent stopped)."""
    health_unchanged_for: Mapping[str, float] | None = None
    """Node → seconds, on the operator's own clock, since it last saw the node's AcceleratorHealthy condition or
    its agent's report change (its first sight counts as a change; `accelpool.runtime.controller.freshness`); a node
    missing here was first seen just now. None: nobody watched the nodes (an offline plan of one snapshot), so the
    condition's `lastHeartbeatTime`, read against `now`, stands in, and a condition without one never ages."""
    healthy_since: Mapping[str, datetime] = field(default_factory=dict)
    """When the operator first saw AcceleratorHealthy True, on its own clock (the hold-down counts from it); for a
    node missing here the condition's lastTransitionTime stands in."""
    agents: Mapping[str, AgentObservation] | None = None
    """Each pool's agent DaemonSet, pods and FailedCreate Events (`accelpool.model.agents.observe`); None when
    they were not observed (an offline plan), so AgentReady rests on the agents' reports alone."""
    drains: Mapping[str, DrainObservation] = field(default_factory=dict)
    """Node → the drain executor's last visit (`accelpool.runtime.controller.drain`): what a draining node has left."""
    config_sync: ConfigSync | None = None
    """When members may move to another NVIDIA config (`ConfigSync`); None: at once (offline plans)."""


# ---------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Remediation:
    """One remediation decision (for the `accelpool_remediations_total` metric and Events)."""

    pool: str
    node: str
    action: str
    """taint, cordon, untaint, uncordon, circuit_breaker, drain (a drain began), hand_off, or for one GPU of a DRA
    pool gpu_taint and gpu_untaint (`accelpool.decide.dra.quarantine`)."""
    reason: str


@dataclass(frozen=True)
class EventIntent:
    """A Kubernetes Event the reconciler should post."""

    kind: str
    """ComputePool or Node."""
    name: str
    uid: str
    type: str
    """Normal or Warning."""
    reason: str
    message: str
    """At most `conventions.MAX_MESSAGE` characters (a longer one is cut, saying so)."""

    def __post_init__(self) -> None:
        if len(self.message) > conventions.MAX_MESSAGE:
            object.__setattr__(self, "message", conventions.cut(self.message))


def bounded_events(events: Sequence[EventIntent]) -> tuple[EventIntent, ...]:
    """The pass's Events, at most `conventions.MAX_EVENTS_PER_REASON` per object and reason; the rest of each
    become one Event saying how many were left out (a fault across a fleet asks for one per node on its pool)."""
    counts = Counter((e.kind, e.name, e.reason) for e in events)
    if all(n <= conventions.MAX_EVENTS_PER_REASON for n in counts.values()):
        return tuple(events)  # the common case
    kept: list[EventIntent] = []
    seen: Counter[tuple[str, str, str]] = Counter()
    for event in events:
        key = (event.kind, event.name, event.reason)
        seen[key] += 1
        if seen[key] <= conventions.MAX_EVENTS_PER_REASON:
            kept.append(event)
        if seen[key] == counts[key] and counts[key] > conventions.MAX_EVENTS_PER_REASON:
            left = counts[key] - conventions.MAX_EVENTS_PER_REASON
            message = (
                f"and {left} more {event.reason} Events on this pass, not posted one by one "
                f"(at most {conventions.MAX_EVENTS_PER_REASON} a pass for one {event.kind} and reason)"
            )
            kept.append(replace(event, message=message))
    return tuple(kept)


@dataclass(frozen=True)
class PoolPlan:
    """One pool's outcome of a pass."""

    name: str
    uid: str
    valid: bool
    deleting: bool
    spec: api.ComputePoolSpec | None
    members: tuple[str, ...]
    status: api.ComputePoolStatus | None
    """None for pools being deleted."""
    breaker_open: bool = False
    expected_tflops: float | None = None
    tolerations: tuple[api.Toleration, ...] = ()
    """Other controllers' taints found on members (the agent DaemonSet tolerates them too)."""
    ladder_steps: Mapping[str, int] = field(default_factory=dict)
    """Quarantined members by remediation ladder step (quarantined, draining, drained, handed-off) after the pass."""
    burn_in: bool = False
    """Joining nodes carry the burn-in taint (a Karpenter NodePool's startup taint)."""
    driver_versions: int = 0
    """How many driver (and CUDA) versions the members' agents report (more than 1: a mismatch)."""

    @property
    def phase(self) -> str:
        return self.status.phase if self.status is not None else "Deleting"


@dataclass(frozen=True)
class Plan:
    pools: tuple[PoolPlan, ...]
    changes: Mapping[str, NodeChange]
    """Every member (with all the labels and taints accelpool wants on it) and every released node."""
    device_plugin: Mapping[str, str]
    """The device-plugin ConfigMap's full desired data (keys of others included, untouched)."""
    device_plugin_managed: frozenset[str]
    device_plugin_documents: Mapping[str, Any]
    """accelpool's own keys, parsed (what `accelpool plan` prints)."""
    mig_document: Mapping[str, Any]
    mig_managed: frozenset[str]
    events: tuple[EventIntent, ...] = ()
    remediations: tuple[Remediation, ...] = ()
    requeue_after: float | None = None
    """Seconds until a time-based decision (hold-down, NotReady grace) needs another pass."""
    unplannable: Mapping[str, str] = field(default_factory=dict)
    """Pools whose planning failed this pass (name → why); every other pool was planned without them."""
    drains: tuple[DrainOrder, ...] = ()
    """The nodes to drain after this pass's writes (the controller's drain executor evicts their pods)."""

    def pool(self, name: str) -> PoolPlan | None:
        return self._pools_by_name.get(name)

    def replanned_since(self, pools: Sequence[PoolPlan]) -> set[str] | None:
        """The pools whose `PoolPlan` is not the very object among `pools` (an earlier plan's): a pool plan is a
        value, so the others came out the same. None when the pools themselves differ (added, removed)."""
        if len(pools) != len(self.pools):
            return None
        found = set()
        for new, old in zip(self.pools, pools, strict=True):
            if new is not old:
                if new.name != old.name:
                    return None
                found.add(new.name)
        return found

    @functools.cached_property
    def _pools_by_name(self) -> Mapping[str, PoolPlan]:
        return {p.name: p for p in self.pools}
