"""The valid, live pools of a pass (`PoolWork`) and which nodes each may hold (`NodeFilter`).

`pool_works` resolves each valid pool's accelerator once (pools asking for the same one share
the resolution) and returns them in claim priority: oldest first, then by name. A `NodeFilter`
is what qualifies a node for a pool; pools with equal filters compete for the same free nodes
(`accelpool.decide.planning.claims` gives them one cursor).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import accelpool_api as api
from accelpool.decide.planning.model import PoolInput
from accelpool.decide.planning.remediation.burnin import NO_BURN_IN, BurnInDecision
from accelpool.decide.planning.remediation.quarantine import NO_REMEDIATION, RemediationDecision
from accelpool.model.nodes import NodeView
from accelpool_api import conventions


@dataclass(frozen=True)
class NodeFilter:
    """The accelerators (catalog names), device count and nodeSelector a node must match, and whether members
    share one NVLink clique (`spec.nvlink.sameClique`)."""

    accelerators: frozenset[str]
    count: int | None
    node_selector: Mapping[str, str]
    same_clique: bool = False
    """A free node qualifies only with a `nvidia.com/gpu.clique` label; which clique the pool takes is the
    claims' choice (`accelpool.decide.planning.claims`)."""

    @property
    def key(self) -> tuple[Any, ...]:
        """Equal for filters that select the same nodes."""
        return (self.accelerators, self.count, tuple(sorted(self.node_selector.items())), self.same_clique)

    def matches(self, view: NodeView, *, current: bool) -> bool:
        """Whether a node qualifies; `current` members are given the benefit of the doubt.

        A member whose accelerator labels vanish for a while (GFD relabelling during a MIG change),
        or that shows fewer whole devices because it is partitioned, stays; so does a member of a
        same-clique pool whose clique label is gone or changed (the claims name the pool's clique).
        """
        detected = view.detected
        if detected is None:
            return current
        if detected.accelerator.name not in self.accelerators:
            return False
        count = self.count
        if count is not None and detected.count < count:
            lenient = current and (detected.count == 0 or detected.mig_profile is not None)
            if not lenient:
                return False
        if self.same_clique and not current and not view.labels.get(conventions.GPU_CLIQUE_LABEL):
            return False
        return all(view.labels.get(key) == value for key, value in self.node_selector.items())


@dataclass
class PoolWork:
    """A valid, live pool during the pass: its members as the stages decide them."""

    input: PoolInput
    spec: api.ComputePoolSpec
    resolved: api.ResolvedAccelerator
    filter: NodeFilter
    members: list[NodeView] = field(default_factory=list)
    """Members it keeps (membership, less a surplus released by sizing)."""
    new_members: list[NodeView] = field(default_factory=list)
    """Free nodes it claims this pass."""
    remediation: RemediationDecision = NO_REMEDIATION
    burn_in: BurnInDecision = NO_BURN_IN
    need: int = 0
    """Serving members it lacks after sizing (what claims look for)."""
    shortfall: str = ""
    """Why the claims fell short (`3 cordoned, 1 held by other pools`)."""

    @property
    def name(self) -> str:
        return self.input.name

    @property
    def desired(self) -> int:
        return self.spec.nodes

    @property
    def karpenter(self) -> bool:
        return self.spec.provisioner.type == "karpenter"


def claim_priority(pool: PoolInput) -> tuple[str, str]:
    """Older pools claim first (`creationTimestamp`), then by name."""
    return (pool.created or "", pool.name)


def pool_works(pools: Iterable[PoolInput]) -> dict[str, PoolWork]:
    """The valid pools not being deleted, by name, in the order given."""
    resolutions: dict[api.AcceleratorRequest, api.ResolvedAccelerator] = {}
    works: dict[str, PoolWork] = {}
    for pool in pools:
        if not pool.valid or pool.deleting:
            continue
        assert pool.spec is not None
        resolved = resolutions.get(pool.spec.accelerator)
        if resolved is None:  # resolving depends on the accelerator request only; pools share a few
            resolved = resolutions[pool.spec.accelerator] = pool.spec.resolve()
        node_filter = NodeFilter(
            accelerators=frozenset(e.name for e in resolved.matches),
            count=resolved.count,
            node_selector=pool.spec.node_selector,
            same_clique=pool.spec.nvlink is not None and pool.spec.nvlink.same_clique,
        )
        works[pool.name] = PoolWork(input=pool, spec=pool.spec, resolved=resolved, filter=node_filter)
    return works
