"""What the operator writes for Kueue is accepted by Kueue's published CRDs (../shared/crds/,
kubernetes-sigs/kueue config/components/crd/bases, storage version v1beta2; without them every test here is
skipped, and fails under REQUIRE_TOOLS=1: tests/support/kueue.py): defaults, the structural
schema with unknown fields refused, every `x-kubernetes-validations` rule (accelpool_demo/apiserver/cel.py), and, for
ClusterQueues, Kueue's validating webhook on resource groups (tests/support/kueue.py).

The objects come from the operator's own path: planning, then `accelpool.decide.kueue.decide`, for pools of
every device layout (whole GPUs, MIG single and mixed, time-slicing, other vendors, other controllers'
taints on members) and for users' ClusterQueues of several shapes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from accelpool.decide import kueue
from accelpool.decide.kueue import KueueObserved
from accelpool.decide.planning import Plan
from accelpool_api import conventions
from accelpool_demo.apiserver.cel import rules_of, unsupported_functions
from tests.support import kueue as installed
from tests.unit.operator.conftest import NOW, member, pool, run

pytestmark = [pytest.mark.contract]
GPU = "nvidia.com/gpu"
LASTING_TAINTS = [
    {"key": "dedicated", "value": "ml-team", "effect": "NoSchedule"},
    {"key": "example.com/gpu-maintenance", "effect": "NoExecute"},
]

POOLS: list[tuple[str, str, str, dict[str, Any], list[dict[str, str]]]] = [
    ("whole-gpus", "training", "H100-80GB", {"accelerator": "H100:8"}, []),
    ("mig-single", "slices", "H100-80GB", {"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}}, []),
    (
        "mig-mixed",
        "mixed",
        "A100-80GB",
        {"accelerator": "A100-80GB:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        [],
    ),
    (
        "time-slicing",
        "inference",
        "L4",
        {"accelerator": "L4:1", "sharing": {"timeSlicing": {"replicas": 4}}, "dedicated": False},
        [],
    ),
    ("amd", "mi300x", "MI300X", {"accelerator": "MI300X:8"}, []),
    ("trainium", "trn", "Trainium2", {"accelerator": "Trainium2:16"}, []),
    ("lasting-taints", "tainted", "H100-80GB", {"accelerator": "H100:8"}, LASTING_TAINTS),
    ("long-name", "x" * 63, "H100-80GB", {"accelerator": "H100:8"}, []),
]


DRA_POOLS: list[tuple[str, str, str, dict[str, Any], dict[str, int]]] = [
    ("dra-whole-gpus", "training", "H100-80GB", {"accelerator": "H100:8"}, {"x": 16}),
    (
        "dra-mig-mixed",
        "mixed",
        "A100-80GB",
        {"accelerator": "A100-80GB:8", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
        {"nvidia.com/mig-3g.40gb": 16, "nvidia.com/mig-2g.20gb": 16, "nvidia.com/mig-1g.10gb": 32},
    ),
    ("dra-longest-mappable-class", "x" * 50, "H100-80GB", {"accelerator": "H100:8"}, {"x": 16}),
]
"""(case, pool, accelerator, spec, what its slices offer): allocation DRA, status as `installed.as_dra` gives it."""


def _plan(
    name: str, accelerator: str, spec: dict[str, Any], taints: list[dict[str, str]], dra: dict[str, int] | None = None
) -> Plan:
    asking = {**spec, "nodes": 2, "kueue": {"enabled": True, "clusterQueue": "research"}}
    if dra is not None:
        asking["allocation"] = "DRA"
    nodes = [member(f"n{i}", name, accelerator, taints=taints) for i in range(2)]
    result = run([pool(name, asking)], nodes)
    return result if dra is None else installed.as_dra(result, name, dra)


def _written(
    name: str,
    accelerator: str,
    spec: dict[str, Any],
    taints: list[dict[str, str]],
    queue: dict[str, Any],
    dra: dict[str, int] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the ResourceFlavor, the ClusterQueue as the edit leaves it) for the pool."""
    _, writes = kueue.decide(
        _plan(name, accelerator, spec, taints, dra), {}, KueueObserved(True, queues={"research": queue}), NOW
    )
    (flavor,) = [obj for _, obj in writes.flavors.values()]
    (edit,) = writes.queues
    edited = copy.deepcopy(queue)
    edited["spec"]["resourceGroups"] = edit.resource_groups
    return flavor, edited


QUEUES: list[tuple[str, dict[str, Any]]] = [
    ("cpu-and-memory-only", installed.cluster_queue("research", [installed.CPU_AND_MEMORY])),
    ("empty", installed.cluster_queue("research", [])),
    (
        "cohort-with-limits-and-policies",
        installed.cluster_queue(
            "research",
            [installed.CPU_AND_MEMORY],
            cohortName="ml",
            preemption={"reclaimWithinCohort": "Any", "borrowWithinCohort": {"policy": "LowerPriority"}},
            flavorFungibility={"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
            queueingStrategy="StrictFIFO",
        ),
    ),
]


def _cases() -> Iterator[Any]:
    for pool_case, name, accelerator, spec, taints in POOLS:
        for queue_case, queue in QUEUES:
            yield pytest.param(name, accelerator, spec, taints, queue, None, id=f"{pool_case}-{queue_case}")
    for pool_case, name, accelerator, spec, offered in DRA_POOLS:
        for queue_case, queue in QUEUES:
            yield pytest.param(name, accelerator, spec, [], queue, offered, id=f"{pool_case}-{queue_case}")


@pytest.mark.parametrize(("name", "accelerator", "spec", "taints", "queue", "dra"), list(_cases()))
def test_flavors_and_queue_edits_are_accepted(
    name: str,
    accelerator: str,
    spec: dict[str, Any],
    taints: list[dict[str, str]],
    queue: dict[str, Any],
    dra: dict[str, int] | None,
) -> None:
    assert installed.admit("ClusterQueue", queue) == [], "the user's queue itself is valid"
    flavor, edited = _written(name, accelerator, spec, taints, queue, dra)
    assert installed.admit("ResourceFlavor", flavor) == []
    assert installed.admit("ClusterQueue", edited, old=queue) == []
    assert {k: v for k, v in edited["spec"].items() if k != "resourceGroups"} == {
        k: v for k, v in queue["spec"].items() if k != "resourceGroups"
    }, "nothing else of the queue changes"


def test_dra_pools_in_one_queue_and_the_configuration_kueue_needs_for_them_are_accepted() -> None:
    result = run(
        [
            pool(
                name, {**spec, "nodes": 1, "allocation": "DRA", "kueue": {"enabled": True, "clusterQueue": "research"}}
            )
            for _, name, _, spec, _ in DRA_POOLS
        ],
        [member(f"n-{i}", name, accelerator) for i, (_, name, accelerator, _, _) in enumerate(DRA_POOLS)],
    )
    for _, name, _, _, offered in DRA_POOLS:
        result = installed.as_dra(result, name, offered)
    queue = QUEUES[2][1]
    after, writes = kueue.decide(result, {}, KueueObserved(True, queues={"research": queue}), NOW)
    (edit,) = writes.queues
    edited = copy.deepcopy(queue)
    edited["spec"]["resourceGroups"] = edit.resource_groups
    assert installed.admit("ClusterQueue", edited, old=queue) == []
    mappings = []
    for found in after.pools:
        assert found.status is not None and found.status.kueue is not None
        assert found.status.kueue.device_class_mapping is not None
        mappings.append(found.status.kueue.device_class_mapping.model_dump(by_alias=True))
    assert installed.configuration_problems(mappings) == []
    covered = {r for g in edit.resource_groups for r in g["coveredResources"]}
    assert {m["name"] for m in mappings} <= covered, "the queue names the resources the mappings name"


def test_lasting_taints_become_tolerations_kueue_accepts() -> None:
    flavor, _ = _written("tainted", "H100-80GB", {"accelerator": "H100:8"}, LASTING_TAINTS, QUEUES[0][1])
    assert flavor["spec"]["tolerations"] == [
        {"key": conventions.POOL_TAINT_KEY, "operator": "Equal", "value": "tainted", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ml-team", "effect": "NoSchedule"},
        {"key": "example.com/gpu-maintenance", "operator": "Exists", "effect": "NoExecute"},
    ]


def test_a_quota_change_and_a_removal_pass_the_webhook_and_the_transition_rules() -> None:
    queue = QUEUES[2][1]
    _, with_pool = _written("training", "H100-80GB", {"accelerator": "H100:8"}, [], queue)
    quarantined = [
        member(
            "n0", "training", taints=[{"key": conventions.QUARANTINE_TAINT_KEY, "value": "x", "effect": "NoSchedule"}]
        ),
        member("n1", "training"),
    ]
    asking = {"accelerator": "H100:8", "nodes": 2, "kueue": {"enabled": True, "clusterQueue": "research"}}
    observed = KueueObserved(True, queues={"research": with_pool})
    _, writes = kueue.decide(run([pool("training", asking)], quarantined), {}, observed, NOW)
    dropped = copy.deepcopy(with_pool)
    dropped["spec"]["resourceGroups"] = writes.queues[0].resource_groups
    assert kueue.nominal_quota(dropped["spec"]["resourceGroups"], "training") == {GPU: 8}
    assert installed.admit("ClusterQueue", dropped, old=with_pool) == []
    flavors = {
        "training": {
            "metadata": {
                "name": "training",
                "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: "training"},
            }
        }
    }
    gone = run([pool("training", asking, deleting=True)], quarantined)
    _, writes = kueue.decide(gone, {}, KueueObserved(True, flavors=flavors, queues={"research": dropped}), NOW)
    removed = copy.deepcopy(dropped)
    removed["spec"]["resourceGroups"] = writes.queues[0].resource_groups
    assert removed["spec"]["resourceGroups"] == queue["spec"]["resourceGroups"]
    assert installed.admit("ClusterQueue", removed, old=dropped) == []


@pytest.mark.parametrize(
    ("kind", "mutate", "expected"),
    [
        (
            "ResourceFlavor",
            lambda o: o["spec"]["tolerations"][0].update(operator="Exists"),
            "a value must be empty when 'operator' is 'Exists'",
        ),
        ("ResourceFlavor", lambda o: o["spec"]["tolerations"][0].update(operator="In"), "supported toleration values"),
        ("ResourceFlavor", lambda o: o["spec"].update(kind="x"), "Additional properties are not allowed"),
        (
            "ClusterQueue",
            lambda o: o["spec"]["resourceGroups"][-1]["coveredResources"].append("cpu"),
            "flavors must have the same number of resources as the coveredResources",
        ),
        (
            "ClusterQueue",
            lambda o: o["spec"]["resourceGroups"][-1]["flavors"][0]["resources"][0].update(name="cpu"),
            "must match the name in coveredResources",
        ),
        (
            "ClusterQueue",
            lambda o: o["spec"]["resourceGroups"][-1]["flavors"][0]["resources"][0].update(borrowingLimit=2),
            "borrowingLimit must be nil when cohort is empty",
        ),
        (
            "ClusterQueue",
            lambda o: o["spec"]["resourceGroups"][-1].update(
                coveredResources=["deviceclass.resource.kubernetes.io/" + "x" * 64]
            ),
            "name part must be a qualified name of at most 63 characters",
        ),
    ],
    ids=[
        "exists-with-value",
        "unknown-operator",
        "unknown-field",
        "covered-count",
        "order",
        "borrowing-no-cohort",
        "covered-not-a-label-key",
    ],
)
def test_the_checks_are_live(kind: str, mutate: Any, expected: str) -> None:
    flavor, queue = _written("training", "H100-80GB", {"accelerator": "H100:8"}, [], QUEUES[0][1])
    broken = copy.deepcopy(flavor if kind == "ResourceFlavor" else queue)
    mutate(broken)
    assert any(expected in e for e in installed.admit(kind, broken)), installed.admit(kind, broken)


@pytest.mark.parametrize("kind", ["ResourceFlavor", "ClusterQueue"])
def test_every_rule_of_the_crds_can_be_evaluated(kind: str) -> None:
    rules = [rule["rule"] for _, _, rule in rules_of(installed.schema(kind))]
    assert len(rules) >= 4
    assert {r: unsupported_functions(r) for r in rules if unsupported_functions(r)} == {}
