"""The emulated API server's storage: objects by (resource, namespace, name), written one at a time.

Each write takes the lock, reads the stored object, computes the new one (`writes`, `apply`,
`admission`), gives it the next resourceVersion, stores it and publishes its watch event, so no
other write lands between the check of a resourceVersion and the store. Objects live in a
`kmock.ObjectsArray`, which tests may also read and write directly (`store.objects[...]`: no
event, no new resourceVersion, as writing to etcd behind the API server's back would be).
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from accelpool_demo.apiserver import admission, apply, resources, writes
from accelpool_demo.apiserver.events import Event, EventLog
from accelpool_demo.apiserver.writes import JsonObject

VERSIONS_KEPT = 2
"""Versions kept per object in `objects[...].history`: the current one, and the one before."""
Key = tuple[kmock.resource, str | None, str]


class Store:
    def __init__(self, has_status: Callable[[kmock.resource], bool], *, webhook: bool = True) -> None:
        self.objects = kmock.ObjectsArray()
        self.events = EventLog()
        self.lock = asyncio.Lock()
        self.version = 1
        """The newest resourceVersion given (a list's resourceVersion)."""
        self._has_status = has_status
        self._webhook = webhook

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
            for (res, ns, name), obj in list(self.objects.items())
            if res == resource and (namespace is None or ns == namespace) and not obj.deleted
        ]
        return [raw for _, _, raw in sorted(found, key=lambda entry: entry[:2])]

    def current(self, resource: kmock.resource, namespace: str | None, name: str) -> JsonObject:
        found = self.get(resource, namespace, name)
        if found is None:
            raise resources.not_found(resource, name)
        return found

    # ------------------------------------------------------------ storing (the caller holds the lock)

    def _publish(self, key: Key, kind: str, obj: JsonObject, previous: JsonObject | None = None) -> None:
        self.events.publish(Event(self.version, key[0], kind, obj, previous))

    def _store(self, key: Key, obj: JsonObject, previous: JsonObject | None) -> JsonObject:
        """Store a new version; an object being deleted whose finalizers are all gone is deleted."""
        metadata = obj.get("metadata") or {}
        if metadata.get("deletionTimestamp") and not metadata.get("finalizers"):
            self.objects[key].delete()
            self._publish(key, "DELETED", obj)
            return obj
        if previous is None:
            if key in self.objects:
                self.objects[key].create(obj)
            else:
                self.objects[key] = obj
        else:
            stored = self.objects[key]
            stored.history.append(obj)
            del stored.history[:-VERSIONS_KEPT]
        self._publish(key, "MODIFIED" if previous is not None else "ADDED", obj, previous)
        return self.objects[key].raw

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

    async def create(self, resource: kmock.resource, namespace: str | None, body: Any, *, strict: bool) -> JsonObject:
        """POST: a new object, admitted and stamped; 409 AlreadyExists when the name is taken."""
        obj = writes.named(resource, body, namespace)
        name = obj["metadata"]["name"]
        async with self.lock:
            if self.get(resource, namespace, name) is not None:
                raise resources.already_exists(resource, name)
            obj = self._admit(resource, namespace, obj, None, strict=strict)
            return self._store((resource, namespace, name), writes.created(resource, obj, self._next_version()), None)

    def _admit(
        self,
        resource: kmock.resource,
        namespace: str | None,
        obj: JsonObject,
        current: JsonObject | None,
        *,
        strict: bool,
    ) -> JsonObject:
        key = resources.key_of(resource)
        if key == resources.POOLS:
            return admission.admit_pool(obj, current, strict=strict, webhook=self._webhook)
        if key == resources.PODS and current is None:
            admission.admit_pod(self.exists, namespace, obj)
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
    ) -> JsonObject:
        """PUT or PATCH: `change` makes the candidate from the stored object (404 when there is none)."""
        async with self.lock:
            current = self.current(resource, namespace, name)
            candidate = change(copy.deepcopy(current))
            if subresource is None:
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
            if result is None:
                return current
            self.version += 1
            return self._store((resource, namespace, name), result, current)

    async def delete(self, resource: kmock.resource, namespace: str | None, name: str) -> JsonObject:
        """DELETE: gone at once, or marked with a deletionTimestamp while finalizers remain."""
        async with self.lock:
            current = self.current(resource, namespace, name)
            metadata = current.get("metadata") or {}
            if metadata.get("deletionTimestamp"):
                return current
            marked = copy.deepcopy(current)
            marked["metadata"]["resourceVersion"] = self._next_version()
            if metadata.get("finalizers"):
                marked["metadata"]["deletionTimestamp"] = writes.now()
                marked["metadata"]["deletionGracePeriodSeconds"] = 0
                return self._store((resource, namespace, name), marked, current)
            self.objects[resource, namespace, name].delete()
            self._publish((resource, namespace, name), "DELETED", marked)
            return marked

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
    ) -> tuple[int, JsonObject]:
        """Server-side apply: (201, created) for a missing object, (200, the result) otherwise."""
        sent = dict(config.get("metadata") or {})
        if sent.get("name") not in (None, name):
            raise resources.bad_request(
                f"the name of the object ({sent['name']}) does not match the name on the URL ({name})"
            )
        has_status = self._has_status(resource)
        async with self.lock:
            current = self.get(resource, namespace, name)
            if current is None:
                if sent.get("resourceVersion"):
                    raise resources.not_found(resource, name)
                body = apply.applied(None, config, manager=manager, force=force, has_status=has_status)
                assert body is not None
                body["metadata"]["name"] = name
                obj = self._admit(resource, namespace, writes.named(resource, body, namespace), None, strict=strict)
                return 201, self._store(
                    (resource, namespace, name), writes.created(resource, obj, self._next_version()), None
                )
            writes.check_precondition(resource, current, config)
            result = apply.applied(current, config, manager=manager, force=force, has_status=has_status)
            if result is None:
                return 200, current
            result = self._admit(resource, namespace, result, current, strict=strict)
            updated = writes.updated(
                resource, current, result, subresource=None, version=str(self.version + 1), has_status=has_status
            )
            if updated is None:
                return 200, current
            self.version += 1
            return 200, self._store((resource, namespace, name), updated, current)
