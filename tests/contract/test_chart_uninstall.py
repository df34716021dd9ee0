"""The chart's uninstall hook (templates/uninstall-hook.yaml) with the real helm: a pre-delete Job that runs
`accelpool uninstall` from the operator image, with its own least-privilege account, all of them Helm hooks
(created just before the Job, gone with it), and the switch that leaves pools alone. What the command does
against the real operator: tests/integration/operator/test_uninstall.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from accelpool import cli
from accelpool.cli.commands import uninstall
from tests.contract.chart import (
    CHART,
    FULL_VALUES,
    NAMESPACE,
    RELEASE,
    HelmFailed,
    Objects,
    find,
    one,
    render,
    run_helm,
)

pytestmark = pytest.mark.contract

HOOK_KINDS = ["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Job"]


def _hook_objects(objects: Objects) -> list[dict[str, Any]]:
    return [o for o in objects if (o["metadata"].get("annotations") or {}).get("helm.sh/hook") == "pre-delete"]


def test_a_pre_delete_job_runs_accelpool_uninstall_as_its_own_account(default_objects: Objects) -> None:
    hooks = _hook_objects(default_objects)
    assert sorted(o["kind"] for o in hooks) == sorted(HOOK_KINDS)
    assert {o["metadata"]["name"] for o in hooks} == {"accelpool-uninstall"}
    weights = {o["kind"]: int(o["metadata"]["annotations"]["helm.sh/hook-weight"]) for o in hooks}
    assert weights["Job"] > max(w for kind, w in weights.items() if kind != "Job"), "the account exists first"
    for hook in hooks:
        policy = hook["metadata"]["annotations"]["helm.sh/hook-delete-policy"]
        assert policy == "before-hook-creation,hook-succeeded", hook["kind"]

    job = one(default_objects, "Job", "accelpool-uninstall")
    assert job["metadata"]["namespace"] == NAMESPACE
    assert job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "accelpool-uninstall" and pod["restartPolicy"] == "Never"
    (container,) = pod["containers"]
    deployment = one(default_objects, "Deployment")
    assert container["image"] == deployment["spec"]["template"]["spec"]["containers"][0]["image"]
    assert container["command"] == ["accelpool", "uninstall"]
    args = cli.build_parser().parse_args([*container["command"][1:], *container["args"]])
    assert args.func is uninstall.run
    assert uninstall.parse_timeout(args.timeout) == 240.0
    assert uninstall.DEFAULT_TIMEOUT == "4m", "the chart's default and the command's agree"


def test_the_hook_objects_are_hooks_not_release_resources(helm: str) -> None:
    """What helm install prints: the hook objects under HOOKS (Helm runs them at uninstall only), the rest under
    MANIFEST (the objects helm uninstall deletes after the hook succeeded)."""
    output = run_helm(helm, "install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client")
    hooks_text, manifest_text = output.split("\nHOOKS:\n", 1)[1].split("\nMANIFEST:\n", 1)
    manifest_text = manifest_text.split("\nNOTES:\n", 1)[0]
    hooks = [o for o in yaml.safe_load_all(hooks_text) if o]
    manifest = [o for o in yaml.safe_load_all(manifest_text) if o]
    assert sorted(o["kind"] for o in hooks if o["metadata"]["name"] == "accelpool-uninstall") == sorted(HOOK_KINDS)
    assert not [o for o in manifest if o["metadata"]["name"] == "accelpool-uninstall"]


def test_full_values_run_it_where_and_as_the_operator_runs(full_objects: Objects) -> None:
    job = one(full_objects, "Job", "gpu-pools-uninstall")
    pod = job["spec"]["template"]["spec"]
    values = yaml.safe_load(FULL_VALUES.read_text())
    assert pod["imagePullSecrets"] == values["imagePullSecrets"]
    assert pod.get("nodeSelector") == values["operator"].get("nodeSelector")
    assert pod.get("tolerations") == values["operator"].get("tolerations")
    assert pod["containers"][0]["imagePullPolicy"] == values["image"]["pullPolicy"]


def test_release_pools_false_renders_no_hook(helm: str) -> None:
    objects = render(helm, set_values=["uninstall.releasePools=false"])
    assert _hook_objects(objects) == []
    assert not find(objects, "Job")


def test_values_from_before_the_hook_existed_get_it(helm: str) -> None:
    """`helm upgrade --reuse-values` of a release installed before `uninstall` existed."""
    objects = render(helm, set_values=["uninstall=null"])
    job = one(objects, "Job", "accelpool-uninstall")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["--timeout=4m"]


def test_the_timeout_is_a_value(helm: str) -> None:
    job = one(render(helm, set_values=["uninstall.timeout=10m"]), "Job")
    assert job["spec"]["template"]["spec"]["containers"][0]["args"] == ["--timeout=10m"]
    with pytest.raises(HelmFailed) as refused:
        render(helm, set_values=["uninstall.timeout=soon"])
    assert "/uninstall/timeout" in str(refused.value)


def test_notes_say_what_helm_uninstall_does_and_leaves(helm: str) -> None:
    def notes(*set_values: str) -> str:
        args = ["install", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=client"]
        for assignment in set_values:
            args += ["--set", assignment]
        return run_helm(helm, *args).split("\nNOTES:\n", 1)[1]

    default = notes()
    assert "`helm uninstall accelpool` first deletes every ComputePool and waits (up to 4m)" in default
    assert f"kubectl -n {NAMESPACE} logs job/accelpool-uninstall" in default
    assert "Helm keeps the CRDs, and the operator's ConfigMaps accelpool-device-plugin-config" in default
    assert "https://github.com/accelpool/accelpool/blob/main/docs/install/README.md#uninstall" in default
    kept = notes("uninstall.releasePools=false")
    assert "leaves every ComputePool on its finalizer and its" in kept
    assert "first deletes every ComputePool" not in kept
