"""`accelpool check NODE [NODE...] | --pool POOL`: an immediate full check cycle, and its verdict.

    accelpool check h100-1 h100-2                   # these nodes' agents run a full cycle now
    accelpool check --pool llm-training -o json     # every member of the pool
    accelpool check h100-1 --no-wait                # ask, print the token, do not wait

Sets a fresh token (the time and a random suffix) in the `accelpool.io/check-requested`
annotation of each node, or of the ComputePool (the operator copies it to every member), then
reads the nodes every 2 s (a pool's members in one list) until each one's `accelpool.io/health`
annotation answers the token (`checkRequest`): its agent has run a full cycle, compute checks
included, since the request.
Progress goes to standard error; the verdicts (status, reason, recommended action, message) to
standard output, as a table or, with `-o json`, as

    {"token", "pool", "nodes": [{"node", "answered": true, "status", "reason", "action", "message",
                                 "findings": [{"check", "severity", "reason", "action", "gpus", "detail"}]}
                                | {"node", "answered": false, "waitingFor"}]}

A pool's members are the nodes labelled `accelpool.io/pool=POOL` when the request is made.
Exit 0 when every node answered Healthy, 1 when one answered otherwise, 3 when one did not answer
within --timeout (named on standard error, with what it is waiting for), 2 for bad arguments or
an API error (an unknown node or pool is named). Cluster access as `accelpool plan`:
--kubeconfig, --server, in-cluster, then ~/.kube/config.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import aiohttp
from pydantic import ValidationError

import accelpool_api as api
from accelpool.cli.commands import SUMMARIES
from accelpool_api import conventions
from accelpool_core.credentials import Credentials
from accelpool_core.durations import positive_seconds
from accelpool_core.kube import ApiError, KubeClient, NotFoundError
from accelpool_core.protocol import HealthReport, HealthStatus
from accelpool_core.textio import format_table

NODES = "/api/v1/nodes"
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
POLL_SECONDS = 2.0
PROGRESS_SECONDS = 30.0
"""How often the nodes still waited for are named on standard error."""
DEFAULT_TIMEOUT = "15m"
EXIT_TIMEOUT = 3
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class UsageError(Exception):
    """A bad argument; the message names it, its value and what is valid."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "check",
        help=SUMMARIES["check"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("nodes", nargs="*", metavar="NODE", help="the nodes to check")
    parser.add_argument("--pool", metavar="POOL", help="check every member of this ComputePool")
    parser.add_argument("--timeout", default=DEFAULT_TIMEOUT, metavar="DURATION", help="wait this long (15m)")
    parser.add_argument("--no-wait", action="store_true", help="set the request, print its token and exit")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--kubeconfig", help="the cluster (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--server", metavar="URL", help="an API server URL without authentication")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class Request:
    """What to check: named nodes, or a pool (whose members are found when asking)."""

    nodes: tuple[str, ...]
    pool: str | None
    timeout_seconds: float


@dataclass(frozen=True)
class NodeAnswer:
    """One node's answer to the request (`report` None: it did not answer)."""

    node: str
    report: HealthReport | None
    waiting_for: str = ""
    """For a node that did not answer: what it is waiting for."""

    @property
    def healthy(self) -> bool:
        return self.report is not None and self.report.status is HealthStatus.HEALTHY


def parse_request(args: argparse.Namespace) -> Request:
    """The arguments as a `Request`; `UsageError` names a bad one."""
    if bool(args.nodes) == bool(args.pool):
        raise UsageError("give either NODE names or --pool POOL (not both, not neither)")
    for name in args.nodes:
        if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
            raise UsageError(
                f"NODE: invalid value {name!r}: a node name is a DNS subdomain (at most 253 lowercase letters, "
                "digits, '-' and '.', starting and ending with a letter or digit)"
            )
    if args.pool is not None and not (conventions.is_label_value(args.pool) and _DNS_SUBDOMAIN.fullmatch(args.pool)):
        raise UsageError(
            f"--pool: invalid value {args.pool!r}: a ComputePool name is a DNS subdomain of at most "
            f"{conventions.LABEL_VALUE_MAX} characters"
        )
    try:
        timeout = positive_seconds(args.timeout, "90s, 15m or 1h")
    except ValueError as error:
        raise UsageError(f"--timeout: {error}") from None
    return Request(tuple(dict.fromkeys(args.nodes)), args.pool, timeout)


def new_token(now: datetime) -> str:
    """A fresh check request: the time (RFC 3339) and 6 random hex digits, e.g. 2026-11-22T23:58:19Z-1a2b3c."""
    return f"{now.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}-{secrets.token_hex(3)}"


def answer(node: dict[str, Any], token: str) -> HealthReport | None:
    """The node's health report if it answers `token`, else None."""
    annotations = (node.get("metadata") or {}).get("annotations") or {}
    text = annotations.get(conventions.HEALTH_ANNOTATION)
    if not text:
        return None
    try:
        report = HealthReport.from_annotation(text)
    except (ValidationError, ValueError):
        return None
    return report if report.check_request == token else None


def waiting_for(node: dict[str, Any] | None, token: str, *, pool: bool) -> str:
    """What a node that has not answered yet is waiting for, in words."""
    if node is None:
        return "nothing: the node was deleted" + (" or left the pool" if pool else "")
    asked = ((node.get("metadata") or {}).get("annotations") or {}).get(conventions.CHECK_REQUEST_ANNOTATION)
    if asked != token and pool:
        return f"the operator to copy the pool's request to its {conventions.CHECK_REQUEST_ANNOTATION}"
    if asked != token:
        return f"nothing: its {conventions.CHECK_REQUEST_ANNOTATION} was replaced by another request ({asked})"
    return "its agent's full cycle (is the agent running on it?)"


def exit_code(verdicts: list[NodeAnswer]) -> int:
    if any(v.report is None for v in verdicts):
        return EXIT_TIMEOUT
    return 0 if all(v.healthy for v in verdicts) else 1


def render_table(verdicts: list[NodeAnswer]) -> str:
    rows: list[tuple[str, ...]] = [("NODE", "STATUS", "REASON", "ACTION", "MESSAGE")]
    for verdict in verdicts:
        report = verdict.report
        if report is None:
            rows.append((verdict.node, "-", "NotAnswered", "-", f"waiting for {verdict.waiting_for}"))
        else:
            rows.append((verdict.node, report.status.value, report.reason, report.action.value, report.message))
    return format_table(rows)


def render_json(token: str, pool: str | None, verdicts: list[NodeAnswer]) -> str:
    nodes = []
    for verdict in verdicts:
        report = verdict.report
        entry: dict[str, Any] = {"node": verdict.node, "answered": report is not None}
        if report is None:
            entry["waitingFor"] = verdict.waiting_for
        else:
            entry.update(status=report.status.value, reason=report.reason, action=report.action.value)
            entry.update(message=report.message, findings=[f.model_dump(mode="json") for f in report.findings])
        nodes.append(entry)
    return json.dumps({"token": token, "pool": pool, "nodes": nodes}, indent=2)


async def ask(client: KubeClient, request: Request, token: str) -> list[str]:
    """Set the token on the nodes (or the pool); the nodes whose answers to wait for."""
    annotation = {"metadata": {"annotations": {conventions.CHECK_REQUEST_ANNOTATION: token}}}
    if request.pool is None:
        for name in request.nodes:  # every name first: a typo asks nothing of the others
            await _get(client, f"{NODES}/{name}", f"node {name} not found")
        for name in request.nodes:
            await client.patch(f"{NODES}/{name}", annotation)
        return list(request.nodes)
    await _get(client, f"{POOLS}/{request.pool}", f"ComputePool {request.pool} not found")
    members = await client.list(NODES, label_selector=f"{conventions.POOL_LABEL}={request.pool}")
    if not members:
        raise UsageError(
            f"--pool: ComputePool {request.pool} has no member nodes (none labelled "
            f"{conventions.POOL_LABEL}={request.pool})"
        )
    await client.patch(f"{POOLS}/{request.pool}", annotation)
    return sorted(str(n["metadata"]["name"]) for n in members)


async def _get(client: KubeClient, path: str, missing: str) -> None:
    try:
        await client.get(path)
    except NotFoundError:
        raise UsageError(missing) from None


async def read_nodes(client: KubeClient, names: list[str], pool: str | None) -> dict[str, dict[str, Any] | None]:
    """The nodes as they are now (None: gone): a pool's in one list request, named nodes one by one."""
    if pool is not None:
        members = await client.list(NODES, label_selector=f"{conventions.POOL_LABEL}={pool}")
        found = {str(n["metadata"]["name"]): n for n in members}
        return {name: found.get(name) for name in names}
    return {name: await client.get_or_none(f"{NODES}/{name}") for name in names}


async def wait(
    client: KubeClient, names: list[str], token: str, within: float, *, pool: str | None
) -> list[NodeAnswer]:
    """Read the nodes every `POLL_SECONDS` until each answers `token` or `within` seconds pass."""
    answers: dict[str, HealthReport] = {}
    last_seen: dict[str, dict[str, Any] | None] = {}
    deadline = time.monotonic() + within
    told = time.monotonic()
    while True:
        last_seen = await read_nodes(client, [n for n in names if n not in answers], pool)
        for name, node in last_seen.items():
            report = answer(node, token) if node is not None else None
            if report is not None:
                answers[name] = report
                _progress(f"{name}: {report.status.value} ({report.reason}) [{len(answers)}/{len(names)}]")
        left = [n for n in names if n not in answers]
        if not left or time.monotonic() >= deadline:
            break
        if time.monotonic() - told >= PROGRESS_SECONDS:
            told = time.monotonic()
            _progress(f"waiting for {len(left)} node(s): {', '.join(left)}")
        await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
    return [
        NodeAnswer(
            n, answers.get(n), "" if n in answers else waiting_for(last_seen.get(n), token, pool=pool is not None)
        )
        for n in names
    ]


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


async def _check(args: argparse.Namespace, request: Request) -> int:
    token = new_token(datetime.now(UTC))
    async with KubeClient(Credentials.discover(args.kubeconfig, args.server), user_agent="accelpool-check") as client:
        names = await ask(client, request, token)
        target = f"pool {request.pool} ({len(names)} nodes)" if request.pool else ", ".join(names)
        _progress(f"check requested on {target}: {conventions.CHECK_REQUEST_ANNOTATION}={token}")
        if args.no_wait:
            print(token)
            return 0
        verdicts = await wait(client, names, token, request.timeout_seconds, pool=request.pool)
    print(render_json(token, request.pool, verdicts) if args.output == "json" else render_table(verdicts))
    silent = [v for v in verdicts if v.report is None]
    if silent:
        _progress(f"not answered within {args.timeout}: " + "; ".join(f"{v.node} ({v.waiting_for})" for v in silent))
    return exit_code(verdicts)


def run(args: argparse.Namespace) -> int:
    try:
        request = parse_request(args)
        return asyncio.run(_check(args, request))
    except (UsageError, ApiError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        print(f"error: cannot reach the API server: {error or type(error).__name__}", file=sys.stderr)
    return 2
