"""Burn-in: a node that joins a pool serves pods only after its agent has passed a full check cycle.

While the pool's policy asks for it (`spec.health.burnIn`; unset: on for static pools, off for
Karpenter pools, whose NodePool it would change: `enabled`), whatever the vendor (every vendor's
agent backend verifies its devices), a joining node carries `accelpool.io/burn-in=pending:NoSchedule` from the
write that makes it a member (static pools, `apply_burn_in`; Karpenter puts it on the nodes it
provisions, as a NodePool startup taint, `accelpool.decide.render.nodepool`). `judge` then decides, for
each member in burn-in:

- **passed**: its AcceleratorHealthy is True and fresh (`membership.judge_health` reads a stale
  condition, or one another pool's agent wrote, as Unknown), and this pool's agent reports a
  completed full cycle (`HealthReport.complete`: compute checks included) with status Healthy:
  the taint comes off, with a `BurnInPassed` Event on the node;
- **failed**: its AcceleratorHealthy is False: the taint's value turns `failed` (`BurnInFailed`,
  a Warning on the node and the pool); the remediation stage quarantines the node as it would
  any member. accelpool never lifts a `failed` taint: the quarantine's release (healthy for the
  hold-down) proves nothing about a fresh burn-in, and a node that failed once is never handed to
  workloads on its own. Whoever repaired it sets the taint back to `pending`
  (`conventions.BURN_IN_FAILED`) and the node burns in again;
- otherwise it waits.

Members at the time burn-in is turned on (or accelpool upgraded) are not tainted: only joining
nodes are. Turning the policy off lifts the taint
(`BurnInCancelled`). Release takes it off with everything else accelpool set (`Ledger.release`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import accelpool_api as api
from accelpool.decide.planning.ledger import NodeEdit
from accelpool.decide.planning.model import EventIntent
from accelpool.decide.poolstatus import describe_health
from accelpool.model.nodes import NodeView, Taint
from accelpool_api import conventions
from accelpool_core.protocol import HealthStatus


@dataclass(frozen=True)
class BurnInDecision:
    """One pool's burn-in this pass."""

    active: bool = False
    """Joining nodes get the burn-in taint: the policy asks for it and the pool's agent can verify."""
    lift: frozenset[str] = frozenset()
    """Members whose burn-in taint comes off this pass."""
    failed: frozenset[str] = frozenset()
    """Members whose burn-in taint reads `failed` once this pass is written (newly failed ones included)."""
    events: tuple[EventIntent, ...] = ()

    def failed_after(self, view: NodeView) -> bool:
        """Whether the member is in failed burn-in once this decision is written (it cannot serve soon)."""
        return view.name in self.failed


NO_BURN_IN = BurnInDecision()


def enabled(spec: api.ComputePoolSpec) -> bool:
    """The pool's burn-in policy: `spec.health.burnIn`, else on for static pools and off for Karpenter pools.

    On a Karpenter pool burn-in is a startup taint of its NodePool, which Karpenter hashes (`startupTaints`
    carries no `hash:"ignore"` tag in `pkg/apis/v1/nodeclaim.go`): turning it on is drift, and Karpenter
    would replace every existing node of the pool. Upgrading accelpool must not do that unasked.
    """
    if spec.health.burn_in is not None:
        return spec.health.burn_in
    return spec.provisioner.type != "karpenter"


def burn_in_taint(view: NodeView) -> Taint | None:
    for taint in view.taints:  # a loop, not a generator: called for every member several times a pass
        if taint.key == conventions.BURN_IN_TAINT_KEY:
            return taint
    return None


def passed_full_cycle(view: NodeView, pool: str) -> bool:
    """Whether this pool's agent reports a completed full cycle and the node healthy, in a fresh condition."""
    health, report = view.health, view.report
    return (
        health is not None
        and health.healthy
        and report is not None
        and report.complete
        and report.pool == pool
        and report.status is HealthStatus.HEALTHY
    )


def judge(
    pool: str,
    uid: str,
    spec: api.ComputePoolSpec,
    members: Sequence[NodeView],
) -> BurnInDecision:
    """Which members in burn-in pass, fail or wait (see the module docstring)."""
    active = enabled(spec)
    in_burn_in = [(view, taint) for view in members if (taint := burn_in_taint(view)) is not None]
    if not in_burn_in:
        return BurnInDecision(active=active)  # the common case, decided for every pool and pass
    lift: set[str] = set()
    failed: set[str] = set()
    events: list[EventIntent] = []

    def tell(view: NodeView, type_: str, reason: str, message: str) -> None:
        """An Event on the node; a Warning on the pool too (a pool's first fill is told by its status alone)."""
        events.append(EventIntent("Node", view.name, view.uid, type_, reason, message))
        if type_ == "Warning":
            events.append(EventIntent("ComputePool", pool, uid, type_, reason, message))

    for view, taint in in_burn_in:
        passed = passed_full_cycle(view, pool)
        if not active:
            lift.add(view.name)
            why = "burn-in is off for this pool (spec.health.burnIn)"
            tell(view, "Normal", "BurnInCancelled", f"{view.name}: burn-in taint lifted: {why}")
        elif taint.value == conventions.BURN_IN_FAILED:
            failed.add(view.name)  # until someone who repaired it sets it back to pending
        elif passed:
            lift.add(view.name)
            message = (
                f"{view.name}: passed burn-in (a full check cycle, all passed); {conventions.BURN_IN_TAINT_KEY} lifted"
            )
            tell(view, "Normal", "BurnInPassed", message)
        elif view.health is not None and view.health.unhealthy:
            failed.add(view.name)
            message = (
                f"{view.name}: failed burn-in: {describe_health(view)}; it keeps "
                f"{conventions.BURN_IN_TAINT_KEY}={conventions.BURN_IN_FAILED}:{conventions.NO_SCHEDULE} and serves "
                f"nothing; once repaired, set the taint back to {conventions.BURN_IN_PENDING} to burn it in again"
            )
            tell(view, "Warning", "BurnInFailed", message)
    return BurnInDecision(
        active=active,
        lift=frozenset(lift),
        failed=frozenset(failed),
        events=tuple(events),
    )


def apply_burn_in(decision: BurnInDecision, view: NodeView, edit: NodeEdit, *, joining: bool) -> None:
    """The member's burn-in taint as decided: put on a joining node, lifted, turned `failed`, or kept as it is.

    A taint someone took off by hand is not put back on a member (only joining nodes get one)."""
    if joining:
        if decision.active:
            edit.put_taint(Taint(conventions.BURN_IN_TAINT_KEY, conventions.NO_SCHEDULE, conventions.BURN_IN_PENDING))
        return
    taint = burn_in_taint(view)
    if taint is None:
        return
    if view.name in decision.lift:
        edit.drop_taints(conventions.BURN_IN_TAINT_KEY)
    elif view.name in decision.failed:
        edit.put_taint(Taint(conventions.BURN_IN_TAINT_KEY, taint.effect, conventions.BURN_IN_FAILED))
    else:
        edit.put_taint(taint)  # burn-in goes on
