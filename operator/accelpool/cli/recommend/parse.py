"""Reading `accelpool recommend`'s arguments into a `Request`; bad input raises `InputError`
naming the flag, the value and what would be valid."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from accelpool.cli.recommend import hfconfig
from accelpool.cli.recommend.architectures import Architecture, known_model, known_names, nearest_shape
from accelpool.cli.recommend.memory import (
    DEFAULT_LORA_RANK,
    KV_DTYPES,
    PRECISION_ALIASES,
    PRECISIONS,
    WORKLOAD_ALIASES,
    Request,
    Workload,
)

SUFFIXES = {"": 1.0, "k": 1e3, "m": 1e6, "b": 1e9, "t": 1e12}
MAX_PARAMS = 1e14
DEFAULT_CONTEXT = {Workload.INFERENCE: 8192}
TRAINING_CONTEXT = 4096


class InputError(ValueError):
    def __init__(self, flag: str, value: object, valid: str) -> None:
        self.flag = flag
        super().__init__(f"{flag} {value!r}: {valid}")


@dataclass(frozen=True)
class Arguments:
    """The command line's values, as given (None where left out)."""

    model: str | None
    """A size or a known model; with `model_config`, only the name to show (None: the config's)."""
    dtype: str | None = None
    """None: bf16, or int4 for QLoRA."""
    workload: str = "inference"
    context: int | None = None
    batch: int = 1
    kv_dtype: str | None = None
    lora_rank: int = DEFAULT_LORA_RANK
    checkpointing: bool = True
    layers: int | None = None
    hidden: int | None = None
    heads: int | None = None
    kv_heads: int | None = None
    head_dim: int | None = None
    intermediate: int | None = None
    model_config: Mapping[str, Any] | None = None
    """A parsed config.json (`--model-config`), read by `hfconfig`."""
    model_config_label: str = "--model-config"
    """How errors name it: `--model-config PATH`, or `--model-config JSON`."""


def parse_size(text: str) -> float:
    """`8B`, `70b`, `1.5e9`, `405000M`, `8` (billions when no suffix and below 10,000) → parameters."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?(?:e\d+)?)\s*([kmbt]?)\s*", text.lower())
    if not match:
        raise InputError(
            "MODEL",
            text,
            f"a size like 8B, 70B, 1.5e9 or 405000M, or a known model: {', '.join(known_names())} "
            "(any other: --model-config PATH|JSON, its config.json)",
        )
    value = float(match.group(1)) * SUFFIXES[match.group(2)]
    if not match.group(2) and value < 1e4:
        value *= 1e9
    if not 1e6 <= value <= MAX_PARAMS:
        raise InputError("MODEL", text, "between 1M and 100T parameters")
    return value


def base_shape(args: Arguments) -> Architecture:
    """The config's shape, the known model named, or the nearest shape for a size."""
    if args.model_config is not None:
        try:
            return hfconfig.read(args.model_config, args.model, _config_source(args))
        except hfconfig.ConfigError as bad:
            raise InputError(f"{args.model_config_label}: {bad.field}", bad.value, bad.valid) from None
    if args.model is None:
        raise InputError("MODEL", "", "a size (8B), a known model, or --model-config PATH|JSON (a config.json)")
    return known_model(args.model) or nearest_shape(parse_size(args.model))


def _config_source(args: Arguments) -> str:
    label = args.model_config_label.removeprefix("--model-config").strip()
    return f"config.json {label}" if label else "config.json given as JSON"


def model_shape(args: Arguments) -> Architecture:
    """The base shape (`base_shape`); each given shape flag replaces its field. Parameters counted from
    a config are counted again; a size given stays as given."""
    shape = base_shape(args)
    overrides = {
        "layers": ("--layers", args.layers),
        "hidden": ("--hidden", args.hidden),
        "heads": ("--heads", args.heads),
        "kv_heads": ("--kv-heads", args.kv_heads),
        "head_dim": ("--head-dim", args.head_dim),
        "intermediate": ("--intermediate", args.intermediate),
    }
    changes: dict[str, int] = {}
    for field, (flag, value) in overrides.items():
        if value is not None:
            changes[field] = _positive(flag, value)
    if args.hidden is not None or args.heads is not None:
        changes.setdefault("head_dim", (args.hidden or shape.hidden) // (args.heads or shape.heads) or 1)
    if changes.get("kv_heads", shape.kv_heads) > changes.get("heads", shape.heads):
        raise InputError(
            "--kv-heads", changes.get("kv_heads", shape.kv_heads), "at most --heads (grouped-query attention)"
        )
    if not changes:
        return shape
    flags = ", ".join(overrides[k][0] for k in changes)
    return shape.recounted(**changes, source=f"{shape.source}; overridden: {flags}")


def request(args: Arguments) -> Request:
    """The whole request, every value checked."""
    workload_key = args.workload.strip().lower()
    workload = WORKLOAD_ALIASES.get(workload_key)
    if workload is None:
        raise InputError("--workload", args.workload, "one of inference, lora, qlora, full, pretrain")
    qlora = workload_key == "qlora"
    given = args.dtype if args.dtype is not None else ("int4" if qlora else "bf16")
    dtype = PRECISION_ALIASES.get(given.strip().lower())
    if dtype is None:
        raise InputError(
            "--dtype", args.dtype, f"one of {', '.join(PRECISIONS)} (or 4bit, 8bit, nf4, float16, bfloat16)"
        )
    if qlora and dtype != "int4":
        raise InputError(
            "--dtype", args.dtype, "QLoRA is LoRA over a 4-bit base: int4 (or --workload lora for another dtype)"
        )
    precision = PRECISIONS[dtype]
    if workload in (Workload.FULL, Workload.PRETRAIN) and not precision.trainable:
        raise InputError(
            "--dtype",
            given,
            f"{workload.value} trains every weight: use fp32, fp16 or bf16 (mixed precision); "
            "a quantised base trains adapters only: --workload lora (QLoRA with --dtype int4)",
        )
    kv_bytes = None
    if args.kv_dtype is not None:
        if workload is not Workload.INFERENCE:
            raise InputError("--kv-dtype", args.kv_dtype, "only for --workload inference (training keeps no KV cache)")
        kv_key = PRECISION_ALIASES.get(args.kv_dtype.strip().lower(), args.kv_dtype)
        if kv_key not in KV_DTYPES:
            raise InputError("--kv-dtype", args.kv_dtype, f"one of {', '.join(KV_DTYPES)}")
        kv_bytes = KV_DTYPES[kv_key]
    model = model_shape(args)
    longest = model.max_positions
    if args.context is None:
        context = DEFAULT_CONTEXT.get(workload, TRAINING_CONTEXT)
        context = min(context, longest) if longest else context
    elif longest and args.context > longest:
        raise InputError("--context", args.context, f"at most the model's max_position_embeddings ({longest})")
    else:
        context = args.context
    return Request(
        model=model,
        precision=precision,
        workload=workload,
        context=_positive("--context", context),
        batch=_positive("--batch", args.batch),
        kv_bytes=kv_bytes,
        lora_rank=_positive("--lora-rank", args.lora_rank),
        checkpointing=args.checkpointing,
    )


def _positive(flag: str, value: int) -> int:
    if value < 1:
        raise InputError(flag, value, "a whole number of at least 1")
    return value


def parse_mfu(value: float) -> float:
    if not 0 < value <= 1:
        raise InputError("--mfu", value, "a fraction above 0 and at most 1 (large training runs reach 0.35-0.55)")
    return value
