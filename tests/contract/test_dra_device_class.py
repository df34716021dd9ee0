"""A DRA pool's DeviceClass (`accelpool.decide.dra.classes`), held to the two things that judge it: the API
server's validation of DeviceClasses (the emulator's, itself held to a real kube-apiserver's answers in
tests/conformance), and the scheduler's evaluation of its CEL against the devices NVIDIA's kubelet plugin
publishes (the demo's simulation of it, `accelpool_demo.dra`, with Google's CEL): it selects the pool's
devices and no others."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.decide.dra import classes
from accelpool_demo import dra
from accelpool_demo.apiserver import serving
from accelpool_demo.dra import cel
from accelpool_demo.nvidia import Gpu
from tests.support.builders import pool_input

pytestmark = pytest.mark.contract

H100, H100_MIB, A100_MIB = "H100-80GB", 81559, 40960
CASES: dict[str, dict[str, Any]] = {
    "whole-gpus": {"accelerator": "H100:8", "allocation": "DRA"},
    "time-sliced": {"accelerator": "H100:8", "allocation": "DRA", "sharing": {"timeSlicing": {"replicas": 4}}},
    "mig": {"accelerator": "H100:8", "allocation": "DRA", "mig": {"profile": "3g.40gb"}},
}


def device_class(spec: dict[str, Any]) -> dict[str, Any]:
    pool = pool_input("train", spec)
    assert pool.spec is not None, pool.problems
    return classes.device_class("train", "uid-train", pool.spec, pool.spec.resolve())


def published(gpus: list[Gpu]) -> list[dict[str, Any]]:
    """The `device` CEL variables of what NVIDIA's kubelet plugin publishes for these GPUs (with their names)."""
    return [{**cel.device_variable("gpu.nvidia.com", d), "name": d["name"]} for d in dra.Plugin.started(gpus).devices()]


@pytest.mark.parametrize("case", sorted(CASES))
async def test_the_api_server_accepts_the_device_class(case: str) -> None:
    async with serving() as api, api.client() as client:
        stored = await client.create("/apis/resource.k8s.io/v1/deviceclasses", device_class(CASES[case]))
    assert stored["metadata"]["name"] == "train.accelpool.io"


def test_whole_gpu_class_selects_the_pools_gpus_only() -> None:
    expression = device_class(CASES["whole-gpus"])["spec"]["selectors"][0]["cel"]["expression"]
    h100 = published([Gpu(H100, H100_MIB) for _ in range(2)])
    a100 = published([Gpu("A100-40GB", A100_MIB)])
    mig = published([Gpu(H100, H100_MIB, mig_enabled=True, mig_devices=("3g.40gb", "3g.40gb"))])
    assert [cel.matches(expression, d) for d in h100] == [True, True]
    assert not any(cel.matches(expression, d) for d in a100 + mig)


def test_mig_class_selects_the_pools_profile_only() -> None:
    expression = device_class(CASES["mig"])["spec"]["selectors"][0]["cel"]["expression"]
    layout = ("3g.40gb", "2g.20gb", "1g.10gb")
    devices = published([Gpu(H100, H100_MIB, mig_enabled=True, mig_devices=layout), Gpu(H100, H100_MIB)])
    chosen = [d["name"] for d in devices if cel.matches(expression, d)]
    assert len(chosen) == 1 and "-mig-3g40gb-" in chosen[0]


def test_time_slicing_goes_into_the_class_config_as_nvidias_gpu_config() -> None:
    config = device_class(CASES["time-sliced"])["spec"]["config"]
    assert config == [
        {
            "opaque": {
                "driver": "gpu.nvidia.com",
                "parameters": {
                    "apiVersion": "resource.nvidia.com/v1beta1",
                    "kind": "GpuConfig",
                    "sharing": {"strategy": "TimeSlicing"},
                },
            }
        }
    ]
