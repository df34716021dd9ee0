"""The emulated API server (`accelpool_demo.apiserver`) with one GPU node, for the agent's reporter.

The reporter relies on two of its API-server behaviours: a strategic-merge patch of
`status.conditions` merges by condition `type` (so the agent sends only its own condition without
erasing the kubelet's `Ready`), and a JSON patch whose `test` fails is refused with 422. `cluster`
is the server (its stored objects, the requests it served, kmock's reactions to make one fail);
`client` a client of it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from accelpool_core.credentials import Credentials
from accelpool_core.kube import KubeClient
from accelpool_demo.apiserver import ApiServer, serving
from tests.support.builders import node_body

NODE = "gpu-a1"


def node_object(name: str = NODE) -> dict[str, Any]:
    """A node of pool llm-training, with the kubelet's Ready condition (which the agent's must not erase)."""
    return node_body(
        name,
        None,
        labels={"accelpool.io/pool": "llm-training"},
        annotations={"node.alpha.kubernetes.io/ttl": "0"},
        ready_since="2025-12-01T00:00:00Z",
        heartbeat="2025-12-31T23:59:00Z",
    )


@pytest.fixture
async def cluster() -> AsyncIterator[ApiServer]:
    async with serving() as api:
        api.put("/api/v1/nodes", node_object())
        yield api.server


@pytest.fixture
async def client(cluster: ApiServer) -> AsyncIterator[KubeClient]:
    async with KubeClient(Credentials(server=str(cluster.url).rstrip("/"))) as api:
        yield api
