"""The demo's DRA components against the emulated API server (`accelpool_demo.dra.components`), stepped by the
test: NVIDIA's kubelet plugin publishes the ResourceSlice of the node whose device plugin is off, the
resourceclaim controller makes a pod's claim from its template, the scheduler allocates a GPU and binds
the pod, an XID taints a device until the plugin restarts, a DeviceTaintRule keeps claims off a GPU, and a
deleted pod's claim is deallocated and deleted.

The emulated API server serves `resource.k8s.io` as Kubernetes 1.37 does (DeviceTaintRule in v1) and
validates every DRA object the components write as kube-apiserver does.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from accelpool_api import conventions
from accelpool_demo import cluster, nvidia
from accelpool_demo.apiserver import RunningApiServer, serving
from accelpool_demo.dra import DELETE_PROTECTION_FINALIZER, XID_TAINT
from accelpool_demo.dra.components import RESTART_ANNOTATION, SLICES, DraNodeComponents, DraScheduler
from accelpool_demo.dra.nodes import Installation, KubeletPlugins
from accelpool_demo.nvidia import Gpu
from accelpool_demo.simulators import FAULT_ANNOTATION
from tests.support.builders import NVIDIA_GPU_CLASS
from tests.support.waiting import HANG_GUARD

pytestmark = [pytest.mark.integration, HANG_GUARD]

NAMESPACE = "team"
RESOURCE = "/apis/resource.k8s.io/v1"
FLEET = """
kind: DemoCluster
groups:
  - {prefix: h100, count: 2, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
"""
DRA_NODE = "h100-2"
DEVICE_PLUGIN_LABEL = conventions.DEVICE_PLUGIN_DEPLOY_LABEL
GPU_CLASS = NVIDIA_GPU_CLASS
TEMPLATE = {
    "apiVersion": "resource.k8s.io/v1",
    "kind": "ResourceClaimTemplate",
    "metadata": {"name": "one-gpu", "namespace": NAMESPACE},
    "spec": {
        "metadata": {"labels": {"accelpool.io/pool": "dra"}},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}},
    },
}


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "containers": [
                {"name": "train", "image": "registry.example/train:1", "resources": {"claims": [{"name": "gpu"}]}}
            ],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            "tolerations": [{"operator": "Exists"}],
        },
    }


@pytest.fixture
async def api() -> AsyncIterator[RunningApiServer]:
    async with serving() as running:
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        for node in cluster.nodes(cluster.parse(FLEET)):
            if node["metadata"]["name"] == DRA_NODE:
                node["metadata"]["labels"][DEVICE_PLUGIN_LABEL] = "false"
            running.put("/api/v1/nodes", node)
        yield running


def devices(api: RunningApiServer) -> dict[str, dict[str, Any]]:
    (found,) = api.list(SLICES)
    return {d["name"]: d for d in found["spec"]["devices"]}


def claim_of(api: RunningApiServer, name: str) -> dict[str, Any]:
    stored = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}")
    assert stored is not None
    (status,) = stored["status"]["resourceClaimStatuses"]
    found = api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{status['resourceClaimName']}")
    assert found is not None
    return found


def device_of(api: RunningApiServer, name: str) -> str:
    (result,) = claim_of(api, name)["status"]["allocation"]["devices"]["results"]
    return str(result["device"])


async def test_a_pod_gets_a_gpu_of_the_dra_node_and_gives_it_back(api: RunningApiServer) -> None:
    async with api.client() as client:
        health_checked = KubeletPlugins(Installation(health_check=True))  # NVIDIA's alpha NVMLDeviceHealthCheck
        plugins = DraNodeComponents(client, fault_annotation=FAULT_ANNOTATION, plugins=health_checked)
        scheduler = DraScheduler(client, clock=lambda: "2026-11-26T10:00:00Z")
        await plugins.step()
        (published,) = api.list(SLICES)
        assert published["spec"]["nodeName"] == DRA_NODE, "only where the device plugin is off"
        assert published["metadata"]["ownerReferences"][0]["name"] == DRA_NODE
        assert list(devices(api)) == [f"gpu-{i}" for i in range(8)]

        await client.create(f"{RESOURCE}/deviceclasses", GPU_CLASS)
        await client.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaimtemplates", TEMPLATE)
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("first"))
        await scheduler.step()
        first = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/first")
        assert first is not None and first["spec"]["nodeName"] == DRA_NODE
        assert [c["type"] for c in first["status"]["conditions"] if c["status"] == "True"] == ["PodScheduled"]
        claim = claim_of(api, "first")
        assert claim["metadata"]["name"].startswith("first-gpu-")
        assert claim["metadata"]["labels"] == {"accelpool.io/pool": "dra"}
        assert claim["metadata"]["finalizers"] == [DELETE_PROTECTION_FINALIZER]
        assert claim["status"]["reservedFor"] == [
            {"resource": "pods", "name": "first", "uid": first["metadata"]["uid"]}
        ]
        assert device_of(api, "first") == "gpu-0"

        # NVML reports XID 79 on GPU 1 (`accelpool demo inject h100-2 1:xid=79`): the plugin taints gpu-1
        await client.patch(f"/api/v1/nodes/{DRA_NODE}", {"metadata": {"annotations": {FAULT_ANNOTATION: "1:xid=79"}}})
        await plugins.step()
        (taint,) = devices(api)["gpu-1"]["taints"]
        assert taint.pop("timeAdded"), "stamped by the API server"
        assert taint == {"key": XID_TAINT, "value": "79", "effect": "NoSchedule"}
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("second"))
        await scheduler.step()
        await scheduler.step()
        assert device_of(api, "second") == "gpu-2", "gpu-0 is taken, gpu-1 tainted"

        # quarantine gpu-3 with a DeviceTaintRule: a 1.37 scheduler keeps the next claim off it
        rule = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceTaintRule",
            "metadata": {"name": "accelpool-q-h100-2-gpu-3"},
            "spec": {
                "deviceSelector": {"driver": "gpu.nvidia.com", "pool": DRA_NODE, "device": "gpu-3"},
                "taint": {"key": "accelpool.io/quarantine", "value": "xid-79", "effect": "NoSchedule"},
            },
        }
        await client.create(f"{RESOURCE}/devicetaintrules", rule)
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("third"))
        await scheduler.step()
        await scheduler.step()
        assert device_of(api, "third") == "gpu-4"

        # the fault cleared: the taint stays until the plugin restarts
        await client.patch(f"/api/v1/nodes/{DRA_NODE}", {"metadata": {"annotations": {FAULT_ANNOTATION: None}}})
        await plugins.step()
        assert "taints" in devices(api)["gpu-1"]
        await client.patch(f"/api/v1/nodes/{DRA_NODE}", {"metadata": {"annotations": {RESTART_ANNOTATION: "1"}}})
        await plugins.step()
        assert "taints" not in devices(api)["gpu-1"]

        # the first pod goes: its claim is released, deallocated and (generated, owned by it) deleted
        name = claim_of(api, "first")["metadata"]["name"]
        await client.delete(f"/api/v1/namespaces/{NAMESPACE}/pods/first")
        await scheduler.step()
        assert api.get(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims/{name}") is None
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("fourth"))
        await scheduler.step()
        await scheduler.step()
        assert device_of(api, "fourth") == "gpu-0", "the freed GPU is first in slice order"


async def test_an_unschedulable_pod_gets_the_schedulers_message_once(api: RunningApiServer) -> None:
    async with api.client() as client:
        plugins = DraNodeComponents(client, plugins=KubeletPlugins(Installation()))
        scheduler = DraScheduler(client)
        await plugins.step()
        await client.create(f"{RESOURCE}/deviceclasses", GPU_CLASS)
        nine = {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 9}}
        claim = {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": "nine", "namespace": NAMESPACE},
            "spec": {"devices": {"requests": [nine]}},
        }
        await client.create(f"{RESOURCE}/namespaces/{NAMESPACE}/resourceclaims", claim)
        wanting = pod("big")
        wanting["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimName": "nine"}]
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", wanting)
        await scheduler.step()
        await scheduler.step()
        stored = api.get(f"/api/v1/namespaces/{NAMESPACE}/pods/big")
        assert stored is not None and not stored["spec"].get("nodeName")
        (condition,) = stored["status"]["conditions"]
        assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
        assert condition["message"] == (
            "0/2 nodes are available: 2 cannot allocate all claims. still not schedulable, preemption: 0/2 nodes "
            "are available: 2 Preemption is not helpful for scheduling."
        )
        events = [e for e in api.list(f"/api/v1/namespaces/{NAMESPACE}/events") if e["reason"] == "FailedScheduling"]
        assert [e["message"] for e in events] == [condition["message"]], "recorded once, not at every attempt"
        (event,) = events
        assert (event["reportingComponent"], event["action"]) == ("default-scheduler", "Scheduling")


async def test_no_dra_api_no_writes() -> None:
    """A server that does not serve resource.k8s.io: the components step without writing anything."""
    async with serving(runtime_config={"resource.k8s.io/v1": False}) as running, running.client() as client:
        running.put("/api/v1/nodes", cluster.nodes(cluster.parse(FLEET))[0])
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        await client.create(f"/api/v1/namespaces/{NAMESPACE}/pods", pod("waiting"))
        await DraNodeComponents(client, plugins=KubeletPlugins(Installation(node_selector=None))).step()
        await DraScheduler(client).step()
        assert len(running.server.writes()) == 1, "only the test's pod: nothing else written"


async def test_a_deleted_plugin_pod_restarts_the_plugin_which_then_sees_the_new_mig_layout(
    api: RunningApiServer,
) -> None:
    """accelpool's operator deletes the kubelet plugin's pod after a static-MIG change (its DaemonSet makes a new
    one): the new plugin publishes the MIG devices the MIG manager made meanwhile, and forgets its taints."""
    plugins_namespace = "nvidia-dra-driver-gpu"
    api.put("/api/v1/namespaces", {"metadata": {"name": plugins_namespace}})
    simulation = nvidia.Simulation()
    simulation.nodes[DRA_NODE] = nvidia.NodeState(tuple(Gpu("H100-80GB", 81559) for _ in range(8)))
    async with api.client() as client:
        components = DraNodeComponents(
            client,
            simulation,
            fault_annotation=FAULT_ANNOTATION,
            plugin_namespace=plugins_namespace,
            plugins=KubeletPlugins(Installation(health_check=True)),
        )
        await components.step()
        (plugin_pod,) = api.list(f"/api/v1/namespaces/{plugins_namespace}/pods")
        assert plugin_pod["spec"]["nodeName"] == DRA_NODE
        assert plugin_pod["metadata"]["name"].startswith("dra-driver-nvidia-gpu-kubelet-plugin-")
        assert plugin_pod["metadata"]["labels"]["app.kubernetes.io/name"] == "dra-driver-nvidia-gpu"
        assert plugin_pod["status"]["phase"] == "Running"
        await client.patch(f"/api/v1/nodes/{DRA_NODE}", {"metadata": {"annotations": {FAULT_ANNOTATION: "xid=79"}}})
        await components.step()
        assert "taints" in devices(api)["gpu-0"]

        layout = Gpu("H100-80GB", 81559, mig_enabled=True, mig_devices=("3g.40gb", "3g.40gb"))
        simulation.nodes[DRA_NODE] = nvidia.NodeState((layout, *simulation.nodes[DRA_NODE].gpus[1:]))
        await components.step()
        assert "gpu-0" in devices(api), "static MIG: the running plugin does not see the new layout"

        await client.delete(f"/api/v1/namespaces/{plugins_namespace}/pods/{plugin_pod['metadata']['name']}")
        await components.step()
        (replacement,) = api.list(f"/api/v1/namespaces/{plugins_namespace}/pods")
        assert replacement["metadata"]["uid"] != plugin_pod["metadata"]["uid"], "the DaemonSet's new pod"
        published = devices(api)
        assert [n for n in published if n.startswith("gpu-0")] == ["gpu-0-mig-3g40gb-9-0", "gpu-0-mig-3g40gb-9-4"]
        assert not any("taints" in d for d in published.values()), "a new process: no taints"

        await client.patch(f"/api/v1/nodes/{DRA_NODE}", {"metadata": {"labels": {DEVICE_PLUGIN_LABEL: "true"}}})
        await components.step()
        assert api.list(f"/api/v1/namespaces/{plugins_namespace}/pods") == [], "the DaemonSet leaves the node"
        assert api.list(SLICES) == [], "its slices go with it"
