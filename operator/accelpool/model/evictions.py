"""What a drain evicts from a node, how it asks the API server, and what the answers mean.

The planner decides which nodes drain (`DrainOrder`, from `accelpool.decide.planning.remediation.ladder`); the
controller's drain executor (`accelpool.runtime.controller.drain`) lists each one's pods, sorts them with
`sort_pods`, POSTs an `eviction_body` per pod to `eviction_path`, reads each answer with
`read_answer`, and hands the planner a `DrainObservation` for its next pass.

Kept on the node, as `kubectl drain` keeps them (k8s.io/kubectl `pkg/drain/filters.go`): pods a
DaemonSet controls (its controller would recreate them there at once, and the agent is one),
mirror pods of the kubelet's static pods (annotation `kubernetes.io/config.mirror`; they cannot be
evicted), accelpool's agent (it must keep checking the node) and completed pods (Succeeded or
Failed: they hold no device). Pods already terminating are waited for, not evicted again.

The answers, from the API server's eviction subresource (kubernetes `pkg/registry/core/pod/
storage/eviction.go`): 201 (or 200) the pod is being deleted with the grace period; 429
TooManyRequests "Cannot evict pod as it would violate the pod's disruption budget." with a
`DisruptionBudget` cause "The disruption budget <name> needs <n> healthy pods and has <m>
currently" (or "... is still being processed by the server."): refused, tried again later; 404 the
pod is gone; 500 "This pod has more than one PodDisruptionBudget, which the eviction subresource
does not support.", and any other error: failed, tried again later. A pod is never deleted
directly, and no PodDisruptionBudget is ever bypassed.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from accelpool.model import agents
from accelpool_api import conventions

DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"
"""`policyv1.DisruptionBudgetCause`: the cause type of a 429 a PodDisruptionBudget answers."""
EVICTION_API_VERSION = "policy/v1"
COMPLETED_PHASES = frozenset({"Succeeded", "Failed"})
_BUDGET_NAME = re.compile(r"The disruption budget (\S+) ")
Result = Literal["evicted", "blocked", "gone", "failed"]


@dataclass(frozen=True)
class DrainOrder:
    """A node the planner wants drained this pass."""

    node: str
    pool: str
    since: str
    """When its drain began (`LadderRecord.step_since`, RFC 3339): the observation is of this drain."""
    grace_seconds: int | None
    """deleteOptions.gracePeriodSeconds; None: each pod's own terminationGracePeriodSeconds."""


@dataclass(frozen=True)
class PodRef:
    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class Pods:
    """A node's pods as a drain sees them."""

    evict: tuple[PodRef, ...] = ()
    terminating: tuple[PodRef, ...] = ()
    """Being deleted already (evicted earlier, or by someone else): waited for."""
    kept: tuple[PodRef, ...] = ()
    """DaemonSet, mirror, agent and completed pods: they stay."""


@dataclass(frozen=True)
class Answer:
    """What the API server answered one eviction."""

    pod: PodRef
    result: Result
    message: str = ""
    budget: str | None = None
    """The PodDisruptionBudget that refused it (blocked)."""


@dataclass(frozen=True)
class DrainObservation:
    """One visit of the executor to a draining node: what it found and what its evictions got."""

    node: str
    since: str
    """The drain it belongs to (`DrainOrder.since`)."""
    answers: tuple[Answer, ...] = ()
    remaining: tuple[PodRef, ...] = ()
    """Pods the drain still waits for: not evicted yet (refused, failed) or still terminating."""

    @property
    def done(self) -> bool:
        return not self.remaining

    @property
    def blocked(self) -> tuple[Answer, ...]:
        return tuple(a for a in self.answers if a.result == "blocked")

    @property
    def evicted(self) -> tuple[Answer, ...]:
        return tuple(a for a in self.answers if a.result == "evicted")


def _kept(pod: Mapping[str, Any]) -> bool:
    metadata = pod.get("metadata") or {}
    owners = metadata.get("ownerReferences") or []
    if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners if isinstance(o, Mapping)):
        return True
    if conventions.MIRROR_POD_ANNOTATION in (metadata.get("annotations") or {}):
        return True
    labels = metadata.get("labels") or {}
    if labels.get(conventions.MANAGED_BY_LABEL) == conventions.MANAGED_BY and (
        labels.get(agents.AGENT_COMPONENT[0]) == agents.AGENT_COMPONENT[1]
    ):
        return True
    return str((pod.get("status") or {}).get("phase") or "") in COMPLETED_PHASES


def sort_pods(pods: Iterable[Mapping[str, Any]], node: str) -> Pods:
    """The node's pods: to evict, terminating, kept. Pods of other nodes are ignored (a selector the server
    did not apply changes nothing)."""
    evict: list[PodRef] = []
    terminating: list[PodRef] = []
    kept: list[PodRef] = []
    for pod in pods:
        if (pod.get("spec") or {}).get("nodeName") != node:
            continue
        metadata = pod.get("metadata") or {}
        ref = PodRef(str(metadata.get("namespace") or "default"), str(metadata.get("name") or ""))
        if _kept(pod):
            kept.append(ref)
        elif metadata.get("deletionTimestamp"):
            terminating.append(ref)
        else:
            evict.append(ref)
    key = str
    return Pods(tuple(sorted(evict, key=key)), tuple(sorted(terminating, key=key)), tuple(sorted(kept, key=key)))


def eviction_path(pod: PodRef) -> str:
    return f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/eviction"


def eviction_body(pod: PodRef, grace_seconds: int | None) -> dict[str, Any]:
    """A policy/v1 Eviction; without a grace period the pod's own terminationGracePeriodSeconds applies."""
    body: dict[str, Any] = {
        "apiVersion": EVICTION_API_VERSION,
        "kind": "Eviction",
        "metadata": {"name": pod.name, "namespace": pod.namespace},
    }
    if grace_seconds is not None:
        body["deleteOptions"] = {"gracePeriodSeconds": grace_seconds}
    return body


def read_answer(pod: PodRef, status: int, message: str = "", causes: Sequence[tuple[str, str]] = ()) -> Answer:
    """An eviction's answer: `status` the HTTP status (201 for success), `causes` the Status's (type, message)s."""
    if status < 300:
        return Answer(pod, "evicted")
    if status == 404:
        return Answer(pod, "gone")
    budget_causes = [text for kind, text in causes if kind == DISRUPTION_BUDGET_CAUSE]
    if status == 429 and budget_causes:
        found = _BUDGET_NAME.match(budget_causes[0])
        return Answer(pod, "blocked", budget_causes[0], found.group(1) if found else None)
    return Answer(pod, "failed", f"{status}: {message}" if message else str(status))


def observe(order: DrainOrder, pods: Pods, answers: Sequence[Answer]) -> DrainObservation:
    """The visit's outcome: every pod not evicted or gone still stands in the drain's way."""
    left = [a.pod for a in answers if a.result in ("blocked", "failed")]
    return DrainObservation(
        node=order.node,
        since=order.since,
        answers=tuple(answers),
        remaining=tuple(sorted([*left, *pods.terminating], key=str)),
    )


def pod_list(pods: Sequence[PodRef], shown: int = 5) -> str:
    """`ns/a, ns/b and 3 more`."""
    names = ", ".join(str(p) for p in pods[:shown])
    return names + (f" and {len(pods) - shown} more" if len(pods) > shown else "")
