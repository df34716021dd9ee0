"""`accelpool plan` against a live API (the emulator): the cluster's nodes, pools and ConfigMaps are read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from accelpool import cli
from accelpool_api import conventions
from tests.support.builders import node_body

from .conftest import NAMESPACE, Cluster, seed


async def test_plan_reads_nodes_pools_and_configmaps_from_the_cluster(
    cluster: Cluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    seed(
        cluster,
        node_body("h100-1", labels={conventions.POOL_LABEL: "existing"}),
        node_body("h100-2", labels={conventions.POOL_LABEL: "gone"}),
        node_body("h100-3"),
    )
    await cluster.apply_pool("existing", {"accelerator": "H100:8", "nodes": 1})
    await cluster.client.create(
        f"/api/v1/namespaces/{NAMESPACE}/configmaps",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "custom-dp", "namespace": NAMESPACE},
            "data": {"their-config": "version: v1\n"},
        },
    )
    pools = tmp_path / "pools.yaml"
    pools.write_text(
        "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\n"
        "metadata: {name: new}\nspec: {accelerator: H100, nodes: 2}\n"
    )
    argv = [
        "plan", "-f", str(pools), "--server", cluster.server, "--namespace", NAMESPACE,
        "--device-plugin-configmap", "custom-dp", "-o", "json", "--now", "2026-11-02T12:00:00Z",
    ]  # fmt: skip
    code = await asyncio.get_running_loop().run_in_executor(None, cli.main, argv)
    assert code == 0
    document = json.loads(capsys.readouterr().out)
    members = {p["name"]: p["members"] for p in document["pools"]}
    assert members == {"existing": ["h100-1"], "new": ["h100-2", "h100-3"]}, (
        "the orphan of 'gone' is released, then free"
    )
    assert document["nodePatches"]["h100-2"]["labels"][conventions.POOL_LABEL] == "new"
    keys = set(document["devicePluginConfig"]) - {"default"}
    assert sorted(k.rsplit("-", 1)[0] for k in keys) == ["accelpool-existing", "accelpool-new"]
    assert "their-config" not in document["devicePluginConfig"], "keys accelpool does not own are not its plan"
    requests = [r for r in cluster.emulator if r.headers.get("User-Agent") == "accelpool"]
    assert requests, "the plan read the cluster with accelpool's client"
    assert [r for r in requests if r.method.value != "GET"] == [], "planning writes nothing"
