"""The NVIDIA documents a pool turns into: sharing options as the device plugin reads them, MIG
resource names as it advertises them (`+` written `.`), and mig-parted's own `+me` spelling."""

from __future__ import annotations

from typing import Any

import pytest

import accelpool_api as api
from accelpool.model import nvidia
from accelpool_api import workloads
from accelpool_api.validation import validate_spec
from accelpool_core import catalog


def spec(body: dict[str, Any]) -> api.ComputePoolSpec:
    found, problems = validate_spec(body)
    assert found is not None, problems
    return found


def sharing_of(body: dict[str, Any]) -> dict[str, Any]:
    document = nvidia.device_plugin_config(spec(body))
    sharing: dict[str, Any] = document["sharing"]
    return sharing


def test_time_slicing_lets_a_pool_refuse_requests_for_more_than_one_replica() -> None:
    default = sharing_of({"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4}}})
    assert default["timeSlicing"]["failRequestsGreaterThanOne"] is False, "NVIDIA's default, written out"
    strict = sharing_of(
        {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 4, "failRequestsGreaterThanOne": True}}}
    )
    assert strict == {
        "timeSlicing": {
            "renameByDefault": False,
            "failRequestsGreaterThanOne": True,
            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}],
        }
    }


def test_mps_always_refuses_requests_for_more_than_one_replica() -> None:
    """The device plugin forces it (k8s-device-plugin CHANGELOG v0.15.0-rc.2): the document says so."""
    document = sharing_of({"accelerator": "H100", "sharing": {"mps": {"replicas": 48}}})
    assert document["mps"]["failRequestsGreaterThanOne"] is True
    assert document["mps"]["resources"] == [{"name": "nvidia.com/gpu", "replicas": 48}]


def test_the_device_plugin_reads_back_what_is_written() -> None:
    body = {"accelerator": "L4", "sharing": {"timeSlicing": {"replicas": 3, "failRequestsGreaterThanOne": True}}}
    document = nvidia.device_plugin_config(spec(body))
    assert nvidia.load(nvidia.dump(document)) == document


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            {"accelerator": "H100", "mig": {"profiles": ["1g.10gb+me", "3g.40gb", "1g.10gb"]}},
            {"nvidia.com/mig-1g.10gb.me": 1, "nvidia.com/mig-3g.40gb": 1, "nvidia.com/mig-1g.10gb": 1},
        ),
        (
            {"accelerator": "A30", "mig": {"profiles": ["2g.12gb+me", "1g.6gb", "1g.6gb"]}},
            {"nvidia.com/mig-2g.12gb.me": 1, "nvidia.com/mig-1g.6gb": 2},
        ),
        ({"accelerator": "GH200", "mig": {"profile": "1g.12gb+me"}}, {"nvidia.com/gpu": 1}),
        ({"accelerator": "A30", "mig": {"profile": "1g.6gb"}}, {"nvidia.com/gpu": 4}),
        ({"accelerator": {"name": "H100", "formFactor": "NVL"}, "mig": {"profile": "3g.47gb"}}, {"nvidia.com/gpu": 2}),
    ],
    ids=["h100-mixed-me", "a30-mixed-me", "gh200-single-me", "a30-single", "h100-nvl-single"],
)
def test_resources_per_gpu_are_named_as_the_device_plugin_names_them(
    body: dict[str, Any], expected: dict[str, int]
) -> None:
    assert workloads.resources_per_gpu(spec(body)) == expected


def test_no_mig_resource_carries_a_plus() -> None:
    for entry in catalog.ACCELERATORS:
        for profile in entry.mig_profiles:
            resource = profile.resource
            assert "+" not in resource and resource == f"nvidia.com/mig-{profile.name.replace('+', '.')}"


def test_mig_parted_keeps_its_own_plus_me_spelling() -> None:
    entry = nvidia.mig_parted_entry(
        spec({"accelerator": "A30", "mig": {"profiles": ["1g.6gb+me", "1g.6gb"]}}).mig_layout()
    )
    assert entry == [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.6gb+me": 1, "1g.6gb": 1}}]
