"""The chart on the Kubernetes releases it claims (Chart.yaml `kubeVersion: >=1.29.0-0`), with the real helm.

The agents' NodeRestriction is an `admissionregistration.k8s.io/v1` ValidatingAdmissionPolicy, GA in 1.30:
on 1.29 the chart leaves it out (no v1beta1 fallback: off by default there, and 1.29's pod-bound tokens
name no node, so the policy would deny every agent) and NOTES says loudly that it is not enforced.
`helm template --kube-version` decides offline; `helm install` decides from what the cluster serves,
here an emulated API server answering as 1.29 (without the v1 policy API) or as 1.30.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from accelpool_demo.apiserver import resources
from tests.contract.chart import (
    CHART,
    NAMESPACE,
    RELEASE,
    HelmFailed,
    Objects,
    find,
    install_dry_run,
    run_helm,
)

pytestmark = pytest.mark.contract

POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
POLICY_API = (resources.ADMISSION_POLICIES, resources.ADMISSION_POLICY_BINDINGS)
NOT_ENFORCED = "WARNING: the agents' NodeRestriction is NOT enforced"
ENFORCED = "ValidatingAdmissionPolicy accelpool-agent-node-restriction lets each agent change only its own"


def _policy_kinds(objects: Objects) -> set[str]:
    return {o["kind"] for o in objects if o["kind"] in POLICY_KINDS}


def _template(helm: str, *args: str) -> Objects:
    text = run_helm(helm, "template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    return [doc for doc in yaml.safe_load_all(text) if doc]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--kube-version", "1.29.0"], set()),
        # 1.29 may serve the v1beta1 policy API (behind --runtime-config): the chart still leaves it out.
        (
            [
                "--kube-version",
                "1.29.0",
                "--api-versions",
                "admissionregistration.k8s.io/v1beta1/ValidatingAdmissionPolicy",
            ],
            set(),
        ),
        (["--kube-version", "1.30.0"], POLICY_KINDS),
        (
            ["--kube-version", "1.29.0", "--api-versions", "admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy"],
            POLICY_KINDS,
        ),
        ([], POLICY_KINDS),  # helm's own default Kubernetes version is recent
    ],
    ids=["1.29", "1.29-v1beta1", "1.30", "v1-served", "helm-default"],
)
def test_the_node_restriction_is_rendered_only_where_the_v1_api_exists(
    helm: str, args: list[str], expected: set[str]
) -> None:
    assert _policy_kinds(_template(helm, *args)) == expected


def test_older_kubernetes_is_refused_by_the_charts_kube_version(helm: str) -> None:
    with pytest.raises(HelmFailed) as refused:
        _template(helm, "--kube-version", "1.28.9")
    assert ">=1.29.0-0" in str(refused.value), refused.value


async def test_on_a_1_29_cluster_the_notes_say_the_policy_is_not_enforced(
    helm: str, default_objects: Objects, tmp_path: Path
) -> None:
    objects, notes = await install_dry_run(helm, default_objects, tmp_path, version="1.29.4", without=POLICY_API)
    assert _policy_kinds(objects) == set()
    assert find(objects, "Deployment"), "the rest of the chart installs"
    assert NOT_ENFORCED in notes
    assert "This cluster (Kubernetes v1.29.4) does not serve" in notes
    assert "their ServiceAccount may patch any Node" in notes
    assert ENFORCED not in notes


async def test_on_a_1_30_cluster_the_policy_is_installed(helm: str, default_objects: Objects, tmp_path: Path) -> None:
    objects, notes = await install_dry_run(helm, default_objects, tmp_path, version="1.30.2")
    assert _policy_kinds(objects) == POLICY_KINDS
    assert ENFORCED in notes
    assert NOT_ENFORCED not in notes


async def test_turned_off_the_notes_say_rbac_alone_limits_the_agents(
    helm: str, default_objects: Objects, tmp_path: Path
) -> None:
    objects, notes = await install_dry_run(
        helm,
        default_objects,
        tmp_path,
        version="1.29.4",
        without=POLICY_API,
        set_values=["agent.nodeRestriction.enabled=false"],
    )
    assert _policy_kinds(objects) == set()
    assert "Agents' NodeRestriction: off (agent.nodeRestriction.enabled=false)" in notes
    assert NOT_ENFORCED not in notes


# ---- NOTES: where the NVIDIA ConfigMaps go.


@pytest.mark.parametrize(
    ("namespace", "set_values", "warned"),
    [
        ("accelpool-system", [], True),
        ("gpu-operator", [], False),  # installed beside the GPU Operator: nothing to set
        ("accelpool-system", ["nvidia.namespace=gpu-operator"], False),
    ],
    ids=["elsewhere", "in-gpu-operator", "nvidia-namespace-set"],
)
def test_notes_ask_for_nvidia_namespace_only_when_it_is_needed(
    helm: str, namespace: str, set_values: list[str], warned: bool
) -> None:
    args = ["install", RELEASE, str(CHART), "--namespace", namespace, "--dry-run=client"]
    for assignment in set_values:
        args += ["--set", assignment]
    notes = run_helm(helm, *args).split("NOTES:", 1)[1]
    assert ("nvidia.namespace is unset" in notes) == warned
    expected = "gpu-operator" if (set_values or namespace == "gpu-operator") else namespace
    assert f"Point NVIDIA's components at the configs the operator writes, in namespace {expected}" in notes
