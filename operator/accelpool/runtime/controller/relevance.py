"""Which node changes could change a plan: the relevance filter in front of the controller's loop.

A real cluster's Nodes never sit still: every update moves the resourceVersion, kubelets rewrite
their status, other controllers add labels and annotations of their own. A plan reads only part
of a Node, and `NodeView` already keeps only that part, parsed (labels, accelpool's annotations
and the agent's health report, taints, `unschedulable`, Ready and its transition time, the
`AcceleratorHealthy` condition, allocatable resources, the detected accelerator): kubelet
heartbeats and other annotations never reach it. What a view still carries that no plan reads
is left out here before two views are compared (`same_for_planning`):

- `resourceVersion`: it moves with every write. The cached view keeps the newest (the node
  patches are sent with it); only the decision to plan again ignores it;
- labels no plan reads: only accelpool's own (`accelpool.io/`), NVIDIA's (`nvidia.com/`: the
  MIG and device-plugin configs, GFD's labels), the control-plane roles
  (`node-role.kubernetes.io/`) and the keys of the pools' `nodeSelector`s are compared, and
  the accelerator the labels make the node (`detected`, `label_problems`: every other
  detection label, GKE's, Karpenter's, AMD's, counts through them);
- the agent's heartbeat (`AcceleratorHealthy`'s `lastHeartbeatTime`): a fresh heartbeat
  changes no plan, unless the condition had gone stale by the operator's clock (`unchanged_for`,
  from `accelpool.runtime.controller.freshness`: unchanged for `--agent-silent-after`), when the node was
  planned as `AgentSilent` and now reads its agent's verdict again. An agent that stops writing
  sends no event at all: the loop wakes when its condition turns stale (`ClusterState.due_at`).

The health condition's status, reason and message, and the health annotation's report, are
compared in full: an `AcceleratorHealthy=False` is always relevant.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping

from accelpool.model.nodes import NodeView
from accelpool_api import conventions

PLANNED_LABEL_PREFIXES = (f"{conventions.DOMAIN}/", "nvidia.com/", "node-role.kubernetes.io/")
"""Label keys planning reads besides the pools' selectors and what detection makes of the labels."""


def same_for_planning(
    before: NodeView | None,
    after: NodeView | None,
    *,
    selector_keys: Collection[str],
    unchanged_for: float | None = None,
    stale_seconds: float = conventions.HEALTH_STALE_SECONDS,
) -> bool:
    """Whether a plan made with `before` would come out the same with `after` (None: no such node).

    `unchanged_for`: how long, by the operator's clock, the node's health condition had not changed
    when `after` came (None: it had none); from `stale_seconds` on it had gone stale, and a condition
    rewritten after that (a heartbeat alone included) is relevant."""
    if before is None or after is None:
        return before is after
    if before == after:
        return True
    if _planned_part(before, selector_keys) != _planned_part(after, selector_keys):
        return False
    revived = before.health != after.health and unchanged_for is not None and unchanged_for >= stale_seconds
    return not revived


def selector_keys(specs: Collection[Mapping[str, object]]) -> frozenset[str]:
    """The label keys the pools' `spec.nodeSelector`s name."""
    keys: set[str] = set()
    for spec in specs:
        selector = spec.get("nodeSelector")
        if isinstance(selector, Mapping):
            keys.update(str(key) for key in selector)
    return frozenset(keys)


def _planned_part(view: NodeView, keys: Collection[str]) -> NodeView:
    labels = {k: v for k, v in view.labels.items() if k in keys or k.startswith(PLANNED_LABEL_PREFIXES)}
    health = view.health and dataclasses.replace(view.health, heartbeat=None)
    return dataclasses.replace(view, labels=labels, resource_version=None, health=health)
