"""`ComputePool` in Python: the one spec model (what `accelpool validate` and the API server judge), and its
life on the emulated API server: apply, status, get, wait until Ready with progress, delete.

The SDK's calls block, and the emulator is served by the test's event loop: they run in a thread
(`asyncio.to_thread`) while the test plays the operator (writing statuses as it would).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

import accelpool_api as api
import accelpool_sdk as ap
from accelpool_api.validation import validate_object
from accelpool_core import textio
from accelpool_demo.apiserver import RunningApiServer, serving
from accelpool_sdk import cluster as cluster_module
from accelpool_sdk.cluster import FIELD_MANAGER, POOLS
from tests.support.cases import defaulted


def test_the_spec_is_the_apis_model_and_the_manifest_is_what_it_admits() -> None:
    pool = ap.ComputePool(
        "llm-training",
        ap.Accelerator.NVIDIA.H100(count=8, mig="3g.40gb"),
        nodes=4,
        health=ap.HealthSpec(remediation="taint", max_unavailable="50%"),
        node_selector={"topology.kubernetes.io/zone": "us-east-1a"},
    )
    assert pool.manifest() == {
        "apiVersion": "accelpool.io/v1alpha1",
        "kind": "ComputePool",
        "metadata": {"name": "llm-training"},
        "spec": {
            "accelerator": {"name": "H100", "count": 8},
            "nodes": 4,
            "mig": {"profile": "3g.40gb"},
            "nodeSelector": {"topology.kubernetes.io/zone": "us-east-1a"},
            "health": {"remediation": "taint", "maxUnavailable": "50%"},
        },
    }
    verdict = validate_object(pool.manifest())
    assert verdict.pool is not None
    assert verdict.pool.spec == pool.spec
    assert isinstance(pool.spec, api.ComputePoolSpec)
    assert isinstance(pool.accelerator, ap.Accelerator) and pool.accelerator.name == "H100-80GB"
    assert "nodes=4" in repr(pool)


def test_to_yaml_is_read_back_by_kubectl_as_it_is() -> None:
    """PyYAML writes the string "y" bare, which kubectl (go-yaml v2) reads as true: it is quoted."""
    pool = ap.ComputePool("y", "H100:8", nodes=2, node_selector={"gpu": "y", "rack": "1e1", "row": "0o10"})
    text = pool.to_yaml()
    assert "name: 'y'" in text and "gpu: 'y'" in text and "rack: '1e1'" in text and "row: '0o10'" in text
    assert textio.load_yaml(text) == [pool.manifest()]
    assert ap.ComputePool.from_yaml(text).manifest() == pool.manifest()


def test_from_yaml_reads_a_manifest_as_kubectl_does() -> None:
    text = (
        "apiVersion: accelpool.io/v1alpha1\nkind: ComputePool\nmetadata: {name: p}\n"
        "spec: {accelerator: H100:8, nodes: 1e1, dedicated: n}\n"
    )
    pool = ap.ComputePool.from_yaml(text)
    assert (pool.spec.nodes, pool.spec.dedicated) == (10, False)
    with pytest.raises(ap.InvalidSpecError, match=r'spec\.nodes in body must be of type integer: "string"'):
        ap.ComputePool.from_yaml(text.replace("nodes: 1e1", "nodes: 1:30"))
    with pytest.raises(ValueError, match="expected one ComputePool document, found 2"):
        ap.ComputePool.from_yaml(text + "---\n" + text)
    with pytest.raises(ValueError, match=r"ComputePool.from_yaml:4:\d+: spec.nodes: .inf cannot be sent as JSON"):
        ap.ComputePool.from_yaml(text.replace("nodes: 1e1", "nodes: .inf"))


def test_every_form_of_accelerator_and_sharing() -> None:
    assert ap.ComputePool("a", "H100:8").spec.accelerator == api.AcceleratorRequest(name="H100", count=8)
    assert ap.ComputePool("b", ap.NVIDIA.L4).accelerator.name == "L4"  # a factory passed uncalled (Skyward's literal)
    sliced = ap.ComputePool("c", ap.NVIDIA.L4(), sharing=ap.TimeSlicing(replicas=4))
    assert sliced.manifest()["spec"]["sharing"] == {"timeSlicing": {"replicas": 4}}
    shared = ap.ComputePool("d", ap.NVIDIA.H100(), sharing=ap.MPS(replicas=8), dedicated=False)
    assert shared.manifest()["spec"]["sharing"] == {"mps": {"replicas": 8}}
    assert shared.manifest()["spec"]["dedicated"] is False
    grown = ap.ComputePool("e", ap.NVIDIA.H100(8), nodes=1, max_nodes=4, provisioner="karpenter")
    assert grown.manifest()["spec"]["provisioner"] == {"type": "karpenter"}


@pytest.mark.parametrize(
    ("make", "spec"),
    [
        (
            lambda: ap.ComputePool("p", ap.AMD.MI300X(), sharing=ap.MPS(replicas=4)),
            {"accelerator": {"name": "MI300X"}, "nodes": 1, "sharing": {"mps": {"replicas": 4}}},
        ),
        (
            lambda: ap.ComputePool("p", ap.NVIDIA.H100(), nodes=1, max_nodes=3),
            {"accelerator": {"name": "H100"}, "nodes": 1, "maxNodes": 3},
        ),
        (lambda: ap.ComputePool("p", "H100", nodes=-1), {"accelerator": "H100", "nodes": -1}),
        (lambda: ap.ComputePool("Not_A_Name", "H100"), None),
    ],
)
def test_a_pool_the_api_would_refuse_is_refused_with_its_words(
    make: Callable[[], ap.ComputePool], spec: dict[str, Any] | None
) -> None:
    with pytest.raises(ap.InvalidSpecError) as raised:
        make()
    name = "Not_A_Name" if spec is None else "p"
    document = {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": name}}
    verdict = validate_object({**document, "spec": spec or {"accelerator": "H100", "nodes": 1}})
    assert verdict.problems
    assert raised.value.problems == verdict.problems
    assert str(raised.value).startswith(f"ComputePool({name!r}): ")
    assert all(str(problem) in str(raised.value) for problem in verdict.problems)


# ------------------------------------------------------------ on the emulated API server


@pytest.fixture
async def emulator() -> AsyncIterator[RunningApiServer]:
    async with serving() as running:
        yield running


@pytest.fixture(autouse=True)
def no_default_cluster(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Each test starts with no default cluster, and an environment that has none: no kubeconfig, not in a pod."""
    monkeypatch.setattr(cluster_module, "_default", None)
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "no-kubeconfig"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)


@pytest.fixture
async def cluster(emulator: RunningApiServer) -> AsyncIterator[ap.Cluster]:
    connected = ap.Cluster.connect(server=emulator.url)
    yield connected
    await asyncio.to_thread(connected.close)


async def write_status(emulator: RunningApiServer, name: str, **status: Any) -> None:
    """What the operator does: the pool's status through the status subresource."""
    async with emulator.client("accelpool") as client:
        await client.patch(f"{POOLS}/{name}/status", {"status": status})


def ready(generation: int, phase: str = "Ready", message: str = "") -> dict[str, Any]:
    return {
        "observedGeneration": generation,
        "phase": phase,
        "nodes": {"desired": 2, "members": 2, "ready": 2 if phase == "Ready" else 1, "summary": "2/2"},
        "capacity": {"gpus": 16 if phase == "Ready" else 8},
        "scheduling": {
            "nodeSelector": {"accelpool.io/pool": "train"},
            "tolerations": [
                {"key": "accelpool.io/pool", "operator": "Equal", "value": "train", "effect": "NoSchedule"},
                {"key": "example.com/gpu-team", "operator": "Exists", "effect": "NoSchedule"},
            ],
        },
        "conditions": [
            {"type": "Ready", "status": "True" if phase == "Ready" else "False", "reason": phase, "message": message}
        ],
    }


async def test_apply_creates_then_updates_and_status_reads_what_the_operator_wrote(
    emulator: RunningApiServer, cluster: ap.Cluster
) -> None:
    pool = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=2, cluster=cluster)
    await asyncio.to_thread(pool.apply)
    stored = emulator.get(f"{POOLS}/train")
    assert stored is not None
    assert stored["spec"] == defaulted(pool.manifest()["spec"]), "stored as sent, with the CRD's defaults"
    assert stored["metadata"]["generation"] == 1
    assert [m["manager"] for m in stored["metadata"]["managedFields"]] == [FIELD_MANAGER]
    assert await asyncio.to_thread(pool.status) is None

    await write_status(emulator, "train", **ready(1))
    status = await asyncio.to_thread(pool.status)
    assert status is not None and status.phase == "Ready" and status.capacity.gpus == 16
    fragment = pool.pod_spec_fragment(devices=8)
    assert fragment.tolerations[1] == {"key": "example.com/gpu-team", "operator": "Exists", "effect": "NoSchedule"}
    assert fragment.limits == {"nvidia.com/gpu": 8}

    bigger = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=3, cluster=cluster)
    await asyncio.to_thread(bigger.apply)
    stored = emulator.get(f"{POOLS}/train")
    assert stored is not None
    assert (stored["spec"]["nodes"], stored["metadata"]["generation"]) == (3, 2)
    assert stored["status"]["phase"] == "Ready"  # apply leaves the operator's status alone

    found = await asyncio.to_thread(ap.ComputePool.get, "train", cluster)
    assert found.spec == bigger.spec
    assert found.last_status is not None and found.last_status.phase == "Ready"

    await asyncio.to_thread(found.delete)
    assert emulator.get(f"{POOLS}/train") is None
    with pytest.raises(ap.PoolGoneError):
        await asyncio.to_thread(found.status)


async def test_wait_until_ready_reports_each_change_and_returns_the_ready_status(
    emulator: RunningApiServer, cluster: ap.Cluster
) -> None:
    pool = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=2, cluster=cluster)
    await asyncio.to_thread(pool.apply)
    seen = Seen()
    waiting = asyncio.create_task(asyncio.to_thread(pool.wait_until_ready, 30, seen))

    await seen.count(1)
    await write_status(emulator, "train", **ready(1, "Configuring", "MIG pending on 2"))
    await seen.count(2)
    await write_status(emulator, "train", **ready(1))
    status = await waiting

    assert status.phase == "Ready"
    assert [p.stage for p in seen.reports] == ["waiting", "waiting", "ready"]
    assert [p.summary for p in seen.reports] == [
        "no status yet (is the operator running?)",
        "Configuring, nodes 2/2 (1 ready), 8 devices serving: MIG pending on 2",
        "Ready, nodes 2/2 (2 ready), 16 devices serving",
    ]
    assert pool.last_status == status


async def test_a_ready_status_for_the_previous_spec_is_not_ready(
    emulator: RunningApiServer, cluster: ap.Cluster
) -> None:
    await asyncio.to_thread(ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=2, cluster=cluster).apply)
    await write_status(emulator, "train", **ready(1))
    grown = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=3, cluster=cluster)
    await asyncio.to_thread(grown.apply)
    seen = Seen()
    waiting = asyncio.create_task(asyncio.to_thread(grown.wait_until_ready, 30, seen))
    await seen.count(1)
    assert seen.reports[0].stage == "waiting" and seen.reports[0].summary.endswith("(for an earlier spec)")
    await write_status(emulator, "train", **ready(2))
    assert (await waiting).observed_generation == 2


async def test_a_failed_pool_a_deleted_one_and_a_timeout_end_the_wait(
    emulator: RunningApiServer, cluster: ap.Cluster
) -> None:
    pool = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=2, cluster=cluster)
    await asyncio.to_thread(pool.apply)
    failed = {
        **ready(1, "Failed"),
        "conditions": [{"type": "Valid", "status": "False", "reason": "Invalid", "message": "no such GPU here"}],
    }
    await write_status(emulator, "train", **failed)
    with pytest.raises(ap.PoolFailedError, match=r"ComputePool train Failed: Failed, .*: no such GPU here"):
        await asyncio.to_thread(pool.wait_until_ready, 30, False)

    await write_status(emulator, "train", **ready(1, "Configuring", "MIG pending on 2"))
    with pytest.raises(ap.PoolNotReadyError, match=r"not Ready after 1s: Configuring, .*MIG pending on 2") as late:
        await asyncio.to_thread(pool.wait_until_ready, 1, False)
    assert late.value.status is not None and late.value.status.phase == "Configuring"

    seen = Seen()
    waiting = asyncio.create_task(asyncio.to_thread(pool.wait_until_ready, 30, seen))
    await seen.count(1)
    async with emulator.client() as client:
        await client.delete(f"{POOLS}/train")
    with pytest.raises(ap.PoolGoneError, match="was deleted"):
        await waiting


async def test_connect_makes_the_default_cluster_of_pools_given_none(emulator: RunningApiServer) -> None:
    """`Cluster.connect(server=...)` then `pool.apply()`: the pool goes to that server, not to ~/.kube/config
    (there is none here), as `kubernetes.config.load_kube_config()` sets the client's default."""
    pool = ap.ComputePool("train", ap.NVIDIA.H100(8), nodes=2)  # made before connecting: the default is read per call
    connected = ap.Cluster.connect(server=emulator.url)
    try:
        assert ap.Cluster.default() is connected
        await asyncio.to_thread(pool.apply)
        assert (emulator.get(f"{POOLS}/train") or {})["spec"]["nodes"] == 2
        await write_status(emulator, "train", **ready(1))
        assert (await asyncio.to_thread(pool.status) or pytest.fail("no status")).phase == "Ready"
        assert (await asyncio.to_thread(ap.ComputePool.get, "train")).spec == pool.spec
    finally:
        await asyncio.to_thread(connected.close)
    with pytest.raises(
        RuntimeError, match=rf"Cluster\('{emulator.url}', closed\) is closed: ap.Cluster.connect\(\) again"
    ):
        await asyncio.to_thread(pool.apply)


async def test_a_later_connect_takes_over_and_a_pools_own_cluster_stays(emulator: RunningApiServer) -> None:
    async with serving() as other:
        first = ap.Cluster.connect(server=emulator.url)
        second = ap.Cluster.connect(server=other.url)
        try:
            await asyncio.to_thread(ap.ComputePool("default", "H100:8").apply)
            await asyncio.to_thread(ap.ComputePool("own", "H100:8", cluster=first).apply)
            assert (emulator.get(f"{POOLS}/default"), other.get(f"{POOLS}/own")) == (None, None)
            assert emulator.get(f"{POOLS}/own") is not None and other.get(f"{POOLS}/default") is not None
        finally:
            await asyncio.to_thread(first.close)
            await asyncio.to_thread(second.close)


async def test_without_connect_the_default_is_the_environments_cluster(
    emulator: RunningApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    kubeconfig = {
        "current-context": "demo",
        "contexts": [{"name": "demo", "context": {"cluster": "demo", "user": "demo"}}],
        "clusters": [{"name": "demo", "cluster": {"server": emulator.url}}],
        "users": [{"name": "demo", "user": {}}],
    }
    (tmp_path / "kubeconfig").write_text(yaml.safe_dump(kubeconfig))
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "kubeconfig"))
    await asyncio.to_thread(ap.ComputePool("train", "H100:8").apply)
    found = ap.Cluster.default()
    try:
        assert emulator.get(f"{POOLS}/train") is not None
        assert found.server == emulator.url and ap.Cluster.default() is found, "connected once, then kept"
    finally:
        await asyncio.to_thread(found.close)


class Seen:
    """The progress callback the test gives `wait_until_ready`: records each report, and wakes the test's loop
    (the SDK calls it from its own thread)."""

    def __init__(self) -> None:
        self.reports: list[ap.Progress] = []
        self._loop = asyncio.get_running_loop()
        self._changed = asyncio.Event()

    def __call__(self, progress: ap.Progress) -> None:
        self.reports.append(progress)
        self._loop.call_soon_threadsafe(self._changed.set)

    async def count(self, wanted: int) -> None:
        async with asyncio.timeout(20):
            while len(self.reports) < wanted:
                self._changed.clear()
                await self._changed.wait()
