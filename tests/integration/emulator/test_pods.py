"""Pods as the API server deletes and lists them: graceful deletion on the emulator's clock (the pod strategy's
CheckGracefulDelete, rest.BeforeDelete), DeleteOptions preconditions, and the pods of a node."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool_core.kube import ApiError, KubeClient
from accelpool_demo.apiserver.writes import timestamp

from .conftest import NAMESPACE, Clock
from .workloads import PODS, controlled_by, pod, start

MIRROR = "kubernetes.io/config.mirror"


async def delete(client: KubeClient, name: str, **options: Any) -> dict[str, Any]:
    return await client.request("DELETE", f"{PODS}/{name}", body=options or None)


async def test_a_pod_terminates_for_its_grace_period_which_a_later_delete_may_only_shorten(
    client: KubeClient, clock: Clock
) -> None:
    await start(client, pod("w0", grace=30))
    started = clock.now

    marked = await delete(client, "w0")
    metadata = marked["metadata"]
    assert (metadata["deletionTimestamp"], metadata["deletionGracePeriodSeconds"]) == (timestamp(started + 30), 30)
    assert metadata["generation"] == 2
    assert (await delete(client, "w0", gracePeriodSeconds=60))["metadata"] == metadata, "never lengthened"

    clock.advance(5)
    shortened = await delete(client, "w0", gracePeriodSeconds=10)
    assert shortened["metadata"]["deletionTimestamp"] == timestamp(started + 10), "counted from the first deletion"
    assert shortened["metadata"]["deletionGracePeriodSeconds"] == 10
    clock.advance(4)
    assert await client.get_or_none(f"{PODS}/w0") is not None
    clock.advance(1)
    assert await client.get_or_none(f"{PODS}/w0") is None

    await start(client, pod("w1", grace=30))
    await client.request("DELETE", f"{PODS}/w1", params={"gracePeriodSeconds": "0"})  # kubectl delete --force
    assert await client.get_or_none(f"{PODS}/w1") is None


async def test_pods_on_no_node_or_finished_go_at_once_and_finalizers_hold_the_rest(
    client: KubeClient, clock: Clock
) -> None:
    unscheduled = pod("unscheduled", grace=30)
    del unscheduled["spec"]["nodeName"]
    await client.create(PODS, unscheduled)
    await start(client, pod("finished", grace=30), phase="Failed", ready=False)
    for name in ("unscheduled", "finished"):
        await delete(client, name)
        assert await client.get_or_none(f"{PODS}/{name}") is None, name

    held = pod("held", grace=30)
    held["metadata"]["finalizers"] = ["example.com/keep"]
    await start(client, held)
    await delete(client, "held")
    clock.advance(30)
    after = await client.get(f"{PODS}/held")
    assert after["metadata"]["deletionGracePeriodSeconds"] == 0, "its kubelet is done: only the finalizer holds it"
    await client.patch(f"{PODS}/held", {"metadata": {"finalizers": None}})
    assert await client.get_or_none(f"{PODS}/held") is None


async def test_a_delete_whose_precondition_fails_is_409(client: KubeClient) -> None:
    created = await start(client, pod("w0"))
    with pytest.raises(ApiError) as conflict:
        await delete(client, "w0", preconditions={"resourceVersion": "1"})
    version = created["metadata"]["resourceVersion"]
    assert (conflict.value.status, conflict.value.reason) == (409, "Conflict")
    assert conflict.value.message == (  # rest.BeforeDelete's words, as kube-apiserver v1.36 answers (tests/conformance)
        f'Operation cannot be fulfilled on Pod "w0": the ResourceVersion in the precondition (1) does not match '
        f"the ResourceVersion in record ({version}). The object might have been modified"
    )
    await delete(client, "w0", preconditions={"uid": created["metadata"]["uid"]})
    assert await client.get_or_none(f"{PODS}/w0") is None


async def test_a_watch_sees_a_graceful_deletion_end_without_a_request(
    client: KubeClient, clock: Clock, watch: Any
) -> None:
    created = await start(client, pod("w0", grace=30))
    stream = await watch(PODS, resourceVersion=created["metadata"]["resourceVersion"])
    await delete(client, "w0")
    assert (await stream.next())["type"] == "MODIFIED"
    clock.advance(30)
    gone = await stream.next()
    assert (gone["type"], gone["object"]["metadata"]["name"]) == ("DELETED", "w0")


async def test_the_pods_of_a_node_by_field_selector(client: KubeClient) -> None:
    daemonset = await client.create(
        f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets", {"metadata": {"name": "agent"}, "spec": {}}
    )
    await start(client, pod("agent-x", owner=controlled_by(daemonset), app="agent"))
    mirror = pod("static-n1", app="static")
    mirror["metadata"]["annotations"] = {MIRROR: "c0ffee"}
    await start(client, mirror)
    await start(client, pod("work-a"))
    await start(client, pod("work-b", node="n2"))
    await client.create("/api/v1/namespaces/other/pods", pod("elsewhere"))

    on_n1 = await client.list("/api/v1/pods", field_selector="spec.nodeName=n1")
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in on_n1] == [
        (NAMESPACE, "agent-x"),
        (NAMESPACE, "static-n1"),
        (NAMESPACE, "work-a"),
        ("other", "elsewhere"),
    ]
    owners = {p["metadata"]["name"]: p["metadata"].get("ownerReferences") for p in on_n1}
    assert owners["agent-x"] == [controlled_by(daemonset)]
    assert (on_n1[1]["metadata"]["annotations"], on_n1[1]["status"]["phase"]) == ({MIRROR: "c0ffee"}, "Running")
