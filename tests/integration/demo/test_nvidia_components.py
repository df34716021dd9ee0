"""The demo's NVIDIA components follow the API as the real ones do, with watches beside their periodic steps.

`accelpool_demo.simulators.NvidiaComponents` against the emulated API server, stepped by the test on a clock
it sets (no operator):

- the kubelet projects a ConfigMap's update into the pods the sync delay after it was written (it watches
  ConfigMaps), not after the components' next step: a node labelled with an entry that delay after it was
  written finds it;
- the MIG manager's informer is handed every value of `nvidia.com/mig.config`: a label taken off and put back
  between two steps (accelpool's retry of a failed config) wakes it, and it runs the config again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import yaml

from accelpool_api import conventions
from accelpool_demo import cluster, nvidia
from accelpool_demo.apiserver import serving
from accelpool_demo.simulators import NvidiaComponents
from tests.support.waiting import HANG_GUARD, eventually

pytestmark = [pytest.mark.integration, HANG_GUARD]

NAMESPACE = "gpu"
FLEET = """
kind: DemoCluster
groups:
  - {prefix: h100, count: 1, accelerator: H100-80GB, gpus: 8, labels: gfd, instanceType: p5.48xlarge}
"""
NODE = "/api/v1/nodes/h100-1"
MIG = conventions.MIG_CONFIG_LABEL
STATE = conventions.MIG_CONFIG_STATE_LABEL
ENTRY = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 2}}]
SYNC = 30.0


def config_map(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": NAMESPACE}, "data": data}


async def test_configs_are_projected_from_their_write_and_every_label_value_wakes_the_mig_manager() -> None:
    now = [100.0]
    clock: Callable[[], float] = lambda: now[0]  # noqa: E731
    async with serving() as api:
        api.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        (node,) = cluster.nodes(cluster.parse(FLEET))
        api.put("/api/v1/nodes", node)
        client = api.client()
        simulation = nvidia.Simulation(nvidia.Installation(propagation_seconds=SYNC))
        components = NvidiaComponents(client, NAMESPACE, "dp", "mig", simulation, clock=clock)
        try:
            async with components.watching():
                configmaps = f"/api/v1/namespaces/{NAMESPACE}/configmaps"
                await client.create(configmaps, config_map("dp", {"default": "version: v1\n"}))
                document = {"version": "v1", "mig-configs": {"split": ENTRY}}
                await client.create(configmaps, config_map("mig", {"config.yaml": yaml.safe_dump(document)}))

                async def seen() -> bool:
                    return simulation.mig.mounted(now[0] + SYNC)[0] == 1

                await eventually(seen, "the watch brings the mig-parted ConfigMap")
                now[0] += SYNC
                await components.step()  # the pods start: the kubelet projected what was written SYNC ago
                await client.patch(NODE, {"metadata": {"labels": {MIG: "split"}}})
                await components.step()
                labels = (await client.get(NODE))["metadata"]["labels"]
                assert labels[STATE] == "success", "the entry was there: written a sync delay ago"

                # accelpool's retry of a config: the label off, then on again with `pending`, between two steps
                await client.patch(NODE, {"metadata": {"labels": {MIG: None}}})
                await client.patch(NODE, {"metadata": {"labels": {MIG: "split", STATE: "pending"}}})

                async def applied_again() -> bool:
                    await components.step()
                    labels = (await client.get(NODE))["metadata"]["labels"]
                    return bool(labels[STATE] == "success")

                await eventually(applied_again, "the MIG manager runs split again and reports success")
        finally:
            await client.close()
