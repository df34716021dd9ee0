"""The pod-spec fragment: the pool's scheduling block and a limit for what its devices are advertised as
(`accelpool_api.workloads.resources_per_gpu`, which the operator counts with), for whole devices of every
vendor, MIG slices and shared replicas."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

import accelpool_api as api
import accelpool_sdk as ap
from accelpool_api import workloads
from accelpool_sdk import fragment

ROOT = Path(__file__).resolve().parents[3]
POOL_TOLERATION = {"key": "accelpool.io/pool", "operator": "Equal", "value": "p", "effect": "NoSchedule"}


def limits(pool: ap.ComputePool, **chosen: object) -> dict[str, int]:
    return pool.pod_spec_fragment(**chosen).limits  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("accelerator", "expected"),
    [
        (ap.NVIDIA.H100(8), {"nvidia.com/gpu": 8}),
        (ap.NVIDIA.L4(), {"nvidia.com/gpu": 1}),
        (ap.AMD.MI300X(8), {"amd.com/gpu": 8}),
        (ap.AWS.Trainium2(16), {"aws.amazon.com/neuron": 16}),
        (ap.Google.TPU_v5p(4), {"google.com/tpu": 4}),
    ],
)
def test_whole_devices_default_to_the_pools_count_per_node(
    accelerator: ap.Accelerator, expected: dict[str, int]
) -> None:
    pool = ap.ComputePool("p", accelerator)
    assert limits(pool) == expected
    (resource,) = expected
    assert limits(pool, devices=2) == {resource: 2}


def test_mig_single_strategy_asks_for_gpus_and_mixed_for_the_profiles_resource() -> None:
    single = ap.ComputePool("p", ap.NVIDIA.H100(8, mig="3g.40gb"))
    assert limits(single) == {"nvidia.com/gpu": 1}  # the device plugin's single strategy names MIG devices so
    assert limits(single, profile="3g.40gb", devices=2) == {"nvidia.com/gpu": 2}
    mixed = ap.ComputePool("p", ap.NVIDIA.H100(8, mig=["3g.40gb", "2g.20gb", "1g.10gb+me"]))
    assert limits(mixed) == {"nvidia.com/mig-3g.40gb": 1}
    assert limits(mixed, profile="1g.10gb+me") == {"nvidia.com/mig-1g.10gb.me": 1}  # the plugin's spelling
    with pytest.raises(ValueError, match=r"profile='4g.40gb' is not in the pool's MIG layout; valid: 3g.40gb, 2g"):
        limits(mixed, profile="4g.40gb")
    with pytest.raises(ValueError, match=r"profile='3g.40gb' .* valid: none \(the pool does not use MIG\)"):
        limits(ap.ComputePool("p", ap.NVIDIA.H100(8)), profile="3g.40gb")


def test_a_shared_gpu_is_one_replica() -> None:
    sliced = ap.ComputePool("p", ap.NVIDIA.L4(), sharing=ap.TimeSlicing(replicas=4))
    assert limits(sliced) == {"nvidia.com/gpu": 1}
    assert limits(sliced, devices=2) == {"nvidia.com/gpu": 2}  # NVIDIA's default lets it (for no more compute)
    strict = ap.ComputePool(
        "p", ap.NVIDIA.L4(), sharing=ap.TimeSlicing(replicas=4, fail_requests_greater_than_one=True)
    )
    with pytest.raises(ValueError, match=r"devices=2: the pool's timeSlicing gives a pod one replica; valid: 1"):
        limits(strict, devices=2)
    mps = ap.ComputePool("p", ap.NVIDIA.H100(), sharing=ap.MPS(replicas=4))
    assert limits(mps) == {"nvidia.com/gpu": 1}
    with pytest.raises(ValueError, match=r"devices=3: the pool's mps gives a pod one replica"):
        limits(mps, devices=3)
    with pytest.raises(ValueError, match=r"devices=0: a pod requests at least 1 device"):
        limits(mps, devices=0)


@pytest.mark.parametrize(
    "path", sorted(p for p in (ROOT / "examples").glob("*.yaml") if "kind: ComputePool" in p.read_text())
)
def test_each_example_pools_fragment_asks_for_what_its_nodes_advertise(path: Path) -> None:
    for document in yaml.safe_load_all(path.read_text()):
        if document.get("kind") != api.KIND:
            continue
        pool = ap.ComputePool.from_manifest(document)
        found = pool.pod_spec_fragment()
        if pool.spec.allocation == "DRA":  # a claim of the pool's DeviceClass, no extended resource
            assert found.limits == {} and found.claim_template is not None
            request = found.claim_template["spec"]["devices"]["requests"][0]["exactly"]
            assert request["deviceClassName"] == f"{pool.name}.accelpool.io"
            continue
        (resource,) = found.limits
        assert resource in workloads.resources_per_gpu(pool.spec)


def test_before_a_status_the_scheduling_block_is_the_one_the_operator_writes_for_a_pool() -> None:
    dedicated = ap.ComputePool("p", ap.NVIDIA.H100(8))
    assert dedicated.pod_spec_fragment().node_selector == {"accelpool.io/pool": "p"}
    assert dedicated.pod_spec_fragment().tolerations == [POOL_TOLERATION]
    shared_nodes = ap.ComputePool("p", ap.NVIDIA.H100(8), dedicated=False)
    assert shared_nodes.pod_spec_fragment().tolerations == []


def test_the_fragment_makes_a_valid_pod() -> None:
    made = fragment.pod_spec_fragment(
        ap.ComputePool("p", ap.NVIDIA.H100(8, mig=["3g.40gb", "2g.20gb"])).spec,
        api.Scheduling(
            node_selector={"accelpool.io/pool": "p"}, tolerations=[api.Toleration.model_validate(POOL_TOLERATION)]
        ),
    ).as_dict()
    made["containers"][0].update(name="train", image="registry.example/train:1")
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train"}, "spec": made}
    kubernetes_validate.validate(pod, kubernetes_validate.latest_version(), strict=True)
    assert made["containers"][0]["resources"] == {"limits": {"nvidia.com/mig-3g.40gb": 1}}


def test_a_dra_pools_fragment_names_a_claim_template_of_its_device_class() -> None:
    pool = ap.ComputePool("h200-dra", ap.NVIDIA.H200(8), nodes=2, allocation="DRA")
    assert pool.manifest()["spec"]["allocation"] == "DRA"
    found = pool.pod_spec_fragment(devices=7)
    assert found.claim_template == {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "h200-dra.accelpool.io",
                            "allocationMode": "ExactCount",
                            "count": 7,
                        },
                    }
                ]
            }
        }
    }
    spec = found.as_dict()
    assert spec["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "h200-dra-gpus"}]
    assert spec["containers"] == [{"resources": {"claims": [{"name": "gpu"}]}}]
