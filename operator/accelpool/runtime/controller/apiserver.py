"""Where the controller's objects live on the API server, how its requests fail, and when it may write.

Paths of every collection a pass reads or writes, the field manager of its server-side applies,
the errors a later pass may not meet again (`TRANSIENT`), and the write gate: the controller's
`Gate` is open while it is active; each pass takes a `Permit` and checks it before every write,
so a pass in flight when the controller is paused (a hot standby that lost its leadership)
stops with `Paused` before its next write, even if the controller is resumed meanwhile.
"""

from __future__ import annotations

import asyncio

import aiohttp

import accelpool_api as api
from accelpool.decide import kueue
from accelpool_core.kube import ApiError

POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
NODES = "/api/v1/nodes"
NODEPOOLS = "/apis/karpenter.sh/v1/nodepools"
RESOURCE_FLAVORS = f"/apis/{kueue.API_VERSION}/resourceflavors"
CLUSTER_QUEUES = f"/apis/{kueue.API_VERSION}/clusterqueues"
FIELD_MANAGER = "accelpool"
"""The operator's field manager in server-side apply (agent DaemonSets, Karpenter NodePools, ResourceFlavors)."""
TRANSIENT = (ApiError, OSError, asyncio.TimeoutError, aiohttp.ClientError)
"""Errors a later pass may not see again: API errors, connection trouble, timeouts."""


class Paused(Exception):
    """The controller was paused: the write was not sent, and the pass ends here."""


def daemonsets(namespace: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/daemonsets"


def configmaps(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/configmaps"


def pool_status(name: str) -> str:
    return f"{POOLS}/{name}/status"


class Gate:
    """Open while the controller is active. Each pass takes a `Permit`; closing the gate revokes it for good."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self._epoch = 0

    @property
    def open(self) -> bool:
        return self._open.is_set()

    @property
    def epoch(self) -> int:
        """How many times the gate has closed."""
        return self._epoch

    def close(self) -> None:
        self._open.clear()
        self._epoch += 1

    def reopen(self) -> None:
        self._open.set()

    async def wait_open(self) -> None:
        await self._open.wait()

    def permit(self) -> Permit:
        """Permission for one pass to write, until the gate is next closed (a reopened gate does not renew it)."""
        return Permit(self, self._epoch)


class Permit:
    """Checked before every write of a pass: `Paused` once the gate has closed since the pass began."""

    def __init__(self, gate: Gate, epoch: int) -> None:
        self._gate = gate
        self._epoch = epoch

    def check(self) -> None:
        if not self._gate.open or self._gate.epoch != self._epoch:
            raise Paused("the controller is paused")
