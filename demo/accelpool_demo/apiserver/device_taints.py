"""kube-controller-manager's device-taint-eviction controller (k8s.io/kubernetes
pkg/controller/devicetainteviction/device_taint_eviction.go), as the emulated API server plays it: its
decisions, pure, from the stored DeviceTaintRules, ResourceSlices, ResourceClaims and pods (`step`);
`Store.settle` applies them, as it applies the garbage collector's (`garbage`).

What it decides:

- a device's NoExecute taints are those of its slice (of the pool's newest generation) and of every
  DeviceTaintRule with effect NoExecute whose selector matches its driver, pool and device
  (`ruleMatchesDevice`: each field set must match; no selector matches nothing);
- an allocated claim is to be evicted at the earliest `timeAdded` of a NoExecute taint on one of its
  devices, plus the smallest `tolerationSeconds` of the result's NoExecute tolerations that tolerate it
  (`claimEvictionTime`: one without seconds tolerates it for good; only a toleration whose effect is
  `NoExecute` counts, as the code checks `toleration.Effect == NoExecute`);
- a pod on a node is evicted when one of its claims, reserved for it, is due (`podEvictionTime`): it
  gets the condition `DisruptionTarget` (reason `DeletionByDeviceTaintManager`) and the Event
  `DeviceTaintManagerEviction` ("Marking for deletion"), then it is **deleted** with its own grace period,
  as a DELETE with a uid precondition: no Eviction API, so no PodDisruptionBudget is asked
  (`addConditionAndDeletePod`); a terminating pod is left alone;
- each DeviceTaintRule's status gets the condition `EvictionInProgress`, written by server-side apply
  (field manager `device-taint-eviction-controller`, subresource `status`), at once when the rule is new
  or its spec changed, and 10 s after a pod it names is found or evicted (`ruleStatusPeriod`), never
  sooner than 10 s after the last change for the same generation (`maybeUpdateRuleStatus`):
  `OtherEffect` for NoSchedule, `NoEffect` for None (with what NoExecute would do, computed once),
  `PodsPendingEviction` (True) while pods that are not terminating remain, `Completed` once some were
  evicted, `NotStarted` otherwise, and "N pods evicted since starting the controller." after any of them.

What it leaves out: the controller's workers and retries (the store applies a decision under its lock,
so nothing races), its metrics, PodGroups as claim consumers (DRAWorkloadResourceClaims is off).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelpool_demo.apiserver import dra, fields
from accelpool_demo.apiserver.writes import seconds_of, timestamp

JsonObject = dict[str, Any]
CONTROLLER = "device-taint-eviction-controller"
"""Its name: the field manager of its status writes, the component of its Events."""
EVICTION_IN_PROGRESS = "EvictionInProgress"
RULE_STATUS_PERIOD = 10.0
"""`ruleStatusPeriod`: the least time between two status updates of a rule for the same generation."""
NO_EXECUTE = "NoExecute"
INPUTS = frozenset({"v1/pods", dra.RESOURCE_CLAIMS_KEY, dra.RESOURCE_SLICES_KEY, dra.DEVICE_TAINT_RULES_KEY})
"""What it watches: a change to one may give it work."""
CONDITION_FIELDS = ("type", "status", "observedGeneration", "lastTransitionTime", "reason", "message")


# ---------------------------------------------------------------- taints and tolerations


@dataclass(frozen=True, order=True)
class Reason:
    """A taint that makes a claim's pods go (`trackedTaint`), ordered as the controller sorts them: rules
    first by name, then slice taints by driver, pool, device and index."""

    kind: int
    """0: a DeviceTaintRule's, 1: a ResourceSlice's."""
    name: str
    """The rule's name, or `driver/pool/device`."""
    index: int = 0
    """The taint's index in the slice device's taints."""
    uid: str = ""
    """The rule's uid."""


@dataclass(frozen=True)
class Eviction:
    """When pods using a claim are to be evicted, and why (`evictionAndReason`)."""

    when: float
    reasons: tuple[Reason, ...]

    def joined(self, other: Eviction | None) -> Eviction:
        if other is None:
            return self
        return Eviction(min(self.when, other.when), tuple(sorted(set(self.reasons) | set(other.reasons))))


def tolerates(toleration: Mapping[str, Any], taint: Mapping[str, Any]) -> bool:
    """k8s.io/dynamic-resource-allocation/resourceclaim `ToleratesTaint` (the node toleration's rules: an
    empty effect or key matches any, `Exists` any value, `Equal` (or none) the same value)."""
    if toleration.get("effect") and toleration.get("effect") != taint.get("effect"):
        return False
    if toleration.get("key") and toleration.get("key") != taint.get("key"):
        return False
    operator = toleration.get("operator") or "Equal"
    if operator == "Exists":
        return True
    return operator == "Equal" and (toleration.get("value") or "") == (taint.get("value") or "")


def rule_matches(rule: Mapping[str, Any], driver: str, pool: str, device: str) -> bool:
    """`ruleMatchesDevice`."""
    selector = (rule.get("spec") or {}).get("deviceSelector")
    if not isinstance(selector, Mapping):
        return False
    wanted = {"driver": driver, "pool": pool, "device": device}
    return all(selector.get(name) is None or selector.get(name) == value for name, value in wanted.items())


def _rule_taint(rule: Mapping[str, Any]) -> JsonObject:
    return dict((rule.get("spec") or {}).get("taint") or {})


def _effect(rule: Mapping[str, Any]) -> str:
    return str(_rule_taint(rule).get("effect") or "")


def _uid(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")


def _time(value: Any) -> float:
    """A taint's `timeAdded` in seconds (none: long ago, so at once)."""
    return seconds_of(str(value)) if value else 0.0


# ---------------------------------------------------------------- the cluster as the controller sees it


@dataclass
class Cluster:
    """The objects the controller reads (its informers' caches)."""

    rules: list[JsonObject] = field(default_factory=list)
    slices: list[JsonObject] = field(default_factory=list)
    claims: list[JsonObject] = field(default_factory=list)
    pods: list[JsonObject] = field(default_factory=list)

    def __post_init__(self) -> None:
        newest: dict[tuple[str, str], int] = {}
        for found in self.slices:
            spec = found.get("spec") or {}
            pool_id = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
            generation = int((spec.get("pool") or {}).get("generation") or 0)
            newest[pool_id] = max(newest.get(pool_id, generation), generation)
        self.devices: dict[tuple[str, str, str], JsonObject] = {}
        """The devices of each pool's newest generation, by driver, pool and name (`pool.getDevice`)."""
        for found in self.slices:
            spec = found.get("spec") or {}
            driver, pool = str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or "")
            if int((spec.get("pool") or {}).get("generation") or 0) != newest[(driver, pool)]:
                continue
            for device in spec.get("devices") or []:
                self.devices.setdefault((driver, pool, str(device.get("name") or "")), device)
        self.claims_by_name = {
            (str(c["metadata"].get("namespace")), _name(c)): c
            for c in self.claims
            if (c.get("status") or {}).get("allocation")
        }
        """The allocated claims (`allocatedClaims`)."""


def _results(claim: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    allocation = (claim.get("status") or {}).get("allocation") or {}
    return list((allocation.get("devices") or {}).get("results") or [])


def _evicting_taints(
    cluster: Cluster, result: Mapping[str, Any], rules: Iterable[Mapping[str, Any]]
) -> Iterator[tuple[Reason, Mapping[str, Any]]]:
    """`allEvictingDeviceTaints`: the NoExecute taints of the allocated device (its slice's, then the rules')."""
    driver, pool, name = (str(result.get(k) or "") for k in ("driver", "pool", "device"))
    device = cluster.devices.get((driver, pool, name)) or {}
    for index, taint in enumerate(device.get("taints") or []):
        if taint.get("effect") == NO_EXECUTE:
            yield Reason(1, f"{driver}/{pool}/{name}", index), taint
    for rule in rules:
        if rule_matches(rule, driver, pool, name):
            yield Reason(0, _name(rule), 0, _uid(rule)), _rule_taint(rule)


def claim_eviction(cluster: Cluster, claim: Mapping[str, Any], rules: Iterable[Mapping[str, Any]]) -> Eviction | None:
    """`claimEvictionTime`: when the pods of an allocated claim are to be evicted (None: not at all)."""
    rules = list(rules)
    when: float | None = None
    reasons: set[Reason] = set()
    for result in _results(claim):
        for reason, taint in _evicting_taints(cluster, result, rules):
            evict_at = _time(taint.get("timeAdded"))
            seconds: int | None = None
            for toleration in result.get("tolerations") or []:
                if toleration.get("effect") != NO_EXECUTE or not tolerates(toleration, taint):
                    continue
                if toleration.get("tolerationSeconds") is None:
                    break  # tolerated for good
                found = max(0, int(toleration["tolerationSeconds"]))
                seconds = found if seconds is None else min(seconds, found)
            else:
                if seconds is not None:
                    evict_at += seconds
                reasons.add(reason)
                when = evict_at if when is None else min(when, evict_at)
    return None if when is None else Eviction(when, tuple(sorted(reasons)))


def _claim_name(pod: Mapping[str, Any], entry: Mapping[str, Any]) -> tuple[str | None, bool]:
    """k8s.io/dynamic-resource-allocation/resourceclaim `Name`: the claim a pod's entry uses, and whether it
    was made from a template (then it must be the pod's own)."""
    if entry.get("resourceClaimName"):
        return str(entry["resourceClaimName"]), False
    if entry.get("resourceClaimTemplateName"):
        for status in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
            if status.get("name") == entry.get("name") and status.get("resourceClaimName"):
                return str(status["resourceClaimName"]), True
    return None, False


def _owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """`IsForPod`: the claim's controller is the pod."""
    return any(
        r.get("controller") is True and r.get("uid") == _uid(pod)
        for r in (claim.get("metadata") or {}).get("ownerReferences") or []
    )


def _reserved_for(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    """`IsReservedForPod`."""
    return any(
        not r.get("apiGroup") and r.get("resource") == "pods" and r.get("uid") == _uid(pod)
        for r in (claim.get("status") or {}).get("reservedFor") or []
    )


def pod_eviction(
    cluster: Cluster, pod: Mapping[str, Any], evictions: Mapping[tuple[str, str], Eviction]
) -> Eviction | None:
    """`podEvictionTime`: the joined evictions of a scheduled pod's claims reserved for it (None: it stays)."""
    if not (pod.get("spec") or {}).get("nodeName"):
        return None
    namespace = str((pod.get("metadata") or {}).get("namespace"))
    found: Eviction | None = None
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name, own = _claim_name(pod, entry)
        claim = cluster.claims_by_name.get((namespace, name)) if name is not None else None
        if claim is None or (own and not _owned_by(claim, pod)) or not _reserved_for(claim, pod):
            continue
        eviction = evictions.get((namespace, str(name)))
        if eviction is not None:
            found = eviction.joined(found)
    return found


def evictions_of(cluster: Cluster, rules: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Eviction]:
    """Every allocated claim's eviction, with these NoExecute rules (`allocatedClaims[].eviction`)."""
    rules = list(rules)
    found = {}
    for key, claim in cluster.claims_by_name.items():
        eviction = claim_eviction(cluster, claim, rules)
        if eviction is not None:
            found[key] = eviction
    return found


def pods_evicted(cluster: Cluster, rules: Iterable[Mapping[str, Any]]) -> dict[str, tuple[JsonObject, Eviction]]:
    """Every scheduled pod to be evicted (now or later), by uid, with its eviction."""
    evictions = evictions_of(cluster, rules)
    found = {}
    for pod in cluster.pods:
        eviction = pod_eviction(cluster, pod, evictions)
        if eviction is not None:
            found[_uid(pod)] = (pod, eviction)
    return found


def _evicting(rules: Iterable[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [rule for rule in rules if _effect(rule) == NO_EXECUTE]


# ---------------------------------------------------------------- a rule's status


def _pending(cluster: Cluster, rule: Mapping[str, Any], evicting: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """`countPendingPods`: pods not terminating whose eviction the rule is a reason of, and their namespaces."""
    uid = _uid(rule)
    namespaces: set[str] = set()
    count = 0
    for pod, eviction in pods_evicted(cluster, evicting).values():
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue
        if any(reason.uid == uid for reason in eviction.reasons if reason.kind == 0):
            count += 1
            namespaces.add(str((pod.get("metadata") or {}).get("namespace")))
    return count, len(namespaces)


def _tainted_devices(cluster: Cluster, rule: Mapping[str, Any]) -> tuple[int, int]:
    """`countTaintedDevices`: devices published in slices, and devices allocated in claims, the rule selects."""
    published = sum(1 for driver, pool, device in cluster.devices if rule_matches(rule, driver, pool, device))
    allocated = sum(
        1
        for claim in cluster.claims_by_name.values()
        for result in _results(claim)
        if rule_matches(rule, *(str(result.get(k) or "") for k in ("driver", "pool", "device")))
    )
    return published, allocated


def _counted(count: int, one: str, many: str) -> str:
    return one if count == 1 else many.format(count)


def rule_condition(cluster: Cluster, rule: Mapping[str, Any], evicted: int) -> JsonObject:
    """The `EvictionInProgress` condition the controller computes for a rule (`maybeUpdateRuleStatus`),
    without its lastTransitionTime; `evicted`: the pods it evicted for this rule since it started."""
    effect = _effect(rule)
    generation = int((rule.get("metadata") or {}).get("generation") or 0)
    condition: JsonObject = {"type": EVICTION_IN_PROGRESS, "status": "False", "observedGeneration": generation}
    message = ""
    if effect == NO_EXECUTE:
        pending, namespaces = _pending(cluster, rule, _evicting(cluster.rules))
        if pending > 0:
            condition.update(status="True", reason="PodsPendingEviction")
            message = _counted(pending, "1 pod needs", "{} pods need") + " to be evicted in "
            message += _counted(namespaces, "1 namespace.", "{} different namespaces.")
        else:
            condition["reason"] = "Completed" if evicted > 0 else "NotStarted"
    elif effect == "None":
        # as if the rule were the only NoExecute one (the controller simulates it on a copy)
        simulated = copy.deepcopy(dict(rule))
        simulated["spec"]["taint"]["effect"] = NO_EXECUTE
        pending, namespaces = _pending(cluster, rule, [simulated])
        published, allocated = _tainted_devices(cluster, rule)
        condition["reason"] = "NoEffect"
        message = _counted(published, "1 published device selected. ", "{} published devices selected. ")
        message += _counted(allocated, "1 allocated device selected. ", "{} allocated devices selected. ")
        message += _counted(pending, "1 pod would be evicted in ", "{} pods would be evicted in ")
        message += _counted(namespaces, "1 namespace ", "{} different namespaces ")
        message += (
            "if the effect was NoExecute. This information will not be updated again. "
            "Recreate the DeviceTaintRule to trigger an update."
        )
    else:
        condition["reason"] = "OtherEffect"
        message = "Eviction only happens for the NoExecute effect."
    if evicted > 0:
        message += (
            (" " if message else "")
            + _counted(evicted, "1 pod ", "{} pods ")
            + "evicted since starting the controller."
        )
    condition["message"] = message
    return condition


def _condition_of(rule: Mapping[str, Any]) -> Mapping[str, Any] | None:
    for condition in (rule.get("status") or {}).get("conditions") or []:
        if condition.get("type") == EVICTION_IN_PROGRESS:
            return dict(condition)
    return None


def with_condition(rule: Mapping[str, Any], condition: Mapping[str, Any], api_version: str, now: str) -> JsonObject:
    """The rule once the controller applied this condition to its status (server-side apply, forced, by
    `device-taint-eviction-controller` through the `status` subresource: it owns the condition's fields)."""
    result = copy.deepcopy(dict(rule))
    ordered = {name: condition.get(name) for name in CONDITION_FIELDS}
    conditions = [
        c for c in (result.get("status") or {}).get("conditions") or [] if c.get("type") != EVICTION_IN_PROGRESS
    ]
    result["status"] = {**(result.get("status") or {}), "conditions": [*conditions, ordered]}
    item = ("f:status", "f:conditions", "k:" + json.dumps({"type": EVICTION_IN_PROGRESS}, separators=(",", ":")))
    owned = {item, *((*item, f"f:{name}") for name in CONDITION_FIELDS)}
    entries = []
    for entry in fields.entries(result):
        if (entry.manager, entry.operation, entry.subresource) == (CONTROLLER, "Apply", "status"):
            continue
        entry.fields -= owned
        entries.append(entry)
    entries.append(fields.Entry(CONTROLLER, "Apply", api_version, "status", owned, now))
    result["metadata"]["managedFields"] = fields.encoded(entries)
    return result


def effect_changed(rule: JsonObject, old: Mapping[str, Any], now: str) -> JsonObject:
    """A rule update as the strategy prepares it: a new `timeAdded` when the effect changes and the write
    left the old one (pkg/registry/resource/devicetaintrule/strategy.go `PrepareForUpdate`)."""
    taint, before = _rule_taint(rule), _rule_taint(old)
    if taint.get("effect") == before.get("effect") or taint.get("timeAdded") != before.get("timeAdded"):
        return rule
    result = copy.deepcopy(rule)
    result["spec"]["taint"]["timeAdded"] = now
    return result


# ---------------------------------------------------------------- the controller's memory and its steps


@dataclass
class Memory:
    """What the controller remembers between steps (its work queue and counters)."""

    changed: bool = True
    """Whether one of its inputs changed since its last step."""
    wake: float | None = None
    """When it has work next without a change (a rule status due, a pod's eviction time)."""
    rules: dict[str, tuple[str, str]] = field(default_factory=dict)
    """Each rule seen: its uid and spec (JSON), to tell a new rule or a changed spec."""
    status_due: dict[str, float] = field(default_factory=dict)
    """Rules whose status is to be updated, and when."""
    evicted: dict[str, int] = field(default_factory=dict)
    """Pods evicted per rule uid since the controller started (`taintRuleStats`)."""
    evicted_pods: set[str] = field(default_factory=set)
    pending: dict[str, float] = field(default_factory=dict)
    """Pods (uid) known to be due for eviction, and when (`deletePodAt`)."""

    def due(self, now: float) -> bool:
        return self.changed or (self.wake is not None and self.wake <= now)


@dataclass
class PodEviction:
    pod: JsonObject
    reasons: tuple[Reason, ...]


@dataclass
class RuleStatus:
    rule: JsonObject
    condition: JsonObject
    """The new condition, with its lastTransitionTime."""


@dataclass
class Step:
    """What the controller does in one step, in order: rule statuses first (computed before this step's
    evictions, as its queue has the status of a new or changed rule before that rule's pods), then pods."""

    statuses: list[RuleStatus] = field(default_factory=list)
    evictions: list[PodEviction] = field(default_factory=list)
    cancelled: list[JsonObject] = field(default_factory=list)
    """Pods whose planned eviction no longer applies (its Event "Cancelling deletion")."""


def _spec(rule: Mapping[str, Any]) -> str:
    return json.dumps(rule.get("spec"), sort_keys=True)


def step(memory: Memory, cluster: Cluster, now: float) -> Step:
    """The controller's work at `now` (its decisions; `memory` updated in place)."""
    memory.changed = False
    done = Step()
    rules_by_name = {_name(rule): rule for rule in cluster.rules}
    for name in list(memory.rules):
        if name not in rules_by_name or memory.rules[name][0] != _uid(rules_by_name[name]):
            memory.evicted.pop(memory.rules.pop(name)[0], None)
            memory.status_due.pop(name, None)
    for name, rule in rules_by_name.items():
        seen = (_uid(rule), _spec(rule))
        if memory.rules.get(name) != seen:
            memory.rules[name] = seen
            memory.status_due[name] = now
    for name, when in sorted(memory.status_due.items()):
        if when > now:
            continue
        del memory.status_due[name]
        rule = rules_by_name[name]
        existing = _condition_of(rule)
        generation = int((rule.get("metadata") or {}).get("generation") or 0)
        if existing is not None and existing.get("lastTransitionTime"):
            since = now - seconds_of(str(existing["lastTransitionTime"]))
            if existing.get("observedGeneration") == generation and since < RULE_STATUS_PERIOD:
                memory.status_due[name] = now + RULE_STATUS_PERIOD - since
                continue
        condition = rule_condition(cluster, rule, memory.evicted.get(_uid(rule), 0))
        kept = existing.get("lastTransitionTime") if existing is not None else None
        if existing is None or {**condition, "lastTransitionTime": kept} != {
            k: existing.get(k) for k in CONDITION_FIELDS
        }:
            done.statuses.append(RuleStatus(rule, {**condition, "lastTransitionTime": timestamp(now)}))
    due = pods_evicted(cluster, _evicting(cluster.rules))
    for uid in list(memory.pending):
        if uid not in due:
            del memory.pending[uid]
            pod = next((p for p in cluster.pods if _uid(p) == uid), None)
            if pod is not None and uid not in memory.evicted_pods:
                done.cancelled.append(pod)
    for uid, (pod, eviction) in due.items():
        rules = [reason for reason in eviction.reasons if reason.kind == 0]
        if memory.pending.get(uid) != eviction.when:
            memory.pending[uid] = eviction.when
            for reason in rules:  # handlePod: a status update, later
                memory.status_due[reason.name] = min(
                    memory.status_due.get(reason.name, now + RULE_STATUS_PERIOD), now + RULE_STATUS_PERIOD
                )
        if eviction.when > now or uid in memory.evicted_pods:
            continue
        memory.evicted_pods.add(uid)
        if (pod.get("metadata") or {}).get("deletionTimestamp"):
            continue  # already being deleted: nothing to do, nothing counted
        done.evictions.append(PodEviction(pod, eviction.reasons))
        for reason in rules:
            memory.evicted[reason.uid] = memory.evicted.get(reason.uid, 0) + 1
            memory.status_due[reason.name] = min(
                memory.status_due.get(reason.name, now + RULE_STATUS_PERIOD), now + RULE_STATUS_PERIOD
            )
    later = [when for when in memory.status_due.values()]
    later += [when for uid, when in memory.pending.items() if when > now and uid not in memory.evicted_pods]
    memory.wake = min(later) if later else None
    return done


# ---------------------------------------------------------------- what it writes


def disruption_target(now: float) -> JsonObject:
    """The condition it sets on a pod before deleting it."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "lastProbeTime": None,
        "lastTransitionTime": timestamp(now),
        "reason": "DeletionByDeviceTaintManager",
        "message": "Device Taint manager: deleting due to NoExecute taint",
    }


def pod_event(pod: Mapping[str, Any], message: str, now: float) -> JsonObject:
    """Its Event about a pod (`emitPodDeletionEvent`, `emitCancelPodDeletionEvent`), as client-go's recorder
    writes a core/v1 Event (named after the pod and the time)."""
    metadata = pod.get("metadata") or {}
    stamp = timestamp(now)
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{metadata.get('name')}.{int(now * 1e9):x}", "namespace": metadata.get("namespace")},
        "involvedObject": {
            "kind": "Pod",
            "namespace": metadata.get("namespace"),
            "name": metadata.get("name"),
            "uid": metadata.get("uid"),
            "apiVersion": "v1",
        },
        "reason": "DeviceTaintManagerEviction",
        "message": message,
        "source": {"component": CONTROLLER},
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "type": "Normal",
        "eventTime": None,
        "reportingComponent": CONTROLLER,
        "reportingInstance": "",
    }
