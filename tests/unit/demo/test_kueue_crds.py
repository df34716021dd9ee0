"""Which CRDs the demo serves Kueue's kinds with (`accelpool_demo.kueue`): Kueue's published ones where they
are found, else its own minimal ones (`accelpool_demo.kueue.schema`), which declare every field accelpool
writes. tests/integration/demo/test_kueue.py holds the minimal ones to the published ones."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from accelpool.decide import kueue
from accelpool.decide.kueue import KueueObserved
from accelpool_demo import kueue as demo_kueue
from accelpool_demo.kueue import schema
from tests.support.structural import schema_errors
from tests.unit.operator.conftest import NOW, member, pool, run

ENV = demo_kueue.PUBLISHED_ENV
TAINTS = [
    {"key": "dedicated", "value": "ml-team", "effect": "NoSchedule"},
    {"key": "example.com/gpu-maintenance", "effect": "NoExecute"},
]


def write_stand_ins(directory: Path) -> None:
    """Files named as Kueue's CRDs (the demo's own CRDs, marked): what the demo reads from a directory."""
    for kind, name in demo_kueue.FILES.items():
        crd = schema.custom_resource_definition(kind)
        crd["metadata"]["labels"] = {"stand-in": "true"}
        (directory / name).write_text(yaml.safe_dump(crd))


def test_the_variable_names_the_directory_of_the_published_crds(tmp_path: Path) -> None:
    write_stand_ins(tmp_path)
    assert demo_kueue.published_dir({ENV: str(tmp_path)}) == tmp_path
    served = demo_kueue.custom_resource_definitions({ENV: str(tmp_path)})
    assert [c["metadata"]["name"] for c in served] == ["resourceflavors.kueue.x-k8s.io", "clusterqueues.kueue.x-k8s.io"]
    assert all(c["metadata"]["labels"] == {"stand-in": "true"} for c in served), "read from the directory"


def test_a_directory_without_them_is_an_error_naming_what_is_missing(tmp_path: Path) -> None:
    (tmp_path / demo_kueue.FILES["ClusterQueue"]).write_text("{}")
    with pytest.raises(
        demo_kueue.PublishedCrdsError, match=f"{ENV}={tmp_path}: no kueue.x-k8s.io_resourceflavors.yaml"
    ):
        demo_kueue.published_dir({ENV: str(tmp_path)})


def test_set_empty_the_demo_serves_its_own_crds() -> None:
    assert demo_kueue.published_dir({ENV: ""}) is None
    served = demo_kueue.custom_resource_definitions({ENV: ""})
    assert served == [
        schema.custom_resource_definition("ResourceFlavor"),
        schema.custom_resource_definition("ClusterQueue"),
    ]


def test_unset_they_are_read_from_shared_crds_beside_the_source_tree() -> None:
    beside = Path(__file__).resolve().parents[4] / "shared" / "crds"
    assert beside == demo_kueue.SHARED_CRDS
    found = demo_kueue.published_dir({})
    if all((beside / name).is_file() for name in demo_kueue.FILES.values()):
        assert found == beside
    else:
        assert found is None, "nothing beside the checkout: the demo's own CRDs"


def test_the_demo_keeps_no_copy_of_kueues_files() -> None:
    assert not [p.name for p in demo_kueue.HERE.iterdir() if p.name.startswith("kueue.x-k8s.io_")]


# ---------------------------------------------------------------- the demo's own CRDs


def closed(node: Any) -> Any:
    """The schema with no field left unchecked: every property that is not declared is an error."""
    if isinstance(node, dict):
        return {k: closed(v) for k, v in node.items() if k != "x-kubernetes-preserve-unknown-fields"}
    if isinstance(node, list):
        return [closed(v) for v in node]
    return node


def declared(kind: str) -> dict[str, Any]:
    (version,) = schema.custom_resource_definition(kind)["spec"]["versions"]
    found: dict[str, Any] = closed(version["schema"]["openAPIV3Schema"])
    return found


def written(accelerator: str, spec: dict[str, Any], queue: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ResourceFlavor, the ClusterQueue as accelpool's edit leaves it) for a pool `train` on tainted nodes."""
    asking = {**spec, "nodes": 2, "kueue": {"enabled": True, "clusterQueue": "research"}}
    plan = run([pool("train", asking)], [member(f"n{i}", "train", accelerator, taints=TAINTS) for i in range(2)])
    _, writes = kueue.decide(plan, {}, KueueObserved(True, queues={"research": queue}), NOW)
    (flavor,) = [obj for _, obj in writes.flavors.values()]
    (edit,) = writes.queues
    edited = copy.deepcopy(queue)
    edited["spec"]["resourceGroups"] = edit.resource_groups
    return flavor, edited


def demo_objects() -> dict[str, dict[str, Any]]:
    return {obj["kind"]: obj for obj in yaml.safe_load_all((demo_kueue.HERE / "cluster-queue.yaml").read_text())}


@pytest.mark.parametrize(
    ("accelerator", "spec"),
    [
        ("H100-80GB", {"accelerator": "H100:8"}),
        (
            "A100-80GB",
            {"accelerator": "A100-80GB:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        ),
        ("L4", {"accelerator": "L4:1", "sharing": {"timeSlicing": {"replicas": 4}}, "dedicated": False}),
        ("MI300X", {"accelerator": "MI300X:8"}),
    ],
    ids=["whole-gpus", "mig-mixed", "time-slicing", "amd"],
)
def test_every_field_accelpool_writes_is_declared(accelerator: str, spec: dict[str, Any]) -> None:
    """Nothing accelpool writes falls to the fields the demo's own CRDs keep unchecked."""
    queue = demo_objects()["ClusterQueue"]
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["borrowingLimit"] = 64
    queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["lendingLimit"] = 32
    flavor, edited = written(accelerator, spec, queue)
    assert flavor["spec"]["tolerations"], "the members' lasting taints: tolerations written"
    assert schema_errors(declared("ResourceFlavor"), flavor) == []
    assert schema_errors(declared("ClusterQueue"), edited) == []
    assert len(edited["spec"]["resourceGroups"]) == 2, "accelpool's group beside the user's"


def test_the_demos_cluster_queue_is_declared_and_a_broken_one_is_refused() -> None:
    objects = demo_objects()
    for kind, obj in objects.items():
        assert schema_errors(declared(kind), obj) == []
    queue = copy.deepcopy(objects["ClusterQueue"])
    del queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"][0]["nominalQuota"]
    assert any("nominalQuota" in e for e in schema_errors(declared("ClusterQueue"), queue))
    flavor = {**objects["ResourceFlavor"], "spec": {"tolerations": [{"key": str(i)} for i in range(9)]}}
    assert any("tolerations" in e for e in schema_errors(declared("ResourceFlavor"), flavor))
