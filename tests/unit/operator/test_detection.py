"""Node labels → catalog entry, device count and memory variant, from every labeller the field uses."""

from __future__ import annotations

import json

import pytest

from accelpool.model.detection import detect
from accelpool.model.nodes import NodeView
from accelpool_api import conventions
from accelpool_core import catalog

from .conftest import fixture_nodes, member, members, mig_entry_name, node_body, pool, run

# What each node of the shared fixture carries (name → catalog entry, devices, the labeller that said so).
EXPECTED = {
    "h100-1": ("H100-80GB", 8, "gfd"),
    "h100-8": ("H100-80GB", 8, "gfd"),
    "a100-40-1": ("A100-40GB", 8, "gfd"),
    "h200-1": ("H200-141GB", 8, "gfd"),
    "gke-l4-1": ("L4", 1, "gke"),
    "gke-a100-1": ("A100-80GB", 1, "gke"),
    "ip-10-0-1-11.ec2.internal": ("T4", 1, "karpenter"),
    "mi300x-1": ("MI300X", 8, "amd"),
    "trn1-1": ("Trainium", 16, "karpenter"),
    "gke-tpu-v5p-1": ("TPU-v5p", 4, "gke-tpu"),
}


@pytest.mark.parametrize(("name", "expected"), sorted(EXPECTED.items()))
def test_every_labeller_of_the_shared_fixture(name: str, expected: tuple[str, int, str]) -> None:
    view = next(n for n in fixture_nodes() if n.name == name)
    assert view.detected is not None
    assert (view.detected.accelerator.name, view.detected.count, view.detected.source) == expected


def test_nodes_without_accelerators_detect_nothing() -> None:
    cpu = [n for n in fixture_nodes() if n.name.startswith("cpu-")]
    assert cpu and all(n.detected is None for n in cpu)


def gfd(product: str, count: str = "8", memory: str | None = None, **extra: str) -> dict[str, str]:
    labels = {"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": count, **extra}
    if memory is not None:
        labels["nvidia.com/gpu.memory"] = memory
    return labels


def test_gfd_memory_variant_from_gpu_memory() -> None:
    forty = detect(gfd("NVIDIA-A100-SXM4-40GB", memory="40960"))
    eighty = detect(gfd("NVIDIA-A100-SXM4-80GB", memory="81920"))
    assert forty is not None and forty.accelerator.name == "A100-40GB" and forty.memory_mib == 40960
    assert eighty is not None and eighty.accelerator.name == "A100-80GB"


def test_gfd_product_not_in_the_catalog_is_matched_by_model_form_factor_and_memory() -> None:
    found = detect(gfd("NVIDIA-A100-PCIe-80GB-Custom", memory="81920"))
    assert found is not None and found.accelerator.name == "A100-80GB-PCIE"
    found = detect(gfd("NVIDIA-H100-Whatever", memory="97871"))
    assert found is not None and found.accelerator.name == "H100-94GB-NVL", "memory picks the 94 GB variant"


def test_gfd_shared_suffix() -> None:
    found = detect(gfd("NVIDIA-L4-SHARED", count="1", memory="23034"))
    assert found is not None
    assert (found.accelerator.name, found.shared, found.count) == ("L4", True, 1)


def test_gfd_single_mig_strategy_suffix_recovers_physical_gpus() -> None:
    # 8 GPUs x 7 MIG devices of 1g.5gb, as GFD reports them under the single strategy.
    found = detect(gfd("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", count="56", memory="4864"))
    assert found is not None
    assert (found.accelerator.name, found.mig_profile, found.count, found.memory_mib) == (
        "A100-40GB",
        "1g.5gb",
        8,
        None,
    )
    with_instance = detect(
        gfd("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", count="16", **{"node.kubernetes.io/instance-type": "p5.48xlarge"})
    )
    assert with_instance is not None and with_instance.count == 8 and with_instance.accelerator.name == "H100-80GB"


# GFD under the single strategy: the product names the profile (`+` written `.`), the count is MIG devices
# (NVIDIA/k8s-device-plugin internal/lm/mig-strategy.go, internal/resource/nvml-mig-device.go GetName).
@pytest.mark.parametrize(
    ("product", "mig_devices", "expected"),
    [
        # H100: 2 x 3g.40gb fill one GPU, so 8 devices are 4 GPUs, not 8
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb", 8, ("H100-80GB", "3g.40gb", 4)),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 56, ("H100-80GB", "1g.10gb", 8)),
        # +me: one per GPU, written .me by GFD, spelled +me as the catalog does
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb.me", 8, ("H100-80GB", "1g.10gb+me", 8)),
        ("NVIDIA-GH200-480GB-MIG-1g.12gb.me", 1, ("GH200-96GB", "1g.12gb+me", 1)),
        # A30: 4 compute and 4 memory slices per GPU
        ("NVIDIA-A30-MIG-1g.6gb", 16, ("A30", "1g.6gb", 4)),
        ("NVIDIA-A30-MIG-2g.12gb", 8, ("A30", "2g.12gb", 4)),
        ("NVIDIA-A30-MIG-2g.12gb.me", 4, ("A30", "2g.12gb+me", 4)),
        ("NVIDIA-A30-MIG-4g.24gb", 2, ("A30", "4g.24gb", 2)),
        # a layout that leaves GPUs partly empty: at least this many GPUs, rounded up
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", 9, ("H100-80GB", "1g.10gb", 2)),
    ],
)
def test_gfd_single_strategy_counts_gpus_with_the_gpu_own_slice_budgets(
    product: str, mig_devices: int, expected: tuple[str, str, int]
) -> None:
    found = detect(gfd(product, count=str(mig_devices), memory="9856"))
    assert found is not None
    assert (found.accelerator.name, found.mig_profile, found.count) == expected
    assert found.mig_devices == mig_devices and found.memory_mib is None and not found.mig_invalid


def test_gfd_single_strategy_ignores_capacity_which_counts_mig_devices() -> None:
    found = detect(gfd("NVIDIA-A30-MIG-1g.6gb", count="0"), {"nvidia.com/gpu": "16"})
    assert found is not None and (found.accelerator.name, found.count) == ("A30", 0)


def test_gfd_mig_invalid_names_the_model_with_an_unknown_count() -> None:
    # The single strategy meeting two profile types: GFD labels <model>-MIG-INVALID, count 0, memory 0.
    labels = gfd("NVIDIA-H100-80GB-HBM3-MIG-INVALID", count="0", memory="0")
    found = detect(labels, {"nvidia.com/gpu": "8"})
    assert found is not None
    assert (found.accelerator.name, found.count, found.mig_invalid, found.mig_profile) == ("H100-80GB", 0, True, None)
    assert found.memory_mib is None, "memory 0 says nothing about the variant"
    a30 = detect(gfd("NVIDIA-A30-MIG-INVALID", count="0", memory="0"))
    assert a30 is not None and (a30.accelerator.name, a30.mig_invalid) == ("A30", True)
    with_instance = detect({**labels, "node.kubernetes.io/instance-type": "p5.48xlarge"})
    assert with_instance is not None and (with_instance.count, with_instance.mig_invalid) == (8, True)
    assert conventions.GFD_MIG_INVALID_SUFFIX == "-MIG-INVALID"


def test_capacity_of_a_single_strategy_pool_counts_physical_gpus() -> None:
    """4 H100s labelled -MIG-3g.40gb with count 8 offer 8 x nvidia.com/gpu: 4 GPUs x 2, not 8 x 2."""
    spec = {"accelerator": "H100", "mig": {"profile": "3g.40gb"}}
    labels = {
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb",
        "nvidia.com/gpu.count": "8",
        conventions.MIG_CONFIG_LABEL: mig_entry_name("p", spec),
        conventions.MIG_CONFIG_STATE_LABEL: "success",
    }
    view = member("n1", "p", labels=labels, allocatable={"nvidia.com/gpu": "8"})
    assert view.detected is not None and view.gpus == 4
    result = run([pool("p", {"accelerator": "H100", "mig": {"profile": "3g.40gb"}})], [view])
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.status.capacity.gpus == 4
    assert found.status.capacity.resources == {"nvidia.com/gpu": 8}


def test_capacity_of_a_media_extension_pool_names_resources_as_the_device_plugin_does() -> None:
    advertised = {"nvidia.com/mig-1g.10gb.me": "8", "nvidia.com/mig-3g.40gb": "8", "nvidia.com/mig-2g.20gb": "8"}
    layout = ["1g.10gb+me", "3g.40gb", "2g.20gb"]
    applied = {
        conventions.MIG_CONFIG_LABEL: mig_entry_name("p", {"accelerator": "H100", "mig": {"profiles": layout}}),
        conventions.MIG_CONFIG_STATE_LABEL: "success",
    }
    view = member("n1", "p", allocatable=advertised, labels=applied)  # as the device plugin names them under mixed
    result = run([pool("p", {"accelerator": "H100", "mig": {"profiles": layout}})], [view])
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.status.capacity.resources == {
        "nvidia.com/mig-1g.10gb.me": 8,
        "nvidia.com/mig-3g.40gb": 8,
        "nvidia.com/mig-2g.20gb": 8,
    }


def test_gke_gpu_and_partition_size() -> None:
    found = detect(
        {
            "cloud.google.com/gke-accelerator": "nvidia-tesla-a100",
            "cloud.google.com/gke-accelerator-count": "2",
            "cloud.google.com/gke-gpu-partition-size": "1g.5gb",
        }
    )
    assert found is not None
    assert (found.accelerator.name, found.count, found.mig_profile) == ("A100-40GB", 2, "1g.5gb")
    h200 = detect(
        {"cloud.google.com/gke-accelerator": "nvidia-h200-141gb", "cloud.google.com/gke-accelerator-count": "8"}
    )
    assert h200 is not None and (h200.accelerator.name, h200.count) == ("H200-141GB", 8)


def test_gke_tpu_chips_from_capacity_or_machine_type() -> None:
    labels = {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}
    from_capacity = detect(labels, {"google.com/tpu": "8"})
    assert from_capacity is not None and (from_capacity.accelerator.name, from_capacity.count) == ("TPU-v5e", 8)
    from_machine = detect({**labels, "node.kubernetes.io/instance-type": "ct5lp-hightpu-4t"})
    assert from_machine is not None and from_machine.count == 4


@pytest.mark.parametrize(("memory", "expected"), [("40960", "A100-40GB"), ("81920", "A100-80GB")])
def test_karpenter_gpu_memory_picks_the_variant(memory: str, expected: str) -> None:
    found = detect(
        {
            "karpenter.k8s.aws/instance-gpu-name": "a100",
            "karpenter.k8s.aws/instance-gpu-count": "8",
            "karpenter.k8s.aws/instance-gpu-memory": memory,
        }
    )
    assert found is not None and (found.accelerator.name, found.count, found.source) == (expected, 8, "karpenter")


def test_karpenter_names_refined_by_the_instance_type() -> None:
    found = detect(
        {
            "karpenter.k8s.aws/instance-accelerator-name": "trainium",
            "karpenter.k8s.aws/instance-accelerator-count": "16",
            "node.kubernetes.io/instance-type": "trn2.48xlarge",
        }
    )
    assert found is not None and found.accelerator.name == "Trainium2"
    inferentia = detect(
        {"karpenter.k8s.aws/instance-accelerator-name": "inferentia", "node.kubernetes.io/instance-type": "inf2.xlarge"}
    )
    assert inferentia is not None and (inferentia.accelerator.name, inferentia.source) == (
        "Inferentia2",
        "instance-type",
    )


def test_amd_beta_labels_and_count_from_capacity() -> None:
    found = detect({"beta.amd.com/gpu.product-name": "Instinct_MI300X"}, {"amd.com/gpu": "8"})
    assert found is not None and (found.accelerator.name, found.count, found.source) == ("MI300X", 8, "amd")


def test_instance_type_alone() -> None:
    found = detect({"node.kubernetes.io/instance-type": "p4de.24xlarge"})
    assert found is not None and (found.accelerator.name, found.count, found.source) == (
        "A100-80GB",
        8,
        "instance-type",
    )
    legacy = detect({"beta.kubernetes.io/instance-type": "g6.xlarge"})
    assert legacy is not None and legacy.accelerator.name == "L4"


def test_gfd_wins_over_the_instance_type_and_keeps_its_count() -> None:
    found = detect({**gfd("NVIDIA-H100-80GB-HBM3", count="4"), "node.kubernetes.io/instance-type": "p5.48xlarge"})
    assert found is not None and (found.source, found.count) == ("gfd", 4)


def test_count_falls_back_to_capacity() -> None:
    found = detect({"cloud.google.com/gke-accelerator": "nvidia-l4"}, {"nvidia.com/gpu": "2"})
    assert found is not None and found.count == 2


def test_unknown_products_are_not_guessed() -> None:
    assert detect({"nvidia.com/gpu.product": "NVIDIA-RTX-9999"}) is None
    assert detect({"amd.com/gpu.product-name": "Instinct_MI999"}) is None
    assert detect({}) is None


def test_every_catalog_gfd_product_detects_its_own_entry() -> None:
    for entry in catalog.ACCELERATORS:
        for product in entry.detection.gfd_products:
            found = detect(gfd(product, memory=str(entry.memory_gb * 1024)))
            assert found is not None and found.accelerator.name == entry.name, product


def test_every_catalog_instance_type_detects_its_own_entry() -> None:
    for entry in catalog.ACCELERATORS:
        for instance_type, count in entry.detection.instance_types.items():
            found = detect({"node.kubernetes.io/instance-type": instance_type})
            assert found is not None and (found.accelerator.name, found.count) == (entry.name, count), instance_type


@pytest.mark.parametrize(
    ("labels", "capacity"),
    [
        ({"nvidia.com/gpu.count": "100000000000000000023"}, {}),
        ({"nvidia.com/gpu.count": "8; rm -rf"}, {}),
        ({"nvidia.com/gpu.memory": "9" * 30}, {}),
        ({}, {"nvidia.com/gpu": "9" * 25}),
    ],
    ids=["20-digit-count", "not-a-number", "huge-memory", "huge-capacity"],
)
def test_numeric_labels_out_of_any_real_range_make_a_node_unrecognised(
    labels: dict[str, str], capacity: dict[str, str]
) -> None:
    body = node_body("n1")
    body["metadata"]["labels"].update(labels)
    body["status"]["capacity"].update(capacity)
    view = NodeView.from_body(body)
    assert view.detected is None and view.gpus == 0
    assert view.label_problems and ("not a whole number" in view.label_problems[0])
    result = run([pool("p", {"accelerator": "H100"})], [view])
    assert members(result, "p") == []
    warned = [e for e in result.events if e.kind == "Node" and e.reason == "AcceleratorLabelsInvalid"]
    assert warned and warned[0].name == "n1"


def test_a_member_with_a_huge_count_label_never_inflates_the_pool_capacity() -> None:
    body = node_body("n1", labels={conventions.POOL_LABEL: "p"})
    body["metadata"]["labels"]["nvidia.com/gpu.count"] = "100000000000000000023"
    result = run([pool("p", {"accelerator": "H100"})], [NodeView.from_body(body)])
    found = result.pool("p")
    assert found is not None and found.status is not None
    assert found.status.capacity.gpus < 2**63
    assert found.status.capacity.gpus == 0


def test_a_view_lent_the_last_one_reads_as_a_fresh_parse_whatever_changed() -> None:
    report = json.dumps({"status": "Healthy", "reason": "AllChecksPassed", "pool": "p", "complete": True})
    body = node_body("n1", annotations={conventions.HEALTH_ANNOTATION: report})
    previous = NodeView.from_body(body)
    changed_status = node_body("n1", annotations={conventions.HEALTH_ANNOTATION: report}, ready=False)
    relabelled = node_body("n1", "A100-40GB", annotations={conventions.HEALTH_ANNOTATION: report})
    recapacitated = node_body("n1", annotations={conventions.HEALTH_ANNOTATION: report})
    recapacitated["status"]["capacity"]["nvidia.com/gpu"] = "9" * 25
    reported = node_body("n1", annotations={conventions.HEALTH_ANNOTATION: report.replace("Healthy", "Unhealthy")})
    for after in (changed_status, relabelled, recapacitated, reported):
        lent = NodeView.from_body(after, previous)
        fresh = NodeView.from_body(after)
        assert lent == fresh
        assert (lent.detected, lent.label_problems, lent.report) == (fresh.detected, fresh.label_problems, fresh.report)
        assert after is changed_status or fresh != previous
    assert NodeView.from_body(changed_status, previous).detected is previous.detected  # not detected again
