"""Lists and watches as the API server serves them: namespaces, label and field selectors, resourceVersions."""

from __future__ import annotations

from typing import Any

from accelpool_core.kube import METADATA_LIST_ACCEPT, KubeClient
from accelpool_demo.apiserver import RunningApiServer
from accelpool_demo.apiserver.events import EventLog
from tests.support.builders import node_body

from .conftest import NAMESPACE

EVENTS = f"/api/v1/namespaces/{NAMESPACE}/events"
# The nodes here have no conditions: no kubelet reports them Ready, so the node lifecycle controller never lifts
# their not-ready taint, and a watch sees only the test's own writes.


def event(name: str, kind: str, reason: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "involvedObject": {"kind": kind, "name": "x"}, "reason": reason}


async def test_label_selectors(client: KubeClient) -> None:
    await client.create(
        "/api/v1/nodes", node_body("a", None, labels={"pool": "x", "tier": "gpu"}, conditions=(), stored=False)
    )
    await client.create("/api/v1/nodes", node_body("b", None, labels={"pool": "y"}, conditions=(), stored=False))
    await client.create("/api/v1/nodes", node_body("c", None, conditions=(), stored=False))

    async def names(selector: str) -> list[str]:
        return [n["metadata"]["name"] for n in await client.list("/api/v1/nodes", label_selector=selector)]

    assert await names("pool=x") == ["a"]
    assert await names("pool==x,tier=gpu") == ["a"]
    assert await names("pool!=x") == ["b", "c"]
    assert await names("pool in (x,y)") == ["a", "b"]
    assert await names("pool notin (x),tier") == []
    assert await names("pool") == ["a", "b"]
    assert await names("!pool") == ["c"]


async def test_field_selectors_and_namespaces(client: KubeClient) -> None:
    await client.create(EVENTS, event("refused", "DaemonSet", "FailedCreate"))
    await client.create(EVENTS, event("created", "DaemonSet", "SuccessfulCreate"))
    await client.create(EVENTS, event("pod", "Pod", "FailedCreate"))
    await client.create("/api/v1/namespaces/other/events", event("elsewhere", "DaemonSet", "FailedCreate"))
    selector = "involvedObject.kind=DaemonSet,reason=FailedCreate"
    found = await client.list(EVENTS, field_selector=selector)
    assert [e["metadata"]["name"] for e in found] == ["refused"]
    everywhere = await client.list("/api/v1/events", field_selector=selector)
    assert sorted(e["metadata"]["name"] for e in everywhere) == ["elsewhere", "refused"]
    assert [e["metadata"]["name"] for e in await client.list(EVENTS, field_selector="metadata.name!=pod")] == [
        "created",
        "refused",
    ]


async def test_a_list_then_a_watch_from_its_resource_version_misses_nothing(
    api: RunningApiServer, client: KubeClient, watch: Any
) -> None:
    await client.create("/api/v1/nodes", node_body("a", None, conditions=(), stored=False))
    listed = await client.request("GET", "/api/v1/nodes")
    assert listed["kind"] == "NodeList"
    await client.create(
        "/api/v1/nodes", node_body("b", None, conditions=(), stored=False)
    )  # after the list, before the watch
    stream = await watch("/api/v1/nodes", resourceVersion=listed["metadata"]["resourceVersion"])
    added = await stream.next()
    assert (added["type"], added["object"]["metadata"]["name"]) == ("ADDED", "b")
    await client.patch("/api/v1/nodes/a", {"metadata": {"labels": {"x": "1"}}})
    await client.delete("/api/v1/nodes/b")
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in [await stream.next(), await stream.next()]] == [
        ("MODIFIED", "a"),
        ("DELETED", "b"),
    ]


async def test_a_watch_without_a_resource_version_starts_with_every_object(client: KubeClient, watch: Any) -> None:
    await client.create("/api/v1/nodes", node_body("a", None, conditions=(), stored=False))
    await client.create("/api/v1/nodes", node_body("b", None, conditions=(), stored=False))
    stream = await watch("/api/v1/nodes")
    assert {(e["type"], e["object"]["metadata"]["name"]) for e in [await stream.next(), await stream.next()]} == {
        ("ADDED", "a"),
        ("ADDED", "b"),
    }


async def test_objects_entering_or_leaving_a_watched_selection(client: KubeClient, watch: Any) -> None:
    await client.create("/api/v1/nodes", node_body("a", None, conditions=(), stored=False))
    stream = await watch("/api/v1/nodes", labelSelector="pool=x")
    await client.patch("/api/v1/nodes/a", {"metadata": {"labels": {"pool": "x"}}})
    await client.patch("/api/v1/nodes/a", {"metadata": {"labels": {"pool": "y"}}})
    await client.create("/api/v1/nodes", node_body("b", None, labels={"pool": "y"}, conditions=(), stored=False))
    await client.create("/api/v1/nodes", node_body("c", None, labels={"pool": "x"}, conditions=(), stored=False))
    seen = [await stream.next() for _ in range(3)]
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in seen] == [
        ("ADDED", "a"),
        ("DELETED", "a"),
        ("ADDED", "c"),
    ]


async def test_a_watch_from_a_forgotten_version_is_expired(
    api: RunningApiServer, client: KubeClient, watch: Any
) -> None:
    api.server.store.events = EventLog(capacity=2)
    first = await client.create("/api/v1/nodes", node_body("a", None, conditions=(), stored=False))
    for label in "xyz":
        await client.patch("/api/v1/nodes/a", {"metadata": {"labels": {"l": label}}})
    stream = await watch("/api/v1/nodes", resourceVersion=first["metadata"]["resourceVersion"])
    error = await stream.next()
    assert error["type"] == "ERROR" and error["object"]["code"] == 410 and error["object"]["reason"] == "Expired"
    assert await stream.ended()


async def test_a_watch_ends_after_its_timeout(watch: Any) -> None:
    stream = await watch("/api/v1/nodes", timeoutSeconds="1")
    assert await stream.ended()


async def test_every_watch_ends_when_the_server_shuts_down(api: RunningApiServer, watch: Any) -> None:
    """A client that went away unnoticed must not hold the shutdown: the server ends its streams."""
    streams = [await watch("/api/v1/nodes"), await watch(f"/api/v1/namespaces/{NAMESPACE}/pods")]
    api.server.close_watches()
    for stream in streams:
        assert await stream.ended()


async def test_a_metadata_only_list_holds_each_objects_metadata_and_nothing_else(client: KubeClient) -> None:
    await client.create("/api/v1/nodes", node_body("a", None, labels={"pool": "x"}, conditions=(), stored=False))
    await client.create("/api/v1/nodes", node_body("b", None, conditions=(), stored=False))
    full = await client.list("/api/v1/nodes")
    listed = await client.request("GET", "/api/v1/nodes", accept=METADATA_LIST_ACCEPT)

    assert (listed["apiVersion"], listed["kind"]) == ("meta.k8s.io/v1", "PartialObjectMetadataList")
    assert listed["metadata"]["resourceVersion"]
    assert listed["items"] == [
        {"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": n["metadata"]} for n in full
    ]
    assert await client.list("/api/v1/nodes", label_selector="pool=x", metadata_only=True) == [listed["items"][0]]
