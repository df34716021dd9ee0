"""`accelpool recommend`'s output: the table and the JSON document (a stable interface).

The JSON document (`document`), every size in GiB (2^30 bytes) unless named `…Bytes`:

    {"model": {"name", "params", "activeParams", "layers", "hidden", "heads", "kvHeads", "headDim",
               "intermediate", "vocab", "tiedEmbeddings", "maxPositions", "source",
               "experts": null | {"routed", "perToken", "intermediate", "sharedIntermediate", "denseLayers"},
               "latentAttention": null | {"kvRank", "qRank", "nopeDim", "ropeDim", "vDim"}},
     "request": {"workload", "dtype", "context", "batch", "kvBytesPerValue", "loraRank", "checkpointing",
                 "trainableParams", "flopsPerToken"},
     "memory": {"terms": [{"name", "bytes", "GiB", "formula", "scope": "sharded" | "per-device"}],
                "totalBytes", "totalGiB"},
     "placements": [{"rank", "accelerator", "kind": "devices" | "mig" | "time-sliced", "devices", "nodes",
                     "migProfile", "shares", "unitGiB", "needGiBPerUnit", "allocatedGiB",
                     "tokensPerSecond", "basis"}],
     "leftOut": [{"accelerator", "why"}],
     "doesNotFit": [{"accelerator", "why"}],
     "pools": [{"name", "accelerator", "resource", "fits", "replicas", "unitsPerReplica", "available",
                "needGiB", "unitGiB", "why", "capacity": "healthy" | "planned"}]}

`pools` is present only when pools were read (a cluster, `--pools` or `--nodes`). Terms are the
workload's whole need; `needGiBPerUnit` is one device's (or slice's, or share's) part of it.
`leftOut` are the accelerators that cannot run the request at all (no mode in its dtype, or
inference-only for a training workload); `doesNotFit` those whose memory cannot hold it. `vocab` is
0 and `activeParams` equals `params` for a bare size (its shape borrowed, its count as given).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from accelpool.cli.recommend.fit import Placement, Reason, Unfit
from accelpool.cli.recommend.memory import Estimate, GiB, Workload
from accelpool.cli.recommend.pools import PoolFit
from accelpool_core.textio import format_table


def gib(value: float) -> float:
    return round(value / GiB, 2)


def document(
    estimate: Estimate,
    found: Sequence[Placement],
    unfit: Sequence[Unfit],
    pools: Sequence[PoolFit] | None,
    capacity: str,
) -> dict[str, Any]:
    request, model = estimate.request, estimate.request.model
    kv = request.kv_bytes if request.kv_bytes is not None else request.precision.kv_bytes
    out: dict[str, Any] = {
        "model": {
            "name": model.name,
            "params": model.params,
            "activeParams": model.active_params,
            "layers": model.layers,
            "hidden": model.hidden,
            "heads": model.heads,
            "kvHeads": model.kv_heads,
            "headDim": model.head_dim,
            "intermediate": model.intermediate,
            "vocab": model.vocab if model.counted else 0,
            "tiedEmbeddings": model.tied,
            "maxPositions": model.max_positions,
            "experts": None
            if model.experts is None
            else {
                "routed": model.experts.routed,
                "perToken": model.experts.per_token,
                "intermediate": model.experts.intermediate,
                "sharedIntermediate": model.experts.shared_intermediate,
                "denseLayers": model.experts.dense_layers,
            },
            "latentAttention": None
            if model.latent is None
            else {
                "kvRank": model.latent.kv_rank,
                "qRank": model.latent.q_rank,
                "nopeDim": model.latent.nope_dim,
                "ropeDim": model.latent.rope_dim,
                "vDim": model.latent.v_dim,
            },
            "source": model.source,
        },
        "request": {
            "workload": request.workload.value,
            "dtype": request.precision.name,
            "context": request.context,
            "batch": request.batch,
            "kvBytesPerValue": kv if request.workload is Workload.INFERENCE else None,
            "loraRank": request.lora_rank if request.workload is Workload.LORA else None,
            "checkpointing": request.checkpointing if request.workload is not Workload.INFERENCE else None,
            "trainableParams": estimate.trainable_params,
            "flopsPerToken": estimate.flops_per_token,
        },
        "memory": {
            "terms": [
                {"name": t.name, "bytes": t.bytes, "GiB": gib(t.bytes), "formula": t.formula, "scope": t.scope.value}
                for t in estimate.terms
            ],
            "totalBytes": estimate.total_bytes,
            "totalGiB": gib(estimate.total_bytes),
        },
        "placements": [
            {
                "rank": i,
                "accelerator": p.accelerator.name,
                "kind": p.kind.value,
                "devices": p.devices,
                "nodes": p.nodes,
                "migProfile": p.mig_profile,
                "shares": p.shares,
                "unitGiB": gib(p.unit_bytes),
                "needGiBPerUnit": gib(p.need_bytes),
                "allocatedGiB": gib(p.allocated_bytes),
                "tokensPerSecond": round(p.tokens_per_second, 1),
                "basis": p.basis,
            }
            for i, p in enumerate(found, start=1)
        ],
        "leftOut": [{"accelerator": u.accelerator.name, "why": u.why} for u in unfit if u.reason is Reason.UNSUPPORTED],
        "doesNotFit": [{"accelerator": u.accelerator.name, "why": u.why} for u in unfit if u.reason is Reason.MEMORY],
    }
    if pools is not None:
        out["pools"] = [
            {
                "name": f.pool,
                "accelerator": f.accelerator,
                "resource": f.resource,
                "fits": f.fits,
                "replicas": f.replicas,
                "unitsPerReplica": f.units_per_replica,
                "available": f.available,
                "needGiB": gib(f.need_bytes),
                "unitGiB": gib(f.unit_bytes),
                "why": f.why,
                "capacity": capacity,
            }
            for f in pools
        ]
    return out


def table(
    estimate: Estimate,
    found: Sequence[Placement],
    unfit: Sequence[Unfit],
    pools: Sequence[PoolFit] | None,
    capacity: str,
    top: int,
) -> str:
    request, model = estimate.request, estimate.request.model
    experts = ""
    if model.experts is not None:
        e = model.experts
        experts = f"{model.active_params / 1e9:.3g}B active, {e.routed} experts / {e.per_token} per token, "
    head = (
        f"{model.name} ({model.params / 1e9:.3g}B params, {experts}{model.layers} layers, hidden {model.hidden}, "
        f"{model.heads} heads / {model.kv_heads} KV heads), {request.precision.name}, {_workload(estimate)}"
    )
    memory_rows = [("TERM", "GiB", "SCOPE", "FORMULA")]
    memory_rows += [(t.name, f"{t.bytes / GiB:,.1f}", t.scope.value, t.formula) for t in estimate.terms]
    memory_rows.append(("total", f"{estimate.total_bytes / GiB:,.1f}", "", "on one device"))
    speed = "TOKENS/S" if request.workload is Workload.INFERENCE else "TRAIN TOKENS/S"
    fit_rows = [("#", "ACCELERATOR", "COUNT", "PER UNIT GiB", "TAKES GiB", speed, "BASIS")]
    for i, p in enumerate(found[:top], start=1):
        fit_rows.append(
            (
                str(i),
                p.accelerator.name,
                p.label,
                f"{p.need_bytes / GiB:,.1f} of {p.unit_bytes / GiB:,.0f}",
                f"{p.allocated_bytes / GiB:,.0f}",
                f"{p.tokens_per_second:,.0f}",
                p.basis,
            )
        )
    lines = [head, f"  shape: {model.source}", "", format_table(memory_rows), ""]
    lines.append(format_table(fit_rows) if found else "Nothing in the catalog holds it.")
    if len(found) > top:
        lines.append(f"(+{len(found) - top} more placements: --top {len(found)} or -o json)")
    left_out = _grouped(u for u in unfit if u.reason is Reason.UNSUPPORTED)
    if left_out:
        lines += ["", "Left out: " + left_out]
    too_small = [u for u in unfit if u.reason is Reason.MEMORY]
    if too_small:
        lines += ["", "Does not fit: " + "; ".join(f"{u.accelerator.name} ({u.why})" for u in too_small)]
    if pools is not None:
        lines += ["", _pool_table(pools, capacity)]
    return "\n".join(lines)


def _grouped(unfit: Iterable[Unfit]) -> str:
    """`T4, V100-16GB (no bf16 mode ...); Inferentia2 (inference only ...)`: one group per reason."""
    groups: dict[str, list[str]] = {}
    for u in unfit:
        groups.setdefault(u.why, []).append(u.accelerator.name)
    return "; ".join(f"{', '.join(names)} ({why})" for why, names in groups.items())


def _workload(estimate: Estimate) -> str:
    r = estimate.request
    if r.workload is Workload.INFERENCE:
        return f"inference, context {r.context}, batch {r.batch}"
    checkpoint = "activation checkpointing" if r.checkpointing else "no activation checkpointing"
    lora = (
        f", rank {r.lora_rank} ({estimate.trainable_params / 1e6:,.1f}M trainable)"
        if r.workload is Workload.LORA
        else ""
    )
    return f"{r.workload.value}{lora}, sequence {r.context}, micro-batch {r.batch} per device, {checkpoint}"


def _pool_table(pools: Sequence[PoolFit], capacity: str) -> str:
    if not pools:
        return "No ComputePools found."
    rows = [("POOL", "ACCELERATOR", "RESOURCE", "FITS", "REPLICAS", f"{capacity.upper()} UNITS", "PER REPLICA", "WHY")]
    for f in sorted(pools, key=lambda f: (not f.fits, -f.replicas, f.pool)):
        rows.append(
            (
                f.pool,
                f.accelerator,
                f.resource,
                "yes" if f.fits else "no",
                str(f.replicas),
                str(f.available),
                str(f.units_per_replica) if f.fits else "-",
                f.why or "-",
            )
        )
    return format_table(rows)
