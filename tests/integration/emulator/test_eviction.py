"""The pods' eviction subresource as the API server answers it (pkg/registry/core/pod/storage/eviction.go):
budgets honoured or the exact refusal, the pods a budget does not guard, and graceful deletion."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import aiohttp
import pytest

from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import RunningApiServer

from .conftest import Clock
from .workloads import BUDGETS, PODS, budget, eviction, pod, start

Answer = tuple[int, dict[str, str], dict[str, Any]]
Evict = Callable[..., Awaitable[Answer]]
SUCCESS = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
async def evict(api: RunningApiServer) -> AsyncIterator[Evict]:
    """`await evict(name, body=None)`: POST pods/NAME/eviction → (status, headers, Status body)."""
    async with aiohttp.ClientSession() as session:

        async def post(name: str, body: Any = None) -> Answer:
            url = f"{api.url}{PODS}/{name}/eviction"
            async with session.post(url, json=eviction(name) if body is None else body) as response:
                return response.status, dict(response.headers), await response.json()

        yield post


def failure(code: int, message: str, reason: str | None = None, **details: Any) -> dict[str, Any]:
    """A failure Status as the API server renders it (reason and details only when it has them)."""
    status: dict[str, Any] = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure"}
    status["message"] = message
    if reason:
        status["reason"] = reason
    if details:
        status["details"] = details
    return {**status, "code": code}


async def ready_pods(client: KubeClient, *names: str, **pod_options: Any) -> None:
    for name in names:
        await start(client, pod(name, **pod_options))


async def budget_status(client: KubeClient, name: str = "work") -> dict[str, Any]:
    status: dict[str, Any] = (await client.get(f"{BUDGETS}/{name}"))["status"]
    return status


async def test_an_eviction_the_budget_allows_uses_it_and_deletes_the_pod(client: KubeClient, evict: Evict) -> None:
    await ready_pods(client, "w0", "w1", "w2")
    await client.create(BUDGETS, budget("work", minAvailable=2))
    assert (await budget_status(client))["disruptionsAllowed"] == 1

    status, headers, body = await evict("w0")
    assert (status, body) == (201, SUCCESS) and "Retry-After" not in headers
    assert await client.get_or_none(f"{PODS}/w0") is None, "no grace period: deleted at once"
    after = await budget_status(client)
    assert (after["currentHealthy"], after["desiredHealthy"], after["disruptionsAllowed"]) == (2, 2, 0)
    assert (after["conditions"][0]["status"], after["conditions"][0]["reason"]) == ("False", "InsufficientPods")


async def test_an_eviction_the_budget_forbids_is_429_and_leaves_the_pod(client: KubeClient, evict: Evict) -> None:
    await ready_pods(client, "w0", "w1")
    await client.create(BUDGETS, budget("work", minAvailable=2))
    before = await client.get(f"{PODS}/w0")

    status, headers, body = await evict("w0")
    cause = {
        "reason": "DisruptionBudget",
        "message": "The disruption budget work needs 2 healthy pods and has 2 currently",
    }
    assert (status, body) == (429, failure(429, VIOLATION, "TooManyRequests", causes=[cause]))
    assert "Retry-After" not in headers
    assert await client.get(f"{PODS}/w0") == before


async def test_a_budget_not_yet_observed_is_429_still_being_processed(
    api: RunningApiServer, client: KubeClient, evict: Evict
) -> None:
    await ready_pods(client, "w0", "w1")
    api.server.store.disruption_controller = False  # kube-controller-manager is behind
    await client.create(BUDGETS, budget("work", minAvailable=1))

    status, headers, body = await evict("w0")
    cause = {
        "reason": "DisruptionBudget",
        "message": "The disruption budget work is still being processed by the server.",
    }
    assert (status, body) == (429, failure(429, VIOLATION, "TooManyRequests", causes=[cause], retryAfterSeconds=10))
    assert headers["Retry-After"] == "10"

    await client.patch(f"{BUDGETS}/work/status", {"status": {"observedGeneration": 1, "disruptionsAllowed": -1}})
    status, _, body = await evict("w0")
    assert (status, body["reason"]) == (403, "Forbidden")
    assert body["message"] == 'poddisruptionbudget.policy "work" is forbidden: pdb disruptions allowed is negative'
    assert await client.get_or_none(f"{PODS}/w0") is not None


async def test_two_budgets_over_a_pod_are_a_500_without_a_reason(client: KubeClient, evict: Evict) -> None:
    await ready_pods(client, "w0")
    await client.create(BUDGETS, budget("one", minAvailable=0))
    await client.create(BUDGETS, budget("two", minAvailable=0))

    status, _, body = await evict("w0")
    message = "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
    assert (status, body) == (500, failure(500, message))
    assert await client.get_or_none(f"{PODS}/w0") is not None


async def test_pods_a_budget_does_not_guard_are_deleted_whatever_it_says(client: KubeClient, evict: Evict) -> None:
    await client.create(PODS, pod("pending"))  # never started: Pending
    await start(client, pod("done"), phase="Succeeded", ready=False)
    await ready_pods(client, "guarded")
    await client.create(BUDGETS, budget("work", minAvailable=3))
    assert (await budget_status(client))["disruptionsAllowed"] == 0

    for name in ("pending", "done"):
        assert (await evict(name))[0] == 201
        assert await client.get_or_none(f"{PODS}/{name}") is None
    assert (await evict("guarded"))[0] == 429
    status, _, body = await evict("gone")
    assert (status, body["reason"], body["message"]) == (404, "NotFound", 'pods "gone" not found')


@pytest.mark.parametrize(
    ("policy", "healthy", "evicted"),
    [
        (None, 2, True),  # IfHealthyBudget (the default): the application is whole, its unready pod may go
        (None, 1, False),  # ... but not while it is disrupted
        ("IfHealthyBudget", 1, False),
        ("AlwaysAllow", 1, True),
    ],
)
async def test_an_unready_pod_goes_as_the_unhealthy_pod_eviction_policy_says(
    client: KubeClient, evict: Evict, policy: str | None, healthy: int, evicted: bool
) -> None:
    await start(client, pod("sick"), ready=False)
    await ready_pods(client, *[f"w{n}" for n in range(healthy)])
    spec: dict[str, Any] = {"minAvailable": 2}
    if policy:
        spec["unhealthyPodEvictionPolicy"] = policy
    await client.create(BUDGETS, budget("work", **spec))
    allowed = (await budget_status(client))["disruptionsAllowed"]

    status, _, _ = await evict("sick")
    assert (status == 201, await client.get_or_none(f"{PODS}/sick") is None) == (evicted, evicted)
    assert (await budget_status(client))["disruptionsAllowed"] == allowed, "an unready pod never uses the budget"


async def test_a_grace_period_leaves_the_pod_terminating_until_it_passes_on_the_clock(
    client: KubeClient, evict: Evict, clock: Clock
) -> None:
    await ready_pods(client, "w0", "w1", "w2", grace=60)
    await client.create(BUDGETS, budget("work", minAvailable=1))

    assert (await evict("w0", eviction("w0", gracePeriodSeconds=30)))[0] == 201
    terminating = await client.get(f"{PODS}/w0")
    assert terminating["metadata"]["deletionGracePeriodSeconds"] == 30, "the Eviction's grace period, not the pod's"
    assert terminating["metadata"]["generation"] == 2
    target = [c for c in terminating["status"]["conditions"] if c["type"] == "DisruptionTarget"]
    assert [(c["status"], c["reason"], c["message"]) for c in target] == [
        ("True", "EvictionByEvictionAPI", "Eviction API: evicting")
    ]
    status = await budget_status(client)
    assert (status["currentHealthy"], status["disruptionsAllowed"]) == (2, 1), "a terminating pod is not healthy"
    assert "disruptedPods" not in status, "the controller saw it terminate"

    assert (await evict("w0"))[0] == 201, "a terminating pod is deleted again without a look at the budget"
    clock.advance(29)
    assert await client.get_or_none(f"{PODS}/w0") is not None
    clock.advance(1)
    assert await client.get_or_none(f"{PODS}/w0") is None

    assert (await evict("w1"))[0] == 201
    assert (await client.get(f"{PODS}/w1"))["metadata"]["deletionGracePeriodSeconds"] == 60, "the pod's own"


async def test_the_eviction_body_is_checked(client: KubeClient, evict: Evict) -> None:
    await ready_pods(client, "w0", "w1")
    refusals = {
        "name in URL does not match name in Eviction object": eviction("w1"),
        "the API version in the data (v1) does not match the expected API version (policy/v1)": {
            **eviction("w0"),
            "apiVersion": "v1",
        },
    }
    for message, body in refusals.items():
        assert (await evict("w0", body))[::2] == (400, failure(400, message, "BadRequest")), message
    before = await client.get(f"{PODS}/w0")
    assert (await evict("w0", eviction("w0", dryRun=["All"])))[0] == 201
    assert await client.get(f"{PODS}/w0") == before, "a dry run writes nothing"
    assert (await evict("w0", {**eviction("w0"), "apiVersion": "policy/v1beta1"}))[0] == 201


async def test_a_precondition_that_fails_is_409_after_the_budget_was_used(
    client: KubeClient, evict: Evict, clock: Clock
) -> None:
    await ready_pods(client, "w0", "w1", "w2")
    await client.create(BUDGETS, budget("work", minAvailable=1))
    uid = (await client.get(f"{PODS}/w0"))["metadata"]["uid"]

    status, _, body = await evict("w0", eviction("w0", preconditions={"uid": "other"}))
    assert (status, body["reason"]) == (409, "Conflict")
    assert body["message"] == (
        f'Operation cannot be fulfilled on Pod "w0": the UID in the precondition (other) does not match the UID '
        f"in record ({uid}). The object might have been deleted and then recreated"
    )
    used = await budget_status(client)
    assert list(used["disruptedPods"]) == ["w0"] and used["currentHealthy"] == 2, "counted as going"
    clock.advance(121)  # the controller's DeletionTimeout: it was not deleted after all
    back = await budget_status(client)
    assert "disruptedPods" not in back and (back["currentHealthy"], back["disruptionsAllowed"]) == (3, 2)
