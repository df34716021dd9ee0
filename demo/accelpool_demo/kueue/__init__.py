"""Kueue in the demo cluster: its ResourceFlavor and ClusterQueue kinds, and the platform team's ClusterQueue
`research` (`cluster-queue.yaml`), created before the operator starts. Kueue's controllers do not run: the
demo shows what accelpool writes (the flavor, the quota).

The kinds are served from Kueue's published CRDs (kubernetes-sigs/kueue config/components/crd/bases) when
they are found (`published_dir`): the directory `$ACCELPOOL_DEMO_KUEUE_CRDS` names, else `../shared/crds/`
beside the source tree the demo runs from. They are Kueue's files and are read where they are, never
copied here. Without them (an installed demo, a checkout alone, or `ACCELPOOL_DEMO_KUEUE_CRDS=` set
empty), the demo serves CRDs of its own with only the fields accelpool uses (`accelpool_demo.kueue.schema`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

from accelpool_core.kube import KubeClient
from accelpool_demo.kueue import schema

HERE = Path(__file__).resolve().parent
FILES = {"ResourceFlavor": "kueue.x-k8s.io_resourceflavors.yaml", "ClusterQueue": "kueue.x-k8s.io_clusterqueues.yaml"}
"""Kueue's published CRD of each kind, by its file name in config/components/crd/bases."""
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
CLUSTER_QUEUE = "research"
PUBLISHED_ENV = "ACCELPOOL_DEMO_KUEUE_CRDS"
"""Names the directory of Kueue's published CRD files; set empty, the demo serves its own CRDs."""
_SOURCE_TREE = HERE.parents[2] if (HERE.parents[1] / "pyproject.toml").exists() else None
"""The repository the demo runs from (its distribution's pyproject.toml sits next to the package), if any."""
SHARED_CRDS = _SOURCE_TREE.parent / "shared" / "crds" if _SOURCE_TREE is not None else None
"""Where the published CRDs of other projects are kept beside the repository (`../shared/crds/`)."""


class PublishedCrdsError(Exception):
    """`$ACCELPOOL_DEMO_KUEUE_CRDS` names a directory without Kueue's CRDs."""


def published_dir(environ: Mapping[str, str] = os.environ) -> Path | None:
    """The directory the published CRDs are read from, or None (the demo's own are served): the one
    `$ACCELPOOL_DEMO_KUEUE_CRDS` names (None when it is set empty; `PublishedCrdsError` when a file is
    missing there), else `../shared/crds/` beside the source tree when it holds both files."""
    named = environ.get(PUBLISHED_ENV)
    if named is not None:
        if not named:
            return None
        missing = [name for name in FILES.values() if not (Path(named) / name).is_file()]
        if missing:
            raise PublishedCrdsError(f"{PUBLISHED_ENV}={named}: no {', '.join(missing)} there")
        return Path(named)
    if SHARED_CRDS is not None and all((SHARED_CRDS / name).is_file() for name in FILES.values()):
        return SHARED_CRDS
    return None


def published_crd(kind: str, directory: Path) -> dict[str, Any]:
    """Kueue's published CRD of `kind`, read from `directory`."""
    loaded: dict[str, Any] = yaml.safe_load((directory / FILES[kind]).read_text())
    return loaded


def custom_resource_definitions(environ: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """The CRDs the demo serves Kueue's kinds with: the published ones when found, else its own."""
    directory = published_dir(environ)
    if directory is None:
        return [schema.custom_resource_definition(kind) for kind in FILES]
    return [published_crd(kind, directory) for kind in FILES]


async def install(client: KubeClient) -> None:
    """Kueue's CRDs, then the demo's ResourceFlavor and ClusterQueue."""
    for crd in custom_resource_definitions():
        await client.create(CRDS, crd)
    for obj in yaml.safe_load_all((HERE / "cluster-queue.yaml").read_text()):
        group_version = obj["apiVersion"]
        await client.create(f"/apis/{group_version}/{PLURALS[obj['kind']]}", obj)
