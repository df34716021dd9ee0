"""Writes the node's verdict to the Kubernetes API with as few requests as possible.

Two objects are written on the agent's own Node:

- the condition `AcceleratorHealthy` in `status.conditions` (PATCH `/api/v1/nodes/<node>/status`,
  a strategic-merge patch carrying only this condition, so the kubelet's conditions are merged
  by type, not replaced). `lastTransitionTime` changes only when the status does;
  `lastHeartbeatTime` is refreshed by a rewrite every `heartbeat_seconds` even when nothing
  changed, so a stale condition means a dead agent.
- the annotation `accelpool.io/health` (a merge patch on `/api/v1/nodes/<node>`), the compact
  `HealthReport` the operator reads. It names its writer (`pool`, `agent`) and carries the last
  compute verdict per GPU and check kind (`verdicts`, stamped with when it was first reached, so
  a repeating verdict causes no write). Its TFLOPS are rounded to three significant figures and
  rewritten only when they move by more than `tflops_tolerance`, so noise causes no writes.

A change of status (True/False/Unknown) is written at once. A change of reason or message that
keeps the status (a GPU that throttles on and off, a second failing GPU) is written at most once
per `min_detail_seconds`, so a flapping warning cannot turn into a stream of API writes.

Nothing is written when nothing changed. The node is read once (`load`, at daemon start or the
first report), so an agent restart keeps the transition time, does not rewrite an identical
condition, and hands the previous annotation (`previous`) to the agent to restore its verdicts. API
errors are logged and counted; the next report retries.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from datetime import UTC, datetime

import aiohttp

from accelpool.kube import ApiError, KubeClient, NotFoundError
from accelpool_agent.agent import ReportStats
from accelpool_agent.clock import Clock, SystemClock
from accelpool_agent.model import NodeReport
from accelpool_agent.protocol import CONDITION_TYPE, HEALTH_ANNOTATION, HealthReport

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
        self._writes: dict[str, int] = {"condition": 0, "annotation": 0}
        self._errors = 0

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

    async def report(self, report: NodeReport) -> list[str]:
        """Bring the node in line with `report`; returns what was written ("condition", "annotation")."""
        if not self._loaded and not await self.load():
            return []
        written = []
        if await self._write_condition(report):
            written.append("condition")
        if await self._write_annotation(report):
            written.append("annotation")
        return written

    async def load(self) -> bool:
        """Read the node once: the condition and annotation as they are. False (and retried) on errors."""
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
        text = ((node.get("metadata") or {}).get("annotations") or {}).get(HEALTH_ANNOTATION)
        if text:
            try:
                self._annotation = self.previous = HealthReport.from_annotation(text)
            except ValueError:
                log.info("replacing an unreadable %s annotation", HEALTH_ANNOTATION)
        self._loaded = True
        return True

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
        body = {
            "status": {
                "conditions": [
                    {
                        "type": CONDITION_TYPE,
                        "status": status,
                        "reason": report.reason,
                        "message": report.message,
                        "lastHeartbeatTime": rfc3339(now),
                        "lastTransitionTime": rfc3339(transition),
                    }
                ]
            }
        }
        if not await self._patch(f"{self._path}/status", body, "strategic", "condition"):
            return False
        self._condition = _Condition(status, report.reason, report.message, now, transition)
        return True

    def _annotation_report(self, report: NodeReport) -> HealthReport:
        health = report.health_report().model_copy(update={"agent": self.agent_name})
        if health.tflops is not None:
            health = health.model_copy(update={"tflops": round_significant(health.tflops)})
        return health

    def _meaningful_change(self, old: HealthReport | None, new: HealthReport) -> bool:
        if old is None or old.status != new.status:
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
        if (old.tflops is None) != (new.tflops is None):
            return True
        if old.tflops and new.tflops:
            return abs(new.tflops - old.tflops) / old.tflops > self.tflops_tolerance
        return False

    async def _write_annotation(self, report: NodeReport) -> bool:
        health = self._annotation_report(report)
        if not self._meaningful_change(self._annotation, health):
            return False
        body = {"metadata": {"annotations": {HEALTH_ANNOTATION: health.to_annotation()}}}
        if not await self._patch(self._path, body, "merge", "annotation"):
            return False
        self._annotation = health
        self._annotation_written_at = self._now()
        return True

    async def _patch(self, path: str, body: object, patch_type: str, kind: str) -> bool:
        try:
            if patch_type == "strategic":
                await self.client.patch(path, body, patch_type="strategic")
            else:
                await self.client.patch(path, body, patch_type="merge")
        except (ApiError, aiohttp.ClientError, TimeoutError) as error:
            self._errors += 1
            log.warning("writing the %s of node %s failed, retrying next report: %s", kind, self.node_name, error)
            return False
        self._writes[kind] += 1
        log.info("node %s: wrote %s", self.node_name, kind)
        return True
