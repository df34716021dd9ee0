"""What a drain evicts, the Eviction it sends, and how it reads the API server's answers."""

from __future__ import annotations

from typing import Any

from accelpool.model.evictions import (
    Answer,
    DrainOrder,
    PodRef,
    eviction_body,
    eviction_path,
    observe,
    read_answer,
    sort_pods,
)
from accelpool_api import conventions


def pod(name: str, node: str = "n1", *, phase: str = "Running", **metadata: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "team-a", **metadata},
        "spec": {"nodeName": node},
        "status": {"phase": phase},
    }


def test_a_drain_keeps_daemonset_mirror_agent_and_completed_pods_and_waits_for_terminating_ones() -> None:
    daemon = pod("exporter", ownerReferences=[{"kind": "DaemonSet", "name": "dcgm", "controller": True}])
    mirror = pod("etcd-n1", annotations={conventions.MIRROR_POD_ANNOTATION: "abc"})
    agent = pod(
        "agent", labels={conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, "app.kubernetes.io/component": "agent"}
    )
    done = pod("job-1", phase="Succeeded")
    going = pod("trainer-1", deletionTimestamp="2026-11-02T12:00:00Z")
    owned_by_a_replicaset = pod("trainer-0", ownerReferences=[{"kind": "ReplicaSet", "name": "t", "controller": True}])
    elsewhere = pod("other", node="n2")
    pods = sort_pods([daemon, mirror, agent, done, going, owned_by_a_replicaset, elsewhere], "n1")
    assert [p.name for p in pods.evict] == ["trainer-0"]
    assert [p.name for p in pods.terminating] == ["trainer-1"]
    assert sorted(p.name for p in pods.kept) == ["agent", "etcd-n1", "exporter", "job-1"]


def test_the_eviction_is_policy_v1_with_the_grace_period_only_when_the_policy_sets_one() -> None:
    target = PodRef("team-a", "trainer-0")
    assert eviction_path(target) == "/api/v1/namespaces/team-a/pods/trainer-0/eviction"
    assert eviction_body(target, None) == {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": "trainer-0", "namespace": "team-a"},
    }
    assert eviction_body(target, 30)["deleteOptions"] == {"gracePeriodSeconds": 30}


def test_the_answers_of_the_eviction_subresource() -> None:
    target = PodRef("team-a", "trainer-0")
    refusal = "The disruption budget trainer needs 2 healthy pods and has 2 currently"
    assert read_answer(target, 201) == Answer(target, "evicted")
    assert read_answer(target, 404, 'pods "trainer-0" not found') == Answer(target, "gone")
    blocked = read_answer(
        target,
        429,
        "Cannot evict pod as it would violate the pod's disruption budget.",
        [("DisruptionBudget", refusal)],
    )
    assert blocked == Answer(target, "blocked", refusal, "trainer")
    throttled = read_answer(target, 429, "Too many requests, please try again later.")
    assert throttled.result == "failed", "a 429 without a budget's cause is the API server's own throttling"
    several = read_answer(target, 500, "This pod has more than one PodDisruptionBudget, which the eviction ...")
    assert several == Answer(
        target, "failed", "500: This pod has more than one PodDisruptionBudget, which the eviction ..."
    )


def test_a_visit_is_done_only_when_nothing_is_left_to_evict_or_to_wait_for() -> None:
    order = DrainOrder("n1", "p", "2026-11-02T12:00:00Z", None)
    evicted, refused = PodRef("team-a", "a"), PodRef("team-a", "b")
    pods = sort_pods([pod("a"), pod("b"), pod("c", deletionTimestamp="2026-11-02T12:00:00Z")], "n1")
    seen = observe(order, pods, [Answer(evicted, "evicted"), Answer(refused, "blocked", "budget", "pdb")])
    assert [str(p) for p in seen.remaining] == ["team-a/b", "team-a/c"]
    assert not seen.done and [a.pod for a in seen.blocked] == [refused]
    assert observe(order, sort_pods([pod("a")], "n1"), [Answer(evicted, "evicted")]).done
