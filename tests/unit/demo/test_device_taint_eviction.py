"""kube-controller-manager's device-taint-eviction controller as the emulated API server plays it
(`device_taints`): which pods a NoExecute taint evicts and when, what a DeviceTaintRule's status says, and
(through the server, on a clock the test moves) that an evicted pod is deleted, not evicted through the
Eviction API, so no PodDisruptionBudget holds it."""

from __future__ import annotations

import copy
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from accelpool_demo.apiserver import RunningApiServer, serving
from accelpool_demo.apiserver.device_taints import Cluster, Memory, step
from accelpool_demo.apiserver.writes import seconds_of, timestamp

ADDED = "2026-01-01T00:00:00Z"
T0 = seconds_of(ADDED)
NAMESPACE = "team"


def _slice(*taints: dict[str, Any]) -> dict[str, Any]:
    devices: list[dict[str, Any]] = [{"name": f"gpu-{i}"} for i in range(2)]
    devices[1]["taints"] = list(taints)
    return {
        "metadata": {"name": "node-1-gpu", "uid": "s1"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def _rule(effect: str, device: str = "gpu-1", *, generation: int = 1, status: Any = None) -> dict[str, Any]:
    return {
        "metadata": {"name": "q", "uid": "r1", "generation": generation},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "node-1", "device": device},
            "taint": {"key": "accelpool.io/quarantine", "effect": effect, "timeAdded": ADDED},
        },
        "status": status or {},
    }


def _claim(name: str, device: str, pod: str, *tolerations: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": device}
    if tolerations:
        result["tolerations"] = list(tolerations)
    return {
        "metadata": {"name": name, "namespace": NAMESPACE, "uid": f"c-{name}"},
        "spec": {},
        "status": {
            "allocation": {"devices": {"results": [result]}},
            "reservedFor": [{"resource": "pods", "name": pod, "uid": f"p-{pod}"}],
        },
    }


def _pod(name: str, claim: str, *, node: str = "node-1", deleting: bool = False) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": NAMESPACE, "uid": f"p-{name}"}
    if deleting:
        metadata["deletionTimestamp"] = ADDED
    return {
        "metadata": metadata,
        "spec": {"nodeName": node, "resourceClaims": [{"name": "gpu", "resourceClaimName": claim}]},
        "status": {},
    }


def _evicted(cluster: Cluster, now: float, memory: Memory | None = None) -> list[str]:
    done = step(memory or Memory(), cluster, now)
    return [e.pod["metadata"]["name"] for e in done.evictions]


def test_a_noexecute_rule_evicts_the_pods_of_the_claims_on_its_device_only() -> None:
    cluster = Cluster(
        rules=[_rule("NoExecute")],
        slices=[_slice()],
        claims=[_claim("on-1", "gpu-1", "a"), _claim("on-0", "gpu-0", "b")],
        pods=[_pod("a", "on-1"), _pod("b", "on-0")],
    )
    assert _evicted(cluster, T0) == ["a"]


@pytest.mark.parametrize(
    ("effect", "evicted"),
    [("NoSchedule", []), ("None", []), ("NoExecute", ["a"])],
)
def test_only_the_noexecute_effect_evicts(effect: str, evicted: list[str]) -> None:
    cluster = Cluster(
        rules=[_rule(effect)], slices=[_slice()], claims=[_claim("c", "gpu-1", "a")], pods=[_pod("a", "c")]
    )
    assert _evicted(cluster, T0) == evicted


def test_a_slices_own_noexecute_taint_evicts_without_a_rule() -> None:
    taint = {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoExecute", "timeAdded": ADDED}
    cluster = Cluster(slices=[_slice(taint)], claims=[_claim("c", "gpu-1", "a")], pods=[_pod("a", "c")])
    assert _evicted(cluster, T0) == ["a"]


def test_toleration_seconds_delay_the_eviction_from_the_taints_time() -> None:
    waits = {"key": "accelpool.io/quarantine", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 60}
    cluster = Cluster(
        rules=[_rule("NoExecute")], slices=[_slice()], claims=[_claim("c", "gpu-1", "a", waits)], pods=[_pod("a", "c")]
    )
    memory = Memory()
    assert _evicted(cluster, T0 + 59, memory) == []
    assert memory.wake == T0 + 60
    assert _evicted(cluster, T0 + 60, memory) == ["a"]


@pytest.mark.parametrize(
    ("toleration", "evicted"),
    [
        pytest.param({"operator": "Exists", "effect": "NoExecute"}, [], id="forever"),
        pytest.param(
            {"key": "accelpool.io/quarantine", "operator": "Equal", "value": "", "effect": "NoExecute"}, [], id="equal"
        ),
        pytest.param({"key": "other", "operator": "Exists", "effect": "NoExecute"}, ["a"], id="another key"),
        # only a toleration whose effect is NoExecute counts (claimEvictionTime checks the effect first)
        pytest.param({"operator": "Exists"}, ["a"], id="any effect"),
    ],
)
def test_a_claim_tolerating_the_taint_keeps_its_pods(toleration: dict[str, Any], evicted: list[str]) -> None:
    cluster = Cluster(
        rules=[_rule("NoExecute")],
        slices=[_slice()],
        claims=[_claim("c", "gpu-1", "a", toleration)],
        pods=[_pod("a", "c")],
    )
    assert _evicted(cluster, T0) == evicted


def test_pods_the_claim_is_not_reserved_for_or_not_scheduled_or_leaving_stay() -> None:
    cluster = Cluster(
        rules=[_rule("NoExecute")],
        slices=[_slice()],
        claims=[_claim("c", "gpu-1", "a")],
        pods=[_pod("b", "c"), _pod("a", "c", node=""), _pod("a2", "c", deleting=True)],
    )
    assert _evicted(cluster, T0) == []


def test_a_rules_status_counts_what_noexecute_would_do_then_what_it_does() -> None:
    pods = [_pod("a", "c")]
    claims = [_claim("c", "gpu-1", "a")]
    memory = Memory()
    none = step(memory, Cluster(rules=[_rule("None")], slices=[_slice()], claims=claims, pods=pods), T0)
    (status,) = none.statuses
    assert status.condition == {
        "type": "EvictionInProgress",
        "status": "False",
        "observedGeneration": 1,
        "reason": "NoEffect",
        "message": "1 published device selected. 1 allocated device selected. 1 pod would be evicted in 1 namespace "
        "if the effect was NoExecute. This information will not be updated again. Recreate the DeviceTaintRule to "
        "trigger an update.",
        "lastTransitionTime": ADDED,
    }
    written = {"conditions": [status.condition]}
    evicting = step(
        memory, Cluster([_rule("NoExecute", generation=2, status=written)], [_slice()], claims, pods), T0 + 1
    )
    (status,) = evicting.statuses
    assert (status.condition["status"], status.condition["reason"], status.condition["message"]) == (
        "True",
        "PodsPendingEviction",
        "1 pod needs to be evicted in 1 namespace.",
    )
    assert [e.pod["metadata"]["name"] for e in evicting.evictions] == ["a"]
    assert memory.wake == T0 + 11
    written = {"conditions": [status.condition]}
    gone = [_pod("a", "c", deleting=True)]
    later = step(memory, Cluster([_rule("NoExecute", generation=2, status=written)], [_slice()], claims, gone), T0 + 11)
    (status,) = later.statuses
    assert (status.condition["status"], status.condition["reason"], status.condition["message"]) == (
        "False",
        "Completed",
        "1 pod evicted since starting the controller.",
    )
    assert status.condition["lastTransitionTime"] == timestamp(T0 + 11)


# ---------------------------------------------------------------- through the server


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def api() -> AsyncIterator[tuple[RunningApiServer, Clock]]:
    clock = Clock()
    async with serving(clock=clock) as running:
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        yield running, clock


async def _call(api: RunningApiServer, method: str, path: str, body: Any = None, patch: bool = False) -> Any:
    headers = {"Content-Type": "application/merge-patch+json"} if patch else {}
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, api.url + path, json=body, headers=headers) as answer,
    ):
        found = await answer.json()
        assert answer.status < 300, found
        return found


DRA = "/apis/resource.k8s.io/v1"


async def test_a_quarantined_gpus_pod_is_deleted_whatever_its_budget_and_the_rule_reports_it(
    api: tuple[RunningApiServer, Clock],
) -> None:
    server, clock = api
    await _call(server, "POST", f"{DRA}/resourceslices", _slice())
    claim = _claim("c", "gpu-1", "a")
    status = claim.pop("status")
    claim["spec"] = {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}
    del claim["metadata"]["uid"]
    await _call(server, "POST", f"{DRA}/namespaces/{NAMESPACE}/resourceclaims", claim)
    pod = _pod("a", "c")
    del pod["metadata"]["uid"]
    pod["spec"].update(containers=[{"name": "c", "image": "x"}], terminationGracePeriodSeconds=30)
    pod["metadata"]["labels"] = {"app": "a"}
    created = await _call(server, "POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod)
    status["reservedFor"][0]["uid"] = created["metadata"]["uid"]
    path = f"{DRA}/namespaces/{NAMESPACE}/resourceclaims/c/status"
    await _call(server, "PATCH", path, {"status": status}, patch=True)
    running = {"status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}}
    await _call(server, "PATCH", f"/api/v1/namespaces/{NAMESPACE}/pods/a/status", running, patch=True)
    budget = {"metadata": {"name": "keep-a"}, "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "a"}}}}
    await _call(server, "POST", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets", budget)
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": "a", "namespace": NAMESPACE}}
    async with (
        aiohttp.ClientSession() as session,
        session.post(f"{server.url}/api/v1/namespaces/{NAMESPACE}/pods/a/eviction", json=eviction) as refused,
    ):
        assert refused.status == 429  # the budget holds the pod against the Eviction API
    rule = _rule("NoExecute")
    for name in ("uid", "generation"):
        del rule["metadata"][name]
    del rule["status"], rule["spec"]["taint"]["timeAdded"]
    await _call(server, "POST", f"{DRA}/devicetaintrules", rule)

    pod = await _call(server, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods/a")
    assert pod["metadata"]["deletionTimestamp"] == timestamp(T0 + 30)
    assert pod["metadata"]["deletionGracePeriodSeconds"] == 30
    (target,) = [c for c in pod["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert (target["reason"], target["message"]) == (
        "DeletionByDeviceTaintManager",
        "Device Taint manager: deleting due to NoExecute taint",
    )
    events = await _call(server, "GET", f"/api/v1/namespaces/{NAMESPACE}/events")
    assert [(e["reason"], e["message"], e["source"]) for e in events["items"]] == [
        ("DeviceTaintManagerEviction", "Marking for deletion", {"component": "device-taint-eviction-controller"})
    ]
    stored = await _call(server, "GET", f"{DRA}/devicetaintrules/q")
    (condition,) = stored["status"]["conditions"]
    assert (condition["reason"], condition["message"]) == (
        "PodsPendingEviction",
        "1 pod needs to be evicted in 1 namespace.",
    )
    assert [
        (e["manager"], e["operation"], e["apiVersion"], e.get("subresource"))
        for e in stored["metadata"]["managedFields"]
    ] == [
        ("device-taint-eviction-controller", "Apply", "resource.k8s.io/v1", "status"),
        ("Python", "Update", "resource.k8s.io/v1", None),
    ]

    clock.now = T0 + 10
    stored = await _call(server, "GET", f"{DRA}/devicetaintrules/q")
    (condition,) = stored["status"]["conditions"]
    assert (condition["status"], condition["reason"], condition["message"]) == (
        "False",
        "Completed",
        "1 pod evicted since starting the controller.",
    )
    budget = await _call(server, "GET", f"/apis/policy/v1/namespaces/{NAMESPACE}/poddisruptionbudgets/keep-a")
    assert "disruptedPods" not in budget["status"]  # deleted, not evicted: the budget was not asked
    clock.now = T0 + 30
    pods = await _call(server, "GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert pods["items"] == []


async def test_a_rules_effect_change_restamps_its_time_and_is_seen_anew(api: tuple[RunningApiServer, Clock]) -> None:
    server, clock = api
    rule = copy.deepcopy(_rule("NoSchedule"))
    for name in ("uid", "generation"):
        del rule["metadata"][name]
    del rule["status"], rule["spec"]["taint"]["timeAdded"]
    created = await _call(server, "POST", f"{DRA}/devicetaintrules", rule)
    assert created["spec"]["taint"]["timeAdded"] == ADDED and created["status"] == {}
    stored = await _call(server, "GET", f"{DRA}/devicetaintrules/q")
    assert stored["status"]["conditions"][0]["reason"] == "OtherEffect"
    clock.now = T0 + 5
    patched = await _call(
        server, "PATCH", f"{DRA}/devicetaintrules/q", {"spec": {"taint": {"effect": "None"}}}, patch=True
    )
    assert patched["spec"]["taint"]["timeAdded"] == timestamp(T0 + 5)
    assert patched["metadata"]["generation"] == 2
    stored = await _call(server, "GET", f"{DRA}/devicetaintrules/q")
    assert stored["status"]["conditions"][0]["reason"] == "NoEffect"
    assert stored["status"]["conditions"][0]["observedGeneration"] == 2
