"""Kueue as the tests install it: the published CRDs (kubernetes-sigs/kueue config/components/crd/bases,
as the demo packages them: `accelpool_demo.kueue`, checked equal to ../shared/crds/ by
tests/integration/demo/test_kueue.py), admission as a cluster running Kueue judges its objects, and example
ClusterQueues.

`admit(kind, obj, old)` is what the API server and Kueue's webhooks do with a ResourceFlavor or a
ClusterQueue: the storage version's defaults and structural schema (tests/structural.py), every
`x-kubernetes-validations` rule (accelpool_demo/apiserver/cel.py), then, for a ClusterQueue, Kueue's validating
webhook on its resource groups (kubernetes-sigs/kueue pkg/webhooks/clusterqueue_webhook.go
`validateResourceGroups`: a resource and a flavor in one group at most, each flavor's resources named
as `coveredResources` and in that order, no negative quota). `install(server)` stores the CRDs in an
emulated API server and gives it the CEL evaluator, so it serves and judges Kueue's kinds.
"""

from __future__ import annotations

import copy
import functools
from pathlib import Path
from typing import Any

import yaml

from accelpool.kueue import quantity_number
from accelpool_demo import kueue as demo_kueue
from accelpool_demo.apiserver import ApiServer
from accelpool_demo.apiserver.cel import ABSENT, evaluate_rules
from tests.structural import apply_defaults, schema_errors

PUBLISHED_DIR = Path(__file__).resolve().parents[1].parent / "shared" / "crds"
"""Where the published CRDs are kept beside the repository (the demo's copies must equal them)."""
FILES = {"ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml", "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml"}
CRDS_PATH = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
FLAVORS = "/apis/kueue.x-k8s.io/v1beta2/resourceflavors"
QUEUES = "/apis/kueue.x-k8s.io/v1beta2/clusterqueues"


@functools.cache
def crd(kind: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((demo_kueue.HERE / FILES[kind]).read_text())
    return loaded


def schema(kind: str) -> dict[str, Any]:
    """The storage version's (v1beta2) OpenAPI schema."""
    (version,) = [v for v in crd(kind)["spec"]["versions"] if v.get("storage")]
    assert version["name"] == "v1beta2"
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


def cel_rules(node: Any, obj: Any, old: Any) -> list[str]:
    """The emulator's CEL evaluator (`accelpool_demo.apiserver.crds.CelRules`)."""
    return evaluate_rules(node, obj, old=ABSENT if old is None else old).errors


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
    """Kueue's CRDs stored in the emulated API server (served from now on), with the CEL evaluator."""
    server.store.cel = cel_rules
    for kind in FILES:
        server.store.put(CRDS_PATH.removeprefix("/apis/"), crd(kind))
