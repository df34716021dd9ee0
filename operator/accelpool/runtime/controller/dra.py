"""DRA's objects as the controller reads and writes them: `DraCache` and `DraWriter`.

Read at every resync, and at every pass while some pool has `allocation: DRA` or accelpool's DRA objects are
left to delete (a new driver taint or a slice published for a joining member must count at once): discovery
of `resource.k8s.io` (which versions serve `devicetaintrules`: `accelpool.decide.dra.support`, checked again
at every resync), NVIDIA's ResourceSlices (`fieldSelector=spec.driver=gpu.nvidia.com`, only while a pool is
DRA), accelpool's DeviceTaintRules, DeviceClasses and ComputeDomains (by label; a 404 for ComputeDomains:
NVIDIA's DRA driver is not installed). An API error keeps what was read before and is logged: the pass goes on with it.

`DraWriter` writes a `DraPlan` after the node writes: each pool's DeviceClass by server-side apply when it
differs, each DeviceTaintRule created, patched (its annotations and taint) or deleted, then the evictions of
the pods using quarantined GPUs of pools that drain (one list of ResourceClaims per pass that has any), the
restarts of NVIDIA's kubelet plugin that static MIG needs, each pool's ComputeDomain, and last the classes
and rules of accelpool that no pool wants any more deleted. Writes report back into the cache.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from accelpool.decide.dra import compute_domain, evictions, support
from accelpool.decide.dra.plan import DraInputs, DraPlan
from accelpool.decide.dra.rules import GROUP, LABEL_SELECTOR, PLURAL, TaintRule
from accelpool.decide.dra.slices import DRIVER, read_slices
from accelpool.model import evictions as model_evictions
from accelpool.model.evictions import Answer, PodRef
from accelpool.runtime.controller.apiserver import TRANSIENT, Permit
from accelpool_api import conventions
from accelpool_core.kube import ApiError, KubeClient, NotFoundError

log = logging.getLogger("accelpool.runtime.controller")

VERSIONS = ("v1", "v1beta2")
SLICES = f"/apis/{GROUP}/v1/resourceslices"
CLASSES = f"/apis/{GROUP}/v1/deviceclasses"
CLAIMS = f"/apis/{GROUP}/v1/resourceclaims"
COMPUTE_DOMAINS = f"/apis/{compute_domain.API_VERSION}/{compute_domain.PLURAL}"
MANAGED = f"{conventions.MANAGED_BY_LABEL}={conventions.MANAGED_BY}"
FIELD_MANAGER = "accelpool"


def rules_path(version: str) -> str:
    return f"/apis/{GROUP}/{version}/{PLURAL}"


class DraCache:
    """What the controller last read or wrote of DRA (see the module docstring)."""

    def __init__(self, client: KubeClient, setting: support.Setting) -> None:
        self._client = client
        self._setting = setting
        self._served: frozenset[str] | None = None
        self._group_served = False
        """`resource.k8s.io/v1` is served (Kubernetes 1.34+): there is anything to list."""
        self._slices: list[dict[str, Any]] = []
        self.rules: dict[str, dict[str, Any]] = {}
        self.classes: dict[str, dict[str, Any]] = {}
        self.compute_domains: dict[tuple[str, str], dict[str, Any]] = {}
        self.compute_domains_served = False

    def forget_discovery(self) -> None:
        """Discover again at the next load (every resync: a cluster upgrade may serve the rules now)."""
        self._served = None

    @property
    def holds_objects(self) -> bool:
        """accelpool's DRA objects were found at the last load: they are read (and deleted) until none is left,
        even once no pool is `allocation: DRA` any more."""
        return bool(self.rules or self.classes or self.compute_domains)

    @property
    def inputs(self) -> DraInputs:
        rules = tuple(r for r in (TaintRule.from_body(b) for b in self.rules.values()) if r is not None)
        return DraInputs(
            slices=read_slices(self._slices),
            rules=rules,
            support=support.rule_support(self._served or frozenset(), self._setting),
            compute_domains=dict(self.compute_domains),
        )

    async def load(self, *, slices: bool = True) -> None:
        """Reads what the module docstring says; `slices` False leaves NVIDIA's ResourceSlices unread (no pool is
        `allocation: DRA`: only accelpool's own objects are looked for, to delete)."""
        if self._served is None:
            self._served = await self._discover()
        if not self._group_served:
            self._slices, self.rules, self.classes, self.compute_domains = [], {}, {}, {}
            return
        try:
            self._slices = await self._client.list(SLICES, field_selector=f"spec.driver={DRIVER}") if slices else []
            self.classes = {c["metadata"]["name"]: c for c in await self._client.list(CLASSES, label_selector=MANAGED)}
            version = support.rule_support(self._served, self._setting).version
            if version is not None:
                listed = await self._client.list(rules_path(version), label_selector=LABEL_SELECTOR)
                self.rules = {r["metadata"]["name"]: r for r in listed}
        except ApiError as error:
            log.warning("DRA objects could not be listed (the last ones read are used): %s", error)
        try:
            listed = await self._client.list(COMPUTE_DOMAINS, label_selector=MANAGED)
        except NotFoundError:  # NVIDIA's DRA driver (its ComputeDomain CRD) is not installed
            self.compute_domains, self.compute_domains_served = {}, False
        except ApiError as error:
            log.warning("ComputeDomains could not be listed (the last ones read are used): %s", error)
        else:
            self.compute_domains_served = True
            self.compute_domains = {(d["metadata"]["namespace"], d["metadata"]["name"]): d for d in listed}

    async def _discover(self) -> frozenset[str]:
        served: set[str] = set()
        for version in VERSIONS:
            try:
                found = await self._client.get_or_none(f"/apis/{GROUP}/{version}")
            except ApiError as error:
                log.warning("discovery of %s/%s failed: %s", GROUP, version, error)
                continue
            names = {r.get("name") for r in (found or {}).get("resources") or [] if isinstance(r, Mapping)}
            if version == "v1":
                self._group_served = found is not None
            if PLURAL in names:
                served.add(version)
        return frozenset(served)


@dataclass
class DraWrites:
    written: list[tuple[str, str]] = field(default_factory=list)
    errors: list[tuple[str, Exception, tuple[str, ...]]] = field(default_factory=list)
    evictions: list[tuple[str, Answer]] = field(default_factory=list)
    """(pool, answer) of each eviction of a pod on a quarantined GPU."""


def _pool_of(body: Mapping[str, Any]) -> str:
    return str(((body.get("metadata") or {}).get("labels") or {}).get(conventions.POOL_LABEL) or "")


class DraWriter:
    """Writes a pass's `DraPlan` (see the module docstring). One per controller."""

    def __init__(
        self, client: KubeClient, cache: DraCache, plugin_namespace: str | None = None, plugin_selector: str = ""
    ) -> None:
        self._client = client
        self._cache = cache
        self._plugin_namespace = plugin_namespace
        self._plugin_selector = plugin_selector
        self._restarted: dict[str, str] = {}
        """Node → the MIG config its kubelet plugin was restarted for (once per layout)."""
        self._visited: dict[PodRef, float] = {}
        """Pod → when its eviction was last asked for (a drain of quarantined GPUs)."""

    async def write(self, plan: DraPlan, permit: Permit) -> DraWrites:
        writes = DraWrites()
        for name, body in sorted(plan.classes.items()):
            stored = self._cache.classes.get(name)
            if stored is not None and _same_class(stored, body):
                continue
            await self._do(
                writes,
                permit,
                "apply",
                "deviceclasses",
                f"DeviceClass {name}",
                _pool_of(body),
                functools.partial(self._apply_class, name, body),
            )
        for name, body in sorted(plan.rules.items()):
            stored = self._cache.rules.get(name)
            await self._rule(name, body, stored, plan, writes, permit)
        for name, stored in sorted(self._cache.rules.items()):
            if name not in plan.rules and TaintRule.from_body(stored) is not None:
                version = str(stored.get("apiVersion", "")).rpartition("/")[2] or "v1"
                await self._do(
                    writes,
                    permit,
                    "delete",
                    PLURAL,
                    f"DeviceTaintRule {name}",
                    _pool_of(stored),
                    functools.partial(self._delete_rule, version, name),
                )
        await self._drain(plan, writes, permit)
        await self._restart_plugins(plan, writes, permit)
        await self._compute_domains(plan, writes, permit)
        for name, stored in sorted(self._cache.classes.items()):
            if name not in plan.classes:
                await self._do(
                    writes,
                    permit,
                    "delete",
                    "deviceclasses",
                    f"DeviceClass {name}",
                    _pool_of(stored),
                    functools.partial(self._delete_class, name),
                )
        return writes

    async def _drain(self, plan: DraPlan, writes: DraWrites, permit: Permit) -> None:
        """Evicts the pods whose claims hold a quarantined GPU (`accelpool.decide.dra.evictions`), each at most every
        `conventions.DRAIN_RETRY_SECONDS`: a PodDisruptionBudget's refusal is tried again later."""
        if not plan.drains:
            self._visited.clear()
            return
        try:
            claims = await self._client.list(CLAIMS)
        except TRANSIENT as error:
            log.warning("ResourceClaims could not be listed to drain quarantined GPUs: %s", error)
            return
        now = asyncio.get_running_loop().time()
        wanted: set[PodRef] = set()
        for pool, drain in sorted(plan.drains.items()):
            for pod in evictions.pods_using(claims, drain.devices):
                wanted.add(pod)
                last = self._visited.get(pod)
                if last is not None and now - last < conventions.DRAIN_RETRY_SECONDS:
                    continue
                permit.check()
                self._visited[pod] = now
                answer = await self._evict(pod, drain.grace_seconds)
                writes.evictions.append((pool, answer))
                if answer.result == "evicted":
                    writes.written.append(("create", "pods/eviction"))
        self._visited = {pod: at for pod, at in self._visited.items() if pod in wanted}

    async def _compute_domains(self, plan: DraPlan, writes: DraWrites, permit: Permit) -> None:
        """Creates each pool's ComputeDomain (its spec is immutable: an existing one is left as it is) and deletes
        accelpool's that no pool wants (a pool deleted, or its namespace changed). Nothing where NVIDIA's
        ComputeDomain CRD is not installed: the pool's status.dra.computeDomain then has no status."""
        if not self._cache.compute_domains_served:
            return
        for (namespace, name), body in sorted(plan.compute_domains.items()):
            if (namespace, name) in self._cache.compute_domains:
                continue
            path = f"/apis/{compute_domain.API_VERSION}/namespaces/{namespace}/{compute_domain.PLURAL}"
            await self._do(
                writes,
                permit,
                "create",
                compute_domain.PLURAL,
                f"ComputeDomain {namespace}/{name}",
                _pool_of(body),
                functools.partial(self._create_domain, path, (namespace, name), body),
            )
        for (namespace, name), stored in sorted(self._cache.compute_domains.items()):
            if (namespace, name) in plan.compute_domains:
                continue
            path = f"/apis/{compute_domain.API_VERSION}/namespaces/{namespace}/{compute_domain.PLURAL}/{name}"
            await self._do(
                writes,
                permit,
                "delete",
                compute_domain.PLURAL,
                f"ComputeDomain {namespace}/{name}",
                _pool_of(stored),
                functools.partial(self._delete_domain, path, (namespace, name)),
            )

    async def _create_domain(self, path: str, key: tuple[str, str], body: dict[str, Any]) -> None:
        self._cache.compute_domains[key] = await self._client.create(path, body)

    async def _delete_domain(self, path: str, key: tuple[str, str]) -> None:
        await self._client.delete(path)
        self._cache.compute_domains.pop(key, None)

    async def _restart_plugins(self, plan: DraPlan, writes: DraWrites, permit: Permit) -> None:
        """Deletes NVIDIA's kubelet plugin pod on each member whose applied MIG layout its slices do not show (its
        DaemonSet starts it again, and it publishes the MIG devices it finds), once per node and layout."""
        self._restarted = {node: config for node, config in self._restarted.items() if node in plan.stale_mig}
        if self._plugin_namespace is None:
            return
        for node, config in sorted(plan.stale_mig.items()):
            if self._restarted.get(node) == config:
                continue
            permit.check()
            path = f"/api/v1/namespaces/{self._plugin_namespace}/pods"
            try:
                pods = await self._client.list(
                    path, label_selector=self._plugin_selector, field_selector=f"spec.nodeName={node}"
                )
                for pod in pods:
                    name = str(pod["metadata"]["name"])
                    if "kubelet-plugin" in name:
                        await self._client.delete(f"{path}/{name}")
                        writes.written.append(("delete", "pods"))
                        log.info("restarted NVIDIA's DRA kubelet plugin %s on %s for MIG config %s", name, node, config)
            except TRANSIENT as error:
                writes.errors.append((f"restarting the DRA kubelet plugin on {node}", error, ()))
                continue
            self._restarted[node] = config

    async def _evict(self, pod: PodRef, grace_seconds: int | None) -> Answer:
        try:
            await self._client.create(
                model_evictions.eviction_path(pod), model_evictions.eviction_body(pod, grace_seconds)
            )
        except ApiError as error:
            return model_evictions.read_answer(pod, error.status, error.message, error.causes)
        except TRANSIENT as error:
            return Answer(pod, "failed", str(error) or type(error).__name__)
        return model_evictions.read_answer(pod, 201)

    async def _rule(
        self,
        name: str,
        body: dict[str, Any],
        stored: dict[str, Any] | None,
        plan: DraPlan,
        writes: DraWrites,
        permit: Permit,
    ) -> None:
        version = plan.rule_version or "v1"
        desired, found = TaintRule.from_body(body), TaintRule.from_body(stored) if stored else None
        if desired is not None and found is not None and desired.same_as(found):
            return
        what = f"DeviceTaintRule {name}"
        if stored is None:
            await self._do(
                writes,
                permit,
                "create",
                PLURAL,
                what,
                _pool_of(body),
                functools.partial(self._create_rule, version, body),
            )
        else:
            patch = {
                "metadata": {"annotations": _annotation_patch(stored, body)},
                "spec": {"taint": body["spec"]["taint"]},
            }
            await self._do(
                writes,
                permit,
                "patch",
                PLURAL,
                what,
                _pool_of(body),
                functools.partial(self._patch_rule, version, name, patch),
            )

    async def _do(
        self,
        writes: DraWrites,
        permit: Permit,
        verb: str,
        resource: str,
        what: str,
        pool: str,
        step: Callable[[], Awaitable[None]],
    ) -> None:
        permit.check()
        try:
            await step()
        except TRANSIENT as error:
            writes.errors.append((what, error, (pool,)))
            return
        writes.written.append((verb, resource))

    async def _apply_class(self, name: str, body: dict[str, Any]) -> None:
        stored = await self._client.apply(f"{CLASSES}/{name}", body, field_manager=FIELD_MANAGER)
        self._cache.classes[name] = stored

    async def _delete_class(self, name: str) -> None:
        await self._client.delete(f"{CLASSES}/{name}")
        self._cache.classes.pop(name, None)

    async def _create_rule(self, version: str, body: dict[str, Any]) -> None:
        stored = await self._client.create(rules_path(version), body)
        self._cache.rules[body["metadata"]["name"]] = stored

    async def _patch_rule(self, version: str, name: str, patch: dict[str, Any]) -> None:
        self._cache.rules[name] = await self._client.patch(f"{rules_path(version)}/{name}", patch)

    async def _delete_rule(self, version: str, name: str) -> None:
        await self._client.delete(f"{rules_path(version)}/{name}")
        self._cache.rules.pop(name, None)


def _annotation_patch(stored: Mapping[str, Any], body: Mapping[str, Any]) -> dict[str, str | None]:
    """The merge patch that makes the stored annotations accelpool's: its keys set, its dropped keys removed."""
    before = (stored.get("metadata") or {}).get("annotations") or {}
    after = body["metadata"]["annotations"]
    patch: dict[str, str | None] = {k: v for k, v in after.items() if before.get(k) != v}
    for key in before:
        if key.startswith(f"{conventions.DOMAIN}/") and key not in after:
            patch[key] = None
    return patch


def _same_class(stored: Mapping[str, Any], body: Mapping[str, Any]) -> bool:
    meta, want = stored.get("metadata") or {}, body["metadata"]
    labels = meta.get("labels") or {}
    return (
        stored.get("spec") == body["spec"]
        and all(labels.get(k) == v for k, v in want["labels"].items())
        and [(o.get("uid"), o.get("name")) for o in meta.get("ownerReferences") or []]
        == [(o["uid"], o["name"]) for o in want.get("ownerReferences") or []]
    )
