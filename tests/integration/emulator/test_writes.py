"""Writes as the API server does them: creation, resourceVersions, generation, patches, subresources, deletion."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver import NAME_ALPHABET, RunningApiServer
from tests.support.builders import node_body, pool_body

from .conftest import NAMESPACE

POOLS = "/apis/accelpool.io/v1alpha1/computepools"
DAEMONSETS = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets"
CONFIGMAPS = f"/api/v1/namespaces/{NAMESPACE}/configmaps"


async def test_creation_stamps_what_the_server_owns(client: KubeClient) -> None:
    created = await client.create(CONFIGMAPS, {"metadata": {"generateName": "cfg-"}, "data": {"a": "1"}})
    metadata = created["metadata"]
    assert metadata["name"].startswith("cfg-") and set(metadata["name"][4:]) <= set(NAME_ALPHABET)
    assert metadata["namespace"] == NAMESPACE and "generation" not in metadata, "a ConfigMap has no generation"
    assert metadata["uid"] and metadata["creationTimestamp"].endswith("Z") and metadata["resourceVersion"]
    assert (created["apiVersion"], created["kind"]) == ("v1", "ConfigMap")
    with pytest.raises(ConflictError) as taken:
        await client.create(CONFIGMAPS, {"metadata": {"name": metadata["name"]}})
    assert taken.value.reason == "AlreadyExists"
    with pytest.raises(ApiError) as nameless:
        await client.create(CONFIGMAPS, {"metadata": {}})
    assert nameless.value.status == 422

    daemonset = await client.create(DAEMONSETS, {"metadata": {"name": "d"}, "spec": {}, "status": {"numberReady": 9}})
    assert "status" not in daemonset, "the DaemonSet strategy drops the status sent on create"
    made = await client.create(POOLS, {**pool_body("p", {"accelerator": "H100"}), "status": {"phase": "Ready"}})
    assert "status" not in made, "so does a CRD with a status subresource"
    made_node = await client.create("/api/v1/nodes", node_body("n", None, stored=False))
    assert made_node["status"]["conditions"][0]["type"] == "Ready"


async def test_every_write_gets_a_newer_resource_version_and_stale_ones_conflict(client: KubeClient) -> None:
    created = await client.create("/api/v1/nodes", node_body("n", None, stored=False))
    stale = created["metadata"]["resourceVersion"]
    patched = await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
    assert int(patched["metadata"]["resourceVersion"]) > int(stale)
    stale_body = {**node_body("n", None, stored=False), "metadata": {"name": "n", "resourceVersion": stale}}
    attempts = [
        client.patch("/api/v1/nodes/n", {"metadata": {"resourceVersion": stale, "labels": {"a": "c"}}}),
        client.patch(
            "/api/v1/nodes/n", {"metadata": {"resourceVersion": stale, "labels": {"a": "c"}}}, patch_type="strategic"
        ),
        client.replace("/api/v1/nodes/n", stale_body),
        client.apply("/api/v1/nodes/n", stale_body, field_manager="m"),
    ]
    for attempt in attempts:
        with pytest.raises(ConflictError) as conflict:
            await attempt
        assert conflict.value.reason == "Conflict"
    assert await client.get("/api/v1/nodes/n") == patched

    again = await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
    assert again["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"], "a no-op writes nothing"


async def test_generation_moves_with_the_spec_only(client: KubeClient) -> None:
    created = await client.create(POOLS, pool_body("p", {"accelerator": "H100"}))
    labelled = await client.patch(f"{POOLS}/p", {"metadata": {"labels": {"team": "ml"}}})
    status = await client.patch(f"{POOLS}/p/status", {"status": {"phase": "Pending"}})
    assert (
        created["metadata"]["generation"] == labelled["metadata"]["generation"] == status["metadata"]["generation"] == 1
    )
    respecced = await client.patch(f"{POOLS}/p", {"spec": {"nodes": 2}})
    assert respecced["metadata"]["generation"] == 2


async def test_patches_merge_json_and_strategic(client: KubeClient) -> None:
    await client.create("/api/v1/nodes", node_body("n", None, labels={"a": "1", "b": "2"}, stored=False))
    merged = await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": None, "c": "3"}}})
    assert merged["metadata"]["labels"] == {"b": "2", "c": "3"}, "null removes, maps merge"

    version = merged["metadata"]["resourceVersion"]
    guarded = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": version},
        {"op": "remove", "path": "/metadata/labels/b"},
    ]
    assert "b" not in (await client.patch("/api/v1/nodes/n", guarded, patch_type="json"))["metadata"]["labels"]
    with pytest.raises(ApiError) as failed_test:
        await client.patch("/api/v1/nodes/n", guarded, patch_type="json")
    assert failed_test.value.status == 422

    health = {"type": "AcceleratorHealthy", "status": "True"}
    node_now = await client.patch(
        "/api/v1/nodes/n/status", {"status": {"conditions": [health]}}, patch_type="strategic"
    )
    assert [c["type"] for c in node_now["status"]["conditions"]] == ["AcceleratorHealthy", "Ready"], (
        "merged by type, the patch's items placed first (strategicpatch `normalizeElementOrder`)"
    )
    replaced = await client.patch("/api/v1/nodes/n/status", {"status": {"conditions": [health]}})
    assert [c["type"] for c in replaced["status"]["conditions"]] == ["AcceleratorHealthy"], (
        "a merge patch replaces lists"
    )

    await client.create(POOLS, pool_body("p", {"accelerator": "H100"}))
    with pytest.raises(ApiError) as unsupported:
        await client.patch(f"{POOLS}/p", {"spec": {"nodes": 2}}, patch_type="strategic")
    assert unsupported.value.status == 415


async def test_status_and_the_rest_are_written_apart(client: KubeClient) -> None:
    created = await client.create(POOLS, pool_body("p", {"accelerator": "H100"}))
    await client.patch(f"{POOLS}/p/status", {"status": {"phase": "Ready"}, "spec": {"nodes": 5}})
    stored = await client.get(f"{POOLS}/p")
    assert stored["status"] == {"phase": "Ready"} and stored["spec"] == created["spec"]
    await client.patch(f"{POOLS}/p", {"status": {"phase": "Failed"}, "spec": {"nodes": 2}})
    stored = await client.get(f"{POOLS}/p")
    assert stored["status"] == {"phase": "Ready"} and stored["spec"]["nodes"] == 2
    replaced = await client.replace(f"{POOLS}/p/status", {**stored, "status": {"phase": "Configuring"}, "spec": {}})
    assert replaced["spec"]["nodes"] == 2 and replaced["status"] == {"phase": "Configuring"}

    await client.create(CONFIGMAPS, {"metadata": {"name": "c"}})
    with pytest.raises(NotFoundError):
        await client.patch(f"{CONFIGMAPS}/c/status", {"status": {}})


async def test_finalizers_hold_a_deletion(client: KubeClient) -> None:
    await client.create(CONFIGMAPS, {"metadata": {"name": "c", "finalizers": ["example.com/keep"]}})
    await client.delete(f"{CONFIGMAPS}/c")
    held = await client.get(f"{CONFIGMAPS}/c")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiError) as added:
        await client.patch(f"{CONFIGMAPS}/c", {"metadata": {"finalizers": ["example.com/keep", "example.com/more"]}})
    assert added.value.status == 422
    await client.patch(f"{CONFIGMAPS}/c", {"metadata": {"finalizers": None}})
    assert await client.get_or_none(f"{CONFIGMAPS}/c") is None
    with pytest.raises(NotFoundError):
        await client.request("DELETE", f"{CONFIGMAPS}/c")


async def test_injected_refusals_write_nothing_and_the_log_says_who_asked(
    api: RunningApiServer, client: KubeClient
) -> None:
    await client.create("/api/v1/nodes", node_body("n", None, stored=False))
    await client.get("/api/v1/nodes/n")  # the node lifecycle controller has lifted the Ready node's not-ready taint
    before = copy.deepcopy(api.get("/api/v1/nodes/n"))
    api.fail("PATCH /api/v1/nodes/n", 503)
    with pytest.raises(ApiError) as refused:
        await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
    assert refused.value.status == 503 and api.get("/api/v1/nodes/n") == before
    await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})  # the fault was spent
    assert [(s.method, s.plural, s.status, s.user_agent) for s in api.served.writes()] == [
        ("POST", "nodes", 201, "accelpool-test"),
        ("PATCH", "nodes", 503, "accelpool-test"),
        ("PATCH", "nodes", 200, "accelpool-test"),
    ]


async def test_a_reaction_answers_for_a_write_already_stored(api: RunningApiServer, client: KubeClient) -> None:
    await client.create("/api/v1/nodes", node_body("n", None, stored=False))
    api.server["patch"]["/api/v1/nodes/n"][:1] << 500
    with pytest.raises(ApiError):
        await client.patch("/api/v1/nodes/n", {"metadata": {"labels": {"a": "b"}}})
    assert (api.get("/api/v1/nodes/n") or {})["metadata"]["labels"] == {"a": "b"}, "the answer was lost, not the write"


async def test_pools_are_admitted_by_the_crd_then_by_the_webhook_the_chart_installs(
    api: RunningApiServer, client: KubeClient, tmp_path: Path
) -> None:
    """ComputePools are judged by accelpool's CRD (schema and CEL) on every cluster, and by the operator's
    webhook where the chart's ValidatingWebhookConfiguration is stored: called over HTTPS, its refusal
    worded as kube-apiserver words a webhook's."""
    only_the_webhook_refuses = pool_body("bad", {"accelerator": "L4", "mig": {"profile": "1g.5gb"}})
    the_schema_refuses = pool_body("worse", {"accelerator": "H100", "sharing": {"timeSlicing": {"replicas": 1}}})
    the_rules_refuse = pool_body("worst", {"accelerator": "H100", "health": {"interval": "200h"}})
    with pytest.raises(ApiError) as schema:
        await client.create(POOLS, the_schema_refuses)
    assert schema.value.status == 422 and "greater than or equal to 2" in schema.value.message
    with pytest.raises(ApiError) as rules:
        await client.create(POOLS, the_rules_refuse)
    assert rules.value.status == 422 and "spec.health.interval: Invalid value: interval must be" in rules.value.message
    assert (await client.create(POOLS, only_the_webhook_refuses))["spec"]["mig"] == {"profile": "1g.5gb"}
    async with demo_webhook.serving(api.server, tmp_path):
        with pytest.raises(ApiError) as webhook:
            await client.create(POOLS, {**only_the_webhook_refuses, "metadata": {"name": "bad-again"}})
        relabelled = {"metadata": {"labels": {"team": "a"}}}
        assert (await client.patch(f"{POOLS}/bad", relabelled))["metadata"]["labels"] == {"team": "a"}
    assert webhook.value.status == 422 and "does not support MIG" in webhook.value.message
    assert webhook.value.message.startswith('admission webhook "computepools.accelpool.io" denied the request: ')


async def test_an_event_about_an_object_of_no_namespace_belongs_in_default(
    api: RunningApiServer, client: KubeClient
) -> None:
    """kube-apiserver's Event validation (tests/conformance: list-watch-events/events), when the store enforces it."""
    about_a_node = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e"},
        "involvedObject": {"apiVersion": "v1", "kind": "Node", "name": "n"},
        "reason": "Test",
    }
    assert (await client.create(f"/api/v1/namespaces/{NAMESPACE}/events", about_a_node))["reason"] == "Test"
    api.server.store.strict_event_namespaces = True
    with pytest.raises(ApiError) as refused:
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/events", {**about_a_node, "metadata": {"name": "f"}})
    assert refused.value.status == 422
    assert refused.value.message == (
        'Event "f" is invalid: involvedObject.namespace: Invalid value: "": does not match event.namespace'
    )
    assert (await client.create("/api/v1/namespaces/default/events", about_a_node))["metadata"][
        "namespace"
    ] == "default"
