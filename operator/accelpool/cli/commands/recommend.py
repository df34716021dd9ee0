"""`accelpool recommend MODEL|--model-config PATH|JSON [--dtype D] [--workload W] [...] [-o table|json]`.

MODEL is a parameter count (`8B`, `70B`, `1.5e9`, `405000M`) or a known model (`llama-3.1-8b`,
`llama-3.1-70b`, `llama-3.1-405b`, `llama-3.2-1b`, `llama-3.2-3b`). Any other decoder-only
transformer, mixture of experts included: `--model-config` with its Hugging Face `config.json`
(a path, `-` for stdin, or the JSON itself); its parameters and KV cache are counted from the shape.
Prints each memory term with its formula (weights, KV cache, gradients, optimizer states,
activations, overhead), then every catalog accelerator's smallest placement that holds it (whole
devices with tensor parallelism, whole nodes, a MIG slice, a time-sliced share), tightest memory
fit first, with a tokens/s estimate and its basis; then the accelerators left out (no mode in the
dtype, or inference-only for training) and those nothing fits. The formulas and their sources:
`accelpool.cli.recommend.memory` and `.shape`; the placement and ranking rules:
`accelpool.cli.recommend.fit`; the JSON schema: `accelpool.cli.recommend.report`.

Existing pools, and how many replicas each holds:
  --kubeconfig/--server   the cluster's ComputePools, by their status' healthy capacity;
  --pools FILE            `kubectl get computepools -o yaml` output (status included), the same way;
  --nodes FILE -f POOLS   pools planned offline on a `kubectl get nodes -o yaml` snapshot
                          (as `accelpool plan`), by their planned members' devices.

Exit 0 with a recommendation (also when nothing fits: it says so), 2 on bad input (the error names
the flag, the value and what is valid) or when a file or the cluster cannot be read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import accelpool_api as api
from accelpool.cli.commands import SUMMARIES
from accelpool.cli.commands.plan import read_nodes
from accelpool.cli.recommend import (
    Arguments,
    InputError,
    PoolUnits,
    estimate,
    fit_pool,
    placements,
    planned_resources,
    pool_units,
    request,
)
from accelpool.cli.recommend.fit import DEFAULT_MFU
from accelpool.cli.recommend.parse import parse_mfu
from accelpool.cli.recommend.pools import devices_per_node, member_devices
from accelpool.cli.recommend.report import document, table
from accelpool.decide import inputs
from accelpool.decide.planning import ConfigState, PlannerOptions, plan
from accelpool.model import shapes
from accelpool_core.credentials import Credentials
from accelpool_core.kube import ApiError, KubeClient, NotFoundError
from accelpool_core.textio import read_objects

POOLS_PATH = f"/apis/{api.GROUP}/{api.VERSION}/{api.PLURAL}"


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "recommend",
        help=SUMMARIES["recommend"],
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "model",
        metavar="MODEL",
        nargs="?",
        help="parameters (8B, 70B, 1.5e9) or a known model (llama-3.1-70b); with --model-config, a name to show",
    )
    parser.add_argument(
        "--model-config",
        metavar="PATH|JSON",
        help="a Hugging Face config.json (a path, '-' for stdin, or the JSON text) of a decoder-only transformer",
    )
    parser.add_argument("--dtype", help="fp32, fp16, bf16, fp8, int8, int4 (4bit, nf4); default bf16, int4 for qlora")
    parser.add_argument(
        "--workload",
        default="inference",
        help="inference, lora, qlora (lora over int4), full, pretrain; default inference",
    )
    parser.add_argument("--context", type=int, help="tokens per sequence (default: 8192 inference, 4096 training)")
    parser.add_argument("--batch", type=int, default=1, help="sequences at once (training: micro-batch per device)")
    parser.add_argument("--kv-dtype", help="inference: the KV cache's dtype (default: 16-bit, fp8 for fp8 models)")
    parser.add_argument("--lora-rank", type=int, default=16, help="LoRA rank on every linear layer (default 16)")
    parser.add_argument(
        "--no-checkpointing", dest="checkpointing", action="store_false", help="training: keep every activation"
    )
    parser.add_argument(
        "--mfu", type=float, default=DEFAULT_MFU, help="training: model FLOPs utilisation (default 0.4)"
    )
    shape = parser.add_argument_group("model shape (default: the known model's, or the nearest known size's)")
    for flag in ("--layers", "--hidden", "--heads", "--kv-heads", "--head-dim", "--intermediate"):
        shape.add_argument(flag, type=int)
    parser.add_argument("--top", type=int, default=15, help="table rows of placements (JSON has all)")
    parser.add_argument("-o", "--output", choices=("table", "json"), default="table")
    pools = parser.add_argument_group("existing pools (optional)")
    pools.add_argument("--kubeconfig", help="read the cluster's ComputePools (or $KUBECONFIG, in-cluster)")
    pools.add_argument("--server", metavar="URL", help="an API server URL without authentication")
    pools.add_argument("--pools", metavar="FILE", help="`kubectl get computepools -o yaml` output ('-': stdin)")
    pools.add_argument("--nodes", metavar="FILE", help="`kubectl get nodes -o yaml` snapshot to plan -f POOLS on")
    pools.add_argument("-f", "--filename", action="append", metavar="FILE", help="with --nodes: ComputePool YAML")
    parser.set_defaults(func=run)


def model_config(given: str) -> tuple[dict[str, Any], str]:
    """The parsed config.json `--model-config` names (a path, `-`, or JSON text) and how errors name it."""
    text, label = given, "--model-config JSON"
    if not given.lstrip().startswith("{"):
        label = f"--model-config {given}"
        try:
            text = sys.stdin.read() if given == "-" else Path(given).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            reason = error.strerror if isinstance(error, OSError) and error.strerror else str(error)
            raise InputError(
                "--model-config",
                given,
                f"cannot read it ({reason}): a path to a config.json, '-' for stdin, or the JSON text itself",
            ) from None
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as error:
        raise InputError(label, _short(text), f"not JSON ({error}): a Hugging Face config.json") from None
    if not isinstance(parsed, dict):
        raise InputError(label, type(parsed).__name__, "a JSON object (the contents of config.json)")
    return parsed, label


def _short(text: str) -> str:
    text = text.strip()
    return text if len(text) <= 40 else text[:40] + "..."


def arguments(args: argparse.Namespace) -> Arguments:
    config, label = model_config(args.model_config) if args.model_config is not None else (None, "--model-config")
    return Arguments(
        model=args.model,
        dtype=args.dtype,
        workload=args.workload,
        context=args.context,
        batch=args.batch,
        kv_dtype=args.kv_dtype,
        lora_rank=args.lora_rank,
        checkpointing=args.checkpointing,
        layers=args.layers,
        hidden=args.hidden,
        heads=args.heads,
        kv_heads=args.kv_heads,
        head_dim=args.head_dim,
        intermediate=args.intermediate,
        model_config=config,
        model_config_label=label,
    )


def run(args: argparse.Namespace) -> int:
    try:
        sized = estimate(request(arguments(args)))
        mfu = parse_mfu(args.mfu)
    except InputError as bad:
        print(f"error: {bad}", file=sys.stderr)
        return 2
    found, unfit = placements(sized, mfu=mfu)
    errors: list[str] = []
    pools, capacity = _pools(args, errors)
    if errors:
        for line in errors:
            print(f"error: {line}", file=sys.stderr)
        return 2
    fits = None if pools is None else [f for f in (fit_pool(sized, units) for units in pools) if f is not None]
    if args.output == "json":
        print(json.dumps(document(sized, found, unfit, fits, capacity), indent=2))
    else:
        print(table(sized, found, unfit, fits, capacity, max(args.top, 1)))
    return 0


Units = list[list[PoolUnits]]
"""Per pool, the units of each resource it offers."""


def _pools(args: argparse.Namespace, errors: list[str]) -> tuple[Units | None, str]:
    """Each pool's units (`pools.pool_units`) from the chosen source, and whether they are healthy or planned."""
    if args.nodes is not None:
        if not args.filename:
            errors.append("--nodes needs -f POOLS: the ComputePools to plan on the snapshot")
            return None, "planned"
        return _planned(args.nodes, args.filename, errors), "planned"
    if args.filename:
        errors.append("-f POOLS goes with --nodes FILE (a snapshot to plan them on); for pools with status use --pools")
        return None, "healthy"
    if args.pools is not None:
        bodies = [o.body for o in _objects([args.pools], "ComputePool", errors)]
        return _healthy(bodies, errors), "healthy"
    if args.kubeconfig is None and args.server is None:
        return None, "healthy"
    try:
        bodies = asyncio.run(_cluster_pools(args))
    except (ApiError, OSError, ValueError) as error:
        errors.append(f"cannot read the cluster: {error}")
        return None, "healthy"
    return _healthy(bodies, errors), "healthy"


async def _cluster_pools(args: argparse.Namespace) -> list[Mapping[str, Any]]:
    async with KubeClient(Credentials.discover(args.kubeconfig, args.server)) as client:
        try:
            return list(await client.list(POOLS_PATH))
        except NotFoundError:
            return []


def _healthy(bodies: Sequence[Mapping[str, Any]], errors: list[str]) -> Units:
    """Valid pools' units, counted from `status.capacity.resources`."""
    found: Units = []
    for body in bodies:
        record = inputs.PoolRecord.from_body(body)
        spec, problems = inputs.validate(record.spec)
        if spec is None:
            errors.append(f"ComputePool {record.name}: {'; '.join(problems)}")
            continue
        status = api.read_status(record.status)
        resources = dict(status.capacity.resources) if status is not None else {}
        if not resources:
            resources = planned_resources(spec, 0)
        found.append(pool_units(record.name, spec, resources, devices_per_node(spec, status)))
    return found


def _planned(nodes_file: str, pool_files: list[str], errors: list[str]) -> Units:
    """Plan the pools on the snapshot as `accelpool plan` does; units from their planned members."""
    pools = []
    for obj in _objects(pool_files, "ComputePool", errors):
        pools.append(inputs.pool_from_file(obj.body))
    nodes = read_nodes(nodes_file, errors)
    if errors:
        return []
    result = plan(pools, nodes, ConfigState(), PlannerOptions(now=datetime.now(UTC), karpenter_available=True))
    found: Units = []
    for pool in result.pools:
        if pool.spec is None or pool.status is None:
            continue
        gpus = member_devices(pool.status.capacity)
        per_node = gpus // len(pool.members) if pool.members else devices_per_node(pool.spec, None)
        found.append(pool_units(pool.name, pool.spec, planned_resources(pool.spec, gpus), per_node))
    return found


def _objects(names: list[str], kind: str, errors: list[str]) -> list[Any]:
    """The objects of `kind` in the files (a Node snapshot may omit `kind`); shape problems go to `errors`."""
    read = read_objects(names)
    errors += read.errors
    chosen = []
    for obj in read.objects:
        shape = shapes.object_problems(obj.body)
        if shape:
            errors += [obj.problem(p.path, p.message, p.value) for p in shape]
        elif obj.body.get("kind", "Node") == kind:
            chosen.append(obj)
    return chosen
