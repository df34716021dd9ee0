"""The emulated API server's validation of resource.k8s.io objects (`dra_validation`), in the cases the
recorded transcripts do not hold (tests/conformance replays those): each as pkg/apis/resource/validation
/validation.go words it, at the field it names."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from accelpool_demo.apiserver import dra, dra_types, dra_validation
from accelpool_demo.apiserver.validation import FieldError

NOW = "2026-11-26T00:00:00Z"


def _device(name: str, **more: Any) -> dict[str, Any]:
    return {"name": name, "attributes": {"type": {"string": "gpu"}}, "capacity": {"memory": {"value": "80Gi"}}, **more}


def _slice(devices: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
            **spec,
        },
    }


def _claim(request: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "claim", "namespace": "team"},
        "spec": {"devices": {"requests": [{"name": "gpu", "exactly": request}], **devices}},
    }


def _errors(key: str, obj: dict[str, Any], old: dict[str, Any] | None = None, *, status: bool = False) -> list[str]:
    """The errors as the API server lists them (`field: detail`), of the object as decoded and defaulted."""
    decoded = dra_types.shaped(key, dra_types.defaulted(key, copy.deepcopy(obj), NOW))
    return [str(e) for e in dra_validation.errors(key, decoded, old, status=status)]


def test_a_slice_with_a_tainted_device_holds_at_most_64_devices() -> None:
    devices = [_device(f"gpu-{i}") for i in range(65)]
    assert _errors(dra.RESOURCE_SLICES_KEY, _slice(devices)) == []
    devices[0]["taints"] = [{"key": "gpu.nvidia.com/xid", "effect": "NoExecute"}]
    assert _errors(dra.RESOURCE_SLICES_KEY, _slice(devices)) == [
        "spec.devices: Too many: 65: must have at most 64 items"
    ]


def test_a_slice_device_names_its_attributes_by_domain_and_c_identifier() -> None:
    device = _device("gpu-0")
    device["attributes"] = {
        "gpu.nvidia.com/": {"string": "x"},
        "GPU_NVIDIA/uuid": {"string": "x"},
        "a/b/c": {"int": 1},
        "ok": {},
    }
    assert _errors(dra.RESOURCE_SLICES_KEY, _slice([device])) == [
        'spec.devices[0].attributes: Invalid value: "": the name must not be empty',
        'spec.devices[0].attributes: Invalid value: "GPU_NVIDIA": a lowercase RFC 1123 subdomain must consist of lower '
        "case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is "
        "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        'spec.devices[0].attributes: Invalid value: "a/b/c": must not contain more than one slash',
        'spec.devices[0].attributes[ok]: Invalid value: "": exactly one value must be specified',
    ]


def test_a_slices_driver_pool_and_node_are_immutable() -> None:
    old = _slice([_device("gpu-0")])
    old["metadata"]["uid"] = "u"
    moved = _slice([_device("gpu-0")], driver="gpu.example.com", nodeName="node-2")
    assert _errors(dra.RESOURCE_SLICES_KEY, moved, old) == [
        'spec.driver: Invalid value: "gpu.example.com": field is immutable',
        'spec.nodeName: Invalid value: "node-2": field is immutable',
    ]


@pytest.mark.parametrize(
    ("request_", "error"),
    [
        (
            {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "count": 2},
            "spec.devices.requests[0].exactly.count: Invalid value: 2: "
            "must not be specified when allocationMode is 'All'",
        ),
        (
            {"deviceClassName": "gpu.nvidia.com", "allocationMode": "Some"},
            'spec.devices.requests[0].exactly.allocationMode: Unsupported value: "Some": supported values: "All", '
            '"ExactCount"',
        ),
        (
            {"deviceClassName": "gpu.nvidia.com", "tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]},
            'spec.devices.requests[0].exactly.tolerations[0].value: Invalid value: "v": must be empty for operator '
            "`Exists`",
        ),
        (
            {"deviceClassName": "gpu.nvidia.com", "tolerations": [{"key": "k", "operator": "In", "effect": "Evict"}]},
            'spec.devices.requests[0].exactly.tolerations[0].operator: Unsupported value: "In": supported values: '
            '"Equal", "Exists"',
        ),
        (
            {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": "quantity('1Gi') == 1"}}]},
            "spec.devices.requests[0].exactly.selectors[0].cel.expression: Invalid value: \"quantity('1Gi') == 1\": "
            "compilation failed: ERROR: <input>:1:17: found no matching overload for '_==_' applied to "
            "'(kubernetes.Quantity, int)'\n | quantity('1Gi') == 1\n | ................^",
        ),
    ],
)
def test_a_claims_request_is_refused_where_it_is_wrong(request_: dict[str, Any], error: str) -> None:
    errors = _errors(dra.RESOURCE_CLAIMS_KEY, _claim(request_))
    assert errors[0] == error


def test_selectors_compile_with_the_libraries_the_api_server_has() -> None:
    expressions = [
        "device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('40Gi'))",
        "device.attributes['gpu.nvidia.com'].driverVersion.compareTo(semver('570.0.0')) >= 0",
        "cel.bind(nv, device.attributes['gpu.nvidia.com'], nv.type == 'mig' && nv.profile in ['3g.40gb'])",
        "device.attributes['gpu.nvidia.com'].productName.lowerAscii().matches('^.*h100.*$')",
    ]
    request = {"deviceClassName": "gpu.nvidia.com", "selectors": [{"cel": {"expression": e}} for e in expressions]}
    assert _errors(dra.RESOURCE_CLAIMS_KEY, _claim(request)) == []


def test_a_constraint_names_a_request_of_the_claim_and_a_fully_qualified_attribute() -> None:
    claim = _claim(
        {"deviceClassName": "gpu.nvidia.com", "count": 2},
        constraints=[{"requests": ["gpu", "nic"], "matchAttribute": "pcieRoot"}],
    )
    assert _errors(dra.RESOURCE_CLAIMS_KEY, claim) == [
        'spec.devices.constraints[0].requests[1]: Invalid value: "nic": must be the name of a request in the claim '
        "or the name of a request and a subrequest separated by '/'",
        'spec.devices.constraints[0].matchAttribute: Invalid value: "pcieRoot": a fully qualified name must be a '
        "domain and a name separated by a slash",
    ]


def test_a_claim_is_reserved_only_once_allocated_and_its_allocation_never_changes() -> None:
    claim = _claim({"deviceClassName": "gpu.nvidia.com"})
    reserved = {"reservedFor": [{"resource": "pods", "name": "p", "uid": "u1"}]}
    assert _errors(dra.RESOURCE_CLAIMS_KEY, {**claim, "status": reserved}, claim, status=True) == [
        "status.reservedFor: Forbidden: may not be specified when `allocated` is not set"
    ]
    result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0"}
    allocated = {**claim, "status": {"allocation": {"devices": {"results": [result]}}, **reserved}}
    assert _errors(dra.RESOURCE_CLAIMS_KEY, allocated, claim, status=True) == []
    moved = copy.deepcopy(allocated)
    moved["status"]["allocation"]["devices"]["results"][0]["device"] = "gpu-1"
    assert [e.split(":")[0] for e in _errors(dra.RESOURCE_CLAIMS_KEY, moved, allocated, status=True)] == [
        "status.allocation"
    ]
    wrong = copy.deepcopy(allocated)
    wrong["status"]["allocation"]["devices"]["results"][0]["request"] = "gpus"
    assert _errors(dra.RESOURCE_CLAIMS_KEY, wrong, claim, status=True) == [
        'status.allocation.devices.results[0].request: Invalid value: "gpus": must be the name of a request in the '
        "claim or the name of a request and a subrequest separated by '/'"
    ]


def test_a_rules_effect_is_checked_only_when_it_changes_and_its_time_moves_with_it() -> None:
    rule = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceTaintRule",
        "metadata": {"name": "q"},
        "spec": {"deviceSelector": {"pool": "node-1"}, "taint": {"key": "k", "effect": "NoSchedule"}},
    }
    stored = dra_types.defaulted(dra.DEVICE_TAINT_RULES_KEY, copy.deepcopy(rule), "2026-01-01T00:00:00Z")
    assert stored["spec"]["taint"]["timeAdded"] == "2026-01-01T00:00:00Z"
    legacy = copy.deepcopy(stored)  # an effect stored before it was refused (ratcheting)
    legacy["spec"]["taint"]["effect"] = "PreferNoSchedule"
    relabelled = copy.deepcopy(legacy)
    relabelled["metadata"]["labels"] = {"a": "b"}
    assert _errors(dra.DEVICE_TAINT_RULES_KEY, relabelled, legacy) == []
    assert [str(e) for e in dra_validation.errors(dra.DEVICE_TAINT_RULES_KEY, legacy, stored)] == [
        'spec.taint.effect: Unsupported value: "PreferNoSchedule": supported values: "NoExecute", "NoSchedule", "None"'
    ]


def test_a_rule_selects_devices_by_valid_names_only() -> None:
    rule = {
        "metadata": {"name": "q"},
        "spec": {"deviceSelector": {"driver": "", "device": "gpu-0"}, "taint": {"key": "k", "effect": "None"}},
    }
    errors = dra_validation.errors(dra.DEVICE_TAINT_RULES_KEY, rule, None)
    assert [(e.reason, e.field) for e in errors] == [
        ("FieldValueRequired", "spec.deviceSelector.driver"),
        ("FieldValueInvalid", "spec.deviceSelector.driver"),
    ]
    assert errors[0] == FieldError("FieldValueRequired", "spec.deviceSelector.driver")


def test_admin_access_needs_the_namespaces_admin_label() -> None:
    claim = _claim({"deviceClassName": "gpu.nvidia.com", "adminAccess": True})
    forbidden = [
        "spec.devices.requests[0].exactly.adminAccess: Forbidden: admin access to devices requires the "
        "`resource.kubernetes.io/admin-access: true` label on the containing namespace"
    ]
    assert [str(e) for e in dra_validation.admin_access(claim, None, {})] == forbidden
    assert dra_validation.admin_access(claim, None, {"resource.kubernetes.io/admin-access": "true"}) == []
    result = {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "node-1", "device": "gpu-0", "adminAccess": True}
    granted = {**claim, "status": {"allocation": {"devices": {"results": [result]}}}}
    assert [e.field for e in dra_validation.admin_access(granted, claim, {})] == [
        "status.allocation.devices.results[0].adminAccess"
    ]
    assert dra_validation.admin_access(granted, granted, {}) == []  # granted before: not asked again
