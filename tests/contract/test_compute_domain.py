"""The ComputeDomain the operator writes for a pool with `spec.nvlink.computeDomain`
(`accelpool.decide.dra.compute_domain`) is accepted by NVIDIA's published CRD
(../shared/crds/resource.nvidia.com_computedomains.yaml, kubernetes-sigs/dra-driver-nvidia-gpu
deployments/helm/dra-driver-nvidia-gpu/crds/): defaults applied as the API server applies them, the
structural schema with unknown fields refused (tests/support/structural.py), and the CRD's
`x-kubernetes-validations` rule (`spec` immutable) evaluated with Google's CEL
(accelpool_demo/apiserver/cel.py) on writing the object again. The status NVIDIA's controller writes is
checked against the same schema before it is read.
"""

from __future__ import annotations

import copy
import re
from typing import Any

import pytest
import yaml

import accelpool_api as api
from accelpool.decide.dra.compute_domain import compute_domain_status, desired_compute_domain
from accelpool_api import validation
from accelpool_demo.apiserver.cel import ABSENT, evaluate_rules, rules_of, unsupported_functions
from tests.support.environment import require_shared
from tests.support.structural import apply_defaults, schema_errors

pytestmark = pytest.mark.contract
CRD = "crds/resource.nvidia.com_computedomains.yaml"
"""NVIDIA's published CRD, in ../shared (see ../shared/crds/README.md)."""


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.safe_load(require_shared(CRD).read_text())
    assert crd["spec"]["scope"] == "Namespaced"
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1beta1"]
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def admit(schema: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """Why the API server refuses a create (or, with `old`, an update) of the object; empty: it stores it."""
    obj = copy.deepcopy(obj)
    apply_defaults(schema, obj)
    errors = schema_errors(schema, obj)
    if errors:
        return errors
    stored: Any = ABSENT
    if old is not None:
        stored = copy.deepcopy(old)
        apply_defaults(schema, stored)
    return evaluate_rules(schema, obj, old=stored).errors


def spec(namespace: str = "team-a", **extra: Any) -> api.ComputePoolSpec:
    asked = {
        "accelerator": "H100:8",
        "nodes": 4,
        "allocation": "DRA",
        "nvlink": {"computeDomain": {"namespace": namespace}},
        **extra,
    }
    checked, problems = validation.validate_spec(asked)
    assert checked is not None and not problems, problems
    return checked


POOLS = [
    ("short", "train", spec()),
    ("longest-name", "x" * api.MAX_POOL_NAME, spec()),
    ("dotted-name", "train.mnnvl-a", spec("ml")),
    ("longest-namespace", "train", spec("n" * 63)),
    ("not-same-clique", "train", spec(nvlink={"sameClique": False, "computeDomain": {"namespace": "ml"}})),
]


@pytest.mark.parametrize(("name", "pool_spec"), [p[1:] for p in POOLS], ids=[p[0] for p in POOLS])
def test_the_desired_compute_domain_is_accepted(
    schema: dict[str, Any], name: str, pool_spec: api.ComputePoolSpec
) -> None:
    obj = desired_compute_domain(name, "uid-1", pool_spec)
    assert admit(schema, obj) == [], yaml.safe_dump(obj)
    assert admit(schema, obj, old=obj) == [], "writing it again passes the immutability rule"
    for field in (obj["metadata"]["name"], obj["spec"]["channel"]["resourceClaimTemplate"]["name"]):
        # what the API server asks of a custom object's and a ResourceClaimTemplate's name
        assert re.fullmatch(api.DNS1123_SUBDOMAIN, field) and len(field) <= 253, field


def test_the_compute_domain_is_named_after_the_pool_owned_by_it_and_labelled(schema: dict[str, Any]) -> None:
    obj = desired_compute_domain("train", "uid-1", spec("team-a"))
    assert obj == {
        "apiVersion": "resource.nvidia.com/v1beta1",
        "kind": "ComputeDomain",
        "metadata": {
            "name": "train",
            "namespace": "team-a",
            "labels": {"app.kubernetes.io/managed-by": "accelpool", "accelpool.io/pool": "train"},
            "ownerReferences": [
                {
                    "apiVersion": api.API_VERSION,
                    "kind": "ComputePool",
                    "name": "train",
                    "uid": "uid-1",
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {
            "numNodes": 0,
            "channel": {"resourceClaimTemplate": {"name": "train-channel"}, "allocationMode": "Single"},
        },
    }
    defaulted = copy.deepcopy(obj)
    apply_defaults(schema, defaulted)
    assert defaulted == obj, "every field the CRD defaults is written: the stored spec equals the desired one"


def test_the_spec_rule_is_evaluated_and_refuses_a_changed_spec(schema: dict[str, Any]) -> None:
    rules = [rule["rule"] for _, _, rule in rules_of(schema)]
    assert rules == ["self == oldSelf"]
    assert not unsupported_functions(rules[0])
    stored = desired_compute_domain("train", "uid-1", spec())
    changed = copy.deepcopy(stored)
    changed["spec"]["channel"]["allocationMode"] = "All"
    assert admit(schema, changed) == [], "a create is accepted"
    assert any("A computeDomain.spec is immutable" in e for e in admit(schema, changed, old=stored))


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda o: o["spec"].update(numNodes=-1), "spec.numNodes: -1 is less than the minimum of 0"),
        (lambda o: o["spec"]["channel"].update(allocationMode="Some"), "'Some' is not one of"),
        (lambda o: o["spec"].pop("channel"), "'channel' is a required property"),
        (lambda o: o["spec"].update(nodes=4), "Additional properties are not allowed ('nodes' was unexpected)"),
    ],
    ids=["negative numNodes", "unknown allocation mode", "no channel", "unknown field"],
)
def test_the_schema_refuses_a_broken_compute_domain(schema: dict[str, Any], mutate: Any, expected: str) -> None:
    """The checks above can fail: the schema is really applied."""
    broken = desired_compute_domain("train", "uid-1", spec())
    mutate(broken)
    assert any(expected in e for e in admit(schema, broken)), admit(schema, broken)


NVIDIA_STATUS = {
    "status": "Ready",
    "nodes": [
        {"name": "gb200-0", "ipAddress": "10.0.0.10", "cliqueID": "9e8d7c6b-0000-4000-8000-000000000001.1", "index": 0},
        {
            "name": "gb200-1",
            "ipAddress": "10.0.0.11",
            "cliqueID": "9e8d7c6b-0000-4000-8000-000000000001.1",
            "index": 1,
            "status": "Ready",
        },
    ],
}
"""A status as NVIDIA's compute-domain controller writes it (`cmd/compute-domain-controller/cdstatus.go`)."""


def test_the_status_nvidia_writes_is_read(schema: dict[str, Any]) -> None:
    obj = desired_compute_domain("train", "uid-1", spec())
    assert compute_domain_status(obj) == api.ComputeDomainStatus(name="train", namespace="team-a")
    reported = {**copy.deepcopy(obj), "status": copy.deepcopy(NVIDIA_STATUS)}
    assert admit(schema, reported) == [], "the example status is one the CRD takes"
    assert compute_domain_status(reported) == api.ComputeDomainStatus(
        name="train", namespace="team-a", status="Ready", channel_template="train-channel"
    )
    not_ready = {**obj, "status": {"status": "NotReady"}}
    assert admit(schema, not_ready) == []
    assert compute_domain_status(not_ready).status == "NotReady"
