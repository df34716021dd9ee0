"""`accelpool uninstall`: delete every ComputePool and wait until the operator has released their nodes.

    accelpool uninstall                  # in-cluster, or ~/.kube/config
    accelpool uninstall --timeout 10m

What the chart's pre-delete hook (charts/accelpool/templates/uninstall-hook.yaml) runs before
`helm uninstall` removes the operator: the operator, still running, removes each pool's finalizer
(`accelpool.io/finalizer`) once a pass has released the pool's members (labels, taints, annotations
and conditions it set, prior labels restored), removed its config keys and deleted its agent
DaemonSet and Karpenter NodePool. Without this, an uninstall leaves every
pool stuck on its finalizer and its members labelled and tainted until an operator runs again.

Deletes each pool not already being deleted, then lists the pools and the nodes labelled
`accelpool.io/pool` every 2 s until both are gone. Then one list of every node names any still
carrying an accelpool taint (`accelpool.io/pool`, `accelpool.io/burn-in`, `accelpool.io/quarantined`):
the operator releases only labelled nodes, so such a taint was put there by someone else.
Progress goes to standard error, the result to standard output. Exit 0 when every pool is gone and
no node is labelled; 1 when something remains after --timeout (named, with why and what to do); 2
for bad arguments or an API error. Cluster access as `accelpool check`: --kubeconfig, --server,
in-cluster, then ~/.kube/config.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import aiohttp

import accelpool_api as api
from accelpool_api import conventions
from accelpool_core.credentials import Credentials
from accelpool_core.durations import positive_seconds
from accelpool_core.kube import ApiError, KubeClient, NotFoundError

NODES = "/api/v1/nodes"
POOLS = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
FINALIZER = f"{api.GROUP}/finalizer"
"""The operator's finalizer on every pool (`accelpool.runtime.handlers.FINALIZER`)."""
TAINT_KEYS = (conventions.POOL_TAINT_KEY, conventions.BURN_IN_TAINT_KEY, conventions.QUARANTINE_TAINT_KEY)
POLL_SECONDS = 2.0
PROGRESS_SECONDS = 30.0
DEFAULT_TIMEOUT = "4m"
"""Under `helm uninstall`'s own default --timeout (5m), which bounds the hook."""
EXIT_REMAINING = 1


class UsageError(Exception):
    """A bad argument; the message names it, its value and what is valid."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "uninstall",
        help="delete every ComputePool and wait until the operator has released their nodes",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--timeout", default=DEFAULT_TIMEOUT, metavar="DURATION", help="wait this long (4m)")
    parser.add_argument("--kubeconfig", help="the cluster (default: in-cluster, then $KUBECONFIG, ~/.kube/config)")
    parser.add_argument("--server", metavar="URL", help="an API server URL without authentication")
    parser.set_defaults(func=run)


@dataclass(frozen=True)
class Remaining:
    """What is left of accelpool on the cluster: pools (name → finalizers) and labelled nodes (name → pool)."""

    pools: dict[str, tuple[str, ...]]
    nodes: dict[str, str]

    @property
    def empty(self) -> bool:
        return not self.pools and not self.nodes

    def describe(self) -> str:
        parts = []
        if self.pools:
            listed = ", ".join(
                f"{name} (finalizers: {', '.join(finalizers) or 'none'})" for name, finalizers in self.pools.items()
            )
            parts.append(f"ComputePools {listed}")
        if self.nodes:
            parts.append("nodes " + ", ".join(f"{n} ({conventions.POOL_LABEL}={p})" for n, p in self.nodes.items()))
        return "; ".join(parts) or "nothing"


def remaining(pools: Iterable[dict[str, Any]], labelled: Iterable[dict[str, Any]]) -> Remaining:
    """The pools and labelled nodes as listed."""
    return Remaining(
        {
            str(p["metadata"]["name"]): tuple(p["metadata"].get("finalizers") or ())
            for p in sorted(pools, key=lambda p: str(p["metadata"]["name"]))
        },
        {
            str(n["metadata"]["name"]): str((n["metadata"].get("labels") or {}).get(conventions.POOL_LABEL, ""))
            for n in sorted(labelled, key=lambda n: str(n["metadata"]["name"]))
        },
    )


def stray_taints(nodes: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Nodes carrying an accelpool taint: node → those taints."""
    found: dict[str, list[dict[str, Any]]] = {}
    for node in nodes:
        taints = [t for t in (node.get("spec") or {}).get("taints") or [] if t.get("key") in TAINT_KEYS]
        if taints:
            found[str(node["metadata"]["name"])] = taints
    return found


def stray_warning(node: str, taints: list[dict[str, Any]]) -> str:
    """What to tell about a node in no pool that still carries accelpool taints, with the command removing them."""
    listed = ", ".join(f"{t['key']}{'=' + t['value'] if t.get('value') else ''}:{t.get('effect', '')}" for t in taints)
    keys = " ".join(dict.fromkeys(f"{t['key']}-" for t in taints))
    return (
        f"warning: node {node} is in no pool but carries {listed}; the operator releases members only: "
        f"kubectl taint node {node} {keys}"
    )


def why(left: Remaining) -> str:
    """What a timed-out wait says about the cause and the way out."""
    lines = [f"still there: {left.describe()}."]
    if any(FINALIZER in finalizers for finalizers in left.pools.values()):
        lines.append(
            f"The operator removes {FINALIZER} once it has released a pool's nodes: is it running and leading? "
            "(kubectl get pods -A -l app.kubernetes.io/component=operator,app.kubernetes.io/part-of=accelpool; its "
            "log names the pool). A pool being drained or a slow API server may need a longer --timeout "
            "(the chart's uninstall.timeout)."
        )
    lines.append(
        "Nothing else was removed. Fix the cause and run it again (helm uninstall runs it again), or leave the "
        "pools and their nodes as they are with `helm uninstall --no-hooks` (an operator installed later takes "
        "them over)."
    )
    return "\n".join(lines)


async def _remaining(client: KubeClient) -> Remaining:
    pools = await client.list(POOLS)
    labelled = await client.list(NODES, label_selector=conventions.POOL_LABEL)
    return remaining(pools, labelled)


async def _delete_pools(client: KubeClient) -> list[str]:
    """Delete every pool not being deleted yet; the names of all pools found."""
    try:
        pools = await client.list(POOLS)
    except NotFoundError:
        raise _NotServed() from None
    names = sorted(str(p["metadata"]["name"]) for p in pools)
    for pool in sorted(pools, key=lambda p: str(p["metadata"]["name"])):
        name = str(pool["metadata"]["name"])
        if pool["metadata"].get("deletionTimestamp"):
            _progress(f"ComputePool {name}: already being deleted")
            continue
        await client.delete(f"{POOLS}/{name}")
        _progress(f"ComputePool {name}: deleted; waiting for the operator to release its nodes")
    return names


class _NotServed(Exception):
    """The ComputePool API is not served (no CRD): nothing to release."""


async def _uninstall(args: argparse.Namespace, within: float) -> int:
    async with KubeClient(
        Credentials.discover(args.kubeconfig, args.server), user_agent="accelpool-uninstall"
    ) as client:
        try:
            names = await _delete_pools(client)
        except _NotServed:
            print(f"no ComputePool API ({api.PLURAL}.{api.GROUP} is not served): nothing to release")
            return 0
        if not names:
            _progress("no ComputePools")
        deadline = time.monotonic() + within
        told = time.monotonic()
        while True:
            left = await _remaining(client)
            if left.empty or time.monotonic() >= deadline:
                break
            if time.monotonic() - told >= PROGRESS_SECONDS:
                told = time.monotonic()
                _progress(f"waiting for {left.describe()}")
            await asyncio.sleep(min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
        if not left.empty:
            print(f"error: not released within {args.timeout}; {why(left)}", file=sys.stderr)
            return EXIT_REMAINING
        strays = stray_taints(await client.list(NODES))
    released = ", ".join(names) if names else "no pools"
    print(f"released {released}: no ComputePool is left and no node is labelled {conventions.POOL_LABEL}")
    for node, taints in strays.items():
        print(stray_warning(node, taints), file=sys.stderr)
    return 0


def _progress(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def parse_timeout(text: str) -> float:
    try:
        return positive_seconds(text, "90s, 4m or 1h")
    except ValueError as error:
        raise UsageError(f"--timeout: {error}") from None


def run(args: argparse.Namespace) -> int:
    try:
        within = parse_timeout(args.timeout)
        return asyncio.run(_uninstall(args, within))
    except (UsageError, ApiError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
    except (aiohttp.ClientError, OSError, TimeoutError) as error:
        print(f"error: cannot reach the API server: {error or type(error).__name__}", file=sys.stderr)
    return 2
