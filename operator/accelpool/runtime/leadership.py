"""Hot standby: the controller writes only while kopf runs this replica, for `accelpool run --peering`.

How it works and why: docs/design/leadership.md.
"""

from __future__ import annotations

import dataclasses
import logging
from importlib import metadata
from typing import Any, Protocol

import kopf

log = logging.getLogger("accelpool.runtime.leadership")

PEERING_GROUP, PEERING_VERSION, PEERING_PLURAL = "kopf.dev", "v1", "clusterkopfpeerings"
"""Where a cluster-wide kopf operator keeps its peers (kopf/_cogs/structs/references.py, CLUSTER_PEERINGS_K)."""
DAEMON_ID = "accelpool-leadership"
KOPF_VERIFIED = "1.45"
"""The kopf minor release whose private spawning registry `_register` uses (`kopf>=1.45,<1.46`)."""


class Pausable(Protocol):
    """The controller, as leadership sees it."""

    def pause(self) -> None: ...

    def resume(self) -> None: ...


def priority_by_age(started_ns: int) -> int:
    """The default priority of a replica started at `started_ns` (time.time_ns()): older ranks higher."""
    return -(started_ns // 1000)


class Leadership:
    """Whether this replica leads: while kopf runs the daemon on the peering object `peering`."""

    def __init__(self, controller: Pausable, peering: str) -> None:
        self.controller = controller
        self.peering = peering
        self._daemons = 0

    @property
    def leading(self) -> bool:
        return self._daemons > 0

    def gained(self) -> None:
        """kopf spawned the daemon: it runs this replica."""
        self._daemons += 1
        if self._daemons == 1:
            log.info("leading: kopf runs this replica (peering %s); the controller resumes", self.peering)
            self.controller.resume()

    def lost(self) -> None:
        """kopf stopped the daemon: paused in favour of another replica, exiting, or the peering object is gone."""
        self._daemons = max(0, self._daemons - 1)
        if self._daemons == 0:
            log.info("standing by: kopf paused or stops this replica (peering %s); the controller pauses", self.peering)
            self.controller.pause()


def follow_kopf(
    settings: kopf.OperatorSettings,
    memo: Any,
    controller: Pausable,
    *,
    lifetime: int,
    registry: kopf.OperatorRegistry | None = None,
) -> Leadership | None:
    """From the startup handler: with peering, pause `controller` until kopf runs this replica.

    None (the controller stays active) when kopf runs standalone, or in its auto-detection mode
    (`kopf run` with neither --standalone nor --peering), whose peering is decided later. The
    daemon goes into `registry` (kopf's default one, which `accelpool run` and `kopf run` use).
    """
    peering = settings.peering
    if peering.standalone or not peering.mandatory:
        if not peering.standalone:
            log.warning("kopf's peering auto-detection: the controller follows kopf only with --peering")
        return None
    peering.lifetime = lifetime
    leadership = Leadership(controller, peering.name)
    memo.leadership = leadership
    controller.pause()
    _register(registry or kopf.get_default_registry())
    return leadership


async def lead(stopped: kopf.DaemonStopped, memo: Any, **_: Any) -> None:
    """The daemon: this replica leads from its start until kopf stops it."""
    leadership: Leadership = memo.leadership
    leadership.gained()
    try:
        await stopped.wait()
    finally:
        leadership.lost()


def _ours(name: str, memo: Any, **_: Any) -> bool:
    leadership = getattr(memo, "leadership", None)
    return isinstance(leadership, Leadership) and name == leadership.peering


def _register(registry: kopf.OperatorRegistry) -> None:
    """Adds the daemon on the peering object to `registry` (once), without kopf's finalizer."""
    spawning = _spawning(registry)
    if any(h.id == DAEMON_ID for h in spawning.get_all_handlers()):
        return
    scratch = kopf.OperatorRegistry()
    kopf.daemon(
        group=PEERING_GROUP, version=PEERING_VERSION, plural=PEERING_PLURAL, id=DAEMON_ID, when=_ours, registry=scratch
    )(lead)
    (daemon,) = _spawning(scratch).get_all_handlers()
    spawning.append(dataclasses.replace(daemon, requires_finalizer=False))


def _spawning(registry: kopf.OperatorRegistry) -> Any:
    """kopf's private registry of daemons and timers, or an error naming the kopf release it was verified with."""
    spawning = getattr(registry, "_spawning", None)
    if not (hasattr(spawning, "get_all_handlers") and hasattr(spawning, "append")):
        raise RuntimeError(
            f"kopf {metadata.version('kopf')} has no OperatorRegistry._spawning with get_all_handlers() and append():"
            f" accelpool's leadership registers its peering daemon there and was verified with kopf {KOPF_VERIFIED}.x;"
            f" install kopf {KOPF_VERIFIED}.x (operator/pyproject.toml pins it)"
        )
    return spawning
