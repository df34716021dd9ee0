"""Lists and watches as the API server reads their options. Pure.

- `check_options`: k8s.io/apimachinery/pkg/apis/meta/internalversion/validation/validation.go
  `ValidateListOptions` (resourceVersionMatch needs a resourceVersion, no continue, Exact or NotOlderThan,
  not Exact at "0"; no sendInitialEvents on a list) and `validateWatchOptions` (sendInitialEvents needs
  resourceVersionMatch NotOlderThan; that match only with sendInitialEvents): a 422 on ListOptions;
- `page`: a page of `limit` items matching the selectors from the start key on, as the etcd3 store fills
  one (k8s.io/apiserver/pkg/storage/etcd3/store.go `GetList`: it reads on until the page is full), with a
  `continue` token when keys remain and, without selectors, how many (`remainingItemCount`);
- continue tokens as k8s.io/apiserver/pkg/storage/continue.go makes them (base64 of
  `{"v":"meta.k8s.io/v1","rv":N,"start":KEY}`), 400 for one that does not decode;
- `too_large`: the 504 for a resourceVersion the server has not reached (the watch cache's
  `waitUntilFreshAndBlock`: k8s.io/apiserver/pkg/storage/errors.go `NewTooLargeResourceVersionError`).
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable, Mapping
from typing import Any

import kmock

from accelpool_demo.apiserver import validation
from accelpool_demo.apiserver.resources import bad_request, error
from accelpool_demo.apiserver.writes import JsonObject, go_syntax_error

MATCHES = ("Exact", "NotOlderThan")
TOKEN_VERSION = "meta.k8s.io/v1"


def check_options(params: Mapping[str, str], *, watch: bool) -> None:
    """422 for list (or watch) options the API server refuses."""
    match = params.get("resourceVersionMatch", "")
    initial = params.get("sendInitialEvents")
    errors: list[validation.FieldError] = []

    def forbidden(field: str, why: str) -> None:
        errors.append(validation.FieldError("FieldValueForbidden", field, detail=why))

    def unsupported(supported: tuple[str, ...]) -> None:
        listed = ", ".join(json.dumps(s) for s in supported)
        errors.append(
            validation.FieldError(
                "FieldValueNotSupported", "resourceVersionMatch", match, f"supported values: {listed}"
            )
        )

    if watch:
        if initial is not None and match != "NotOlderThan":
            forbidden("resourceVersionMatch", "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")
        if match:
            if initial is None:
                forbidden(
                    "resourceVersionMatch",
                    "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                )
            if match != "NotOlderThan":
                unsupported(("NotOlderThan",))
            if params.get("continue"):
                forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
    else:
        if match:
            if not params.get("resourceVersion"):
                forbidden(
                    "resourceVersionMatch", "resourceVersionMatch is forbidden unless resourceVersion is provided"
                )
            if params.get("continue"):
                forbidden("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is provided")
            if match not in MATCHES:
                unsupported((*MATCHES, ""))
            if match == "Exact" and params.get("resourceVersion") == "0":
                forbidden("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for resourceVersion "0"')
        if initial is not None:
            forbidden("sendInitialEvents", "sendInitialEvents is forbidden for list")
    if errors:
        raise validation.refusal("ListOptions", "meta.k8s.io", "", errors)


def too_large(requested: int, current: int) -> kmock.KubernetesError:
    return error(
        504,
        "Timeout",
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {
            "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
            "retryAfterSeconds": 1,
        },
    )


def too_old() -> kmock.KubernetesError:
    return error(410, "Expired", "The resourceVersion for the provided list is too old.")


def encode_continue(version: int, start: str) -> str:
    token = {"v": TOKEN_VERSION, "rv": version, "start": start}
    return base64.urlsafe_b64encode(json.dumps(token, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, str]:
    """(resourceVersion, start key) of a continue token; 400 in the API server's words when it is not one."""

    def invalid(why: str) -> kmock.KubernetesError:
        return bad_request(f"invalid continue token: {why}")

    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
    except (binascii.Error, ValueError):
        raise invalid("continue key is not valid: illegal base64 data") from None
    text = raw.decode("latin-1")
    try:
        found = json.loads(text)
    except json.JSONDecodeError as failure:
        raise invalid(f"continue key is not valid: {go_syntax_error(text, failure)}") from None
    if not isinstance(found, dict) or found.get("v") != TOKEN_VERSION:
        raise invalid(
            f"continue key is not valid: incorrect encoded start resourceVersion (version {TOKEN_VERSION} required)"
        )
    version, start = found.get("rv"), found.get("start")
    if not isinstance(version, int) or version <= 0:
        raise invalid(
            "continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1 required)"
        )
    if not isinstance(start, str) or not start:
        raise invalid("continue key is not valid: encoded start key empty")
    return version, start


def key_of(obj: Mapping[str, Any]) -> str:
    """An object's key under its resource's prefix, as the storage orders them (`namespace/name`)."""
    metadata = obj.get("metadata") or {}
    namespace = metadata.get("namespace")
    return f"{namespace}/{metadata.get('name')}" if namespace else str(metadata.get("name"))


def page(
    objects: list[JsonObject],
    matches: Callable[[Mapping[str, Any]], bool],
    *,
    limit: int,
    start: str,
    selected: bool,
) -> tuple[list[JsonObject], str | None, int | None]:
    """The page of up to `limit` matching objects from the key `start` on (`objects` in key order), the
    key the next page starts from (None: the last page) and, without selectors (`selected` False), how
    many objects remain after it."""
    ordered = [o for o in objects if key_of(o) >= start]
    items: list[JsonObject] = []
    for index, obj in enumerate(ordered):
        if not matches(obj):
            continue
        items.append(obj)
        if len(items) == limit:
            rest = ordered[index + 1 :]
            if not rest:
                return items, None, None
            return items, key_of(obj) + "\x00", None if selected else len(rest)
    return items, None, None
