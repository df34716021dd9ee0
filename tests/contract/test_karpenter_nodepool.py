"""The karpenter.sh/v1 NodePools the operator renders are accepted by Karpenter's published CRD
(../shared/crds/karpenter.sh_nodepools.yaml, kubernetes-sigs/karpenter pkg/apis/crds/): defaults
applied as the API server applies them, the structural schema with unknown fields refused
(tests/support/structural.py), and every x-kubernetes-validations rule evaluated with Google's CEL in
Kubernetes' environment (accelpool_demo/apiserver/cel.py), transition rules on updates.

NodePools come from the operator's own path: planning (member labels) then `desired.render_owned`.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

import accelpool_api as api
from accelpool.decide import render
from accelpool.decide.desired import render_owned
from accelpool.decide.planning import ConfigState, PlannerOptions, PoolInput, plan
from accelpool_api import validation
from accelpool_core import catalog
from accelpool_demo.apiserver.cel import (
    ABSENT,
    evaluate_rules,
    rules_of,
    unsupported_functions,
    uses_old_self,
)
from tests.support.environment import require_shared
from tests.support.structural import apply_defaults, schema_errors

pytestmark = pytest.mark.contract
ROOT = Path(__file__).resolve().parents[2]
KARPENTER_CRD = "crds/karpenter.sh_nodepools.yaml"
"""The published Karpenter CRD, in ../shared (see ../shared/crds/README.md)."""
NOW = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)

NOT_EVALUABLE: dict[str, str] = {}
"""Rules of the published CRD this test cannot evaluate as an API server would (rule → why). Empty: every
function they call is Google's CEL's or declared in accelpool_demo/apiserver/cel.py. A rule calling anything else fails
`test_every_rule_of_the_crd_is_evaluated` until it is implemented or listed here with the reason."""


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    crd = yaml.safe_load(require_shared(KARPENTER_CRD).read_text())
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1"]
    found: dict[str, Any] = version["schema"]["openAPIV3Schema"]
    return found


@dataclass(frozen=True)
class Admitted:
    """Why the API server refuses the object (empty: it stores it), and the rules it evaluated."""

    errors: list[str]
    evaluated: list[tuple[str, str]]


def admit(schema: dict[str, Any], obj: dict[str, Any], old: dict[str, Any] | None = None) -> Admitted:
    """What the API server does with a create (or, with `old`, an update): defaults, schema, then CEL rules."""
    obj = copy.deepcopy(obj)
    apply_defaults(schema, obj)
    errors = schema_errors(schema, obj)
    if errors:
        return Admitted(errors, [])
    stored: Any = ABSENT
    if old is not None:
        stored = copy.deepcopy(old)
        apply_defaults(schema, stored)
    evaluation = evaluate_rules(schema, obj, old=stored)
    return Admitted(evaluation.errors, evaluation.evaluated)


def rendered(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The NodePool the operator writes for pool `name` (planning, then `render_owned`)."""
    checked, problems = validation.validate_spec(copy.deepcopy(spec))
    assert checked is not None and not problems, problems
    pool = PoolInput(name=name, spec=checked, uid=f"uid-{name}", generation=1)
    owned, failures = render_owned(
        plan([pool], [], ConfigState(), PlannerOptions(now=NOW)), render.AgentRendering(), karpenter=True
    )
    assert not failures, failures
    nodepool = owned[name].nodepool
    assert nodepool is not None
    return nodepool


def _karpenter(spec: dict[str, Any]) -> dict[str, Any]:
    return {"provisioner": {"type": "karpenter"}, **spec}


def _examples() -> Iterator[tuple[str, str, dict[str, Any]]]:
    for path in sorted((ROOT / "examples" / "karpenter").glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") == "ComputePool":
                yield f"example-{path.stem}", document["metadata"]["name"], document["spec"]


POOLS: list[tuple[str, str, dict[str, Any]]] = [
    *_examples(),
    *(
        (f"catalog-{e.name}", f"p-{e.name.lower()}", _karpenter({"accelerator": e.name, "nodes": 0, "maxNodes": 4}))
        for e in catalog.ACCELERATORS
        if e.detection.karpenter_names
    ),
    (
        "typed-a100-80gb-x8-from-zero",
        "a100",
        _karpenter({"accelerator": {"name": "A100", "memory": "80GB", "count": 8}, "nodes": 0, "maxNodes": 2}),
    ),
    ("h100-most-nodes", "big", _karpenter({"accelerator": "H100:8", "nodes": 0, "maxNodes": api.MAX_NODES})),
    ("h100-fixed-count", "fixed", _karpenter({"accelerator": "H100:8", "nodes": 3})),
    (
        "h100-mig",
        "mig",
        _karpenter({"accelerator": "H100:8", "mig": {"profile": "3g.40gb"}, "nodes": 1, "maxNodes": 2}),
    ),
    (
        "l4-shared-with-selector",
        "inference",
        {
            "accelerator": "L4:1",
            "nodes": 0,
            "maxNodes": 20,
            "sharing": {"timeSlicing": {"replicas": 4}},
            "dedicated": False,
            "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1a", "karpenter.sh/capacity-type": "spot"},
            "provisioner": {"type": "karpenter", "nodeClass": "inference-nodes"},
        },
    ),
    (
        "trainium2-selector",
        "trn",
        _karpenter(
            {
                "accelerator": "Trainium2:16",
                "nodes": 1,
                "maxNodes": 8,
                "nodeSelector": {"karpenter.k8s.aws/instance-family": "trn2", "kubernetes.io/arch": "amd64"},
            }
        ),
    ),
    ("v100-32gb-memory-bounds", "v100", _karpenter({"accelerator": "V100-32GB:8", "nodes": 0, "maxNodes": 1})),
    ("long-pool-name", "x" * 53, _karpenter({"accelerator": "B200:8", "nodes": 0, "maxNodes": 2})),
]


@pytest.mark.parametrize(("name", "spec"), [p[1:] for p in POOLS], ids=[p[0] for p in POOLS])
def test_rendered_nodepools_are_accepted(schema: dict[str, Any], name: str, spec: dict[str, Any]) -> None:
    nodepool = rendered(name, spec)
    evaluation = admit(schema, nodepool)
    assert evaluation.errors == [], yaml.safe_dump(nodepool)
    assert len(evaluation.evaluated) >= 10, "the rules ran"


def test_the_examples_are_among_the_pools() -> None:
    assert any(case.startswith("example-") for case, _, _ in POOLS), "examples/karpenter/ has no ComputePool"


def test_defaults_are_applied_as_the_api_server_does(schema: dict[str, Any]) -> None:
    nodepool = rendered("h200-burst", _karpenter({"accelerator": "H200:8", "nodes": 1, "maxNodes": 4}))
    assert "budgets" not in nodepool["spec"]["disruption"]
    assert "expireAfter" not in nodepool["spec"]["template"]["spec"]
    stored = copy.deepcopy(nodepool)
    apply_defaults(schema, stored)
    assert stored["spec"]["disruption"]["budgets"] == [{"nodes": "10%"}]  # Karpenter's default disruption budget
    assert stored["spec"]["template"]["spec"]["expireAfter"] == "720h"
    assert stored["spec"]["disruption"]["consolidateAfter"] == "5m", "a rendered value is kept"


UPDATES: list[tuple[str, dict[str, Any], dict[str, Any]]] = [
    (
        "scale-and-node-class",
        _karpenter({"accelerator": "H100:8", "nodes": 1, "maxNodes": 4}),
        {
            "accelerator": "H100:8",
            "nodes": 0,
            "maxNodes": 16,
            "provisioner": {"type": "karpenter", "nodeClass": "gpu"},
        },
    ),
    (
        "dedicated-off-selector-added",
        _karpenter({"accelerator": "L40S:4", "nodes": 0, "maxNodes": 2}),
        _karpenter(
            {
                "accelerator": "L40S:4",
                "nodes": 0,
                "maxNodes": 2,
                "dedicated": False,
                "nodeSelector": {"topology.kubernetes.io/zone": "eu-west-1b"},
            }
        ),
    ),
    (
        "mig-layout-changed",
        _karpenter({"accelerator": "A100-80GB:8", "nodes": 1, "maxNodes": 2}),
        _karpenter({"accelerator": "A100-80GB:8", "mig": {"profile": "1g.10gb"}, "nodes": 1, "maxNodes": 2}),
    ),
]


@pytest.mark.parametrize(("before", "after"), [u[1:] for u in UPDATES], ids=[u[0] for u in UPDATES])
def test_updates_between_renders_pass_the_transition_rules(
    schema: dict[str, Any], before: dict[str, Any], after: dict[str, Any]
) -> None:
    evaluation = admit(schema, rendered("pool", after), old=rendered("pool", before))
    assert evaluation.errors == []
    assert sum(uses_old_self(rule) for _, rule in evaluation.evaluated) == 3, "the transition rules ran"


def test_every_rule_of_the_crd_is_evaluated(schema: dict[str, Any]) -> None:
    rules = [(field, rule["rule"]) for field, _, rule in rules_of(schema)]
    assert len(rules) >= 18
    for _, rule in rules:
        missing = unsupported_functions(rule)
        if rule in NOT_EVALUABLE:
            assert missing, f"{rule!r} is listed as not evaluable but calls nothing missing: unlist it"
        else:
            assert not missing, (
                f"{rule!r} calls {sorted(missing)}: declare them in accelpool_demo/apiserver/cel.py or list the rule"
            )
    ran: set[str] = set()
    for _, name, spec in POOLS:
        ran.update(rule for _, rule in admit(schema, rendered(name, spec)).evaluated)
    for _, before, after in UPDATES:
        ran.update(rule for _, rule in admit(schema, rendered("pool", after), old=rendered("pool", before)).evaluated)
    never = [f"{path}: {rule}" for path, rule in rules if rule not in ran and rule not in NOT_EVALUABLE]
    assert never == [], "rules no rendered NodePool reached"


# ---------------------------------------------------------------- the validator rejects what the server rejects


def _requirements(obj: dict[str, Any]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = obj["spec"]["template"]["spec"]["requirements"]
    return found


Mutation = Callable[[dict[str, Any]], None]
BROKEN: list[tuple[str, Mutation, str]] = [
    (
        "In without values",
        lambda o: _requirements(o).append({"key": "topology.kubernetes.io/zone", "operator": "In", "values": []}),
        ".spec.template.spec.requirements: requirements with operator 'In' must have a value defined",
    ),
    (
        "In without a values field",
        lambda o: _requirements(o).append({"key": "topology.kubernetes.io/zone", "operator": "In"}),
        ".spec.template.spec.requirements: requirements with operator 'In' must have a value defined",
    ),
    (
        "Gt with a value that is not an integer",  # int('eight') cannot be evaluated: a rejection
        lambda o: _requirements(o).append(
            {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["eight"]}
        ),
        "requirements operator 'Gt', 'Lt', 'Gte', or 'Lte' must have a single positive integer value",
    ),
    (
        "minValues above the values",
        lambda o: _requirements(o)[0].update(minValues=2),
        "requirements with 'minValues' must have at least that many values specified in the 'values' field",
    ),
    (
        "a restricted requirement key",
        lambda o: _requirements(o).append({"key": "kubernetes.io/hostname", "operator": "In", "values": ["n1"]}),
        '.spec.template.spec.requirements[3].key: label "kubernetes.io/hostname" is restricted',
    ),
    (
        "a karpenter.sh template label",
        lambda o: o["spec"]["template"]["metadata"]["labels"].update({"karpenter.sh/nodepool": "other"}),
        '.spec.template.metadata.labels: label "karpenter.sh/nodepool" is restricted',
    ),
    (
        "a disruption budget of 'ten' nodes",
        lambda o: o["spec"]["disruption"].update(budgets=[{"nodes": "ten"}]),
        "spec.disruption.budgets.0.nodes: 'ten' does not match",
    ),
    (
        "a budget schedule without a duration",
        lambda o: o["spec"]["disruption"].update(budgets=[{"nodes": "1", "schedule": "@daily"}]),
        ".spec.disruption.budgets: 'schedule' must be set with 'duration'",
    ),
    (
        "an empty node class name",
        lambda o: o["spec"]["template"]["spec"]["nodeClassRef"].update(name=""),
        ".spec.template.spec.nodeClassRef.name: name may not be empty",
    ),
    (
        "weight on a static NodePool",
        lambda o: o["spec"].update(replicas=2, weight=10, limits={}),
        ".spec: 'weight' is not supported on static NodePools",
    ),
    (
        "a GPU limit on a static NodePool",
        lambda o: o["spec"].update(replicas=2),
        ".spec: only 'limits.nodes' is supported on static NodePools",
    ),
    (
        "an unknown consolidation policy",
        lambda o: o["spec"]["disruption"].update(consolidationPolicy="WhenIdle"),
        "spec.disruption.consolidationPolicy: 'WhenIdle' is not one of",
    ),
    (
        "an unknown field",
        lambda o: o["spec"]["template"]["spec"].update(kubelet={"maxPods": 110}),
        "Additional properties are not allowed ('kubelet' was unexpected)",
    ),
    (
        "a taint without an effect",
        lambda o: o["spec"]["template"]["spec"]["taints"][0].pop("effect"),
        "spec.template.spec.taints.0: 'effect' is a required property",
    ),
    (
        "a limit that is not a quantity",
        lambda o: o["spec"]["limits"].update({"nvidia.com/gpu": "32 GPUs"}),
        "spec.limits.nvidia.com/gpu: '32 GPUs' does not match",
    ),
]


@pytest.mark.parametrize(("mutate", "expected"), [b[1:] for b in BROKEN], ids=[b[0] for b in BROKEN])
def test_a_broken_nodepool_is_rejected(schema: dict[str, Any], mutate: Mutation, expected: str) -> None:
    nodepool = rendered("h200-burst", _karpenter({"accelerator": "H200:8", "nodes": 1, "maxNodes": 4}))
    assert admit(schema, nodepool).errors == []
    broken = copy.deepcopy(nodepool)
    mutate(broken)
    errors = admit(schema, broken).errors
    assert any(expected in e for e in errors), errors


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda o: o["spec"]["template"]["spec"]["nodeClassRef"].update(group="example.com"), "group is immutable"),
        (lambda o: o["spec"]["template"]["spec"]["nodeClassRef"].update(kind="OtherClass"), "kind is immutable"),
        (lambda o: o["spec"].update(replicas=1, limits={}), "Cannot transition NodePool between static"),
    ],
    ids=["node class group", "node class kind", "dynamic to static"],
)
def test_a_forbidden_update_is_rejected(schema: dict[str, Any], mutate: Mutation, expected: str) -> None:
    stored = rendered("h200-burst", _karpenter({"accelerator": "H200:8", "nodes": 1, "maxNodes": 4}))
    updated = copy.deepcopy(stored)
    mutate(updated)
    assert admit(schema, updated).errors == [], "a create would be accepted: only the transition rule refuses it"
    assert any(expected in e for e in admit(schema, updated, old=stored).errors)


@pytest.mark.parametrize(
    "key",
    ["kubernetes.io/hostname", "karpenter.sh/nodepool", "karpenter.sh/discovery", "example.karpenter.sh/x", "a b"],
)
def test_a_pool_selecting_on_a_key_karpenter_refuses_is_set_aside(schema: dict[str, Any], key: str) -> None:
    """Its NodePool would be refused at every write: the pool is set aside, naming the key, instead."""
    spec = _karpenter({"accelerator": "H100:8", "nodes": 0, "maxNodes": 2, "nodeSelector": {key: "v"}})
    checked, problems = validation.validate_spec(spec)
    assert checked is not None and not problems
    pool = PoolInput(name="sel", spec=checked, uid="uid-sel", generation=1)
    owned, failures = render_owned(
        plan([pool], [], ConfigState(), PlannerOptions(now=NOW)), render.AgentRendering(), karpenter=True
    )
    assert "sel" not in owned
    assert f"nodeSelector key {key!r} cannot be a Karpenter NodePool requirement" in failures["sel"]
    nodepool = rendered("sel", {**spec, "nodeSelector": {}})
    _requirements(nodepool).append({"key": key, "operator": "In", "values": ["v"]})
    assert admit(schema, nodepool).errors != [], "the guard refuses only what the CRD refuses"


# ---------------------------------------------------------------- the Kubernetes library functions


@pytest.mark.parametrize(
    ("expression", "value", "expected"),
    [
        ("self.find('^([^/]+)') == 'karpenter.sh'", "karpenter.sh/nodepool", True),  # regex.go find
        ("self.find('[0-9]+') == ''", "no digits", True),
        ("self.findAll('[0-9]+') == ['1', '22']", "a1b22", True),
        ("self.findAll('[0-9]+', 1) == ['1']", "a1b22", True),
        ("self.split('/') == ['a', 'b', 'c']", "a/b/c", True),  # ext/strings.go split
        ("self.split('/', 2) == ['a', 'b/c']", "a/b/c", True),
        ("self.split('/', 0) == []", "a/b/c", True),
        ("self.lowerAscii() == 'abcÄ'", "ABCÄ", True),  # only ASCII letters change
        ("self.replace('a', 'o', 1) == 'obca'", "abca", True),
        ("self.indexOf('c') == 2 && self.lastIndexOf('a') == 3", "abca", True),
        ("self.split('').join('-') == 'a-b-c'", "abc", True),
        ("self.find('[') == ''", "abc", False),  # an illegal regex cannot be evaluated: a rejection
    ],
)
def test_kubernetes_string_functions(expression: str, value: str, expected: bool) -> None:
    node = {"type": "string", "x-kubernetes-validations": [{"rule": expression, "message": "m"}]}
    assert (evaluate_rules(node, value).errors == []) is expected


@pytest.mark.parametrize(
    ("expression", "value", "accepted"),
    [
        ("self.isSorted()", [1, 2, 2, 5], True),  # lists.go
        ("self.isSorted()", [3, 1], False),
        ("self.sum() == 10 && self.min() == 1 && self.max() == 5", [1, 4, 5], True),
        ("self.min() == 0", [], False),  # min of an empty list is an error: a rejection
        ("self.indexOf(4) == 1 && self.lastIndexOf(9) == -1", [1, 4, 4], True),
        ("self.all(x, x > 0) && self.exists_one(x, x == 4)", [1, 4, 5], True),
    ],
)
def test_kubernetes_list_functions_and_errors(expression: str, value: list[int], accepted: bool) -> None:
    node = {"type": "array", "items": {"type": "integer"}, "x-kubernetes-validations": [{"rule": expression}]}
    errors = evaluate_rules(node, value).errors
    assert (errors == []) is accepted
    if not accepted:
        assert errors == [f": failed rule: {expression}"]
