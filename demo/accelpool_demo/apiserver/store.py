"""The emulated API server's storage: objects by (resource, namespace, name), written one at a time.

Each write takes the lock, reads the stored object, computes the new one (`writes`, `apply`,
`admission`, `pods`, `eviction`), gives it the next resourceVersion, stores it and publishes its watch
event, so no other write lands between the check of a resourceVersion and the store. Objects live in a
`kmock.ObjectsArray`, which tests may also read and write directly (`store.objects[...]`: no
event, no new resourceVersion, as writing to etcd behind the API server's back would be).

Controllers' work is done here too, on the store's `clock` (seconds since the epoch), by `settle`,
which the server runs before each request and every `SETTLE_SECONDS`: the kubelets' end of a graceful
deletion (a terminating pod whose grace period has passed is deleted, as its kubelet deletes it with
grace 0 once its containers stopped; the emulator assumes they take the whole grace period and that
every node's kubelet is up), the disruption controller's (`disruption`): every PodDisruptionBudget of
a namespace whose pods, budgets or pods' controllers changed is synced, its status written when it
changes, as kube-controller-manager writes it through the API (its writes are not in the request log),
the garbage collector's (`garbage`), and the device-taint-eviction controller's (`device_taints`), while
any DeviceTaintRule, ResourceSlice or ResourceClaim is stored.

resource.k8s.io objects are stored as v1 ones whichever version they are written or read through
(`dra`, `conversion`): `Store.get(kmock.resource("resource.k8s.io/v1/resourceslices"), None, name)`.
"""

from __future__ import annotations

import asyncio
import copy
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import kmock

from accelpool_api import crd
from accelpool_demo.apiserver import (
    admission,
    apply,
    conversion,
    crds,
    device_taints,
    disruption,
    dra,
    dra_types,
    dra_validation,
    eviction,
    fields,
    garbage,
    pods,
    policies,
    resources,
    typed,
    webhooks,
    writes,
)
from accelpool_demo.apiserver import validation as kube_validation
from accelpool_demo.apiserver.events import Event, EventLog
from accelpool_demo.apiserver.pods import DeleteOptions
from accelpool_demo.apiserver.release import Release
from accelpool_demo.apiserver.writes import JsonObject

ADMISSION_KINDS = (
    resources.WEBHOOK_CONFIGURATIONS,
    resources.ADMISSION_POLICIES,
    resources.ADMISSION_POLICY_BINDINGS,
)
CONTROLLER_MANAGER = "kube-controller-manager"
"""The field manager of the controllers' writes the emulator plays."""
VERSIONS_KEPT = 2
"""Versions kept per object in `objects[...].history`: the current one, and the one before."""
Key = tuple[kmock.resource, str | None, str]
Warnings = list[str]
JsonList = list[JsonObject]
Paths = list[fields.Path]
PODS = kmock.resource(resources.PODS)
BUDGETS = kmock.resource(resources.BUDGETS)
TAINT_RULES = kmock.resource(dra.DEVICE_TAINT_RULES_KEY)
SLICES = kmock.resource(dra.RESOURCE_SLICES_KEY)
CLAIMS = kmock.resource(dra.RESOURCE_CLAIMS_KEY)
DRA_OBJECTS = frozenset({dra.DEVICE_TAINT_RULES_KEY, dra.RESOURCE_SLICES_KEY, dra.RESOURCE_CLAIMS_KEY})
"""What the device-taint-eviction controller has work for only while one exists."""
BUDGET_INPUTS = frozenset({resources.PODS, resources.BUDGETS, *disruption.SCALABLE})
"""What the disruption controller watches: a change to one syncs the budgets of its namespace."""


def _unmanaged(obj: Mapping[str, Any]) -> JsonObject:
    """An object without its managedFields (what the field manager compares)."""
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}
    return {**obj, "metadata": metadata}


def _dra_storage(resource: kmock.resource) -> kmock.resource:
    """The resource whose storage holds a resource.k8s.io resource's objects (`dra`: v1's), else itself."""
    stored = dra.STORED_AS.get(resources.key_of(resource))
    return kmock.resource(stored) if stored is not None else resource


def _unversioned(obj: Mapping[str, Any]) -> JsonObject:
    metadata = {k: v for k, v in (obj.get("metadata") or {}).items() if k != "resourceVersion"}
    return {**obj, "metadata": metadata}


class Store:
    def __init__(
        self,
        has_status: Callable[[kmock.resource], bool],
        *,
        clock: Callable[[], float] = time.time,
        release: Release | None = None,
    ) -> None:
        self.objects = kmock.ObjectsArray()
        self._by_resource: dict[kmock.resource, dict[Key, kmock.Object]] = {}
        """`objects` by resource (`list` reads one resource's, not all of them: at 10,000 nodes the Events and pods
        alone are tens of thousands)."""
        self.release = release or Release()
        """The Kubernetes release the server is (what the DRA controllers write through: `dra.rule_version`)."""
        self.events = EventLog()
        self.lock = asyncio.Lock()
        self.version = 1
        """The newest resourceVersion given (a list's resourceVersion)."""
        self.clock = clock
        """Seconds since the epoch: when graceful deletions end, the times the disruption controller writes."""
        self.node_taints = True
        """Whether a new Node gets the not-ready taint (the TaintNodesByCondition admission plugin)."""
        self.strict_event_namespaces = False
        """Whether an Event about an object of no namespace must be in `default` (as kube-apiserver's event
        validation has it; off: accelpool's operator and demo post such Events in their own namespace)."""
        self.node_lifecycle_controller = True
        """Whether a Ready node's not-ready taint is lifted (`_lift_not_ready_taints`; False: a cluster whose
        kube-controller-manager runs without its node lifecycle controller)."""
        self._untaint: set[Key] = set()
        self._lifting = False
        self._establish: set[Key] = set()
        self.garbage_collector = True
        """Whether ownerReferences are followed (`_collect_garbage`; False: no kube-controller-manager)."""
        self._garbage = False
        """Whether a write may have given the garbage collector work."""
        self._reported: set[str] = set()
        """Objects the garbage collector reported an owner of the wrong scope of."""
        """CustomResourceDefinitions the CRD controllers have yet to establish."""
        """Nodes that are Ready and carry the not-ready taint."""
        self.disruption_controller = True
        """Whether PodDisruptionBudgets' statuses are kept up to date (False: a controller that is down)."""
        self.device_taint_eviction_controller = True
        """Whether kube-controller-manager's device-taint-eviction controller runs (`device_taints`): pods
        using devices with a NoExecute taint they do not tolerate deleted, DeviceTaintRules' statuses written."""
        self.taint_eviction = device_taints.Memory()
        """That controller's memory (what it evicted, when rule statuses are due)."""
        self._dra_objects = 0
        """How many DeviceTaintRules, ResourceSlices and ResourceClaims are stored."""
        self._has_status = has_status
        self._unsynced: set[str | None] = set()
        """Namespaces whose budgets the disruption controller has yet to sync."""
        self._recheck: float | None = None
        """When an evicted pod's entry in a budget's disruptedPods expires."""
        self._terminating: dict[Key, float] = {}
        """Pods in a graceful deletion, and when it ends."""
        self.custom = crds.CustomResources(native=[crd.custom_resource_definition()])
        """The resources the stored CustomResourceDefinitions serve (`crds`), and ComputePools' CRD."""
        self.services: dict[tuple[str, str, int], tuple[str, int]] = {}
        """Where a Service (namespace, name, port) is served (host, port): the emulator has no Services or
        Endpoints of its own, so whoever runs a webhook says where (the demo: the operator's webhook)."""
        self._admission: dict[str, dict[str, JsonObject]] = {key: {} for key in ADMISSION_KINDS}
        """The stored admission configuration (webhook configurations, policies, bindings), by name."""
        self.webhooks = webhooks.Webhooks(
            lambda: list(self._admission[resources.WEBHOOK_CONFIGURATIONS].values()),
            resolve=lambda namespace, name, port: self.services.get((namespace, name, port)),
            namespace_labels=self._namespace_labels,
        )
        self.policies = policies.Policies(lambda key: list(self._admission[key].values()))
        self.users: dict[str, webhooks.UserInfo] = {}
        """Bearer tokens and the users they authenticate (a static token file's, as kube-apiserver's
        --token-auth-file): admission sees them; a request with no known token is the admin's. Nothing is
        authorized or refused by who sends it: only admission reads the user."""

    # ------------------------------------------------------------ reading

    def get(self, resource: kmock.resource, namespace: str | None, name: str) -> JsonObject | None:
        """The stored object; None when it does not exist (or was deleted)."""
        key = (resource, namespace, name)
        if key not in self.objects or self.objects[key].deleted:
            return None
        raw: JsonObject = self.objects[key].raw
        return raw

    def exists(self, resource_key: str, namespace: str | None, name: str) -> bool:
        return self.get(kmock.resource(resource_key), namespace, name) is not None

    def list(self, resource: kmock.resource, namespace: str | None) -> list[JsonObject]:
        """The live objects of a resource (in one namespace, or all), ordered by namespace and name."""
        found = [
            (ns or "", name, obj.raw)
            for (_, ns, name), obj in list(self._objects_of(resource).items())
            if (namespace is None or ns == namespace) and not obj.deleted
        ]
        return [raw for _, _, raw in sorted(found, key=lambda entry: entry[:2])]

    def _objects_of(self, resource: kmock.resource) -> dict[Key, kmock.Object]:
        """A resource's objects, live or deleted (the index is rebuilt when an object came into `objects` other than
        through `_store`)."""
        if sum(map(len, self._by_resource.values())) != len(self.objects):
            self._by_resource = {}
            for key, obj in self.objects.items():
                self._by_resource.setdefault(key[0], {})[key] = obj
        return self._by_resource.get(resource, {})

    def at(self, resource: kmock.resource, namespace: str | None, version: int) -> JsonList | None:
        """The live objects of a resource as they were at `version` (ordered as `list`), from the events
        kept; None when it is older than they tell."""
        if version >= self.version:
            return self.list(resource, namespace)
        events = self.events.until(version, resource)
        if events is None:
            return None
        state: dict[tuple[str, str], JsonObject] = {}
        for event in events:
            metadata = event.object.get("metadata") or {}
            key = (str(metadata.get("namespace") or ""), str(metadata.get("name")))
            if event.type == "DELETED":
                state.pop(key, None)
            else:
                state[key] = event.object
        return [obj for key, obj in sorted(state.items()) if namespace is None or key[0] == namespace]

    def current(self, resource: kmock.resource, namespace: str | None, name: str) -> JsonObject:
        found = self.get(resource, namespace, name)
        if found is None:
            raise resources.not_found(resource, name)
        return found

    # ------------------------------------------------------------ storing (the caller holds the lock)

    def _publish(self, key: Key, kind: str, obj: JsonObject, previous: JsonObject | None = None) -> None:
        self.events.publish(Event(self.version, key[0], kind, obj, previous))
        metadata, before = obj.get("metadata") or {}, (previous or {}).get("metadata") or {}
        if (
            kind == "DELETED"
            or metadata.get("ownerReferences") != before.get("ownerReferences")
            or bool(metadata.get("deletionTimestamp")) != bool(before.get("deletionTimestamp"))
        ):
            self._garbage = True  # the garbage collector has something to look at
        resource_key = resources.key_of(key[0])
        if resource_key in ADMISSION_KINDS:
            if kind == "DELETED":
                self._admission[resource_key].pop(key[2], None)
            else:
                self._admission[resource_key][key[2]] = obj
        if resource_key == crds.CRDS:
            self.custom.define(key[2], None if kind == "DELETED" else obj)
            if kind != "DELETED" and crds.established(obj, "") is not None:
                self._establish.add(key)
        if resource_key in BUDGET_INPUTS:
            self._unsynced.add(key[1])
        if resource_key in device_taints.INPUTS:
            self.taint_eviction.changed = True
        if resource_key in DRA_OBJECTS and kind != "MODIFIED":
            self._dra_objects += 1 if kind == "ADDED" else -1
        if resource_key == resources.NODES and kind != "DELETED" and admission.lifted_not_ready(obj) is not None:
            self._untaint.add(key)
        if resource_key == resources.PODS:
            metadata = obj.get("metadata") or {}
            if kind != "DELETED" and metadata.get("deletionTimestamp") and metadata.get("deletionGracePeriodSeconds"):
                self._terminating[key] = writes.seconds_of(metadata["deletionTimestamp"])
            else:
                self._terminating.pop(key, None)

    def _store(self, key: Key, obj: JsonObject, previous: JsonObject | None) -> JsonObject:
        """Store a new version; an object being deleted whose finalizers are all gone is deleted (a pod
        whose grace period runs, when it ends: `settle`)."""
        metadata = obj.get("metadata") or {}
        if (
            metadata.get("deletionTimestamp")
            and not metadata.get("finalizers")
            and not metadata.get("deletionGracePeriodSeconds")
        ):
            self.objects[key].delete()
            self._publish(key, "DELETED", obj)
            return obj
        if previous is None:
            if key in self.objects:
                self.objects[key].create(obj)
            else:
                self.objects[key] = obj
                self._by_resource.setdefault(key[0], {})[key] = self.objects[key]
        else:
            stored = self.objects[key]
            stored.history.append(obj)
            del stored.history[:-VERSIONS_KEPT]
        self._publish(key, "MODIFIED" if previous is not None else "ADDED", obj, previous)
        stored_now: JsonObject = self.objects[key].raw
        if self._untaint and self.node_lifecycle_controller and not self._lifting:
            self._lifting = True  # the controller reacts at once: the writer's answer still shows the taint
            try:
                self._lift_not_ready_taints()
            finally:
                self._lifting = False
        return stored_now

    def _store_through(self, resource_key: str, key: Key, obj: JsonObject, previous: JsonObject | None) -> JsonObject:
        """`_store` of an object written through `resource_key`, whose storage may be another's (`dra`)."""
        if resources.key_of(key[0]) == resource_key:
            return self._store(key, obj, previous)
        return conversion.from_storage(
            resource_key, self._store(key, conversion.to_storage(resource_key, obj), previous)
        )

    def _next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def put(self, resource_key: str, obj: Mapping[str, Any]) -> JsonObject:
        """Store an object as it is, stamped with what it lacks of uid, creationTimestamp and generation, a
        new resourceVersion, and publish its event: what exists before a demo or test starts. Synchronous,
        so no write can interleave; it bypasses admission, as an object restored from etcd would."""
        resource = kmock.resource(resource_key)
        stored = copy.deepcopy(dict(obj))
        metadata = stored.setdefault("metadata", {})
        stamps = writes.created(resource, {"metadata": {}}, self._next_version())["metadata"]
        for field, value in stamps.items():
            metadata.setdefault(field, value)
        metadata["resourceVersion"] = stamps["resourceVersion"]
        stored.setdefault("apiVersion", resources.api_version_of(resource))
        stored.setdefault("kind", resources.kind_of(resource))
        key = (resource, metadata.get("namespace"), metadata["name"])
        return self._store(key, stored, self.get(*key))

    # ------------------------------------------------------------ writes

    async def create(
        self,
        resource: kmock.resource,
        namespace: str | None,
        body: Any,
        *,
        strict: bool,
        manager: str | None = None,
        warnings: Warnings | None = None,
        duplicates: Sequence[str] = (),
        dry_run: bool = False,
    ) -> JsonObject:
        """POST: a new object, decoded, its fields owned by `manager` (when given: a request's field manager),
        admitted and stamped; 409 AlreadyExists when the name is taken. With `dry_run`, all of it but the
        storing: the object is answered without a resourceVersion."""
        key = resources.key_of(resource)
        if key in self.custom.admitted:
            self.custom.check_version(key, body, warnings)
        obj = writes.named(resource, body, namespace, required=key not in self.custom.admitted)
        name = str(obj["metadata"].get("name") or "")
        async with self.lock:
            if self.get(resource, namespace, name) is not None:
                raise resources.already_exists(resource, name)
            obj = self._decoded(resource, obj, strict=strict, warnings=warnings, duplicates=duplicates)
            if manager is not None:
                zero = typed.zero(key, resources.api_version_of(resource), str(obj.get("kind") or ""))
                obj["metadata"]["managedFields"] = self._managed(resource, zero, obj, manager, subresource=None)
            storage = kmock.resource(conversion.storage_of(key))
            if storage != resource:
                if self.get(storage, namespace, name) is not None:
                    raise resources.already_exists(resource, name)
                obj = conversion.to_storage(key, obj)
            obj = self._admit(storage, namespace, obj, None, strict=strict, through=key)
            stored = writes.created(storage, obj, str(self.version + 1))
            if typed.is_built_in(key):
                typed.shaped(conversion.storage_of(key), stored)
            said = await self._validate(storage, namespace, name, stored, None, dry_run=dry_run)
            if warnings is not None:
                warnings += said
            if dry_run:
                del stored["metadata"]["resourceVersion"]
                return conversion.from_storage(key, stored)
            self.version += 1
            return conversion.from_storage(key, self._store((storage, namespace, name), stored, None))

    def _decoded(
        self,
        resource: kmock.resource,
        obj: JsonObject,
        *,
        strict: bool,
        warnings: Warnings | None,
        refusal: crds.Refusal | None = None,
        duplicates: Sequence[str] = (),
    ) -> JsonObject:
        """The object as the API server decodes a request's: a custom resource's defaults applied and unknown
        fields pruned (`crds`), a built-in kind in its Go type's shape without the fields its type lacks
        (`typed`); each unknown field a warning, or with `strict` (fieldValidation=Strict) refused."""
        key = resources.key_of(resource)
        if key in self.custom.admitted:
            return self.custom.decoded(
                key, obj, strict=strict, warnings=warnings, refusal=refusal, duplicates=duplicates
            )
        if not typed.is_built_in(key):
            return obj
        if conversion.storage_of(key) == conversion.CORE_EVENTS:
            why = kube_validation.micro_time(obj.get("eventTime"))
            if why is not None:
                kind = str(obj.get("kind") or "Event")
                raise resources.bad_request(
                    f'{kind} in version "{resource.version}" cannot be handled as a {kind}: {why}'
                )
        sent, obj = obj, copy.deepcopy(obj)
        pruned = typed.unknown_fields(typed.SCHEMAS[key], obj) if key in typed.SCHEMAS else []
        found = [f'duplicate field "{path}"' for path in duplicates] + [f'unknown field "{path}"' for path in pruned]
        if found and strict:
            kind = str(obj.get("kind") or resources.kind_of(resource))
            raise (refusal or crds.decoding_refusal(kind, resource.version or ""))(found, sent)
        if warnings is not None:
            warnings += found
        if dra.plural_of(key) is not None:
            dra_types.defaulted(key, obj, writes.timestamp(self.clock()))
        return typed.shaped(key, obj)

    def _schema(self, resource: kmock.resource) -> fields.Schema:
        key = resources.key_of(resource)
        if key in self.custom.admitted:  # a custom object's metadata is an ObjectMeta all the same
            schema = self.custom.admitted[key].schema
            properties = {**(schema.get("properties") or {}), "metadata": typed.METADATA}
            return fields.Schema({**schema, "properties": properties})
        return fields.Schema(typed.schema_of(key))

    def _managed(
        self,
        resource: kmock.resource,
        before: Mapping[str, Any],
        after: Mapping[str, Any],
        manager: str,
        *,
        subresource: str | None,
        base: Mapping[str, Any] | None = None,
    ) -> JsonList:
        """`after`'s managedFields once `manager`, an Update manager, wrote it over `before` (the entries of
        `base`, else of `after`): internal/managedfieldsupdater.go. A write through the resource owns no
        status (the strategies' reset fields), one through `status` nothing else than status and metadata."""
        api_version = resources.api_version_of(resource)
        writer = fields.Entry(manager, "Update", api_version, subresource or "", set(), None)
        if subresource is None and self._has_status(resource):
            ignored: Paths = [("f:status",)]
        elif subresource == "status":
            ignored = [("f:spec",)]
        else:
            ignored = []
        comparison = fields.compare(_unmanaged(before), _unmanaged(after), self._schema(resource))
        found = fields.entries(base if base is not None else after)
        # a write through `scale` records no time (its entry goes through the Scale's conversion, which drops it)
        now = None if subresource == "scale" else writes.timestamp(self.clock())
        return fields.encoded(fields.updated(found, comparison, writer, now=now, ignored=ignored))

    def user_of(self, authorization: str) -> webhooks.UserInfo:
        """The user a request's `Authorization` header authenticates (`users`), else the admin."""
        scheme, _, token = authorization.partition(" ")
        return self.users.get(token.strip(), webhooks.ADMIN) if scheme.lower() == "bearer" else webhooks.ADMIN

    def _namespace_labels(self, namespace: str) -> dict[str, str] | None:
        found = self.get(kmock.resource("v1/namespaces"), None, namespace)
        return None if found is None else dict((found.get("metadata") or {}).get("labels") or {})

    async def _validate(
        self,
        resource: kmock.resource,
        namespace: str | None,
        name: str,
        obj: JsonObject | None,
        current: JsonObject | None,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
    ) -> Sequence[str]:
        """Validating admission after the write's own validation, as registry/generic/registry/store.go runs
        it: the stored ValidatingAdmissionPolicies (`policies`), then the ValidatingWebhookConfigurations'
        webhooks (`webhooks`), in the admission plugins' order (pkg/kubeapiserver/options/plugins.go);
        the webhooks' warnings, or the refusal."""
        if not any(self._admission.values()):
            return []
        key = resources.key_of(resource)
        attributes = webhooks.Attributes(
            operation="CREATE" if current is None else ("DELETE" if obj is None else "UPDATE"),
            group=resource.group or "",
            version=resource.version or "",
            resource=resource.plural or "",
            kind=str((obj or current or {}).get("kind") or resources.kind_of(resource)),
            name=name,
            namespace=namespace,
            subresource=subresource or "",
            object=conversion.from_storage(key, obj) if obj is not None else None,
            old_object=conversion.from_storage(key, current) if current is not None else None,
            user=webhooks.REQUESTING_USER.get(),
            dry_run=dry_run,
        )
        self.policies.validate(attributes)
        return await self.webhooks.validate(attributes)

    def _admit(
        self,
        resource: kmock.resource,
        namespace: str | None,
        obj: JsonObject,
        current: JsonObject | None,
        *,
        strict: bool,
        through: str | None = None,
    ) -> JsonObject:
        """A decoded object (`_decoded`) as admission leaves it (the status a create drops, defaults and
        mutations), or admission's refusal (`through`: the resource it was sent to, when stored as another)."""
        key = resources.key_of(resource)
        if key == conversion.CORE_EVENTS and current is None:
            return admission.admit_event(
                obj, namespace, strict=through == conversion.NEW_EVENTS, namespaces=self.strict_event_namespaces
            )
        if key in self.custom.admitted:
            if current is None and self.custom.admitted[key].has_status:
                obj = {k: v for k, v in obj.items() if k != "status"}
            self.custom.validate(key, obj, current)
            return obj
        references = kube_validation.owner_references((obj.get("metadata") or {}).get("ownerReferences"))
        if references:
            kind = str(obj.get("kind") or resources.kind_of(resource))
            raise kube_validation.refusal(
                kind, resource.group or "", (obj.get("metadata") or {}).get("name"), references
            )
        if key == resources.NODES:
            return admission.admit_node(obj, current, taint=self.node_taints)
        if key == crds.CRDS:
            errors = crds.definition_errors(obj)
            if errors:
                name = (obj.get("metadata") or {}).get("name")
                raise kube_validation.refusal("CustomResourceDefinition", "apiextensions.k8s.io", name, errors)
            return obj
        if dra.plural_of(key) is not None:
            return self._admit_dra(key, obj, current)
        if key == resources.PODS and current is None:
            admission.admit_pod(self.exists, namespace, obj)
        if key == resources.BUDGETS and (current is None or current.get("spec") != obj.get("spec")):
            admission.admit_budget(obj)
        return obj

    def _admit_dra(self, key: str, obj: JsonObject, current: JsonObject | None) -> JsonObject:
        """A resource.k8s.io object as its strategy prepares it and its validation admits it (`dra_validation`).
        A DeviceTaintRule whose effect changes gets a new `timeAdded` unless the write sets one
        (pkg/registry/resource/devicetaintrule/strategy.go `PrepareForUpdate`)."""
        if dra.plural_of(key) == dra.DEVICE_TAINT_RULES and current is not None:
            obj = device_taints.effect_changed(obj, current, writes.timestamp(self.clock()))
        errors = dra_validation.errors(key, obj, current)
        namespace = (obj.get("metadata") or {}).get("namespace")
        if namespace and current is None:
            errors += dra_validation.admin_access(obj, None, self._namespace_labels(str(namespace)) or {})
        if errors:
            kind = str(obj.get("kind") or resources.kind_of(kmock.resource(key)))
            raise kube_validation.refusal(kind, dra.GROUP, (obj.get("metadata") or {}).get("name"), errors)
        return obj

    async def update(
        self,
        resource: kmock.resource,
        namespace: str | None,
        name: str,
        change: Callable[[JsonObject], JsonObject],
        *,
        subresource: str | None,
        strict: bool = False,
        manager: str | None = None,
        warnings: Warnings | None = None,
        refusal: crds.Refusal | None = None,
    ) -> JsonObject:
        """PUT or PATCH: `change` makes the candidate from the stored object (404 when there is none), a new
        object: every change (`writes.merge_patch`, `json_patch`, `admission.scaled`, a PUT's body) copies
        what it keeps of the stored one, so it is not copied here once more (a write's main cost at 10,000 nodes).
        With a `manager` (a request's field manager), the write's fields become its own (`fields`)."""
        key = resources.key_of(resource)
        storage = _dra_storage(resource)
        async with self.lock:
            stored = self.current(storage, namespace, name)
            current = conversion.from_storage(key, stored) if storage != resource else stored
            candidate = change(current)
            if manager is not None or key in self.custom.admitted:  # a request's, not a simulator's own write
                candidate = self._decoded(resource, candidate, strict=strict, warnings=warnings, refusal=refusal)
            if subresource is None or key in self.custom.admitted:
                if subresource == "status":  # the status strategy keeps all but the status (and metadata) as stored
                    kept = {k: v for k, v in current.items() if k not in ("status", "metadata")}
                    candidate = {**candidate, **kept}
                candidate = self._admit(resource, namespace, candidate, current, strict=strict)
            version = str(self.version + 1)
            result = writes.updated(
                resource,
                current,
                candidate,
                subresource=subresource,
                version=version,
                has_status=self._has_status(resource),
            )
            if result is not None and typed.is_built_in(key):
                typed.shaped(key, result)
            if result is not None and subresource == "status" and key == resources.NODES:
                admission.admit_node(result, current, taint=False)  # the status strategy validates as an update
            if result is not None and subresource == "status" and dra.plural_of(key) is not None:
                labels = self._namespace_labels(namespace) if namespace else None
                errors = dra_validation.admin_access(result, current, labels or {}) if namespace else []
                errors += dra_validation.errors(key, result, current, status=True)
                if errors:
                    raise kube_validation.refusal(str(current.get("kind")), dra.GROUP, name, errors)
            if result is not None and manager is not None:
                base = current if subresource is not None else result
                result["metadata"]["managedFields"] = self._managed(
                    resource, current, result, manager, subresource=subresource, base=base
                )
            if result is None or _unversioned(result) == _unversioned(current):
                return current
            said = await self._validate(resource, namespace, name, result, current, subresource=subresource)
            if warnings is not None:
                warnings += said
            self.version += 1
            return self._store_through(key, (storage, namespace, name), result, stored)

    async def delete(
        self, resource: kmock.resource, namespace: str | None, name: str, options: DeleteOptions | None = None
    ) -> JsonObject:
        """DELETE: gone at once, or marked with a deletionTimestamp while finalizers remain (or, for a pod,
        while its grace period runs: `pods.deletion`); 409 when the options' preconditions fail."""
        options = options or DeleteOptions()
        async with self.lock:
            current = self.current(resource, namespace, name)
            pods.check_preconditions(
                resource, str(current.get("kind") or resources.kind_of(resource)), current, options
            )
            if options.dry_run:
                return current
            if resources.key_of(resource) == resources.PODS:
                return self._delete_pod((resource, namespace, name), current, options.grace_period_seconds)
            metadata = current.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                return current
            marked = copy.deepcopy(current)
            marked["metadata"]["resourceVersion"] = self._next_version()
            finalizer = garbage.FINALIZERS.get(options.propagation or "")
            if finalizer is not None and self.garbage_collector:  # the garbage collector finishes the deletion
                marked["metadata"]["finalizers"] = [*(metadata.get("finalizers") or []), finalizer]
            if marked["metadata"].get("finalizers"):
                marked["metadata"]["deletionTimestamp"] = writes.now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                if marked["metadata"].get("generation"):  # rest.BeforeDelete: a graceful deletion is a new generation
                    marked["metadata"]["generation"] += 1
                return self._store((resource, namespace, name), marked, current)
            self.objects[resource, namespace, name].delete()
            self._publish((resource, namespace, name), "DELETED", marked)
            return marked

    def _delete_pod(self, key: Key, current: JsonObject, grace: int | None) -> JsonObject:
        """A pod deleted with this grace period (None: its own): marked while it terminates or finalizers
        hold it, removed when its grace period is 0."""
        marked = pods.deletion(current, grace, self.clock())
        if marked is None:
            return current
        marked["metadata"]["resourceVersion"] = self._next_version()
        if marked["metadata"]["deletionGracePeriodSeconds"] == 0 and not marked["metadata"].get("finalizers"):
            self.objects[key].delete()
            self._publish(key, "DELETED", marked)
            return marked
        return self._store(key, marked, current)

    def _write_status(self, resource: kmock.resource, obj: Mapping[str, Any], status: JsonObject) -> JsonObject:
        """A controller's write of an object's status (no-op when it is the stored one)."""
        key = (resource, obj["metadata"].get("namespace"), obj["metadata"]["name"])
        if status == obj.get("status"):
            return dict(obj)
        current = dict(obj)
        updated = {**copy.deepcopy(current), "status": status}
        updated["metadata"]["resourceVersion"] = self._next_version()
        return self._store(key, updated, current)

    async def evict(self, namespace: str, name: str, options: DeleteOptions) -> JsonObject:
        """POST pods/NAME/eviction (`eviction`): the Success Status, or the refusal."""
        async with self.lock:
            pod = self.current(PODS, namespace, name)
            now = self.clock()
            if not eviction.can_ignore_budgets(pod):
                budgets = eviction.budgets_of(pod, self.list(BUDGETS, namespace))
                if len(budgets) > 1:
                    raise eviction.more_than_one_budget()
                if budgets and not eviction.unhealthy_may_go(pod, budgets[0]):
                    status = eviction.decremented(budgets[0], name, now)
                    if not options.dry_run:
                        self._write_status(BUDGETS, budgets[0], status)
            eviction.check_latest(pod, options)
            if options.dry_run:
                return dict(eviction.SUCCESS)
            pod = self._write_status(PODS, pod, pods.with_condition(pod, eviction.disruption_target(now))["status"])
            self._delete_pod((PODS, namespace, name), pod, options.grace_period_seconds)
            return dict(eviction.SUCCESS)

    # ------------------------------------------------------------ the controllers' work

    async def settle(self) -> None:
        """End the graceful deletions that are due, and sync the budgets that need it."""
        now = self.clock()
        due = [key for key, deadline in self._terminating.items() if deadline <= now]
        recheck = self._recheck is not None and self._recheck <= now
        untaint = self.node_lifecycle_controller and bool(self._untaint)
        collect = self.garbage_collector and self._garbage
        taints = self.device_taint_eviction_controller and self._dra_objects > 0 and self.taint_eviction.due(now)
        waiting = not due and not untaint and not self._establish and not collect and not taints
        if waiting and not (self.disruption_controller and (self._unsynced or recheck)):
            return
        async with self.lock:
            while self._establish:
                key = self._establish.pop()
                crd = self.get(*key)
                status = crds.established(crd, writes.timestamp(now)) if crd is not None else None
                if crd is not None and status is not None:
                    self._write_status(key[0], crd, status)
            if untaint:
                self._lift_not_ready_taints()
            if collect:
                self._collect_garbage()
            if taints:
                self._evict_for_device_taints(now)
            for key in due:
                current = self.get(*key)
                if current is not None and pods.due(current, now):
                    self._delete_pod(key, current, 0)
            if self.disruption_controller:
                if recheck:
                    budgets = [key for key, obj in self._objects_of(BUDGETS).items() if not obj.deleted]
                    self._unsynced.update(namespace for _, namespace, _ in budgets)
                    self._recheck = None
                while self._unsynced:
                    self._sync_budgets(self._unsynced.pop(), now)

    def _collect_garbage(self) -> None:
        """kube-controller-manager's garbage collector (`garbage`), one pass over every object: the dependents
        of an orphaning owner let go, of a foreground deletion deleted (then its finalizer lifted), objects
        whose owners are all gone deleted, the references to gone owners of the others removed."""
        self._garbage = False
        live = {key: obj.raw for key, obj in list(self.objects.items()) if not obj.deleted and key[2] is not None}
        graph = garbage.Graph(live, self._namespaced)
        for key, action in graph.actions():
            current = self.get(*key)
            if current is None:
                continue
            if action.delete:
                self._delete_now(key, current)
            elif action.object is not None:
                changed = action.object
                changed["metadata"]["managedFields"] = self._managed(
                    key[0], current, changed, CONTROLLER_MANAGER, subresource=None, base=current
                )
                changed["metadata"]["resourceVersion"] = self._next_version()
                self._store(key, changed, current)
        for dependent, reference in graph.invalid_namespaces():
            if dependent["metadata"]["uid"] not in self._reported:
                self._reported.add(dependent["metadata"]["uid"])
                self.put(resources.EVENTS, garbage.invalid_namespace_event(dependent, reference, writes.now()))

    def _evict_for_device_taints(self, now: float) -> None:
        """kube-controller-manager's device-taint-eviction controller (`device_taints`), one step: the rules'
        statuses it is due to write, then the pods it evicts (Event, DisruptionTarget condition, deletion
        with their own grace period and a uid precondition)."""
        cluster = device_taints.Cluster(
            rules=self.list(TAINT_RULES, None),
            slices=self.list(SLICES, None),
            claims=self.list(CLAIMS, None),
            pods=self.list(PODS, None),
        )
        done = device_taints.step(self.taint_eviction, cluster, now)
        api_version = f"{dra.GROUP}/{dra.rule_version(self.release) or dra.STORAGE_VERSION}"
        for status in done.statuses:
            key: Key = (TAINT_RULES, None, str(status.rule["metadata"]["name"]))
            current = self.get(*key)
            if current is None or current["metadata"].get("uid") != status.rule["metadata"].get("uid"):
                continue
            updated = device_taints.with_condition(current, status.condition, api_version, writes.timestamp(now))
            updated["metadata"]["resourceVersion"] = self._next_version()
            self._store(key, updated, current)
        for evicted in done.evictions:
            current = self._same_pod(evicted.pod)
            if current is None or current["metadata"].get("deletionTimestamp"):
                continue  # gone, replaced (the uid precondition fails), or being deleted already
            self.put(resources.EVENTS, device_taints.pod_event(current, "Marking for deletion", now))
            condition = device_taints.disruption_target(now)
            current = self._write_status(PODS, current, pods.with_condition(current, condition)["status"])
            self._delete_pod((PODS, current["metadata"].get("namespace"), current["metadata"]["name"]), current, None)
        for cancelled in done.cancelled:
            current = self._same_pod(cancelled)
            if current is not None:
                self.put(resources.EVENTS, device_taints.pod_event(current, "Cancelling deletion", now))

    def _same_pod(self, pod: Mapping[str, Any]) -> JsonObject | None:
        """The stored pod of this one's name, if it is still this one (the same uid)."""
        metadata = pod.get("metadata") or {}
        current = self.get(PODS, metadata.get("namespace"), str(metadata.get("name")))
        return current if current is not None and current["metadata"].get("uid") == metadata.get("uid") else None

    def _namespaced(self, api_version: str, kind: str) -> bool | None:
        """Whether a kind is namespaced (None: not served)."""
        served = [
            *resources.RESOURCES.items(),
            *dra.KNOWN.items(),
            *((k, c.info) for k, c in self.custom.served.items()),
        ]
        for key, info in served:
            if info.kind == kind and key.rsplit("/", 1)[0] == api_version:
                return bool(info.namespaced)
        return None

    def _delete_now(self, key: Key, current: JsonObject) -> None:
        """A deletion by a controller: marked while finalizers hold it, else gone."""
        metadata = current.get("metadata") or {}
        if metadata.get("deletionTimestamp"):
            return
        marked = copy.deepcopy(current)
        marked["metadata"]["resourceVersion"] = self._next_version()
        if metadata.get("finalizers"):
            marked["metadata"]["deletionTimestamp"] = writes.now()
            marked["metadata"]["deletionGracePeriodSeconds"] = 0
            self._store(key, marked, current)
            return
        self.objects[key].delete()
        self._publish(key, "DELETED", marked)

    def _lift_not_ready_taints(self) -> None:
        """The node lifecycle controller's NoSchedule pass, as far as the emulator plays it: a Ready node's
        not-ready taint (the one admission adds to a new node) lifted, as kube-controller-manager patches it
        (pkg/controller/nodelifecycle/node_lifecycle_controller.go `doNoScheduleTaintingPass`)."""
        while self._untaint:
            key = self._untaint.pop()
            current = self.get(*key)
            lifted = admission.lifted_not_ready(current) if current is not None else None
            if current is None or lifted is None:
                continue
            lifted["metadata"]["managedFields"] = self._managed(
                key[0], current, lifted, CONTROLLER_MANAGER, subresource=None, base=current
            )
            lifted["metadata"]["resourceVersion"] = self._next_version()
            self._store(key, lifted, current)

    def _sync_budgets(self, namespace: str | None, now: float) -> None:
        """The disruption controller's sync of every budget of a namespace (`disruption.synced_status`)."""
        budgets = self.list(BUDGETS, namespace)
        in_namespace = self.list(PODS, namespace) if budgets else []
        for budget in budgets:
            status, recheck = disruption.synced_status(budget, in_namespace, self._lookup, now)
            if recheck is not None:
                self._recheck = recheck if self._recheck is None else min(self._recheck, recheck)
            self._write_status(BUDGETS, budget, status)
        self._unsynced.discard(namespace)

    def _lookup(self, resource_key: str, namespace: str, name: str) -> JsonObject | None:
        return self.get(kmock.resource(resource_key), namespace, name)

    async def apply(
        self,
        resource: kmock.resource,
        namespace: str | None,
        name: str,
        config: Mapping[str, Any],
        *,
        manager: str,
        force: bool,
        strict: bool,
        subresource: str | None = None,
    ) -> tuple[int, JsonObject]:
        """Server-side apply (`apply`): (201, created) for a missing object, (200, the result) otherwise."""
        sent = dict(config.get("metadata") or {})
        if sent.get("name") not in (None, name):
            raise resources.bad_request(
                f"the name of the object ({sent['name']}) does not match the name on the URL ({name})"
            )
        key = resources.key_of(resource)
        declared = self.custom.admitted[key].schema if key in self.custom.admitted else typed.SCHEMAS.get(key)
        if (
            declared is not None
            and declared.get("additionalProperties") is not False
            and key not in self.custom.admitted
        ):
            declared = None  # only the types whose every field is known refuse an undeclared one
        if declared is not None:
            apply.undeclared(config, declared, name, str(sent.get("namespace") or ""))
        has_status = self._has_status(resource)
        if subresource is None and has_status:
            ignored: Paths = [("f:status",)]
        elif subresource == "status":
            ignored = [("f:spec",)]
        else:
            ignored = []
        api_version = resources.api_version_of(resource)
        applier = fields.Entry(manager, "Apply", api_version, subresource or "", set(), None)
        now = writes.timestamp(self.clock())
        storage = _dra_storage(resource)
        async with self.lock:
            stored = self.get(storage, namespace, name)
            current = conversion.from_storage(key, stored) if stored is not None and storage != resource else stored
            if current is None:
                if sent.get("resourceVersion") or subresource is not None:
                    raise resources.not_found(resource, name)
                live = typed.zero(key, api_version, str(config.get("kind")))
                live["metadata"] = {"name": name, **({"namespace": namespace} if namespace else {})}
                result, entries, _ = apply.applied(
                    live, config, self._schema(resource), applier=applier, force=force, now=now, ignored=ignored
                )
                result["metadata"]["managedFields"] = entries
                obj = self._decoded(resource, writes.named(resource, result, namespace), strict=strict, warnings=None)
                obj = self._admit(resource, namespace, obj, None, strict=strict)
                created = writes.created(resource, obj, str(self.version + 1))
                if typed.is_built_in(key):
                    typed.shaped(key, created)
                await self._validate(resource, namespace, name, created, None)
                self.version += 1
                return 201, self._store_through(key, (storage, namespace, name), created, None)
            writes.check_precondition(resource, current, config)
            result, entries, changed = apply.applied(
                current, config, self._schema(resource), applier=applier, force=force, now=now, ignored=ignored
            )
            if changed:
                result = self._decoded(resource, result, strict=strict, warnings=None)
                if subresource is None or key in self.custom.admitted:
                    result = self._admit(resource, namespace, result, current, strict=strict)
            version = str(self.version + 1)
            updated = writes.updated(
                resource, current, result, subresource=subresource, version=version, has_status=has_status
            )
            if updated is None:
                if entries == (current.get("metadata") or {}).get("managedFields"):
                    return 200, current
                updated = {**current, "metadata": {**current["metadata"], "resourceVersion": version}}
            updated["metadata"]["managedFields"] = entries
            if typed.is_built_in(key):
                typed.shaped(key, updated)
            if changed:
                await self._validate(resource, namespace, name, updated, current, subresource=subresource)
            self.version += 1
            return 200, self._store_through(key, (storage, namespace, name), updated, stored)
