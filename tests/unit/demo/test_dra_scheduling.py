"""kube-scheduler's DRA allocation and the resourceclaim controller, simulated (`accelpool_demo.dra.allocator`,
`.scheduler`, `.claims`), held to what kube-scheduler and kube-controller-manager v1.36.2 did
(../shared/fidelity/kubernetes/dra.yaml, scenarios dra-objects and dra-scheduling), then the allocator's
rules one by one. Pure: the recorded objects go in as plain dicts."""

from __future__ import annotations

import copy
import json
from collections import Counter
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from accelpool_demo import dra
from accelpool_demo.dra import cel
from accelpool_demo.dra.quantity import compare_semver, parse_quantity, parse_semver
from accelpool_demo.dra.scheduler import Bound, Cluster, Unschedulable, Waiting, schedule
from tests.conformance import transcripts
from tests.support.builders import NVIDIA_GPU_CLASS
from tests.support.environment import require_shared

NAMESPACE = "fidd"
NOW = "2026-11-26T10:00:00Z"


def recorded_steps(scenario: str) -> list[transcripts.Step]:
    require_shared("fidelity/kubernetes/dra.yaml")
    return list(transcripts.scenario_of(f"dra/{scenario}").steps)


def sent(step: transcripts.Step) -> dict[str, Any]:
    """What the recording sent (responses normalize UUIDs in strings, which the claims' selectors hold)."""
    body: dict[str, Any] = copy.deepcopy(dict(step.request["body"]))  # type: ignore[index]
    return body


def normalized(value: Any) -> Any:
    """Our objects with the transcripts' normalization of timestamps."""
    return json.loads(json.dumps(value).replace(NOW, "<timestamp>"))


class Recorded:
    """The recorded cluster of dra-scheduling, replayed through the simulated controller and scheduler."""

    def __init__(self, *, honour_rules: bool = False) -> None:
        objects = recorded_steps("dra-objects")
        self.classes = {sent(objects[i])["metadata"]["name"]: sent(objects[i]) for i in (3, 4)}
        self.slices = [sent(objects[10])]
        self.rules = [dict(objects[14].response["body"])]
        self.claims: dict[str, dict[str, Any]] = {}
        for index in (21, 22, 23, 24, 25):
            claim = sent(objects[index])
            claim["metadata"].update(namespace=NAMESPACE, uid=f"c-{claim['metadata']['name']}", resourceVersion="1")
            self.claims[claim["metadata"]["name"]] = claim
        template = sent(objects[30])
        template["metadata"]["namespace"] = NAMESPACE
        self.templates = {"tpl-one": template}
        node = sent(objects[1])
        node["spec"] = {"taints": [{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}]}
        node["status"] = {"allocatable": sent(objects[2])["status"]["allocatable"]}
        # the eviction scenario's node, created without status: no allocatable pods ("0/2 nodes" in the messages)
        self.nodes = [node, {"metadata": {"name": "fid-node-evict"}, "spec": {}, "status": {}}]
        self.pods: list[dict[str, Any]] = []
        self.honour_rules = honour_rules
        self.outcomes: dict[str, Bound | Unschedulable | Waiting] = {}

    def cluster(self) -> Cluster:
        return Cluster(self.nodes, self.pods, list(self.claims.values()), self.classes, self.slices, self.rules)

    def run(self, pod: dict[str, Any]) -> Bound | Unschedulable | Waiting:
        pod["metadata"].update(namespace=NAMESPACE, uid=f"p-{pod['metadata']['name']}")
        pod["status"] = {"phase": "Pending"}
        self.pods.append(pod)
        made = dra.pod_claims_to_create(pod, self.templates, self.claims)
        created = {}
        for entry, body in made.create.items():
            body["metadata"]["name"] = body["metadata"]["generateName"] + "szggp"
            body["metadata"].update(uid="generated", resourceVersion="1")
            self.claims[body["metadata"]["name"]] = body
            created[entry] = body["metadata"]["name"]
        statuses = made.statuses(pod, created)
        if statuses is not None:
            pod["status"]["resourceClaimStatuses"] = statuses
        outcome = schedule(pod, self.cluster(), honour_rules=self.honour_rules, now=NOW)
        if isinstance(outcome, Bound):
            pod["spec"]["nodeName"] = outcome.node
            for update in outcome.claims:
                claim = self.claims[update.name]
                claim["status"] = update.status
                if update.finalizers is not None:
                    claim["metadata"]["finalizers"] = update.finalizers
        self.outcomes[pod["metadata"]["name"]] = outcome
        return outcome

    def replay(self) -> Iterator[transcripts.Step]:
        """Every recorded step after the pods were created, in order."""
        steps = recorded_steps("dra-scheduling")
        for step in steps:
            if step.request and step.request["method"] == "POST":
                self.run(sent(step))
        yield from steps


def test_the_recorded_scheduler_decisions() -> None:
    """Pods in the recorded order get the recorded nodes, devices, tolerations, messages and events."""
    recorded = Recorded()
    steps = list(recorded.replay())
    checked: Counter[str] = Counter()
    for step in steps:
        request = step.request or {}
        if request.get("method") != "GET":
            continue
        body = step.response["body"]
        path = str(request["path"])
        if "/pods/" in path:
            name = path.rsplit("/", 1)[1]
            outcome = recorded.outcomes[name]
            assert (outcome.node if isinstance(outcome, Bound) else None) == body["spec"]["nodeName"], name
            condition = body["status"]["conditions"][0]
            if isinstance(outcome, Unschedulable):
                assert (condition["status"], condition["reason"]) == ("False", "Unschedulable")
                assert outcome.message == condition["message"], name
            pod = next(p for p in recorded.pods if p["metadata"]["name"] == name)
            assert pod["status"].get("resourceClaimStatuses") == body["status"]["resourceClaimStatuses"], name
            checked["pods"] += 1
        elif "/resourceclaims/" in path:
            name = path.rsplit("/", 1)[1]
            claim = recorded.claims[name]
            assert normalized(claim.get("status") or {}).get("allocation") == body["status"].get("allocation"), name
            reserved = [
                {"resource": r["resource"], "name": r["name"]} for r in claim.get("status", {}).get("reservedFor", [])
            ]
            assert reserved == [
                {"resource": r["resource"], "name": r["name"]} for r in body["status"].get("reservedFor", [])
            ]
            assert claim["metadata"].get("finalizers") == body["metadata"]["finalizers"], name
            checked["claims"] += 1
        elif path.endswith("/events"):
            for event in body["items"]:
                outcome = recorded.outcomes[event["involvedObject"]]
                if event["reason"] == "Scheduled":
                    assert isinstance(outcome, Bound) and outcome.message == event["message"]
                else:
                    assert isinstance(outcome, Unschedulable) and outcome.message == event["message"]
                checked["events"] += 1
    assert checked == {"pods": 6, "claims": 6, "events": 6}


def test_the_generated_claim_is_the_recorded_one() -> None:
    recorded = Recorded()
    steps = list(recorded.replay())
    (step,) = [s for s in steps if str((s.request or {}).get("path", "")).endswith("/pod-tpl-gpu-szggp")]
    expected = step.response["body"]["metadata"]
    claim = recorded.claims["pod-tpl-gpu-szggp"]["metadata"]
    assert claim["generateName"] == expected["generateName"]
    assert claim["labels"] == expected["labels"]
    assert claim["annotations"] == expected["annotations"]
    owner = dict(claim["ownerReferences"][0])
    assert owner.pop("blockOwnerDeletion"), "controller.go handleClaim sets it (the recorded body omits it)"
    assert {k: v for k, v in owner.items() if k != "uid"} == {
        k: v for k, v in expected["ownerReferences"][0].items() if k != "uid"
    }


def test_a_scheduler_that_honours_device_taint_rules_keeps_off_the_quarantined_gpu() -> None:
    """1.37 (DRADeviceTaintRules GA): the rule's NoSchedule taint on gpu-0 blocks the claim asking for gpu-0."""
    recorded = Recorded(honour_rules=True)
    list(recorded.replay())
    outcome = recorded.outcomes["pod-gpu0"]
    assert isinstance(outcome, Unschedulable)
    assert "1 cannot allocate all claims" in outcome.message
    one = recorded.claims["claim-one"]["status"]["allocation"]["devices"]["results"][0]
    assert one["device"] == "gpu-1", "gpu-0 stayed free, but its rule's taint keeps any claim off it"


# ---------------------------------------------------------------- the allocator's rules


def gpu(name: str, **attributes: Any) -> dict[str, Any]:
    attrs: dict[str, Any] = {"type": {"string": "gpu"}, "uuid": {"string": f"GPU-{name}"}}
    attrs |= {k: ({"int": v} if isinstance(v, int) else {"string": v}) for k, v in attributes.items()}
    return {"name": name, "attributes": attrs, "capacity": {"memory": {"value": "80Gi"}}}


def a_slice(node: str, devices: list[dict[str, Any]], generation: int = 1, count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{node}-gpu.nvidia.com-x{generation}"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": node,
            "pool": {"name": node, "generation": generation, "resourceSliceCount": count},
            "devices": devices,
        },
    }


GPU_CLASS = NVIDIA_GPU_CLASS
QUARANTINE = {"key": "accelpool.io/quarantine", "effect": "NoSchedule"}


def on_node(name: str) -> dict[str, Any]:
    """An allocation's node selector for a node-local device."""
    return {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [name]}]}]}


NODE = {"metadata": {"name": "n1", "labels": {"zone": "a"}}, "status": {"allocatable": {"pods": "10"}}}


def claim(name: str = "c", *requests: dict[str, Any], constraints: list[Any] | None = None) -> dict[str, Any]:
    devices: dict[str, Any] = {
        "requests": list(requests) or [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
    }
    if constraints:
        devices["constraints"] = constraints
    return {"metadata": {"name": name, "namespace": "ns"}, "spec": {"devices": devices}}


def request(name: str = "gpu", **exactly: Any) -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": "gpu.nvidia.com", **exactly}}


def devices_of(allocations: list[dict[str, Any]] | None) -> list[list[str]]:
    assert allocations is not None
    return [[r["device"] for r in a["devices"]["results"]] for a in allocations]


def allocate(claims: list[dict[str, Any]], slices: list[dict[str, Any]], **options: Any) -> list[dict[str, Any]] | None:
    return dra.allocate(claims, NODE, {"gpu.nvidia.com": GPU_CLASS}, slices, **options)


def test_exact_count_takes_free_devices_in_slice_order() -> None:
    slices = [a_slice("n1", [gpu("gpu-0"), gpu("gpu-1"), gpu("gpu-2")])]
    assert devices_of(allocate([claim("c", request(count=2))], slices)) == [["gpu-0", "gpu-1"]]
    held = {("gpu.nvidia.com", "n1", "gpu-0")}
    assert devices_of(allocate([claim("c", request(count=2))], slices, allocated=held)) == [["gpu-1", "gpu-2"]]
    assert allocate([claim("c", request(count=4))], slices) is None
    two = allocate([claim("a"), claim("b")], slices)
    assert devices_of(two) == [["gpu-0"], ["gpu-1"]], "one pod's claims never share a device"


def test_all_needs_every_matching_device_free_and_untainted() -> None:
    tainted = {**gpu("gpu-1"), "taints": [{"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}]}
    noted = {**gpu("gpu-1"), "taints": [{"key": "gpu.nvidia.com/xid", "value": "13", "effect": "None"}]}
    every = claim("c", request(allocationMode="All"))
    assert devices_of(allocate([every], [a_slice("n1", [gpu("gpu-0"), noted])])) == [["gpu-0", "gpu-1"]]
    assert allocate([every], [a_slice("n1", [gpu("gpu-0"), tainted])]) is None
    held = {("gpu.nvidia.com", "n1", "gpu-0")}
    assert allocate([every], [a_slice("n1", [gpu("gpu-0"), gpu("gpu-1")])], allocated=held) is None
    assert allocate([every], [a_slice("n2", [gpu("gpu-0")])]) is None, "no device on this node: fails"
    with pytest.raises(dra.AllocationError, match=r"asks for all devices, but resource pool gpu\.nvidia\.com/n1 is"):
        allocate([every], [a_slice("n1", [gpu("gpu-0")], count=2)])


def test_taints_block_unless_tolerated_and_tolerations_are_copied() -> None:
    xid = {"key": "gpu.nvidia.com/xid", "value": "79", "effect": "NoSchedule"}
    slices = [a_slice("n1", [{**gpu("gpu-0"), "taints": [xid]}])]
    assert allocate([claim()], slices) is None
    for toleration in (
        {"key": "gpu.nvidia.com/xid", "operator": "Exists"},
        {"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "79", "effect": "NoSchedule"},
        {"operator": "Exists"},
    ):
        (allocation,) = allocate([claim("c", request(tolerations=[toleration]))], slices) or []
        assert allocation["devices"]["results"][0]["tolerations"] == [toleration]
    wrong = [{"key": "gpu.nvidia.com/xid", "operator": "Equal", "value": "48"}]
    assert allocate([claim("c", request(tolerations=wrong))], slices) is None
    evicting = [a_slice("n1", [{**gpu("gpu-0"), "taints": [{**xid, "effect": "NoExecute"}]}])]
    no_execute_only = [{"key": "gpu.nvidia.com/xid", "operator": "Exists", "effect": "NoSchedule"}]
    assert allocate([claim("c", request(tolerations=no_execute_only))], evicting) is None


def test_device_taint_rules_add_taints_when_honoured() -> None:
    rule: dict[str, Any] = {
        "metadata": {"name": "q"},
        "spec": {
            "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"},
            "taint": {"key": "accelpool.io/quarantine", "value": "xid-79", "effect": "NoSchedule", "timeAdded": NOW},
        },
    }
    slices = [a_slice("n1", [gpu("gpu-0"), gpu("gpu-1")])]
    assert devices_of(allocate([claim()], slices, rules=[rule], honour_rules=False)) == [["gpu-0"]]
    assert devices_of(allocate([claim()], slices, rules=[rule])) == [["gpu-1"]]
    whole_node = {**rule, "spec": {**rule["spec"], "deviceSelector": {"pool": "n1"}}}
    assert allocate([claim()], slices, rules=[whole_node]) is None
    no_selector = {**rule, "spec": {"taint": rule["spec"]["taint"]}}
    assert devices_of(allocate([claim()], slices, rules=[no_selector])) == [["gpu-0"]], "no selector: no device"


def test_selectors_constraints_and_first_available() -> None:
    slices = [
        a_slice(
            "n1",
            [gpu("gpu-0", productName="NVIDIA L4", root="a"), gpu("gpu-1", productName="NVIDIA H100", root="b"),
             gpu("gpu-2", productName="NVIDIA H100", root="a"), gpu("gpu-3", productName="NVIDIA H100", root="a")],
        )
    ]  # fmt: skip
    h100 = [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].productName.startsWith('NVIDIA H100')"}}]
    assert devices_of(allocate([claim("c", request(selectors=h100))], slices)) == [["gpu-1"]]
    same_root = [{"requests": [], "matchAttribute": "gpu.nvidia.com/root"}]
    pair = claim("c", request(count=2, selectors=h100), constraints=same_root)
    assert devices_of(allocate([pair], slices)) == [["gpu-2", "gpu-3"]], "backtracks past gpu-1"
    apart = claim("c", request(count=2), constraints=[{"distinctAttribute": "gpu.nvidia.com/root"}])
    assert devices_of(allocate([apart], slices)) == [["gpu-0", "gpu-1"]]
    first = {
        "name": "gpu",
        "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4, "selectors": h100},
            {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 2, "selectors": h100},
        ],
    }
    (allocation,) = allocate([claim("c", first)], slices) or []
    assert [r["request"] for r in allocation["devices"]["results"]] == ["gpu/small", "gpu/small"]


def test_admin_access_may_use_allocated_devices() -> None:
    slices = [a_slice("n1", [gpu("gpu-0")])]
    held = {("gpu.nvidia.com", "n1", "gpu-0")}
    (allocation,) = allocate([claim("c", request(adminAccess=True))], slices, allocated=held) or []
    assert allocation["devices"]["results"][0] == {
        "request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0", "adminAccess": True,
    }  # fmt: skip


def test_pools_only_the_newest_complete_generation_targeting_the_node() -> None:
    old = a_slice("n1", [gpu("gpu-9")], generation=1)
    new = a_slice("n1", [gpu("gpu-0")], generation=2)
    assert devices_of(allocate([claim()], [old, new])) == [["gpu-0"]]
    assert allocate([claim()], [a_slice("n1", [gpu("gpu-0")], count=2)]) is None, "incomplete: not allocated from"
    elsewhere = a_slice("n2", [gpu("gpu-0")])
    assert allocate([claim()], [elsewhere]) is None
    labelled = {**elsewhere, "spec": {**elsewhere["spec"], "nodeName": None}}
    labelled["spec"]["nodeSelector"] = {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}]
    }
    (allocation,) = allocate([claim()], [labelled]) or []
    assert allocation["nodeSelector"] == labelled["spec"]["nodeSelector"], "the slice's selector, not the node"


def test_the_allocation_names_the_node_class_config_and_timestamp() -> None:
    configured = {
        **GPU_CLASS,
        "spec": {**GPU_CLASS["spec"], "config": [{"opaque": {"driver": "gpu.nvidia.com", "parameters": {"k": 1}}}]},
    }
    (allocation,) = (
        dra.allocate([claim()], NODE, {"gpu.nvidia.com": configured}, [a_slice("n1", [gpu("gpu-0")])], now=NOW) or []
    )
    assert allocation == {
        "devices": {
            "results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-0"}],
            "config": [{"source": "FromClass", "opaque": {"driver": "gpu.nvidia.com", "parameters": {"k": 1}}}],
        },
        "nodeSelector": on_node("n1"),
        "allocationTimestamp": NOW,
    }  # fmt: skip


def test_errors_stop_the_allocation() -> None:
    slices = [a_slice("n1", [gpu("gpu-0")])]
    missing = [{"cel": {"expression": "device.attributes['gpu.nvidia.com'].nope == 'x'"}}]
    with pytest.raises(
        dra.AllocationError,
        match=r"claim ns/c: selector #0 on device gpu.nvidia.com/n1/gpu-0: CEL runtime error: no such key: nope",
    ):
        allocate([claim("c", request(selectors=missing))], slices)
    with pytest.raises(
        dra.AllocationError,
        match=r'could not retrieve device class other: deviceclass\.resource\.k8s\.io "other" not found',
    ):
        allocate([claim("c", {"name": "gpu", "exactly": {"deviceClassName": "other"}})], slices)
    guarded = [
        {
            "cel": {
                "expression": "device.attributes['gpu.nvidia.com'].?nope.orValue('') == '' && "
                "device.attributes['x.example.com'].size() == 0"
            }
        }
    ]
    assert devices_of(allocate([claim("c", request(selectors=guarded))], slices)) == [["gpu-0"]], (
        "an unknown domain is empty"
    )


def test_quantities_and_versions_compare_as_kubernetes_does() -> None:
    assert parse_quantity("81559Mi") == 85520809984
    assert parse_quantity("1.5Gi") == parse_quantity("1536Mi")
    assert parse_quantity("500m") * 2 == 1
    assert parse_quantity("1e3") == 1000
    assert compare_semver(parse_semver("580.126.20"), parse_semver("570.0.0")) == 1
    assert compare_semver(parse_semver("1.0.0-rc.1"), parse_semver("1.0.0")) == -1
    device = cel.device_variable(
        "gpu.nvidia.com",
        {"attributes": {"driverVersion": {"version": "580.126.20"}}, "capacity": {"memory": {"value": "81559Mi"}}},
    )
    assert cel.matches("device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) < 0", device)
    assert cel.matches("device.capacity['gpu.nvidia.com'].memory.isGreaterThan(quantity('79Gi'))", device)
    assert cel.matches("device.attributes['gpu.nvidia.com'].driverVersion.isGreaterThan(semver('570.0.0'))", device)
    assert cel.matches("cel.bind(nv, device.attributes['gpu.nvidia.com'], nv.driverVersion.major() == 580)", device)


# ---------------------------------------------------------------- nodes the pod cannot use, and the messages


def pod(name: str = "p", claim_name: str = "c", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}"},
        "spec": {
            "containers": [{"name": "c"}],
            "resourceClaims": [{"name": "gpu", "resourceClaimName": claim_name}],
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def cluster(
    nodes: list[dict[str, Any]], claims: list[dict[str, Any]], slices: list[dict[str, Any]], pods: Sequence[Any] = ()
) -> Cluster:
    return Cluster(nodes, list(pods), claims, {"gpu.nvidia.com": GPU_CLASS}, slices)


def test_node_filters_give_the_schedulers_reasons() -> None:
    nodes = [
        {"metadata": {"name": "a"}, "spec": {"unschedulable": True}, "status": {"allocatable": {"pods": "10"}}},
        {"metadata": {"name": "b"}, "spec": {"taints": [QUARANTINE]}, "status": {"allocatable": {"pods": "10"}}},
        {"metadata": {"name": "c", "labels": {"pool": "other"}}, "status": {"allocatable": {"pods": "10"}}},
        {"metadata": {"name": "d", "labels": {"pool": "x"}}, "status": {"allocatable": {"pods": "10", "cpu": "1"}}},
        {"metadata": {"name": "e", "labels": {"pool": "x"}}, "status": {"allocatable": {"pods": "10", "cpu": "8"}}},
    ]  # fmt: skip
    wanting = pod(nodeSelector={"pool": "x"}, containers=[{"name": "c", "resources": {"requests": {"cpu": "2"}}}])
    outcome = schedule(wanting, cluster(nodes, [claim()], [a_slice("a", [gpu("gpu-0")])]))
    assert isinstance(outcome, Unschedulable)
    assert outcome.message == (
        "0/5 nodes are available: 1 Insufficient cpu, 1 cannot allocate all claims, 1 node(s) didn't match Pod's "
        "node affinity/selector, 1 node(s) had untolerated taint(s), 1 node(s) were unschedulable. still not "
        "schedulable, preemption: 0/5 nodes are available: 5 Preemption is not helpful for scheduling."
    ), "Insufficient cpu beyond the node's whole allocatable cannot be preempted away either"


def test_a_pod_is_bound_with_its_claim_allocated_and_reserved() -> None:
    slices = [a_slice("n1", [gpu("gpu-0")])]
    outcome = schedule(pod(), cluster([NODE], [claim()], slices), now=NOW)
    assert isinstance(outcome, Bound)
    assert (outcome.node, outcome.message) == ("n1", "Successfully assigned ns/p to n1")
    (update,) = outcome.claims
    assert update.finalizers == [dra.DELETE_PROTECTION_FINALIZER]
    assert update.status["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "uid-p"}]
    assert update.status["allocation"]["devices"]["results"][0]["device"] == "gpu-0"


def test_a_shared_allocated_claim_is_reserved_on_its_node_only() -> None:
    allocated = claim()
    allocated["status"] = {
        "allocation": {"devices": {"results": []}, "nodeSelector": on_node("n1")},
        "reservedFor": [{"resource": "pods", "name": "first", "uid": "uid-first"}],
    }  # fmt: skip
    other = {"metadata": {"name": "n0"}, "status": {"allocatable": {"pods": "10"}}}
    outcome = schedule(pod(), cluster([other, NODE], [allocated], []))
    assert isinstance(outcome, Bound) and outcome.node == "n1"
    (update,) = outcome.claims
    assert update.finalizers is None and "allocation" in update.status
    assert [r["name"] for r in update.status["reservedFor"]] == ["first", "p"]


def test_a_claim_allocated_for_nobody_elsewhere_is_deallocated() -> None:
    stale = claim()
    stale["status"] = {"allocation": {"devices": {"results": []}, "nodeSelector": on_node("gone")}}
    outcome = schedule(pod(), cluster([NODE], [stale], []))
    assert isinstance(outcome, Unschedulable)
    assert outcome.message.startswith(
        "0/1 nodes are available: 1 resourceclaim not available on the node. deallocation of ResourceClaim completed, "
    )
    assert outcome.claims[0].status == {}


def test_a_pod_waits_for_its_claims() -> None:
    templated = pod()
    templated["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    assert isinstance(schedule(templated, cluster([NODE], [], [])), Waiting), "the controller has not made it yet"
    assert isinstance(schedule(pod(claim_name="missing"), cluster([NODE], [], [])), Waiting)
    other_class = claim("c", {"name": "gpu", "exactly": {"deviceClassName": "nope"}})
    outcome = schedule(pod(), cluster([NODE], [other_class], []))
    assert isinstance(outcome, Unschedulable)
    assert outcome.message.startswith("0/1 nodes are available: request gpu: device class nope does not exist.")


# ---------------------------------------------------------------- the resourceclaim controller


def test_claims_are_made_from_templates_once() -> None:
    template = {
        "metadata": {"name": "t"},
        "spec": {"metadata": {"labels": {"a": "b"}}, "spec": {"devices": {"requests": []}}},
    }
    templated = pod()
    templated["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "t"}]
    made = dra.pod_claims_to_create(templated, {"t": template}, {})
    body = made.create["gpu"]
    assert body["metadata"]["generateName"] == "p-gpu-"
    assert body["metadata"]["annotations"] == {dra.POD_CLAIM_NAME_ANNOTATION: "gpu"}
    assert made.statuses(templated, {"gpu": "p-gpu-abcde"}) == [{"name": "gpu", "resourceClaimName": "p-gpu-abcde"}]
    existing = {**body, "metadata": {**body["metadata"], "name": "p-gpu-abcde"}}
    again = dra.pod_claims_to_create(templated, {"t": template}, {"p-gpu-abcde": existing})
    assert again.adopt == {"gpu": "p-gpu-abcde"} and not again.create, "an orphan of the pod is adopted"
    missing = dra.pod_claims_to_create(templated, {}, {})
    assert missing.failures == [
        'PodResourceClaim gpu: resource claim template "t": resourceclaimtemplate.resource.k8s.io "t" not found'
    ]
    long = dra.claim_from_template(
        {**templated, "metadata": {**templated["metadata"], "name": "p" * 60}}, {"name": "gpus"}, template
    )
    assert len(long["metadata"]["generateName"]) <= 57


def test_claims_are_released_when_their_pods_go() -> None:
    held = claim()
    held["metadata"]["finalizers"] = [dra.DELETE_PROTECTION_FINALIZER]
    held["status"] = {"allocation": {"devices": {}}, "reservedFor": [{"resource": "pods", "name": "p", "uid": "uid-p"}]}
    assert not dra.claim_release(held, {"p": pod()}), "its pod still runs"
    release = dra.claim_release(held, {})
    assert (release.reserved_for, release.deallocate, release.finalizers, release.delete) == ([], True, [], False)
    finished = {**pod(), "status": {"phase": "Succeeded"}}
    assert dra.claim_release(held, {"p": finished}).deallocate
    generated = copy.deepcopy(held)
    generated["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "uid-p", "controller": True}
    ]
    assert dra.claim_release(generated, {"p": finished}).delete, "a generated claim of a finished pod goes"
