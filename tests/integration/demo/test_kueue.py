"""Kueue in the demo: the example pool llm-training asks for it, so the demo cluster's ClusterQueue `research`
gets a ResourceFlavor `llm-training` with a nominal quota of the pool's serving GPUs, which drops by a
quarantined node's GPUs and comes back. The demo serves Kueue's kinds with Kueue's published CRDs where they
are found (../shared/crds/), else with its own minimal ones, which must say what the published ones say of
every field they declare, and serve what accelpool writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool_demo import kueue as demo_kueue
from accelpool_demo.apiserver import serving
from accelpool_demo.kueue import schema
from accelpool_demo.run import POOLS_PATH, example_pools, inject, load_fleet, simulated_cluster
from tests.support import kueue
from tests.support.waiting import HANG_GUARD, first_version
from tests.unit.demo.test_kueue_crds import written

pytestmark = [pytest.mark.integration, HANG_GUARD]
ROOT = Path(__file__).resolve().parents[3]
GPU = "nvidia.com/gpu"
RECURSED = ("properties", "items", "additionalProperties")
OPEN = "x-kubernetes-preserve-unknown-fields"
"""Where the demo's own schema keeps Kueue's other fields unchecked (the published one checks them)."""
USED = {
    "ResourceFlavor": {
        ".spec.nodeLabels.*",
        *(f".spec.nodeTaints[].{f}" for f in ("key", "value", "effect")),
        *(f".spec.tolerations[].{f}" for f in ("key", "operator", "value", "effect", "tolerationSeconds")),
    },
    "ClusterQueue": {
        ".spec.namespaceSelector",
        ".spec.cohortName",
        ".spec.resourceGroups[].coveredResources[]",
        ".spec.resourceGroups[].flavors[].name",
        *(
            f".spec.resourceGroups[].flavors[].resources[].{f}"
            for f in ("name", "nominalQuota", "borrowingLimit", "lendingLimit")
        ),
        ".status",
    },
}
"""What accelpool reads and writes of each kind (`accelpool.decide.kueue`), and the demo's ClusterQueue sets."""


def disagreements(own: dict[str, Any], published: dict[str, Any], path: str) -> Iterator[str]:
    """Where the demo's own schema says other than the published one: every keyword it declares at a path
    (type, format, bounds, list and map types, int-or-string) must be the published one's, its `required`
    the published `required` of the properties it declares, and every path it declares must be there."""
    for key, value in own.items():
        if key in (*RECURSED, OPEN):
            continue
        if key == "required":
            required = set(published.get("required") or []) & set(own.get("properties") or {})
            if set(value) != required:
                yield f"{path}: required {sorted(value)}, published {sorted(required)}"
        elif published.get(key) != value:
            yield f"{path}: {key} {value!r}, published {published.get(key)!r}"
    for name, child in (own.get("properties") or {}).items():
        theirs = (published.get("properties") or {}).get(name)
        if theirs is None:
            yield f"{path}.{name}: not in the published CRD"
        else:
            yield from disagreements(child, theirs, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(own.get(key), dict):
            if not isinstance(published.get(key), dict):
                yield f"{path}{suffix}: not in the published CRD"
            else:
                yield from disagreements(own[key], published[key], f"{path}{suffix}")


def declared_paths(node: dict[str, Any], path: str = "") -> Iterator[str]:
    for name, child in (node.get("properties") or {}).items():
        yield f"{path}.{name}"
        yield from declared_paths(child, f"{path}.{name}")
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(node.get(key), dict):
            yield f"{path}{suffix}"
            yield from declared_paths(node[key], f"{path}{suffix}")


@pytest.mark.parametrize("kind", ["ResourceFlavor", "ClusterQueue"])
def test_the_demos_own_crds_agree_with_kueues_published_ones(kind: str) -> None:
    """Needs ../shared/crds/: skipped without it, failed under REQUIRE_TOOLS=1."""
    published = kueue.crd(kind)
    own = schema.custom_resource_definition(kind)
    for key in ("group", "names", "scope"):
        assert own["spec"][key] == published["spec"][key], key
    (version,) = own["spec"]["versions"]
    (theirs,) = [v for v in published["spec"]["versions"] if v["name"] == version["name"]]
    assert (version["served"], version["storage"]) == (theirs["served"], theirs["storage"]) == (True, True)
    assert version.get("subresources") == theirs.get("subresources")
    own_schema = version["schema"]["openAPIV3Schema"]
    assert list(disagreements(own_schema, theirs["schema"]["openAPIV3Schema"], kind)) == []
    assert USED[kind] <= set(declared_paths(own_schema)), "every field accelpool uses is declared, and was compared"


@pytest.mark.parametrize(
    ("kind", "change", "found"),
    [
        ("ResourceFlavor", lambda spec: spec["properties"]["tolerations"].update(maxItems=9), "maxItems 9"),
        ("ResourceFlavor", lambda spec: spec["properties"].update(nodeLabel={"type": "string"}), ".nodeLabel: not in"),
        ("ClusterQueue", lambda spec: spec["properties"]["cohortName"].update(type="integer"), "type 'integer'"),
        ("ClusterQueue", lambda spec: spec.update(required=["cohortName"]), "required ['cohortName']"),
    ],
    ids=["bound", "field", "type", "required"],
)
def test_a_disagreement_is_found(kind: str, change: Any, found: str) -> None:
    """Needs ../shared/crds/: skipped without it, failed under REQUIRE_TOOLS=1."""
    (theirs,) = [v for v in kueue.crd(kind)["spec"]["versions"] if v["name"] == schema.VERSION]
    (version,) = schema.custom_resource_definition(kind)["spec"]["versions"]
    own = version["schema"]["openAPIV3Schema"]
    change(own["properties"]["spec"])
    (said,) = disagreements(own, theirs["schema"]["openAPIV3Schema"], kind)
    assert found in said, said


def test_the_demos_cluster_queue_is_one_kueue_admits() -> None:
    """Needs ../shared/crds/: skipped without it, failed under REQUIRE_TOOLS=1."""
    for obj in yaml.safe_load_all((demo_kueue.HERE / "cluster-queue.yaml").read_text()):
        assert kueue.admit(obj["kind"], obj) == []


async def test_the_demos_own_crds_serve_what_accelpool_writes(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without the published CRDs the demo serves its own: its objects are stored, and accelpool's flavor
    (server-side apply) and queue edit (a merge patch against the version read) are kept whole."""
    monkeypatch.setenv(demo_kueue.PUBLISHED_ENV, "")
    async with serving() as api, api.client() as client:
        await demo_kueue.install(client)
        discovery = await client.get("/apis/kueue.x-k8s.io/v1beta2")
        served = {r["name"]: r for r in discovery["resources"]}
        assert set(served["resourceflavors"]["shortNames"]) == {"flavor", "flavors", "rf"}
        assert "clusterqueues/status" in served
        queue_path = f"{kueue.QUEUES}/{demo_kueue.CLUSTER_QUEUE}"
        queue = await client.get(queue_path)
        flavor, edited = written("H100-80GB", {"accelerator": "H100:8"}, queue)
        stored = await client.apply(f"{kueue.FLAVORS}/train", flavor, field_manager="accelpool")
        assert stored["spec"] == flavor["spec"] and len(flavor["spec"]["tolerations"]) == 3
        body = {"metadata": {"resourceVersion": queue["metadata"]["resourceVersion"]}, "spec": edited["spec"]}
        patched = await client.patch(queue_path, body)
        assert patched["spec"] == edited["spec"]
        assert [f["name"] for g in patched["spec"]["resourceGroups"] for f in g["flavors"]] == [
            "default-flavor",
            "train",
        ]


async def test_the_example_pools_quota_follows_quarantine() -> None:
    (training,) = [p for p in example_pools((ROOT / "examples",)) if p["metadata"]["name"] == "llm-training"]
    async with simulated_cluster(load_fleet()) as demo:
        await demo.client.create(POOLS_PATH, training)
        queue_path = f"{kueue.QUEUES}/{demo_kueue.CLUSTER_QUEUE}"

        async def until(wanted: dict[str, int], what: str, after: str | None = None) -> str:
            """Until a version of the queue (the one stored now, or one after `after`) holds `wanted` as
            llm-training's quota; its resourceVersion. Every version is seen, however briefly it lasts."""
            queue = await first_version(
                demo.client,
                kueue.QUEUES,
                demo_kueue.CLUSTER_QUEUE,
                lambda q: kueue_quota(q, "llm-training") == wanted,
                what,
                after=after,
            )
            return str(queue["metadata"]["resourceVersion"])

        full = await until({GPU: 16}, "the quota of two serving H100 nodes")
        flavor = await demo.client.get(f"{kueue.FLAVORS}/llm-training")
        assert flavor["spec"]["nodeLabels"] == {"accelpool.io/pool": "llm-training"}
        queue = await demo.client.get(queue_path)
        assert queue["spec"]["resourceGroups"][0]["flavors"][0]["name"] == "default-flavor", "the user's group kept"

        pool = await demo.client.get(f"{POOLS_PATH}/llm-training")
        victim = sorted(m["node"] for m in pool["status"]["members"])[0]
        await inject(demo.server, victim, "xid=79")
        reduced = await until({GPU: 8}, f"{victim}'s GPUs out of the quota", after=full)
        await inject(demo.server, victim, "clear")
        await until({GPU: 16}, "the quota back at two serving nodes", after=reduced)


def kueue_quota(queue: dict[str, Any], flavor: str) -> dict[str, int] | None:
    for group in queue["spec"].get("resourceGroups") or []:
        for entry in group["flavors"]:
            if entry["name"] == flavor:
                return {r["name"]: int(r["nominalQuota"]) for r in entry["resources"]}
    return None
