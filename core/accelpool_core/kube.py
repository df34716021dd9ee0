"""A small asynchronous Kubernetes API client: the only place accelpool speaks HTTP to the API server.

Used by the operator's handlers (nodes, ConfigMaps, DaemonSets, Events, Karpenter NodePools)
and by the device agent's reporter (its node's status and annotations) and node watch. It knows
just enough of the API: JSON requests, merge/strategic/JSON patches, server-side apply (`apply`),
label and field selectors on lists, watch streams (`watch`), conflicts as `ConflictError`, an
expired resourceVersion as `GoneError`, with the `Credentials` of `accelpool_core.credentials`
(a kubeconfig, the in-cluster service account, or a plain server URL).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Literal

import aiohttp

from accelpool_core.credentials import Credentials, FileToken

PatchType = Literal["merge", "strategic", "json"]
_PATCH_CONTENT_TYPES: dict[str, str] = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
APPLY_CONTENT_TYPE = "application/apply-patch+yaml"
"""Server-side apply. JSON is YAML, so the body is sent as JSON (as client-go's Apply does)."""
USER_AGENT = "accelpool"
METADATA_LIST_ACCEPT = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
"""The Accept header of a metadata-only list (client-go's `metadata.PartialObjectMetadataListMimeTypes`, JSON
first); a server that cannot convert answers with the full list (the fallback after the comma)."""
JsonObject = dict[str, Any]


class ApiError(Exception):
    """The API server answered with an error status."""

    def __init__(
        self,
        status: int,
        reason: str,
        message: str,
        *,
        method: str = "",
        path: str = "",
        causes: tuple[tuple[str, str], ...] = (),
    ) -> None:
        self.status = status
        self.reason = reason
        self.message = message
        self.causes = causes
        """The Status's `details.causes` as (type, message): an eviction's `DisruptionBudget` cause names its budget."""
        super().__init__(f"{method} {path}: {status} {reason}: {message}".strip())


class NotFoundError(ApiError):
    """404: the object (or its resource) does not exist."""


class ConflictError(ApiError):
    """409: a stale resourceVersion, or the object already exists."""


class GoneError(ApiError):
    """410: the resourceVersion a watch asked for is older than the server keeps: list again."""


WATCH_READ_MARGIN_SECONDS = 30.0
"""How long past its `timeoutSeconds` a watch may stay silent before the client gives up on it."""


class KubeClient:
    """JSON over HTTP to one API server; one aiohttp session, reused."""

    def __init__(self, credentials: Credentials, *, timeout: float = 30.0, user_agent: str = USER_AGENT) -> None:
        self.credentials = credentials
        self.user_agent = user_agent
        self._token_file = FileToken(credentials.token_file) if credentials.token_file else None
        self._timeout = aiohttp.ClientTimeout(total=timeout)
        self._session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> KubeClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            headers = {"Accept": "application/json", "User-Agent": self.user_agent}
            connector = aiohttp.TCPConnector(ssl=self.credentials.ssl_context(), limit=64)
            self._session = aiohttp.ClientSession(headers=headers, timeout=self._timeout, connector=connector)
        return self._session

    async def request(
        self,
        method: str,
        path: str,
        *,
        body: Any = None,
        params: Mapping[str, str] | None = None,
        content_type: str = "application/json",
        accept: str | None = None,
    ) -> JsonObject:
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        if accept is not None:
            headers["Accept"] = accept
        sent_at = self._token_file.now() if self._token_file else 0.0
        if token := self._token():
            headers["Authorization"] = f"Bearer {token}"
        url = f"{self.credentials.server}{path}"
        async with self._http().request(method, url, data=data, params=params, headers=headers) as response:
            text = await response.text()
            if response.status == 401 and self._token_file is not None:
                self._token_file.reset_older_than(sent_at)  # the file may hold a rotated token: read it next time
            if response.status >= 400:
                raise _error(response.status, text, method=method, path=path)
            if not text:
                return {}
            result: JsonObject = json.loads(text)
            return result

    def _token(self) -> str | None:
        return self._token_file.value() if self._token_file else self.credentials.token

    async def get(self, path: str) -> JsonObject:
        return await self.request("GET", path)

    async def get_or_none(self, path: str) -> JsonObject | None:
        try:
            return await self.get(path)
        except NotFoundError:
            return None

    async def list(
        self,
        path: str,
        *,
        label_selector: str | None = None,
        field_selector: str | None = None,
        metadata_only: bool = False,
    ) -> list[JsonObject]:
        """The objects at `path`; `metadata_only`: each as a `PartialObjectMetadata` (its `metadata` alone, as
        client-go's metadata client asks for it: the API server leaves the rest out)."""
        params = {
            key: value for key, value in (("labelSelector", label_selector), ("fieldSelector", field_selector)) if value
        }
        accept = METADATA_LIST_ACCEPT if metadata_only else None
        listed = await self.request("GET", path, params=params or None, accept=accept)
        items: list[JsonObject] = listed.get("items") or []
        return items

    async def create(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request("POST", path, body=body)

    async def replace(self, path: str, body: JsonObject) -> JsonObject:
        return await self.request("PUT", path, body=body)

    async def patch(self, path: str, body: Any, *, patch_type: PatchType = "merge") -> JsonObject:
        return await self.request("PATCH", path, body=body, content_type=_PATCH_CONTENT_TYPES[patch_type])

    async def apply(self, path: str, body: JsonObject, *, field_manager: str, force: bool = True) -> JsonObject:
        """Server-side apply of `body` (the whole intent, without resourceVersion) at `path`, creating the
        object if it does not exist. Fields `field_manager` applied before and left out now are removed;
        fields other managers own (a controller's status) are left alone, so no concurrent write conflicts."""
        params = {"fieldManager": field_manager, "force": "true" if force else "false"}
        return await self.request("PATCH", path, body=body, params=params, content_type=APPLY_CONTENT_TYPE)

    async def delete(self, path: str) -> None:
        with contextlib.suppress(NotFoundError):
            await self.request("DELETE", path)

    async def watch(
        self,
        path: str,
        *,
        resource_version: str,
        timeout_seconds: int,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> AsyncGenerator[JsonObject, None]:
        """The watch events (`{"type", "object"}`) of a collection after `resource_version`, until the server
        ends the stream (after `timeout_seconds`, or going down). Bookmarks are asked for (`BOOKMARK`
        events carry only a newer resourceVersion). An `ERROR` event raises: `GoneError` for 410
        Expired (list again), else `ApiError`. Events are read as whole lines of any length (a Node
        with its image list is easily over aiohttp's 128 KiB line limit)."""
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        params.update(
            {
                key: value
                for key, value in (("fieldSelector", field_selector), ("labelSelector", label_selector))
                if value
            }
        )
        sent_at = self._token_file.now() if self._token_file else 0.0
        headers = {"Authorization": f"Bearer {token}"} if (token := self._token()) else {}
        read_limit = timeout_seconds + WATCH_READ_MARGIN_SECONDS
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=30, sock_read=read_limit)
        url = f"{self.credentials.server}{path}"
        async with self._http().get(url, params=params, headers=headers, timeout=timeout) as response:
            if response.status == 401 and self._token_file is not None:
                self._token_file.reset_older_than(sent_at)
            if response.status >= 400:
                raise _error(response.status, await response.text(), method="WATCH", path=path)
            pending = b""
            async for chunk in response.content.iter_any():
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield _watch_event(json.loads(line), path)


def _error(status: int, text: str, *, method: str, path: str) -> ApiError:
    reason, message = "", text[:500]
    causes: tuple[tuple[str, str], ...] = ()
    try:
        payload = json.loads(text)
        reason = str(payload.get("reason", ""))
        message = str(payload.get("message", message))
        listed = (payload.get("details") or {}).get("causes") or []
        # metav1.StatusCause's type is encoded as "reason" (`Type CauseType json:"reason"`)
        causes = tuple(
            (str(c.get("reason", c.get("type", ""))), str(c.get("message", ""))) for c in listed if isinstance(c, dict)
        )
    except (ValueError, AttributeError):
        pass
    kind = {404: NotFoundError, 409: ConflictError, 410: GoneError}.get(status, ApiError)
    return kind(status, reason, message, method=method, path=path, causes=causes)


def _watch_event(event: JsonObject, path: str) -> JsonObject:
    """A watch event as it came, or the error an `ERROR` event stands for (its object is a Status)."""
    if event.get("type") != "ERROR":
        return event
    status = event.get("object") or {}
    code = int(status.get("code") or 500)
    raise _error(code, json.dumps(status), method="WATCH", path=path)
