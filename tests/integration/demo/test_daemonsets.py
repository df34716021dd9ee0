"""The simulated DaemonSet controller against the demo's API server: pods for the nodes a DaemonSet
selects, its status written behind the writer of its spec, and FailedCreate Events (with the API
server's admission message) when the cluster lacks the pods' ServiceAccount or RuntimeClass."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import serving
from accelpool_demo.daemonsets import REVISION_LABEL, DaemonSetController, should_run
from tests.support.builders import node_body

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
NAMESPACE = "accelpool-system"
DAEMONSET = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets/accelpool-agent-training"
EVENTS = f"/api/v1/namespaces/{NAMESPACE}/events"


def daemonset(runtime_class: str | None = "nvidia") -> dict[str, Any]:
    spec: dict[str, Any] = {
        "serviceAccountName": "accelpool-agent",
        "nodeSelector": {"accelpool.io/pool": "training"},
        "tolerations": [{"key": "accelpool.io/pool", "operator": "Equal", "value": "training", "effect": "NoSchedule"}],
        "containers": [{"name": "agent", "image": "ghcr.io/accelpool/accelpool-agent:0.1.0"}],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    labels = {"app.kubernetes.io/name": "accelpool-agent", "accelpool.io/pool": "training"}
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "accelpool-agent-training", "namespace": NAMESPACE},
        "spec": {"selector": {"matchLabels": labels}, "template": {"metadata": {"labels": labels}, "spec": spec}},
    }


TRAINING = {"accelpool.io/pool": "training"}
"""The label of the training pool's nodes, which its DaemonSet selects."""


@pytest.fixture
async def client() -> AsyncIterator[KubeClient]:
    async with serving() as running:
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        async with running.client() as api:
            yield api


async def test_pods_that_admission_refuses_become_failed_create_events(client: KubeClient) -> None:
    for name in ("gpu-1", "gpu-2"):
        await client.create("/api/v1/nodes", node_body(name, None, labels=TRAINING, stored=False))
    await client.create("/api/v1/nodes", node_body("cpu-1", None, stored=False))
    await client.apply(DAEMONSET, daemonset(), field_manager="accelpool")
    controller = DaemonSetController(client, NAMESPACE)

    await controller.sync()
    (event,) = await client.list(EVENTS)
    assert (event["type"], event["reason"], event["count"]) == ("Warning", "FailedCreate", 1)
    assert event["involvedObject"]["kind"] == "DaemonSet"
    assert event["involvedObject"]["name"] == "accelpool-agent-training"
    assert event["source"] == {"component": "daemonset-controller"}
    prefix = 'Error creating: pods "accelpool-agent-training-'
    assert event["message"].startswith(prefix)
    assert event["message"].endswith(
        '" is forbidden: error looking up service account accelpool-system/accelpool-agent: '
        'serviceaccount "accelpool-agent" not found'
    )
    status = (await client.get(DAEMONSET))["status"]
    assert status == {
        "observedGeneration": 1,
        "desiredNumberScheduled": 2,
        "currentNumberScheduled": 0,
        "numberMisscheduled": 0,
        "numberReady": 0,
        "updatedNumberScheduled": 0,
        "numberAvailable": 0,
        "numberUnavailable": 2,
    }

    await controller.sync()  # the same refusal again: the Event's count grows
    (event,) = await client.list(EVENTS)
    assert event["count"] == 2

    await client.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "accelpool-agent"}})
    await controller.sync()
    messages = [e["message"] for e in await client.list(EVENTS)]
    assert len(messages) == 2
    assert any(m.endswith(' is forbidden: pod rejected: RuntimeClass "nvidia" not found') for m in messages)

    await client.create("/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": "nvidia"}, "handler": "nvidia"})
    await controller.sync()
    pods = await client.list(f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert sorted(p["spec"]["nodeName"] for p in pods) == ["gpu-1", "gpu-2"]
    assert all(p["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet" for p in pods)
    status = (await client.get(DAEMONSET))["status"]
    assert (status["currentNumberScheduled"], status["numberReady"], status["numberUnavailable"]) == (2, 0, 2)


async def test_status_follows_every_spec_change_and_moves_the_resource_version(client: KubeClient) -> None:
    await client.create("/api/v1/nodes", node_body("gpu-1", None, labels=TRAINING, stored=False))
    await client.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "accelpool-agent"}})
    applied = await client.apply(DAEMONSET, daemonset(runtime_class=None), field_manager="accelpool")
    controller = DaemonSetController(client, NAMESPACE)
    await controller.sync()
    after_status = await client.get(DAEMONSET)
    assert after_status["metadata"]["resourceVersion"] != applied["metadata"]["resourceVersion"]
    (pod,) = await client.list(f"/api/v1/namespaces/{NAMESPACE}/pods")

    changed = daemonset(runtime_class=None)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "ghcr.io/accelpool/accelpool-agent:0.2.0"
    await client.apply(DAEMONSET, changed, field_manager="accelpool")
    await controller.sync()
    (replaced,) = await client.list(f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert replaced["metadata"]["name"] != pod["metadata"]["name"]
    assert replaced["metadata"]["labels"][REVISION_LABEL] != pod["metadata"]["labels"][REVISION_LABEL]
    status = (await client.get(DAEMONSET))["status"]
    assert status["observedGeneration"] == 2 and status["updatedNumberScheduled"] == 1


def test_a_daemon_pod_runs_where_the_selector_matches_and_every_hard_taint_is_tolerated() -> None:
    spec = daemonset()["spec"]["template"]["spec"]
    assert should_run(spec, node_body("a", None, labels=TRAINING))
    assert not should_run(spec, node_body("b", None, labels={"accelpool.io/pool": "other"}))
    assert should_run(
        spec,
        node_body(
            "c",
            None,
            labels=TRAINING,
            taints=[{"key": "accelpool.io/pool", "value": "training", "effect": "NoSchedule"}],
        ),
    )
    assert not should_run(
        spec, node_body("d", None, labels=TRAINING, taints=[{"key": "dedicated", "value": "x", "effect": "NoSchedule"}])
    )
    assert should_run(
        spec,
        node_body(
            "e", None, labels=TRAINING, taints=[{"key": "dedicated", "value": "x", "effect": "PreferNoSchedule"}]
        ),
    )
    cordoned = [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]
    assert should_run(spec, node_body("f", None, labels=TRAINING, taints=cordoned)), "daemon pods tolerate a cordon"
