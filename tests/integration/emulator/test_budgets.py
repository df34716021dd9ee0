"""PodDisruptionBudgets as the API server stores them and kube-controller-manager's disruption controller
keeps their status (pkg/controller/disruption/disruption.go), on the emulator's clock."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_core.kube import ApiError, KubeClient
from accelpool_demo.apiserver import RunningApiServer
from accelpool_demo.apiserver.writes import timestamp
from accelpool_demo.run import load_workloads

from .conftest import Clock
from .workloads import APPS, BUDGETS, PODS, budget, controlled_by, pod, start


def counts(status: dict[str, Any]) -> tuple[int, int, int, int]:
    """(expectedPods, currentHealthy, desiredHealthy, disruptionsAllowed)."""
    return status["expectedPods"], status["currentHealthy"], status["desiredHealthy"], status["disruptionsAllowed"]


async def status_of(client: KubeClient, name: str = "work") -> dict[str, Any]:
    status: dict[str, Any] = (await client.get(f"{BUDGETS}/{name}"))["status"]
    return status


async def test_a_budget_is_created_with_a_zero_status_then_synced(client: KubeClient, clock: Clock) -> None:
    await start(client, pod("w0"))
    await start(client, pod("w1"), ready=False)
    created = await client.create(BUDGETS, {**budget("work", minAvailable=1), "status": {"disruptionsAllowed": 5}})
    assert created["status"] == {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
    assert created["metadata"]["generation"] == 1

    synced = await status_of(client)
    assert counts(synced) == (2, 1, 1, 0), "minAvailable as an integer: every selected pod is expected"
    assert synced["observedGeneration"] == 1
    insufficient = {
        "type": "DisruptionAllowed",
        "status": "False",
        "observedGeneration": 1,
        "lastTransitionTime": timestamp(clock.now),
        "reason": "InsufficientPods",
        "message": "",
    }
    assert synced["conditions"] == [insufficient]

    clock.advance(5)
    await client.patch(f"{PODS}/w1/status", {"status": {"conditions": [{"type": "Ready", "status": "True"}]}})
    synced = await status_of(client)
    assert counts(synced) == (2, 2, 1, 1)
    assert synced["conditions"][0] | {"observedGeneration": 1} == {
        **insufficient,
        "status": "True",
        "reason": "SufficientPods",
        "lastTransitionTime": timestamp(clock.now),
    }
    respecced = await client.patch(f"{BUDGETS}/work", {"spec": {"minAvailable": 2}})
    assert respecced["metadata"]["generation"] == 2
    synced = await status_of(client)
    assert (counts(synced), synced["observedGeneration"]) == ((2, 2, 2, 0), 2)


async def test_percentages_and_max_unavailable_count_the_controllers_replicas(client: KubeClient) -> None:
    deployment = await client.create(f"{APPS}/deployments", {"metadata": {"name": "web"}, "spec": {"replicas": 5}})
    replicas = {"metadata": {"name": "web-1", "ownerReferences": [controlled_by(deployment)]}, "spec": {"replicas": 5}}
    replica_set = await client.create(f"{APPS}/replicasets", replicas)
    for n in range(4):  # one of the five is missing: expected is still five
        await start(client, pod(f"web-{n}", owner=controlled_by(replica_set)))
    stateful = await client.create(f"{APPS}/statefulsets", {"metadata": {"name": "db"}, "spec": {"replicas": 3}})
    for n in range(3):
        await start(client, pod(f"db-{n}", owner=controlled_by(stateful), app="db"))

    await client.create(BUDGETS, budget("work", maxUnavailable="30%"))  # 30% of 5 rounds up to 2
    await client.create(BUDGETS, budget("db", minAvailable="50%", selector={"matchLabels": {"app": "db"}}))
    assert counts(await status_of(client)) == (5, 4, 3, 1)
    assert counts(await status_of(client, "db")) == (3, 3, 2, 1), "50% of 3 rounds up to 2"

    await client.patch(f"{APPS}/deployments/web", {"spec": {"replicas": 10}})
    await client.patch(f"{PODS}/web-0", {"metadata": {"labels": {"extra": "yes"}}})  # a pod event wakes the controller
    assert counts(await status_of(client)) == (10, 4, 7, 0)


@pytest.mark.parametrize(
    ("owner", "error"),
    [
        (
            {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": "agent"},
            "daemonsets.apps does not implement the scale subresource",
        ),
        ({"apiVersion": "batch/v1", "kind": "Job", "name": "once"}, 'no matches for kind "Job" in version "batch/v1"'),
        ({"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "gone"}, 'found no controllers for pod "w0"'),
    ],
)
async def test_pods_whose_scale_cannot_be_found_fail_the_sync_safe(
    api: RunningApiServer, client: KubeClient, owner: dict[str, Any], error: str
) -> None:
    api.server.store.garbage_collector = False  # it would delete a pod whose owner is not stored
    await start(client, pod("w0", owner={**owner, "uid": "u-1", "controller": True}))
    await client.create(BUDGETS, budget("work", maxUnavailable=1))

    status = await status_of(client)
    assert status["disruptionsAllowed"] == 0 and "observedGeneration" not in status, "failSafe keeps it unobserved"
    condition = status["conditions"][0]
    assert (condition["type"], condition["status"], condition["reason"], condition["message"]) == (
        "DisruptionAllowed",
        "False",
        "SyncFailed",
        error,
    )


async def test_pods_without_a_controller_are_not_expected(client: KubeClient) -> None:
    await start(client, pod("w0"))
    await client.create(BUDGETS, budget("work", maxUnavailable=1))
    assert counts(await status_of(client)) == (0, 1, 0, 0), "nothing expected: nothing may be disrupted"


async def test_selectors_select_by_labels_and_expressions(client: KubeClient) -> None:
    await start(client, pod("a", app="work", tier="gpu"))
    await start(client, pod("b", app="work"))
    selector = {
        "matchLabels": {"app": "work"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["gpu"]}],
    }
    await client.create(BUDGETS, budget("gpu", minAvailable=0, selector=selector))
    await client.create(BUDGETS, budget("all", minAvailable=0, selector={}))
    await client.create(BUDGETS, {**budget("none", minAvailable=0), "spec": {"minAvailable": 0}})
    assert [(await status_of(client, n))["expectedPods"] for n in ("gpu", "all", "none")] == [1, 2, 0]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"minAvailable": 1, "maxUnavailable": 1},
            'PodDisruptionBudget.policy "bad" is invalid: spec: Invalid value: {"MinAvailable":1,"Selector":{},'
            '"MaxUnavailable":1,"UnhealthyPodEvictionPolicy":null}: '
            "minAvailable and maxUnavailable cannot be both set",
        ),
        (
            {"maxUnavailable": "150%"},
            'PodDisruptionBudget.policy "bad" is invalid: spec.maxUnavailable: Invalid value: "150%": '
            "must not be greater than 100%",
        ),
        (
            {"minAvailable": -1},
            'PodDisruptionBudget.policy "bad" is invalid: spec.minAvailable: Invalid value: -1: '
            "must be greater than or equal to 0",
        ),
        (
            {"minAvailable": 1, "unhealthyPodEvictionPolicy": "Never"},
            'PodDisruptionBudget.policy "bad" is invalid: spec.unhealthyPodEvictionPolicy: Unsupported value: '
            '"Never": supported values: "AlwaysAllow", "IfHealthyBudget"',
        ),
    ],
)
async def test_a_budget_the_api_server_refuses_is_422(client: KubeClient, spec: dict[str, Any], message: str) -> None:
    with pytest.raises(ApiError) as refused:
        await client.create(BUDGETS, {**budget("bad"), "spec": {"selector": {}, **spec}})
    assert (refused.value.status, refused.value.reason, refused.value.message) == (422, "Invalid", message)


async def test_the_demos_workloads_are_guarded_as_its_fleet_file_says(
    api: RunningApiServer, client: KubeClient
) -> None:
    """The pods `accelpool demo` starts with (demo-cluster.yaml `workloads`): llm-training's budget forbids
    any eviction, batch-eval's allows one."""
    for obj in load_workloads():
        api.put(_COLLECTIONS[obj["kind"]], obj)
    budgets = "/apis/policy/v1/namespaces/default/poddisruptionbudgets"
    statuses = {b["metadata"]["name"]: b["status"] for b in await client.list(budgets)}
    assert {name: counts(status) for name, status in statuses.items()} == {
        "llm-training": (2, 2, 2, 0),
        "batch-eval": (2, 2, 1, 1),
    }
    on_h100_3 = await client.list("/api/v1/pods", field_selector="spec.nodeName=h100-3")
    assert sorted(p["metadata"]["name"] for p in on_h100_3) == ["batch-eval-1", "llm-training-1"]


_COLLECTIONS = {
    "Pod": "/api/v1/namespaces/default/pods",
    "PodDisruptionBudget": "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
}
