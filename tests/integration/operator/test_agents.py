"""The agents' DaemonSets with a DaemonSet controller behind them: written without conflicts, and when the
controller cannot create their pods, the pool's AgentReady says why and what to change."""

from __future__ import annotations

from typing import Any

from accelpool_api import conventions
from accelpool_demo import daemonsets
from tests.support.builders import node_body

from .conftest import AGENT_SERVICE_ACCOUNT, NAMESPACE, RUNTIME_CLASSES, Cluster, Operator, seed


def settled(daemonset: dict[str, Any] | None, desired: int) -> bool:
    """The controller has observed the DaemonSet's current generation and counted its nodes."""
    if daemonset is None:
        return False
    status = daemonset.get("status") or {}
    return (
        status.get("observedGeneration") == daemonset["metadata"]["generation"]
        and status.get("desiredNumberScheduled") == desired
    )


def status_writes(cluster: Cluster) -> int:
    return len(
        [
            r
            for r in cluster.emulator.writes(agent=daemonsets.USER_AGENT)
            if r.resource is not None and r.resource.plural == "daemonsets" and r.subresource == "status"
        ]
    )


async def test_daemonset_edits_do_not_conflict_with_the_controllers_status_writes(
    cluster: Cluster, operator: Operator
) -> None:
    seed(cluster, node_body("h100-1"), node_body("h100-2"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})
    await cluster.wait_for(lambda: settled(cluster.daemonset("train"), 2), what="the controller's status")

    for interval in ("7m", "9m"):  # each edit changes the agents' config, so the DaemonSet's template
        daemonset = cluster.daemonset("train")
        assert daemonset is not None
        generation: int = daemonset["metadata"]["generation"]
        writes = status_writes(cluster)
        await cluster.patch_pool("train", {"health": {"interval": interval}})

        def rewritten(generation: int = generation, writes: int = writes) -> bool:
            current = cluster.daemonset("train")
            return (
                settled(current, 2)
                and current is not None
                and current["metadata"]["generation"] > generation
                and status_writes(cluster) > writes
            )

        await cluster.wait_for(rewritten, what=f"the DaemonSet rewritten for interval {interval}, its status observed")

    assert cluster.emulator.conflicts("daemonsets", agent="accelpool") == []
    daemonset = cluster.daemonset("train")
    assert daemonset is not None
    pods = cluster.pods("train")
    assert len(pods) == 2 and {p["spec"]["nodeName"] for p in pods} == {"h100-1", "h100-2"}
    config = next(
        e["value"]
        for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]
        if e["name"] == "ACCELPOOL_AGENT_CONFIG"
    )
    assert '"intervalSeconds":540.0' in config
    assert daemonset["metadata"]["labels"][conventions.POOL_LABEL] == "train"


def agent_ready(cluster: Cluster, pool: str) -> tuple[str, str]:
    condition = cluster.condition(pool, "AgentReady")
    return condition.get("reason", ""), condition.get("message", "")


async def test_a_missing_runtime_class_is_named_until_it_exists(cluster: Cluster, operator: Operator) -> None:
    await cluster.client.delete(f"{RUNTIME_CLASSES}/nvidia")  # a cluster without the GPU Operator's toolkit
    seed(cluster, node_body("h100-1"), node_body("h100-2"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 2})

    await cluster.wait_for(lambda: agent_ready(cluster, "train")[0] == "RuntimeClassNotFound", what="the obstacle")
    _, message = agent_ready(cluster, "train")
    daemonset = conventions.agent_name("train")
    assert message.startswith(
        f'DaemonSet {NAMESPACE}/{daemonset} cannot create 2 of 2 agent pods: Error creating: pods "'
    )
    assert '" is forbidden: pod rejected: RuntimeClass "nvidia" not found. RuntimeClass "nvidia": ' in message
    assert "agent.runtimeClassName (operator flag --agent-runtime-class)" in message
    assert cluster.condition("train", "AgentReady")["status"] == "False"
    status = cluster.status("train")
    assert status["phase"] == "Degraded"
    assert "agents cannot run (RuntimeClassNotFound)" in cluster.condition("train", "Ready")["message"]
    assert cluster.pods("train") == []

    # The fix: the RuntimeClass appears; the controller creates the pods, the agents report, the pool is Ready.
    await cluster.client.create(
        RUNTIME_CLASSES,
        {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"}, "handler": "nvidia"},
    )
    await cluster.wait_for(lambda: len(cluster.pods("train")) == 2, what="the agent pods created")
    await cluster.wait_for(lambda: agent_ready(cluster, "train")[0] == "WaitingForAgents", what="waiting for reports")
    assert "agent pods available (2 scheduled, 2 updated, 2 unavailable)" in agent_ready(cluster, "train")[1]
    await cluster.settle_members("train")
    await cluster.wait_for(lambda: cluster.status("train").get("phase") == "Ready", what="train Ready")
    assert agent_ready(cluster, "train")[0] == "Reporting"


async def test_a_missing_service_account_points_at_the_agent_namespace(cluster: Cluster, operator: Operator) -> None:
    await cluster.client.delete(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{AGENT_SERVICE_ACCOUNT}")
    seed(cluster, node_body("h100-1"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 1})
    await cluster.wait_for(lambda: agent_ready(cluster, "train")[0] == "ServiceAccountNotFound", what="the obstacle")
    _, message = agent_ready(cluster, "train")
    assert (
        f"is forbidden: error looking up service account {NAMESPACE}/{AGENT_SERVICE_ACCOUNT}: "
        f'serviceaccount "{AGENT_SERVICE_ACCOUNT}" not found' in message
    )
    remedy = "the chart creates the agents' ServiceAccount in agent.namespace"
    assert f"ServiceAccount {NAMESPACE}/{AGENT_SERVICE_ACCOUNT}: {remedy}" in message


async def test_an_agent_image_that_cannot_be_pulled_is_named(cluster: Cluster, operator: Operator) -> None:
    seed(cluster, node_body("h100-1"))
    await operator.start()
    await cluster.apply_pool("train", {"accelerator": "H100:8", "nodes": 1})
    await cluster.wait_for(lambda: len(cluster.pods("train")) == 1, what="the agent pod")
    (pod,) = cluster.pods("train")
    image = pod["spec"]["containers"][0]["image"]
    waiting = {"reason": "ImagePullBackOff", "message": f'Back-off pulling image "{image}"'}
    # The kubelet's word on the pod: its image cannot be pulled.
    await cluster.client.patch(
        f"/api/v1/namespaces/{NAMESPACE}/pods/{pod['metadata']['name']}/status",
        {
            "status": {
                "containerStatuses": [{"name": "agent", "image": image, "ready": False, "state": {"waiting": waiting}}]
            }
        },
    )
    await cluster.wait_for(lambda: agent_ready(cluster, "train")[0] == "ImagePullFailed", what="the pull failure")
    _, message = agent_ready(cluster, "train")
    assert message.startswith(f"1 agent pod(s) cannot pull {image} (ImagePullBackOff: Back-off pulling image")
    assert f"{pod['metadata']['name']} on h100-1" in message and "--agent-image" in message
