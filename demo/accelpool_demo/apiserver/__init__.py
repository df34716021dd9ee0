"""An emulated Kubernetes API server: the one the demo, the integration tests and the benchmarks run
accelpool against (the operator, kopf, the agents, the demo's simulators and kubectl), over HTTP.

It emulates, for the resources in `resources.RESOURCES` (and any a test declares in `resources`),
each behaviour pinned by a test in tests/integration/emulator/ (server-side apply, pod admission and
the scale subresource in tests/integration/demo/test_apiserver.py), and held against transcripts of a
real kube-apiserver v1.36.2 by tests/conformance (whose known_differences.py lists where it differs):

- creation: a name from `generateName`, the URL's namespace, uid, creationTimestamp, a resourceVersion;
  409 AlreadyExists for a taken name; the status dropped where the create strategy drops it (custom
  resources with a status subresource, the apps kinds), a pod's set to `Pending`, a PodDisruptionBudget's
  counts to 0; a Node's not-ready taint (admission), lifted once it is Ready (`Store.node_lifecycle_controller`);
- built-in kinds in their Go types' shape (`typed`: a Node's `spec: {}` and zero `nodeInfo`, no empty
  `labels`, `metadata.generation` only where the strategy keeps one), the fields their types lack dropped
  with a `Warning` header (a 400 or 422 with `fieldValidation=Strict`), and validated as the API server
  words it (`validation`: names, labels, a Node's taints and extended resources, Events);
- managed fields (`fields`): every write by a request records its field manager (`fieldManager`, or the
  User-Agent's first word) in `metadata.managedFields`, as the API server's field manager does;
- resourceVersions: one counter for every write, so a list's resourceVersion orders it against every
  event; 409 Conflict for a stale `metadata.resourceVersion` on PUT, merge or strategic PATCH and apply;
  a write that changes nothing stores nothing and keeps the resourceVersion;
- generation: +1 whenever a write changes `spec` (of the kinds that have one);
- PUT replaces (404 for a missing object, 400 for a name that is not the URL's); PATCH as a merge patch
  (RFC 7386), a JSON patch (RFC 6902 as json-patch v4 applies it), a strategic merge patch (merge keys,
  `$patch` and `$setElementOrder` directives: `patches`; 415 for custom resources), and server-side
  apply (field managers, conflicts, `force`, pruning: `apply`); errors in the patch handler's words;
- subresources: `status` (a write through it changes only the status, and for Nodes, pods and budgets
  the metadata too; a write through the resource never changes the status of a resource that has
  one), and ComputePools' `scale` (`kubectl scale`);
- events.k8s.io/v1 Events, the core/v1 Events seen through that API (`conversion`);
- the garbage collector (`garbage`): ownerReferences followed, deletions with `propagationPolicy`
  Background, Foreground or Orphan (`Store.garbage_collector`);
- CustomResourceDefinitions established by the CRD controllers, and any CRD's `scale` subresource;
- deletion: at once, or with `deletionTimestamp` while finalizers remain (no new finalizer can then
  be added), the object gone when the last one is removed; DeleteOptions' `preconditions` (409) and, for
  pods, graceful deletion (`pods`): `gracePeriodSeconds` (or the pod's terminationGracePeriodSeconds;
  0 for a pod on no node or finished) in `deletionTimestamp`/`deletionGracePeriodSeconds`, shortened
  by a later DELETE, the pod removed when it passes on the server's `clock` (the kubelet's part);
- evictions, `POST pods/NAME/eviction` with a policy/v1 (or v1beta1) Eviction, as eviction.go answers
  them: PodDisruptionBudgets honoured (429 with the budget's cause, 500 for two budgets, 429 for a
  budget not yet observed), pods a budget does not guard deleted, the DisruptionTarget condition set
  (`eviction`);
- PodDisruptionBudgets (`policy/v1`, status subresource, validated), their status kept by the
  disruption controller's rules (`disruption`: expected pods from the pods' ReplicaSets, Deployments
  and StatefulSets, which are stored, never run), synced before each request and every
  `SETTLE_SECONDS` on the server's `clock` (`Store.disruption_controller = False`: a controller that is
  behind);
- lists and watches by namespace, `labelSelector` and `fieldSelector` (the fields each resource can be
  selected by: `selectors`), lists paged by `limit` and `continue`, at an `Exact` resourceVersion (504 for
  one not reached yet), their options checked (`lists`); watches from a `resourceVersion` (410 Expired
  once it is older than the events kept), or from now with every object as ADDED first; objects entering
  or leaving a watch's selectors as ADDED or DELETED; BOOKMARKs; `timeoutSeconds`; every stream ended
  when the server shuts down (`close_watches`), as a real one does;
- admission: ComputePools by accelpool's CRD (strict decoding on `fieldValidation=Strict`, else
  unknown fields dropped; schema, defaults, CEL through Google's implementation: `crds`, `cel`), then
  by the stored ValidatingAdmissionPolicies (`policies`) and the stored ValidatingWebhookConfigurations'
  webhooks, called over HTTPS where `Store.services` says a Service is served (`webhooks`: the demo
  registers the chart's configuration and runs the operator's webhook), pods refused without their
  ServiceAccount or RuntimeClass, PodDisruptionBudgets
  validated as the policy group's validation does (`admission`);
- discovery (`/api`, `/apis`, group versions with kinds, short names, categories, subresources;
  `pods/eviction` as policy/v1 Eviction, which `kubectl drain` looks for), OpenAPI v3 for ComputePools
  (`kubectl explain cpool.spec`; `openapi`), and server-side tables for ComputePools (the CRD's printer
  columns), nodes (NAME STATUS ROLES AGE VERSION) and PodDisruptionBudgets (`tables`);
- kopf's peering resources (`clusterkopfpeerings.kopf.dev`, `kopfpeerings.kopf.dev`, v1), so operators
  can peer through it;
- a Kubernetes release (`ApiServer(kubernetes_version="1.37", runtime_config=..., feature_gates=...)`:
  `release`; 1.37 by default): `/version`, and the Dynamic Resource Allocation API it serves
  (`resource.k8s.io`: `dra`): DeviceClasses, ResourceSlices, ResourceClaims (with `status`) and their
  templates in v1, DeviceTaintRules (with `status`) in v1 from 1.37 or in v1beta2 where the runtime-config
  and the DRADeviceTaintRules gate serve it, discovery saying exactly that; the objects in their Go
  types' shape with their defaults (`dra_types`), validated in the server's words (`dra_validation`, CEL
  selectors compiled: `cel`); and kube-controller-manager's device-taint-eviction controller
  (`device_taints`): the rules' `EvictionInProgress` status, pods using a device with a NoExecute taint
  they do not tolerate deleted (`Store.device_taint_eviction_controller`);
- custom resources (`crds`): a stored CustomResourceDefinition's served versions are served at once
  (discovery with kind, scope, short names, categories and the status subresource) and stop when it is
  deleted; their objects get the schema's defaults, unknown fields pruned (400 with
  `fieldValidation=Strict`), the structural schema (`structural`) and, when a test gives the store an
  evaluator (`Store.cel`), the CRD's CEL rules, each refusal a 422 naming the fields (how the tests
  install Kueue's published CRDs: tests/support/kueue.py);
- for tests: refusals injected before anything is written (`ApiServer.fail`), kmock's reactions (a
  write stored and its answer replaced), a log of served requests with their User-Agent and status
  (`ApiServer.served`), listeners told of every request, direct access to the stored objects
  (`ApiServer.objects`, `serving()`), and a footprint bounded however long it runs (`remember`).

It does NOT emulate: authentication beyond a table of bearer tokens (`Store.users`, which only admission reads: a
request with no known token is the admin's), authorization and RBAC (every request is admitted); namespaces over
HTTP (kmock's URL parser reads `/api/v1/namespaces/NAME` as a namespace prefix: they are stored with
`RunningApiServer.put`) and their lifecycle (objects may be created in a namespace that does not exist); controllers
other than the disruption controller, the device-taint-eviction controller and the node lifecycle controller's
lifting of the not-ready taint (no pod is scheduled or run, no claim allocated, no DaemonSet status written:
`accelpool_demo.daemonsets`, the demo's kubelet and its DRA scheduler in `accelpool_demo.dra` play those; no
ReplicaSet replaces an evicted pod); the estimated cost of a DRA selector's CEL; a kubelet's view of a terminating
pod (its phase and Ready stay as they were until it is removed; a node that is down still lets it go); defaulting of
pods (no terminationGracePeriodSeconds of 30: without one a pod is deleted at once); admission other than the above
(no quotas, LimitRanges, Pod Security, mutating webhooks, defaulting or validation of other built-in kinds; the CEL
rules of installed CRDs without `Store.cel`, their version conversion, `format` checks and printer columns);
strategic- merge merge keys other than those `typed` lists; `dryRun` (an eviction or DELETE asking for it is a 400);
collection deletes; OpenAPI v2 and built-in kinds' OpenAPI; tables of other kinds beyond NAME and AGE; protobuf;
TLS.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import kmock

from accelpool_core.credentials import Credentials
from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import conversion, dra
from accelpool_demo.apiserver.release import DEFAULT_VERSION, Release
from accelpool_demo.apiserver.resources import RESOURCES, VERBS, parse_path
from accelpool_demo.apiserver.served import Fault, RequestLog, Served
from accelpool_demo.apiserver.server import ApiServer
from accelpool_demo.apiserver.writes import NAME_ALPHABET

__all__ = [
    "NAME_ALPHABET",
    "RESOURCES",
    "VERBS",
    "ApiServer",
    "Fault",
    "Release",
    "RequestLog",
    "RunningApiServer",
    "Served",
    "serving",
]


@dataclass
class RunningApiServer:
    """An `ApiServer` listening on 127.0.0.1, and what a test does with it."""

    server: ApiServer
    url: str

    def client(self, user_agent: str = "accelpool-test") -> KubeClient:
        """A client of it (close it, or use it as `async with`)."""
        return KubeClient(Credentials(server=self.url), user_agent=user_agent)

    def get(self, path: str) -> dict[str, Any] | None:
        """The stored object at an API path (`/api/v1/nodes/a`), or None (a resource.k8s.io/v1beta2 path reads
        the v1 storage, as that version shows it)."""
        resource, namespace, name, _ = parse_path(path)
        assert name is not None, f"{path} names no object"
        found = self.server.store.get(kmock.resource(dra.STORED_AS.get(resource, resource)), namespace, name)
        return conversion.from_storage(resource, found) if found is not None and resource in dra.STORED_AS else found

    def list(self, path: str) -> list[dict[str, Any]]:
        """The stored objects of a collection path (`/api/v1/namespaces/x/pods`, `/api/v1/nodes`)."""
        resource, namespace, _, _ = parse_path(path)
        found = self.server.store.list(kmock.resource(dra.STORED_AS.get(resource, resource)), namespace)
        return [conversion.from_storage(resource, obj) for obj in found] if resource in dra.STORED_AS else found

    def put(self, path: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Store an object at a collection path as it is (stamped with what it lacks), with its event."""
        resource, namespace, _, _ = parse_path(path)
        body = {**obj, "metadata": {**(obj.get("metadata") or {})}}
        if namespace is not None:
            body["metadata"]["namespace"] = namespace
        if resource in dra.STORED_AS:
            stored = self.server.store.put(dra.STORED_AS[resource], conversion.to_storage(resource, body))
            return conversion.from_storage(resource, stored)
        return self.server.store.put(resource, body)

    def fail(self, prefix: str, status: int, *, times: int | None = 1) -> Fault:
        """Refuse requests whose `METHOD /path` starts with `prefix` (`"PATCH /api/v1/nodes/a"`)."""
        return self.server.fail(prefix, status, times=times)

    @property
    def served(self) -> RequestLog:
        return self.server.served


SETTLE_SECONDS = 0.2
"""How often, between requests, the store's controllers catch up (`Store.settle`): watchers see a graceful
deletion end, or a budget's new status, within this much of the clock's time without a request."""


async def _settling(server: ApiServer) -> None:
    while True:
        await asyncio.sleep(SETTLE_SECONDS)
        await server.store.settle()


@contextlib.asynccontextmanager
async def serving(
    *,
    port: int = 0,
    remember: int | None = None,
    clock: Callable[[], float] = time.time,
    kubernetes_version: str = DEFAULT_VERSION,
    runtime_config: Mapping[str, bool] | None = None,
    feature_gates: Mapping[str, bool] | None = None,
) -> AsyncIterator[RunningApiServer]:
    """An `ApiServer` on 127.0.0.1 (`port`, or a free one) until the block ends (`clock`, `kubernetes_version`,
    `runtime_config`, `feature_gates`: see `ApiServer`; `release` for what they serve)."""
    server = ApiServer(
        remember=remember,
        clock=clock,
        kubernetes_version=kubernetes_version,
        runtime_config=dict(runtime_config or {}),
        feature_gates=dict(feature_gates or {}),
    )
    async with server, kmock.Server(server, port=port or None) as http:
        settling = asyncio.create_task(_settling(server))
        try:
            yield RunningApiServer(server, str(http.url).rstrip("/"))
        finally:
            settling.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await settling
            server.close_watches()
