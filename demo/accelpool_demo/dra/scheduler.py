"""kube-scheduler for pods with ResourceClaims: which node a pod goes to and what its claims get, or why it
stays Pending, in kube-scheduler's words. Pure: `schedule` takes the cluster's objects (dicts) and says
what to write; the driver (`accelpool_demo.dra.components.DraScheduler`) writes it.

A pod is considered (`wants_scheduling`) when it has `spec.resourceClaims`, no `spec.nodeName`, no
scheduling gates, is not being deleted and names no other scheduler. Its claims (`resourceclaim.Name`)
must exist (a template's claim must have been created by the resourceclaim controller, and be the
pod's); until then the pod waits (`Waiting`: kube-scheduler's PreEnqueue keeps it out of the queue,
without an Event).

Each node, in name order (the real one scores feasible nodes and breaks ties at random; nothing is scored
here), goes through the filters of the default profile that a DRA pod meets, the first that fails giving
the node's reason (pkg/scheduler/framework/plugins):
- NodeUnschedulable: `spec.unschedulable` and no toleration of `node.kubernetes.io/unschedulable:NoSchedule`
  → `node(s) were unschedulable`;
- TaintToleration: a NoSchedule or NoExecute taint the pod does not tolerate → `node(s) had untolerated taint(s)`;
- NodeAffinity: `spec.nodeSelector` and required node affinity → `node(s) didn't match Pod's node affinity/selector`;
- NodeResourcesFit: one pod more than `allocatable.pods` → `Too many pods`; requests (containers'
  `requests`, or `limits` where there are none) above what is left of `allocatable` → `Insufficient <name>`;
- DynamicResources: an allocated claim whose `allocation.nodeSelector` the node does not match →
  `resourceclaim not available on the node`; claims to allocate that `accelpool_demo.dra.allocator` cannot
  place on the node → `cannot allocate all claims`.

The first node that passes gets the pod (`Bound`): each newly allocated claim gets the finalizer
`resource.kubernetes.io/delete-protection`, `status.allocation` and the pod in `status.reservedFor`; an
allocated claim not yet reserved for the pod gets the pod in `reservedFor`; then the pod is bound and the
Normal Event `Scheduled`, `Successfully assigned <ns>/<pod> to <node>`, recorded.

No node passing gives `Unschedulable` with the FitError message (pkg/scheduler/framework/types.go
`FitError.Error`): `0/<n> nodes are available: <count> <reason>, ...` (sorted), then the PostFilter
plugins' messages joined by `, `: DynamicResources' (`still not schedulable`, or, when a claim allocated
elsewhere is reserved by nobody but this pod, its allocation cleared and `deallocation of ResourceClaim
completed`) and DefaultPreemption's `preemption: 0/<n> nodes are available: <count> <why>, ...` where a
node failing a filter whose status is Unschedulable (NodeResourcesFit) counts as `No preemption victims
found for incoming pod` (nothing is ever preempted here) and one whose status is
UnschedulableAndUnresolvable (the others, DynamicResources included) as `Preemption is not helpful for
scheduling`; this message is the PodScheduled condition's (False, reason Unschedulable) and the Warning
Event `FailedScheduling`'s, as recorded from kube-scheduler v1.36.2
(../shared/fidelity/kubernetes/dra.yaml, dra-scheduling: `0/2 nodes are available: 1 Too many pods, 1
cannot allocate all claims. still not schedulable, preemption: 0/2 nodes are available: 1 No preemption
victims found for incoming pod, 1 Preemption is not helpful for scheduling.`). A request for a
DeviceClass that does not exist fails PreFilter for every node (`request <r>: device class <c> does not
exist`); an allocation error (a CEL selector failing to evaluate) is a scheduling error, `running
"DynamicResources" filter plugin: <error>`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from accelpool_demo.apiserver.device_taints import tolerates
from accelpool_demo.dra import allocator
from accelpool_demo.dra.claims import DELETE_PROTECTION_FINALIZER, NotCreatedYet, claim_name, owned_by
from accelpool_demo.dra.quantity import QuantityError, parse_quantity

SCHEDULER_NAME = "default-scheduler"
UNSCHEDULABLE_TAINT = "node.kubernetes.io/unschedulable"
MAX_RESERVED_FOR = 256
"""`resourceapi.ResourceClaimReservedForMaxSize`."""
NOT_HELPFUL = "Preemption is not helpful for scheduling"
NO_VICTIMS = "No preemption victims found for incoming pod"


@dataclass(frozen=True)
class Cluster:
    """What the scheduler reads: every node, pod and claim, the DeviceClasses by name, the ResourceSlices, and
    the DeviceTaintRules (empty where the cluster serves none)."""

    nodes: Sequence[Mapping[str, Any]]
    pods: Sequence[Mapping[str, Any]]
    claims: Sequence[Mapping[str, Any]]
    classes: Mapping[str, Mapping[str, Any]]
    slices: Sequence[Mapping[str, Any]]
    rules: Sequence[Mapping[str, Any]] = ()


@dataclass(frozen=True)
class ClaimUpdate:
    """A write to one claim: its finalizers (None: unchanged) and its new `status` (allocation, reservedFor)."""

    namespace: str
    name: str
    resource_version: str
    status: dict[str, Any]
    finalizers: list[str] | None = None


@dataclass(frozen=True)
class Bound:
    node: str
    claims: tuple[ClaimUpdate, ...]
    message: str


@dataclass(frozen=True)
class Unschedulable:
    message: str
    claims: tuple[ClaimUpdate, ...] = ()
    """The PostFilter's deallocation, where it made one."""


@dataclass(frozen=True)
class Waiting:
    reason: str


def _metadata(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    metadata: Mapping[str, Any] = obj.get("metadata") or {}
    return metadata


def wants_scheduling(pod: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    return (
        bool(spec.get("resourceClaims"))
        and not spec.get("nodeName")
        and not spec.get("schedulingGates")
        and not _metadata(pod).get("deletionTimestamp")
        and (spec.get("schedulerName") or SCHEDULER_NAME) == SCHEDULER_NAME
        and (pod.get("status") or {}).get("phase", "Pending") == "Pending"
    )


# ---------------------------------------------------------------- node filters


def tolerated(tolerations: Sequence[Mapping[str, Any]], taint: Mapping[str, Any]) -> bool:
    """core/v1 `Toleration.ToleratesTaint`, over any of the pod's tolerations."""
    return any(tolerates(t, taint) for t in tolerations)


def _quantity(value: Any) -> Fraction:
    try:
        return parse_quantity(str(value))
    except QuantityError:
        return Fraction(0)


def pod_requests(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """The containers' requests summed (a limit stands for a missing request), the init containers' maximum
    where it is larger (`resource.PodRequests`)."""
    total: dict[str, Fraction] = {}
    spec = pod.get("spec") or {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
            total[str(name)] = total.get(str(name), Fraction(0)) + _quantity(value)
    for container in spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        for name, value in {**(resources.get("limits") or {}), **(resources.get("requests") or {})}.items():
            total[str(name)] = max(total.get(str(name), Fraction(0)), _quantity(value))
    return total


def _affinity_matches(pod: Mapping[str, Any], node: Mapping[str, Any]) -> bool:
    spec = pod.get("spec") or {}
    labels = _metadata(node).get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    return required is None or allocator.node_selector_matches(required, node)


def node_reasons(
    pod: Mapping[str, Any], node: Mapping[str, Any], assigned: Sequence[Mapping[str, Any]]
) -> list[tuple[str, bool]]:
    """Why the node cannot take the pod before DRA is asked: the first failing filter's reasons, each with
    whether preemption could resolve it; empty when it passes. `assigned`: the pods bound to the node."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    node_spec = node.get("spec") or {}
    if node_spec.get("unschedulable") and not tolerated(
        tolerations, {"key": UNSCHEDULABLE_TAINT, "effect": "NoSchedule"}
    ):
        return [("node(s) were unschedulable", False)]
    for taint in node_spec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not tolerated(tolerations, taint):
            return [("node(s) had untolerated taint(s)", False)]
    if not _affinity_matches(pod, node):
        return [("node(s) didn't match Pod's node affinity/selector", False)]
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    reasons: list[tuple[str, bool]] = []
    running = [p for p in assigned if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if len(running) + 1 > _quantity(allocatable.get("pods", 0)):
        reasons.append(("Too many pods", True))
    used: dict[str, Fraction] = {}
    for other in running:
        for name, value in pod_requests(other).items():
            used[name] = used.get(name, Fraction(0)) + value
    for name, wanted in sorted(pod_requests(pod).items()):
        if wanted <= 0:
            continue
        capacity = _quantity(allocatable.get(name, 0))
        if wanted > capacity - used.get(name, Fraction(0)):
            reasons.append((f"Insufficient {name}", wanted <= capacity))
    return reasons


# ---------------------------------------------------------------- claims


def _reserved_for_pod(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = _metadata(pod).get("uid")
    return any(
        r.get("resource") == "pods" and r.get("uid") == uid
        for r in (claim.get("status") or {}).get("reservedFor") or []
    )


def _consumer(pod: Mapping[str, Any]) -> dict[str, Any]:
    return {"resource": "pods", "name": _metadata(pod).get("name"), "uid": _metadata(pod).get("uid")}


def pod_claims(pod: Mapping[str, Any], claims: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]] | Waiting:
    """The pod's claims in `spec.resourceClaims` order (`foreachPodResourceClaim`), or why it must wait."""
    namespace = _metadata(pod).get("namespace")
    by_name = {str(_metadata(c).get("name")): c for c in claims if _metadata(c).get("namespace") == namespace}
    found: list[Mapping[str, Any]] = []
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        try:
            name = claim_name(pod, entry)
        except NotCreatedYet as error:
            return Waiting(str(error))
        if name is None:
            continue
        claim = by_name.get(name)
        if claim is None:
            return Waiting(f'resourceclaim.resource.k8s.io "{name}" not found')
        if _metadata(claim).get("deletionTimestamp"):
            return Waiting(f'resourceclaim "{name}" is being deleted')
        if entry.get("resourceClaimTemplateName") and not owned_by(claim, pod):
            return Waiting(
                f"ResourceClaim {namespace}/{name} was not created for pod {namespace}/{_metadata(pod).get('name')}"
            )
        found.append(claim)
    return found


def _class_problem(claims: Sequence[Mapping[str, Any]], classes: Mapping[str, Mapping[str, Any]]) -> str | None:
    """PreFilter's check of every request's DeviceClass."""
    for claim in claims:
        if (claim.get("status") or {}).get("allocation"):
            continue
        for request in ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []:
            options = request.get("firstAvailable") or [request.get("exactly") or {}]
            for option in options:
                name = option.get("deviceClassName")
                if name and name not in classes:
                    return f"request {request.get('name')}: device class {name} does not exist"
    return None


# ---------------------------------------------------------------- the decision


def _fit_error(total: int, reasons: Counter[str], post_filter: str, preemption: Counter[str]) -> str:
    listed = sorted(f"{count} {reason}" for reason, count in reasons.items())
    message = f"0/{total} nodes are available: {', '.join(listed)}."
    preempt = sorted(f"{count} {why}" for why, count in preemption.items())
    return f"{message} {post_filter}, preemption: 0/{total} nodes are available: {', '.join(preempt)}."


def schedule(
    pod: Mapping[str, Any], cluster: Cluster, *, honour_rules: bool = True, now: str = ""
) -> Bound | Unschedulable | Waiting:
    """Where the pod goes and what its claims get, or why it does not go anywhere (module docstring)."""
    found = pod_claims(pod, cluster.claims)
    if isinstance(found, Waiting):
        return found
    total = len(cluster.nodes)
    if not total:
        return Unschedulable("no nodes available to schedule pods")
    for claim in found:
        status = claim.get("status") or {}
        full = len(status.get("reservedFor") or []) >= MAX_RESERVED_FOR
        if status.get("allocation") and not _reserved_for_pod(claim, pod) and full:
            return Unschedulable(_prefilter(total, "resourceclaim in use"))
    problem = _class_problem(found, cluster.classes)
    if problem:
        return Unschedulable(_prefilter(total, problem))
    unallocated = [c for c in found if not (c.get("status") or {}).get("allocation")]
    held = allocator.allocated_devices(cluster.claims)
    by_node: dict[str, list[Mapping[str, Any]]] = {}
    for other in cluster.pods:
        name = (other.get("spec") or {}).get("nodeName")
        if name:
            by_node.setdefault(str(name), []).append(other)
    reasons: Counter[str] = Counter()
    preemption: Counter[str] = Counter()
    unavailable: set[int] = set()
    for node in sorted(cluster.nodes, key=lambda n: str(_metadata(n).get("name"))):
        node_name = str(_metadata(node).get("name"))
        failed = node_reasons(pod, node, by_node.get(node_name, []))
        if not failed:
            for index, claim in enumerate(found):
                selector = ((claim.get("status") or {}).get("allocation") or {}).get("nodeSelector")
                if (claim.get("status") or {}).get("allocation") and not allocator.node_selector_matches(
                    selector, node
                ):
                    unavailable.add(index)
                    failed = [("resourceclaim not available on the node", False)]
                    break
        allocations: list[dict[str, Any]] | None = []
        if not failed and unallocated:
            try:
                allocations = allocator.allocate(
                    unallocated,
                    node,
                    cluster.classes,
                    cluster.slices,
                    rules=cluster.rules,
                    honour_rules=honour_rules,
                    allocated=held,
                    now=now,
                )
            except allocator.AllocationError as error:
                return Unschedulable(f'running "DynamicResources" filter plugin: {error}')
            if allocations is None:
                failed = [("cannot allocate all claims", False)]
        if failed:
            reasons.update(reason for reason, _ in failed)
            preemption[NO_VICTIMS if all(resolvable for _, resolvable in failed) else NOT_HELPFUL] += 1
            continue
        updates = _bind_updates(pod, found, unallocated, allocations or [])
        namespace, name = _metadata(pod).get("namespace"), _metadata(pod).get("name")
        return Bound(node_name, updates, f"Successfully assigned {namespace}/{name} to {node_name}")
    post_filter = "still not schedulable"
    deallocations: tuple[ClaimUpdate, ...] = ()
    for index in sorted(unavailable):
        claim = found[index]
        reserved = (claim.get("status") or {}).get("reservedFor") or []
        if not reserved or (len(reserved) == 1 and _reserved_for_pod(claim, pod)):
            status = {k: v for k, v in (claim.get("status") or {}).items() if k not in ("allocation", "reservedFor")}
            deallocations = (_update(claim, status),)
            post_filter = "deallocation of ResourceClaim completed"
            break
    return Unschedulable(_fit_error(total, reasons, post_filter, preemption), deallocations)


def _prefilter(total: int, message: str) -> str:
    """A PreFilter refusal: the same for every node (`FitError` with `PreFilterMsg`)."""
    return (
        f"0/{total} nodes are available: {message}. still not schedulable, preemption: 0/{total} nodes are "
        f"available: {total} {NOT_HELPFUL}."
    )


def _update(claim: Mapping[str, Any], status: dict[str, Any], finalizers: list[str] | None = None) -> ClaimUpdate:
    metadata = _metadata(claim)
    return ClaimUpdate(
        str(metadata.get("namespace")),
        str(metadata.get("name")),
        str(metadata.get("resourceVersion", "")),
        status,
        finalizers,
    )


def _bind_updates(
    pod: Mapping[str, Any],
    claims: Sequence[Mapping[str, Any]],
    unallocated: Sequence[Mapping[str, Any]],
    allocations: Sequence[dict[str, Any]],
) -> tuple[ClaimUpdate, ...]:
    """PreBind's writes: finalizer and allocation for the new allocations, the pod in every claim's reservedFor."""
    new = {id(c): a for c, a in zip(unallocated, allocations, strict=True)}
    updates: list[ClaimUpdate] = []
    for claim in claims:
        status = dict(claim.get("status") or {})
        reserved = list(status.get("reservedFor") or [])
        finalizers: list[str] | None = None
        if id(claim) in new:
            status["allocation"] = new[id(claim)]
            present = list(_metadata(claim).get("finalizers") or [])
            if DELETE_PROTECTION_FINALIZER not in present:
                finalizers = [*present, DELETE_PROTECTION_FINALIZER]
        elif _reserved_for_pod(claim, pod):
            continue
        status["reservedFor"] = [*reserved, _consumer(pod)]
        updates.append(_update(claim, status, finalizers))
    return tuple(updates)


@dataclass
class Pending:
    """The scheduling queue's memory of the pods it failed: the last message each got, so an unchanged failure
    is not recorded again at every attempt (the real one backs off between attempts)."""

    messages: dict[str, str] = field(default_factory=dict)

    def changed(self, key: str, message: str) -> bool:
        if self.messages.get(key) == message:
            return False
        self.messages[key] = message
        return True

    def forget(self, keep: set[str]) -> None:
        self.messages = {k: v for k, v in self.messages.items() if k in keep}
