"""The emulated API server serves a CRD once it is stored, as kube-apiserver does: Kueue's CRDs installed,
their kinds are listed, created, patched and refused by schema and CEL. Defaults, pruning and CEL are
checked with Kueue's published CRDs (../shared/crds/: skipped without them, failed under REQUIRE_TOOLS=1);
the rest with the CRDs the demo serves (the published ones, else the demo's own minimal ones)."""

from __future__ import annotations

from typing import Any

import pytest

from accelpool.runtime.controller.apiserver import POOLS as POOLS_PATH
from accelpool_api import crd
from accelpool_core.kube import ApiError, KubeClient, NotFoundError
from accelpool_demo.apiserver import RunningApiServer
from tests.support import kueue
from tests.support.builders import pool_body

FLAVOR = {"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "ResourceFlavor", "metadata": {"name": "h100"}}


async def test_a_kind_is_served_only_while_its_crd_is_stored(api: RunningApiServer, client: KubeClient) -> None:
    with pytest.raises(NotFoundError):
        await client.list(kueue.FLAVORS)
    kueue.install_as_the_demo(api.server)
    assert await client.list(kueue.FLAVORS) == []
    discovery = await client.get("/apis/kueue.x-k8s.io/v1beta2")
    served = {r["name"]: r for r in discovery["resources"]}
    assert served["resourceflavors"]["kind"] == "ResourceFlavor"
    assert set(served["resourceflavors"]["shortNames"]) == {"flavor", "flavors", "rf"}
    assert "clusterqueues/status" in served
    await client.delete(f"{kueue.CRDS_PATH}/resourceflavors.kueue.x-k8s.io")
    with pytest.raises(NotFoundError):
        await client.list(kueue.FLAVORS)


async def test_objects_are_defaulted_pruned_and_judged_by_schema_and_cel(
    api: RunningApiServer, client: KubeClient
) -> None:
    kueue.install(api.server)
    queue = kueue.cluster_queue("team", [kueue.CPU_AND_MEMORY])
    stored = await client.create(kueue.QUEUES, {**queue, "status": {"pendingWorkloads": 3}, "extra": 1})
    assert stored["spec"]["queueingStrategy"] == "BestEffortFIFO", "the schema's default"
    assert "extra" not in stored, "an unknown field is pruned"
    assert "status" not in stored, "the status subresource: a create drops the status"
    tolerations = [{"key": "a", "operator": "Exists", "value": "x", "effect": "NoSchedule"}]
    with pytest.raises(ApiError) as refused:
        await client.create(kueue.FLAVORS, {**FLAVOR, "spec": {"tolerations": tolerations}})
    assert refused.value.status == 422
    assert "a value must be empty when 'operator' is 'Exists'" in str(refused.value)
    with pytest.raises(ApiError) as refused:
        await client.create(kueue.FLAVORS, {**FLAVOR, "spec": {"nodeLabels": {str(i): "v" for i in range(9)}}})
    assert "spec.nodeLabels: Too many: 9: must have at most 8 items" in str(refused.value)


async def test_a_stale_resource_version_is_a_conflict_and_status_is_apart(
    api: RunningApiServer, client: KubeClient
) -> None:
    kueue.install_as_the_demo(api.server)
    stored = await client.create(kueue.QUEUES, kueue.cluster_queue("team", [kueue.CPU_AND_MEMORY]))
    path = f"{kueue.QUEUES}/team"
    status = await client.patch(f"{path}/status", {"status": {"pendingWorkloads": 2}, "spec": {"cohortName": "x"}})
    assert status["status"] == {"pendingWorkloads": 2}
    assert "cohortName" not in status["spec"], "a write through status changes only the status"
    changed = await client.patch(path, {"spec": {"stopPolicy": "Hold"}})
    assert changed["metadata"]["generation"] == 2
    stale = {"metadata": {"resourceVersion": stored["metadata"]["resourceVersion"]}, "spec": {"stopPolicy": "None"}}
    with pytest.raises(ApiError) as refused:
        await client.patch(path, stale)
    assert refused.value.status == 409


async def test_computepools_are_judged_by_accelpools_crd_stored_or_not(
    api: RunningApiServer, client: KubeClient
) -> None:
    """The emulator serves ComputePools natively and judges them by accelpool's CRD in any case; storing the
    CRD beside Kueue's (as the demo does) changes nothing: one time-slicing replica is the schema's refusal, an
    interval over 168h the CEL rule's."""

    async def refusal(spec: dict[str, Any]) -> str:
        with pytest.raises(ApiError) as refused:
            await client.create(POOLS_PATH, pool_body("case", spec))
        assert refused.value.status == 422
        return refused.value.message

    too_few = {"accelerator": "H100", "sharing": {"timeSlicing": {"replicas": 1}}}
    too_long = {"accelerator": "H100", "health": {"interval": "200h"}}
    before = [await refusal(too_few), await refusal(too_long)]
    await client.create(kueue.CRDS_PATH, crd.custom_resource_definition())
    kueue.install_as_the_demo(api.server)
    assert [await refusal(too_few), await refusal(too_long)] == before
    assert "spec.sharing.timeSlicing.replicas" in before[0] and "spec.health.interval" in before[1]
