"""Kueue in the demo cluster: its published CRDs (ResourceFlavor, ClusterQueue; kubernetes-sigs/kueue
config/components/crd/bases at ff69552e79ad, Apache-2.0, unchanged copies of ../shared/crds/) and the
platform team's ClusterQueue `research` (`cluster-queue.yaml`), created before the operator starts.
Kueue's controllers do not run: the demo shows what accelpool writes (the flavor, the quota).
"""

from __future__ import annotations

from pathlib import Path

import yaml

from accelpool_core.kube import KubeClient

HERE = Path(__file__).parent
CRD_FILES = ("kueue.x-k8s.io_resourceflavors.yaml", "kueue.x-k8s.io_clusterqueues.yaml")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
PLURALS = {"ResourceFlavor": "resourceflavors", "ClusterQueue": "clusterqueues"}
CLUSTER_QUEUE = "research"


async def install(client: KubeClient) -> None:
    """Kueue's CRDs, then the demo's ResourceFlavor and ClusterQueue."""
    for name in CRD_FILES:
        await client.create(CRDS, yaml.safe_load((HERE / name).read_text()))
    for obj in yaml.safe_load_all((HERE / "cluster-queue.yaml").read_text()):
        group_version = obj["apiVersion"]
        await client.create(f"/apis/{group_version}/{PLURALS[obj['kind']]}", obj)
