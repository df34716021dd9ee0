"""The emulated API server's HTTP side: kmock's Kubernetes scaffold (discovery, errors as `Status`,
reactions a test can add), with every read and write of objects served by `Store`.

A request goes: the store's controllers catch up (`Store.settle`) → injected faults (`Fault`: refused
before anything is written) → the one-shot `before_update` hooks of a test → the write, if it is one
(`Store`; an eviction: `Store.evict`) → kmock's reactions, if a test added one for it
(`server[kmock.method.PATCH, resource] << 500`: the write is stored, its answer lost) → otherwise the
fallback that answers with the stored result, list, table or watch stream.

While no test has added a reaction, a write is answered with its result at once, without kmock's
routing: kmock tries every reaction's filters on every request (about 1 ms of the server's CPU per
request), which made the emulator, not the operator, the bottleneck of the benchmarks at thousands
of nodes (`benchmarks/operator_convergence.py`). The answer is the same as the fallback's.
Each request served is logged (`served`) and passed to the `listeners`.
"""

from __future__ import annotations

import asyncio
import copy
import json
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from typing import Any

import aiohttp.web
import attrs
import kmock
from kmock import Response as KmockResponse  # type: ignore[attr-defined]  # exported, though not in __all__

from accelpool_demo.apiserver import (
    admission,
    apply,
    conversion,
    crds,
    dra,
    eviction,
    lists,
    openapi,
    patches,
    resources,
    tables,
    typed,
    writes,
)
from accelpool_demo.apiserver import validation as kube_validation
from accelpool_demo.apiserver.events import expired, wait
from accelpool_demo.apiserver.pods import DeleteOptions
from accelpool_demo.apiserver.release import DEFAULT_VERSION, Release
from accelpool_demo.apiserver.selectors import Matcher, matcher
from accelpool_demo.apiserver.served import Fault, RequestLog, Served
from accelpool_demo.apiserver.store import Store
from accelpool_demo.apiserver.webhooks import REQUESTING_USER
from accelpool_demo.apiserver.writes import JsonObject

ERRORS_KEPT = 100
"""The most recent failed requests kept in `errors` (kmock's record of them)."""
_WRITES = frozenset({kmock.method.POST, kmock.method.PUT, kmock.method.PATCH, kmock.method.DELETE})
"""Writes, by method: kmock's actions leave PUT out."""
INITIAL_EVENTS_END = "k8s.io/initial-events-end"
"""The annotation of the BOOKMARK that ends a watch's initial events (metav1.InitialEventsAnnotationKey)."""
_RETURN_DELETED = frozenset(
    {resources.PODS, "apiextensions.k8s.io/v1/customresourcedefinitions"}
    | (set(dra.KNOWN) - {dra.key("v1", dra.DEVICE_TAINT_RULES)})
)
"""Resources whose DELETE answers the deleted object, not a Status (their stores' `ReturnDeletedObject`; all the
resource.k8s.io ones but v1 DeviceTaintRules: pkg/registry/resource/*/storage/storage.go)."""
_PATCHES = {
    "application/merge-patch+json": "merge",
    "application/strategic-merge-patch+json": "strategic",
    "application/json-patch+json": "json",
    apply.CONTENT_TYPE: "apply",
}


@attrs.define(kw_only=True)
class ApiServer(kmock.KubernetesScaffold):
    """An API server for accelpool's demo, tests and benchmarks (see the package's docstring)."""

    remember: int | None = None
    """Requests kept in `served` (None: all of them, and kmock's own records of them too, which
    `list(server)` and the reactions' slices such as `[:3]` count; an int: kmock's are dropped)."""
    clock: Callable[[], float] = time.time
    """Seconds since the epoch, as the store's controllers see them (a test's clock moves on its word)."""
    kubernetes_version: str = DEFAULT_VERSION
    """The Kubernetes release this server is (`release.VERSIONS`: "1.36", "1.37"): what `/version` says and
    which resource.k8s.io APIs it serves (`dra`)."""
    runtime_config: Mapping[str, bool] = attrs.field(factory=dict)
    """kube-apiserver's `--runtime-config`: `{"resource.k8s.io/v1beta2": True}` serves that group version."""
    feature_gates: Mapping[str, bool] = attrs.field(factory=dict)
    """kube-apiserver's `--feature-gates`: `{"DRADeviceTaintRules": True}` (default: the release's)."""
    release: Release = attrs.field(init=False)
    store: Store = attrs.field(init=False)
    served: RequestLog = attrs.field(init=False)
    listeners: list[Callable[[Served], None]] = attrs.field(factory=list, init=False)
    """Called with every request served, after it is answered (a test waits for changes with them)."""
    faults: list[Fault] = attrs.field(factory=list, init=False)
    before_update: list[Callable[[kmock.Request], None]] = attrs.field(factory=list, init=False)
    """One-shot hooks run before a PUT or PATCH is checked and stored (a concurrent writer, say)."""
    _results: dict[asyncio.Task[Any], tuple[int, JsonObject]] = attrs.field(factory=dict, init=False)
    _answered: set[asyncio.Task[Any]] = attrs.field(factory=set, init=False)
    _warnings: dict[asyncio.Task[Any], list[str]] = attrs.field(factory=dict, init=False)
    """The warnings of the requests being served (`Warning` headers, on errors too)."""
    _routing: dict[asyncio.Task[Any], kmock.Request] = attrs.field(factory=dict, init=False)
    _closing: bool = attrs.field(default=False, init=False)
    _own_reactions: int = attrs.field(default=0, init=False)
    """How many reactions the server itself has: more means a test added one (see the module docstring)."""
    _custom_generation: int = attrs.field(default=0, init=False)
    _custom_keys: set[str] = attrs.field(factory=set, init=False)
    _infos: dict[kmock.resource, kmock.ResourceInfo | None] = attrs.field(factory=dict, init=False)
    _infos_for: int = attrs.field(default=-1, init=False)

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        self.release = Release(self.kubernetes_version, self.runtime_config, self.feature_gates)
        self.store = Store(self._has_status, clock=self.clock, release=self.release)
        self.served = RequestLog(self.remember)
        for key, info in {**resources.RESOURCES, **dra.served(self.release)}.items():
            self.resources[key] = info
        self.fallback[kmock.action.LIST] << self._serve_list
        self.fallback[kmock.action.WATCH] << self._serve_watch
        self.fallback[kmock.action.FETCH] << self._serve_fetch
        for method in _WRITES:
            self.fallback[method] << self._serve_written
        self._own_reactions = len(self._payloads)

    @property
    def objects(self) -> kmock.ObjectsArray:
        return self.store.objects

    def fail(self, prefix: str, status: int, *, times: int | None = 1, reason: str = "InternalError") -> Fault:
        """Refuse requests whose `METHOD /path` starts with `prefix` (`"PATCH /api/v1/nodes"`)."""
        fault = Fault(prefix, status, times, reason)
        self.faults.append(fault)
        return fault

    def writes(self, *, agent: str | None = None, since: int = 0) -> list[Served]:
        """Write requests served since the `since`th request (by a User-Agent starting with `agent`)."""
        return self.served.writes(agent=agent, since=since)

    def conflicts(self, plural: str, *, agent: str | None = None) -> list[Served]:
        """Requests on `plural` answered 409 (by a User-Agent starting with `agent`)."""
        return [s for s in self.served if s.status == 409 and s.plural.split("/")[0] == plural and s.by(agent)]

    def close_watches(self) -> None:
        """End every watch stream now, as an API server going down does (its clients re-watch).

        A stream whose client went away unnoticed (an operator's thread stopped without closing its
        connections) would otherwise hold the HTTP server's shutdown for its whole grace period."""
        self._closing = True
        self.store.events.upcoming().set()

    @property
    def request_count(self) -> int:
        """Requests served so far (a `since` for `writes`)."""
        return self.served.total

    def _has_status(self, resource: kmock.resource) -> bool:
        """Whether the resource has a status subresource (a storage's that no version serves: as known)."""
        info = self._info(resource) or dra.KNOWN.get(resources.key_of(resource))
        return info is not None and "status" in info.subresources

    def _declared(self, request: kmock.Request) -> kmock.resource:
        if request.resource is None or self._info(request.resource) is None:
            # errors.NewGenericServerResponse(404, ...) of a group version's NotFound handler: details {}
            raise resources.error(404, "NotFound", "the server could not find the requested resource", {})
        return request.resource

    def _info(self, resource: kmock.resource) -> kmock.ResourceInfo | None:
        """The resource's declaration (None: not served), remembered (kmock's lookup checks a runtime Protocol,
        ~0.1 ms) until the CRDs change what is served or a test declares a resource (their count changes)."""
        if len(self.resources) != self._infos_for:
            self._infos.clear()
            self._infos_for = len(self.resources)
        if resource not in self._infos:
            info = self.resources.get(resource) if resource in self.resources else None
            self._infos[resource] = info if isinstance(info, kmock.ResourceInfo) else None
        return self._infos[resource]

    # ------------------------------------------------------------ serving a request

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            response = await super().__call__(raw_request)
        finally:  # kmock keeps every failed request's error (its private `_errors`), recorded after handling
            if self._errors:
                del self._errors[-1][:-ERRORS_KEPT]
        if not response.prepared and response.content_type == "application/json":
            response.charset = None  # `Content-Type: application/json`, as the API server's JSON serializer says
        return response

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        task = asyncio.current_task()
        assert task is not None
        self._routing[task] = request
        REQUESTING_USER.set(self.store.user_of(request.headers.get("Authorization", "")))
        warnings: list[str] = []
        self._warnings[task] = warnings
        status = 500
        try:
            response = await self._respond(request, task)
            status = response.status
            return response
        except patches.Panic:  # as the API server's handler panics: no answer, the connection closed
            raw = request._raw_request
            if raw is not None and raw.transport is not None:
                raw.transport.abort()
            return aiohttp.web.Response(status=status)
        except kmock.KubernetesError as error:
            status = error.status
            if warnings:  # answered here, with its warnings (kmock's rendering has no headers)
                return _warned(await self._render_error(error), warnings)
            raise
        finally:
            self._results.pop(task, None)
            self._answered.discard(task)
            self._warnings.pop(task, None)
            del self._routing[task]
            self._log(request, status)

    def _serve_custom_resources(self) -> None:
        """Discovery and routing follow the stored CRDs (`crds`): their served versions in, deleted ones out."""
        custom = self.store.custom
        if custom.generation == self._custom_generation:
            return
        self._custom_generation = custom.generation
        for key in self._custom_keys - set(custom.served):
            del self.resources[key]
        for key, served in custom.served.items():
            self.resources[key] = served.info
        self._custom_keys = set(custom.served)
        self._infos.clear()

    async def _respond(self, request: kmock.Request, task: asyncio.Task[Any]) -> aiohttp.web.StreamResponse:
        await self.store.settle()
        self._serve_custom_resources()
        method, path = request.method.value, request.url.path
        for fault in self.faults:
            if fault.matches(method, request.url.path_qs):
                raise fault.spend()
        if path.startswith(openapi.ROOT):
            served = dra.served(self.release)
            found = openapi.index(served) if path.rstrip("/") == openapi.ROOT else openapi.document(path, served)
            if found is None:
                raise resources.error(404, "NotFound", "the server could not find the requested resource")
            return aiohttp.web.json_response(found)
        if request.resource is not None and request.method in _WRITES:
            warnings = self._warnings[task]
            self._results[task] = await self._write(request, warnings)
            self._serve_custom_resources()
            if len(self._payloads) == self._own_reactions:
                status, written = self._results[task]
                return _warned(aiohttp.web.json_response(written, status=status), warnings)
        response = await super()._handle(request)
        if task in self._answered:  # not a reaction a test added: the write's own status (201 Created)
            response.set_status(self._results[task][0])
        return response

    def _log(self, request: kmock.Request, status: int) -> None:
        served = Served(request, status)
        self.served.append(served)
        if self.remember is not None:
            self._forget_kmock_records()
        for listener in list(self.listeners):
            listener(served)

    def _forget_kmock_records(self) -> None:
        """kmock keeps every request (the root's and each reaction's `_requests`) and finds a request's
        reaction by scanning all of them, which made an hour-long demo quadratic. Only reachable
        through these private attributes; `__iter__` below shows kmock the request being routed."""
        self._requests.clear()
        for reaction in self._payloads:
            reaction._requests.clear()

    def __iter__(self) -> Iterator[kmock.Request]:
        if self.remember is None:
            return super().__iter__()
        task = asyncio.current_task()
        request = self._routing.get(task) if task is not None else None
        return iter(() if request is None else (request,))

    # ------------------------------------------------------------ writes

    async def _write(self, request: kmock.Request, warnings: list[str]) -> tuple[int, JsonObject]:
        resource = self._declared(request)
        namespace, name, subresource = request.namespace, request.name, request.subresource
        validation = _field_validation(request)
        strict = validation == "Strict"
        warned = None if validation == "Ignore" else warnings
        manager = _manager(request)
        if name is None:
            if request.method != kmock.method.POST:
                raise resources.error(
                    405, "MethodNotAllowed", f"{request.method.value} of a collection is not modelled"
                )
            return 201, await self.store.create(
                resource,
                namespace,
                request.data,
                strict=strict,
                manager=manager,
                warnings=warned,
                duplicates=_duplicates(request.text),
                dry_run=request.params.get("dryRun") == "All",
            )
        if request.method == kmock.method.POST and subresource == "eviction" and namespace is not None:
            options = eviction.options_of(request.data, name, namespace, request.params)
            return 201, await self.store.evict(namespace, name, options)
        if request.method == kmock.method.POST:
            raise resources.error(405, "MethodNotAllowed", "POST to an object is not allowed")
        if request.method == kmock.method.DELETE:
            deleted = await self.store.delete(
                _storage(resource), namespace, name, DeleteOptions.parse(request.data, request.params)
            )
            deleted = conversion.from_storage(resources.key_of(resource), deleted)
            if (
                self.store.get(_storage(resource), namespace, name) is None
                and resources.key_of(resource) not in _RETURN_DELETED
            ):
                return 200, _deleted(resource, deleted)
            return 200, deleted
        hooks, self.before_update = self.before_update, []
        for hook in hooks:
            hook(request)
        if subresource == "scale" and resources.key_of(resource) == resources.POOLS:
            pool = await self.store.update(
                resource,
                namespace,
                name,
                lambda pool: admission.scaled(pool, request.method, request.data),
                subresource=None,
            )
            return 200, admission.scale_of(pool)
        served = self.store.custom.served.get(resources.key_of(resource))
        if subresource == "scale" and served is not None and served.scale:
            return 200, await self._write_scale(request, resource, served, manager)
        if subresource is not None and not (subresource == "status" and self._has_status(resource)):
            raise resources.error(404, "NotFound", f"the server could not find the requested resource ({subresource})")
        custom = (
            resources.key_of(resource) in resources.CUSTOM or resources.key_of(resource) in self.store.custom.served
        )
        patch: str | None = None
        body: Any = request.data
        refusal = None
        if request.method == kmock.method.PATCH:
            patch = _patch_type(request, custom=custom)
            if patch == "apply":
                return await self._apply(request, resource, name, strict=strict)
            body = writes.decoded_patch(request.text, patch)
            refusal = _strict_patch_refusal(body if patch == "strategic" else None)
        else:
            _check_replacement(request)
        return 200, await self.store.update(
            resource,
            namespace,
            name,
            lambda current: _changed(body, patch, current, name, resources.key_of(resource)),
            subresource=subresource,
            strict=strict,
            manager=manager,
            warnings=warned,
            refusal=refusal,
        )

    async def _write_scale(
        self, request: kmock.Request, resource: kmock.resource, served: crds.CustomResource, manager: str
    ) -> JsonObject:
        """A PUT or PATCH of a custom resource's Scale: the patch applied to the Scale, its replicas written to
        the object (validated as any write of it), the new Scale answered."""
        assert served.scale is not None and request.name is not None
        scale = served.scale
        if request.method == kmock.method.PATCH:
            patch = _patch_type(request, custom=True)
            body = writes.decoded_patch(request.text, patch)

            def change(current: JsonObject) -> JsonObject:
                before = crds.scale_of(scale, current, reading=False)
                wanted = _changed(body, patch, before, str(request.name), "autoscaling/v1/scales")
                return crds.scaled(scale, current, wanted)
        else:
            sent = request.data if isinstance(request.data, dict) else {}

            def change(current: JsonObject) -> JsonObject:
                return crds.scaled(scale, current, sent)

        updated = await self.store.update(
            resource, request.namespace, request.name, change, subresource="scale", manager=manager
        )
        return crds.scale_of(scale, updated)

    async def _apply(
        self, request: kmock.Request, resource: kmock.resource, name: str, *, strict: bool
    ) -> tuple[int, JsonObject]:
        manager = str(request.params.get("fieldManager"))
        if request.subresource not in (None, "status"):
            raise resources.error(404, "NotFound", "the server could not find the requested resource")
        config = apply.configuration(request.data, request.text)
        force = request.params.get("force") == "true"
        return await self.store.apply(
            resource,
            request.namespace,
            name,
            config,
            manager=manager,
            force=force,
            strict=strict,
            subresource=request.subresource,
        )

    async def _serve_written(self, request: kmock.Request) -> JsonObject:
        """The result of the write `_respond` made (a dict: kmock renders it; `_respond` sets its status)."""
        task = asyncio.current_task()
        assert task is not None
        self._answered.add(task)
        return self._results[task][1]

    # ------------------------------------------------------------ reads

    async def _serve_fetch(self, request: kmock.Request) -> JsonObject:
        resource = self._declared(request)
        assert request.name is not None
        key = resources.key_of(resource)
        try:
            stored = self.store.current(_storage(resource), request.namespace, request.name)
        except kmock.KubernetesError:
            raise resources.not_found(resource, request.name) from None
        found = conversion.from_storage(key, stored)
        if request.subresource == "scale" and resources.key_of(resource) == resources.POOLS:
            return admission.scale_of(found)
        served = self.store.custom.served.get(key)
        if request.subresource == "scale" and served is not None and served.scale:
            return crds.scale_of(served.scale, found)
        if tables.wants_table(request.headers.get("Accept", "")):
            return tables.table(resources.key_of(resource), [found], str(self.store.version))
        return found

    async def _serve_list(self, request: kmock.Request) -> JsonObject:
        """A list as the API server serves it (`lists`): its options checked, the objects at the
        resourceVersion asked for (`Exact`: as they were then; `continue`: at the first page's), through the
        selectors, a page of `limit` of them with a continue token."""
        resource = self._declared(request)
        params = request.params
        lists.check_options(params, watch=False)
        try:
            matches = matcher(params, resources.key_of(resource))
        except ValueError as error:
            raise resources.bad_request(str(error)) from None
        current = self.store.version
        version, start = current, ""
        if params.get("continue"):
            version, start = lists.decode_continue(params["continue"])
        elif params.get("resourceVersion", "0") not in ("", "0"):
            asked = params["resourceVersion"]
            if not asked.isdigit():
                raise resources.bad_request(f'invalid resource version "{asked}"')  # not recorded: a guess
            if int(asked) > current:
                raise lists.too_large(int(asked), current)
            if params.get("resourceVersionMatch") == "Exact":
                version = int(asked)
        found = self.store.at(_storage(resource), request.namespace, version)
        if found is None:
            raise lists.too_old()
        metadata: JsonObject = {"resourceVersion": str(version)}
        limit = params.get("limit", "")
        if limit.isdigit() and int(limit) > 0:
            selected = bool(params.get("labelSelector") or params.get("fieldSelector"))
            items, after, remaining = lists.page(found, matches, limit=int(limit), start=start, selected=selected)
            if after is not None:
                metadata["continue"] = lists.encode_continue(version, after)
            if remaining is not None:
                metadata["remainingItemCount"] = remaining
        else:
            items = [obj for obj in found if matches(obj)]
        items = [conversion.from_storage(resources.key_of(resource), obj) for obj in items]
        accept = request.headers.get("Accept", "")
        if tables.wants_table(accept):
            return tables.table(resources.key_of(resource), items, str(version))
        if tables.wants_metadata_list(accept):
            return tables.metadata_list(items, metadata)
        info = self._info(resource)
        kind = info.kind if info is not None and info.kind else resources.kind_of(resource)
        return {
            "apiVersion": resources.api_version_of(resource),
            "kind": f"{kind}List",
            "metadata": metadata,
            "items": items,
        }

    async def _serve_watch(self, request: kmock.Request) -> kmock.Payload:
        """A watch stream (`_watching`) as `Content-Type: application/json`, once its options and selectors
        are checked (a 422 or 400 before any event)."""
        resource = self._declared(request)
        lists.check_options(request.params, watch=True)
        try:
            matches = matcher(request.params, resources.key_of(resource))
        except ValueError as error:
            raise resources.bad_request(str(error)) from None
        stream = self._watching(request, resource, matches)
        return KmockResponse(headers={"Content-Type": "application/json"}, payload=stream)

    async def _watching(self, request: kmock.Request, resource: kmock.resource, matches: Matcher) -> AsyncIterator[Any]:
        """Events after the `resourceVersion` asked for (without one, or with `sendInitialEvents=true`: every
        object as ADDED first, then with `allowWatchBookmarks` a BOOKMARK marking their end), through the
        selectors, until the client leaves or `timeoutSeconds` pass; with `allowWatchBookmarks`, BOOKMARKs when
        the watch cache sends them (`_next_bookmark`). Asked for as a Table (`kubectl get -w`), each event's
        object is a Table of that one object (`_WatchPrinter`)."""
        params = request.params
        key, storage = resources.key_of(resource), _storage(resource)
        bookmarks = params.get("allowWatchBookmarks") == "true"
        timeout = params.get("timeoutSeconds")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + float(timeout) if timeout else None
        printed = _WatchPrinter(key, as_table=tables.wants_table(request.headers.get("Accept", "")))
        yield b""  # the headers go out now, so the client knows the watch started
        events = self.store.events
        asked = params.get("resourceVersion", "")
        initial = params.get("sendInitialEvents") == "true"
        if asked.isdigit() and int(asked) > 0 and not initial:
            cursor = int(asked)
            if cursor < events.forgotten:
                yield expired(cursor, events.forgotten)
                return
        else:
            async with self.store.lock:
                cursor = self.store.version
                current = [obj for obj in self.store.list(storage, request.namespace) if matches(obj)]
            for obj in current:
                yield printed("ADDED", conversion.from_storage(key, obj))
            if initial and bookmarks:
                yield self._bookmark(resource, cursor, {INITIAL_EVENTS_END: "true"})
        bookmark_at = _next_bookmark(loop.time(), deadline) if bookmarks else None
        while not self._closing and (deadline is None or loop.time() < deadline):
            published = events.upcoming()
            newer, cursor = events.after(cursor, storage)
            for event in newer:
                seen = event.seen_through(request.namespace, matches)
                if seen is not None:
                    yield printed(seen["type"], conversion.from_storage(key, seen["object"]))
            if bookmark_at is not None and loop.time() >= bookmark_at:
                yield self._bookmark(resource, max(cursor, self.store.version))
                bookmark_at = _next_bookmark(loop.time(), deadline)
            until = min(t for t in (deadline, bookmark_at) if t is not None) if (deadline or bookmark_at) else None
            await wait(published, None if until is None else max(0.0, until - loop.time()))

    def _bookmark(
        self, resource: kmock.resource, version: int, annotations: Mapping[str, str] | None = None
    ) -> JsonObject:
        """A BOOKMARK event: an object of the resource's kind with only the resourceVersion (and annotations)."""
        info = self._info(resource)
        metadata: JsonObject = {"resourceVersion": str(version)}
        if annotations:
            metadata["annotations"] = dict(annotations)
        kind = info.kind if info is not None and info.kind else resources.kind_of(resource)
        return {
            "type": "BOOKMARK",
            "object": {"kind": kind, "apiVersion": resources.api_version_of(resource), "metadata": metadata},
        }

    async def _serve_server_version(self, request: kmock.Request) -> kmock.Payload:
        """`/version`: the Kubernetes release whose behaviour this emulates (kmock says 1.26)."""
        return self.release.server_version()

    async def _serve_apis(self, request: kmock.Request) -> kmock.Payload:
        """`/apis`: each group's versions in the API server's order, its preferred one first."""
        payload: dict[str, Any] = await super()._serve_apis(request)  # type: ignore[assignment]
        for group in payload.get("groups", []):
            _order_versions(group)
        payload["groups"] = sorted(payload.get("groups", []), key=lambda g: str(g.get("name")))
        return payload

    async def _serve_group(self, request: kmock.Request) -> kmock.Payload:
        """`/apis/GROUP`: its versions in the API server's order, its preferred one first."""
        payload: dict[str, Any] = await super()._serve_group(request)  # type: ignore[assignment]
        return _order_versions(payload)

    async def _serve_version(self, request: kmock.Request) -> kmock.Payload:
        """Discovery as the API server answers it: `v1` for the core group, no short names or
        categories on subresources, and `scale` as an autoscaling/v1 Scale."""
        payload: dict[str, Any] = await super()._serve_version(request)  # type: ignore[assignment]
        payload["groupVersion"] = payload.get("groupVersion", "").lstrip("/")
        for entry in payload.get("resources", []):
            if "/" in entry["name"]:
                entry["shortNames"], entry["categories"] = [], []
            if entry["name"].endswith("/scale"):
                entry.update(kind="Scale", group="autoscaling", version="v1", verbs=["get", "patch", "update"])
            if entry["name"] == "pods/eviction":  # what `kubectl drain` looks for (drain.go CheckEvictionSupport)
                entry.update(kind="Eviction", group="policy", version="v1", verbs=["create"], singularName="")
        return payload

    async def _render_error(self, exc: Exception) -> aiohttp.web.StreamResponse:
        """A `StatusError` as exactly its Status and headers; the rest as kmock renders them."""
        if isinstance(exc, resources.StatusError):
            return aiohttp.web.json_response(exc.body, status=exc.status, headers=exc.headers)
        if isinstance(exc, kmock.KubernetesError):
            return aiohttp.web.json_response(resources.rendered(exc), status=exc.status)
        return await super()._render_error(exc)


@attrs.define
class _WatchPrinter:
    """A watch event as its client asked for it: the object as it is, or (`Accept: ...;as=Table`) a Table of
    it, with the column definitions in the first event only (k8s.io/apiserver/pkg/endpoints/handlers/
    response.go `watchEmbeddedEncoder.doEncode`: `NoHeaders` set after the first object). The Table's
    resourceVersion is the object's (the table convertors' `CommonAccessor`). BOOKMARKs and ERROR Statuses
    pass as they are (`doTransformObject` leaves a Status alone; a BOOKMARK, which kubectl does not ask
    for, is not printed here)."""

    resource_key: str
    as_table: bool
    _headers: bool = True

    def __call__(self, event_type: str, obj: JsonObject) -> JsonObject:
        if not self.as_table:
            return {"type": event_type, "object": obj}
        version = str((obj.get("metadata") or {}).get("resourceVersion", ""))
        printed = tables.table(self.resource_key, [obj], version, headers=self._headers)
        self._headers = False
        return {"type": event_type, "object": printed}


def _version_priority(version: str) -> tuple[int, int, int, str]:
    """k8s.io/apimachinery/pkg/version `CompareKubeAwareVersionStrings`: GA before beta before alpha, a higher
    number first; versions of another form after them all, by name."""
    found = re.fullmatch(r"v(\d+)(?:(alpha|beta)(\d+))?", version)
    if found is None:
        return (0, 0, 0, version)
    stage = {"": 3, "beta": 2, "alpha": 1}[found[2] or ""]
    return (-stage, -int(found[1]), -int(found[3] or 0), version)


def _order_versions(group: dict[str, Any]) -> dict[str, Any]:
    """A discovery group (APIGroup) with its versions in priority order and the first one preferred
    (k8s.io/apiserver's group discovery: the versions as the storage registered them, v1 before v1beta2)."""
    versions = sorted(group.get("versions") or [], key=lambda v: _version_priority(str(v.get("version"))))
    group["versions"] = versions
    if versions:
        group["preferredVersion"] = dict(versions[0])
    return group


BOOKMARK_EVERY = 60.0
"""Seconds between a watch's BOOKMARKs (the watch cache's bookmarkFrequency)."""
BOOKMARK_BEFORE_END = 2.0


def _next_bookmark(now: float, deadline: float | None) -> float | None:
    """When a watch's next BOOKMARK is due (k8s.io/apiserver/pkg/storage/cacher/cache_watcher.go
    `nextBookmarkTime`): a minute on, or 2 s before the watch ends if that comes first; none when that
    time has passed (a watch of under 2 s gets none)."""
    due = now + BOOKMARK_EVERY
    if deadline is not None:
        due = min(due, deadline - BOOKMARK_BEFORE_END)
    return due if due > now else None


def _storage(resource: kmock.resource) -> kmock.resource:
    """The resource whose storage holds a resource's objects (`conversion`): itself, mostly."""
    key = resources.key_of(resource)
    stored = conversion.storage_of(key)
    return resource if stored == key else kmock.resource(stored)


def _deleted(resource: kmock.resource, obj: JsonObject) -> JsonObject:
    """What a DELETE that removed the object answers: a Success Status naming it (the registry store's
    Delete, k8s.io/apiserver/pkg/registry/generic/registry/store.go, unless `ReturnDeletedObject`)."""
    metadata = obj.get("metadata") or {}
    details: JsonObject = {"name": metadata.get("name")}
    if resource.group:
        details["group"] = resource.group
    details["kind"] = str(resource.plural)
    details["uid"] = metadata.get("uid")
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}


def _manager(request: kmock.Request) -> str:
    """Who a write's fields are recorded as set by: the `fieldManager` parameter, else the first word of
    the User-Agent (k8s.io/apiserver/pkg/endpoints/handlers/rest.go `managerOrUserAgent`)."""
    given = request.params.get("fieldManager")
    if given:
        return given
    agent = next((v for k, v in request.headers.items() if k.lower() == "user-agent"), "")
    return agent.split("/")[0][:128]


def _warned(response: aiohttp.web.StreamResponse, warnings: list[str]) -> aiohttp.web.StreamResponse:
    """The response with a `Warning: 299 - "..."` header per warning (k8s.io/apiserver/pkg/warning)."""
    for text in warnings:
        response.headers.add("Warning", f"299 - {json.dumps(text)}")
    return response


def _check_replacement(request: kmock.Request) -> None:
    """400 for a PUT whose body is not an object of the URL's name (checked before anything is read)."""
    body = request.data
    if not isinstance(body, dict):
        raise resources.bad_request("the body of a PUT must be a JSON object")
    sent = (body.get("metadata") or {}).get("name")
    if sent not in (None, request.name):
        raise resources.bad_request(
            f"the name of the object ({sent}) does not match the name on the URL ({request.name})"
        )


FIELD_VALIDATIONS = ("", "Ignore", "Strict", "Warn")
_OPTIONS = {"POST": "CreateOptions", "PUT": "UpdateOptions", "PATCH": "PatchOptions"}


def _field_validation(request: kmock.Request) -> str:
    """The `fieldValidation` of a write (unset: Warn), 422 for a value the options do not take
    (k8s.io/apimachinery/pkg/apis/meta/v1/validation/validation.go `ValidateFieldValidation`)."""
    given = request.params.get("fieldValidation", "")
    if given not in FIELD_VALIDATIONS:
        supported = ", ".join(json.dumps(v) for v in FIELD_VALIDATIONS)
        error = kube_validation.FieldError(
            "FieldValueNotSupported", "fieldValidation", given, f"supported values: {supported}"
        )
        raise kube_validation.refusal(_OPTIONS.get(request.method.value, "CreateOptions"), "meta.k8s.io", "", [error])
    return given or "Warn"


def _duplicates(text: str) -> list[str]:
    """The fields a JSON body names twice (`spec.size`), which the strict decoder reports."""
    found: list[str] = []

    def walk(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        return _Pairs(pairs)

    try:
        root = json.loads(text, object_pairs_hook=walk) if text else None
    except ValueError:
        return []

    def visit(value: Any, path: str) -> None:
        if isinstance(value, _Pairs):
            seen: set[str] = set()
            for key, child in value.pairs:
                at = f"{path}.{key}" if path else key
                if key in seen and at not in found:
                    found.append(at)
                seen.add(key)
                visit(child, at)
        elif isinstance(value, list):
            for index, item in enumerate(value):
                visit(item, f"{path}[{index}]")

    visit(root, "")
    return found


class _Pairs(dict[str, Any]):
    """A JSON object with its key-value pairs as sent, repeats included."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs


def _strict_patch_refusal(strategic: Any) -> Callable[[list[str], Any], Exception]:
    """A patch's answer under `fieldValidation=Strict` when its result has unknown fields (patch.go: a
    422 about `patch`, whose value is the strategic merge patch as Go prints it, or the patched JSON)."""

    def refused(problems: list[str], patched: Any) -> Exception:
        if strategic is not None:
            shown = patches.go_printed(strategic)
        else:
            shown = json.dumps(patched, separators=(",", ":"), sort_keys=True, ensure_ascii=False)
        why = "strict decoding error: " + ", ".join(problems)
        return kube_validation.refusal(
            "", "", "", [kube_validation.FieldError("FieldValueInvalid", "patch", shown, why)]
        )

    return refused


def _patch_type(request: kmock.Request, *, custom: bool) -> str:
    """The patch type of a PATCH's Content-Type, 415 for one not served, and its options checked
    (k8s.io/apiserver/pkg/endpoints/handlers/patch.go `PatchResource`; a built-in resource's route only
    consumes the patch types, which go-restful refuses as `415: Unsupported Media Type` before the
    handler; a custom resource's handler takes no strategic merge patch)."""
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    patch = _PATCHES.get(content_type)
    if patch is None and not custom:
        raise resources.error(415, "UnsupportedMediaType", "415: Unsupported Media Type", {})
    if patch is None or (patch == "strategic" and custom):
        accepted = [t for t, p in _PATCHES.items() if not (custom and p == "strategic")]
        if (
            custom
        ):  # the custom resource handler's order (apiextensions-apiserver pkg/apiserver/customresource_handler.go)
            accepted = ["application/json-patch+json", "application/merge-patch+json", apply.CONTENT_TYPE]
        raise resources.error(
            415,
            "UnsupportedMediaType",
            "the body of the request was in an unknown format - accepted media types include: " + ", ".join(accepted),
        )
    errors = []
    if patch != "apply" and "force" in request.params:
        errors.append(
            kube_validation.FieldError(
                "FieldValueForbidden", "force", detail="may not be specified for non-apply patch"
            )
        )
    if patch == "apply" and not request.params.get("fieldManager"):
        errors.append(
            kube_validation.FieldError("FieldValueRequired", "fieldManager", detail="is required for apply patch")
        )
    if errors:
        raise kube_validation.refusal("PatchOptions", "meta.k8s.io", "", errors)
    return patch


def _changed(body: Any, patch: str | None, current: JsonObject, name: str, key: str) -> JsonObject:
    """The candidate object of a PUT (its body) or a PATCH (the patch applied to the stored object); 400
    when a patch renames the object (handlers/rest.go `checkName`)."""
    if patch is None:  # a PUT, checked by `_check_replacement`; a copy: the store keeps what it is given
        return copy.deepcopy(dict(body))
    if patch == "json":
        result = patches.json_patch(current, body)
    elif patch == "strategic":
        result = patches.strategic_merge_patch(current, body, typed.schema_of(key))
    else:
        result = writes.merge_patch(current, body)
    sent = (result.get("metadata") or {}).get("name")
    if sent != name:
        raise resources.bad_request(f"the name of the object ({sent}) does not match the name on the URL ({name})")
    return result
