"""Kueue as the tests install it: its published CRDs (kubernetes-sigs/kueue config/components/crd/bases,
read from ../shared/crds/ or wherever `$ACCELPOOL_DEMO_KUEUE_CRDS` says, as the demo finds them:
`accelpool_demo.kueue.published_dir`), admission as a cluster running Kueue judges its objects, and example
ClusterQueues.

A test that asks for Kueue's own schema and rules (`crd`, `schema`, `admit`, `install`) is skipped where
the published CRDs are not found, and fails instead under REQUIRE_TOOLS=1 (CI, which has ../shared/), as a
missing tool does (tests/conftest.py); they are never copied into the repository. A test that only needs
Kueue's kinds served uses `install_as_the_demo`: the demo's own minimal CRDs (`accelpool_demo.kueue.schema`)
stand in for the published ones where those are missing.

`admit(kind, obj, old)` is what the API server and Kueue's webhooks do with a ResourceFlavor or a
ClusterQueue: the storage version's defaults and structural schema (tests/support/structural.py), every
`x-kubernetes-validations` rule (accelpool_demo/apiserver/cel.py), then, for a ClusterQueue, Kueue's validating
webhook on its resource groups (kubernetes-sigs/kueue pkg/webhooks/clusterqueue_webhook.go
`validateResourceGroups`: a resource and a flavor in one group at most, each covered resource a label key
(pkg/webhooks/common.go `validateResourceName`), each flavor's resources named as `coveredResources` and in
that order, no negative quota). `configuration_problems` is Kueue's check of the `deviceClassMappings` of its
own Configuration, which a DRA pool's status tells (`status.kueue.deviceClassMapping`); `as_dra` gives a planned
pool a DRA pool's status. `install(server)` stores the CRDs in an emulated API server and gives it the CEL
evaluator, so it serves and judges Kueue's kinds.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from accelpool.decide.kueue import quantity_number
from accelpool.decide.planning import Plan
from accelpool_api.status import DraStatus
from accelpool_demo import kueue as demo_kueue
from accelpool_demo.apiserver import ApiServer
from accelpool_demo.apiserver.cel import ABSENT, evaluate_rules
from tests.support.environment import missing
from tests.support.structural import apply_defaults, schema_errors

FILES = demo_kueue.FILES
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FLAVORS = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
QUEUES = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"


def published_dir() -> Path:
    """Where Kueue's published CRDs are; the test is skipped without them (failed under REQUIRE_TOOLS=1)."""
    try:
        found = demo_kueue.published_dir()
    except demo_kueue.PublishedCrdsError as error:
        pytest.fail(str(error))
    if found is not None:
        return found
    if os.environ.get(demo_kueue.PUBLISHED_ENV) == "":
        message = f"{demo_kueue.PUBLISHED_ENV} is set empty: Kueue's published CRDs are not used"
    else:
        where = demo_kueue.SHARED_CRDS or "../shared/crds/ (beside the source tree)"
        message = f"{where} is missing (Kueue's published CRDs, see ../shared/crds/README.md)"
    missing(message)


def crd(kind: str) -> dict[str, Any]:
    """Kueue's published CRD of `kind`."""
    return _published(kind, published_dir())


@functools.cache
def _published(kind: str, directory: Path) -> dict[str, Any]:
    return demo_kueue.published_crd(kind, directory)


def schema(kind: str) -> dict[str, Any]:
    """The storage version's (v1beta2) OpenAPI schema."""
    (version,) = [v for v in crd(kind)["spec"]["versions"] if v.get("storage")]
    assert version["name"] == "v1beta2"
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def admit(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> list[str]:
    """Every reason a Kueue cluster refuses the object (empty: admitted)."""
    node = schema(kind)
    obj = copy.deepcopy(obj)
    apply_defaults(node, obj)
    errors = schema_errors(node, obj)
    if errors:
        return errors
    stored: Any = ABSENT
    if old is not None:
        stored = copy.deepcopy(old)
        apply_defaults(node, stored)
    errors = evaluate_rules(node, obj, old=stored).errors
    if kind == "ClusterQueue":
        errors += webhook_problems(obj)
    return errors


def webhook_problems(queue: dict[str, Any]) -> list[str]:
    """Kueue's webhook on a ClusterQueue's resource groups (clusterqueue_webhook.go `validateResourceGroups`)."""
    problems: list[str] = []
    resources: set[str] = set()
    flavors: set[str] = set()
    for i, group in enumerate((queue.get("spec") or {}).get("resourceGroups") or []):
        covered = group.get("coveredResources") or []
        for j, name in enumerate(covered):
            if name in resources:
                problems.append(f"spec.resourceGroups[{i}].coveredResources[{j}]: Duplicate value: {name!r}")
            resources.add(name)
            problems += [f"spec.resourceGroups[{i}].coveredResources[{j}]: {p}" for p in label_key_problems(name)]
        for j, flavor in enumerate(group.get("flavors") or []):
            path = f"spec.resourceGroups[{i}].flavors[{j}]"
            if flavor["name"] in flavors:
                problems.append(f"{path}.name: Duplicate value: {flavor['name']!r}")
            flavors.add(flavor["name"])
            if len(flavor["resources"]) != len(covered):
                problems.append(f"{path}.resources: must have the same number of resources as the coveredResources")
            for k, (quota, name) in enumerate(zip(flavor["resources"], covered, strict=False)):
                if quota["name"] != name:
                    problems.append(f"{path}.resources[{k}].name: must match the name in coveredResources")
                number = quantity_number(quota["nominalQuota"])
                if number is not None and number < 0:
                    problems.append(f"{path}.resources[{k}].nominalQuota: must be greater than or equal to 0")
    return problems


_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def label_key_problems(key: str) -> list[str]:
    """Why `key` is not a label key (k8s.io/apimachinery pkg/util/validation `IsQualifiedName`, which Kueue's
    `content.IsLabelKey` calls): an optional DNS-subdomain prefix of at most 253 characters and a '/', then a
    name of at most 63 characters."""
    parts = key.split("/")
    if len(parts) > 2:
        return [f"{key!r}: at most one '/'"]
    prefix, name = (parts[0], parts[1]) if len(parts) == 2 else (None, parts[0])
    problems = []
    if prefix is not None and (len(prefix) > 253 or not _DNS1123_SUBDOMAIN.match(prefix)):
        problems.append(f"{key!r}: prefix part must be a DNS-1123 subdomain of at most 253 characters")
    if len(name) > 63 or not _QUALIFIED_NAME.match(name):
        problems.append(f"{key!r}: name part must be a qualified name of at most 63 characters")
    return problems


def configuration_problems(mappings: list[dict[str, Any]]) -> list[str]:
    """Kueue's check of its Configuration's `resources.deviceClassMappings` at start (kubernetes-sigs/kueue
    pkg/config/validation.go `validateDeviceClassMappings`, v0.19.2, without sources): at most 16 mappings, each
    name a label key of at most 253 characters and unique, 1 to 8 device class names per mapping, each a label
    key, none mapped to two names."""
    problems = [] if len(mappings) <= 16 else [f"resources.deviceClassMappings: Too many: {len(mappings)}: max 16"]
    names: set[str] = set()
    classes: dict[str, str] = {}
    for i, mapping in enumerate(mappings):
        path = f"resources.deviceClassMappings[{i}]"
        name = mapping["name"]
        problems += [f"{path}.name: {p}" for p in label_key_problems(name)]
        if len(name) > 253:
            problems.append(f"{path}.name: must not exceed 253 characters")
        if name in names:
            problems.append(f"{path}.name: Duplicate value: {name!r}")
        names.add(name)
        device_classes = mapping.get("deviceClassNames") or []
        if not 1 <= len(device_classes) <= 8:
            problems.append(f"{path}.deviceClassNames: 1 to 8 device class names, not {len(device_classes)}")
        for j, device_class in enumerate(device_classes):
            problems += [f"{path}.deviceClassNames[{j}]: {p}" for p in label_key_problems(device_class)]
            if classes.setdefault(device_class, name) != name:
                problems.append(f"{path}.deviceClassNames[{j}]: device class already mapped to {classes[device_class]}")
    return problems


def cluster_queue(name: str, groups: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A user's ClusterQueue."""
    return {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": groups, **spec},
    }


CPU_AND_MEMORY: dict[str, Any] = {
    "coveredResources": ["cpu", "memory"],
    "flavors": [
        {
            "name": "default-flavor",
            "resources": [
                {"name": "cpu", "nominalQuota": 512},
                {"name": "memory", "nominalQuota": "2Ti"},
            ],
        }
    ],
}
"""A group of the user's own: accelpool must leave it as it is."""


def install(server: ApiServer) -> None:
    """Kueue's published CRDs stored in the emulated API server (served from now on, their rules evaluated)."""
    for kind in FILES:
        server.store.put(CRDS_PATH.removeprefix("/apis/"), crd(kind))


def install_as_the_demo(server: ApiServer) -> None:
    """The CRDs the demo serves Kueue's kinds with (the published ones where found, else the demo's own
    minimal ones): for tests that need the kinds served, not Kueue's every rule."""
    for found in demo_kueue.custom_resource_definitions():
        server.store.put(CRDS_PATH.removeprefix("/apis/"), found)


def as_dra(plan: Plan, pool: str, resources: Mapping[str, int], device_class: str | None = None) -> Plan:
    """The plan with `pool`'s status as a DRA pool's: its DeviceClass (`<pool>.accelpool.io` unless given) in
    `status.dra` and `status.scheduling`, and `resources` what its serving members' ResourceSlices offer
    (`status.capacity.resources`). What accelpool writes to Kueue depends only on these, whatever the planner
    reads to fill them."""
    name = device_class or f"{pool}.accelpool.io"
    pools = []
    for found in plan.pools:
        if found.name == pool and found.status is not None:
            status = found.status
            status = status.model_copy(
                update={
                    "dra": DraStatus(device_class=name, devices=sum(resources.values())),
                    "scheduling": status.scheduling.model_copy(update={"device_class_name": name}),
                    "capacity": status.capacity.model_copy(update={"resources": dict(resources)}),
                }
            )
            found = dataclasses.replace(found, status=status)
        pools.append(found)
    return dataclasses.replace(plan, pools=tuple(pools))
