"""AgentReady from what Kubernetes says about a pool's agents: the DaemonSet controller's FailedCreate
Events (messages as a v1.36 cluster words them), the DaemonSet's counts, the pods' waiting reasons."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from accelpool.model import agents
from accelpool.model.agents import AgentObservation, CreateFailure, DaemonSetState, judge, observe
from accelpool_api import conventions

NOW = datetime(2026, 11, 2, 12, 0, 0, tzinfo=UTC)
NAMESPACE = "accelpool-system"
DAEMONSET = "accelpool-agent-h100"
MEMBERS = ("gpu-a1", "gpu-a2")
RUNTIME_CLASS = (
    'Error creating: pods "accelpool-agent-h100-x7k2p" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
)
SERVICE_ACCOUNT = (
    'Error creating: pods "accelpool-agent-h100-b4mzq" is forbidden: error looking up service account '
    'accelpool-system/accelpool-agent: serviceaccount "accelpool-agent" not found'
)


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def daemonset_body(
    *, current: int = 0, ready: int = 0, generation: int = 1, observed: int | None = 1
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "desiredNumberScheduled": 2,
        "currentNumberScheduled": current,
        "numberReady": ready,
        "updatedNumberScheduled": current,
        "numberAvailable": ready,
        "numberUnavailable": 2 - ready,
    }
    if observed is not None:
        status["observedGeneration"] = observed
    return {
        "metadata": {
            "name": DAEMONSET,
            "namespace": NAMESPACE,
            "uid": "ds-uid",
            "generation": generation,
            "labels": {conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY, conventions.POOL_LABEL: "h100"},
        },
        "status": status,
    }


def event_body(message: str, *, seen: datetime = NOW, uid: str = "ds-uid", count: int = 1) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{DAEMONSET}.1", "namespace": NAMESPACE},
        "involvedObject": {"kind": "DaemonSet", "name": DAEMONSET, "namespace": NAMESPACE, "uid": uid},
        "reason": "FailedCreate",
        "type": "Warning",
        "message": message,
        "lastTimestamp": iso(seen),
        "count": count,
    }


def pod_body(name: str, node: str, waiting: tuple[str, str] | None = None, **status: Any) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "agent", "image": "ghcr.io/accelpool/accelpool-agent:0.1.0", "ready": False}
    if waiting is not None:
        container["state"] = {"waiting": {"reason": waiting[0], "message": waiting[1]}}
    container.update(status)
    return {
        "metadata": {
            "name": name,
            "namespace": NAMESPACE,
            "labels": {
                conventions.MANAGED_BY_LABEL: conventions.MANAGED_BY,
                conventions.POOL_LABEL: "h100",
                "app.kubernetes.io/component": "agent",
            },
        },
        "spec": {"nodeName": node, "containers": [{"name": "agent", "image": container["image"]}]},
        "status": {"phase": "Pending", "containerStatuses": [container]},
    }


def verdict(
    *events: dict[str, Any], pods: tuple[dict[str, Any], ...] = (), silent: tuple[str, ...] = MEMBERS, **ds: Any
) -> agents.AgentReadiness:
    observed = observe([daemonset_body(**ds)], pods, events).get("h100")
    return judge(observed, members=MEMBERS, silent=silent, now=NOW, silent_text=", ".join(silent))


def test_a_missing_runtime_class_is_named_with_its_setting() -> None:
    found = verdict(event_body(RUNTIME_CLASS))
    assert (found.ok, found.reason) == (False, "RuntimeClassNotFound")
    assert found.message.startswith(
        f"DaemonSet {NAMESPACE}/{DAEMONSET} cannot create 2 of 2 agent pods: {RUNTIME_CLASS}."
    )
    assert "agent.runtimeClassName" in found.message and "--agent-runtime-class" in found.message
    assert 'or to ""' in found.message and "GKE" in found.message


def test_a_missing_service_account_is_named_with_its_namespace() -> None:
    found = verdict(event_body(SERVICE_ACCOUNT))
    assert (found.ok, found.reason) == (False, "ServiceAccountNotFound")
    assert "ServiceAccount accelpool-system/accelpool-agent: " in found.message
    assert "agent.namespace" in found.message and SERVICE_ACCOUNT in found.message


@pytest.mark.parametrize(
    "why",
    [
        "exceeded quota: gpu-pods, requested: pods=1, used: pods=10, limited: pods=10",
        'violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false (container "agent" must set '
        "securityContext.allowPrivilegeEscalation=false)",
    ],
)
def test_other_refusals_are_quoted_verbatim(why: str) -> None:
    message = f'Error creating: pods "accelpool-agent-h100-q2w9z" is forbidden: {why}'
    found = verdict(event_body(f"(combined from similar events): {message}", count=12))
    assert (found.ok, found.reason) == (False, "PodsForbidden")
    assert found.message == f"DaemonSet {NAMESPACE}/{DAEMONSET} cannot create 2 of 2 agent pods: {message}"


def test_a_refusal_no_longer_counts_once_the_pods_exist_or_it_is_old_or_of_another_daemonset() -> None:
    assert verdict(event_body(RUNTIME_CLASS), current=2).reason == "WaitingForAgents"
    old = NOW - timedelta(seconds=agents.FAILURE_WINDOW_SECONDS + 60)
    assert verdict(event_body(RUNTIME_CLASS, seen=old)).reason == "WaitingForAgents"
    assert verdict(event_body(RUNTIME_CLASS, uid="an-earlier-daemonset")).reason == "WaitingForAgents"
    # A status the controller has not brought up to the DaemonSet's generation says nothing: the refusal counts.
    assert verdict(event_body(RUNTIME_CLASS), current=2, generation=2, observed=1).reason == "RuntimeClassNotFound"


def test_image_pull_errors_name_the_image_and_the_values() -> None:
    pulling = pod_body(
        "accelpool-agent-h100-x7k2p",
        "gpu-a1",
        ("ImagePullBackOff", 'Back-off pulling image "ghcr.io/accelpool/accelpool-agent:0.1.0"'),
    )
    found = verdict(pods=(pulling, pod_body("accelpool-agent-h100-b4mzq", "gpu-a2")), current=2)
    assert (found.ok, found.reason) == (False, "ImagePullFailed")
    assert found.message.startswith(
        "1 agent pod(s) cannot pull ghcr.io/accelpool/accelpool-agent:0.1.0 (ImagePullBackOff: Back-off pulling "
        'image "ghcr.io/accelpool/accelpool-agent:0.1.0"): accelpool-agent-h100-x7k2p on gpu-a1.'
    )
    assert "agent.image.repository" in found.message and "agent.image.digest" in found.message


def test_a_crash_loop_points_at_the_previous_log() -> None:
    looping = pod_body(
        "accelpool-agent-h100-x7k2p",
        "gpu-a1",
        ("CrashLoopBackOff", "back-off 5m0s restarting failed container=agent"),
        restartCount=7,
        lastState={"terminated": {"reason": "Error", "exitCode": 1}},
    )
    found = verdict(pods=(looping,), current=2, silent=())
    assert (found.ok, found.reason) == (False, "AgentCrashLooping")
    assert "(7 restarts; last exit: Error, exit code 1)" in found.message
    assert found.message.endswith(f"kubectl -n {NAMESPACE} logs accelpool-agent-h100-x7k2p --previous")


def test_pods_off_the_members_do_not_count() -> None:
    leaving = pod_body("accelpool-agent-h100-old", "released-node", ("CrashLoopBackOff", ""))
    assert verdict(pods=(leaving,), current=2, silent=()).ok


def test_waiting_agents_come_with_the_daemonsets_counts() -> None:
    found = verdict(current=2, ready=1, silent=("gpu-a2",))
    assert (found.ok, found.reason) == (False, "WaitingForAgents")
    assert found.message == (
        f"1 of 2 members have no live {conventions.HEALTH_CONDITION} report: gpu-a2; DaemonSet {NAMESPACE}/"
        f"{DAEMONSET}: 1 of 2 agent pods available (2 scheduled, 2 updated, 1 unavailable)"
    )
    missing = judge(AgentObservation(), members=MEMBERS, silent=MEMBERS, now=NOW)
    assert missing.message.endswith("; the agent DaemonSet does not exist yet")


def test_reporting_agents_are_ready_whatever_the_counts_say_and_without_observation() -> None:
    assert verdict(current=2, ready=0, silent=()) == agents.AgentReadiness(
        True, "Reporting", "2 of 2 members report health"
    )
    assert judge(None, members=MEMBERS, silent=(), now=NOW).ok
    unobserved = judge(None, members=MEMBERS, silent=("gpu-a1",), now=NOW, silent_text="gpu-a1")
    assert unobserved.message == f"1 of 2 members have no live {conventions.HEALTH_CONDITION} report: gpu-a1"


def test_observe_keeps_only_accelpools_objects_by_pool() -> None:
    stranger = daemonset_body()
    stranger["metadata"]["labels"] = {conventions.POOL_LABEL: "h100"}
    other_event = event_body("Error creating: something")
    other_event["involvedObject"]["name"] = "someone-elses"
    plain_pod = pod_body("not-an-agent", "gpu-a1")
    del plain_pod["metadata"]["labels"]["app.kubernetes.io/component"]
    assert observe([stranger], [plain_pod], [other_event]) == {}
    found = observe([daemonset_body()], [pod_body("p", "gpu-a1")], [event_body(RUNTIME_CLASS)])["h100"]
    assert found.daemonset == DaemonSetState.from_body(daemonset_body())
    assert found.failures == (CreateFailure(DAEMONSET, "ds-uid", RUNTIME_CLASS, NOW, 1),)
    assert [p.name for p in found.pods] == ["p"]
