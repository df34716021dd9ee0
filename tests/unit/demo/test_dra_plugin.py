"""NVIDIA's DRA kubelet plugin, simulated (`accelpool_demo.dra.plugin`, `accelpool_demo.dra.nodes`): the
devices it publishes for a node's GPUs (against the reference note's sections 4.3/4.4 and the
NVIDIA-shaped slice a real kube-apiserver v1.36.2 accepted), static MIG seen only after a restart, the
health taints of XIDs, where it runs, and the slice writes that keep a node's slice current. Pure."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.decide.dra.slices import read_slices
from accelpool_agent.backends.fake import FakeBackend
from accelpool_api import conventions
from accelpool_core import catalog
from accelpool_demo import dra
from accelpool_demo.dra import cel
from accelpool_demo.dra.nodes import node_slices, reconcile
from accelpool_demo.dra.plugin import mig_device_name
from accelpool_demo.nvidia import Gpu
from tests.conformance import transcripts
from tests.support.environment import require_shared

GPU_ATTRIBUTES = {
    "type",
    "uuid",
    "productName",
    "brand",
    "architecture",
    "cudaComputeCapability",
    "driverVersion",
    "cudaDriverVersion",
    "resource.kubernetes.io/pciBusID",
    "resource.kubernetes.io/pcieRoot",
}
"""Reference note 4.3, full GPU (addressingMode, numaNode and the FabricManager attributes are optional)."""
VERSIONS = {"cudaComputeCapability", "driverVersion", "cudaDriverVersion"}


H100_MIB = 81559
"""What NVML reports for an H100 80GB HBM3 (the demo's GFD label `nvidia.com/gpu.memory`, the recorded slice)."""


def h100s(count: int = 8, **mig: Any) -> list[Gpu]:
    return [Gpu("H100-80GB", H100_MIB, **mig) for _ in range(count)]


def test_a_node_publishes_one_device_per_gpu_shaped_as_nvidias_plugin() -> None:
    devices = dra.Plugin.started(h100s()).devices()
    assert [d["name"] for d in devices] == [f"gpu-{i}" for i in range(8)]
    first = devices[0]
    assert set(first["attributes"]) == GPU_ATTRIBUTES
    assert {k for k, v in first["attributes"].items() if "version" in v} == VERSIONS
    assert {k: v for k, v in first["attributes"].items() if k not in ("uuid",) and "string" in v} == {
        "type": {"string": "gpu"},
        "productName": {"string": "NVIDIA H100 80GB HBM3"},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"},
        "resource.kubernetes.io/pciBusID": {"string": "0000:18:00.0"},
        "resource.kubernetes.io/pcieRoot": {"string": "pci0000:15"},
    }, "the reference note's example: gpu-0 at 0000:18:00.0 under pci0000:15"
    assert first["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert first["attributes"]["cudaDriverVersion"] == {"version": "13.0.0"}, "NVML's 13.0 as semver"
    assert first["capacity"] == {"memory": {"value": "81559Mi"}}, "bytes, written BinarySI"
    assert "taints" not in first


def test_uuids_are_the_ones_the_nodes_agent_reports() -> None:
    """The demo's agents run the fake backend with seed 0: a UUID the agent reports names a device in the slice."""
    agent = FakeBackend(catalog.BY_NAME["H100-80GB"], 8).inventory()
    devices = dra.Plugin.started(h100s()).devices()
    assert [d["attributes"]["uuid"]["string"] for d in devices] == [g.uuid for g in agent]


def test_the_slice_is_the_nodes_pool_owned_by_the_node() -> None:
    devices = dra.Plugin.started(h100s(2)).devices()
    body = dra.resource_slice("gpu-node-07", "uid-7", devices)
    assert body["metadata"] == {
        "generateName": "gpu-node-07-gpu.nvidia.com-",
        "ownerReferences": [
            {"apiVersion": "v1", "kind": "Node", "name": "gpu-node-07", "uid": "uid-7", "controller": True}
        ],
    }
    assert body["spec"]["driver"] == "gpu.nvidia.com"
    assert body["spec"]["nodeName"] == "gpu-node-07"
    assert body["spec"]["pool"] == {"name": "gpu-node-07", "generation": 1, "resourceSliceCount": 1}


def test_the_published_devices_match_the_nvidia_shaped_slice_the_real_server_stored() -> None:
    """The recorded slice (dra.yaml, dra-objects) was written after NVIDIA's code; ours has each of its
    attributes with the same type and, for what does not vary per machine, the same value; both classes of
    the recording select our GPUs as they select its."""
    require_shared("fidelity/kubernetes/dra.yaml")
    steps = transcripts.scenario_of("dra/dra-objects").steps
    recorded = steps[10].request["body"]["spec"]["devices"][0]  # type: ignore[index]
    ours = dra.Plugin.started(h100s()).devices()[0]
    for name, value in recorded["attributes"].items():
        assert set(ours["attributes"][name]) == set(value), name
    for name in ("type", "productName", "brand", "architecture", "cudaComputeCapability", "driverVersion"):
        assert ours["attributes"][name] == recorded["attributes"][name], name
    assert set(ours["capacity"]) == set(recorded["capacity"])
    for index in (3, 4):
        device_class = steps[index].request["body"]  # type: ignore[index]
        for selector in device_class["spec"]["selectors"]:
            expression = selector["cel"]["expression"]
            for device in (recorded, ours):
                assert cel.matches(expression, cel.device_variable("gpu.nvidia.com", device)) == cel.matches(
                    expression, cel.device_variable("gpu.nvidia.com", recorded)
                ), expression


def test_a_mig_gpu_publishes_its_mig_devices_only() -> None:
    layout = ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")
    gpus = [*h100s(1), Gpu("H100-80GB", H100_MIB, mig_enabled=True, mig_devices=layout)]
    plugin = dra.Plugin.started(gpus)
    devices = {d["name"]: d for d in plugin.devices()}
    assert list(devices) == [
        "gpu-0",
        "gpu-1-mig-1g10gb-19-0",
        "gpu-1-mig-1g10gb-19-1",
        "gpu-1-mig-2g20gb-14-2",
        "gpu-1-mig-3g40gb-9-4",
    ], "no gpu-1: a MIG-enabled GPU is its MIG devices; every placement distinct"
    parent = plugin.gpus[1].uuid
    mig = devices["gpu-1-mig-3g40gb-9-4"]
    assert mig["attributes"]["type"] == {"string": "mig"}
    assert mig["attributes"]["parentUUID"] == {"string": parent}
    assert mig["attributes"]["profile"] == {"string": "3g.40gb"}
    assert mig["attributes"]["uuid"]["string"].startswith("MIG-")
    assert mig["attributes"]["productName"] == devices["gpu-0"]["attributes"]["productName"]
    assert mig["capacity"]["memory"] == {"value": "40Gi"}
    assert mig["capacity"]["multiprocessors"] == {"value": "48"}
    assert {k for k in mig["capacity"] if k.startswith("memorySlice")} == {f"memorySlice{i}" for i in range(4, 8)}
    assert len({d["attributes"]["uuid"]["string"] for d in devices.values()}) == 5


def test_mig_device_names_follow_nvidias_canonical_name() -> None:
    assert mig_device_name(0, "1g.12gb", 19, 0) == "gpu-0-mig-1g12gb-19-0", "the reference note's example"
    assert mig_device_name(3, "1g.10gb+me", 20, 6) == "gpu-3-mig-1g10gb-me-20-6"


def test_a_mig_enabled_gpu_without_mig_devices_publishes_nothing() -> None:
    assert dra.Plugin.started([Gpu("A100-40GB", 40960, mig_enabled=True)]).devices() == []


def test_a_new_static_mig_layout_shows_only_after_a_restart() -> None:
    plugin = dra.Plugin.started(h100s(1))
    reconfigured = [Gpu("H100-80GB", H100_MIB, mig_enabled=True, mig_devices=("7g.80gb",))]
    assert plugin.device_names() == ["gpu-0"], "the MIG manager changed the GPU; the plugin still has what it found"
    assert plugin.restarted(reconfigured).device_names() == ["gpu-0-mig-7g80gb-0-0"]


def test_a_fatal_xid_taints_its_device_until_the_plugin_restarts() -> None:
    plugin = dra.Plugin.started(h100s(2)).xid(1, 79)
    devices = plugin.devices()
    assert devices[1]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]
    assert "taints" not in devices[0]
    again = plugin.xid(1, 48)
    assert again.devices()[1]["taints"] == [{"key": "gpu.nvidia.com/xid", "value": "48", "effect": "NoSchedule"}], (
        "one taint per key: the latest XID wins"
    )
    assert all("taints" not in d for d in again.restarted(h100s(2)).devices()), "only a restart clears it"


@pytest.mark.parametrize("xid", sorted(dra.IGNORED_XIDS))
def test_an_application_xid_taints_with_effect_none(xid: int) -> None:
    taints = dra.Plugin.started(h100s(1)).xid(0, xid).devices()[0]["taints"]
    assert taints == [{"key": "gpu.nvidia.com/xid", "value": str(xid), "effect": "None"}]


def test_xids_the_installation_ignores_and_a_lost_gpu() -> None:
    plugin = dra.Plugin.started(h100s(2), additional_xids_to_ignore=[94])
    assert plugin.xid(0, 94).devices()[0]["taints"][0]["effect"] == "None"
    lost = plugin.gpu_lost().devices()
    assert [d["taints"] for d in lost] == [[{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]] * 2


def test_an_xid_on_a_mig_device_taints_that_device() -> None:
    gpus = [Gpu("H100-80GB", H100_MIB, mig_enabled=True, mig_devices=("3g.40gb", "3g.40gb"))]
    plugin = dra.Plugin.started(gpus)
    assert plugin.xid(0, 79) == plugin, "no full-GPU device to taint on a MIG-enabled GPU"
    tainted = {
        d["name"] for d in plugin.xid(0, 79, mig_profile="3g.40gb", placement_start=0).devices() if "taints" in d
    }
    assert tainted == {"gpu-0-mig-3g40gb-9-0"}


# ---------------------------------------------------------------- where it runs, and the slice writes


def node_labels(**extra: str) -> dict[str, str]:
    return {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", **extra}


def test_the_plugin_runs_where_the_device_plugin_does_not() -> None:
    plugins = dra.KubeletPlugins()
    assert plugins.node("a", node_labels(), h100s()) is None, "the device plugin serves this node"
    published = plugins.node("b", node_labels(**{conventions.DEVICE_PLUGIN_DEPLOY_LABEL: "false"}), h100s())
    assert published is not None and len(published) == 8
    assert plugins.node("b", node_labels(), h100s()) is None, "unselected again: stopped, its slice goes"
    assert "b" not in plugins.plugins
    everywhere = dra.KubeletPlugins(dra.Installation(node_selector=None))
    assert everywhere.node("a", node_labels(), h100s()) is not None, "the chart's default: every GPU node"
    assert everywhere.node("c", {}, None) is None, "no NVIDIA GPUs"


def test_xids_and_restarts_through_the_nodes_plugins() -> None:
    plugins = dra.KubeletPlugins(dra.Installation(node_selector=None, health_check=True))
    assert not plugins.xid("a", 0, 79), "no plugin on the node yet"
    plugins.node("a", node_labels(), h100s(2))
    assert plugins.xid("a", 0, 79)
    assert not plugins.xid("a", 0, 79), "the same taint again changes nothing"
    assert plugins.node("a", node_labels(), h100s(2))[0]["taints"]  # type: ignore[index]
    assert plugins.restart("a", h100s(2))
    assert "taints" not in plugins.node("a", node_labels(), h100s(2))[0]  # type: ignore[index]
    unhealthy_off = dra.KubeletPlugins(dra.Installation(node_selector=None, health_check=False))
    unhealthy_off.node("a", node_labels(), h100s(2))
    assert not unhealthy_off.xid("a", 0, 79), "NVMLDeviceHealthCheck off: XIDs taint nothing"


def stored(body: dict[str, Any], name: str = "n-gpu.nvidia.com-abcde") -> dict[str, Any]:
    """A slice as the API server keeps it: named, with a resourceVersion, taints stamped with timeAdded."""
    result: dict[str, Any] = {**body, "metadata": {**body["metadata"], "name": name, "resourceVersion": "5"}}
    for device in result["spec"]["devices"]:
        for taint in device.get("taints") or []:
            taint.setdefault("timeAdded", "2026-07-22T02:24:46Z")
    return result


def test_slice_writes_create_update_in_place_and_delete() -> None:
    plugin = dra.Plugin.started(h100s(2))
    (create,) = reconcile("n", "uid", plugin.devices(), [])
    assert (create.method, create.body["spec"]["pool"]["generation"]) == ("POST", 1)  # type: ignore[index]
    current = stored(dict(create.body))  # type: ignore[arg-type]
    assert reconcile("n", "uid", plugin.devices(), [current]) == [], "nothing changed: nothing written"

    (update,) = reconcile("n", "uid", plugin.xid(1, 79).devices(), [current])
    assert (update.method, update.name) == ("PUT", "n-gpu.nvidia.com-abcde")
    assert update.body["metadata"]["resourceVersion"] == "5"  # type: ignore[index]
    assert update.body["spec"]["pool"]["generation"] == 1, "one slice, one update: the generation stays"  # type: ignore[index]
    tainted = stored(dict(update.body))  # type: ignore[arg-type]
    assert reconcile("n", "uid", plugin.xid(1, 79).devices(), [tainted]) == [], "timeAdded is the server's"
    (clear,) = reconcile("n", "uid", plugin.devices(), [tainted])
    assert "taints" not in clear.body["spec"]["devices"][1]  # type: ignore[index]

    assert reconcile("n", "uid", None, [tainted]) == [dra.SliceWrite("DELETE", "n-gpu.nvidia.com-abcde")]


def test_stale_and_extra_slices_are_deleted() -> None:
    devices = dra.Plugin.started(h100s(1)).devices()
    old = stored(dra.resource_slice("n", "uid", devices, generation=1), "n-old")
    new = stored(dra.resource_slice("n", "uid", devices, generation=2), "n-new")
    other = stored(dra.resource_slice("m", "uid", devices), "m-one")
    assert node_slices([old, new, other], "n") == [old, new]
    assert reconcile("n", "uid", devices, [old, new]) == [dra.SliceWrite("DELETE", "n-old")]


def test_a_node_publishes_the_driver_version_gfd_labelled() -> None:
    plugins = dra.KubeletPlugins(dra.Installation(node_selector=None))
    devices = plugins.node("a", node_labels(**{"nvidia.com/cuda.driver-version.full": "580.95.05"}), h100s(1))
    assert devices is not None
    assert devices[0]["attributes"]["driverVersion"] == {"version": "580.95.5"}, "semver: no leading zero"
    assert plugins.node("b", node_labels(), h100s(1))[0]["attributes"]["driverVersion"] == {"version": "580.126.20"}  # type: ignore[index]


def test_the_operator_reads_the_simulated_slices() -> None:
    """accelpool's reader of NVIDIA's slices (`accelpool.decide.dra.slices`) finds each GPU by the UUID the agent
    reports, its MIG devices by parent, and the plugin's taints."""
    layout = ("3g.40gb", "3g.40gb")
    gpus = [*h100s(1), Gpu("H100-80GB", H100_MIB, mig_enabled=True, mig_devices=layout)]
    plugin = dra.Plugin.started(gpus).xid(0, 79)
    agent = FakeBackend(catalog.BY_NAME["H100-80GB"], 2).inventory()
    (pool,) = read_slices([dra.resource_slice("n", "uid", plugin.devices())]).values()
    assert pool.node == "n" and pool.complete
    (whole,) = pool.devices_of(agent[0].uuid)
    assert (whole.name, whole.type, str(whole.blocking_taint)) == ("gpu-0", "gpu", "gpu.nvidia.com/xid=79:NoSchedule")
    assert [(d.type, d.profile) for d in pool.devices_of(agent[1].uuid)] == [("mig", "3g.40gb")] * 2


def test_selectors_evaluate_with_kubernetes_own_string_and_list_functions() -> None:
    """A selector the API server admits (it has Kubernetes' regex and list libraries) must evaluate too."""
    gpu = cel.device_variable("gpu.nvidia.com", dra.Plugin.started(h100s(1)).devices()[0])
    assert cel.matches("device.attributes['gpu.nvidia.com'].productName.find('H[0-9]+') == 'H100'", gpu)
    assert cel.matches("[1, 2, 3].isSorted() && [1, 2].sum() == 3", gpu)
