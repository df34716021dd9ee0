"""A Karpenter pool's layout edit reconfigures its nodes in place: the NodePool does not change.

Karpenter hashes a NodePool's whole `spec.template` but its requirements (`NodePool.Hash`,
kubernetes-sigs/karpenter `pkg/apis/v1/nodepool.go`) and marks every NodeClaim whose hash differs
`Drifted/NodePoolDrifted` (`pkg/controllers/nodeclaim/disruption/drift.go`), which its disruption
controller replaces. The NVIDIA config labels are named by the config's content, so with them in the
template each replicas or MIG edit would replace every node of the pool. The template carries only the
pool label; accelpool labels the nodes Karpenter launches as it labels static members, and relabels
them after an edit.
"""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.decide import desired, render
from accelpool.decide.planning import ConfigState, PlannerOptions
from accelpool.model.nodes import NodeView
from accelpool_api import conventions

from .conftest import NOW, applied, device_plugin_key, node, pool

KARPENTER = {"type": "karpenter", "nodeClass": "gpu"}
NODEPOOL = conventions.nodepool_name("k")
EDITS = [
    pytest.param(
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 2}}},
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}},
        id="time-slicing-replicas",
    ),
    pytest.param(
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}},
        {"accelerator": "L4", "sharing": {"mps": {"replicas": 8}}},
        id="mps-replicas",
    ),
    pytest.param(
        {"accelerator": "H100:8", "mig": {"profile": "1g.10gb"}},
        {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}},
        id="single-profile-change",
    ),
    pytest.param(
        {"accelerator": "H100:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        {"accelerator": "H100:8", "mig": {"profiles": ["4g.40gb", "2g.20gb", "1g.10gb"]}},
        id="mixed-layout-change",
    ),
    pytest.param(
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        {"accelerator": "A100-40GB:8"},
        id="mig-on-to-off",
    ),
    pytest.param(
        {"accelerator": "A100-40GB:8"},
        {"accelerator": "A100-40GB:8", "mig": {"profile": "3g.20gb"}},
        id="mig-off-to-on",
    ),
]


def _spec(body: dict[str, Any]) -> dict[str, Any]:
    return {**body, "nodes": 1, "maxNodes": 3, "provisioner": KARPENTER}


def _decide(body: dict[str, Any], nodes: list[NodeView], generation: int) -> desired.Desired:
    return desired.decide(
        [pool("k", _spec(body), generation=generation)],
        nodes,
        ConfigState(),
        PlannerOptions(now=NOW),
        unplannable={},
        agent=render.AgentRendering(),
        current_mig_text=None,
    )


def _launched(body: dict[str, Any], nodepool: dict[str, Any]) -> NodeView:
    """A node Karpenter launched from the NodePool: its template's labels, and the NodePool's name."""
    accelerator = {"L4": "L4", "H100:8": "H100-80GB", "A100-40GB:8": "A100-40GB"}[body["accelerator"]]
    labels = {**nodepool["spec"]["template"]["metadata"]["labels"], "karpenter.sh/nodepool": NODEPOOL}
    return node("ip-10-0-0-1", accelerator, labels=labels)


@pytest.mark.parametrize(("before", "after"), EDITS)
def test_a_layout_edit_relabels_karpenter_nodes_in_place_and_leaves_the_nodepool_as_it_was(
    before: dict[str, Any], after: dict[str, Any]
) -> None:
    first = _decide(before, [], 1).owned["k"].nodepool
    assert first is not None
    assert first["spec"]["template"]["metadata"]["labels"] == {conventions.POOL_LABEL: "k"}
    launched = _launched(before, first)

    joined = _decide(before, [launched], 1)
    planned = joined.plan.pool("k")
    assert planned is not None and planned.members == ("ip-10-0-0-1",), "the pool label makes it a member"
    labelled = applied([launched], joined.plan)[0]
    old_key = labelled.labels.get(conventions.DEVICE_PLUGIN_CONFIG_LABEL)
    old_entry = labelled.labels.get(conventions.MIG_CONFIG_LABEL)
    assert old_key == device_plugin_key("k", _spec(before)), "accelpool labels the node Karpenter launched"
    assert joined.owned["k"].nodepool == first

    edited = _decide(after, [labelled], 2)
    assert edited.owned["k"].nodepool == first, "the same NodePool, spec-hash and all: Karpenter sees no drift"
    relabelled = applied([labelled], edited.plan)[0]
    new_labels = (
        relabelled.labels.get(conventions.DEVICE_PLUGIN_CONFIG_LABEL),
        relabelled.labels.get(conventions.MIG_CONFIG_LABEL),
    )
    assert new_labels != (old_key, old_entry), "the member is reconfigured in place"
    assert new_labels[0] == device_plugin_key("k", _spec(after))
    assert relabelled.labels[conventions.POOL_LABEL] == "k"
