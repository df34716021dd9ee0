"""What the API server does to an object on create, replace and patch, before it stores it.

Pure functions on JSON objects (apart from the clock and generated names), used by `server`:

- `created`: a name from `generateName`, the URL's namespace, uid, creationTimestamp, generation 1 and
  the new resourceVersion; the status dropped where the create strategy drops it, a pod `Pending`, a
  PodDisruptionBudget's counts zero;
- `merge_patch` (RFC 7386; JSON and strategic merge patches: `patches`), and `decoded_patch`, a patch's
  body decoded as the patch handler decodes it (400 in encoding/json's words);
- `updated`: a candidate written through the resource or its `status` subresource — the other part
  kept (status writes change only the status, others never the status of a resource with a status
  subresource), the identity fields kept, 409 for a stale `metadata.resourceVersion`, no new finalizer
  on an object being deleted, the generation bumped when the spec changes; None when nothing changed
  (the API server then writes nothing and keeps the resourceVersion).
"""

from __future__ import annotations

import copy
import datetime
import json
import random
import uuid
from collections.abc import Mapping
from typing import Any

import kmock

from accelpool_demo.apiserver import resources
from accelpool_demo.apiserver.resources import bad_request, conflict, internal, invalid

JsonObject = dict[str, Any]
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"
"""The characters of generated names (k8s.io/apimachinery/pkg/util/rand: no vowels, no look-alike digits)."""
NAME_SUFFIX_LENGTH = 5
"""k8s.io/apiserver/pkg/storage/names/generate.go: `randomLength`, the suffix added to `generateName`."""
MAX_GENERATED_NAME_BASE = 63 - NAME_SUFFIX_LENGTH
IDENTITY = ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds")
"""Metadata no write can change (`rest.BeforeUpdate` keeps them from the stored object)."""


STATUS_KEEPS_METADATA = {resources.NODES: (), resources.PODS: ("ownerReferences",), resources.BUDGETS: ()}
"""Kinds whose status strategy keeps the request's metadata (less these fields), resetting only the spec
(pkg/registry/core/node/strategy.go `nodeStatusStrategy.PrepareForUpdate`, the pod and disruption budget
ones alike); the others' keep only the status (a custom resource's: apiextensions-apiserver
pkg/registry/customresource/status_strategy.go)."""
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"
ZERO_BUDGET_STATUS = {"disruptionsAllowed": 0, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}
"""A PodDisruptionBudget's status on creation (pkg/registry/policy/poddisruptionbudget/strategy.go
`PrepareForCreate` empties it; policy/v1's four counts are not omitempty)."""


def now() -> str:
    return datetime.datetime.now(datetime.UTC).strftime(TIME_FORMAT)


def timestamp(seconds: float) -> str:
    """An RFC 3339 time (metav1.Time: whole seconds) of seconds since the epoch."""
    return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(TIME_FORMAT)


def seconds_of(time: str) -> float:
    """Seconds since the epoch of an RFC 3339 time."""
    return datetime.datetime.strptime(time, TIME_FORMAT).replace(tzinfo=datetime.UTC).timestamp()


def generate_name(metadata: JsonObject) -> None:
    """A name from `generateName` (`accelpool-agent-h100-` → `accelpool-agent-h100-x7k2p`), as the API server
    makes it (k8s.io/apiserver/pkg/storage/names/generate.go) before admission, so refusals name the object."""
    if not metadata.get("name") and metadata.get("generateName"):
        base = str(metadata["generateName"])[:MAX_GENERATED_NAME_BASE]
        metadata["name"] = base + "".join(random.choices(NAME_ALPHABET, k=NAME_SUFFIX_LENGTH))


def named(resource: kmock.resource, body: Any, namespace: str | None, *, required: bool = True) -> JsonObject:
    """A create's body with its name (generated if asked) and the URL's namespace; 400/422 when unusable
    (a missing name too, unless not `required` here: a custom object's is refused with its other errors)."""
    if not isinstance(body, dict):
        raise bad_request("the body of a create must be a JSON object")
    obj = copy.deepcopy(body)
    metadata = obj.setdefault("metadata", {})
    generate_name(metadata)
    if required and not metadata.get("name"):
        raise invalid(
            f"{resources.kind_of(resource)} is invalid: metadata.name: Required value: name or generateName is required"
        )
    if namespace is not None:
        if metadata.get("namespace") not in (None, namespace):
            raise bad_request("the namespace of the provided object does not match the namespace sent on the request")
        metadata["namespace"] = namespace
    return obj


def created(resource: kmock.resource, obj: JsonObject, version: str) -> JsonObject:
    """A named object as stored on creation: status as the create strategy leaves it, and the server's metadata."""
    result = copy.deepcopy(obj)
    key = resources.key_of(resource)
    result.setdefault("apiVersion", resources.api_version_of(resource))
    result.setdefault("kind", resources.kind_of(resource))
    if key in resources.STATUS_RESET_ON_CREATE:
        result.pop("status", None)
    if key == resources.PODS:
        result["status"] = {"phase": "Pending"}
    if key == resources.BUDGETS:
        result["status"] = dict(ZERO_BUDGET_STATUS)
    metadata = result["metadata"]
    for transient in ("deletionTimestamp", "deletionGracePeriodSeconds"):
        metadata.pop(transient, None)
    metadata.update(uid=str(uuid.uuid4()), creationTimestamp=now(), generation=1, resourceVersion=version)
    return result


def merge_patch(current: Mapping[str, Any], patch: Mapping[str, Any]) -> JsonObject:
    """A JSON merge patch (RFC 7386) applied to a copy of `current`: maps merge, null removes, the rest replaces.
    The copy is made once (copying again at every level of the patch made a write's cost grow with its depth)."""
    result = copy.deepcopy(dict(current))
    _merge_into(result, patch)
    return result


def _merge_into(target: dict[str, Any], patch: Mapping[str, Any]) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(target.get(key), Mapping):
            target[key] = dict(target[key])
            _merge_into(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


_GO_TYPES = {dict: "object", list: "array", str: "string", bool: "bool", int: "number", float: "number"}


def decoded_patch(text: str, patch: str) -> Any:
    """A patch's body as the patch handler decodes it (k8s.io/apiserver/pkg/endpoints/handlers/patch.go),
    400 `error decoding patch: ...` in encoding/json's words when it is no JSON of the patch's shape."""
    try:
        body = json.loads(text)
    except json.JSONDecodeError as failure:
        raise bad_request(f"error decoding patch: {go_syntax_error(text, failure)}") from None
    want, go_type = (list, "[]handlers.jsonPatchOp") if patch == "json" else (dict, "map[string]interface {}")
    if body is not None and not isinstance(body, want):
        found = _GO_TYPES.get(type(body), "value")
        raise bad_request(f"error decoding patch: json: cannot unmarshal {found} into Go value of type {go_type}")
    return body if body is not None else want()


def go_syntax_error(text: str, failure: json.JSONDecodeError) -> str:
    """encoding/json's SyntaxError for what Python's decoder found wrong (scanner.go's wording)."""
    position = failure.pos
    if position >= len(text) or failure.msg.startswith("Unterminated"):
        return "unexpected end of JSON input"
    quoted = _go_char(text[position])
    if failure.msg.startswith("Expecting property name"):
        context = "looking for beginning of object key string"
    elif failure.msg.startswith("Expecting ':'"):
        context = "after object key"
    elif failure.msg.startswith("Expecting ','"):
        context = "after object key:value pair" if _innermost(text[:position]) == "{" else "after array element"
    elif failure.msg == "Extra data":
        context = "after top-level value"
    else:
        context = "looking for beginning of value"
    return f"invalid character {quoted} {context}"


def _go_char(char: str) -> str:
    """A character as encoding/json's `quoteChar` shows it: `'x'`, `'\\''`, `'\\u0081'`."""
    if char == "'":
        return "'\\''"
    if char == '"':
        return "'\"'"
    if " " <= char <= "~":
        return f"'{char}'"
    escapes = {"\n": "\\n", "\t": "\\t", "\r": "\\r"}
    if char in escapes:
        return f"'{escapes[char]}'"
    return f"'\\x{ord(char):02x}'" if ord(char) < 0x80 else f"'\\u{ord(char):04x}'"


def _innermost(text: str) -> str:
    """The innermost bracket still open at the end of `text` (outside strings)."""
    stack: list[str] = []
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            continue
        if char == '"':
            in_string = True
        elif char in "{[":
            stack.append(char)
        elif char in "}]" and stack:
            stack.pop()
    return stack[-1] if stack else ""


def check_precondition(resource: kmock.resource, current: Mapping[str, Any], candidate: Mapping[str, Any]) -> None:
    """409 when the candidate names a resourceVersion that is not the stored one; 500 when it is no number
    (the storage's versioner parses it: k8s.io/apiserver/pkg/storage/api_object_versioner.go)."""
    sent = (candidate.get("metadata") or {}).get("resourceVersion")
    name = str((current.get("metadata") or {}).get("name"))
    if sent and not str(sent).isdigit():
        raise internal(f"strconv.ParseUint: parsing {json.dumps(str(sent))}: invalid syntax")
    if sent and sent != (current.get("metadata") or {}).get("resourceVersion"):
        raise conflict(resource, name)


def updated(
    resource: kmock.resource,
    current: Mapping[str, Any],
    candidate: Mapping[str, Any],
    *,
    subresource: str | None,
    version: str,
    has_status: bool,
) -> JsonObject | None:
    """The object to store for a write whose result is `candidate` (a PUT's body, a patched copy), or
    None when it changes nothing. `candidate` is the caller's own copy, given away: the result is made of
    it and of `current`'s parts that the write keeps, neither copied again (stored objects are never
    changed in place: every write copies what it changes; a second copy was a third of a write's cost)."""
    check_precondition(resource, current, candidate)
    key = resources.key_of(resource)
    if subresource == "status" and key in STATUS_KEEPS_METADATA:
        result = {**candidate, "spec": current.get("spec")}
        metadata = dict(candidate.get("metadata") or {})
        for field in (*IDENTITY, "generation", "managedFields", *STATUS_KEEPS_METADATA[key]):
            metadata.pop(field, None)
            if field in (current.get("metadata") or {}):
                metadata[field] = copy.deepcopy(current["metadata"][field])
        result["metadata"] = metadata
    elif subresource == "status":
        result = {**current, "metadata": dict(current.get("metadata") or {}), "status": candidate.get("status")}
    else:
        result = dict(candidate)
        if has_status:
            result["status"] = current.get("status")
        old_metadata = current.get("metadata") or {}
        metadata = dict(result.get("metadata") or {})
        for field in (*IDENTITY, "generation", "managedFields"):
            metadata.pop(field, None)
            if field in old_metadata:
                metadata[field] = copy.deepcopy(old_metadata[field])
        if "managedFields" in (candidate.get("metadata") or {}):
            metadata["managedFields"] = copy.deepcopy(candidate["metadata"]["managedFields"])
        result["metadata"] = metadata
        if old_metadata.get("deletionTimestamp"):
            added = set(metadata.get("finalizers") or []) - set(old_metadata.get("finalizers") or [])
            if added:
                raise invalid(
                    f'{resources.kind_of(resource)} "{old_metadata.get("name")}" is invalid: metadata.finalizers: '
                    "Forbidden: no new finalizers can be added if the object is being deleted"
                )
    result = {k: v for k, v in result.items() if v is not None}
    result["metadata"].pop("resourceVersion", None)
    if "resourceVersion" in (current.get("metadata") or {}):
        result["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
    if result == current:
        return None
    if result.get("spec") != current.get("spec"):
        result["metadata"]["generation"] = int((current.get("metadata") or {}).get("generation") or 1) + 1
    result["metadata"]["resourceVersion"] = version
    return result
