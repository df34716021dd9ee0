"""The simulation of NVIDIA's node-side components: GFD labels, the device plugin's resources, the
config-manager sidecar, the kubelet's ConfigMap projection and the MIG manager. Pure: time is an argument."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from accelpool.model import nvidia as accelpool_nvidia
from accelpool_api import conventions
from accelpool_core import catalog
from accelpool_demo import nvidia
from accelpool_demo.nvidia import Gpu, Installation, PluginConfig, Replicated

MIG_STATE = conventions.MIG_CONFIG_STATE_LABEL


def gpus(model: str = "H100-80GB", count: int = 8, layout: tuple[str, ...] | None = None) -> tuple[Gpu, ...]:
    if layout is None:
        return tuple(Gpu(model, 81920) for _ in range(count))
    return tuple(Gpu(model, 81920, mig_enabled=True, mig_devices=layout) for _ in range(count))


def entry(devices: dict[str, int]) -> list[dict[str, Any]]:
    return [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]


DISABLED = [{"devices": "all", "mig-enabled": False}]


def dp_config(strategy: str = "none", sharing: dict[str, Any] | None = None) -> str:
    document: dict[str, Any] = {"version": "v1", "flags": {"migStrategy": strategy}}
    if sharing:
        document["sharing"] = sharing
    return yaml.safe_dump(document)


def time_slicing(replicas: int, resource: str = "nvidia.com/gpu", *, rename: bool = False) -> dict[str, Any]:
    return {"timeSlicing": {"renameByDefault": rename, "resources": [{"name": resource, "replicas": replicas}]}}


# ---------------------------------------------------------------- GPU Feature Discovery


def test_gfd_whole_gpus_and_sharing() -> None:
    assert nvidia.gfd_labels(gpus(), PluginConfig()) == {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.memory": "81920",
    }
    shared = nvidia.gfd_labels(gpus("L4", 1), nvidia.plugin_config(dp_config(sharing=time_slicing(4))))
    assert shared["nvidia.com/gpu.product"] == "NVIDIA-L4-SHARED"
    assert (shared["nvidia.com/gpu.count"], shared["nvidia.com/gpu.replicas"]) == ("1", "4")
    assert shared["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    renamed = nvidia.gfd_labels(gpus("L4", 1), nvidia.plugin_config(dp_config(sharing=time_slicing(4, rename=True))))
    assert renamed["nvidia.com/gpu.product"] == "NVIDIA-L4", "renamed resources get no -SHARED suffix"
    mps = {"mps": time_slicing(2)["timeSlicing"]}
    assert (
        nvidia.gfd_labels(gpus("L4", 1), nvidia.plugin_config(dp_config(sharing=mps)))[
            "nvidia.com/gpu.sharing-strategy"
        ]
        == "mps"
    )
    assert conventions.GFD_MIG_STRATEGY_LABEL not in nvidia.gfd_labels(gpus(layout=("3g.40gb",)), PluginConfig())


def test_gfd_single_strategy_names_the_profile_and_counts_mig_devices() -> None:
    labels = nvidia.gfd_labels(gpus(layout=("1g.10gb+me",)), PluginConfig("single"))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"
    assert labels["nvidia.com/gpu.count"] == "8"
    assert labels["nvidia.com/mig.strategy"] == "single"
    seven = nvidia.gfd_labels(gpus("A100-40GB", 8, ("1g.5gb",) * 7), PluginConfig("single"))
    assert (seven["nvidia.com/gpu.product"], seven["nvidia.com/gpu.count"]) == (
        "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb",
        "56",
    )
    plain = nvidia.gfd_labels(gpus(), PluginConfig("single"))
    assert plain["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3", "no MIG-enabled GPU: as under none"
    assert plain["nvidia.com/mig.strategy"] == "single"


@pytest.mark.parametrize(
    "layout",
    [
        pytest.param(gpus(layout=()), id="MIG enabled, no MIG devices"),
        pytest.param(gpus(count=4) + gpus(count=4, layout=("3g.40gb", "3g.40gb")), id="MIG and non-MIG GPUs"),
        pytest.param(gpus(layout=("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb")), id="more than one profile"),
    ],
)
def test_gfd_single_strategy_invalid_layouts(layout: tuple[Gpu, ...]) -> None:
    labels = nvidia.gfd_labels(layout, PluginConfig("single"))
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert (labels["nvidia.com/gpu.count"], labels["nvidia.com/gpu.replicas"], labels["nvidia.com/gpu.memory"]) == (
        "0",
        "0",
        "0",
    )


def test_gfd_mixed_strategy_labels_each_profile() -> None:
    labels = nvidia.gfd_labels(gpus(layout=("3g.40gb", "2g.20gb", "1g.10gb+me", "1g.10gb")), PluginConfig("mixed"))
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert (labels["nvidia.com/gpu.product"], labels["nvidia.com/gpu.count"]) == ("NVIDIA-H100-80GB-HBM3", "8")
    assert labels["nvidia.com/gpu.replicas"] == "0", "MIG-enabled GPUs are labelled without sharing"
    assert labels["nvidia.com/mig-3g.40gb.count"] == "8"
    assert labels["nvidia.com/mig-1g.10gb.me.count"] == "8"
    assert labels["nvidia.com/mig-1g.10gb.me.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me"
    assert not any("+" in key or "+" in value for key, value in labels.items())


# ---------------------------------------------------------------- the device plugin


def test_advertised_resources_per_strategy_and_sharing() -> None:
    assert nvidia.advertise(gpus(), PluginConfig()).resources == {"nvidia.com/gpu": 8}
    shared = PluginConfig(sharing="time-slicing", replicated=(Replicated("nvidia.com/gpu", 4),))
    assert nvidia.advertise(gpus("L4", 2), shared).resources == {"nvidia.com/gpu": 8}
    renamed = PluginConfig(
        sharing="time-slicing", replicated=(Replicated("nvidia.com/gpu", 4, "nvidia.com/gpu.shared"),)
    )
    assert nvidia.advertise(gpus("L4", 1), renamed).resources == {"nvidia.com/gpu.shared": 4}
    sliced = gpus("A100-40GB", 8, ("1g.5gb",) * 7)
    assert nvidia.advertise(sliced, PluginConfig("none")).resources == {"nvidia.com/gpu": 8}, "none ignores MIG"
    assert nvidia.advertise(sliced, PluginConfig("single")).resources == {"nvidia.com/gpu": 56}
    mixed = nvidia.advertise(gpus(layout=("3g.40gb", "2g.20gb", "1g.10gb+me")), PluginConfig("mixed"))
    assert mixed.resources == {
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-2g.20gb": 8,
        "nvidia.com/mig-1g.10gb.me": 8,
    }
    part = nvidia.advertise(gpus(count=2) + gpus(count=2, layout=("7g.80gb",)), PluginConfig("mixed"))
    assert part.resources == {"nvidia.com/gpu": 2, "nvidia.com/mig-7g.80gb": 2}, "whole GPUs beside MIG ones"
    # internal/rm/device_map.go: under mixed an empty MIG GPU is skipped with a warning, the others served
    empty = nvidia.advertise(gpus(count=1, layout=()) + gpus(count=1, layout=("7g.80gb",)), PluginConfig("mixed"))
    assert (empty.resources, empty.error) == ({"nvidia.com/mig-7g.80gb": 1}, "")


@pytest.mark.parametrize(
    ("layout", "config", "error"),
    [
        (gpus(layout=("3g.40gb", "2g.20gb")), PluginConfig("single"), "more than one MIG device type present on node"),
        (gpus(count=1) + gpus(count=1, layout=("7g.80gb",)), PluginConfig("single"), "same migEnabled value"),
        (gpus(layout=()), PluginConfig("single"), "migEnabled=true was not configured correctly"),
        (
            gpus(count=8),
            PluginConfig("mixed", "mps", (Replicated("nvidia.com/gpu", 2),)),
            "using --mig-strategy=mixed is not supported with MPS",
        ),
        (
            gpus(layout=("7g.80gb",)),
            PluginConfig("single", "mps", (Replicated("nvidia.com/gpu", 2),)),
            "MPS sharing is not supported on MIG devices",
        ),
    ],
)
def test_the_plugin_fails_and_advertises_nothing(layout: tuple[Gpu, ...], config: PluginConfig, error: str) -> None:
    advertised = nvidia.advertise(layout, config)
    assert advertised.resources == {}
    assert error in advertised.error


def test_the_cluster_wide_strategy_beats_the_config_file() -> None:
    assert nvidia.plugin_config(dp_config("mixed")).strategy == "mixed"
    assert nvidia.plugin_config(dp_config("mixed"), "single").strategy == "single"
    assert nvidia.plugin_config(None).strategy == "none", "the empty config"
    assert nvidia.plugin_config(None, "single").strategy == "single"


# ---------------------------------------------------------------- a node, step by step


class Node:
    """A node's labels and capacity as the API holds them, with the simulation's changes applied."""

    def __init__(self, simulation: nvidia.Simulation, model: str = "H100-80GB", count: int = 8) -> None:
        self.simulation = simulation
        entry_ = catalog.BY_NAME[model]
        self.labels: dict[str, str] = {
            "nvidia.com/gpu.product": entry_.detection.gfd_products[0],
            "nvidia.com/gpu.count": str(count),
            "nvidia.com/gpu.memory": "81920",
        }
        self.capacity: dict[str, str] = {entry_.resource: str(count)}
        self.version = 0
        self.events: list[str] = []
        self.states: list[str] = []

    def label(self, **labels: str | None) -> None:
        for key, value in labels.items():
            key = {"mig": conventions.MIG_CONFIG_LABEL, "dp": conventions.DEVICE_PLUGIN_CONFIG_LABEL}[key]
            if value is None:
                self.labels.pop(key, None)
            else:
                self.labels[key] = value
        self.version += 1

    def step(self, now: float, *, broken: bool = False, mig_labels: tuple[str | None, ...] = ()) -> nvidia.NodeChanges:
        body = {"metadata": {"name": "n", "labels": dict(self.labels), "resourceVersion": str(self.version)},
                "status": {"capacity": dict(self.capacity)}}  # fmt: skip
        changes = self.simulation.node(body, now, broken=broken, mig_labels=mig_labels)
        for key, value in changes.labels.items():
            if value is None:
                self.labels.pop(key, None)
            else:
                self.labels[key] = value
            if key == MIG_STATE and value is not None:
                self.states.append(value)
        self.capacity |= changes.resources
        self.events += changes.events
        if changes:
            self.version += 1
        return changes


def simulation(installation: Installation | None = None, **mig_configs: Any) -> nvidia.Simulation:
    sim = nvidia.Simulation(installation or Installation())
    configs = {"all-disabled": DISABLED, **mig_configs}
    sim.observe(
        {"default": dp_config(), "mixed": dp_config("mixed"), "single": dp_config("single")},
        {"config.yaml": yaml.safe_dump({"version": "v1", "mig-configs": configs})},
        0.0,
    )
    return sim


def test_a_node_converges_to_its_mig_layout_and_resources() -> None:
    node = Node(simulation(split=entry({"3g.40gb": 2})))
    first = node.step(0.0)
    assert first.labels == {"nvidia.com/gpu.replicas": "1", "nvidia.com/gpu.sharing-strategy": "none"}
    assert first.resources == {}, "a plain node keeps what it advertised"
    node.label(mig="split", dp="single")
    node.step(1.0)
    assert node.labels[MIG_STATE] == "success"
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert node.capacity == {"nvidia.com/gpu": "16"}
    node.label(dp="mixed")
    node.step(2.0)
    assert node.capacity == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "16"}
    assert node.labels["nvidia.com/mig-3g.40gb.count"] == "16"
    node.label(dp="default")
    node.step(3.0)
    assert "nvidia.com/mig-3g.40gb.count" not in node.labels and "nvidia.com/mig.strategy" not in node.labels
    assert node.capacity == {"nvidia.com/gpu": "8", "nvidia.com/mig-3g.40gb": "0"}


# ---------------------------------------------------------------- the config-manager sidecar


def test_an_unknown_device_plugin_key_keeps_the_previous_config_until_the_label_changes() -> None:
    sim = simulation(Installation(restart_seconds=10), split=entry({"3g.40gb": 2}))
    node = Node(sim)
    node.label(mig="split", dp="mixed")
    node.step(0.0)
    assert node.capacity["nvidia.com/mig-3g.40gb"] == "16"
    node.label(dp="accelpool-missing")
    changes = node.step(1.0)
    assert "specified config accelpool-missing does not exist" in changes.events[0]
    assert node.capacity["nvidia.com/mig-3g.40gb"] == "16", "the plugin keeps advertising what it did"
    assert node.labels["nvidia.com/mig.strategy"] == "mixed"
    node.label(dp="single")
    node.step(5.0)
    assert node.labels["nvidia.com/mig.strategy"] == "mixed", "exited: the change waits for its restart"
    node.step(11.0)
    assert node.labels["nvidia.com/mig.strategy"] == "single"
    assert node.capacity["nvidia.com/gpu"] == "16"


def test_an_exited_sidecar_recovers_when_the_key_reaches_the_node() -> None:
    sim = simulation()
    node = Node(sim)
    node.label(dp="accelpool-new")
    node.step(0.0)
    assert "does not exist" in node.events[-1]
    sim.observe({"default": dp_config(), "accelpool-new": dp_config(sharing=time_slicing(4))}, None, 1.0)
    node.step(1.0)
    assert node.capacity["nvidia.com/gpu"] == "32"


def test_editing_the_selected_key_is_not_loaded_until_the_label_changes() -> None:
    sim = simulation()
    node = Node(sim)
    node.label(dp="default")
    node.step(0.0)
    sim.observe({"default": dp_config(sharing=time_slicing(4))}, None, 1.0)
    node.step(1.0)
    assert node.capacity["nvidia.com/gpu"] == "8", "no SIGHUP for a content change"
    sim.observe({"default": dp_config(sharing=time_slicing(4)), "other": dp_config(sharing=time_slicing(2))}, None, 2.0)
    node.label(dp="other")
    node.step(2.0)
    assert node.capacity["nvidia.com/gpu"] == "16"
    node.label(dp="default")
    node.step(3.0)
    assert node.capacity["nvidia.com/gpu"] == "32", "selected again: loaded with its current content"


@pytest.mark.parametrize(
    ("fallback", "strategy", "error"),
    [("empty", None, ""), ("named", "single", ""), ("named", None, "all fallbacks failed")],
)
def test_an_unset_label_takes_the_fallback(fallback: str, strategy: str | None, error: str) -> None:
    sim = nvidia.Simulation(Installation(fallback=fallback))  # type: ignore[arg-type]
    keys = {"default": dp_config("single")} if strategy == "single" else {"other": dp_config("mixed")}
    sim.observe(keys, None, 0.0)
    node = Node(sim)
    node.step(0.0)
    assert node.labels.get("nvidia.com/mig.strategy") == strategy
    assert error in " ".join(node.events)


def test_an_unset_label_takes_the_default_config_before_any_fallback() -> None:
    """The GPU Operator's `devicePlugin.config.default` (DEFAULT_CONFIG): an unset label selects that key, the
    fallback is not consulted (NVIDIA/k8s-device-plugin `cmd/config-manager/main.go` `updateConfigName`)."""
    sim = nvidia.Simulation(Installation(default_config="default", fallback="empty"))
    sim.observe({"default": dp_config("single"), "other": dp_config("mixed")}, None, 0.0)
    node = Node(sim)
    node.step(0.0)
    assert node.labels.get("nvidia.com/mig.strategy") == "single"
    assert node.events == ["device plugin and GFD reloaded with config default"]
    missing = nvidia.Simulation(Installation(default_config="default", fallback="empty", restart_seconds=5))
    missing.observe({"other": dp_config("mixed")}, None, 0.0)
    lacking = Node(missing)
    lacking.step(0.0)
    assert "specified config default does not exist" in lacking.events[0], "no fallback to the empty config"


def test_the_cluster_wide_override_restarts_the_plugin_with_its_strategy() -> None:
    sim = simulation(mixed_layout=entry({"3g.40gb": 1, "4g.40gb": 1}))
    node = Node(sim)
    node.label(mig="mixed_layout", dp="mixed")
    node.step(0.0)
    assert node.capacity["nvidia.com/mig-4g.40gb"] == "8"
    sim.set_strategy_override("single", 1.0)
    changes = node.step(1.0)
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-INVALID"
    assert node.capacity == {"nvidia.com/gpu": "0", "nvidia.com/mig-3g.40gb": "0", "nvidia.com/mig-4g.40gb": "0"}
    assert "more than one MIG device type" in changes.plugin_error


# ---------------------------------------------------------------- the kubelet's projection


def test_configmap_updates_reach_the_pods_after_the_sync_delay() -> None:
    projection = nvidia.Projection(delay=30.0)
    assert projection.mounted(0.0) == (0, None)
    projection.observe({"a": "1"}, 0.0)
    assert projection.mounted(29.0) == (0, None)
    assert projection.mounted(30.0) == (1, {"a": "1"})
    projection.observe({"a": "2"}, 40.0)
    projection.observe({"a": "2"}, 45.0)
    assert projection.mounted(69.0) == (1, {"a": "1"})
    assert projection.mounted(70.0) == (2, {"a": "2"})
    projection.observe(None, 80.0)
    assert projection.mounted(200.0) == (2, {"a": "2"}), "a deleted ConfigMap: pods keep the last content"


def test_a_label_ahead_of_its_mig_entry_fails_and_is_not_retried() -> None:
    sim = simulation(Installation(propagation_seconds=30))
    node = Node(sim)
    node.step(30.0)
    sim.observe(
        None,
        {"config.yaml": yaml.safe_dump({"mig-configs": {"all-disabled": DISABLED, "new": entry({"7g.80gb": 1})}})},
        31.0,
    )
    node.label(mig="new")
    node.step(32.0)
    assert node.states == ["failed"]
    node.step(100.0)
    assert node.states == ["failed"], "the entry has arrived, but nothing makes the manager look again"
    node.label(mig="all-disabled")
    node.step(101.0)
    assert node.states == ["failed", "success"], "all-disabled is already applied"
    node.label(mig="new")
    node.step(102.0)
    assert node.capacity["nvidia.com/gpu"] == "8"
    assert all(g.mig_devices == ("7g.80gb",) for g in sim.nodes["n"].gpus)


# ---------------------------------------------------------------- the MIG manager


def run(manager: nvidia.MigManager, label: str | None, now: float, **kwargs: Any) -> nvidia.MigStep:
    configs = {"all-disabled": DISABLED, "a": entry({"3g.40gb": 2}), "b": entry({"7g.80gb": 1})}
    return manager.step(
        label, configs, kwargs.pop("gpus", gpus()), now, kwargs.pop("installation", Installation()), **kwargs
    )


def test_mig_manager_unknown_entry_fails_until_the_label_changes() -> None:
    step = run(nvidia.MigManager(), "nope", 0.0)
    assert step.states == ("failed",)
    again = run(step.manager, "nope", 1.0)
    assert again.states == ()
    changed = run(again.manager, "a", 2.0)
    assert changed.states == ("pending", "success")


def test_mig_manager_ignores_a_removed_label() -> None:
    step = run(nvidia.MigManager(), "a", 0.0)
    assert step.states == ("pending", "success")
    removed = run(step.manager, None, 1.0, gpus=step.gpus)
    assert removed.states == () and removed.gpus == step.gpus
    back = run(removed.manager, "a", 2.0, gpus=step.gpus)
    assert back.states == ("success",), "the same value again wakes it: already applied"


def test_mig_manager_sees_a_label_taken_off_and_put_back_between_two_steps() -> None:
    """Its informer is handed every watch event: the retry accelpool makes (label off, then on again) wakes it
    even when both happened since its last step, and a `failed` config runs again."""
    step = run(nvidia.MigManager(), "nope", 0.0)
    assert step.states == ("failed",)
    missed = run(step.manager, "nope", 1.0)
    assert missed.states == (), "the same value, no event in between: nothing wakes it"
    retried = run(missed.manager, "a", 2.0, seen=("nope", None, "a"))
    assert retried.states == ("pending", "success")
    again = run(retried.manager, "a", 3.0, gpus=retried.gpus, seen=(None, "a"))
    assert again.states == ("success",), "off and on again: it runs the same config, already applied"


def test_a_node_woken_by_a_label_that_came_and_went_between_two_steps() -> None:
    node = Node(simulation(split=entry({"3g.40gb": 2})))
    node.label(mig="split", dp="single")
    node.step(0.0)
    assert node.states == ["success"]
    node.labels[MIG_STATE] = "pending"  # accelpool's retry: the label taken off, then put back with `pending`
    node.version += 2
    assert node.step(1.0).labels == {}, "a lister sees the same value as before: nothing wakes the manager"
    node.version += 1
    assert node.step(2.0, mig_labels=(None, "split")).labels == {MIG_STATE: "success"}


def test_mig_manager_reports_success_for_a_profile_the_gpu_does_not_offer() -> None:
    step = nvidia.MigManager().step("small", {"small": entry({"1g.5gb": 7})}, gpus(), 0.0, Installation())
    assert step.states == ("pending", "success")
    assert all(g.mig_enabled and g.mig_devices == () for g in step.gpus)
    assert nvidia.gfd_labels(step.gpus, PluginConfig("single"))["nvidia.com/gpu.product"].endswith("-MIG-INVALID")


def test_a_broken_mig_manager_reports_success_and_creates_nothing() -> None:
    step = run(nvidia.MigManager(), "a", 0.0, broken=True)
    assert step.states == ("pending", "success")
    assert all(g.mig_devices == () for g in step.gpus)


def test_mig_manager_finishes_the_running_config_before_the_new_label() -> None:
    slow = Installation(apply_seconds=10)
    started = run(nvidia.MigManager(), "a", 0.0, installation=slow)
    assert started.states == ("pending",)
    changed = run(started.manager, "b", 5.0, installation=slow)
    assert changed.states == () and changed.gpus == gpus(), "the running reconfiguration goes on"
    finished = run(changed.manager, "b", 10.0, installation=slow)
    assert finished.states == ("success", "pending"), "success for a, then b starts"
    assert all(g.mig_devices == ("3g.40gb", "3g.40gb") for g in finished.gpus)
    done = run(finished.manager, "b", 20.0, installation=slow, gpus=finished.gpus)
    assert done.states == ("success",)
    assert all(g.mig_devices == ("7g.80gb",) for g in done.gpus)


def test_mig_manager_coalesces_labels_that_come_back_during_a_run() -> None:
    slow = Installation(apply_seconds=10)
    step = run(nvidia.MigManager(), "a", 0.0, installation=slow)
    step = run(step.manager, "b", 1.0, installation=slow)
    step = run(step.manager, "a", 2.0, installation=slow)
    finished = run(step.manager, "a", 10.0, installation=slow)
    assert finished.states == ("success",), "b came and went while a was applied: nothing more to do"


def test_mig_manager_reboots_for_a_mig_mode_change() -> None:
    rebooting = Installation(apply_seconds=5, with_reboot=True, reboot_seconds=60)
    step = run(nvidia.MigManager(), "a", 0.0, installation=rebooting)
    step = run(step.manager, "a", 5.0, installation=rebooting)
    assert step.states == ("rebooting",)
    assert all(g.mig_enabled and not g.mig_devices for g in step.gpus)
    step = run(step.manager, "a", 65.0, installation=rebooting, gpus=step.gpus)
    assert step.states == ("pending",)
    step = run(step.manager, "a", 70.0, installation=rebooting, gpus=step.gpus)
    assert step.states == ("success",)
    assert all(g.mig_devices == ("3g.40gb", "3g.40gb") for g in step.gpus)


# ---------------------------------------------------------------- mig-parted's device filters


@pytest.mark.parametrize(
    ("model", "name", "expected"),
    [
        ("H100-80GB", "all-1g.10gb", {"1g.10gb": 7}),
        ("A100-40GB", "all-1g.10gb", {"1g.10gb": 4}),
        ("A100-80GB", "all-1g.10gb", {"1g.10gb": 7}),
        ("H100-80GB", "all-balanced", {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}),
        ("A100-40GB", "all-balanced", {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        ("A30", "all-balanced", {"1g.6gb": 2, "2g.12gb": 1}),
    ],
)
def test_nvidia_default_entries_give_each_board_its_own_spec(model: str, name: str, expected: dict[str, int]) -> None:
    """NVIDIA's default entries hold one device spec per group of boards (`device-filter`): a GPU takes only the
    spec that names its PCI device ID, whatever the order (the GPU Operator's own config.yaml lists H100's
    `all-1g.10gb` first, accelpool's copy lists A100-40GB's first)."""
    gpu_operator = {
        "all-1g.10gb": [
            {"device-filter": ["0x233010DE", "0x20B210DE"], "devices": "all", "mig-enabled": True,
             "mig-devices": {"1g.10gb": 7}},
            {"device-filter": ["0x20B010DE"], "devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 4}},
        ],
    }  # fmt: skip
    for entries in (gpu_operator, accelpool_nvidia.default_mig_configs()):
        if name not in entries:
            continue
        applied = nvidia.apply_entry(entries[name], gpus(model, 2))
        for gpu in applied:
            assert gpu.mig_enabled
            assert {p: gpu.mig_devices.count(p) for p in set(gpu.mig_devices)} == expected


def test_a_device_filter_that_names_another_board_leaves_the_gpu_alone() -> None:
    h100 = gpus("H100-80GB", 2)
    other = [{"device-filter": "0x20B010DE", "devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}]
    assert nvidia.apply_entry(other, h100) == h100
    mine = [{"device-filter": "0x233010de", "devices": [1], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]
    applied = nvidia.apply_entry(mine, h100)
    assert applied[0] == h100[0] and applied[1].mig_devices == ("7g.80gb",), "hex in any case; devices by index"
    for unreadable in ("H100", "0x233010DE:0x16C110DE"):  # not a number; a subsystem the simulated GPU lacks
        spec = [{"device-filter": unreadable, "devices": "all", "mig-enabled": False}]
        assert nvidia.apply_entry(spec, gpus("H100-80GB", 1, ("7g.80gb",))) == gpus("H100-80GB", 1, ("7g.80gb",))


def test_every_mig_capable_model_is_a_board_nvidia_default_config_names() -> None:
    """Each MIG-capable catalog model has a simulated PCI device ID, and accelpool's default entries select it."""
    capable = {e.name for e in catalog.ACCELERATORS if e.mig_capable and e.vendor == catalog.Vendor.NVIDIA}
    assert capable <= set(nvidia.PCI_DEVICE_IDS)
    balanced = accelpool_nvidia.default_mig_configs()["all-balanced"]
    for model in sorted(capable):
        applied = nvidia.apply_entry(balanced, gpus(model, 1))
        assert applied[0].mig_enabled and applied[0].mig_devices, model
