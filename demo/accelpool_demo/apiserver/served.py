"""What the emulated API server was asked and answered, and the refusals a test tells it to make.

`Served` is one request as a test or benchmark asks about it (verb, url, resource, who sent it,
the status answered); `RequestLog` keeps the most recent ones; `Fault` refuses matching requests
with a status before anything is written (an API server that is down, a webhook that says no).
"""

from __future__ import annotations

import collections
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import kmock
import yarl

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


@dataclass(frozen=True)
class Served:
    """One request (kmock's record of it: method, url, headers, resource, body) and the status answered."""

    request: kmock.Request
    status: int

    @property
    def method(self) -> kmock.method:
        return self.request.method

    @property
    def url(self) -> yarl.URL:
        """Where it was sent (`url.port`: which of the server's listeners took it)."""
        return self.request.url

    @property
    def path(self) -> str:
        return self.request.url.path

    @property
    def headers(self) -> Mapping[str, str]:
        return self.request.headers

    @property
    def user_agent(self) -> str:
        return self.request.headers.get("User-Agent", "")

    @property
    def resource(self) -> kmock.resource | None:
        return self.request.resource

    @property
    def name(self) -> str | None:
        return self.request.name

    @property
    def subresource(self) -> str | None:
        return self.request.subresource

    @property
    def is_write(self) -> bool:
        return self.method.value in WRITE_METHODS

    @property
    def plural(self) -> str:
        """`nodes`, `daemonsets`, `nodes/status`: the resource and subresource written or read."""
        plural = str(self.resource.plural) if self.resource is not None else "?"
        return f"{plural}/{self.subresource}" if self.subresource else plural

    @property
    def refused(self) -> bool:
        return self.status >= 400

    def by(self, agent: str | None) -> bool:
        """Whether its User-Agent starts with `agent` (any request when None)."""
        return agent is None or self.user_agent.startswith(agent)


class RequestLog:
    """The most recent requests served (`capacity` of them; all when None), numbered from the first."""

    def __init__(self, capacity: int | None = None) -> None:
        self._entries: collections.deque[Served] = collections.deque(maxlen=capacity)
        self.total = 0
        """How many requests were served since the start (the number of the next one)."""

    def append(self, served: Served) -> None:
        self._entries.append(served)
        self.total += 1

    def __iter__(self) -> Iterator[Served]:
        return iter(list(self._entries))

    def __len__(self) -> int:
        return len(self._entries)

    def since(self, number: int) -> list[Served]:
        """The requests served since the `number`th (a `total` read earlier), as far as they are kept."""
        skip = max(0, number - (self.total - len(self._entries)))
        return list(self._entries)[skip:]

    def writes(self, *, agent: str | None = None, since: int = 0) -> list[Served]:
        return [s for s in self.since(since) if s.is_write and s.by(agent)]


@dataclass
class Fault:
    """Refuse the next `times` requests whose `METHOD /path?query` starts with `prefix` with `status`."""

    prefix: str
    status: int
    times: int | None = 1
    """None: every such request, until removed."""
    reason: str = "InternalError"
    message: str = "injected by the test"

    def matches(self, method: str, path: str) -> bool:
        return (self.times is None or self.times > 0) and f"{method} {path}".startswith(self.prefix)

    def spend(self) -> kmock.KubernetesError:
        if self.times is not None:
            self.times -= 1
        return kmock.KubernetesError(self.status, self.reason, self.message)
