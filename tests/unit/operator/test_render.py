"""Rendered artifacts against golden files: device-plugin configs, the mig-parted document, DaemonSet, NodePool.

Regenerate after an intended change with `UPDATE_GOLDENS=1 pytest tests/unit/operator/test_render.py`
and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client import CollectorRegistry

import accelpool_api as api
from accelpool.decide import render
from accelpool.decide.render import AgentRendering
from accelpool.model import nvidia
from accelpool_agent import server
from accelpool_api import conventions

from .conftest import fixture_nodes, pool, run

GOLDEN = Path(__file__).parent / "golden"
POOLS: dict[str, dict[str, Any]] = {
    "llm-training": {
        "accelerator": "H100:8",
        "nodes": 4,
        "health": {"matmul": {"dtype": "bf16", "minEfficiency": 0.7}},
    },
    "a100-slices": {"accelerator": {"name": "A100", "memory": "40GB"}, "nodes": 2, "mig": {"profile": "1g.5gb"}},
    "h100-mixed": {"accelerator": "H100", "mig": {"profiles": ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]}},
    "l4-inference": {"accelerator": "L4", "nodes": 3, "dedicated": False, "sharing": {"timeSlicing": {"replicas": 4}}},
    "l4-mps": {"accelerator": "L4", "sharing": {"mps": {"replicas": 2}}},
    "mi300x": {"accelerator": "MI300X:8"},
}


def check_golden(name: str, document: Any) -> None:
    path = GOLDEN / name
    text = yaml.safe_dump(document, sort_keys=False, default_flow_style=False)
    if os.environ.get("UPDATE_GOLDENS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with UPDATE_GOLDENS=1"
    assert text == path.read_text(), f"{name} differs from its golden file (UPDATE_GOLDENS=1 to accept)"


def spec(name: str) -> api.ComputePoolSpec:
    found = pool(name, POOLS[name]).spec
    assert found is not None
    return found


def test_device_plugin_configs_golden() -> None:
    result = run([pool(name, body) for name, body in POOLS.items()], fixture_nodes())
    check_golden(
        "device-plugin-config.yaml",
        {k: result.device_plugin_documents[k] for k in sorted(result.device_plugin_documents)},
    )
    # The ConfigMap stores each document as YAML text that the device plugin parses back.
    for key, text in result.device_plugin.items():
        assert yaml.safe_load(text) == result.device_plugin_documents[key]


def test_mig_parted_document_golden() -> None:
    result = run([pool(name, body) for name, body in POOLS.items()], fixture_nodes())
    check_golden("mig-parted-config.yaml", dict(result.mig_document))
    assert nvidia.load(nvidia.dump(result.mig_document)) == result.mig_document


def test_daemonset_golden() -> None:
    gke = api.Toleration(key="nvidia.com/gpu", operator="Equal", value="present", effect="NoSchedule")
    daemonset = render.daemonset(
        "llm-training", "uid-llm-training", spec("llm-training"), AgentRendering(namespace="accelpool-system"), [gke]
    )
    check_golden("daemonset-llm-training.yaml", daemonset)
    env = {e["name"]: e for e in daemonset["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}, "the agent names itself"
    config = json.loads(env["ACCELPOOL_AGENT_CONFIG"]["value"])
    assert config["pool"] == "llm-training"
    assert config["accelerator"] == "H100-80GB"
    assert config["expectedTflops"] == {"fp32": 67, "tf32": 494.5, "fp16": 989, "bf16": 989, "fp8": 1979}
    assert config["matmul"] == {"dtype": "bf16", "minEfficiency": 0.7}
    assert config["intervalSeconds"] == 900


@pytest.mark.parametrize(
    ("name", "accelerator"), [("mi300x", "MI300X:8"), ("trn2", "Trainium2:16"), ("tpu", "TPU-v5p:4")]
)
def test_each_vendors_daemonset_golden(name: str, accelerator: str) -> None:
    """AMD, Neuron and TPU agents: the vendor's image and backend, privileged as root with the host's /dev."""
    spec_ = pool(name, {"accelerator": accelerator}).spec
    assert spec_ is not None
    daemonset = render.daemonset(name, f"uid-{name}", spec_, AgentRendering(namespace="accelpool-system"))
    check_golden(f"daemonset-{name}.yaml", daemonset)


def test_agent_is_probed_for_readiness_and_liveness() -> None:
    """A pod whose agent does not answer is taken out of scrapes (readiness) before it is restarted
    (liveness): both ask the agent's own port, readiness every 10s with a 5s timeout, 3 failures."""
    for settings in (AgentRendering(), AgentRendering(privileged=True, port=9500)):
        pod = render.daemonset("llm-training", "uid", spec("llm-training"), settings)["spec"]["template"]
        container = pod["spec"]["containers"][0]
        assert [p["name"] for p in container["ports"]] == ["metrics"]
        assert container["readinessProbe"] == {
            "httpGet": {"path": render.AGENT_READINESS_PATH, "port": "metrics"},
            "periodSeconds": 10,
            "timeoutSeconds": 5,
            "failureThreshold": 3,
        }
        assert container["livenessProbe"]["httpGet"] == {"path": render.AGENT_LIVENESS_PATH, "port": "metrics"}
    app = server.make_app(CollectorRegistry(), lambda: (True, ""))
    served = {r.resource.canonical for r in app.router.routes() if r.resource is not None}
    assert {render.AGENT_READINESS_PATH, render.AGENT_LIVENESS_PATH} <= served, "probes must ask what the agent serves"


def test_daemonset_settings() -> None:
    privileged = render.daemonset(
        "mi300x",
        "uid",
        spec("mi300x"),
        AgentRendering(privileged=True, runtime_class="nvidia", priority_class="system-node-critical", backend="fake"),
    )
    pod = privileged["spec"]["template"]["spec"]
    assert "runtimeClassName" not in pod, "the NVIDIA runtime is only for NVIDIA pools"
    assert pod["containers"][0]["securityContext"] == {"privileged": True, "readOnlyRootFilesystem": True}
    assert pod["volumes"] == [{"name": "tmp", "emptyDir": {}}, {"name": "dev", "hostPath": {"path": "/dev"}}]
    assert pod["priorityClassName"] == "system-node-critical"
    assert pod["containers"][0]["args"][-1] == "fake"
    assert {"key": "amd.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    env = [e["name"] for e in pod["containers"][0]["env"]]
    assert "NVIDIA_VISIBLE_DEVICES" not in env


def test_nodepool_golden() -> None:
    body = {
        "accelerator": "H200:8",
        "nodes": 1,
        "maxNodes": 4,
        "provisioner": {"type": "karpenter", "nodeClass": "gpu"},
    }
    nodepool = render.nodepool("h200-burst", "uid-h200-burst", pool("h200-burst", body).spec)  # type: ignore[arg-type]
    check_golden("nodepool-h200-burst.yaml", nodepool)


def test_nodepool_requirements_narrow_the_memory_variant_and_count() -> None:
    body = {
        "accelerator": {"name": "A100", "memory": "80GB", "count": 8},
        "nodes": 0,
        "maxNodes": 2,
        "provisioner": {"type": "karpenter"},
    }
    found = pool("a", body).spec
    assert found is not None
    requirements = render.nodepool("a", "u", found)["spec"]["template"]["spec"]["requirements"]
    assert {"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["a100"]} in requirements
    assert {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["7"]} in requirements
    assert {"key": "karpenter.k8s.aws/instance-gpu-memory", "operator": "Gt", "values": ["78999"]} in requirements
    assert {"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["p4de.24xlarge"]} in requirements
    neuron = pool(
        "n", {"accelerator": "Trainium2:16", "nodes": 1, "maxNodes": 3, "provisioner": {"type": "karpenter"}}
    ).spec
    assert neuron is not None
    rendered = render.nodepool("n", "u", neuron)
    assert {
        "key": "karpenter.k8s.aws/instance-accelerator-name",
        "operator": "In",
        "values": ["trainium2"],
    } in rendered["spec"]["template"]["spec"]["requirements"]
    assert rendered["spec"]["limits"] == {"aws.amazon.com/neuron": "48"}


@pytest.mark.parametrize(
    ("key", "allowed"),
    [
        ("topology.kubernetes.io/zone", True),
        ("karpenter.sh/capacity-type", True),  # the one karpenter.sh label a NodePool may require
        ("karpenter.k8s.aws/instance-family", True),
        ("kubernetes.io/hostname", False),
        ("karpenter.sh/nodepool", False),
        ("karpenter.sh/discovery", False),
        ("team.karpenter.sh/x", False),  # the rule checks the domain's suffix
        ("two words", False),
        ("example.com/" + "k" * 320, False),
    ],
)
def test_nodepool_requirements_refuse_selector_keys_karpenter_refuses(key: str, allowed: bool) -> None:
    """Karpenter's NodePool CRD rules on requirements[].key: a refused key is an error, not a NodePool."""
    body = {"accelerator": "H100:8", "nodes": 0, "maxNodes": 2, "provisioner": {"type": "karpenter"}}
    found = pool("sel", {**body, "nodeSelector": {key: "v"}}).spec
    assert found is not None
    if allowed:
        requirements = render.nodepool("sel", "u", found)["spec"]["template"]["spec"]["requirements"]
        assert requirements[-1] == {"key": key, "operator": "In", "values": ["v"]}
    else:
        with pytest.raises(ValueError, match="cannot be a Karpenter NodePool requirement"):
            render.nodepool("sel", "u", found)


def test_spec_hash_changes_with_the_rendered_object() -> None:
    settings = AgentRendering()
    first = render.daemonset("llm-training", "u", spec("llm-training"), settings)
    same = render.daemonset("llm-training", "u", spec("llm-training"), settings)
    other = render.daemonset("llm-training", "u", spec("llm-training"), AgentRendering(image="example/agent:2"))
    key = conventions.SPEC_HASH_ANNOTATION
    assert first["metadata"]["annotations"][key] == same["metadata"]["annotations"][key]
    assert first["metadata"]["annotations"][key] != other["metadata"]["annotations"][key]


DIGEST = "0123abcd"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("llm-training", "accelpool-llm-training-0123abcd"),
        ("x" * 60, conventions.config_name("x" * 60, DIGEST)),
    ],
)
def test_derived_names_fit_label_values(name: str, expected: str) -> None:
    assert conventions.config_name(name, DIGEST) == expected
    for derived in (
        conventions.config_name(name, DIGEST),
        conventions.agent_name(name),
        conventions.nodepool_name(name),
    ):
        assert conventions.is_label_value(derived), derived
    assert conventions.config_name("x" * 60, DIGEST) != conventions.config_name("x" * 59 + "y", DIGEST), (
        "hashed, not just cut"
    )
    assert conventions.config_name(name, DIGEST).endswith("-0123abcd"), "the content's digest ends every name"
