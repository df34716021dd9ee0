"""allocation DRA pools, planned: per-GPU quarantine with DeviceTaintRules, the DeviceClass, the members' labels,
and the status read from NVIDIA's ResourceSlices (`accelpool.decide.dra`)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

from accelpool.decide.dra import plan as dra
from accelpool.decide.dra.evictions import pods_using
from accelpool.decide.dra.plan import DraInputs, DraPlan
from accelpool.decide.dra.rules import TaintRule
from accelpool.decide.dra.slices import read_slices
from accelpool.decide.dra.support import rule_support
from accelpool.decide.planning import ConfigState, Plan, PlannerOptions, PoolInput, plan
from accelpool.model.nodes import NodeView
from accelpool_api import conventions
from tests.support.builders import gpu_uuid as uuid
from tests.support.builders import pool_input
from tests.support.builders import resource_slice as slice_of

from .conftest import NOW, applied, member

POOL = "train"
SPEC: dict[str, Any] = {"accelerator": "H100:8", "nodes": 2, "allocation": "DRA"}
XID79 = ("False", "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 3", "2026-11-02T11:59:00Z")
HEALTHY = ("True", "AllChecksPassed", "", "2026-11-02T11:00:00Z")


def report(bad: Sequence[int], node: str, *, node_finding: bool = False) -> str:
    findings = [
        {"check": "xid", "severity": "CRITICAL", "reason": "XidError79", "action": "reset-gpu", "gpus": list(bad)}
    ]
    if node_finding:
        findings.append({"check": "gpu_count", "severity": "CRITICAL", "reason": "GpuMissing", "gpus": []})
    return json.dumps(
        {
            "status": "Unhealthy",
            "reason": "XidError79",
            "pool": POOL,
            "gpus": 8,
            "badGpus": list(bad),
            "badDevices": [{"index": i, "uuid": uuid(node, i), "reason": "XidError79"} for i in bad],
            "findings": findings,
        }
    )


def dra_member(name: str, *, bad: Sequence[int] = (), node_finding: bool = False, **kwargs: Any) -> NodeView:
    labels = {conventions.DEVICE_PLUGIN_DEPLOY_LABEL: "false"}
    annotations = {}
    if bad:
        annotations[conventions.HEALTH_ANNOTATION] = report(bad, name, node_finding=node_finding)
    health = XID79 if bad else kwargs.pop("health", HEALTHY)
    # NVIDIA's device plugin is off: the kubelet advertises no nvidia.com/gpu; GFD's labels still count the GPUs
    return member(
        name, POOL, labels=labels, annotations=annotations, health=health, capacity={}, allocatable={}, **kwargs
    )


def run_dra(
    pools: Sequence[PoolInput], nodes: Sequence[NodeView], inputs: DraInputs, **options: Any
) -> tuple[Plan, DraPlan]:
    planner_options = PlannerOptions(now=options.pop("now", NOW), **options)
    planned_nodes, decisions = dra.prepare(pools, nodes, inputs, planner_options)
    result = plan(list(pools), planned_nodes, ConfigState(), planner_options)
    return dra.finish(result, pools, nodes, inputs, decisions, planner_options.now)


def inputs(
    *slices: dict[str, Any], served: frozenset[str] = frozenset({"v1"}), rules: Sequence[TaintRule] = ()
) -> DraInputs:
    return DraInputs(read_slices(slices), tuple(rules), rule_support(served, "auto"))


def status_of(result: Plan) -> Any:
    found = result.pool(POOL)
    assert found is not None and found.status is not None
    return found.status


def test_xid_79_on_gpu_3_taints_that_device_alone_and_the_node_serves_seven() -> None:
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1"), slice_of("n2")))
    assert list(objects.rules) == ["accelpool-n1-gpu-3"]
    rule = objects.rules["accelpool-n1-gpu-3"]
    assert rule["apiVersion"] == "resource.k8s.io/v1"
    assert rule["spec"] == {
        "deviceSelector": {"driver": "gpu.nvidia.com", "pool": "n1", "device": "gpu-3"},
        "taint": {"key": "accelpool.io/quarantined", "value": "XidError79", "effect": "NoSchedule"},
    }
    assert rule["metadata"]["ownerReferences"][0]["name"] == POOL
    change = result.changes["n1"]
    assert not [t for t in change.add_taints if t.key == conventions.QUARANTINE_TAINT_KEY]
    status = status_of(result)
    assert (status.capacity.gpus, status.capacity.quarantined_gpus) == (15, 1)
    assert status.capacity.resources == {"deviceclass.resource.kubernetes.io/train.accelpool.io": 15}
    assert (status.quarantine.scope, status.quarantine.reason) == ("GPU", "DeviceTaintRules")
    assert [(q.node, q.device, q.uuid, q.source) for q in status.dra.quarantined_devices] == [
        ("n1", "gpu-3", uuid("n1", 3), "agent")
    ]
    assert status.nodes.quarantined == 0
    healthy = next(c for c in status.conditions if c.type == "Healthy")
    assert (healthy.status, healthy.reason) == ("False", "GpuQuarantined")
    assert healthy.message.endswith("n1 gpu-3: XidError79")
    assert {(e.name, e.reason) for e in result.events} >= {("n1", "GpuQuarantined")}
    assert [(r.node, r.action, r.reason) for r in result.remediations] == [("n1", "gpu_taint", "XidError79")]


def test_without_device_taint_rules_the_same_fault_quarantines_the_node_and_says_why() -> None:
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    result, objects = run_dra(
        [pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1"), slice_of("n2"), served=frozenset())
    )
    assert objects.rules == {}
    assert conventions.QUARANTINE_TAINT_KEY in [t.key for t in result.changes["n1"].add_taints]
    status = status_of(result)
    assert (status.quarantine.scope, status.quarantine.reason) == ("Node", "DeviceTaintRuleNotServed")
    assert "resource.k8s.io/v1 from Kubernetes 1.37" in status.quarantine.message


def test_kubernetes_1_36_needs_the_opt_in() -> None:
    beta = frozenset({"v1beta2"})
    assert rule_support(beta, "auto").reason == "OptInRequired"
    assert rule_support(beta, "v1beta2").version == "v1beta2"
    assert rule_support(frozenset({"v1", "v1beta2"}), "off").reason == "Disabled"


def test_a_node_wide_finding_still_quarantines_the_node() -> None:
    nodes = [dra_member("n1", bad=[3], node_finding=True), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1"), slice_of("n2")))
    assert objects.rules == {}
    assert conventions.QUARANTINE_TAINT_KEY in [t.key for t in result.changes["n1"].add_taints]


def test_a_gpu_the_slices_do_not_show_quarantines_the_node() -> None:
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, SPEC)], nodes, inputs(slice_of("n2")))
    assert objects.rules == {}
    assert conventions.QUARANTINE_TAINT_KEY in [t.key for t in result.changes["n1"].add_taints]
    assert status_of(result).dra.members_without_slices == ["n1"]


def test_every_mig_device_of_the_bad_gpu_gets_its_own_rule() -> None:
    spec = {**SPEC, "mig": {"profile": "3g.40gb"}}
    mig = {i: ["3g.40gb", "3g.40gb"] for i in range(8)}
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, spec)], nodes, inputs(slice_of("n1", mig=mig), slice_of("n2", mig=mig)))
    assert sorted(objects.rules) == [
        "accelpool-n1-gpu-3",
        "accelpool-n1-gpu-3-mig-3g40gb-0",
        "accelpool-n1-gpu-3-mig-3g40gb-1",
    ]
    status = status_of(result)
    assert status.capacity.resources == {"deviceclass.resource.kubernetes.io/train.accelpool.io": 30}
    assert len(status.dra.quarantined_devices) == 1
    assert [e.reason for e in result.events if e.reason == "GpuQuarantined"] == ["GpuQuarantined"], "one per GPU"


def test_the_breaker_counts_gpus() -> None:
    spec = {**SPEC, "health": {"maxUnavailable": 1}}
    nodes = [dra_member("n1", bad=[3, 5]), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, spec)], nodes, inputs(slice_of("n1"), slice_of("n2")))
    assert list(objects.rules) == ["accelpool-n1-gpu-3"]
    assert "circuit breaker open: 1 bad GPU(s) left serving (n1 GPU-n1-5)" in status_of(result).quarantine.message
    assert not [t for t in result.changes["n1"].add_taints if t.key == conventions.QUARANTINE_TAINT_KEY]


def test_the_rule_goes_after_the_hold_down_of_health() -> None:
    rule = TaintRule(
        POOL and "accelpool-n1-gpu-3",
        POOL,
        "n1",
        "gpu-3",
        uuid("n1", 3),
        "XidError79",
        "NoSchedule",
        since=NOW - timedelta(hours=1),
    )
    nodes = [dra_member("n1"), dra_member("n2")]
    data = inputs(slice_of("n1"), slice_of("n2"), rules=[rule])
    _, first = run_dra([pool_input(POOL, SPEC)], nodes, data)
    kept = TaintRule.from_body(first.rules["accelpool-n1-gpu-3"])
    assert kept is not None and kept.healthy_since == NOW
    later = NOW + timedelta(minutes=10)
    result, second = run_dra(
        [pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1"), slice_of("n2"), rules=[kept]), now=later
    )
    assert second.rules == {}
    assert ("n1", "GpuQuarantineLifted") in {(e.name, e.reason) for e in result.events}


def test_a_driver_taint_counts_as_a_finding() -> None:
    nodes = [dra_member("n1"), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1", taints={6: "79"}), slice_of("n2")))
    assert list(objects.rules) == ["accelpool-n1-gpu-6"]
    status = status_of(result)
    assert [(q.device, q.source, q.reason) for q in status.dra.quarantined_devices] == [
        ("gpu-6", "driver", "gpu.nvidia.com/xid=79:NoSchedule")
    ]
    assert status.capacity.gpus == 15


def test_members_keep_the_device_plugin_off_and_get_it_back_when_released() -> None:
    fresh = [member("n1", POOL, health=HEALTHY)]
    result, objects = run_dra([pool_input(POOL, SPEC)], fresh, inputs(slice_of("n1")))
    labels = result.changes["n1"].labels
    assert labels[conventions.DEVICE_PLUGIN_DEPLOY_LABEL] == "false"
    assert labels.get(conventions.DEVICE_PLUGIN_CONFIG_LABEL, None) is None
    assert list(objects.classes) == ["train.accelpool.io"]
    expression = objects.classes["train.accelpool.io"]["spec"]["selectors"][0]["cel"]["expression"]
    assert "device.attributes['gpu.nvidia.com'].type == 'gpu'" in expression
    after = applied(fresh, result)
    released, _ = run_dra([pool_input(POOL, {**SPEC, "nodes": 0})], after, inputs(slice_of("n1")))
    assert released.changes["n1"].labels.get(conventions.DEVICE_PLUGIN_DEPLOY_LABEL, "kept") is None


def claim(namespace: str, name: str, node: str, device: str, pods: Sequence[str]) -> dict[str, Any]:
    return {
        "metadata": {"namespace": namespace, "name": name},
        "status": {
            "allocation": {
                "devices": {"results": [{"request": "gpu", "driver": "gpu.nvidia.com", "pool": node, "device": device}]}
            },
            "reservedFor": [{"resource": "pods", "name": p, "uid": f"uid-{p}"} for p in pods],
        },
    }


def test_a_draining_pool_evicts_the_pods_whose_claims_hold_the_quarantined_gpu() -> None:
    spec = {**SPEC, "health": {"remediation": "taint", "drain": {"enabled": True, "gracePeriod": "30s"}}}
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    _, objects = run_dra([pool_input(POOL, spec)], nodes, inputs(slice_of("n1"), slice_of("n2")))
    drain = objects.drains[POOL]
    assert (drain.devices, drain.grace_seconds) == (frozenset({("n1", "gpu-3")}), 30)
    claims = [
        claim("team-a", "train-0-gpu", "n1", "gpu-3", ["train-0", "train-0-sidecar"]),
        claim("team-a", "train-1-gpu", "n1", "gpu-4", ["train-1"]),
        claim("team-b", "other", "n2", "gpu-3", ["other"]),
    ]
    assert [str(p) for p in pods_using(claims, drain.devices)] == ["team-a/train-0", "team-a/train-0-sidecar"]


def test_a_no_execute_rule_needs_no_drain_of_its_own() -> None:
    spec = {**SPEC, "health": {"gpuTaintEffect": "NoExecute", "drain": {"enabled": True}}}
    nodes = [dra_member("n1", bad=[3]), dra_member("n2")]
    _, objects = run_dra([pool_input(POOL, spec)], nodes, inputs(slice_of("n1"), slice_of("n2")))
    assert objects.rules["accelpool-n1-gpu-3"]["spec"]["taint"]["effect"] == "NoExecute"
    assert objects.drains == {}


def test_a_static_mig_layout_the_slices_do_not_show_asks_for_a_plugin_restart() -> None:
    spec = {**SPEC, "mig": {"profile": "3g.40gb"}}
    applied_state = {conventions.MIG_CONFIG_STATE_LABEL: "success", conventions.MIG_CONFIG_LABEL: "accelpool-train-x"}
    stale = member("n1", POOL, health=HEALTHY, labels=applied_state, capacity={}, allocatable={})
    fresh = member("n2", POOL, health=HEALTHY, labels=applied_state, capacity={}, allocatable={})
    layout = {i: ["3g.40gb", "3g.40gb"] for i in range(8)}
    result, objects = run_dra(
        [pool_input(POOL, spec)], [stale, fresh], inputs(slice_of("n1"), slice_of("n2", mig=layout))
    )
    assert objects.stale_mig == {"n1": "accelpool-train-x"}
    assert status_of(result).dra.members_awaiting_plugin_restart == ["n1"]


def test_a_gpu_healthy_again_is_released_while_another_of_its_node_is_bad() -> None:
    since = NOW - timedelta(hours=1)
    rule = TaintRule("accelpool-n1-gpu-3", POOL, "n1", "gpu-3", uuid("n1", 3), "XidError79", "NoSchedule", since=since)
    held = replace(rule, healthy_since=NOW - timedelta(minutes=10))
    nodes = [dra_member("n1", bad=[5]), dra_member("n2")]
    result, objects = run_dra([pool_input(POOL, SPEC)], nodes, inputs(slice_of("n1"), slice_of("n2"), rules=[held]))
    assert sorted(objects.rules) == ["accelpool-n1-gpu-5"]
    assert ("n1", "GpuQuarantineLifted") in {(e.name, e.reason) for e in result.events}
