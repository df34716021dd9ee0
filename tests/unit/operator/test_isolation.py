"""One pool's failure never stops the others: planning and rendering are isolated per pool.

A pool that raises anywhere in planning (resolving, remediation, configs, status) or in
rendering its agent DaemonSet is set aside with `Valid=False/PlanningFailed` naming the error;
its nodes are left exactly as they are, and every other pool is planned, written and remediated
as if it were not there.
"""

from __future__ import annotations

from typing import Any

import pytest

import accelpool_api as api
from accelpool.decide import poolstatus, render
from accelpool.decide.planning import ConfigState, cluster_pass
from accelpool.model import nvidia
from accelpool_api import conventions

from .conftest import conditions, device_plugin_key, member, members, node, node_body, pool, run
from .emulated import Cluster, pool_body

XID = ("False", "XidError79", "XID 79 (GPU has fallen off the bus) on GPU 0", "2026-11-02T11:00:00Z")


def _raise_for(name: str, original: Any, *, key: str = "name") -> Any:
    """Wraps a pure function so that it raises for the pool called `name`."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        subject = args[0]
        target = getattr(subject, key, subject)
        if target == name:
            raise RuntimeError(f"injected failure for {name}")
        return original(*args, **kwargs)

    return wrapped


BAD_KEY = device_plugin_key("bad", {"accelerator": "L4", "nodes": 1, "sharing": {"timeSlicing": {"replicas": 2}}})


def _healthy_world() -> tuple[list[Any], list[Any]]:
    pools = [
        pool("good", {"accelerator": "H100", "nodes": 2}),
        pool("bad", {"accelerator": "L4", "nodes": 1, "sharing": {"timeSlicing": {"replicas": 2}}}),
    ]
    nodes = [
        member("g1", "good", health=XID),  # an XID on a member of the healthy pool: it must be quarantined
        node("g2"),
        node("g3"),
        member("b1", "bad", "L4", count=1, labels={conventions.DEVICE_PLUGIN_CONFIG_LABEL: BAD_KEY}),
        node("l2", "L4", 1),
    ]
    return pools, nodes


@pytest.mark.parametrize(
    "where",
    ["device-plugin config", "pool status", "MIG layout"],
)
def test_a_pool_that_raises_in_planning_is_set_aside_and_the_others_are_planned(
    monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    pools, nodes = _healthy_world()
    if where == "device-plugin config":
        original = nvidia.device_plugin_config

        def failing(spec: Any, resolved: Any) -> Any:
            if spec.sharing is not None:
                raise RuntimeError("injected failure for bad")
            return original(spec, resolved)

        monkeypatch.setattr(nvidia, "device_plugin_config", failing)
    elif where == "pool status":
        monkeypatch.setattr(cluster_pass, "compute_status", _raise_for("bad", poolstatus.compute_status))
    else:  # the MIG layout is only expanded for MIG pools
        pools[1] = pool("bad", {"accelerator": "A100-80GB", "nodes": 1, "mig": {"profile": "3g.40gb"}})
        monkeypatch.setattr(api.ComputePoolSpec, "mig_layout", _raise_for_mig(api.ComputePoolSpec.mig_layout))

    result = run(pools, nodes)

    assert set(result.unplannable) == {"bad"}
    assert "injected failure for bad" in result.unplannable["bad"]
    assert conditions(result, "bad")["Valid"] == ("False", "PlanningFailed")
    bad = result.pool("bad")
    assert bad is not None and bad.status is not None and bad.status.phase == "Failed"
    assert not any(result.changes[n].labels or result.changes[n].add_taints for n in ("b1",) if n in result.changes)
    # the healthy pool is planned in full: a spare is claimed and the XID node is quarantined
    assert members(result, "good") == ["g1", "g2", "g3"]
    quarantine = [t for t in result.changes["g1"].add_taints if t.key == conventions.QUARANTINE_TAINT_KEY]
    assert quarantine and quarantine[0].value == "XidError79"
    assert conditions(result, "good")["Valid"] == ("True", "Valid")


def _raise_for_mig(original: Any) -> Any:
    def failing(self: Any) -> list[str]:
        if self.mig is not None:
            raise RuntimeError("injected failure for bad")
        return list(original(self))

    return failing


def test_config_keys_of_a_set_aside_pool_are_kept_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    pools, nodes = _healthy_world()
    key = device_plugin_key("bad", {"accelerator": "L4", "nodes": 1, "sharing": {"timeSlicing": {"replicas": 2}}})
    written = "version: v1\nsharing:\n  timeSlicing:\n    resources:\n    - name: nvidia.com/gpu\n      replicas: 2\n"
    config = ConfigState(device_plugin={key: written}, device_plugin_managed=frozenset({key}))
    monkeypatch.setattr(cluster_pass, "compute_status", _raise_for("bad", poolstatus.compute_status))
    result = run(pools, nodes, config)
    assert result.device_plugin[key] == written
    assert key in result.device_plugin_managed


def test_several_failing_pools_are_all_found() -> None:
    pools = [pool(f"p{i}", {"accelerator": "H100"}) for i in range(9)]
    nodes = [node(f"n{i}") for i in range(9)]
    failing = {"p2", "p7"}
    original = poolstatus.compute_status

    def compute(facts: Any) -> Any:
        if facts.name in failing and not facts.problems:
            raise ValueError(f"boom {facts.name}")
        return original(facts)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(cluster_pass, "compute_status", compute)
        result = run(pools, nodes)
    assert set(result.unplannable) == failing
    planned = [p.name for p in result.pools if p.valid]
    assert sorted(planned) == sorted(f"p{i}" for i in range(9) if f"p{i}" not in failing)
    assert all(len(members(result, name)) == 1 for name in planned)


async def test_a_pool_whose_daemonset_cannot_be_rendered_does_not_block_the_others(
    cluster: Cluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    await cluster.add_nodes(
        node_body("g1"),
        node_body("g2", health=XID, labels={conventions.POOL_LABEL: "good"}),
        node_body("l1", "L4", 1),
    )
    original = render.agent_config

    def failing(pool_name: str, spec: Any) -> Any:
        if pool_name == "bad":
            raise ValueError("interval_seconds: Input should be greater than 0")
        return original(pool_name, spec)

    monkeypatch.setattr(render, "agent_config", failing)
    harness = await cluster.harness(
        [pool_body("good", {"accelerator": "H100", "nodes": 2}), pool_body("bad", {"accelerator": "L4"})]
    )
    result = await harness.controller.reconcile_once()

    assert result.ok
    daemonsets = {p for v, p in cluster.writes() if v == "APPLY" and "daemonsets" in p}
    assert daemonsets, "the healthy pool's agent DaemonSet is created"
    stored = cluster.api.list("/apis/apps/v1/namespaces/accelpool-system/daemonsets")
    assert stored and all("accelpool-agent-bad" not in o["metadata"]["name"] for o in stored)
    g2 = cluster.node("g2")
    assert any(t["key"] == conventions.QUARANTINE_TAINT_KEY for t in g2["spec"].get("taints", []))
    assert conventions.POOL_LABEL not in cluster.node("l1")["metadata"]["labels"], "nothing is claimed for the bad pool"
    bad = harness.status("bad")
    valid = next(c for c in bad["conditions"] if c["type"] == "Valid")
    assert valid["status"] == "False" and valid["reason"] == "PlanningFailed"
    assert "interval_seconds" in valid["message"]
    good = harness.status("good")
    assert good["nodes"]["members"] == 2

    writes = len(cluster.writes())
    harness.catch_up()
    again = await harness.controller.reconcile_once()
    assert again.ok and len(cluster.writes()) == writes, "a set-aside pool causes no writes on later passes"
