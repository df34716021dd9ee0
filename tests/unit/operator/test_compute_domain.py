"""A pool's ComputeDomain on its own (`accelpool.decide.dra.compute_domain`): names, refusals, and reading
what NVIDIA's controller reports, whatever shape it comes in. NVIDIA's CRD accepting the object is
tests/contract/test_compute_domain.py."""

from __future__ import annotations

from typing import Any

import pytest

import accelpool_api as api
from accelpool.decide.dra.compute_domain import (
    channel_template_name,
    compute_domain_name,
    compute_domain_status,
    desired_compute_domain,
)
from accelpool_api import validation


def checked(**asked: Any) -> api.ComputePoolSpec:
    found, problems = validation.validate_spec({"accelerator": "H100:8", "allocation": "DRA", **asked})
    assert found is not None and not problems, problems
    return found


def test_names_follow_the_pool() -> None:
    longest = "p" * api.MAX_POOL_NAME
    assert compute_domain_name(longest) == longest
    assert channel_template_name(longest) == longest + "-channel"
    with pytest.raises(ValueError, match="pool name 'Not_A_Name' cannot name a ComputeDomain: a lowercase RFC 1123"):
        compute_domain_name("Not_A_Name")
    with pytest.raises(ValueError, match="may not be more than 63 bytes"):
        channel_template_name("p" * 64)


def test_a_pool_without_a_compute_domain_has_none_to_write() -> None:
    for spec in (checked(), checked(nvlink={})):
        with pytest.raises(ValueError, match=r"pool 'train': spec.nvlink.computeDomain is not set"):
            desired_compute_domain("train", "uid-1", spec)
    found = desired_compute_domain("train", "uid-1", checked(nvlink={"computeDomain": {"namespace": "ml"}}))
    assert (found["metadata"]["namespace"], found["metadata"]["ownerReferences"][0]["uid"]) == ("ml", "uid-1")
    offline = desired_compute_domain("train", "", checked(nvlink={"computeDomain": {"namespace": "ml"}}))
    assert "ownerReferences" not in offline["metadata"], "no owner without a UID"


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        (
            {
                "metadata": {"name": "train", "namespace": "ml"},
                "spec": {"channel": {"resourceClaimTemplate": {"name": "c"}}},
            },
            api.ComputeDomainStatus(name="train", namespace="ml"),
        ),
        (
            {
                "metadata": {"name": "train", "namespace": "ml"},
                "spec": {"channel": {"resourceClaimTemplate": {"name": "c"}}},
                "status": {"status": "NotReady", "nodes": []},
            },
            api.ComputeDomainStatus(name="train", namespace="ml", status="NotReady", channel_template="c"),
        ),
        ({}, api.ComputeDomainStatus(name="", namespace="")),
        (
            {"metadata": ["x"], "spec": {"channel": "c"}, "status": {"status": 3}},
            api.ComputeDomainStatus(name="", namespace=""),
        ),
        (
            {
                "metadata": {"name": 1},
                "spec": {"channel": {"resourceClaimTemplate": {"name": 7}}},
                "status": {"status": "Ready"},
            },
            api.ComputeDomainStatus(name="", namespace="", status="Ready"),
        ),
        ({"status": "Ready"}, api.ComputeDomainStatus(name="", namespace="")),
        (
            {"status": {"status": "R" * 100}},
            api.ComputeDomainStatus(name="", namespace="", status="R" * 55 + " … (cut)"),
        ),
    ],
    ids=["not yet reported", "reported", "empty", "wrong types", "no template name", "status not an object", "long"],
)
def test_the_status_is_read_from_whatever_the_object_holds(
    obj: dict[str, Any], expected: api.ComputeDomainStatus
) -> None:
    assert compute_domain_status(obj) == expected
