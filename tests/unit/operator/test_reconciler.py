"""The controller's loop against an in-memory API (no network): writes, overlays, conflicts, backoff, timers, statuses.

Time-based behaviour runs on looptime's fake clock: a 10-minute hold-down or a backoff ladder
passes in milliseconds.
"""

from __future__ import annotations

import asyncio
import builtins
import copy
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelpool import api, conventions
from accelpool.controller import Controller
from accelpool.inputs import PoolRecord
from accelpool.metrics import OperatorMetrics
from accelpool.nodes import NodeView
from accelpool.settings import OperatorConfig
from accelpool_core.kube import ApiError, ConflictError, NotFoundError

from .conftest import member, node_body

START = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


class FakeApi:
    """Enough of the API server for the controller: objects by path, resourceVersions, injected failures."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {}
        self.writes: list[tuple[str, str]] = []
        self.reads: list[str] = []
        self.fail: dict[str, list[Exception]] = {}
        self._version = 100

    def _bump(self, obj: dict[str, Any]) -> None:
        self._version += 1
        obj.setdefault("metadata", {})["resourceVersion"] = str(self._version)

    def _maybe_fail(self, verb: str, path: str) -> None:
        for prefix, errors in self.fail.items():
            if f"{verb} {path}".startswith(prefix) and errors:
                raise errors.pop(0)

    async def get(self, path: str) -> dict[str, Any]:
        self.reads.append(path)
        if path not in self.objects:
            raise NotFoundError(404, "NotFound", path)
        return copy.deepcopy(self.objects[path])

    async def get_or_none(self, path: str) -> dict[str, Any] | None:
        try:
            return await self.get(path)
        except NotFoundError:
            return None

    async def list(
        self, path: str, *, label_selector: str | None = None, field_selector: str | None = None
    ) -> list[dict[str, Any]]:
        self.reads.append(path)
        if path.startswith("/apis/karpenter.sh"):
            raise NotFoundError(404, "NotFound", path)
        return [copy.deepcopy(o) for p, o in self.objects.items() if p.startswith(path + "/")]

    async def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self._maybe_fail("POST", path)
        self.writes.append(("POST", path))
        target = f"{path}/{body['metadata']['name']}"
        if target in self.objects:
            raise ConflictError(409, "AlreadyExists", target)
        obj = copy.deepcopy(body)
        self._bump(obj)
        self.objects[target] = obj
        return copy.deepcopy(obj)

    async def patch(self, path: str, body: Any, *, patch_type: str = "merge") -> dict[str, Any]:
        self._maybe_fail("PATCH", path)
        self.writes.append(("PATCH", path))
        if patch_type == "json":  # the status subresource of a stored object: test and remove ops only
            obj = self.objects[path.removesuffix("/status")]
            for op in body:
                parent, _, last = op["path"].rpartition("/")
                container: Any = obj
                for part in parent.strip("/").split("/"):
                    container = container[int(part)] if isinstance(container, list) else container[part]
                if op["op"] == "test" and container[last if isinstance(container, dict) else int(last)] != op["value"]:
                    raise ApiError(422, "Invalid", "test failed")
                if op["op"] == "remove":
                    del container[int(last) if isinstance(container, list) else last]
            self._bump(obj)
            return copy.deepcopy(obj)
        obj = self.objects[path.removesuffix("/status")]  # a merge patch of a status carries only `status`
        sent = (body.get("metadata") or {}).get("resourceVersion")
        if sent is not None and sent != obj["metadata"].get("resourceVersion"):
            raise ConflictError(409, "Conflict", path)
        merge(obj, body)
        self._bump(obj)
        return copy.deepcopy(obj)

    async def replace(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        self.writes.append(("PUT", path))
        obj = copy.deepcopy(body)
        self._bump(obj)
        self.objects[path] = obj
        return copy.deepcopy(obj)

    async def apply(self, path: str, body: dict[str, Any], *, field_manager: str, force: bool = True) -> dict[str, Any]:
        """Server-side apply by the one manager that owns these objects: the applied object replaces it."""
        self._maybe_fail("PATCH", path)
        self.writes.append(("APPLY", path))
        assert field_manager and "resourceVersion" not in body.get("metadata", {})
        obj = copy.deepcopy(body)
        self._bump(obj)
        self.objects[path] = obj
        return copy.deepcopy(obj)

    async def delete(self, path: str) -> None:
        self.writes.append(("DELETE", path))
        self.objects.pop(path, None)

    async def close(self) -> None:
        pass

    # ------------------------------------------------------------ what the kopf indexes would hold

    def node_views(self) -> builtins.list[NodeView]:
        return [NodeView.from_body(o) for p, o in self.objects.items() if p.startswith("/api/v1/nodes/")]

    def add_node(self, body: dict[str, Any]) -> None:
        self.objects[f"/api/v1/nodes/{body['metadata']['name']}"] = copy.deepcopy(body)

    def node(self, name: str) -> dict[str, Any]:
        return self.objects[f"/api/v1/nodes/{name}"]


def merge(target: dict[str, Any], patch: dict[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


def pool_body(name: str, spec: dict[str, Any], *, deleting: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"metadata": {"name": name, "uid": f"uid-{name}", "generation": 1}, "spec": spec}
    if deleting:
        body["metadata"]["deletionTimestamp"] = "2026-11-02T12:00:00Z"
    return body


def record(name: str, spec: dict[str, Any], *, deleting: bool = False) -> PoolRecord:
    return PoolRecord.from_body(pool_body(name, spec, deleting=deleting))


class Harness:
    """The controller bound to indexes of a FakeApi; `pools` sets the API's pools and the index's alike.

    Statuses are written as soon as they are planned (`--status-settle=0`) unless a test says otherwise.
    """

    def __init__(self, fake: FakeApi, pools: Iterable[PoolRecord], **config: Any) -> None:
        self.fake = fake
        self.indexed_pools: list[PoolRecord] = []
        self.pools = list(pools)
        self.index: list[NodeView] = fake.node_views()
        defaults: dict[str, Any] = {"debounce_seconds": 0.0, "resync_seconds": 3600.0, "status_settle_seconds": 0.0}
        self.controller = Controller(
            OperatorConfig(**{**defaults, **config}),
            fake,  # type: ignore[arg-type]
            OperatorMetrics(),
            wall_clock=lambda: START + timedelta(seconds=asyncio.get_running_loop().time()),
        )
        self.controller.bind(nodes=lambda: self.index, pools=lambda: self.indexed_pools)

    @property
    def pools(self) -> list[PoolRecord]:
        return self.indexed_pools

    @pools.setter
    def pools(self, records: Iterable[PoolRecord]) -> None:
        self.indexed_pools = list(records)
        for path in [p for p in self.fake.objects if p.startswith(POOLS + "/")]:
            del self.fake.objects[path]
        for pool in self.indexed_pools:
            metadata: dict[str, Any] = {"name": pool.name, "uid": pool.uid, "generation": pool.generation}
            if pool.deleting:
                metadata["deletionTimestamp"] = "2026-11-02T12:00:00Z"
            self.fake.objects[f"{POOLS}/{pool.name}"] = {"metadata": metadata, "spec": dict(pool.spec)}

    def catch_up(self) -> None:
        """The watch delivers what was written: the node index sees the API's current nodes."""
        self.index = self.fake.node_views()

    def catch_up_pools(self) -> None:
        """The pool watch delivers what was written (statuses included)."""
        self.indexed_pools = [
            PoolRecord.from_body(o) for p, o in self.fake.objects.items() if p.startswith(POOLS + "/")
        ]

    def node_writes(self) -> list[str]:
        return [path for verb, path in self.fake.writes if verb == "PATCH" and path.startswith("/api/v1/nodes/")]

    def status_writes(self, pool: str) -> list[str]:
        return [path for verb, path in self.fake.writes if verb == "PATCH" and path == f"{POOLS}/{pool}/status"]

    def status(self, pool: str) -> dict[str, Any]:
        """The pool's status as the API server stores it ({} when none was written)."""
        return dict((self.fake.objects.get(f"{POOLS}/{pool}") or {}).get("status") or {})


def cluster(*bodies: dict[str, Any]) -> FakeApi:
    fake = FakeApi()
    for body in bodies:
        fake.add_node(body)
    return fake


async def test_a_pass_writes_once_and_a_stale_index_does_not_cause_a_second_write() -> None:
    fake = cluster(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = Harness(fake, [record("p", {"accelerator": "H100", "nodes": 2})])
    first = await harness.controller.reconcile_once()
    assert first.ok
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]
    assert "/api/v1/namespaces/accelpool-system/configmaps" in {w[1] for w in fake.writes if w[0] == "POST"}
    assert ("APPLY", "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p") in fake.writes
    writes = len(fake.writes)
    again = await harness.controller.reconcile_once()  # the index has not seen the writes yet
    assert again.ok and len(fake.writes) == writes
    harness.catch_up()
    caught_up = await harness.controller.reconcile_once()
    assert caught_up.ok and len(fake.writes) == writes
    assert harness.status("p")["nodes"]["members"] == 2, "the pass that planned the status wrote it"
    assert harness.status_writes("p") == [f"{POOLS}/p/status"]


async def test_a_conflict_re_reads_the_node_and_the_next_pass_succeeds() -> None:
    fake = cluster(node_body("n1"))
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    fake.node("n1")["metadata"]["labels"]["example.com/other"] = "writer"
    fake.node("n1")["metadata"]["resourceVersion"] = "changed-by-someone-else"
    result = await harness.controller.reconcile_once()
    assert result.ok and result.conflicts == 1, "a conflict is not an error: no backoff"
    assert harness.status("p") == {}, "nothing is published about a write that did not happen"
    assert "/api/v1/nodes/n1" in fake.reads
    retried = await harness.controller.reconcile_once()
    assert retried.ok and retried.conflicts == 0
    assert harness.status("p")["nodes"]["members"] == 1
    labels = fake.node("n1")["metadata"]["labels"]
    assert labels[conventions.POOL_LABEL] == "p" and labels["example.com/other"] == "writer"


async def test_failed_writes_mark_only_their_pool_and_statuses_of_others_are_published() -> None:
    fake = cluster(node_body("n1"), node_body("l1", "L4", 1))
    fake.fail["PATCH /api/v1/nodes/n1"] = [ApiError(500, "InternalError", "boom")]
    harness = Harness(fake, [record("h100", {"accelerator": "H100"}), record("l4", {"accelerator": "L4"})])
    result = await harness.controller.reconcile_once()
    assert not result.ok
    assert result.failed_pools == {"h100"}
    assert harness.status("h100") == {}
    assert harness.status("l4")["phase"] == "Configuring"
    warnings = [o for p, o in fake.objects.items() if "/events/" in p and o["reason"] == "WriteFailed"]
    assert [(e["involvedObject"]["name"], e["type"]) for e in warnings] == [("h100", "Warning")]
    assert "node n1" in warnings[0]["message"] and "boom" in warnings[0]["message"]


@pytest.mark.looptime
async def test_the_loop_backs_off_between_failing_passes(looptime: float) -> None:
    fake = cluster(node_body("n1"))
    # Three passes fail: each tries to create the two ConfigMaps.
    fake.fail["POST /api/v1/namespaces"] = [ApiError(503, "Unavailable", "etcd") for _ in range(6)]
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    started = asyncio.get_running_loop().time()
    while harness.controller.last is None or not harness.controller.last.ok:  # noqa: ASYNC110 (looptime's clock)
        await asyncio.sleep(0.001)
    elapsed = asyncio.get_running_loop().time() - started
    task.cancel()
    assert elapsed == pytest.approx(0.5 + 1 + 2, abs=0.01), "exponential backoff: 0.5 s, doubling"
    assert harness.controller.last.number == 4
    assert harness.controller.metrics.reconciles == {"error": 3, "success": 1}


@pytest.mark.looptime
async def test_a_crashing_pass_never_stops_the_loop(looptime: float) -> None:
    fake = cluster(node_body("n1"))
    fake.fail["POST /api/v1/namespaces"] = [KeyError("a bug in a write")]
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    harness.controller.indexed()
    harness.controller.task = asyncio.create_task(harness.controller.run())
    try:
        while harness.controller.last is None or not harness.controller.last.ok:  # noqa: ASYNC110 (looptime)
            await asyncio.sleep(0.001)
        assert harness.controller.metrics.reconciles == {"error": 1, "success": 1}
        assert harness.controller.probe()["last_ok"] is True, "alive, and the retried pass went through"
        assert harness.status("p")["phase"] == "Configuring"
    finally:
        harness.controller.task.cancel()


@pytest.mark.looptime
async def test_a_quarantine_is_lifted_when_the_hold_down_ends_without_any_event(looptime: float) -> None:
    since = START.isoformat()
    quarantined = member(
        "m1",
        "p",
        taints=[{"key": conventions.QUARANTINE_TAINT_KEY, "value": "XidError79", "effect": "NoSchedule"}],
        health=("True", "AllChecksPassed", "", since),
    )
    fake = FakeApi()
    body = node_body(
        "m1",
        labels=quarantined.labels,
        annotations=quarantined.annotations,
        taints=[t.to_dict() for t in quarantined.taints],
        health=("True", "AllChecksPassed", "", since),
    )
    fake.add_node(body)
    harness = Harness(fake, [record("p", {"accelerator": "H100", "health": {"holdDown": "10m"}})])
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    lifted_at = None
    try:
        for _ in range(20):
            await asyncio.sleep(60)
            harness.catch_up()
            taints = fake.node("m1").get("spec", {}).get("taints") or []
            if not any(t["key"] == conventions.QUARANTINE_TAINT_KEY for t in taints):
                lifted_at = asyncio.get_running_loop().time()
                break
    finally:
        task.cancel()
    assert lifted_at is not None, "never lifted"
    assert 600 <= lifted_at <= 660, "lifted by the requeue timer when the 10-minute hold-down ends"
    assert harness.controller.metrics.remediations[("p", "untaint")] == 1, harness.controller.metrics.remediations


async def test_events_are_posted_once() -> None:
    fake = cluster(node_body("n1", health=("False", "XidError79", "fallen off the bus", "2026-11-02T11:00:00Z")))
    fake.node("n1")["metadata"]["labels"][conventions.POOL_LABEL] = "p"
    harness = Harness(fake, [record("p", {"accelerator": "H100", "health": {"remediation": "none"}})])
    await harness.controller.reconcile_once()
    harness.catch_up()
    await harness.controller.reconcile_once()
    events = [path for verb, path in fake.writes if verb == "POST" and path.endswith("/events")]
    reasons = [o["reason"] for p, o in fake.objects.items() if "/events/" in p]
    assert reasons.count("NodeUnhealthy") == 1
    assert len(events) == len(reasons)


async def test_a_status_is_written_once_and_not_re_sent_while_the_index_catches_up() -> None:
    fake = cluster(node_body("n1"))
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    await harness.controller.reconcile_once()
    written = harness.status("p")
    assert written["observedGeneration"] == 1 and written["phase"] == "Configuring"
    await harness.controller.reconcile_once()  # the pool index has not seen the status yet
    assert len(harness.status_writes("p")) == 1, "the write is in flight: not sent again"
    harness.catch_up()
    harness.catch_up_pools()
    await harness.controller.reconcile_once()
    assert len(harness.status_writes("p")) == 1, "nothing is written while the status is unchanged"

    fake.objects[f"{POOLS}/p"]["status"]["phase"] = "Ready"  # someone else writes the status
    harness.catch_up_pools()
    await harness.controller.reconcile_once()
    assert len(harness.status_writes("p")) == 2 and harness.status("p") == written, "put right by the next pass"


@pytest.mark.looptime
async def test_status_changes_in_quick_succession_become_one_write(looptime: float) -> None:
    fake = cluster(node_body("n1"), node_body("n2"))
    harness = Harness(fake, [record("p", {"accelerator": "H100", "nodes": 1})], status_settle_seconds=1.0)
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    try:
        await asyncio.sleep(0.5)
        assert harness.status_writes("p") == [], "held for --status-settle"
        harness.pools = [record("p", {"accelerator": "H100", "nodes": 2})]  # a second change within the window
        harness.controller.pool_changed("p", harness.pools[0])
        await asyncio.sleep(0.1)
        assert harness.status_writes("p") == []
        await asyncio.sleep(0.5)  # the loop wakes when the first change's settle time ends
        assert len(harness.status_writes("p")) == 1, "one write carries both changes"
        assert harness.status("p")["nodes"]["desired"] == 2
    finally:
        task.cancel()


async def test_a_paused_controller_writes_nothing_and_resumes_from_what_the_api_holds() -> None:
    fake = cluster(node_body("n1"), node_body("n2"))
    harness = Harness(fake, [record("p", {"accelerator": "H100", "nodes": 1})])
    assert harness.controller.active
    await harness.controller.reconcile_once()
    harness.catch_up()
    harness.catch_up_pools()
    writes = len(fake.writes)

    harness.controller.pause()
    harness.pools = [record("p", {"accelerator": "H100", "nodes": 2})]
    paused = await harness.controller.reconcile_once()
    assert paused.paused and not harness.controller.active
    assert len(fake.writes) == writes, "a standby writes nothing"

    # Meanwhile the leader wrote: the second node joined, the ConfigMaps and the status were updated.
    leader = Harness(fake, harness.pools)
    await leader.controller.reconcile_once()
    harness.catch_up()
    harness.catch_up_pools()
    taken_over = len(fake.writes)
    reads = len(fake.reads)
    harness.controller.resume()
    resumed = await harness.controller.reconcile_once()
    assert resumed.ok and not resumed.paused
    assert fake.writes[taken_over:] == [], "the new leader converges with no duplicate writes"
    assert "/api/v1/namespaces/accelpool-system/configmaps/accelpool-device-plugin-config" in fake.reads[reads:]
    assert POOLS in fake.reads[reads:], "the pools are listed again"


async def test_a_pass_paused_midway_sends_no_further_write() -> None:
    fake = cluster(node_body("n1"), node_body("n2"))
    harness = Harness(fake, [record("p", {"accelerator": "H100", "nodes": 2})])
    create = fake.create

    async def pause_after_the_first_write(path: str, body: dict[str, Any]) -> dict[str, Any]:
        created = await create(path, body)
        harness.controller.pause()
        harness.controller.resume()  # resumed at once: the pass in flight still stops
        return created

    fake.create = pause_after_the_first_write  # type: ignore[method-assign]
    result = await harness.controller.reconcile_once()
    assert result.paused
    assert [verb for verb, _ in fake.writes] == ["POST"], "the device-plugin ConfigMap only"
    fake.create = create  # type: ignore[method-assign]
    assert (await harness.controller.reconcile_once()).ok
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"]


async def test_a_deleted_pool_is_released_and_its_objects_removed() -> None:
    fake = cluster(node_body("n1"))
    harness = Harness(fake, [record("p", {"accelerator": "H100"})])
    await harness.controller.reconcile_once()
    harness.catch_up()
    assert "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p" in fake.objects
    harness.pools = [record("p", {"accelerator": "H100"}, deleting=True)]
    waiter = asyncio.create_task(harness.controller.wait_released("p", wait_seconds=5))
    await asyncio.sleep(0)
    result = await harness.controller.reconcile_once()
    assert result.released_pools == {"p"}
    assert await waiter
    assert "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p" not in fake.objects
    labels = fake.node("n1")["metadata"]["labels"]
    assert conventions.POOL_LABEL not in labels
    data = fake.objects["/api/v1/namespaces/accelpool-system/configmaps/accelpool-device-plugin-config"]["data"]
    assert set(data) == {"default"}


async def test_passes_never_overlap() -> None:
    fake = cluster(node_body("n1"), node_body("n2"), node_body("n3"))
    harness = Harness(
        fake, [record("a", {"accelerator": "H100", "nodes": 1}), record("b", {"accelerator": "H100", "nodes": 1})]
    )
    results = await asyncio.gather(*(harness.controller.reconcile_once() for _ in range(3)))
    assert all(r.ok for r in results)
    assert sorted(r.number for r in results) == [1, 2, 3]
    assert harness.node_writes() == ["/api/v1/nodes/n1", "/api/v1/nodes/n2"], "one claim per node, no double claims"
    labels = {n: fake.node(n)["metadata"]["labels"].get(conventions.POOL_LABEL) for n in ("n1", "n2", "n3")}
    assert labels == {"n1": "a", "n2": "b", "n3": None}


async def test_an_agent_daemonset_is_applied_only_when_what_is_rendered_changes() -> None:
    fake = cluster(node_body("n1"))
    pools = [record("p", {"accelerator": "H100"})]
    first = Harness(fake, pools)
    await first.controller.reconcile_once()
    path = "/apis/apps/v1/namespaces/accelpool-system/daemonsets/accelpool-agent-p"
    assert fake.objects[path]["spec"]["template"]["spec"]["containers"][0]["image"].startswith("ghcr.io/")
    assert [w for w in fake.writes if w[1] == path] == [("APPLY", path)]  # created by the apply
    fake.writes.clear()
    # Restarted with the same settings: nothing to write. With another image: one apply.
    same = Harness(fake, pools)
    await same.controller.reconcile_once()
    assert [w for w in fake.writes if w[1] == path] == []
    from accelpool.render import AgentSettings

    upgraded = Harness(fake, pools, agent=AgentSettings(image="registry.example/agent:2"))
    await upgraded.controller.reconcile_once()
    assert [w for w in fake.writes if w[1] == path] == [("APPLY", path)]
    assert fake.objects[path]["spec"]["template"]["spec"]["containers"][0]["image"] == "registry.example/agent:2"


@pytest.mark.looptime
async def test_the_agents_are_listed_once_per_check_interval_for_all_pools(looptime: float) -> None:
    fake = cluster(node_body("n1"), node_body("n2"))
    pools = [record("a", {"accelerator": "H100", "nodes": 1}), record("b", {"accelerator": "H100", "nodes": 1})]
    harness = Harness(fake, pools, agent_check_seconds=30.0)
    lists = (
        "/apis/apps/v1/namespaces/accelpool-system/daemonsets",
        "/api/v1/namespaces/accelpool-system/pods",
        "/api/v1/namespaces/accelpool-system/events",
    )
    for _ in range(4):  # passes in quick succession (node events, say) list nothing again
        await harness.controller.reconcile_once()
    assert [fake.reads.count(path) for path in lists[1:]] == [1, 1]
    harness.controller.indexed()
    task = asyncio.create_task(harness.controller.run())
    try:
        await asyncio.sleep(95)  # nothing else happens: a pass every interval, and one list each
        assert [fake.reads.count(path) for path in lists[1:]] == [4, 4]
        assert fake.reads.count(lists[0]) == 1 + 4, "the DaemonSets: once at start (the cache), once per check"
    finally:
        task.cancel()
