"""The planner: from pools, nodes and the current NVIDIA configs, the whole desired state. Pure.

`plan(pools, nodes, config, options)` decides, in one pass over the cluster:

1. **Membership.** A node labelled `accelpool.io/pool=<p>` belongs to pool p (the label is the
   source of truth, also across operator restarts). A node in no pool loses what an agent wrote
   after its release (`without_agent_leftovers`). It stays a member while it still matches
   (accelerator, memory variant, form factor, device count, nodeSelector); a member whose
   accelerator labels vanish for a while (GFD relabelling during a MIG change) is kept. Nodes
   of deleted pools, of pools that no longer exist (`release_orphans`) and members that stopped
   matching are released. Nodes of invalid pools are held untouched.
2. **Remediation.** A member whose `AcceleratorHealthy` is False is quarantined per the pool's
   policy (taint `accelpool.io/quarantined=<reason>:NoSchedule`, or cordon remembered in
   `accelpool.io/cordoned`), unless that would quarantine more than `maxUnavailable` nodes
   (circuit breaker: a Warning and the Healthy condition instead). A quarantine is lifted once
   the condition has been True for `holdDown`. `remediation: none` only reports.
3. **Sizing.** Members that cannot serve (quarantined, cordoned by someone else, NotReady for
   longer than the grace period) are kept but not counted; spares are claimed so the serving
   count returns to `nodes`. A surplus of serving members is released most recently joined
   first (`accelpool.io/joined-at`). A NotReady member is reported, never dropped: it is
   replaced only after the grace period and released only by scale-down or deletion.
4. **Claims.** Pools (oldest first, then by name) take free nodes in name order: Ready,
   uncordoned, not quarantined, not unhealthy, matching. Other controllers' taints do not
   disqualify. Nodes are bucketed by detected accelerator once, and pools with the same filter
   share a cursor, so a pass costs O(nodes + pools) for any realistic mix of pool shapes.
5. **Node changes** (`NodeChange`, declarative): the pool label, `nvidia.com/device-plugin.config`
   and, for MIG pools, `nvidia.com/mig.config` (values accelpool overwrote are kept in
   `accelpool.io/prior-labels` and restored on release; MIG nodes return to `all-disabled`), the
   pool taint of dedicated pools, quarantine taints and cordons.
6. **Configs.** The device-plugin ConfigMap data (a key per NVIDIA pool + `default`) and the
   mig-parted document (an entry per MIG pool + `all-disabled`); keys and entries accelpool does
   not own are carried over untouched.
7. **Statuses** (`accelpool.poolstatus`), Events, remediation records, and when to plan again.

Callers: the reconciler (`accelpool.reconcile`) on every pass, `accelpool plan`, the tests and
`benchmarks/planner_scale.py`.
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from accelpool import api, conventions, nvidia
from accelpool.agents import AgentObservation
from accelpool.nodes import HealthCondition, NodeChange, NodeView, Taint, format_time, parse_time, tolerated
from accelpool.poolstatus import (
    Breaker,
    Member,
    PoolFacts,
    Selection,
    compute_status,
    describe_health,
    health_reason,
    invalid_status,
)
from accelpool_core import catalog

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
class PlannerOptions:
    now: datetime
    release_orphans: bool = True
    """Release nodes labelled with a pool that does not exist (False for offline plans)."""
    not_ready_grace_seconds: float = 300.0
    """A NotReady member is replaced by a spare only after this long."""
    karpenter_available: bool = True
    agent_backend: str = "nvml"
    tolerated_taints: tuple[str, ...] = conventions.ACCELERATOR_TAINTS
    """Taints (`key` or `key=value`) that do not keep a free node from being claimed; any other
    NoSchedule/NoExecute taint reserves the node for someone else."""
    health_stale_seconds: float = conventions.HEALTH_STALE_SECONDS
    """A health condition not rewritten for this long is read as Unknown (its agent stopped)."""
    healthy_since: Mapping[str, datetime] = field(default_factory=dict)
    """When the operator first saw AcceleratorHealthy True, for conditions without lastTransitionTime."""
    agents: Mapping[str, AgentObservation] | None = None
    """Each pool's agent DaemonSet, pods and FailedCreate Events (`accelpool.agents.observe`); None when
    they were not observed (an offline plan), so AgentReady rests on the agents' reports alone."""


# ---------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Remediation:
    """One remediation decision (for the `accelpool_remediations_total` metric and Events)."""

    pool: str
    node: str
    action: str
    """taint, cordon, untaint, uncordon or circuit_breaker."""
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
    member_labels: Mapping[str, str] = field(default_factory=dict)
    """The labels accelpool puts on every member (a Karpenter NodePool's template labels)."""

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

    def pool(self, name: str) -> PoolPlan | None:
        return next((p for p in self.pools if p.name == name), None)


# ---------------------------------------------------------------- the node edits of one pass


class _NodeEdit:
    """Accumulates what the pass wants on one node; becomes a `NodeChange`."""

    def __init__(self, view: NodeView) -> None:
        self.view = view
        self.pool: str | None = view.pool
        self.labels: dict[str, str | None] = {}
        self.annotations: dict[str, str | None] = {}
        self.taints: dict[tuple[str, str], Taint | None] = {}
        self.unschedulable: bool | None = None
        self.drop_health = False

    def label(self, key: str) -> str | None:
        return self.labels[key] if key in self.labels else self.view.labels.get(key)

    def annotation(self, key: str) -> str | None:
        return self.annotations[key] if key in self.annotations else self.view.annotations.get(key)

    def put_taint(self, taint: Taint) -> None:
        self.taints[(taint.key, taint.effect)] = taint

    def drop_taints(self, key: str) -> None:
        for taint in self.view.taints:
            if taint.key == key:
                self.taints[(taint.key, taint.effect)] = None
        for slot in list(self.taints):
            if slot[0] == key:
                self.taints[slot] = None

    def change(self) -> NodeChange:
        present = {(t.key, t.effect): t for t in self.view.taints}
        add = tuple(t for t in self.taints.values() if t is not None)
        remove = tuple(present[slot] for slot, t in self.taints.items() if t is None and slot in present)
        return NodeChange(
            node=self.view.name,
            pool=self.pool,
            labels=dict(self.labels),
            annotations=dict(self.annotations),
            add_taints=add,
            remove_taints=remove,
            unschedulable=self.unschedulable,
            drop_health=self.drop_health,
        )

    def view_after(self) -> NodeView:
        return self.view.apply(self.change())


@dataclass
class _PoolWork:
    """A valid, live pool during the pass."""

    input: PoolInput
    spec: api.ComputePoolSpec
    resolved: api.ResolvedAccelerator
    match_names: frozenset[str]
    desired: int
    karpenter: bool
    members: list[NodeView] = field(default_factory=list)
    new_members: list[NodeView] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    quarantine: dict[str, str] = field(default_factory=dict)
    """node → taint or cordon, decided this pass."""
    lift: set[str] = field(default_factory=set)
    breaker: Breaker = field(default_factory=Breaker)
    need: int = 0
    shortfall: str = ""

    @property
    def name(self) -> str:
        return self.input.name

    @property
    def filter_key(self) -> tuple[Any, ...]:
        return (self.match_names, self.resolved.count, tuple(sorted(self.spec.node_selector.items())))


@dataclass
class _Cursor:
    """Free candidates of one filter (accelerators, count, selector) in name order, and how far pools took them."""

    items: list[NodeView]
    position: int = 0
    skipped: Counter[str] = field(default_factory=Counter)


class _Requeue:
    def __init__(self) -> None:
        self.seconds: float | None = None

    def at(self, seconds: float) -> None:
        seconds = max(seconds, 1.0)
        self.seconds = seconds if self.seconds is None else min(self.seconds, seconds)


def _priority(pool: PoolInput) -> tuple[str, str]:
    return (pool.created or "", pool.name)


def _matches(work: _PoolWork, view: NodeView, *, current: bool) -> bool:
    """Whether a node qualifies for the pool; `current` members are given the benefit of the doubt."""
    detected = view.detected
    if detected is None:
        return current
    if detected.accelerator.name not in work.match_names:
        return False
    count = work.resolved.count
    if count is not None and detected.count < count:
        lenient = current and (detected.count == 0 or detected.mig_profile is not None)
        if not lenient:
            return False
    return all(view.labels.get(key) == value for key, value in work.spec.node_selector.items())


def _not_claimable(view: NodeView, reserved: Callable[[tuple[Taint, ...]], Taint | None]) -> str | None:
    """Why a free node cannot be claimed, or None (`reserved`: the first taint that keeps a pool off)."""
    if any(role in view.labels for role in conventions.CONTROL_PLANE_ROLES) or any(
        t.key in conventions.CONTROL_PLANE_ROLES for t in view.taints
    ):
        return "control-plane"
    if not view.ready:
        return "not Ready"
    if view.unschedulable:
        return "cordoned"
    if view.quarantine_taint is not None:
        return "quarantined"
    if view.health is not None and view.health.unhealthy:
        return "unhealthy"
    taint = reserved(view.taints) if view.taints else None
    if taint is not None:
        return f"tainted {taint.key}"
    return None


def _judge_health(view: NodeView, options: PlannerOptions) -> NodeView:
    """A health condition that its agent stopped rewriting, or that another pool's agent wrote, reads as
    Unknown/AgentSilent.

    A crash-looping or removed agent leaves its last verdict behind: a stale True must not count
    as healthy, and a stale False must not keep a repaired node out of every pool forever. The
    writer is the `pool` of the agent's health annotation.
    """
    health = view.health
    if health is None:
        return view
    writer = view.report.pool if view.report is not None else None
    last = health.heartbeat  # the agent always writes it; a condition without one has no known age
    if view.pool is not None and writer is not None and writer != view.pool:
        why = f"was written by the agent of pool {writer}, not of {view.pool}"
    elif last is not None and _seconds(options.now - last) > options.health_stale_seconds:
        why = f"was last written {format_time(last)}; its agent has stopped reporting"
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


@functools.lru_cache(maxsize=256)
def _prior_text(items: tuple[tuple[str, str | None], ...]) -> str:
    """The prior-labels annotation (JSON); members share a handful of them."""
    return json.dumps(dict(items), sort_keys=True)


def mig_retry_delay(retries: int) -> float:
    """Seconds before retry `retries + 1` of a failed MIG config: 60 s (a ConfigMap sync), doubling, at most 10 min."""
    return float(min(conventions.MIG_RETRY_MAX_SECONDS, conventions.MIG_RETRY_FIRST_SECONDS * 2**retries))


def parse_mig_retry(text: str | None) -> tuple[int, datetime | None]:
    """`3@2026-11-02T12:00:00Z` → (3, that time); anything else → (0, None)."""
    count, _, at = (text or "").partition("@")
    moment = parse_time(at)
    return (int(count), moment) if count.isdigit() and moment is not None else (0, None)


def format_mig_retry(retries: int, moment: datetime) -> str:
    return f"{retries}@{format_time(moment)}"


def _seconds(delta: timedelta) -> float:
    return delta.total_seconds()


class _Planner:
    def __init__(
        self, pools: Sequence[PoolInput], nodes: Sequence[NodeView], config: ConfigState, options: PlannerOptions
    ) -> None:
        self.by_name = {p.name: p for p in pools}  # a name given twice: the last one counts, as with kubectl apply
        self.pools = sorted(self.by_name.values(), key=_priority)
        self.nodes = sorted((_judge_health(n, options) for n in nodes), key=lambda n: n.name)
        self.config = config
        self.options = options
        self.now = options.now
        self.edits: dict[str, _NodeEdit] = {}
        self.events: list[EventIntent] = []
        self.remediations: list[Remediation] = []
        self.requeue = _Requeue()
        self.works: dict[str, _PoolWork] = {}
        self.held_invalid: dict[str, list[NodeView]] = defaultdict(list)
        self.free: dict[str, NodeView] = {}
        self.released_by: dict[str, list[str]] = defaultdict(list)
        self.held_by_entry: Counter[str] = Counter()
        self._reserving: dict[tuple[Taint, ...], Taint | None] = {}
        shared = {conventions.DEFAULT_DEVICE_PLUGIN_KEY, conventions.MIG_DISABLED_CONFIG}
        self.owned_config_names = (
            frozenset(conventions.config_name(p.name) for p in pools)
            | config.device_plugin_managed
            | config.mig_managed
        ) - shared

    # ------------------------------------------------------------ helpers

    def reserving_taint(self, taints: tuple[Taint, ...]) -> Taint | None:
        """The first taint that reserves a node for someone else (nodes share few taint sets: cached)."""
        if taints not in self._reserving:
            patterns = self.options.tolerated_taints
            self._reserving[taints] = next((t for t in taints if not tolerated(t, patterns)), None)
        return self._reserving[taints]

    def ours(self, config_label: str | None) -> bool:
        """Whether an NVIDIA config label value names one of accelpool's own configs.

        Ownership comes from accelpool's records only: a key of a live pool, or one listed in the
        ConfigMaps' managed-keys annotations. A name that merely starts with `accelpool-` is not ours.
        """
        return config_label is not None and config_label in self.owned_config_names

    def edit(self, view: NodeView) -> _NodeEdit:
        found = self.edits.get(view.name)
        if found is None:
            found = self.edits[view.name] = _NodeEdit(view)
        return found

    def event(self, kind: str, name: str, uid: str, type_: str, reason: str, message: str) -> None:
        self.events.append(EventIntent(kind, name, uid, type_, reason, message))

    def release(self, view: NodeView, pool: str) -> None:
        """Undo everything accelpool set on a node; it becomes a free candidate."""
        edit = self.edit(view)
        edit.pool = None
        edit.labels[conventions.POOL_LABEL] = None
        prior = view.prior_labels
        for key in (conventions.DEVICE_PLUGIN_CONFIG_LABEL, conventions.MIG_CONFIG_LABEL):
            current = edit.label(key)
            disabled_by_us = key == conventions.MIG_CONFIG_LABEL and current == conventions.MIG_DISABLED_CONFIG
            if not (self.ours(current) or (disabled_by_us and key in prior)):
                continue
            restored = prior.get(key)
            if key == conventions.MIG_CONFIG_LABEL:
                if key not in prior:  # the pool's own layout: MIG goes back off
                    restored = conventions.MIG_DISABLED_CONFIG
                if restored is None:  # it had no MIG config before it joined: leave nothing behind
                    edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = None
                elif restored != current:
                    edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = "pending"
            edit.labels[key] = restored
        for annotation in (
            conventions.JOINED_ANNOTATION,
            conventions.PRIOR_LABELS_ANNOTATION,
            conventions.CORDONED_ANNOTATION,
            conventions.HEALTH_ANNOTATION,  # the pool's agent wrote it; it says nothing once the node is free
            conventions.MIG_RETRY_ANNOTATION,
        ):
            if annotation in view.annotations:
                edit.annotations[annotation] = None
        if view.quarantine_taint is not None:
            self.event(
                "Node",
                view.name,
                view.uid,
                "Warning",
                "QuarantineReleased",
                f"left pool {pool} while quarantined ({view.quarantine_taint.value}); "
                f"{conventions.HEALTH_CONDITION} is {view.health.status if view.health else 'not reported'}",
            )
        edit.drop_taints(conventions.POOL_TAINT_KEY)
        edit.drop_taints(conventions.QUARANTINE_TAINT_KEY)
        if view.cordoned_by_us and view.unschedulable:
            edit.unschedulable = False
        # The pool's agent leaves with the node: its condition goes too, except a False, which keeps a node
        # known to be bad out of other pools until it ages out (`health_stale_seconds`).
        edit.drop_health = view.health_index is not None and not (view.health is not None and view.health.unhealthy)
        self.released_by[pool].append(view.name)
        self.free[view.name] = edit.view_after()

    def without_agent_leftovers(self, view: NodeView) -> NodeView:
        """A node in no pool keeps nothing an agent wrote.

        `release` takes the agent's annotation and condition off a node, but the agent pod outlives the
        release (it is terminating, or its node is slow to hear of it) and may write its report once
        more, after its pool is gone: the annotation goes, and the condition unless it is a False that has
        not aged out (as on release, a node known to be bad stays out of other pools until then).
        """
        annotated = conventions.HEALTH_ANNOTATION in view.annotations
        condition = view.health_index is not None and not (view.health is not None and view.health.unhealthy)
        if not annotated and not condition:
            return view
        edit = self.edit(view)
        if annotated:
            edit.annotations[conventions.HEALTH_ANNOTATION] = None
        edit.drop_health = condition
        return edit.view_after()

    # ------------------------------------------------------------ 1. membership

    def start(self) -> None:
        resolutions: dict[api.AcceleratorRequest, api.ResolvedAccelerator] = {}
        for pool in self.pools:
            if not pool.valid or pool.deleting:
                continue
            assert pool.spec is not None
            resolved = resolutions.get(pool.spec.accelerator)
            if resolved is None:  # resolving depends on the accelerator request only; pools share a few
                resolved = resolutions[pool.spec.accelerator] = pool.spec.resolve()
            self.works[pool.name] = _PoolWork(
                input=pool,
                spec=pool.spec,
                resolved=resolved,
                match_names=frozenset(e.name for e in resolved.matches),
                desired=pool.spec.nodes,
                karpenter=pool.spec.provisioner.type == "karpenter",
            )

    def membership(self) -> None:
        for view in self.nodes:
            if view.label_problems:
                self.event(
                    "Node",
                    view.name,
                    view.uid,
                    "Warning",
                    "AcceleratorLabelsInvalid",
                    "not recognised as an accelerator node: " + "; ".join(view.label_problems),
                )
            owner = view.pool
            if owner is None:
                self.free[view.name] = self.without_agent_leftovers(view)
                continue
            if view.detected is not None:
                self.held_by_entry[view.detected.accelerator.name] += 1
            pool = self.by_name.get(owner)
            if pool is None:
                if self.options.release_orphans:
                    self.release(view, owner)
                continue
            if pool.deleting:
                self.release(view, owner)
                continue
            work = self.works.get(owner)
            if work is None:
                self.held_invalid[owner].append(view)
                continue
            if _matches(work, view, current=True):
                work.members.append(view)
            else:
                self.release(view, owner)
                work.released.append(view.name)
                self.event(
                    "ComputePool",
                    work.name,
                    work.input.uid,
                    "Normal",
                    "NodeNoLongerMatches",
                    f"released {view.name}: it no longer matches {work.resolved.display}"
                    + (f" and {work.spec.node_selector}" if work.spec.node_selector else ""),
                )

    # ------------------------------------------------------------ 2. remediation

    def _healthy_for(self, view: NodeView) -> float | None:
        health = view.health
        if health is None or not health.healthy:
            return None
        since = health.since or self.options.healthy_since.get(view.name)
        if since is None:
            return 0.0
        return max(0.0, _seconds(self.now - since))

    def remediate(self, work: _PoolWork) -> None:
        policy = work.spec.health.remediation
        hold = work.spec.health.hold_down_seconds
        limit = work.spec.health.max_unavailable_nodes(work.desired)
        still_quarantined = 0
        for view in work.members:
            if not view.quarantined:
                continue
            healthy_for = self._healthy_for(view)
            if healthy_for is not None and healthy_for >= hold:
                work.lift.add(view.name)
                action = "uncordon" if view.cordoned_by_us and view.quarantine_taint is None else "untaint"
                self.remediations.append(Remediation(work.name, view.name, action, "HoldDownPassed"))
                message = f"{view.name}: {conventions.HEALTH_CONDITION} True for {int(healthy_for)}s; quarantine lifted"
                self.event("Node", view.name, view.uid, "Normal", "QuarantineLifted", message)
                self.event("ComputePool", work.name, work.input.uid, "Normal", "QuarantineLifted", message)
            else:
                still_quarantined += 1
                if healthy_for is not None:
                    self.requeue.at(hold - healthy_for)
        unhealthy = [v for v in work.members if not v.quarantined and v.health is not None and v.health.unhealthy]
        for view in unhealthy:
            reason = health_reason(view)
            why = describe_health(view)
            if policy == "none":
                self.event(
                    "ComputePool",
                    work.name,
                    work.input.uid,
                    "Warning",
                    "NodeUnhealthy",
                    f"{view.name}: {why} (remediation none: reported only)",
                )
                continue
            if policy == "cordon" and view.cordoned_by_others:
                continue  # already unschedulable; not ours to uncordon later
            if still_quarantined >= limit:
                message = (
                    f"not quarantining {view.name} ({why}): {still_quarantined} of {work.desired} nodes already "
                    f"quarantined and maxUnavailable {work.spec.health.max_unavailable} allows {limit}"
                )
                work.breaker = Breaker(open=True, message=message)
                self.remediations.append(Remediation(work.name, view.name, "circuit_breaker", reason))
                self.event("ComputePool", work.name, work.input.uid, "Warning", "CircuitBreakerOpen", message)
                continue
            still_quarantined += 1
            work.quarantine[view.name] = policy
            what = (
                f"tainted {conventions.QUARANTINE_TAINT_KEY}={reason}:{conventions.NO_SCHEDULE}"
                if policy == "taint"
                else "cordoned"
            )
            message = f"{view.name}: {why}; {what}"
            self.remediations.append(Remediation(work.name, view.name, policy, reason))
            self.event("Node", view.name, view.uid, "Warning", "NodeQuarantined", message)
            self.event("ComputePool", work.name, work.input.uid, "Warning", "NodeQuarantined", message)

    # ------------------------------------------------------------ 3. sizing

    def _serving_for_sizing(self, work: _PoolWork, view: NodeView) -> bool:
        """Counts toward `nodes`: not quarantined after this pass, not cordoned by others, not long NotReady."""
        quarantined = (view.quarantined and view.name not in work.lift) or view.name in work.quarantine
        if quarantined or view.cordoned_by_others:
            return False
        if view.ready:
            return True
        if view.ready_since is None:
            return False
        waited = _seconds(self.now - view.ready_since)
        if waited >= self.options.not_ready_grace_seconds:
            return False
        self.requeue.at(self.options.not_ready_grace_seconds - waited)
        return True

    def _joined(self, view: NodeView) -> tuple[datetime, str]:
        """When a member joined: its joined-at annotation, else (written by hand, older versions) the node's age."""
        oldest = datetime.min.replace(tzinfo=self.now.tzinfo)
        return (view.joined_at or parse_time(view.created) or oldest, view.name)

    def size(self, work: _PoolWork) -> None:
        serving = [v for v in work.members if self._serving_for_sizing(work, v)]
        if work.karpenter:
            return
        surplus = len(serving) - work.desired
        if surplus > 0:
            newest_first = sorted(serving, key=self._joined, reverse=True)
            for view in newest_first[:surplus]:
                work.members.remove(view)
                work.released.append(view.name)
                self.release(view, work.name)
            work.need = 0
        else:
            work.need = -surplus

    # ------------------------------------------------------------ 4. claims

    def claim(self) -> None:
        buckets: dict[str, list[NodeView]] = defaultdict(list)
        for name in sorted(self.free):
            view = self.free[name]
            if view.detected is not None:
                buckets[view.detected.accelerator.name].append(view)
        cursors: dict[tuple[Any, ...], _Cursor] = {}
        taken: set[str] = set()
        for work in self.works.values():
            if work.karpenter or work.need <= 0:
                continue
            key = work.filter_key
            cursor = cursors.get(key)
            if cursor is None:
                items = [v for name in sorted(work.match_names) for v in buckets.get(name, ())]
                if len(work.match_names) > 1:
                    items.sort(key=lambda v: v.name)
                cursor = cursors[key] = _Cursor(items)
            while work.need > 0 and cursor.position < len(cursor.items):
                view = cursor.items[cursor.position]
                cursor.position += 1
                if view.name in taken:
                    cursor.skipped["taken by other pools"] += 1
                    continue
                why = _not_claimable(view, self.reserving_taint)
                if why is None and not _matches(work, view, current=False):
                    why = "smaller or not selected"
                if why is not None:
                    cursor.skipped[why] += 1
                    continue
                taken.add(view.name)
                work.new_members.append(view)
                work.need -= 1
            if work.need > 0:
                held = sum(self.held_by_entry[name] for name in work.match_names) - len(work.members)
                reasons = dict(cursor.skipped)
                if held > 0:
                    reasons["held by other pools"] = reasons.get("held by other pools", 0) + held
                work.shortfall = ", ".join(f"{n} {why}" for why, n in sorted(reasons.items()) if n)

    # ------------------------------------------------------------ 5. node changes

    def member_changes(self, work: _PoolWork) -> dict[str, str]:
        """Put the pool's labels, annotations and taints on each member; returns the labels every member gets."""
        pool = work.name
        key = conventions.config_name(pool)
        entry = work.resolved.entry
        nvidia_pool = entry.vendor == catalog.Vendor.NVIDIA
        mig_pool = work.spec.mig is not None
        # A whole-GPU pool of MIG-capable GPUs needs MIG off, or the plugin advertises MIG devices as GPUs.
        mig_config = key if mig_pool else (conventions.MIG_DISABLED_CONFIG if entry.mig_capable else None)
        member_labels = {conventions.POOL_LABEL: pool}
        if nvidia_pool:
            member_labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = key
        if mig_config is not None:
            member_labels[conventions.MIG_CONFIG_LABEL] = mig_config
        joined = format_time(self.now)
        new_names = {v.name for v in work.new_members}
        for view in [*work.members, *work.new_members]:
            original = self.edits[view.name].view if view.name in self.edits else view
            edit = self.edit(original)
            edit.pool = pool
            new = view.name in new_names
            prior = {} if new else dict(original.prior_labels)
            if new:
                for label in (conventions.DEVICE_PLUGIN_CONFIG_LABEL, conventions.MIG_CONFIG_LABEL):
                    current = edit.label(label)
                    wanted = member_labels.get(label)
                    absent_is_prior = (
                        label == conventions.MIG_CONFIG_LABEL and wanted == conventions.MIG_DISABLED_CONFIG
                    )
                    replaced = (current is not None or absent_is_prior) and wanted is not None and current != wanted
                    if replaced and not self.ours(current):
                        prior[label] = current  # another controller's value (or none): restored on release
            edit.labels[conventions.POOL_LABEL] = pool
            if nvidia_pool:
                edit.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = key
            elif self.ours(edit.label(conventions.DEVICE_PLUGIN_CONFIG_LABEL)):
                edit.labels[conventions.DEVICE_PLUGIN_CONFIG_LABEL] = prior.pop(
                    conventions.DEVICE_PLUGIN_CONFIG_LABEL, None
                )
            mig_now = edit.label(conventions.MIG_CONFIG_LABEL)
            mig_want = mig_now
            if mig_config is not None:
                mig_want = self._mig_retry(work, original, edit, mig_config)
            elif self.ours(mig_now):
                mig_want = prior.pop(conventions.MIG_CONFIG_LABEL, None) or conventions.MIG_DISABLED_CONFIG
            if mig_want != mig_now or mig_config is not None:
                edit.labels[conventions.MIG_CONFIG_LABEL] = mig_want
            if mig_want is not None and mig_want != original.labels.get(conventions.MIG_CONFIG_LABEL):
                edit.labels[conventions.MIG_CONFIG_STATE_LABEL] = "pending"
            elif conventions.MIG_CONFIG_STATE_LABEL in edit.labels and mig_want == mig_now:
                del edit.labels[conventions.MIG_CONFIG_STATE_LABEL]
            if not work.karpenter:
                edit.annotations[conventions.JOINED_ANNOTATION] = (
                    joined if new else (original.annotations.get(conventions.JOINED_ANNOTATION) or joined)
                )
            prior_text = _prior_text(tuple(sorted(prior.items()))) if prior else None
            if prior_text != original.annotations.get(conventions.PRIOR_LABELS_ANNOTATION):
                edit.annotations[conventions.PRIOR_LABELS_ANNOTATION] = prior_text
            elif conventions.PRIOR_LABELS_ANNOTATION in edit.annotations:
                del edit.annotations[conventions.PRIOR_LABELS_ANNOTATION]
            if work.spec.dedicated:
                edit.put_taint(Taint(conventions.POOL_TAINT_KEY, conventions.NO_SCHEDULE, pool))
            else:
                edit.drop_taints(conventions.POOL_TAINT_KEY)
            self._quarantine_changes(work, view, edit)
        return member_labels

    def _mig_retry(self, work: _PoolWork, view: NodeView, edit: _NodeEdit, wanted: str) -> str | None:
        """The MIG config label for this pass: `wanted`, or None to take it off once.

        NVIDIA's MIG manager never retries a failed config by itself: it reacts only when the
        label's value changes (and ignores its removal). A config it could not find yet, because the
        kubelet projects ConfigMap updates into its pod up to a minute later, would stay `failed`
        for good. So a member whose state is `failed` for the pool's config is given a timestamp
        (`accelpool.io/mig-retry: <retries>@<time>`), and after a backoff its label is taken off
        and put back on the next pass, which the MIG manager sees as a change. At most
        `MIG_RETRIES` times; a success clears the record.
        """
        record = view.annotations.get(conventions.MIG_RETRY_ANNOTATION)
        state = view.labels.get(conventions.MIG_CONFIG_STATE_LABEL)
        failed = state == "failed" and view.labels.get(conventions.MIG_CONFIG_LABEL) == wanted
        if record is None and not failed:
            return wanted
        retries, since = parse_mig_retry(record)
        if not failed:
            if since is not None and state == "success":
                edit.annotations[conventions.MIG_RETRY_ANNOTATION] = None
            return wanted
        if since is None:
            edit.annotations[conventions.MIG_RETRY_ANNOTATION] = format_mig_retry(0, self.now)
            self.requeue.at(mig_retry_delay(0))
            return wanted
        if retries >= conventions.MIG_RETRIES:
            return wanted
        waited = _seconds(self.now - since)
        delay = mig_retry_delay(retries)
        if waited < delay:
            self.requeue.at(delay - waited)
            return wanted
        edit.annotations[conventions.MIG_RETRY_ANNOTATION] = format_mig_retry(retries + 1, self.now)
        self.event(
            "Node",
            view.name,
            view.uid,
            "Warning",
            "MigConfigRetried",
            f"{conventions.MIG_CONFIG_STATE_LABEL}=failed for {wanted}: setting {conventions.MIG_CONFIG_LABEL} again "
            f"(retry {retries + 1} of {conventions.MIG_RETRIES}); the MIG manager does not retry by itself",
        )
        return None

    def _quarantine_changes(self, work: _PoolWork, view: NodeView, edit: _NodeEdit) -> None:
        decided = work.quarantine.get(view.name)
        if view.name in work.lift:
            edit.drop_taints(conventions.QUARANTINE_TAINT_KEY)
            if view.cordoned_by_us:
                edit.annotations[conventions.CORDONED_ANNOTATION] = None
                if view.unschedulable:
                    edit.unschedulable = False
        elif decided == "taint":
            edit.put_taint(Taint(conventions.QUARANTINE_TAINT_KEY, conventions.NO_SCHEDULE, health_reason(view)))
        elif decided == "cordon":
            edit.unschedulable = True
            edit.annotations[conventions.CORDONED_ANNOTATION] = "true"
        elif view.quarantine_taint is not None:
            edit.put_taint(view.quarantine_taint)

    # ------------------------------------------------------------ 6. configs

    def device_plugin(self) -> tuple[dict[str, str], frozenset[str], dict[str, Any]]:
        current = dict(self.config.device_plugin or {})
        owned_before = self.config.device_plugin_managed
        documents: dict[str, Any] = {}
        data = {k: v for k, v in current.items() if k not in owned_before}
        managed: set[str] = set()
        if conventions.DEFAULT_DEVICE_PLUGIN_KEY not in data:
            documents[conventions.DEFAULT_DEVICE_PLUGIN_KEY] = nvidia.DEFAULT_DEVICE_PLUGIN_CONFIG
        for pool in self.pools:
            key = conventions.config_name(pool.name)
            if pool.deleting:
                continue
            work = self.works.get(pool.name)
            if work is not None:
                if work.resolved.entry.vendor == catalog.Vendor.NVIDIA:
                    documents[key] = nvidia.device_plugin_config(work.spec, work.resolved)
            elif key in current and key in owned_before:
                documents[key] = nvidia.load(current[key])  # invalid pool: touch nothing
                data[key] = current[key]
                managed.add(key)
        for key, document in documents.items():
            if key not in data:
                data[key] = nvidia.dump(document)
            managed.add(key)
        return data, frozenset(managed), documents

    def mig(self) -> tuple[dict[str, Any], frozenset[str]]:
        current_doc = self.config.mig if isinstance(self.config.mig, Mapping) else {}
        current = dict(current_doc.get("mig-configs") or {})
        owned_before = self.config.mig_managed
        entries = {k: v for k, v in current.items() if k not in owned_before}
        managed: set[str] = set()
        if conventions.MIG_DISABLED_CONFIG not in entries:
            entries[conventions.MIG_DISABLED_CONFIG] = nvidia.MIG_DISABLED_ENTRY
            managed.add(conventions.MIG_DISABLED_CONFIG)
        for pool in self.pools:
            key = conventions.config_name(pool.name)
            if pool.deleting:
                continue
            work = self.works.get(pool.name)
            if work is not None:
                if work.spec.mig is not None:
                    entries[key] = nvidia.mig_parted_entry(work.spec.mig_layout())
                    managed.add(key)
            elif key in current and key in owned_before:
                entries[key] = current[key]
                managed.add(key)
        return nvidia.mig_parted_document(entries), frozenset(managed)

    # ------------------------------------------------------------ 7. the whole pass

    def run(self) -> Plan:
        self.start()
        self.membership()
        for work in self.works.values():
            self.remediate(work)
            self.size(work)
        self.claim()
        member_labels = {work.name: self.member_changes(work) for work in self.works.values()}
        changes = {name: edit.change() for name, edit in sorted(self.edits.items())}
        device_plugin, dp_managed, dp_documents = self.device_plugin()
        mig_document, mig_managed = self.mig()

        plans: list[PoolPlan] = []
        for pool in self.pools:
            plans.append(self._pool_plan(pool, changes, member_labels.get(pool.name, {})))
        for pool_name, names in sorted(self.released_by.items()):
            owner = self.by_name.get(pool_name)
            if owner is not None:
                self.event("ComputePool", pool_name, owner.uid, "Normal", "NodesReleased", _listing("released", names))
        return Plan(
            pools=tuple(sorted(plans, key=lambda p: p.name)),
            changes=changes,
            device_plugin=device_plugin,
            device_plugin_managed=dp_managed,
            device_plugin_documents=dp_documents,
            mig_document=mig_document,
            mig_managed=mig_managed,
            events=tuple(self.events),
            remediations=tuple(self.remediations),
            requeue_after=self.requeue.seconds,
        )

    def _pool_plan(self, pool: PoolInput, changes: Mapping[str, NodeChange], member_labels: dict[str, str]) -> PoolPlan:
        if pool.deleting:
            return PoolPlan(pool.name, pool.uid, pool.valid, True, pool.spec, (), None)
        work = self.works.get(pool.name)
        if work is None:
            held = self.held_invalid.get(pool.name, [])
            facts = PoolFacts(
                name=pool.name,
                spec=pool.spec,
                problems=pool.problems or ("invalid spec",),
                unplannable=pool.unplannable,
                generation=pool.generation,
                previous=pool.previous,
                now=self.now,
                members=tuple(Member(v) for v in held),
            )
            status = invalid_status(facts)
            return PoolPlan(pool.name, pool.uid, False, False, pool.spec, tuple(v.name for v in held), status)
        established = pool.previous is not None and pool.previous.nodes.members > 0
        if work.new_members and established:  # the first fill is in the status; changes later are Events
            self.event(
                "ComputePool",
                work.name,
                pool.uid,
                "Normal",
                "NodesClaimed",
                _listing("claimed", [v.name for v in work.new_members]),
            )
        views = [*work.members, *work.new_members]
        members = tuple(Member(self.edits[v.name].view, changes.get(v.name)) for v in views)
        entry = work.resolved.entry
        facts = PoolFacts(
            name=pool.name,
            spec=work.spec,
            problems=(),
            generation=pool.generation,
            previous=pool.previous,
            now=self.now,
            members=members,
            selection=Selection(
                desired=work.desired,
                provisioner=work.spec.provisioner.type,
                shortfall=work.shortfall,
                karpenter_available=self.options.karpenter_available,
            ),
            breaker=work.breaker,
            resolved=work.resolved,
            agent_verifies=entry.vendor == catalog.Vendor.NVIDIA or self.options.agent_backend in ("fake", "cpu"),
            agents=None if self.options.agents is None else self.options.agents.get(pool.name, AgentObservation()),
        )
        status = compute_status(facts)
        peak = entry.peaks.get(work.spec.health.matmul.dtype)
        expected = round(peak * status.capacity.gpus, 1) if peak is not None else None
        tolerations = tuple(t for t in status.scheduling.tolerations if t.key != conventions.POOL_TAINT_KEY)
        return PoolPlan(
            name=pool.name,
            uid=pool.uid,
            valid=True,
            deleting=False,
            spec=work.spec,
            members=tuple(sorted(v.name for v in views)),
            status=status,
            breaker_open=work.breaker.open,
            expected_tflops=expected,
            tolerations=tolerations,
            member_labels=member_labels,
        )


def _listing(verb: str, names: Sequence[str]) -> str:
    shown = ", ".join(sorted(names)[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return f"{verb} {len(names)} node(s): {shown}{more}"


def plan(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState,
    options: PlannerOptions,
    unplannable: Mapping[str, str] | None = None,
) -> Plan:
    """The desired state of the whole cluster (see the module docstring). Deterministic for equal inputs.

    One pool can never stop the others: when planning raises, the pools that raise on their own are
    found by bisection, set aside (`PoolInput.set_aside`: Valid=False naming the error, nothing
    written for them, their nodes held as they are) and the rest are planned again. `unplannable`
    names pools the caller already knows cannot be planned (e.g. their agent DaemonSet could not be
    rendered). Raises only when the failure needs several pools together to happen.
    """
    failed = _foreign_config_keys(pools, config) | dict(unplannable or {})
    while True:
        inputs = [p.set_aside(failed[p.name]) if p.name in failed else p for p in pools]
        try:
            result = _Planner(inputs, nodes, config, options).run()
        except Exception:
            culprits = _failing_pools([p for p in inputs if not p.unplannable], nodes, config, options)
            if not culprits:
                raise
            failed.update(culprits)
            continue
        planned = {p.name for p in result.pools}
        return replace(result, unplannable={name: why for name, why in failed.items() if name in planned})


def _foreign_config_keys(pools: Sequence[PoolInput], config: ConfigState) -> dict[str, str]:
    """Pools whose config key already exists in a ConfigMap and is not accelpool's: they are not planned.

    accelpool never overwrites what it did not write, so such a pool cannot be configured until
    the key is renamed or removed (or the pool is).
    """
    mig_entries = config.mig.get("mig-configs") if isinstance(config.mig, Mapping) else None
    places = (  # (where, what is there, what accelpool owns, its annotation, only for MIG pools?)
        ("device-plugin ConfigMap", config.device_plugin or {}, config.device_plugin_managed, "managed-keys", False),
        (
            "MIG ConfigMap's mig-configs",
            mig_entries if isinstance(mig_entries, Mapping) else {},
            config.mig_managed,
            "managed-entries",
            True,
        ),
    )
    found: dict[str, str] = {}
    for pool in pools:
        if not pool.valid or pool.deleting or pool.spec is None:
            continue
        key = conventions.config_name(pool.name)
        for what, present, managed, annotation, mig_only in places:
            if key in present and key not in managed and (pool.spec.mig is not None or not mig_only):
                found[pool.name] = (
                    f"the {what} already holds {key!r}, which accelpool did not write (it is not in the "
                    f"ConfigMap's {conventions.DOMAIN}/{annotation} annotation); accelpool will not overwrite it: "
                    "rename or remove that key, or rename the pool"
                )
                break
    return found


def _failing_pools(
    pools: Sequence[PoolInput], nodes: Sequence[NodeView], config: ConfigState, options: PlannerOptions
) -> dict[str, str]:
    """The pools whose planning raises on its own (bisection: O(log pools) plans per culprit)."""
    offline = replace(options, release_orphans=False)
    try:
        _Planner(pools, nodes, config, offline).run()
    except Exception as error:
        if len(pools) == 1:
            return {pools[0].name: f"accelpool could not plan this pool: {type(error).__name__}: {error}"[:1000]}
    else:
        return {}
    half = len(pools) // 2
    return _failing_pools(pools[:half], nodes, config, options) | _failing_pools(pools[half:], nodes, config, options)
