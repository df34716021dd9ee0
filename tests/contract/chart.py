"""Rendering charts/accelpool with the real helm binary, for the chart's contract tests and the e2e.

`render(values_files, set_values)` runs `helm template` and returns the objects it printed;
`HelmFailed` carries helm's stderr when it refuses (values.schema.json, a template error);
`render_upgrade` renders as `helm upgrade` does, its `lookup`s answered by the demo's emulated API server.
"""

from __future__ import annotations

import asyncio
import copy
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import kmock
import yaml

from accelpool import cli
from accelpool.runtime.settings import OperatorConfig
from accelpool_demo.apiserver import ApiServer, resources

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "accelpool"
FULL_VALUES = Path(__file__).resolve().parent / "values-full.yaml"
RELEASE = "accelpool"
NAMESPACE = "accelpool-system"


class HelmFailed(Exception):
    """helm exited non-zero; the message is its stderr."""


def run_helm(helm: str, *args: str) -> str:
    completed = subprocess.run([helm, *args], capture_output=True, text=True, timeout=60, check=False)
    if completed.returncode != 0:
        raise HelmFailed(completed.stderr.strip() or completed.stdout.strip())
    return completed.stdout


def template_text(
    helm: str,
    values_files: Sequence[Path] = (),
    set_values: Sequence[str] = (),
    *,
    include_crds: bool = False,
) -> str:
    args = ["template", RELEASE, str(CHART), "--namespace", NAMESPACE]
    if include_crds:
        args.append("--include-crds")
    for path in values_files:
        args += ["--values", str(path)]
    for assignment in set_values:
        args += ["--set", assignment]
    return run_helm(helm, *args)


def render(
    helm: str,
    values_files: Sequence[Path] = (),
    set_values: Sequence[str] = (),
    *,
    include_crds: bool = False,
) -> list[dict[str, Any]]:
    text = template_text(helm, values_files, set_values, include_crds=include_crds)
    return [doc for doc in yaml.safe_load_all(text) if doc]


def find(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> list[dict[str, Any]]:
    return [o for o in objects if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]


def one(objects: list[dict[str, Any]], kind: str, name: str | None = None) -> dict[str, Any]:
    found = find(objects, kind, name)
    assert len(found) == 1, f"expected one {kind} {name or ''}, found {[o['metadata']['name'] for o in found]}"
    return found[0]


KUBERNETES_VERSION = "1.35.0"
"""The Kubernetes release the rendered objects are validated against (kubernetes-validate's schemas)."""

Objects = list[dict[str, Any]]
"""A chart's rendered objects."""


def operator_deployment(objects: Objects) -> tuple[dict[str, Any], dict[str, Any]]:
    """The operator's Deployment and its container."""
    deployment = one(objects, "Deployment")
    return deployment, deployment["spec"]["template"]["spec"]["containers"][0]


def operator_config(objects: Objects) -> OperatorConfig:
    """The operator's settings as `accelpool run` itself parses the rendered container args."""
    _, container = operator_deployment(objects)
    args = cli.build_parser().parse_args(["run", *container["args"]])
    return OperatorConfig.from_args(args)


@attrs.define
class _OfVersion(ApiServer):
    """The demo's emulated API server answering `/version` as another Kubernetes release."""

    served_version: dict[str, str] = attrs.field(factory=dict, kw_only=True)

    async def _serve_server_version(self, request: kmock.Request) -> kmock.Payload:
        return {**self.served_version, "platform": "linux/amd64"}


def _kubeconfig(path: Path, server: str) -> Path:
    """A kubeconfig for an emulated API server (no authentication)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "emulated", "cluster": {"server": server.rstrip("/")}}],
                "users": [{"name": "anonymous", "user": {}}],
                "contexts": [{"name": "emulated", "context": {"cluster": "emulated", "user": "anonymous"}}],
                "current-context": "emulated",
            }
        )
    )
    return path


def _declare(emulator: ApiServer, kinds: Objects) -> None:
    """Serve (get, list) the kinds of `kinds` the emulator does not serve already, so helm can map and look up
    every object the chart renders."""
    for obj in kinds:
        group_version, kind = obj["apiVersion"], obj["kind"]
        if resources.key_of_kind(group_version, kind) is not None:
            continue
        emulator.resources[f"{group_version}/{kind.lower()}s"] = kmock.ResourceInfo(
            kind=kind, singular=kind.lower(), namespaced="namespace" in obj["metadata"], verbs={"get", "list"}
        )


async def render_upgrade(
    helm: str, kinds: Objects, existing: list[dict[str, Any]], tmp_path: Path, set_values: Sequence[str] = ()
) -> Objects:
    """`helm template` as `helm upgrade` renders: against a cluster (here emulated) holding `existing`, the
    kinds of `kinds` declared (a render of the same chart)."""
    emulator = ApiServer()  # the demo's: it answers the version the chart asks for and serves what is declared
    _declare(emulator, kinds)
    for obj in existing:
        meta = obj["metadata"]
        emulator.store.put(f"{obj['apiVersion']}/{obj['kind'].lower()}s", {**obj, "metadata": dict(meta)})
    async with emulator, kmock.Server(emulator) as server:
        out = await _dry_run_against(helm, "template", str(server.url), tmp_path, NAMESPACE, set_values)
    lookups = [r for r in emulator if "/secrets/" in str(r.url)]
    assert lookups, "helm did not look the Secret up"
    return [doc for doc in yaml.safe_load_all(out) if doc]


async def _dry_run_against(
    helm: str, verb: str, url: str, tmp_path: Path, namespace: str, set_values: Sequence[str]
) -> str:
    """`helm VERB --dry-run=server` of the chart against the API server at `url`: its output."""
    kubeconfig = _kubeconfig(tmp_path / "kubeconfig", url)
    args = [verb, RELEASE, str(CHART), "--namespace", namespace, "--kubeconfig", str(kubeconfig)]
    args += ["--dry-run=server", "--disable-openapi-validation"]
    for assignment in set_values:
        args += ["--set", assignment]
    process = await asyncio.create_subprocess_exec(helm, *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, err.decode()
    return out.decode()


async def install_dry_run(
    helm: str,
    kinds: Objects,
    tmp_path: Path,
    *,
    version: str,
    without: Sequence[str] = (),
    namespace: str = NAMESPACE,
    set_values: Sequence[str] = (),
) -> tuple[Objects, str]:
    """`helm install --dry-run=server` against an emulated cluster of Kubernetes `version` (e.g. "1.29.4")
    serving the kinds of `kinds` but not the resources named in `without` (`group/version/plural`): the
    capabilities helm discovers there, as on a real cluster of that release. The objects it would create
    (hooks included) and the NOTES it prints."""
    major, minor = version.split(".")[:2]
    emulator = _OfVersion(served_version={"major": major, "minor": minor, "gitVersion": f"v{version}"})
    _declare(emulator, kinds)
    for key in without:
        emulator.resources.pop(key, None)
    async with emulator, kmock.Server(emulator) as server:
        text = await _dry_run_against(helm, "install", str(server.url), tmp_path, namespace, set_values)
    manifest, _, notes = text.partition("\nNOTES:\n")
    manifest = manifest.split("\nMANIFEST:\n", 1)[-1]
    hooks = text.split("\nHOOKS:\n", 1)[1].split("\nMANIFEST:\n", 1)[0] if "\nHOOKS:\n" in text else ""
    objects = [doc for part in (hooks, manifest) for doc in yaml.safe_load_all(part) if doc]
    return objects, notes


def as_installed(secret: dict[str, Any]) -> dict[str, Any]:
    """The Secret as a previous `helm install` left it (with Helm's ownership marks)."""
    installed = copy.deepcopy(secret)
    installed["metadata"].setdefault("annotations", {}).update(
        {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE}
    )
    return installed
