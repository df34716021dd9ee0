"""What one reconcile pass wants the cluster to look like, decided in one pure step.

`decide(pools, nodes, config, options, ...)` is the "plan" stage of a pass (`accelpool.runtime.controller`):

1. `accelpool.decide.planning.plan`: membership, remediation, sizing, claims, every node's change, the
   NVIDIA configs, each pool's status, Events, and when to plan again. Given the previous pass's
   `Desired`, only what changed since is planned (`accelpool.decide.planning.incremental`: the same
   plan), and a pool planned as before keeps its rendered objects;
2. `render_owned`: each planned pool's agent DaemonSet and, for a Karpenter pool where Karpenter
   is installed, its NodePool (`accelpool.decide.render`). A pool whose rendering raises is set aside
   (`Valid=False` naming the error) and the cluster is planned again without it, so one pool can
   never stop the others;
3. `accelpool.decide.configmaps.versions`: the staged and the final version of both NVIDIA ConfigMaps;
4. `accelpool.decide.dra`, for `allocation: DRA` pools: before planning, members whose faults are answered
   GPU by GPU are planned as healthy; after it, each DRA pool's DeviceClass and DeviceTaintRules, and its status
   from the ResourceSlices;
5. `accelpool.decide.kueue.decide`: the Kueue ResourceFlavors and ClusterQueue quotas of the pools that ask
   for Kueue, and their KueueSynced conditions.

`Desired` holds all of it. The shell decides nothing more: it compares each part with what is
stored (`accelpool.decide.patches`) and writes the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from accelpool.decide import configmaps, kueue, render
from accelpool.decide.dra import plan as dra
from accelpool.decide.dra.plan import DraInputs, DraPlan
from accelpool.decide.dra.quarantine import GpuDecision
from accelpool.decide.planning import ConfigState, Plan, PlannerOptions, PoolInput, PoolPlan
from accelpool.decide.planning.incremental import Memo, replan
from accelpool.model.nodes import NodeView


@dataclass(frozen=True)
class OwnedObjects:
    """What one pool owns besides node labels: its agent DaemonSet and, for Karpenter pools, a NodePool."""

    daemonset: dict[str, Any]
    nodepool: dict[str, Any] | None = None


@dataclass(frozen=True)
class Desired:
    """Everything a pass writes, as values."""

    plan: Plan
    owned: Mapping[str, OwnedObjects]
    """Pool name → its rendered objects (valid pools that are not being deleted)."""
    configmaps: configmaps.ConfigMapVersions
    kueue: kueue.KueuePlan = field(default_factory=kueue.KueuePlan)
    """The Kueue objects of the pools that ask for Kueue (`accelpool.decide.kueue`)."""
    memo: Memo | None = None
    """What the plan was made of: the next pass plans only what changed since (`incremental`)."""
    dra: DraPlan | None = None
    """The DRA pools' DeviceClasses and DeviceTaintRules (`accelpool.decide.dra`); None: DRA was not observed."""


def decide(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView] | Mapping[str, NodeView],
    config: ConfigState,
    options: PlannerOptions,
    *,
    unplannable: Mapping[str, str],
    agent: render.AgentRendering,
    current_mig_text: str | None,
    kueue_observed: kueue.KueueObserved | None = None,
    previous: Desired | None = None,
    dra_inputs: DraInputs | None = None,
) -> Desired:
    """The desired state; `unplannable` names pools already known to fail (name → why); `kueue_observed`: what
    Kueue holds (None: nothing is decided for Kueue); `previous`: the last pass's, made with the same `agent`.
    `nodes` may be given by name (`incremental.replan`)."""
    planned_nodes = nodes
    decisions: dict[str, GpuDecision] = {}
    views: Sequence[NodeView] = ()
    if dra_inputs is not None:
        views = list(nodes.values()) if isinstance(nodes, Mapping) else nodes
        planned_nodes, decisions = dra.prepare(pools, views, dra_inputs, options)
    memo = replan(previous.memo if previous is not None else None, pools, planned_nodes, config, options, unplannable)
    result = memo.plan
    karpenter = options.karpenter_available
    rendered = _rendered(previous, karpenter)
    owned, failures = render_owned(result, agent, karpenter=karpenter, rendered=rendered)
    if failures:
        memo = replan(None, pools, planned_nodes, config, options, {**result.unplannable, **failures})
        result = memo.plan
        owned, _ = render_owned(result, agent, karpenter=karpenter)
    versions = configmaps.versions(result, config, current_mig_text)
    dra_plan = None
    if dra_inputs is not None:
        result, dra_plan = dra.finish(result, pools, views, dra_inputs, decisions, options.now)
    if kueue_observed is None:
        return Desired(result, owned, versions, memo=memo, dra=dra_plan)
    previous_statuses = {p.name: p.previous for p in pools}
    result, kueue_plan = kueue.decide(result, previous_statuses, kueue_observed, options.now)
    return Desired(result, owned, versions, kueue_plan, memo=memo, dra=dra_plan)


def _rendered(
    previous: Desired | None, karpenter: bool
) -> tuple[Sequence[PoolPlan], Mapping[str, OwnedObjects]] | None:
    """The previous pass's pool plans and their objects, where rendered alike (same Karpenter availability)."""
    if previous is None or previous.memo is None or previous.memo.options.karpenter_available != karpenter:
        return None
    return previous.memo.plan.pools, previous.owned


def render_owned(
    result: Plan,
    agent: render.AgentRendering,
    *,
    karpenter: bool,
    rendered: tuple[Sequence[PoolPlan], Mapping[str, OwnedObjects]] | None = None,
) -> tuple[dict[str, OwnedObjects], dict[str, str]]:
    """Renders every planned pool's objects; a pool whose rendering raises is returned apart (name → why).
    `rendered`: an earlier plan's pools and their objects, rendered with the same `agent`: only the pools planned
    anew since (`Plan.replanned_since`: not the very same `PoolPlan`) are rendered again, the others keep theirs."""
    replanned = result.replanned_since(rendered[0]) if rendered is not None else None
    owned = dict(rendered[1]) if rendered is not None and replanned is not None else {}
    failures: dict[str, str] = {}
    added = False
    for pool in result.pools:
        if replanned is not None and pool.name not in replanned:
            continue
        if not pool.valid or pool.deleting or pool.spec is None:
            owned.pop(pool.name, None)
            continue
        try:
            daemonset = render.daemonset(pool.name, pool.uid, pool.spec, agent, pool.tolerations)
            nodepool = None
            if pool.spec.provisioner.type == "karpenter" and karpenter:
                nodepool = render.nodepool(pool.name, pool.uid, pool.spec, burn_in=pool.burn_in)
        except Exception as error:  # one pool's bug must not stop the others
            failures[pool.name] = f"accelpool could not render this pool's objects: {type(error).__name__}: {error}"
            owned.pop(pool.name, None)
            continue
        added = added or (replanned is not None and pool.name not in owned)
        owned[pool.name] = OwnedObjects(daemonset, nodepool)
    if added:  # in the pools' order, as a pass that rendered them all has them
        owned = {p.name: owned[p.name] for p in result.pools if p.name in owned}
    return owned, failures
