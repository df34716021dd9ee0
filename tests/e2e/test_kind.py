"""accelpool on a real Kubernetes (kind): install the chart, apply examples/, see llm-training Ready,
see examples/invalid/ refused at admission, break a GPU and see its node quarantined, delete the
pools and see nothing left behind.

The workers are labelled like GPU Feature Discovery labels 8-GPU H100 nodes (tests/e2e/kind-config.yaml)
and advertise `nvidia.com/gpu: 8`; the operator runs the agents with the fake backend. A GPU
fault comes from the real agent too: a second agent pod on a member node, fake backend with
`--fault 0:xid=79`, reports AcceleratorHealthy=False through the chart's agent ServiceAccount.
The tests run in order and share one installation.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.conftest import NAMESPACE, RELEASE, Cluster
from tests.support.environment import ROOT
from tests.unit.api.test_examples import expected_rejection

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

CHART = ROOT / "charts" / "accelpool"
POOL = "llm-training"
GPU_WORKERS = "nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"
FAULT_POD = "e2e-gpu-fault"


def _example_files() -> list[Path]:
    """Every ComputePool a user could apply from examples/ (not the invalid ones, not the demo fleet)."""
    files = sorted((ROOT / "examples").glob("*.yaml")) + sorted((ROOT / "examples" / "karpenter").glob("*.yaml"))
    return [f for f in files if any(d and d.get("kind") == "ComputePool" for d in yaml.safe_load_all(f.read_text()))]


def _pool_names() -> list[str]:
    return [d["metadata"]["name"] for f in _example_files() for d in yaml.safe_load_all(f.read_text()) if d]


@pytest.fixture(scope="module")
def installed(cluster: Cluster, images: tuple[str, str]) -> Iterator[Cluster]:
    operator_image, agent_image = images
    for node in cluster.kubectl("get", "nodes", "-l", GPU_WORKERS, "-o", "name").split():
        resources = {"nvidia.com/gpu": "8"}
        patch = json.dumps({"status": {"capacity": resources, "allocatable": resources}})
        cluster.kubectl("patch", node, "--subresource=status", "--type=merge", "-p", patch)
    repository, _, tag = operator_image.rpartition(":")
    agent_repository, _, agent_tag = agent_image.rpartition(":")
    cluster.helm(
        "upgrade", "--install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--create-namespace",
        "--wait", "--timeout", "5m",
        "--set", f"image.repository={repository},image.tag={tag},image.pullPolicy=Never",
        "--set", f"agent.image.repository={agent_repository},agent.image.tag={agent_tag}",
        "--set", "agent.image.pullPolicy=Never,agent.backend=fake,operator.logLevel=verbose",
        "--set-string", "agent.runtimeClassName=",
    )  # fmt: skip
    try:
        yield cluster
    finally:
        cluster.kubectl("delete", "pod", "-n", NAMESPACE, FAULT_POD, "--ignore-not-found", "--wait=false", check=False)
        for name in _pool_names():
            cluster.kubectl("delete", "computepool", name, "--ignore-not-found", "--timeout=120s", check=False)
        cluster.run("helm", "uninstall", RELEASE, "--namespace", NAMESPACE, "--wait", timeout=300, check=False)


def _stored_pool(cluster: Cluster, name: str) -> dict[str, Any]:
    pool: dict[str, Any] = cluster.get("computepool", name)
    return pool


def _taints(node: dict[str, Any]) -> list[dict[str, Any]]:
    taints: list[dict[str, Any]] = node["spec"].get("taints") or []
    return taints


def test_the_chart_installs_and_its_helm_test_passes(installed: Cluster) -> None:
    deployment = installed.get("deployment", "-n", NAMESPACE, f"{RELEASE}-operator")
    assert deployment["status"].get("readyReplicas") == deployment["spec"]["replicas"] == 2  # a leader, a standby
    output = installed.helm("test", RELEASE, "--namespace", NAMESPACE, "--logs", timeout=300)
    assert "Succeeded" in output and "accelpool_ samples" in output
    crd = installed.get("crd", "computepools.accelpool.io")
    assert crd["spec"]["names"]["shortNames"] == ["cpool"]


def test_every_example_is_admitted_and_llm_training_becomes_ready(installed: Cluster) -> None:
    for path in _example_files():
        installed.kubectl("apply", "-f", str(path))
    ready = installed.until(
        f"{POOL} Ready",
        lambda: (
            _stored_pool(installed, POOL)
            if (_stored_pool(installed, POOL).get("status") or {}).get("phase") == "Ready"
            else None
        ),
        timeout=300,
    )
    status = ready["status"]
    assert status["nodes"]["members"] == status["nodes"]["ready"] == 2
    assert status["capacity"]["gpus"] == 16
    members = sorted(m["node"] for m in status["members"])
    for name in members:
        node = installed.get("node", name)
        assert node["metadata"]["labels"]["accelpool.io/pool"] == POOL
        assert {"key": "accelpool.io/pool", "value": POOL, "effect": "NoSchedule"} in _taints(node)
        healthy = [c for c in node["status"]["conditions"] if c["type"] == "AcceleratorHealthy"]
        assert healthy and healthy[0]["status"] == "True", healthy
    pods = installed.get("pods", "-n", NAMESPACE, "-l", f"accelpool.io/pool={POOL}")["items"]
    assert sorted(p["spec"]["nodeName"] for p in pods if p["status"]["phase"] == "Running") == members
    device_plugin = installed.get("configmap", "-n", NAMESPACE, "accelpool-device-plugin-config")
    assert f"accelpool-{POOL}" in device_plugin["data"] and "default" in device_plugin["data"]
    for name in _pool_names():
        status = _stored_pool(installed, name).get("status") or {}
        assert status.get("phase"), f"{name} has no phase: the operator did not handle it"


def test_the_api_server_refuses_what_accelpool_validate_refuses(installed: Cluster) -> None:
    """examples/invalid/ with `kubectl apply --dry-run=server`: strict decoding, the CRD's schema and
    CEL, or the operator's admission webhook refuse each, with what its `# expect:` comment quotes
    (which `accelpool validate` prints too: tests/unit/api/test_examples.py)."""
    for path in sorted((ROOT / "examples" / "invalid").glob("*.yaml")):
        refused = subprocess.run(
            ["kubectl", "apply", "--dry-run=server", "-f", str(path)],
            capture_output=True, text=True, env=installed.env(), timeout=60, check=False,
        )  # fmt: skip
        assert refused.returncode != 0, f"{path.name} was admitted"
        said = "\n".join(line.rstrip() for line in refused.stderr.splitlines())
        assert expected_rejection(path) in said, (path.name, refused.stderr)


def test_a_gpu_fault_quarantines_its_node(installed: Cluster, images: tuple[str, str]) -> None:
    _, agent_image = images
    victim = sorted(m["node"] for m in _stored_pool(installed, POOL)["status"]["members"])[0]
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": FAULT_POD, "namespace": NAMESPACE},
        "spec": {
            "nodeName": victim,
            "serviceAccountName": f"{RELEASE}-agent",
            "restartPolicy": "Never",
            "tolerations": [{"operator": "Exists"}],
            "containers": [
                {
                    "name": "agent",
                    "image": agent_image,
                    "imagePullPolicy": "Never",
                    "command": ["accelpool-agent"],
                    "args": [
                        "run",
                        "--backend=fake",
                        "--fake-gpus=H100:8",
                        "--fault=0:xid=79",
                        f"--node-name={victim}",
                    ],
                }
            ],
        },
    }
    installed.kubectl("apply", "-f", "-", stdin=json.dumps(pod))

    def quarantined() -> dict[str, Any] | None:
        node: dict[str, Any] = installed.get("node", victim)
        return node if any(t["key"] == "accelpool.io/quarantined" for t in _taints(node)) else None

    node = installed.until(f"{victim} tainted accelpool.io/quarantined", quarantined, timeout=180)
    condition = next(c for c in node["status"]["conditions"] if c["type"] == "AcceleratorHealthy")
    assert condition["status"] == "False" and "Xid" in condition["reason"], condition

    def reported() -> dict[str, Any] | None:
        status = _stored_pool(installed, POOL).get("status") or {}
        member = next((m for m in status.get("members") or [] if m["node"] == victim), None)
        return status if status["nodes"]["quarantined"] >= 1 and member and member["health"] != "Healthy" else None

    status = installed.until(f"{POOL}'s status names {victim}", reported, timeout=120)
    healthy = next(c for c in status["conditions"] if c["type"] == "Healthy")
    assert victim in healthy["message"], healthy
    events = installed.get("events", "-A", "--field-selector", f"involvedObject.name={victim}")["items"]
    assert any(
        e.get("source", {}).get("component") == "accelpool" or e.get("reportingComponent") == "accelpool"
        for e in events
    )


def test_deleting_the_pools_leaves_nothing_behind(installed: Cluster) -> None:
    installed.kubectl("delete", "pod", "-n", NAMESPACE, FAULT_POD, "--ignore-not-found", "--timeout=60s")
    for name in _pool_names():
        installed.kubectl("delete", "computepool", name, "--ignore-not-found", "--timeout=180s", timeout=240)
    installed.until("every ComputePool gone", lambda: not installed.get("computepools")["items"] or None, timeout=180)

    def clean() -> bool:
        for node in installed.get("nodes")["items"]:
            labels = node["metadata"].get("labels") or {}
            if any(k.startswith("accelpool.io/") for k in labels):
                return False
            if any(str(v).startswith("accelpool-") for k, v in labels.items() if k.startswith("nvidia.com/")):
                return False
            if any(t["key"].startswith("accelpool.io/") for t in _taints(node)) or node["spec"].get("unschedulable"):
                return False
        daemonsets = installed.get("daemonsets", "-A", "-l", "app.kubernetes.io/managed-by=accelpool")["items"]
        if daemonsets:
            return False
        device_plugin = installed.get("configmap", "-n", NAMESPACE, "accelpool-device-plugin-config")
        return set(device_plugin.get("data") or {}) <= {"default"}

    installed.until("no label, taint, DaemonSet or config key of accelpool left", lambda: clean() or None, timeout=180)
