"""The emulated API server (`accelpool_demo.apiserver`) on a free port, on a clock the test moves, a client of it,
and a watch reader."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import RunningApiServer, serving

NAMESPACE = "accelpool-system"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integration/emulator" in str(item.fspath):
            item.add_marker(pytest.mark.integration)


class Clock:
    """Seconds since the epoch, standing still until the test moves them on (the emulator's clock)."""

    def __init__(self) -> None:
        self.now = float(int(time.time()))

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
async def api(clock: Clock) -> AsyncIterator[RunningApiServer]:
    async with serving(clock=clock) as running:
        running.put("/api/v1/namespaces", {"metadata": {"name": NAMESPACE}})
        yield running


@pytest.fixture
async def client(api: RunningApiServer) -> AsyncIterator[KubeClient]:
    async with api.client() as kube:
        yield kube


WATCH_GUARD_SECONDS = 60.0
"""How long `Watch` waits for the next line: a guard against waiting forever, not a timing."""


class Watch:
    """One watch stream, read event by event."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response

    async def next(self, within: float = WATCH_GUARD_SECONDS) -> dict[str, Any]:
        line = await asyncio.wait_for(self.response.content.readline(), within)
        assert line, "the watch stream ended"
        event: dict[str, Any] = json.loads(line)
        return event

    async def ended(self, within: float = WATCH_GUARD_SECONDS) -> bool:
        return await asyncio.wait_for(self.response.content.readline(), within) == b""


@pytest.fixture
async def watch(api: RunningApiServer) -> AsyncIterator[Any]:
    """`await watch(path, **params)`: a watch stream of a collection path."""
    async with aiohttp.ClientSession() as session:
        responses: list[aiohttp.ClientResponse] = []

        async def start(path: str, **params: str) -> Watch:
            response = await session.get(f"{api.url}{path}", params={"watch": "true", **params})
            responses.append(response)
            return Watch(response)

        yield start
        for response in responses:
            response.close()
