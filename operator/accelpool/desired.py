"""What one reconcile pass wants the cluster to look like, decided in one pure step.

`decide(pools, nodes, config, options, ...)` is the "plan" stage of a pass (`accelpool.controller`):

1. `accelpool.planning.plan`: membership, remediation, sizing, claims, every node's change, the
   NVIDIA configs, each pool's status, Events, and when to plan again;
2. `render_owned`: each planned pool's agent DaemonSet and, for a Karpenter pool where Karpenter
   is installed, its NodePool (`accelpool.render`). A pool whose rendering raises is set aside
   (`Valid=False` naming the error) and the cluster is planned again without it, so one pool can
   never stop the others;
3. `accelpool.configmaps.versions`: the staged and the final version of both NVIDIA ConfigMaps.

`Desired` holds all of it. The shell decides nothing more: it compares each part with what is
stored (`accelpool.patches`) and writes the difference.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from accelpool import configmaps, render
from accelpool.nodes import NodeView
from accelpool.planning import ConfigState, Plan, PlannerOptions, PoolInput, plan


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


def decide(
    pools: Sequence[PoolInput],
    nodes: Sequence[NodeView],
    config: ConfigState,
    options: PlannerOptions,
    *,
    unplannable: Mapping[str, str],
    agent: render.AgentSettings,
    current_mig_text: str | None,
) -> Desired:
    """The desired state; `unplannable` names pools already known to fail (name → why)."""
    result = plan(pools, nodes, config, options, unplannable)
    owned, failures = render_owned(result, agent, karpenter=options.karpenter_available)
    if failures:
        result = plan(pools, nodes, config, options, {**result.unplannable, **failures})
        owned, _ = render_owned(result, agent, karpenter=options.karpenter_available)
    return Desired(result, owned, configmaps.versions(result, config, current_mig_text))


def render_owned(
    result: Plan, agent: render.AgentSettings, *, karpenter: bool
) -> tuple[dict[str, OwnedObjects], dict[str, str]]:
    """Renders every planned pool's objects; a pool whose rendering raises is returned apart (name → why)."""
    owned: dict[str, OwnedObjects] = {}
    failures: dict[str, str] = {}
    for pool in result.pools:
        if not pool.valid or pool.deleting or pool.spec is None:
            continue
        try:
            daemonset = render.daemonset(pool.name, pool.uid, pool.spec, agent, pool.tolerations)
            nodepool = None
            if pool.spec.provisioner.type == "karpenter" and karpenter:
                nodepool = render.nodepool(pool.name, pool.uid, pool.spec, pool.member_labels, burn_in=pool.burn_in)
        except Exception as error:  # one pool's bug must not stop the others
            failures[pool.name] = f"accelpool could not render this pool's objects: {type(error).__name__}: {error}"
            continue
        owned[pool.name] = OwnedObjects(daemonset, nodepool)
    return owned, failures
