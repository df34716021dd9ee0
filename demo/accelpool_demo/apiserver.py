"""The demo's API server: the kmock Kubernetes emulator, served over HTTP, with what kubectl needs.

kmock stores and streams objects like an API server; this subclass adds what the operator and
kubectl rely on and kmock lacks:

- writes as the API server does them: a new `resourceVersion` on every write, 409 Conflict for a
  stale one, PUT replacing an object (404 for a missing one), uid and timestamps on creation, names
  generated from `generateName`, server-side apply (`serve_apply`);
- the two admission plugins that refuse agent pods on a cluster not set up for them (`admit_pod`:
  a missing ServiceAccount or RuntimeClass), with the API server's own messages;
- a bounded footprint however long it runs: kmock keeps every request, every object version and
  every error, and finds each request's reaction by scanning all the requests it has kept, which
  made an hour-long demo quadratic and CPU-bound (too busy to shut down on Ctrl-C);
- the discovery details kubectl relies on (a core groupVersion of `v1`, list kinds, short names
  only on resources) and server-side printing (`kubectl get cpool` shows the printer columns).

Reads, patches, deletes and watches are otherwise kmock's own behaviour.
"""

from __future__ import annotations

import asyncio
import copy
import datetime
import itertools
import random
import uuid
from collections.abc import Iterator, Mapping
from typing import Any

import aiohttp.web
import attrs
import jsonpatch
import kmock
import yaml
from kmock._internal import rendering  # the request type kmock hands to its serving hooks

from accelpool import admission, api, crd, validation

VERBS = frozenset({"get", "list", "watch", "create", "update", "patch", "delete"})
RESOURCES: dict[str, kmock.ResourceInfo] = {
    "v1/namespaces": kmock.ResourceInfo(kind="Namespace", singular="namespace", namespaced=False, shortnames={"ns"}),
    "v1/nodes": kmock.ResourceInfo(
        kind="Node", singular="node", namespaced=False, shortnames={"no"}, subresources={"status"}
    ),
    "v1/events": kmock.ResourceInfo(kind="Event", singular="event", namespaced=True, shortnames={"ev"}),
    "v1/configmaps": kmock.ResourceInfo(kind="ConfigMap", singular="configmap", namespaced=True, shortnames={"cm"}),
    "apps/v1/daemonsets": kmock.ResourceInfo(
        kind="DaemonSet", singular="daemonset", namespaced=True, shortnames={"ds"}, subresources={"status"}
    ),
    "v1/pods": kmock.ResourceInfo(
        kind="Pod", singular="pod", namespaced=True, shortnames={"po"}, subresources={"status"}
    ),
    "v1/serviceaccounts": kmock.ResourceInfo(
        kind="ServiceAccount", singular="serviceaccount", namespaced=True, shortnames={"sa"}
    ),
    "node.k8s.io/v1/runtimeclasses": kmock.ResourceInfo(kind="RuntimeClass", singular="runtimeclass", namespaced=False),
    "apiextensions.k8s.io/v1/customresourcedefinitions": kmock.ResourceInfo(
        kind="CustomResourceDefinition", singular="customresourcedefinition", namespaced=False, shortnames={"crd"}
    ),
    f"{api.GROUP}/{api.VERSION}/{api.PLURAL}": kmock.ResourceInfo(
        kind=api.KIND,
        singular=api.SINGULAR,
        namespaced=False,
        shortnames=set(api.SHORT_NAMES),
        categories=set(api.CATEGORIES),
        subresources={"status", "scale"},
    ),
}
"""Every resource accelpool reads or writes, as the emulator must declare them for discovery and
watches (the demo, the operator's integration tests and the convergence benchmark share it)."""
for _info in RESOURCES.values():
    _info.verbs.update(VERBS)


def register_resources(emulator: kmock.KubernetesEmulator) -> None:
    """Declare every resource accelpool reads or writes, so discovery and watches work."""
    for key, info in RESOURCES.items():
        emulator.resources[key] = info


ERRORS_KEPT = 100
"""The most recent failed requests the emulator keeps for debugging (kmock keeps them all)."""
VERSIONS_KEPT = 2
"""Versions kept per object: the current one, and the last one before a deletion."""


def _now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _qualified(resource: kmock.resource) -> str:
    """`daemonsets.apps`, `nodes`: how the API server names a resource in its messages."""
    return f"{resource.plural}.{resource.group}" if resource.group else str(resource.plural)


def _not_found(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(404, "NotFound", f'{_qualified(resource)} "{name}" not found')


def _conflict(resource: kmock.resource, name: str) -> kmock.KubernetesError:
    return kmock.KubernetesError(
        409,
        "Conflict",
        f'Operation cannot be fulfilled on {_qualified(resource)} "{name}": the object has been modified; '
        "please apply your changes to the latest version and try again",
    )


def _forbidden(resource: str, name: str, why: str) -> kmock.KubernetesError:
    """`admission.NewForbidden` (k8s.io/apiserver/pkg/admission/errors.go): `pods "x" is forbidden: why`."""
    return kmock.KubernetesError(403, "Forbidden", f'{resource} "{name}" is forbidden: {why}')


def _stored(emulator: kmock.KubernetesEmulator, request: rendering.Request) -> dict[str, Any] | None:
    """The object a request names, as stored; None when it does not exist (or was deleted)."""
    assert request.resource is not None and request.name is not None
    key = (request.resource, request.namespace, request.name)
    if key not in emulator.objects or emulator.objects[key].deleted:
        return None
    return emulator.objects[key].raw


async def serve_replace(
    emulator: kmock.KubernetesEmulator, request: rendering.Request, version: str
) -> aiohttp.web.StreamResponse:
    """PUT, as the API server does it: replace the whole object (or only its status, on the status
    subresource); 404 for a missing object, 409 for a stale `metadata.resourceVersion`, an
    unconditional update without one; uid and creationTimestamp kept, `version` as the new
    resourceVersion, and a new generation when the spec changes. The caller serialises writes."""
    resource, name = request.resource, request.name
    assert resource is not None and name is not None
    body = request.data
    if not isinstance(body, dict):
        raise kmock.KubernetesError(400, "BadRequest", "the body of a PUT must be a JSON object")
    sent_metadata = body.get("metadata") or {}
    if sent_metadata.get("name") not in (None, name):
        raise kmock.KubernetesError(
            400,
            "BadRequest",
            f"the name of the object ({sent_metadata['name']}) does not match the name on the URL ({name})",
        )
    if request.subresource not in (None, "status"):
        raise kmock.KubernetesError(
            404, "NotFound", f"the server could not find the requested resource ({request.subresource})"
        )
    info = emulator.resources.get(resource)
    has_status = isinstance(info, kmock.ResourceInfo) and "status" in info.subresources
    async with emulator._lock:
        current = _stored(emulator, request)
        if current is None:
            raise _not_found(resource, name)
        metadata = current.get("metadata") or {}
        sent = sent_metadata.get("resourceVersion")
        if sent and sent != metadata.get("resourceVersion"):
            raise _conflict(resource, name)
        if request.subresource == "status":
            replacement = {**copy.deepcopy(current), "status": copy.deepcopy(body.get("status"))}
        else:
            replacement = copy.deepcopy(body)
            if has_status:  # the status is written through its own subresource only
                replacement["status"] = copy.deepcopy(current.get("status"))
            replacement["metadata"] = {
                **copy.deepcopy(sent_metadata),
                **{k: metadata[k] for k in ("name", "namespace", "uid", "creationTimestamp") if k in metadata},
                "generation": int(metadata.get("generation") or 1) + (replacement.get("spec") != current.get("spec")),
            }
            replacement = {k: v for k, v in replacement.items() if v is not None}
        replacement["metadata"]["resourceVersion"] = version
        stored = emulator.objects[resource, request.namespace, name]
        stored.history.append(replacement)
        raw = stored.raw
        await emulator._buses[resource].put({"type": "MODIFIED", "object": raw})
    return aiohttp.web.json_response(raw)


def check_json_patch(current: Mapping[str, Any], operations: list[Any]) -> None:
    """A JSON patch that cannot be applied (a failed `test`, a missing path) is a 422, as the API server's
    jsonPatcher answers it (k8s.io/apiserver/pkg/endpoints/handlers/patch.go); kmock would answer 500."""
    try:
        jsonpatch.apply_patch(copy.deepcopy(dict(current)), operations)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as error:
        raise kmock.KubernetesError(422, "Invalid", f"the JSON patch could not be applied: {error}") from None


def exists(emulator: kmock.KubernetesEmulator, resource: str, namespace: str | None, name: str) -> bool:
    try:
        return not emulator.objects[resource, namespace, name].deleted
    except KeyError:
        return False


NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of generated names (k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alike digits)."""
NAME_SUFFIX_LENGTH = 5
"""k8s.io/apiserver/pkg/storage/names/generate.go: `randomLength`, the suffix added to `generateName`."""
MAX_GENERATED_NAME_BASE = 63 - NAME_SUFFIX_LENGTH


def generate_name(metadata: dict[str, Any]) -> None:
    """A name from `generateName` (`accelpool-agent-h100-` → `accelpool-agent-h100-x7k2p`), as the API server
    makes it (k8s.io/apiserver/pkg/storage/names/generate.go) before admission, so refusals name the pod."""
    if not metadata.get("name") and metadata.get("generateName"):
        base = str(metadata["generateName"])[:MAX_GENERATED_NAME_BASE]
        metadata["name"] = base + "".join(random.choices(NAME_ALPHABET, k=NAME_SUFFIX_LENGTH))


DEFAULT_SERVICE_ACCOUNT = "default"
"""Every namespace has it (kube-controller-manager's serviceaccount controller creates it)."""


def admit_pod(emulator: kmock.KubernetesEmulator, namespace: str | None, pod: Mapping[str, Any]) -> None:
    """The admission plugins that refuse a pod on a cluster not set up for it, in the API server's order
    (pkg/kubeapiserver/options/plugins.go lists ServiceAccount before RuntimeClass) and with their messages:

    - plugin/pkg/admission/serviceaccount/admission.go: `error looking up service account <ns>/<name>: <err>`,
      the error being the lister's NotFound, `serviceaccount "<name>" not found`;
    - plugin/pkg/admission/runtimeclass/admission.go: `pod rejected: RuntimeClass "<name>" not found`.

    Both are wrapped by admission.NewForbidden: 403, `pods "<name>" is forbidden: ...`. Quotas and Pod Security
    admission are not modelled."""
    metadata = pod.get("metadata") or {}
    name = str(metadata.get("name") or metadata.get("generateName") or "Unknown")
    spec = pod.get("spec") or {}
    account = str(spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT)
    if account != DEFAULT_SERVICE_ACCOUNT and not exists(emulator, "v1/serviceaccounts", namespace, account):
        raise _forbidden(
            "pods",
            name,
            f'error looking up service account {namespace}/{account}: serviceaccount "{account}" not found',
        )
    runtime_class = spec.get("runtimeClassName")
    if runtime_class and not exists(emulator, "node.k8s.io/v1/runtimeclasses", None, str(runtime_class)):
        raise _forbidden("pods", name, f'pod rejected: RuntimeClass "{runtime_class}" not found')


def prepare_create(emulator: kmock.KubernetesEmulator, request: rendering.Request, version: str) -> None:
    """What the API server does to a create before storing it: a name from `generateName`, the namespace of
    the URL, admission (`admit_pod` for pods, whose status starts `Pending` as the pod strategy sets it), then
    uid, creationTimestamp, generation and `version` as the resourceVersion."""
    body = request.data
    if not isinstance(body, dict):
        return
    metadata = body.setdefault("metadata", {})
    generate_name(metadata)
    if request.namespace and not metadata.get("namespace"):
        metadata["namespace"] = request.namespace
    resource = request.resource
    if resource is not None and resource.plural == "pods" and not resource.group and not request.subresource:
        admit_pod(emulator, request.namespace or metadata.get("namespace"), body)
        body["status"] = {"phase": "Pending"}
    metadata.setdefault("uid", str(uuid.uuid4()))
    metadata.setdefault("creationTimestamp", _now())
    metadata.setdefault("generation", 1)
    metadata["resourceVersion"] = version


# ---------------------------------------------------------------- ComputePools: admission and /scale


def _is_pools(request: rendering.Request) -> bool:
    resource = request.resource
    return resource is not None and resource.group == api.GROUP and resource.plural == api.PLURAL


def admit_pool_write(emulator: kmock.KubernetesEmulator, request: rendering.Request) -> None:
    """A ComputePool create, replace or merge patch judged as a real API server with the chart
    installed judges it: strict decoding, the CRD's schema and CEL, then the admission webhook, all
    by `accelpool.validation` (which the contract tests hold to the API server's own answers).
    Spec-less changes (labels, finalizers) are not judged, as the webhook's matchConditions skip them."""
    body = request.data
    if not isinstance(body, dict):
        return  # a JSON patch: not judged here
    current: Mapping[str, Any] = {}
    if request.method == kmock.method.POST:
        candidate = body
    else:
        stored = _stored(emulator, request) if request.name is not None else None
        if stored is None:
            return
        current = stored
        candidate = body if request.method == kmock.method.PUT else _merged(current, body)
        if candidate.get("spec") == current.get("spec"):
            return
    verdict = validation.validate_object(candidate)
    if verdict.stage == "decode" and request.params.get("fieldValidation", "Warn") != "Strict":
        # Without strict field validation the API server drops unknown fields (and warns).
        for problem in verdict.problems:
            _drop(body, problem.path.split("."))
        verdict = validation.validate_object(body if request.method != kmock.method.PATCH else _merged(current, body))
    if verdict.valid:
        return
    if verdict.stage == "decode":
        raise kmock.KubernetesError(400, "BadRequest", verdict.rejection)
    status = admission.denial_status(verdict)
    raise kmock.KubernetesError(422, "Invalid", status["message"], status["details"])


def _drop(body: dict[str, Any], path: list[str]) -> None:
    """Remove the field at a dotted path (an unknown field), if it is there."""
    parent: Any = body
    for part in path[:-1]:
        parent = parent.get(part) if isinstance(parent, dict) else None
    if isinstance(parent, dict):
        parent.pop(path[-1], None)


def _merged(current: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON merge patch (RFC 7386) applied to a copy of `current`."""
    result = copy.deepcopy(dict(current))
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = _merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def _scale(pool: Mapping[str, Any]) -> dict[str, Any]:
    """The autoscaling/v1 Scale the CRD's scale subresource serves (specReplicasPath .spec.nodes,
    statusReplicasPath .status.nodes.members, labelSelectorPath .status.selector)."""
    metadata = pool.get("metadata") or {}
    status = pool.get("status") or {}
    scale: dict[str, Any] = {
        "apiVersion": "autoscaling/v1",
        "kind": "Scale",
        "metadata": {k: metadata[k] for k in ("name", "uid", "resourceVersion", "creationTimestamp") if k in metadata},
        "spec": {"replicas": (pool.get("spec") or {}).get("nodes", 1)},
        "status": {"replicas": (status.get("nodes") or {}).get("members", 0)},
    }
    if status.get("selector"):
        scale["status"]["selector"] = status["selector"]
    return scale


async def serve_scale(
    emulator: kmock.KubernetesEmulator, request: rendering.Request, version: str
) -> aiohttp.web.StreamResponse:
    """GET, PUT and merge-PATCH of `computepools/NAME/scale` (what `kubectl scale` uses): the Scale's
    `spec.replicas` is the pool's `spec.nodes`; a write is judged like any spec change."""
    assert request.resource is not None and request.name is not None
    current = _stored(emulator, request)
    if current is None:
        raise _not_found(request.resource, request.name)
    if request.method == kmock.method.GET:
        return aiohttp.web.json_response(_scale(current))
    body = request.data if isinstance(request.data, dict) else {}
    sent = (body.get("metadata") or {}).get("resourceVersion")
    if sent and sent != (current.get("metadata") or {}).get("resourceVersion"):
        raise _conflict(request.resource, request.name)
    replicas = (body.get("spec") or {}).get("replicas")
    if replicas is None and request.method == kmock.method.PUT:
        replicas = 0  # an absent int32 in a replaced Scale is zero
    if replicas is None:
        return aiohttp.web.json_response(_scale(current))
    updated = copy.deepcopy(current)
    updated.setdefault("spec", {})["nodes"] = replicas
    verdict = validation.validate_object(updated)
    if not verdict.valid:
        status = admission.denial_status(verdict)
        raise kmock.KubernetesError(422, "Invalid", status["message"], status["details"])
    metadata = updated["metadata"]
    metadata["resourceVersion"] = version
    if updated["spec"] != current.get("spec"):
        metadata["generation"] = int(metadata.get("generation") or 1) + 1
    stored = emulator.objects[request.resource, request.namespace, request.name]
    stored.history.append(updated)
    await emulator._buses[request.resource].put({"type": "MODIFIED", "object": stored.raw})
    return aiohttp.web.json_response(_scale(stored.raw))


# ---------------------------------------------------------------- server-side apply

APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
_UNOWNED_METADATA = frozenset(
    {"name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp"}
    | {"managedFields", "selfLink"}
)
Path = tuple[str, ...]


def is_apply(request: rendering.Request) -> bool:
    content_type = request.headers.get("Content-Type", "").split(";")[0].strip()
    return request.method == kmock.method.PATCH and content_type == APPLY_CONTENT_TYPE


def _owned_paths(config: Mapping[str, Any], has_status: bool) -> set[Path]:
    """The fields an applied configuration sets: every leaf (a scalar, a list, an empty map) by its path."""
    paths: set[Path] = set()

    def walk(value: Any, path: Path) -> None:
        if isinstance(value, Mapping) and value:
            for key, child in value.items():
                walk(child, (*path, str(key)))
        else:
            paths.add(path)

    for key, value in config.items():
        if key in ("apiVersion", "kind") or (key == "status" and has_status):
            continue
        if key == "metadata":
            for meta_key, meta_value in (value or {}).items():
                if meta_key not in _UNOWNED_METADATA:
                    walk(meta_value, ("metadata", str(meta_key)))
        else:
            walk(value, (str(key),))
    return paths


def _fields_v1(paths: set[Path]) -> dict[str, Any]:
    """Paths as `managedFields[].fieldsV1` (`{"f:spec": {"f:template": {...}}}`); lists are atomic here."""
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault(f"f:{part}", {})
    return root


def _paths_of(fields: Mapping[str, Any], prefix: Path = ()) -> set[Path]:
    found: set[Path] = set()
    for key, child in fields.items():
        if not key.startswith("f:"):
            continue  # `k:`/`v:`/`i:` list items and the `.` self marker: not produced by this model
        path = (*prefix, key[2:])
        found |= _paths_of(child, path) if child else {path}
    return found


def _value_at(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, Mapping) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


_MISSING = object()


def _remove_path(obj: dict[str, Any], path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        node = node.get(part) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return
    node.pop(path[-1], None)


def _merge_applied(target: dict[str, Any], config: Mapping[str, Any]) -> None:
    for key, value in config.items():
        if isinstance(value, Mapping) and value and isinstance(target.get(key), dict):
            _merge_applied(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


async def serve_apply(
    emulator: kmock.KubernetesEmulator, request: rendering.Request, version: str
) -> aiohttp.web.StreamResponse:
    """Server-side apply (PATCH `application/apply-patch+yaml`), as k8s.io/apiserver's patch handler
    (pkg/endpoints/handlers/patch.go, `applyPatcher`) and sigs.k8s.io/structured-merge-diff do it for one
    field manager:

    - the `fieldManager` query parameter is required; the body is the whole intent (YAML or JSON);
    - a missing object is created (a 201, as `applyPatcher.createNewObject`);
    - fields this manager applied before and leaves out now are removed, unless another applier owns them;
      fields nobody applied (another writer's, a controller's status) are kept; the rest is merged in;
    - `metadata.resourceVersion`, when sent, is a precondition (409 when stale); without it an apply never
      conflicts on versions, so a controller writing `.status` in between cannot make it fail;
    - the status of a resource with a status subresource is not written through the main resource;
    - a new generation when the spec changes; nothing written (same resourceVersion) when nothing changes;
    - ownership is recorded in `metadata.managedFields` (operation Apply, FieldsV1); a field another applier
      owns with a different value is a 409 conflict unless `force=true`, which takes it over.

    Simplified: lists are atomic (real SSA merges list-maps such as containers by key; for a manager that
    owns a whole list, as accelpool does, the result is the same), and writers other than appliers do not
    appear in managedFields."""
    resource, name = request.resource, request.name
    assert resource is not None and name is not None
    manager = request.params.get("fieldManager")
    if not manager:
        raise kmock.KubernetesError(400, "BadRequest", "PATCH with an apply patch type requires a fieldManager")
    if request.subresource:
        raise kmock.KubernetesError(400, "BadRequest", "apply to a subresource is not modelled by this emulator")
    config = request.data if isinstance(request.data, dict) else yaml.safe_load(request.text or "")
    if not isinstance(config, dict) or not config.get("apiVersion") or not config.get("kind"):
        raise kmock.KubernetesError(400, "BadRequest", "an applied configuration needs apiVersion and kind")
    sent_metadata = dict(config.get("metadata") or {})
    if sent_metadata.get("name") not in (None, name):
        raise kmock.KubernetesError(
            400,
            "BadRequest",
            f"the name of the object ({sent_metadata['name']}) does not match the name on the URL ({name})",
        )
    info = emulator.resources.get(resource)
    has_status = isinstance(info, kmock.ResourceInfo) and "status" in info.subresources
    force = request.params.get("force") == "true"
    owned = _owned_paths(config, has_status)
    body = {k: copy.deepcopy(v) for k, v in config.items() if not (k == "status" and has_status)}
    body["metadata"] = {k: v for k, v in sent_metadata.items() if k not in _UNOWNED_METADATA}
    entry = {
        "manager": manager,
        "operation": "Apply",
        "apiVersion": config["apiVersion"],
        "time": _now(),
        "fieldsType": "FieldsV1",
        "fieldsV1": _fields_v1(owned),
    }
    key = (resource, request.namespace, name)
    async with emulator._lock:
        current = _stored(emulator, request)
        if current is None:
            if sent_metadata.get("resourceVersion"):
                raise _not_found(resource, name)
            created = body
            created["metadata"] = {
                **body["metadata"],
                "name": name,
                **({"namespace": request.namespace} if request.namespace else {}),
                "uid": str(uuid.uuid4()),
                "creationTimestamp": _now(),
                "generation": 1,
                "resourceVersion": version,
                "managedFields": [entry],
            }
            if key in emulator.objects:
                emulator.objects[key].create(created)
            else:
                emulator.objects[key] = created
            raw = emulator.objects[key].raw
            await emulator._buses[resource].put({"type": "ADDED", "object": raw})
            return aiohttp.web.json_response(raw, status=201)
        metadata = current.get("metadata") or {}
        sent = sent_metadata.get("resourceVersion")
        if sent and sent != metadata.get("resourceVersion"):
            raise _conflict(resource, name)
        entries = [dict(e) for e in metadata.get("managedFields") or []]
        appliers = [e for e in entries if e.get("operation") == "Apply" and e.get("manager") != manager]
        others = {str(e.get("manager")): _paths_of(e.get("fieldsV1") or {}) for e in appliers}
        previous = next(
            (
                _paths_of(e.get("fieldsV1") or {})
                for e in entries
                if e.get("operation") == "Apply" and e.get("manager") == manager
            ),
            set(),
        )
        contested = {
            other: {p for p in paths & owned if _value_at(current, p) != _value_at(config, p)}
            for other, paths in others.items()
        }
        contested = {other: paths for other, paths in contested.items() if paths}
        if contested and not force:
            fields = sorted("." + ".".join(p) for paths in contested.values() for p in paths)
            owners = ", ".join(f'"{m}"' for m in sorted(contested))
            raise kmock.KubernetesError(
                409,
                "Conflict",
                f"Apply failed with {len(fields)} conflicts: conflict with {owners}: {', '.join(fields)}",
            )
        result = copy.deepcopy(current)
        for path in previous - owned:
            if not any(path in paths for paths in others.values()):
                _remove_path(result, path)
        _merge_applied(result, body)
        for applier in appliers:
            taken = contested.get(str(applier.get("manager")))
            if taken:
                applier["fieldsV1"] = _fields_v1(others[str(applier["manager"])] - taken)
        kept = [e for e in entries if not (e.get("operation") == "Apply" and e.get("manager") == manager)]
        result["metadata"] = {
            **result.get("metadata", {}),
            **{k: metadata[k] for k in _UNOWNED_METADATA if k in metadata},
        }
        if has_status:
            result["status"] = copy.deepcopy(current.get("status"))
            result = {k: v for k, v in result.items() if v is not None}
        unchanged = _without_managed_fields(result) == _without_managed_fields(current)
        if unchanged and previous == owned and not contested:
            return aiohttp.web.json_response(current)
        if result.get("spec") != current.get("spec"):
            result["metadata"]["generation"] = int(metadata.get("generation") or 1) + 1
        result["metadata"]["resourceVersion"] = version
        result["metadata"]["managedFields"] = [*kept, entry]
        stored = emulator.objects[key]
        stored.history.append(result)
        raw = stored.raw
        await emulator._buses[resource].put({"type": "MODIFIED", "object": raw})
    return aiohttp.web.json_response(raw)


def _without_managed_fields(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {**obj, "metadata": {k: v for k, v in (obj.get("metadata") or {}).items() if k != "managedFields"}}


def _json_path(obj: Any, path: str) -> Any:
    for part in path.lstrip(".").split("."):
        if not isinstance(obj, dict):
            return None
        obj = obj.get(part)
    return obj


def _age(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    created = datetime.datetime.fromisoformat(timestamp.replace("Z", "+00:00"))
    seconds = int((datetime.datetime.now(datetime.UTC) - created).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{max(seconds, 0)}s"


@attrs.define(kw_only=True)
class DemoApiServer(kmock.KubernetesEmulator):
    """kmock's emulator with the API server's write semantics, a bounded footprint, and
    kubectl-friendly discovery, list kinds and ComputePool tables."""

    _versions: itertools.count[int] = attrs.field(factory=lambda: itertools.count(1), init=False)
    _routing: dict[asyncio.Task[Any], rendering.Request] = attrs.field(factory=dict, init=False)
    _writing: asyncio.Lock = attrs.field(factory=asyncio.Lock, init=False)
    """Held from a write's resourceVersion check to its storing, so no other write lands between."""

    def __attrs_post_init__(self) -> None:
        super().__attrs_post_init__()
        register_resources(self)

    def __iter__(self) -> Iterator[rendering.Request]:
        """The requests kmock's routing scans to find a request's reaction: only the one being
        routed in the current task (each HTTP request is served in its own task), so finding a
        reaction costs the same in the first minute and the hundredth."""
        task = asyncio.current_task()
        request = self._routing.get(task) if task is not None else None
        return iter(() if request is None else (request,))

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        try:
            return await super().__call__(raw_request)
        finally:  # kmock records a failed request's error after its handling, so trim it here
            if self._errors:
                del self._errors[-1][:-ERRORS_KEPT]

    async def _handle(self, request: rendering.Request) -> Any:
        task = asyncio.current_task()
        assert task is not None
        self._routing[task] = request
        try:
            if request.subresource == "scale" and _is_pools(request):
                async with self._writing:
                    return await serve_scale(self, request, str(next(self._versions)))
            if _is_pools(request) and not request.subresource:
                admit_pool_write(self, request)
            if request.method == kmock.method.PUT and request.resource is not None and request.name is not None:
                async with self._writing:
                    return await serve_replace(self, request, str(next(self._versions)))
            if is_apply(request) and request.resource is not None and request.name is not None:
                async with self._writing:
                    return await serve_apply(self, request, str(next(self._versions)))
            if request.action == kmock.action.UPDATE:
                async with self._writing:
                    self._check_update(request)
                    return await super()._handle(request)
            if request.action == kmock.action.CREATE:
                prepare_create(self, request, str(next(self._versions)))
            return await super()._handle(request)
        finally:
            del self._routing[task]
            self._forget(request)

    def _forget(self, request: rendering.Request) -> None:
        """Drop what kmock records of every request (the requests, and those of each reaction) and
        the superseded versions of the object this request wrote."""
        self._requests.clear()
        for reaction in self._payloads:
            reaction._requests.clear()
        if request.resource is not None and request.name is not None:
            key = (request.resource, request.namespace, request.name)
            if key in self.objects:
                del self.objects[key].history[:-VERSIONS_KEPT]

    def _check_update(self, request: rendering.Request) -> None:
        """A patch, as the API server takes it: 409 for a stale resourceVersion, a new one for every
        write, a new generation when the spec changes, and `status.conditions` merged by type on
        strategic-merge patches (kmock replaces lists whole, which would drop the kubelet's Ready
        condition). A missing object is left to kmock (404)."""
        if request.resource is None or request.name is None:
            return
        current = _stored(self, request)
        if current is None:
            return
        metadata = current.get("metadata") or {}
        version = str(next(self._versions))
        spec_changed = False
        if isinstance(request.data, dict):
            sent = (request.data.get("metadata") or {}).get("resourceVersion")
            if sent is not None and sent != metadata.get("resourceVersion"):
                raise _conflict(request.resource, request.name)
            request.data.setdefault("metadata", {})["resourceVersion"] = version
            spec_changed = "spec" in request.data
            status = request.data.get("status")
            strategic = "strategic-merge-patch" in request.headers.get("Content-Type", "")
            if strategic and isinstance(status, dict) and "conditions" in status:
                merged = {c.get("type"): c for c in (current.get("status") or {}).get("conditions") or []}
                for condition in status["conditions"] or []:
                    merged[condition.get("type")] = {**merged.get(condition.get("type"), {}), **condition}
                status["conditions"] = list(merged.values())
        elif isinstance(request.data, list):  # a JSON patch
            check_json_patch(current, request.data)
            for op in request.data:
                tests_version = op.get("op") == "test" and op.get("path") == "/metadata/resourceVersion"
                if tests_version and op.get("value") != metadata.get("resourceVersion"):
                    raise kmock.KubernetesError(422, "Invalid", "the test operation failed: resourceVersion")
            request.data.append({"op": "replace", "path": "/metadata/resourceVersion", "value": version})
            spec_changed = any(str(op.get("path", "")).startswith("/spec") for op in request.data)
        if spec_changed and not request.subresource:
            generation = int(metadata.get("generation") or 1) + 1
            if isinstance(request.data, dict):
                request.data["metadata"]["generation"] = generation
            else:
                request.data.append({"op": "replace", "path": "/metadata/generation", "value": generation})

    async def _serve_version(self, request: rendering.Request) -> rendering.Payload:
        payload: dict[str, Any] = await super()._serve_version(request)  # type: ignore[assignment]
        if payload.get("groupVersion", "").startswith("/"):
            payload["groupVersion"] = payload["groupVersion"][1:]
        for resource in payload.get("resources", []):
            if "/" in resource["name"]:  # subresources carry no short names or categories
                resource["shortNames"], resource["categories"] = [], []
            if resource["name"].endswith("/scale"):  # served as autoscaling/v1 Scale, as a CRD's is
                resource.update(kind="Scale", group="autoscaling", version="v1", verbs=["get", "patch", "update"])
        return payload

    async def _serve_list(self, request: rendering.Request) -> rendering.Payload:
        payload: dict[str, Any] = await super()._serve_list(request)  # type: ignore[assignment]
        resource = request.resource
        assert resource is not None
        info = self.resources.get(resource)
        kind = info.kind if isinstance(info, kmock.ResourceInfo) and info.kind else "Object"
        group_version = resource.version if not resource.group else f"{resource.group}/{resource.version}"
        payload = {"apiVersion": group_version, "kind": f"{kind}List", **payload}
        payload["metadata"] = {"resourceVersion": "1"}
        if resource.plural == api.PLURAL and "as=Table" in request.headers.get("Accept", ""):
            return self._pool_table(payload["items"])
        return payload

    async def _serve_fetch(self, request: rendering.Request) -> rendering.Payload:
        payload = await super()._serve_fetch(request)
        resource = request.resource
        if resource is not None and resource.plural == api.PLURAL and "as=Table" in request.headers.get("Accept", ""):
            assert isinstance(payload, dict)
            return self._pool_table([payload])
        return payload

    def _pool_table(self, items: list[dict[str, Any]]) -> dict[str, Any]:
        """Server-side printing, as the API server does from a CRD's additionalPrinterColumns."""
        columns = crd.PRINTER_COLUMNS
        definitions = [{"name": "Name", "type": "string", "format": "name", "description": "Name", "priority": 0}]
        definitions += [
            {"name": c["name"], "type": c["type"], "format": "", "description": c.get("description", ""), "priority": 0}
            for c in columns
        ]
        rows = []
        for item in items:
            cells: list[Any] = [item["metadata"]["name"]]
            for column in columns:
                value = _json_path(item, column["jsonPath"])
                cells.append(_age(value) if column["type"] == "date" else ("" if value is None else value))
            rows.append({"cells": cells, "object": {"kind": "PartialObjectMetadata", "metadata": item["metadata"]}})
        return {"apiVersion": "meta.k8s.io/v1", "kind": "Table", "columnDefinitions": definitions, "rows": rows}
