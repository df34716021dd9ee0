"""The demo's API server as the operator and its agents meet it over HTTP: writes with the API
server's resourceVersion semantics (PUT and server-side apply included), the admission that refuses
agent pods on a cluster without their ServiceAccount or RuntimeClass, the DaemonSet controller and
kubelet that roll an applied agent DaemonSet onto its agents, and a footprint that stays bounded
however many requests it serves."""

from __future__ import annotations

import asyncio
import copy
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from accelpool_core.kube import ApiError, ConflictError, KubeClient, NotFoundError
from accelpool_demo import webhook as demo_webhook
from accelpool_demo.apiserver import NAME_ALPHABET, ApiServer, serving
from accelpool_demo.daemonsets import DaemonSetController
from accelpool_demo.simulators import Kubelet
from tests.support.builders import node_body, pool_body
from tests.support.cases import defaulted
from tests.support.environment import ROOT, require_tool
from tests.unit.api.test_examples import expected_rejection

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]
NAMESPACE = "accelpool-system"
DAEMONSETS = f"/apis/apps/v1/namespaces/{NAMESPACE}/daemonsets"
CONFIG = "ACCELPOOL_AGENT_CONFIG"


def daemonset(config: str) -> dict[str, Any]:
    """An agent DaemonSet as the operator renders it, reduced to what the kubelet reads."""
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "accelpool-agent-training", "namespace": NAMESPACE},
        "spec": {
            "template": {
                "spec": {
                    "nodeSelector": {"accelpool.io/pool": "training"},
                    "containers": [{"name": "agent", "env": [{"name": CONFIG, "value": config}]}],
                }
            }
        },
    }


L4_NODE = node_body(
    "l4-1",
    None,
    labels={"accelpool.io/pool": "training", "nvidia.com/gpu.product": "NVIDIA-L4", "nvidia.com/gpu.count": "1"},
    stored=False,
)
"""A node of the training pool whose kubelet reports it Ready (so the not-ready taint is lifted)."""


@pytest.fixture
async def api() -> AsyncIterator[tuple[ApiServer, KubeClient]]:
    async with serving(remember=100) as running:
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        async with running.client() as client:
            yield running.server, client


async def test_put_replaces_like_the_api_server(api: tuple[ApiServer, KubeClient]) -> None:
    _, client = api
    created = await client.create(DAEMONSETS, daemonset('{"a": 1}'))
    path = f"{DAEMONSETS}/accelpool-agent-training"

    body = daemonset('{"a": 2}')
    body["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    replaced = await client.replace(path, body)
    assert replaced["spec"] == body["spec"]
    assert int(replaced["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert replaced["metadata"]["uid"] == created["metadata"]["uid"]
    assert replaced["metadata"]["creationTimestamp"] == created["metadata"]["creationTimestamp"]
    assert replaced["metadata"]["generation"] == created["metadata"]["generation"] + 1
    assert await client.get(path) == replaced

    stale = daemonset('{"a": 3}')
    stale["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    with pytest.raises(ConflictError) as conflict:
        await client.replace(path, stale)
    assert conflict.value.reason == "Conflict"
    assert await client.get(path) == replaced

    unconditional = await client.replace(path, daemonset('{"a": 4}'))
    assert unconditional["spec"] == daemonset('{"a": 4}')["spec"]
    assert unconditional["metadata"]["resourceVersion"] != replaced["metadata"]["resourceVersion"]

    other = daemonset("{}")
    with pytest.raises(ApiError) as renamed:
        await client.replace(f"{DAEMONSETS}/accelpool-agent-other", other)
    assert renamed.value.status == 400
    other["metadata"]["name"] = "accelpool-agent-other"
    with pytest.raises(NotFoundError) as missing:
        await client.replace(f"{DAEMONSETS}/accelpool-agent-other", other)
    assert missing.value.reason == "NotFound"


async def test_patches_get_new_versions_and_stale_ones_conflict(api: tuple[ApiServer, KubeClient]) -> None:
    _, client = api
    created = await client.create("/api/v1/nodes", L4_NODE)
    patched = await client.patch("/api/v1/nodes/l4-1", {"metadata": {"labels": {"a": "b"}}})
    assert int(patched["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    stale = {"metadata": {"resourceVersion": created["metadata"]["resourceVersion"], "labels": {"a": "c"}}}
    with pytest.raises(ConflictError):
        await client.patch("/api/v1/nodes/l4-1", stale)
    assert (await client.get("/api/v1/nodes/l4-1"))["metadata"]["labels"]["a"] == "b"


def _environment(pid: int) -> dict[str, str]:
    raw = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    return dict(entry.decode().split("=", 1) for entry in raw if b"=" in entry)


async def test_an_applied_daemonset_change_rolls_onto_the_agents(
    api: tuple[ApiServer, KubeClient], tmp_path: Path
) -> None:
    """The operator applies its agent DaemonSet when a pool's health policy changes; the DaemonSet
    controller replaces the pool's pods and the kubelet runs their agents with the new config."""
    _, client = api
    path = f"{DAEMONSETS}/accelpool-agent-training"
    await client.create("/api/v1/nodes", L4_NODE)
    await client.apply(path, daemonset('{"interval": 900}'), field_manager="accelpool")
    controller = DaemonSetController(client, NAMESPACE)
    kubelet = Kubelet(client, server=client.credentials.server, namespace=NAMESPACE, log_dir=tmp_path)
    try:
        await controller.sync()
        await kubelet.step()
        before = kubelet.agents["l4-1"].process
        assert _environment(before.pid)[CONFIG] == '{"interval": 900}'
        await controller.sync()  # the kubelet reported the pod Ready
        status = (await client.get(path))["status"]
        assert (status["desiredNumberScheduled"], status["numberReady"], status["numberUnavailable"]) == (1, 1, 0)

        await client.apply(path, daemonset('{"interval": 600}'), field_manager="accelpool")
        await controller.sync()
        await kubelet.step()

        after = kubelet.agents["l4-1"].process
        assert before.returncode is not None, "the agent with the old config still runs"
        assert after.pid != before.pid
        assert _environment(after.pid)[CONFIG] == '{"interval": 600}'
    finally:
        await kubelet.stop_all()
    assert after.returncode is not None


async def test_apply_creates_merges_and_prunes_like_the_api_server(api: tuple[ApiServer, KubeClient]) -> None:
    _, client = api
    path = f"{DAEMONSETS}/accelpool-agent-training"
    intent = daemonset('{"a": 1}')
    intent["metadata"]["labels"] = {"team": "ml", "tier": "gpu"}
    created = await client.apply(path, intent, field_manager="accelpool")
    assert created["metadata"]["generation"] == 1
    (entry,) = created["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("accelpool", "Apply")
    assert entry["fieldsV1"]["f:metadata"]["f:labels"] == {"f:team": {}, "f:tier": {}}

    same = await client.apply(path, intent, field_manager="accelpool")
    assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"], "a no-op writes nothing"

    # A controller writes the status (PUT with what it read); an apply without a resourceVersion
    # cannot conflict with it, keeps it, and drops what the applier set before and leaves out now.
    await client.replace(f"{path}/status", {**created, "status": {"numberReady": 1}})
    await client.patch(path, {"metadata": {"annotations": {"someone.else/note": "kept"}}})
    del intent["metadata"]["labels"]["tier"]
    intent["spec"]["template"]["spec"]["runtimeClassName"] = "nvidia"
    applied = await client.apply(path, intent, field_manager="accelpool")
    assert applied["status"] == {"numberReady": 1}
    assert applied["metadata"]["labels"] == {"team": "ml"}
    assert applied["metadata"]["annotations"] == {"someone.else/note": "kept"}
    assert applied["metadata"]["generation"] == 2
    assert applied["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"

    stale = copy.deepcopy(intent)
    stale["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
    with pytest.raises(ConflictError):  # a resourceVersion, when sent, is a precondition
        await client.apply(path, stale, field_manager="accelpool")
    with pytest.raises(ApiError) as missing:
        await client.request("PATCH", path, body=intent, content_type="application/apply-patch+yaml")
    assert missing.value.status == 422, "an apply names its field manager (PatchOptions are invalid without it)"


async def test_apply_conflicts_with_another_applier_unless_forced(api: tuple[ApiServer, KubeClient]) -> None:
    _, client = api
    path = f"{DAEMONSETS}/accelpool-agent-training"
    await client.apply(path, daemonset('{"a": 1}'), field_manager="accelpool")
    other = daemonset('{"a": 2}')
    with pytest.raises(ConflictError):
        await client.apply(path, other, field_manager="kubectl", force=False)
    taken = await client.apply(path, other, field_manager="kubectl", force=True)
    assert taken["spec"]["template"]["spec"]["containers"][0]["env"][0]["value"] == '{"a": 2}'
    owners = {e["manager"]: e["fieldsV1"] for e in taken["metadata"]["managedFields"]}
    assert "f:containers" in owners["kubectl"]["f:spec"]["f:template"]["f:spec"]
    accelpool = owners["accelpool"]["f:spec"]["f:template"]["f:spec"]
    assert "f:containers" not in accelpool and "f:nodeSelector" in accelpool, "an equal value is owned by both"


async def test_admission_refuses_pods_without_their_service_account_or_runtime_class(
    api: tuple[ApiServer, KubeClient],
) -> None:
    _, client = api
    pods = f"/api/v1/namespaces/{NAMESPACE}/pods"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"generateName": "accelpool-agent-training-"},
        "spec": {"serviceAccountName": "accelpool-agent", "runtimeClassName": "nvidia", "containers": []},
    }
    with pytest.raises(ApiError) as no_account:
        await client.create(pods, pod)
    assert no_account.value.status == 403
    name, _, why = no_account.value.message.partition('" is forbidden: ')
    assert name.startswith('pods "accelpool-agent-training-')
    assert len(suffix := name.removeprefix('pods "accelpool-agent-training-')) == 5 and set(suffix) <= set(
        NAME_ALPHABET
    )
    assert why == (
        'error looking up service account accelpool-system/accelpool-agent: serviceaccount "accelpool-agent" not found'
    )

    await client.create(f"/api/v1/namespaces/{NAMESPACE}/serviceaccounts", {"metadata": {"name": "accelpool-agent"}})
    with pytest.raises(ApiError) as no_class:
        await client.create(pods, pod)
    assert no_class.value.message.endswith(' is forbidden: pod rejected: RuntimeClass "nvidia" not found')

    await client.create("/apis/node.k8s.io/v1/runtimeclasses", {"metadata": {"name": "nvidia"}, "handler": "nvidia"})
    created = await client.create(pods, pod)
    assert created["metadata"]["name"].startswith("accelpool-agent-training-")
    assert created["metadata"]["namespace"] == NAMESPACE and created["status"] == {"phase": "Pending"}


async def test_footprint_stays_bounded_however_many_requests(api: tuple[ApiServer, KubeClient]) -> None:
    """kmock keeps every request (and scans them all to route the next), every version of every
    object and every failed request: a demo left running grew, and slowed, without bound."""
    emulator, client = api
    await client.create("/api/v1/nodes", L4_NODE)

    async def heartbeat(beat: int) -> None:
        beating = {"status": {"capacity": {"example.com/beat": str(beat)}}}
        await client.patch("/api/v1/nodes/l4-1/status", beating, patch_type="strategic")
        await client.get_or_none("/api/v1/nodes/missing")  # a 404: kmock records it as an error
        await client.list("/api/v1/nodes")

    for batch in range(10):
        await asyncio.gather(*(heartbeat(batch * 50 + beat) for beat in range(50)))

    assert (await client.get("/api/v1/nodes/l4-1"))["status"]["capacity"]["example.com/beat"] == "499"
    assert len(list(emulator)) <= 1, "kmock's records of requests are dropped"
    assert len(emulator.served) == 100 and emulator.served.total == 2 + 10 * 50 * 3
    assert len(emulator.errors) <= 100  # of the 500 404s served: the most recent ones
    assert all(len(obj.history) <= 2 for obj in emulator.objects.values())


POOLS = "/apis/accelpool.io/v1alpha1/computepools"


def _kubectl(server: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [require_tool("kubectl"), "--server", server, *args], capture_output=True, text=True, timeout=60, check=False
    )


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[tuple[KubeClient, str]]:
    """The demo's API server, with the chart's webhook configuration and the operator's webhook served as the
    demo serves them, and its URL, for the real kubectl."""
    async with (
        serving() as running,
        demo_webhook.serving(running.server, tmp_path),
        running.client() as client,
    ):
        yield client, running.url


async def test_kubectl_apply_is_answered_as_the_api_server_with_the_chart_answers_it(
    served: tuple[KubeClient, str],
) -> None:
    """Every file in examples/invalid/ is refused with the words its `# expect:` comment quotes, by the CRD or
    by the operator's webhook the server calls (kubectl
    asks for strict field validation, as the server publishes OpenAPI v3); a valid pool is stored; an
    unknown field is dropped for a client that does not ask for strictness."""
    client, url = served
    for path in sorted((ROOT / "examples" / "invalid").glob("*.yaml")):
        refused = await asyncio.to_thread(_kubectl, url, "create", "-f", str(path))
        assert refused.returncode != 0, path.name
        said = "\n".join(line.rstrip() for line in refused.stderr.splitlines())
        assert expected_rejection(path) in said, (path.name, refused.stderr)
    assert (await client.list(POOLS)) == []
    misspelled = pool_body("misspelled", {"accelerator": "H100", "gpus": 8})
    with pytest.raises(ApiError) as strict:
        await client.create(f"{POOLS}?fieldValidation=Strict", misspelled)
    assert strict.value.status == 400
    assert strict.value.message == expected_rejection(ROOT / "examples" / "invalid" / "unknown-field.yaml")
    loose = await client.create(POOLS, misspelled)
    assert loose["spec"] == defaulted({"accelerator": "H100"}), "the unknown field dropped, the defaults filled in"


async def test_kubectl_scale_sets_nodes_through_the_scale_subresource(served: tuple[KubeClient, str]) -> None:
    client, url = served
    await client.create(POOLS, pool_body("burst", {"accelerator": "H200:8", "provisioner": {"type": "karpenter"}}))
    scaled = await asyncio.to_thread(_kubectl, url, "scale", "cpool", "burst", "--replicas=3")
    assert scaled.returncode == 0, scaled.stderr
    pool = await client.get(f"{POOLS}/burst")
    assert pool["spec"]["nodes"] == 3 and pool["metadata"]["generation"] == 2
    scale = await client.get(f"{POOLS}/burst/scale")
    assert (scale["kind"], scale["spec"]["replicas"]) == ("Scale", 3)
    await client.patch(f"{POOLS}/burst", {"spec": {"maxNodes": 4}})
    too_many = await asyncio.to_thread(_kubectl, url, "scale", "cpool", "burst", "--replicas=5")
    assert too_many.returncode != 0 and "maxNodes must be at least nodes" in too_many.stderr
    assert (await client.get(f"{POOLS}/burst"))["spec"]["nodes"] == 3
