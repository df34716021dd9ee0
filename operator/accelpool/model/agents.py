"""Why a pool's agents run or not: the `AgentReady` condition from what Kubernetes says about them.

The controller watches, for all pools at once, the agent DaemonSets, their pods and the FailedCreate
Events of DaemonSets in the agent namespace (selectors keep each small; `accelpool.runtime.controller.
agentwatch`), each parsed once as it changes (`daemonset_of`, `agent_pod_of`, `CreateFailure.from_event`); `group`
gathers them by pool into an `AgentObservation` (`observe`: the same from listed objects), and `judge`
turns one pool's into the condition (`AgentReadiness`), for `accelpool.decide.poolstatus`. In order of
precedence:

- RuntimeClassNotFound: the DaemonSet controller's pod creations are refused with
  `pod rejected: RuntimeClass "nvidia" not found`; fix: `agent.runtimeClassName` (`--agent-runtime-class`).
- ServiceAccountNotFound: refused with `error looking up service account <ns>/<name>: ...`; fix: the
  chart's agent ServiceAccount in `agent.namespace`.
- PodsForbidden: refused by something else (a ResourceQuota, Pod Security admission, a webhook),
  quoted verbatim. FailedCreate: any other FailedCreate, verbatim.
- ImagePullFailed: an agent pod waits on `ErrImagePull`, `ImagePullBackOff`, `InvalidImageName`, ...
  with the image; fix: `agent.image.*` (`--agent-image`), pull secrets.
- AgentCrashLooping: an agent container waits on `CrashLoopBackOff`; see its previous log.
- WaitingForAgents: members without a live `AcceleratorHealthy` report, with the DaemonSet's counts.
- Reporting (True): every member's agent reports.

A FailedCreate Event counts while the DaemonSet (same uid) still misses pods (`currentNumberScheduled <
desiredNumberScheduled`, or its status has not caught up with its generation) and the Event was seen
within `FAILURE_WINDOW_SECONDS`: the controller retries a refused creation with a backoff of at most
about 17 minutes, each retry bumping the Event. Messages and reasons follow their sources:
pkg/controller/controller_utils.go (`Error creating: %v`), plugin/pkg/admission/runtimeclass/admission.go,
plugin/pkg/admission/serviceaccount/admission.go, pkg/kubelet/images/types.go and
pkg/kubelet/container/sync_result.go (the waiting reasons).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from accelpool.model.nodes import parse_time
from accelpool_api import conventions

FAILURE_WINDOW_SECONDS = 20 * 60.0
"""A FailedCreate Event older than this no longer explains anything (the controller's retries are closer)."""
AGENT_COMPONENT = ("app.kubernetes.io/component", "agent")
POD_LABEL_SELECTOR = (
    f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY},{AGENT_COMPONENT[0]}={AGENT_COMPONENT[1]}"
)
"""The agents' pods carry their DaemonSet template's labels (accelpool.decide.render)."""
EVENT_FIELD_SELECTOR = "involvedObject.kind=DaemonSet,reason=FailedCreate"
IMAGE_PULL_REASONS = frozenset(
    {"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ImageInspectError", "ErrImageNeverPull"}
)
CRASH_LOOP = "CrashLoopBackOff"
MESSAGE_PODS = 3
"""Pods named in a message before the rest are counted."""

RUNTIME_CLASS_FIX = (
    "the NVIDIA GPU Operator's container toolkit creates the RuntimeClass nvidia; without it, create the "
    "RuntimeClass for the NVIDIA container runtime, or set the chart value agent.runtimeClassName (operator "
    'flag --agent-runtime-class) to one that exists, or to "" where the NVIDIA runtime is the nodes\' default '
    "(GKE GPU nodes, EKS accelerated AMIs)"
)
SERVICE_ACCOUNT_FIX = (
    "the chart creates the agents' ServiceAccount in agent.namespace (the release namespace when empty): "
    "install or upgrade the chart so it exists there, or point agent.namespace (operator flags "
    "--agent-namespace, --agent-service-account) at the one that does"
)
IMAGE_FIX = (
    "check the chart values agent.image.repository, agent.image.tag or agent.image.digest (operator flag "
    "--agent-image), that the nodes can reach the registry, and imagePullSecrets (the chart gives them to "
    "the agents' ServiceAccount)"
)
_RUNTIME_CLASS = re.compile(r'RuntimeClass "([^"]*)" not found')
_SERVICE_ACCOUNT = re.compile(r"error looking up service account ([^/\s]+)/([^:\s]+):")
_FORBIDDEN = re.compile(r'" is forbidden: (.*)$', re.DOTALL)
_COMBINED = "(combined from similar events): "


@dataclass(frozen=True)
class AgentReadiness:
    ok: bool
    reason: str
    message: str


@dataclass(frozen=True)
class DaemonSetState:
    """An agent DaemonSet's generation and the controller's counts (`status`)."""

    name: str
    namespace: str
    uid: str
    generation: int
    observed_generation: int | None
    desired: int = 0
    current: int = 0
    ready: int = 0
    updated: int = 0
    available: int = 0
    unavailable: int = 0

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> DaemonSetState:
        metadata = body.get("metadata") or {}
        status = body.get("status") or {}
        observed = status.get("observedGeneration")

        def count(key: str) -> int:
            value = status.get(key)
            return int(value) if isinstance(value, int) else 0

        return cls(
            name=str(metadata.get("name", "")),
            namespace=str(metadata.get("namespace", "")),
            uid=str(metadata.get("uid") or ""),
            generation=int(metadata.get("generation") or 1),
            observed_generation=int(observed) if isinstance(observed, int) else None,
            desired=count("desiredNumberScheduled"),
            current=count("currentNumberScheduled"),
            ready=count("numberReady"),
            updated=count("updatedNumberScheduled"),
            available=count("numberAvailable"),
            unavailable=count("numberUnavailable"),
        )

    @property
    def observed(self) -> bool:
        """The controller's counts are about the current spec."""
        return self.observed_generation is not None and self.observed_generation >= self.generation

    @property
    def missing_pods(self) -> bool:
        return not self.observed or self.current < self.desired

    def summary(self) -> str:
        where = f"DaemonSet {self.namespace}/{self.name}"
        if not self.observed:
            return f"{where}: generation {self.generation} not yet observed by the DaemonSet controller"
        return (
            f"{where}: {self.available} of {self.desired} agent pods available "
            f"({self.current} scheduled, {self.updated} updated, {self.unavailable} unavailable)"
        )


@dataclass(frozen=True)
class CreateFailure:
    """A FailedCreate Event on an agent DaemonSet: the controller could not create a pod."""

    daemonset: str
    uid: str
    message: str
    """`Error creating: pods "..." is forbidden: ...`, without the correlator's `(combined ...)` prefix."""
    seen: datetime | None
    count: int = 1

    @classmethod
    def from_event(cls, event: Mapping[str, Any]) -> CreateFailure | None:
        involved = event.get("involvedObject") or {}
        if involved.get("kind") != "DaemonSet" or event.get("reason") != "FailedCreate":
            return None
        series = event.get("series") or {}
        times = (
            series.get("lastObservedTime"),
            event.get("lastTimestamp"),
            event.get("eventTime"),
            event.get("firstTimestamp"),
            (event.get("metadata") or {}).get("creationTimestamp"),
        )
        seen = next((t for t in map(_time, times) if t is not None), None)
        message = str(event.get("message") or "").removeprefix(_COMBINED)
        count = event.get("count")
        return cls(
            daemonset=str(involved.get("name", "")),
            uid=str(involved.get("uid") or ""),
            message=message,
            seen=seen,
            count=int(count) if isinstance(count, int) else 1,
        )


@dataclass(frozen=True)
class AgentPod:
    """An agent pod: where it runs and what its containers wait on."""

    name: str
    namespace: str
    node: str | None
    ready: bool
    waiting: tuple[tuple[str, str, str], ...] = ()
    """(reason, message, image) of every container waiting to run."""
    restarts: int = 0
    last_exit: str = ""
    """How the last container run ended (`Error, exit code 1`)."""

    @classmethod
    def from_body(cls, body: Mapping[str, Any]) -> AgentPod:
        metadata = body.get("metadata") or {}
        spec = body.get("spec") or {}
        status = body.get("status") or {}
        images = {str(c.get("name")): str(c.get("image", "")) for c in spec.get("containers") or []}
        waiting: list[tuple[str, str, str]] = []
        restarts = 0
        last_exit = ""
        for container in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            restarts = max(restarts, int(container.get("restartCount") or 0))
            state = (container.get("state") or {}).get("waiting")
            image = str(container.get("image") or images.get(str(container.get("name")), ""))
            if isinstance(state, Mapping) and state.get("reason"):
                waiting.append((str(state["reason"]), str(state.get("message") or ""), image))
            terminated = (container.get("lastState") or {}).get("terminated")
            if isinstance(terminated, Mapping):
                last_exit = f"{terminated.get('reason') or 'exited'}, exit code {terminated.get('exitCode')}"
        conditions = status.get("conditions") or []
        return cls(
            name=str(metadata.get("name", "")),
            namespace=str(metadata.get("namespace", "")),
            node=spec.get("nodeName"),
            ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
            waiting=tuple(waiting),
            restarts=restarts,
            last_exit=last_exit,
        )


@dataclass(frozen=True)
class AgentObservation:
    """What Kubernetes says about one pool's agents."""

    daemonset: DaemonSetState | None = None
    failures: tuple[CreateFailure, ...] = ()
    pods: tuple[AgentPod, ...] = ()


def _time(value: Any) -> datetime | None:
    return parse_time(value) if isinstance(value, str) else None


def _pool(body: Mapping[str, Any]) -> str | None:
    labels = (body.get("metadata") or {}).get("labels") or {}
    if labels.get(conventions.MANAGED_BY_LABEL) != conventions.MANAGED_BY:
        return None
    pool = labels.get(conventions.POOL_LABEL)
    return str(pool) if pool else None


def daemonset_of(body: Mapping[str, Any]) -> tuple[str, DaemonSetState] | None:
    """An agent DaemonSet's pool and state; None for one that is not accelpool's."""
    pool = _pool(body)
    return None if pool is None else (pool, DaemonSetState.from_body(body))


def agent_pod_of(body: Mapping[str, Any]) -> tuple[str, AgentPod] | None:
    """An agent pod's pool and state; None for a pod that is not an accelpool agent."""
    pool = _pool(body)
    labels = (body.get("metadata") or {}).get("labels") or {}
    if pool is None or labels.get(AGENT_COMPONENT[0]) != AGENT_COMPONENT[1]:
        return None
    return pool, AgentPod.from_body(body)


def observe(
    daemonsets: Iterable[Mapping[str, Any]], pods: Iterable[Mapping[str, Any]], events: Iterable[Mapping[str, Any]]
) -> dict[str, AgentObservation]:
    """Group the listed objects by pool (`group`). Only accelpool's own (labels) count: the API server's selectors
    are applied again here, so an emulator or a proxy that ignores them changes nothing."""
    states = [state for state in map(daemonset_of, daemonsets) if state is not None]
    agent_pods = [pod for pod in map(agent_pod_of, pods) if pod is not None]
    failures = [failure for failure in map(CreateFailure.from_event, events) if failure is not None]
    return group(states, agent_pods, failures)


def group(
    daemonsets: Iterable[tuple[str, DaemonSetState]],
    pods: Iterable[tuple[str, AgentPod]],
    failures: Iterable[CreateFailure],
) -> dict[str, AgentObservation]:
    """Each pool's observation from its DaemonSet, its agent pods and the FailedCreate Events of its DaemonSet."""
    states = dict(daemonsets)
    by_name = {state.name: pool for pool, state in states.items()}
    by_pool: dict[str, list[CreateFailure]] = defaultdict(list)
    for failure in failures:
        pool = by_name.get(failure.daemonset)
        if pool is not None:
            by_pool[pool].append(failure)
    agent_pods: dict[str, list[AgentPod]] = defaultdict(list)
    for pool, pod in pods:
        agent_pods[pool].append(pod)
    return {
        pool: AgentObservation(
            daemonset=states.get(pool),
            failures=tuple(by_pool.get(pool, ())),
            pods=tuple(sorted(agent_pods.get(pool, ()), key=lambda p: p.name)),
        )
        for pool in set(states) | set(by_pool) | set(agent_pods)
    }


def _current_failure(observation: AgentObservation, now: datetime) -> CreateFailure | None:
    state = observation.daemonset
    if state is None or not state.missing_pods:
        return None
    found = [f for f in observation.failures if not (state.uid and f.uid and f.uid != state.uid)]
    if not found:
        return None
    newest = max(found, key=lambda f: (f.seen is not None, f.seen or now))
    if newest.seen is not None and (now - newest.seen).total_seconds() > FAILURE_WINDOW_SECONDS:
        return None
    return newest


def _failure_verdict(failure: CreateFailure, state: DaemonSetState) -> AgentReadiness:
    where = f"DaemonSet {state.namespace}/{state.name}"
    short = f"{state.desired - state.current} of {state.desired} agent pods" if state.observed else "its agent pods"
    quoted = f"{where} cannot create {short}: {failure.message}"
    if found := _RUNTIME_CLASS.search(failure.message):
        return AgentReadiness(
            False, "RuntimeClassNotFound", f'{quoted}. RuntimeClass "{found.group(1)}": {RUNTIME_CLASS_FIX}'
        )
    if found := _SERVICE_ACCOUNT.search(failure.message):
        account = f"{found.group(1)}/{found.group(2)}"
        return AgentReadiness(
            False, "ServiceAccountNotFound", f"{quoted}. ServiceAccount {account}: {SERVICE_ACCOUNT_FIX}"
        )
    if _FORBIDDEN.search(failure.message):
        return AgentReadiness(False, "PodsForbidden", quoted)
    return AgentReadiness(False, "FailedCreate", quoted)


def _pods_text(pods: Sequence[AgentPod]) -> str:
    shown = ", ".join(f"{p.name} on {p.node or 'no node'}" for p in pods[:MESSAGE_PODS])
    return shown + (f" and {len(pods) - MESSAGE_PODS} more" if len(pods) > MESSAGE_PODS else "")


def _pod_verdict(pods: Sequence[AgentPod]) -> AgentReadiness | None:
    pulling = [p for p in pods if any(reason in IMAGE_PULL_REASONS for reason, _, _ in p.waiting)]
    if pulling:
        reason, message, image = next(w for w in pulling[0].waiting if w[0] in IMAGE_PULL_REASONS)
        detail = f": {message}" if message else ""
        return AgentReadiness(
            False,
            "ImagePullFailed",
            f"{len(pulling)} agent pod(s) cannot pull {image or 'their image'} ({reason}{detail}): "
            f"{_pods_text(pulling)}. {IMAGE_FIX}",
        )
    looping = [p for p in pods if any(reason == CRASH_LOOP for reason, _, _ in p.waiting)]
    if looping:
        first = looping[0]
        exit_text = f"; last exit: {first.last_exit}" if first.last_exit else ""
        return AgentReadiness(
            False,
            "AgentCrashLooping",
            f"{len(looping)} agent pod(s) in {CRASH_LOOP}: {_pods_text(looping)} ({first.restarts} restarts"
            f"{exit_text}): see kubectl -n {first.namespace} logs {first.name} --previous",
        )
    return None


def judge(
    observation: AgentObservation | None,
    *,
    members: Sequence[str],
    silent: Sequence[str],
    now: datetime,
    silent_text: str = "",
) -> AgentReadiness:
    """The AgentReady condition of a pool (see the module docstring). `silent` are the members without a
    live report; `silent_text` names them for the message. Without an observation (none was made: an
    offline plan, or the lists failed), only the agents' reports count."""
    if observation is not None:
        state = observation.daemonset
        failure = _current_failure(observation, now)
        if failure is not None and state is not None:
            return _failure_verdict(failure, state)
        on_members = [p for p in observation.pods if p.node in set(members)]
        problem = _pod_verdict(on_members)
        if problem is not None:
            return problem
    if silent:
        message = f"{len(silent)} of {len(members)} members have no live {conventions.HEALTH_CONDITION} report" + (
            f": {silent_text}" if silent_text else ""
        )
        if observation is not None:
            state = observation.daemonset
            message += f"; {state.summary()}" if state is not None else "; the agent DaemonSet does not exist yet"
        return AgentReadiness(False, "WaitingForAgents", message)
    return AgentReadiness(True, "Reporting", f"{len(members)} of {len(members)} members report health")
