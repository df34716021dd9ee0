"""kube-scheduler's structured allocator: which devices a pod's ResourceClaims get on one candidate node.
Pure: plain API objects (dicts) in, `status.allocation` values out.

After kubernetes/kubernetes `staging/src/k8s.io/dynamic-resource-allocation/structured/internal/stable/
allocator_stable.go` and `pools_stable.go` (the allocator kube-scheduler 1.36 runs with its default gates):

- pools (`GatherPools`): the slices that target the node (`spec.nodeName` equal to it, `allNodes`, or a
  `nodeSelector` it matches; with `perDeviceNodeSelection`, the devices that target it), grouped by driver
  and pool; only the highest `pool.generation` counts; a pool with fewer slices than its
  `resourceSliceCount` is incomplete, one with a device name twice invalid: neither is allocated from
  (and a request for `All` devices fails on it). Pools are tried in driver/pool order (Go's map order in
  the real one), slices by name, devices in slice order: the first device that fits is taken.
- a request (`validateDeviceRequest`): its DeviceClass must exist; `exactly` with `ExactCount` (`count`,
  default 1) or `All` (every device of the node's complete pools that matches, at least one, and every
  one of them must be free and tolerated: one taken or tainted device fails the request), or
  `firstAvailable` subrequests tried in order (results name `<request>/<subrequest>`).
- a device fits (`isSelectable`, `allocateDevice`) when it is not allocated already, nor taken by an
  earlier request of this allocation (with `adminAccess` it may be in use, just not twice in one claim);
  every selector of its class, then of the request, holds (CEL, `accelpool_demo.dra.cel`; an evaluation
  error stops the whole allocation: `AllocationError`); its NoSchedule and NoExecute taints are tolerated
  by the request's tolerations (`taintPreventsAllocation`, `resourceclaim.ToleratesTaint`; effect None
  never blocks); counters it consumes are available (`checkAvailableCounters`); the claim's
  `matchAttribute`/`distinctAttribute` constraints still hold. The search backtracks (`allocateOne`) and
  keeps the first complete solution; at most 32 devices per claim.
- device taints come from the slices and, when `honour_rules` is set, from DeviceTaintRules whose
  `deviceSelector` names the device's driver, pool and device (every field set must match; no selector
  matches nothing), each with the rule's taint (k8s.io/dynamic-resource-allocation `resourceslice/tracker`).
  kube-scheduler 1.36 without its DRADeviceTaintRules gate ignores rules: the recorded answer allocated
  the rule-tainted gpu-0 (../shared/fidelity/kubernetes/dra.yaml, dra-scheduling); from 1.37 (gate GA)
  rules are honoured. The 1.36 scheduler with the gate did not start at all in that recording.
- the result (`Allocate`): `devices.results[]` = `{request, driver, pool, device}`, `adminAccess: true` for
  an admin request, the request's `tolerations` when it has any; `devices.config[]` = the classes'
  configs (`source: FromClass`, once per class) then the claim's (`FromClaim`), each naming its requests
  unless it applies to all; `nodeSelector` = `metadata.name In [<node>]` for a node-local slice (else
  the slices' selectors merged, else none); `allocationTimestamp`.

Used by `accelpool_demo.dra.scheduler` for each candidate node; the unit tests hold it to the recorded
scheduler's decisions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from accelpool_demo.apiserver.device_taints import tolerates
from accelpool_demo.dra import cel
from accelpool_demo.dra.quantity import QuantityError, parse_quantity

DeviceId = tuple[str, str, str]
"""driver, pool, device: a device's identity (`<driver>/<pool>/<device>`)."""
MAX_RESULTS = 32
"""`resourceapi.AllocationResultsMaxSize`: devices per claim."""


class AllocationError(Exception):
    """Allocation cannot proceed on any node (a missing class, a CEL error, `All` on a pool being updated):
    the message is the allocator's, e.g. `claim ns/c, request gpu: could not retrieve device class x: ...`."""


def device_key(device_id: DeviceId) -> str:
    return "/".join(device_id)


# ---------------------------------------------------------------- node selection


def _requirement(requirement: Mapping[str, Any], values: Mapping[str, str]) -> bool:
    key, operator = requirement.get("key"), requirement.get("operator")
    wanted = [str(v) for v in requirement.get("values") or []]
    present = key in values
    value = values.get(str(key))
    if operator == "In":
        return present and value in wanted
    if operator == "NotIn":
        return not present or value not in wanted
    if operator == "Exists":
        return present
    if operator == "DoesNotExist":
        return not present
    if operator in ("Gt", "Lt") and present and len(wanted) == 1:
        try:
            have, limit = int(str(value)), int(wanted[0])
        except ValueError:
            return False
        return have > limit if operator == "Gt" else have < limit
    return False


def node_selector_matches(selector: Mapping[str, Any] | None, node: Mapping[str, Any]) -> bool:
    """A core/v1 NodeSelector (`nodeSelectorTerms`: any term; within one, all `matchExpressions` on labels and
    `matchFields` on `metadata.name`) against a Node (component-helpers `nodeaffinity.NewNodeSelector`)."""
    if selector is None:
        return True
    labels = (node.get("metadata") or {}).get("labels") or {}
    fields = {"metadata.name": str((node.get("metadata") or {}).get("name"))}
    for term in selector.get("nodeSelectorTerms") or []:
        expressions, matched_fields = term.get("matchExpressions") or [], term.get("matchFields") or []
        if not expressions and not matched_fields:
            continue  # an empty term matches nothing
        if all(_requirement(r, labels) for r in expressions) and all(_requirement(r, fields) for r in matched_fields):
            return True
    return False


def _targets(node: Mapping[str, Any], name: Any, all_nodes: Any, selector: Any) -> bool:
    if name:
        return bool(name == (node.get("metadata") or {}).get("name"))
    if all_nodes:
        return True
    if selector is not None:
        return node_selector_matches(selector, node)
    return False


# ---------------------------------------------------------------- pools


@dataclass
class Pool:
    driver: str
    name: str
    slices: list[Mapping[str, Any]] = field(default_factory=list)
    """The pool's slices at its highest generation that target the node."""
    all_slices: list[Mapping[str, Any]] = field(default_factory=list)
    """Every slice of the pool at that generation (counters are shared across them)."""
    incomplete: bool = False
    invalid: bool = False

    @property
    def label(self) -> str:
        return f"{self.driver}/{self.name}"


def gather_pools(slices: Iterable[Mapping[str, Any]], node: Mapping[str, Any]) -> list[Pool]:
    """`GatherPools`: the pools with devices for this node, newest generation only, incomplete/invalid marked."""
    newest: dict[tuple[str, str], int] = {}
    for s in slices:
        spec = s.get("spec") or {}
        key = (str(spec.get("driver")), str((spec.get("pool") or {}).get("name")))
        newest[key] = max(newest.get(key, 0), int((spec.get("pool") or {}).get("generation") or 0))
    pools: dict[tuple[str, str], Pool] = {}
    for s in sorted(slices, key=lambda s: str((s.get("metadata") or {}).get("name"))):
        spec = s.get("spec") or {}
        pool_spec = spec.get("pool") or {}
        key = (str(spec.get("driver")), str(pool_spec.get("name")))
        if int(pool_spec.get("generation") or 0) != newest[key]:
            continue
        if spec.get("perDeviceNodeSelection"):
            targeted = any(
                _targets(node, d.get("nodeName"), d.get("allNodes"), d.get("nodeSelector"))
                for d in spec.get("devices") or []
            )
        else:
            targeted = _targets(node, spec.get("nodeName"), spec.get("allNodes"), spec.get("nodeSelector"))
        pool = pools.setdefault(key, Pool(*key))
        pool.all_slices.append(s)
        if targeted:
            pool.slices.append(s)
    found: list[Pool] = []
    for key in sorted(pools):
        pool = pools[key]
        if not pool.slices:
            continue
        expected = int(((pool.all_slices[0].get("spec") or {}).get("pool") or {}).get("resourceSliceCount") or 0)
        pool.incomplete = len(pool.all_slices) != expected
        names = [str(d.get("name")) for s in pool.all_slices for d in (s.get("spec") or {}).get("devices") or []]
        pool.invalid = len(names) != len(set(names))
        found.append(pool)
    return found


# ---------------------------------------------------------------- taints


def taint_prevents_allocation(taints: Iterable[Mapping[str, Any]], tolerations: Sequence[Mapping[str, Any]]) -> bool:
    """`taintPreventsAllocation`: a NoSchedule or NoExecute taint no toleration tolerates (None never blocks)."""
    return any(
        t.get("effect") in ("NoSchedule", "NoExecute") and not any(tolerates(x, t) for x in tolerations) for t in taints
    )


def rule_selects(rule: Mapping[str, Any], device_id: DeviceId) -> bool:
    """A DeviceTaintRule's `deviceSelector` (`driver`, `pool`, `device`: each set field must match; none set
    or no selector: no device)."""
    selector = (rule.get("spec") or {}).get("deviceSelector")
    if not selector:
        return False
    wanted = [(selector.get(k), v) for k, v in zip(("driver", "pool", "device"), device_id, strict=True)]
    return any(w for w, _ in wanted) and all(not w or w == v for w, v in wanted)


def device_taints(
    device: Mapping[str, Any], device_id: DeviceId, rules: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """The device's taints: its slice's, then those of the rules that select it."""
    taints: list[Mapping[str, Any]] = list(device.get("taints") or [])
    taints += [(r.get("spec") or {}).get("taint") or {} for r in rules if rule_selects(r, device_id)]
    return taints


# ---------------------------------------------------------------- requests


@dataclass
class _Request:
    claim_index: int
    name: str
    """As results name it: `<request>` or `<request>/<subrequest>`."""
    base: str
    sub: str | None
    class_name: str
    device_class: Mapping[str, Any]
    selectors: list[str]
    mode: str
    count: int
    admin: bool
    tolerations: list[Mapping[str, Any]]
    all_devices: list[_Candidate] = field(default_factory=list)


@dataclass
class _Candidate:
    id: DeviceId
    device: Mapping[str, Any]
    slice: Mapping[str, Any]
    pool: Pool
    taints: list[Mapping[str, Any]]


@dataclass
class _Constraint:
    requests: set[str]
    attribute: str
    distinct: bool
    values: list[Any] = field(default_factory=list)

    def applies(self, request: _Request) -> bool:
        return not self.requests or request.base in self.requests or request.name in self.requests


def _attribute(device: Mapping[str, Any], driver: str, name: str) -> Any:
    """`lookupAttribute`: the fully qualified name, or the bare id when the domain is the driver's."""
    attributes = device.get("attributes") or {}
    if name in attributes:
        return attributes[name]
    domain, _, ident = name.partition("/")
    return attributes.get(ident) if domain == driver else None


class _TooMany(Exception):
    """`errAllocationResultMaxSizeExceeded`."""


def _claim_ref(claim: Mapping[str, Any]) -> str:
    metadata = claim.get("metadata") or {}
    return f"{metadata.get('namespace', '')}/{metadata.get('name', '')}"


def _counters(value: Mapping[str, Any]) -> dict[str, Fraction]:
    counted: dict[str, Fraction] = {}
    for name, counter in (value or {}).items():
        try:
            counted[str(name)] = parse_quantity(str((counter or {}).get("value", "0")))
        except QuantityError:
            counted[str(name)] = Fraction(0)
    return counted


class _Allocation:
    def __init__(
        self,
        claims: Sequence[Mapping[str, Any]],
        node: Mapping[str, Any],
        classes: Mapping[str, Mapping[str, Any]],
        pools: list[Pool],
        rules: Sequence[Mapping[str, Any]],
        allocated: frozenset[DeviceId] | set[DeviceId],
    ) -> None:
        self.claims, self.node, self.classes, self.pools, self.rules = claims, node, classes, pools, rules
        self.allocated = allocated
        self.allocating: dict[DeviceId, set[int]] = {}
        self.results: list[list[tuple[_Request, _Candidate]]] = [[] for _ in claims]
        self.requests: list[list[list[_Request]]] = []
        """Per claim, per request: the request itself, or its subrequests in order."""
        self.chosen: dict[tuple[int, int], int] = {}
        self.constraints: list[list[_Constraint]] = []
        self.matches: dict[tuple[DeviceId, int, int, int], bool] = {}
        self.consumed: dict[tuple[str, str, str], dict[str, Fraction]] = {}
        self.available: dict[tuple[str, str], dict[str, dict[str, Fraction]]] = {}
        self.candidates: dict[str, list[_Candidate]] = {}

    # -- set-up

    def prepare(self) -> None:
        for claim_index, claim in enumerate(self.claims):
            devices = ((claim.get("spec") or {}).get("devices")) or {}
            per_claim: list[list[_Request]] = []
            minimum = 0
            for raw in devices.get("requests") or []:
                name = str(raw.get("name"))
                if raw.get("firstAvailable"):
                    subs = [
                        self._request(claim_index, claim, raw, sub, f"{name}/{sub.get('name')}", name, sub.get("name"))
                        for sub in raw["firstAvailable"]
                    ]
                    per_claim.append(subs)
                    minimum += min(r.count for r in subs)
                else:
                    request = self._request(claim_index, claim, raw, raw.get("exactly") or {}, name, name, None)
                    per_claim.append([request])
                    minimum += request.count
            if minimum > MAX_RESULTS:
                raise AllocationError(
                    f"claim {_claim_ref(claim)}: number of requested devices {minimum} exceeds the claim limit of "
                    f"{MAX_RESULTS}"
                )
            self.requests.append(per_claim)
            constraints: list[_Constraint] = []
            for index, raw_constraint in enumerate(devices.get("constraints") or []):
                attribute = raw_constraint.get("matchAttribute") or raw_constraint.get("distinctAttribute")
                if not attribute:
                    where = f"claim {_claim_ref(claim)}, constraint #{index}"
                    raise AllocationError(f"{where}: empty constraint (unsupported constraint type?)")
                constraints.append(
                    _Constraint(
                        set(raw_constraint.get("requests") or []),
                        str(attribute),
                        distinct="distinctAttribute" in raw_constraint,
                    )
                )
            self.constraints.append(constraints)

    def _request(
        self,
        claim_index: int,
        claim: Mapping[str, Any],
        parent: Mapping[str, Any],
        spec: Mapping[str, Any],
        name: str,
        base: str,
        sub: Any,
    ) -> _Request:
        ref = f"claim {_claim_ref(claim)}, request {name}"
        selectors: list[str] = []
        for index, selector in enumerate(spec.get("selectors") or []):
            expression = (selector.get("cel") or {}).get("expression")
            if not expression:
                raise AllocationError(f"{ref}, selector #{index}: CEL expression empty (unsupported selector type?)")
            selectors.append(str(expression))
        class_name = str(spec.get("deviceClassName") or "")
        if not class_name:
            raise AllocationError(f"{ref}: missing device class name (unsupported request type?)")
        device_class = self.classes.get(class_name)
        if device_class is None:
            raise AllocationError(
                f"{ref}: could not retrieve device class {class_name}: "
                f'deviceclass.resource.k8s.io "{class_name}" not found'
            )
        mode = str(spec.get("allocationMode") or "ExactCount")
        admin = bool(spec.get("adminAccess")) if sub is None else False
        request = _Request(
            claim_index,
            name,
            base,
            None if sub is None else str(sub),
            class_name,
            device_class,
            selectors,
            mode,
            int(spec.get("count", 1) or 0) if mode == "ExactCount" else 0,
            admin,
            list(spec.get("tolerations") or []),
        )
        if mode == "All":
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocationError(
                        f"{ref}: asks for all devices, but resource pool {pool.label} is currently being updated"
                    )
                if pool.invalid:
                    raise AllocationError(
                        f"{ref}: asks for all devices, but resource pool {pool.label} is currently invalid"
                    )
                for candidate in self._candidates(pool):
                    if self._selectable(request, candidate, (claim_index, -1, -1)):
                        request.all_devices.append(candidate)
            request.count = len(request.all_devices)
        elif mode != "ExactCount":
            raise AllocationError(f"{ref}: unsupported count mode {mode}")
        return request

    def _candidates(self, pool: Pool) -> list[_Candidate]:
        if pool.label not in self.candidates:
            self.candidates[pool.label] = list(self._devices_of(pool))
        return self.candidates[pool.label]

    def _devices_of(self, pool: Pool) -> Iterable[_Candidate]:
        for s in pool.slices:
            spec = s.get("spec") or {}
            for device in spec.get("devices") or []:
                if spec.get("perDeviceNodeSelection") and not _targets(
                    self.node, device.get("nodeName"), device.get("allNodes"), device.get("nodeSelector")
                ):
                    continue
                device_id = (pool.driver, pool.name, str(device.get("name")))
                yield _Candidate(device_id, device, s, pool, device_taints(device, device_id, self.rules))

    # -- matching

    def _selectable(self, request: _Request, candidate: _Candidate, key: tuple[int, int, int]) -> bool:
        cache_key = (candidate.id, *key)
        if key[1] >= 0 and cache_key in self.matches:
            return self.matches[cache_key]
        variable = cel.device_variable(candidate.id[0], candidate.device)
        claim = self.claims[request.claim_index]
        result = True
        class_selectors = [
            str((s.get("cel") or {}).get("expression") or "")
            for s in (request.device_class.get("spec") or {}).get("selectors") or []
        ]
        for owner, selectors in (
            (f"class {request.class_name}", class_selectors),
            (f"claim {_claim_ref(claim)}", request.selectors),
        ):
            for index, expression in enumerate(selectors):
                try:
                    if not cel.matches(expression, variable):
                        result = False
                except cel.SelectorError as error:
                    raise AllocationError(
                        f"{owner}: selector #{index} on device {device_key(candidate.id)}: {error}"
                    ) from None
                if not result:
                    break
            if not result:
                break
        self.matches[cache_key] = result
        return result

    def _in_use(self, device_id: DeviceId) -> bool:
        return device_id in self.allocated or bool(self.allocating.get(device_id))

    def _counters_fit(self, candidate: _Candidate) -> bool:
        consumes = candidate.device.get("consumesCounters") or []
        if not consumes:
            return True
        pool_key = (candidate.pool.driver, candidate.pool.name)
        if pool_key not in self.available:
            sets: dict[str, dict[str, Fraction]] = {}
            for s in candidate.pool.all_slices:
                for counter_set in (s.get("spec") or {}).get("sharedCounters") or []:
                    sets[str(counter_set.get("name"))] = _counters(counter_set.get("counters") or {})
            for s in candidate.pool.all_slices:
                for device in (s.get("spec") or {}).get("devices") or []:
                    if (*pool_key, str(device.get("name"))) not in self.allocated:
                        continue
                    for use in device.get("consumesCounters") or []:
                        for name, value in _counters(use.get("counters") or {}).items():
                            counters = sets.setdefault(str(use.get("counterSet")), {})
                            counters[name] = counters.get(name, Fraction(0)) - value
            self.available[pool_key] = sets
        available = self.available[pool_key]
        for use in consumes:
            set_name = str(use.get("counterSet"))
            consumed = self.consumed.setdefault((*pool_key, set_name), {})
            for name, value in _counters(use.get("counters") or {}).items():
                if available.get(set_name, {}).get(name, Fraction(0)) < consumed.get(name, Fraction(0)) + value:
                    return False
        for use in consumes:
            consumed = self.consumed[(*pool_key, str(use.get("counterSet")))]
            for name, value in _counters(use.get("counters") or {}).items():
                consumed[name] = consumed.get(name, Fraction(0)) + value
        return True

    def _release_counters(self, candidate: _Candidate) -> None:
        for use in candidate.device.get("consumesCounters") or []:
            consumed = self.consumed[(candidate.pool.driver, candidate.pool.name, str(use.get("counterSet")))]
            for name, value in _counters(use.get("counters") or {}).items():
                consumed[name] -= value

    def _take(self, request: _Request, candidate: _Candidate, must: bool) -> bool:
        """`allocateDevice`: record the candidate for the request if it is free, tolerated and fits."""
        claim_index = request.claim_index
        if request.admin:
            if claim_index in self.allocating.get(candidate.id, set()):
                return False
        elif self._in_use(candidate.id):
            return False
        if taint_prevents_allocation(candidate.taints, request.tolerations):
            return False
        if not self._counters_fit(candidate):
            return False
        added: list[_Constraint] = []
        for constraint in self.constraints[claim_index]:
            if not constraint.applies(request):
                continue
            value = _attribute(candidate.device, candidate.id[0], constraint.attribute)
            fits = value is not None and (
                (value not in constraint.values)
                if constraint.distinct
                else (not constraint.values or value == constraint.values[0])
            )
            if not fits:
                for done in added:
                    done.values.pop()
                self._release_counters(candidate)
                if must:
                    raise AllocationError(
                        f"claim {_claim_ref(self.claims[claim_index])}, request {request.name}: cannot add device "
                        f"{device_key(candidate.id)} because a claim constraint would not be satisfied"
                    )
                return False
            constraint.values.append(value)
            added.append(constraint)
        self.allocating.setdefault(candidate.id, set()).add(claim_index)
        self.results[claim_index].append((request, candidate))
        return True

    def _untake(self, request: _Request, candidate: _Candidate) -> None:
        claim_index = request.claim_index
        for constraint in self.constraints[claim_index]:
            if constraint.applies(request):
                constraint.values.pop()
        self.allocating[candidate.id].discard(claim_index)
        self._release_counters(candidate)
        self.results[claim_index].pop()

    # -- the search

    def one(self, claim: int, request: int, sub: int, device: int, in_sub: bool) -> bool:
        """`allocateOne`: find a device for this slot and everything after it; True when all are allocated."""
        if claim >= len(self.claims):
            return True
        if request >= len(self.requests[claim]):
            try:
                return self.one(claim + 1, 0, 0, 0, False)
            except _TooMany:
                return False
        alternatives = self.requests[claim][request]
        if not in_sub and alternatives[0].sub is not None:
            all_too_many = True
            for index in range(len(alternatives)):
                try:
                    if self.one(claim, request, index, 0, True):
                        self.chosen[(claim, request)] = index
                        return True
                    all_too_many = False
                except _TooMany:
                    continue
            if all_too_many:
                raise _TooMany
            return False
        current = alternatives[sub]
        if current.mode == "All" and not current.all_devices:
            return False
        if device >= current.count:
            return self.one(claim, request + 1, 0, 0, False)
        if len(self.results[claim]) + current.count - device > MAX_RESULTS:
            raise _TooMany
        if current.mode == "All":
            candidate = current.all_devices[device]
            if not self._take(current, candidate, True):
                return False
            try:
                done = self.one(claim, request, sub, device + 1, in_sub)
            except _TooMany:
                self._untake(current, candidate)
                raise
            if not done:
                self._untake(current, candidate)
            return done
        usable = [p for p in self.pools if not p.incomplete and not p.invalid]
        if not current.admin:
            # Fewer free devices than still needed: no solution below (the real search finds none either,
            # trying each order of the devices; this saves trying them).
            free = sum(1 for p in usable for c in self._candidates(p) if not self._in_use(c.id))
            if free < current.count - device:
                return False
        for pool in usable:
            for candidate in self._candidates(pool):
                if current.admin:
                    if claim in self.allocating.get(candidate.id, set()):
                        continue
                elif self._in_use(candidate.id):
                    continue
                if not self._selectable(current, candidate, (claim, request, sub)):
                    continue
                if not self._take(current, candidate, False):
                    continue
                try:
                    done = self.one(claim, request, sub, device + 1, in_sub)
                except _TooMany:
                    self._untake(current, candidate)
                    raise
                if done:
                    return True
                self._untake(current, candidate)
        return False

    # -- the result

    def result(self, claim_index: int, now: str) -> dict[str, Any]:
        claim = self.claims[claim_index]
        results: list[dict[str, Any]] = []
        for request, candidate in self.results[claim_index]:
            entry: dict[str, Any] = {
                "request": request.name,
                "driver": candidate.id[0],
                "pool": candidate.id[1],
                "device": candidate.id[2],
            }
            if request.admin:
                entry["adminAccess"] = True
            if request.tolerations:
                entry["tolerations"] = [dict(t) for t in request.tolerations]
            results.append(entry)
        devices: dict[str, Any] = {"results": results}
        config = self._config(claim_index, claim)
        if config:
            devices["config"] = config
        allocation: dict[str, Any] = {"devices": devices}
        selector = self._node_selector(claim_index)
        if selector is not None:
            allocation["nodeSelector"] = selector
        if now:
            allocation["allocationTimestamp"] = now
        return allocation

    def _config(self, claim_index: int, claim: Mapping[str, Any]) -> list[dict[str, Any]]:
        spec_requests = ((claim.get("spec") or {}).get("devices") or {}).get("requests") or []
        entries: list[dict[str, Any]] = []
        ranges: dict[str, tuple[int, int]] = {}
        for request_index, alternatives in enumerate(self.requests[claim_index]):
            request = alternatives[self.chosen.get((claim_index, request_index), 0)]
            if request.class_name in ranges:
                start, end = ranges[request.class_name]
                for entry in entries[start:end]:
                    entry["requests"].append(request.name)
                continue
            start = len(entries)
            for config in (request.device_class.get("spec") or {}).get("config") or []:
                entries.append({"source": "FromClass", "requests": [request.name], **_configuration(config)})
            ranges[request.class_name] = (start, len(entries))
        for config in ((claim.get("spec") or {}).get("devices") or {}).get("config") or []:
            named = list(config.get("requests") or [])
            entry = {"source": "FromClaim", "requests": named, **_configuration(config)}
            if not named:
                entries.append(entry)
                continue
            for request_index, raw in enumerate(spec_requests):
                if raw.get("name") in named:
                    entries.append(dict(entry))
                    continue
                alternatives = self.requests[claim_index][request_index]
                if alternatives[0].sub is None:
                    continue
                chosen = alternatives[self.chosen.get((claim_index, request_index), 0)]
                if chosen.name in named:
                    entries.append(dict(entry))
        for entry in entries:
            if not entry["requests"] or len(entry["requests"]) == len(spec_requests):
                del entry["requests"]
        return [{k: e[k] for k in ("source", "requests", "opaque") if k in e} for e in entries]

    def _node_selector(self, claim_index: int) -> dict[str, Any] | None:
        expressions: list[Any] = []
        fields: list[Any] = []
        for _, candidate in self.results[claim_index]:
            spec = candidate.slice.get("spec") or {}
            source = candidate.device if spec.get("perDeviceNodeSelection") else spec
            if source.get("nodeName"):
                requirement = {"key": "metadata.name", "operator": "In", "values": [source["nodeName"]]}
                return {"nodeSelectorTerms": [{"matchFields": [requirement]}]}
            terms = (source.get("nodeSelector") or {}).get("nodeSelectorTerms") or []
            if len(terms) == 1:
                for requirement in terms[0].get("matchFields") or []:
                    if requirement not in fields:
                        fields.append(requirement)
                for requirement in terms[0].get("matchExpressions") or []:
                    if requirement not in expressions:
                        expressions.append(requirement)
        if not expressions and not fields:
            return None
        term: dict[str, Any] = {}
        if expressions:
            term["matchExpressions"] = expressions
        if fields:
            term["matchFields"] = fields
        return {"nodeSelectorTerms": [term]}


def _configuration(config: Mapping[str, Any]) -> dict[str, Any]:
    return {"opaque": dict(config["opaque"])} if config.get("opaque") else {}


def allocate(
    claims: Sequence[Mapping[str, Any]],
    node: Mapping[str, Any],
    classes: Mapping[str, Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    *,
    rules: Sequence[Mapping[str, Any]] = (),
    honour_rules: bool = True,
    allocated: frozenset[DeviceId] | set[DeviceId] = frozenset(),
    now: str = "",
) -> list[dict[str, Any]] | None:
    """`status.allocation` for each of `claims` (unallocated ones, in the pod's order) on `node`, or None when
    they cannot all be allocated there. `classes`: DeviceClasses by name; `allocated`: devices other claims
    hold (`allocated_devices`); `now`: the allocationTimestamp. `AllocationError` when allocation cannot
    proceed at all (a missing class, a CEL error)."""
    pools = gather_pools(list(slices), node)
    state = _Allocation(claims, node, classes, pools, rules if honour_rules else (), allocated)
    state.prepare()
    try:
        done = state.one(0, 0, 0, 0, False)
    except _TooMany:
        return None
    if not done:
        if any(p.invalid for p in pools):
            raise AllocationError("invalid resource pools were encountered")
        return None
    return [state.result(index, now) for index in range(len(claims))]


def allocated_devices(claims: Iterable[Mapping[str, Any]]) -> set[DeviceId]:
    """The devices allocated to these claims (`status.allocation.devices.results`), admin access aside: the
    scheduler's `allocatedDevices` (pkg/scheduler/framework/plugins/dynamicresources/allocateddevices.go)."""
    found: set[DeviceId] = set()
    for claim in claims:
        allocation = (claim.get("status") or {}).get("allocation") or {}
        for result in (allocation.get("devices") or {}).get("results") or []:
            if not result.get("adminAccess"):
                found.add((str(result.get("driver")), str(result.get("pool")), str(result.get("device"))))
    return found
