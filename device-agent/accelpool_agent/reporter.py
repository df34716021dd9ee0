"""Writes the node's verdict to the Kubernetes API with as few requests as possible.

Two objects are written on the agent's own Node:

- the condition `AcceleratorHealthy` in `status.conditions` (PATCH `/api/v1/nodes/<node>/status`,
  touching only this condition: the kubelet's stay as they are; see the guarded writes below).
  `lastTransitionTime` changes only when the status does; `lastHeartbeatTime` is refreshed by a
  rewrite every `heartbeat_seconds` even when nothing changed, so a stale condition means a dead agent.
- the annotation `accelpool.io/health` (PATCH `/api/v1/nodes/<node>`), the compact
  `HealthReport` the operator reads. It names its writer (`pool`, `agent`) and carries the last
  compute verdict per GPU and check kind (`verdicts`, stamped with when it was first reached, so
  a repeating verdict causes no write). Its TFLOPS are rounded to three significant figures and
  rewritten only when they move by more than `tflops_tolerance`, so noise causes no writes.

The annotation also names the last check request the agent answered (`checkRequest`, the node's
`accelpool.io/check-requested` token): `report(..., answers=TOKEN)` hands over the report of the
full cycle that the request started; from then on every annotation carries the token, and a
new one is written at once, even when nothing else changed.

A change of status (True/False/Unknown) is written at once. A change of reason or message that
keeps the status (a GPU that throttles on and off, a second failing GPU) is written at most once
per `min_detail_seconds`, so a flapping warning cannot turn into a stream of API writes.

Nothing is written when nothing changed. The node is read once (`load`, at daemon start or the
first report), so an agent restart keeps the transition time, does not rewrite an identical
condition, and hands the previous annotation (`previous`) to the agent to restore its verdicts
and the node's check request (`requested`) to the daemon. API errors are logged and counted, the
node is read again, and the next report retries.

An agent reports only on a node of its pool. Its pod outlives the operator's release of the node
(it is terminating, or the node is slow to hear of it), and a report written then would stay behind
on a node that belongs to no pool. So when the report names its pool, both writes are JSON patches
whose first operation tests the node's `accelpool.io/pool` label (the condition replaced at the
index the last read found it, guarded by a test of its type): the API server refuses them once the
node has left the pool, in the same request, without a read. After a refusal the node is read; if
it left the pool, the reporter writes nothing more until a read (at most one per
`min_detail_seconds`) finds the node back in its pool. Without a pool (`accelpool-agent run` on
its own), the condition is a strategic-merge patch and the annotation a merge patch, unguarded.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp

from accelpool_agent.clock import Clock, SystemClock
from accelpool_agent.model import NodeReport
from accelpool_agent.snapshot import ReportStats
from accelpool_core.kube import ApiError, KubeClient, NotFoundError
from accelpool_core.protocol import (
    CHECK_REQUEST_ANNOTATION,
    CONDITION_TYPE,
    HEALTH_ANNOTATION,
    POOL_LABEL,
    HealthReport,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class _Condition:
    status: str
    reason: str
    message: str
    heartbeat: datetime
    transition: datetime


def rfc3339(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _pointer(key: str) -> str:
    """A map key as a JSON-pointer segment (RFC 6901): `accelpool.io/pool` → `accelpool.io~1pool`."""
    return key.replace("~", "~0").replace("/", "~1")


POOL_LABEL_PATH = f"/metadata/labels/{_pointer(POOL_LABEL)}"
ANNOTATION_PATH = f"/metadata/annotations/{_pointer(HEALTH_ANNOTATION)}"


def round_significant(value: float, digits: int = 3) -> float:
    if value == 0 or not math.isfinite(value):
        return value
    return round(value, digits - 1 - math.floor(math.log10(abs(value))))


class NodeReporter:
    def __init__(
        self,
        client: KubeClient,
        node_name: str,
        *,
        heartbeat_seconds: float,
        clock: Clock | None = None,
        tflops_tolerance: float = 0.02,
        min_detail_seconds: float = 60.0,
        agent_name: str | None = None,
    ) -> None:
        self.client = client
        self.node_name = node_name
        self.agent_name = agent_name or node_name
        """Who writes: the `agent` field of the annotation (the pod name, else the node name)."""
        self.heartbeat_seconds = heartbeat_seconds
        self.clock: Clock = clock or SystemClock()
        self.tflops_tolerance = tflops_tolerance
        self.min_detail_seconds = min_detail_seconds
        self._annotation_written_at: datetime | None = None
        self._loaded = False
        self._condition: _Condition | None = None
        self._annotation: HealthReport | None = None
        self.previous: HealthReport | None = None
        """The annotation found on the node at load (what the agent before this one wrote)."""
        self.requested: str | None = None
        """The node's `accelpool.io/check-requested` token at the last read."""
        self._answers: str | None = None
        """The check request the annotation answers (the previous agent's, until this one answers one)."""
        self._writes: dict[str, int] = {"condition": 0, "annotation": 0}
        self._errors = 0
        self._node_pool: str | None = None
        """The node's `accelpool.io/pool` label at the last read or write."""
        self._condition_index: int | None = None
        self._has_conditions = False
        self._has_annotations = False
        self._left_checked_at: datetime | None = None
        """When a read last found the node out of the report's pool (None: it was in it)."""

    @property
    def stats(self) -> ReportStats:
        return ReportStats(writes=dict(self._writes), errors=self._errors)

    @property
    def _path(self) -> str:
        return f"/api/v1/nodes/{self.node_name}"

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock.time(), UTC)

    @property
    def loaded(self) -> bool:
        return self._loaded

    async def report(self, report: NodeReport, *, answers: str | None = None) -> list[str]:
        """Bring the node in line with `report`; returns what was written ("condition", "annotation").
        `answers`: the check request whose full cycle produced `report` (kept for every later report)."""
        if not self._loaded and not await self.load():
            return []
        if answers is not None:
            self._answers = answers
        if report.pool is not None and not await self._in_pool(report.pool):
            return []
        written = []
        if await self._write_condition(report):
            written.append("condition")
        if report.pool is not None and not self._still_in(report.pool):
            return written  # the condition's write was refused: the node has left the pool
        if await self._write_annotation(report):
            written.append("annotation")
        return written

    async def _in_pool(self, pool: str) -> bool:
        """Whether the node (as last seen) carries the pool's label; a node that left is re-read now and then."""
        if self._node_pool == pool:
            return True
        checked = self._left_checked_at
        if checked is not None and (self._now() - checked).total_seconds() < self.min_detail_seconds:
            return False
        if checked is not None and not await self.load():
            return False
        if self._node_pool == pool:
            log.info("node %s is in pool %s again: reporting", self.node_name, pool)
            self._left_checked_at = None
            return True
        return self._still_in(pool)

    def _still_in(self, pool: str) -> bool:
        """False (and noted, told once) when the node as last read is not in `pool`."""
        if self._node_pool == pool:
            return True
        if self._left_checked_at is None:
            log.warning(
                "node %s is not in pool %s (label %s=%s): not reporting",
                self.node_name,
                pool,
                POOL_LABEL,
                self._node_pool,
            )
        self._left_checked_at = self._now()
        return False

    async def load(self) -> bool:
        """Read the node: the condition and annotation as they are. False (and retried) on errors."""
        try:
            node = await self.client.get(self._path)
        except NotFoundError:
            self._errors += 1
            log.error("node %s not found: is --node-name right (spec.nodeName via the downward API)?", self.node_name)
            return False
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            self._errors += 1
            log.warning("reading node %s failed, retrying next report: %s", self.node_name, error)
            return False
        self._seen(node)
        for condition in (node.get("status") or {}).get("conditions") or []:
            if condition.get("type") != CONDITION_TYPE:
                continue
            heartbeat = _parse_time(condition.get("lastHeartbeatTime"))
            transition = _parse_time(condition.get("lastTransitionTime"))
            if heartbeat and transition:
                self._condition = _Condition(
                    status=str(condition.get("status", "")),
                    reason=str(condition.get("reason", "")),
                    message=str(condition.get("message", "")),
                    heartbeat=heartbeat,
                    transition=transition,
                )
        annotations = (node.get("metadata") or {}).get("annotations") or {}
        self.requested = annotations.get(CHECK_REQUEST_ANNOTATION)
        text = annotations.get(HEALTH_ANNOTATION)
        if text and not self._loaded:
            try:
                self._annotation = self.previous = HealthReport.from_annotation(text)
                self._answers = self._answers or self.previous.check_request
            except ValueError:
                log.info("replacing an unreadable %s annotation", HEALTH_ANNOTATION)
        self._loaded = True
        return True

    def _seen(self, node: dict[str, object]) -> None:
        """What the guarded writes need from the node as the API server last returned it."""
        metadata = node.get("metadata")
        metadata = metadata if isinstance(metadata, dict) else {}
        labels = metadata.get("labels") or {}
        self._node_pool = labels.get(POOL_LABEL) if isinstance(labels, dict) else None
        self._has_annotations = isinstance(metadata.get("annotations"), dict)
        status = node.get("status")
        conditions = status.get("conditions") if isinstance(status, dict) else None
        self._has_conditions = isinstance(conditions, list)
        self._condition_index = next(
            (
                index
                for index, condition in enumerate(conditions if isinstance(conditions, list) else [])
                if isinstance(condition, dict) and condition.get("type") == CONDITION_TYPE
            ),
            None,
        )

    async def _write_condition(self, report: NodeReport) -> bool:
        now = self._now()
        status = report.status.condition_status
        old = self._condition
        if old is not None:
            since = (now - old.heartbeat).total_seconds()
            detail_changed = (old.reason, old.message) != (report.reason, report.message)
            due = since >= self.heartbeat_seconds or (detail_changed and since >= self.min_detail_seconds)
            if old.status == status and not due:
                return False
        transition = old.transition if old is not None and old.status == status else now
        condition = {
            "type": CONDITION_TYPE,
            "status": status,
            "reason": report.reason,
            "message": report.message,
            "lastHeartbeatTime": rfc3339(now),
            "lastTransitionTime": rfc3339(transition),
        }
        body: object = {"status": {"conditions": [condition]}}
        patch_type = "strategic"
        if report.pool is not None and self._has_conditions:
            at = self._condition_index
            place: list[dict[str, object]] = (
                [{"op": "add", "path": "/status/conditions/-", "value": condition}]
                if at is None
                else [
                    {"op": "test", "path": f"/status/conditions/{at}/type", "value": CONDITION_TYPE},
                    {"op": "replace", "path": f"/status/conditions/{at}", "value": condition},
                ]
            )
            body, patch_type = [self._pool_test(report.pool), *place], "json"
        if not await self._patch(f"{self._path}/status", body, patch_type, "condition"):
            return False
        self._condition = _Condition(status, report.reason, report.message, now, transition)
        return True

    def _annotation_report(self, report: NodeReport) -> HealthReport:
        health = report.health_report().model_copy(update={"agent": self.agent_name, "check_request": self._answers})
        if health.tflops is not None:
            health = health.model_copy(update={"tflops": round_significant(health.tflops)})
        return health

    def _meaningful_change(self, old: HealthReport | None, new: HealthReport) -> bool:
        if old is None or old.status != new.status or old.check_request != new.check_request:
            return True
        written_at = self._annotation_written_at
        if written_at is not None and (self._now() - written_at).total_seconds() < self.min_detail_seconds:
            return False  # same status: details wait (flapping warnings, a second bad GPU)
        if (old.reason, old.message, old.gpus, old.bad_gpus, old.dtype, old.pool, old.agent, old.verdicts) != (
            new.reason,
            new.message,
            new.gpus,
            new.bad_gpus,
            new.dtype,
            new.pool,
            new.agent,
            new.verdicts,
        ):
            return True
        if (old.action, old.findings, old.complete, old.driver_version, old.cuda_version) != (
            new.action,
            new.findings,
            new.complete,
            new.driver_version,
            new.cuda_version,
        ):
            return True
        if (old.tflops is None) != (new.tflops is None):
            return True
        if old.tflops and new.tflops:
            return abs(new.tflops - old.tflops) / old.tflops > self.tflops_tolerance
        return False

    async def _write_annotation(self, report: NodeReport) -> bool:
        health = self._annotation_report(report)
        if not self._meaningful_change(self._annotation, health):
            return False
        body: object = {"metadata": {"annotations": {HEALTH_ANNOTATION: health.to_annotation()}}}
        patch_type = "merge"
        if report.pool is not None and self._has_annotations:
            # `add` of an existing member replaces it (RFC 6902); a node without annotations gets the merge patch.
            body = [
                self._pool_test(report.pool),
                {"op": "add", "path": ANNOTATION_PATH, "value": health.to_annotation()},
            ]
            patch_type = "json"
        if not await self._patch(self._path, body, patch_type, "annotation"):
            return False
        self._annotation = health
        self._annotation_written_at = self._now()
        return True

    @staticmethod
    def _pool_test(pool: str) -> dict[str, object]:
        return {"op": "test", "path": POOL_LABEL_PATH, "value": pool}

    async def _patch(self, path: str, body: object, patch_type: str, kind: str) -> bool:
        try:
            if patch_type == "strategic":
                node = await self.client.patch(path, body, patch_type="strategic")
            elif patch_type == "json":
                node = await self.client.patch(path, body, patch_type="json")
            else:
                node = await self.client.patch(path, body, patch_type="merge")
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            self._errors += 1
            log.warning("writing the %s of node %s failed, retrying next report: %s", kind, self.node_name, error)
            if isinstance(error, ApiError) and error.status == 422:
                await self.load()  # a failed test: the node left its pool, or its conditions moved
            return False
        self._seen(node)
        self._writes[kind] += 1
        log.info("node %s: wrote %s", self.node_name, kind)
        return True
