"""The simulated device plugin honours the GPU Operator's `nvidia.com/gpu.deploy.device-plugin` label: a node
labelled `false` runs no device plugin, so its kubelet reports 0 `nvidia.com/gpu` (the operator moves DRA
pools' nodes to NVIDIA's DRA plugin this way), while GFD keeps labelling it. Pure: time is an argument."""

from __future__ import annotations

import yaml

from accelpool_api import conventions
from accelpool_demo import nvidia
from accelpool_demo.nvidia import Installation

LABEL = conventions.DEVICE_PLUGIN_DEPLOY_LABEL


def step(sim: nvidia.Simulation, labels: dict[str, str], capacity: dict[str, str], version: int) -> nvidia.NodeChanges:
    body = {
        "metadata": {"name": "n", "labels": labels, "resourceVersion": str(version)},
        "status": {"capacity": capacity},
    }
    return sim.node(body, 0.0)


def test_a_node_labelled_false_advertises_no_gpus_and_keeps_its_gfd_labels() -> None:
    sim = nvidia.Simulation(Installation(default_config="default"))
    sim.observe({"default": yaml.safe_dump({"version": "v1"})}, None, 0.0)
    labels = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "8"}
    capacity = {"nvidia.com/gpu": "8"}

    assert step(sim, dict(labels), capacity, 1).resources == {}, "the plugin runs: 8 GPUs, as already reported"

    off = step(sim, {**labels, LABEL: "false"}, capacity, 2)
    assert off.resources == {"nvidia.com/gpu": "0"}, "no plugin on the node: the kubelet reports 0"
    assert not off.plugin_error
    gfd = step(sim, {**labels, LABEL: "false", "nvidia.com/gpu.product": "stale"}, {"nvidia.com/gpu": "0"}, 3)
    assert gfd.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", "GFD still labels the node"

    back = step(sim, {**labels, LABEL: "true"}, {"nvidia.com/gpu": "0"}, 4)
    assert back.resources == {"nvidia.com/gpu": "8"}, "the label back to true: the plugin advertises again"


def test_a_missing_or_empty_label_means_deployed() -> None:
    """The GPU Operator fills a missing or empty label with `true` before its DaemonSet selects the node."""
    assert nvidia.device_plugin_deployed({})
    assert nvidia.device_plugin_deployed({LABEL: ""})
    assert nvidia.device_plugin_deployed({LABEL: "true"})
    assert not nvidia.device_plugin_deployed({LABEL: "false"})
