"""`accelpool plan -f POOLS.yaml [--nodes NODES.yaml] [-o table|json]`: what the operator would do.

Offline, from a `kubectl get nodes -o json` or `-o yaml` snapshot (a v1 List or a stream of Node
documents) given with --nodes ('-' reads standard input), read a Node at a time so that a large
fleet's snapshot fits in memory; against the current cluster (--kubeconfig,
--server, in-cluster) when --nodes is absent: then the cluster's nodes, its ComputePools (those
in the files replace same-named ones) and the NVIDIA ConfigMaps are read, and nodes labelled
with a pool that does not exist are shown released, as the operator would release them.
Offline, such nodes count as held by a pool the snapshot does not show.

`-o json` is a stable interface:

    {"pools": [{"name", "members": [node, ...], "phase", "conditions": [{"type", "status", "reason", "message"}]}],
     "nodePatches": {"<node>": {"labels": {"<key>": "<value>" | null},
                                "taints": {"add": [{"key", "value", "effect"}], "remove": [...]}}},
     "devicePluginConfig": {"<key>": <device-plugin config document>},
     "migConfig": <mig-parted document>}

`nodePatches` lists every member with the labels it will carry (accelpool.io/pool,
nvidia.com/device-plugin.config for NVIDIA pools, nvidia.com/mig.config for MIG pools) and the
taints it must carry (`add`), and every node accelpool releases (labels set to null or restored,
its taints under `remove`). Invalid pools are reported with Valid=False and phase Failed and get
no patches. Exit 0 when a plan was printed (also with invalid pools: they are visible in it),
2 when a file or the cluster cannot be read. A file that is not YAML, too large, a YAML bomb,
or holds an object of the wrong shape (a ComputePool or Node whose `metadata` is not a mapping,
a Node whose taints are not a list, ...) gives one line per problem on standard error
(`error: FILE:LINE:COL: ...`, `error: FILE:LINE: document N (Kind/name): field: ...`) and no
plan: a plan from part of the input could release nodes it did not see.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from datetime import UTC, datetime
from typing import Any

import accelpool_api as api
from accelpool.cli.commands import SUMMARIES
from accelpool.decide import inputs
from accelpool.decide.planning import ConfigState, Plan, PlannerOptions, PoolInput, plan
from accelpool.model import shapes
from accelpool.model.nodes import NodeView, parse_time
from accelpool_api import conventions
from accelpool_core.credentials import Credentials
from accelpool_core.durations import seconds
from accelpool_core.kube import ApiError, KubeClient, NotFoundError
from accelpool_core.textio import MAX_SNAPSHOT_BYTES, add_filename_argument, format_table, read_objects, scan_objects

POOLS_PATH = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"
HIDDEN_LABELS = frozenset({conventions.MIG_CONFIG_STATE_LABEL})
"""Labels a write also touches that are not part of the plan's interface (the MIG state reset)."""


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "plan",
        help=SUMMARIES["plan"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_filename_argument(parser)
    parser.add_argument(
        "--nodes",
        metavar="FILE",
        help=f"`kubectl get nodes -o json` (or -o yaml) output ('-': standard input), at most "
        f"{MAX_SNAPSHOT_BYTES // 2**30} GiB",
    )
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    parser.add_argument("--kubeconfig", help="without --nodes: the cluster to read (default: in-cluster, $KUBECONFIG)")
    parser.add_argument("--server", metavar="URL", help="without --nodes: an API server URL without authentication")
    parser.add_argument("--namespace", default=conventions.DEFAULT_NAMESPACE, help="namespace of the NVIDIA ConfigMaps")
    parser.add_argument("--device-plugin-configmap", default=conventions.DEFAULT_DEVICE_PLUGIN_CONFIGMAP)
    parser.add_argument("--mig-configmap", default=conventions.DEFAULT_MIG_CONFIGMAP)
    parser.add_argument("--not-ready-grace", type=seconds, default=300.0, metavar="DURATION")
    parser.add_argument(
        "--tolerated-taints",
        default=",".join(conventions.ACCELERATOR_TAINTS),
        metavar="KEY[=VALUE],...",
        help="taints that do not stop a free node from being claimed (as the operator's --tolerated-taints)",
    )
    parser.add_argument(
        "--now", metavar="RFC3339", help="plan as of this time (hold-down and grace decisions); default: now"
    )
    parser.set_defaults(func=run)


async def _from_cluster(
    args: argparse.Namespace, file_pools: list[PoolInput]
) -> tuple[list[PoolInput], list[NodeView], ConfigState, bool]:
    async with KubeClient(Credentials.discover(args.kubeconfig, args.server)) as client:
        nodes = [NodeView.from_body(n) for n in await client.list("/api/v1/nodes")]
        try:
            cluster_pools = [inputs.pool_input(inputs.PoolRecord.from_body(p)) for p in await client.list(POOLS_PATH)]
        except NotFoundError:
            cluster_pools = []
        base = f"/api/v1/namespaces/{args.namespace}/configmaps"
        config = inputs.config_state(
            await client.get_or_none(f"{base}/{args.device_plugin_configmap}"),
            await client.get_or_none(f"{base}/{args.mig_configmap}"),
        )
        try:
            await client.list("/apis/karpenter.sh/v1/nodepools")
            karpenter = True
        except NotFoundError:
            karpenter = False
    named = {p.name: p for p in cluster_pools}
    named.update({p.name: p for p in file_pools})
    return list(named.values()), nodes, config, karpenter


def plan_document(result: Plan, pools: list[str] | None = None) -> dict[str, Any]:
    """The JSON interface of `accelpool plan -o json`."""
    shown = [p for p in result.pools if pools is None or p.name in pools]
    node_patches: dict[str, Any] = {}
    for name, change in sorted(result.changes.items()):
        node_patches[name] = {
            "labels": {k: v for k, v in sorted(change.labels.items()) if k not in HIDDEN_LABELS},
            "taints": {
                "add": [_taint(t.key, t.value, t.effect) for t in change.add_taints],
                "remove": [_taint(t.key, t.value, t.effect) for t in change.remove_taints],
            },
        }
    return {
        "pools": [
            {
                "name": p.name,
                "members": list(p.members),
                "phase": p.phase,
                "conditions": [
                    {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                    for c in (p.status.conditions if p.status else [])
                ],
            }
            for p in shown
        ],
        "nodePatches": node_patches,
        "devicePluginConfig": {k: result.device_plugin_documents[k] for k in sorted(result.device_plugin_documents)},
        "migConfig": dict(result.mig_document),
    }


def _taint(key: str, value: str | None, effect: str) -> dict[str, str]:
    out = {"key": key}
    if value is not None:
        out["value"] = value
    out["effect"] = effect
    return out


def render_table(result: Plan, views: dict[str, NodeView]) -> str:
    pool_rows: list[tuple[str, ...]] = [("POOL", "ACCELERATOR", "NODES", "PHASE", "MEMBERS")]
    for pool in result.pools:
        status = pool.status
        members = ", ".join(pool.members[:6]) + (f" (+{len(pool.members) - 6})" if len(pool.members) > 6 else "")
        pool_rows.append(
            (
                pool.name,
                (status.accelerator or "-") if status else "-",
                status.nodes.summary if status else "-",
                pool.phase,
                members or "-",
            )
        )
    lines = [format_table(pool_rows), ""]
    problems = [
        f"  {p.name}: {c.type}={c.status} {c.reason}: {c.message}"
        for p in result.pools
        if p.status
        for c in p.status.conditions
        if c.status == "False" and c.type != "Ready"
    ]
    if problems:
        lines += ["Not ready:", *problems, ""]
    node_rows: list[tuple[str, ...]] = [("NODE", "POOL", "CHANGES")]
    for name, change in sorted(result.changes.items()):
        view = views.get(name)
        edits = [
            f"{k}={v}" if v is not None else f"-{k}"
            for k, v in sorted(change.labels.items())
            if view is None or view.labels.get(k) != v
        ]
        present = set(view.taints) if view else set()
        edits += [f"+taint {t.key}={t.value}:{t.effect}" for t in change.add_taints if t not in present]
        edits += [f"-taint {t.key}:{t.effect}" for t in change.remove_taints]
        if change.unschedulable is not None and view is not None and change.unschedulable != view.unschedulable:
            edits.append("cordon" if change.unschedulable else "uncordon")
        if edits:
            node_rows.append((name, change.pool or "(released)", ", ".join(edits)))
    lines.append(format_table(node_rows) if len(node_rows) > 1 else "No node changes.")
    keys = ", ".join(sorted(result.device_plugin_documents))
    entries = ", ".join(sorted(result.mig_document.get("mig-configs") or {}))
    lines += ["", f"device-plugin config keys: {keys}", f"mig-parted entries: {entries}"]
    return "\n".join(lines)


def _file_pools(names: list[str], errors: list[str], *, recursive: bool = False) -> list[PoolInput]:
    pools: list[PoolInput] = []
    for name in names:
        found = read_objects([name], recursive=recursive)
        errors += found.errors
        for obj in found.objects:
            shape = shapes.object_problems(obj.body)
            if shape:
                errors += [obj.problem(p.path, p.message, p.value) for p in shape]
            elif obj.body.get("kind") == api.KIND:
                pools.append(inputs.pool_from_file(obj.body))
    return pools


def read_nodes(name: str, errors: list[str]) -> list[NodeView]:
    """The snapshot's Nodes, each reduced to its view as it is read: a fleet's snapshot is large (also
    `accelpool recommend --nodes`)."""
    nodes: list[NodeView] = []
    for obj in scan_objects(name):
        if isinstance(obj, str):
            errors.append(obj)
            continue
        shape = shapes.object_problems(obj.body)
        if not shape and obj.body.get("kind", "Node") != "Node":
            continue
        shape = shape or shapes.node_problems(obj.body)
        if shape:
            errors += [obj.problem(p.path, p.message, p.value) for p in shape]
        else:
            nodes.append(NodeView.from_body(obj.body))
    return nodes


def run(args: argparse.Namespace) -> int:
    now = parse_time(args.now) if args.now else datetime.now(UTC)
    if now is None:
        print(f"error: --now {args.now!r} is not an RFC 3339 time like 2026-11-01T00:00:00Z", file=sys.stderr)
        return 2
    errors: list[str] = []
    file_pools = _file_pools(args.filename, errors, recursive=args.recursive)
    file_nodes = None if args.nodes is None else read_nodes(args.nodes, errors)
    if errors:
        for error in errors:
            print(f"error: {error}", file=sys.stderr)
        return 2
    if file_nodes is not None:
        pools, nodes, config, karpenter, orphans = (file_pools, file_nodes, ConfigState(), True, False)
    else:
        try:
            pools, nodes, config, karpenter = asyncio.run(_from_cluster(args, file_pools))
        except (ApiError, OSError, ValueError) as error:
            print(f"error: cannot read the cluster: {error}", file=sys.stderr)
            return 2
        orphans = True
    options = PlannerOptions(
        now=now,
        release_orphans=orphans,
        not_ready_grace_seconds=args.not_ready_grace,
        karpenter_available=karpenter,
        tolerated_taints=tuple(t.strip() for t in args.tolerated_taints.split(",") if t.strip()),
    )
    result = plan(pools, nodes, config, options)
    if args.output == "json":
        print(json.dumps(plan_document(result), indent=2))
    else:
        print(render_table(result, {n.name: n for n in nodes}))
    invalid = [p.name for p in result.pools if not p.valid]
    if invalid:
        print(f"invalid pools (Valid=False, nothing planned for them): {', '.join(invalid)}", file=sys.stderr)
    return 0
