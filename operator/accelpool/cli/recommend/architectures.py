"""Model shapes for the memory model: built-in models and Llama-style defaults by size.

The KV cache and the activations depend on a model's shape, not only its parameter count, so
each size is paired with an `Architecture`. Built-in models are the fields of the `config.json`
Meta publishes on Hugging Face for each checkpoint, read by `hfconfig` as a user's
`--model-config` is; their parameters are counted from the shape (`shape.count_params`), which
gives each checkpoint's exact total. A bare size (`13B`) takes the shape of the built-in model
nearest to it in parameter count (by ratio), and every field can be overridden from the command line.

Declarative data and pure lookups; no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import replace
from typing import Any

from accelpool.cli.recommend.hfconfig import read
from accelpool.cli.recommend.shape import Architecture as Architecture

LLAMA_SOURCE = "huggingface.co/meta-llama/{repo}/blob/main/config.json"


def _llama(
    name: str, repo: str, layers: int, hidden: int, heads: int, intermediate: int, tied: bool, **extra: Any
) -> Architecture:
    """A Llama 3.x config.json's shape fields: every size has 8 KV heads and a 128,256-token vocabulary."""
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "intermediate_size": intermediate,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": 8,
        "vocab_size": 128256,
        "max_position_embeddings": 131072,
        "tie_word_embeddings": tied,
        **extra,
    }
    return read(config, name, LLAMA_SOURCE.format(repo=repo))


KNOWN_MODELS: tuple[Architecture, ...] = (
    _llama("llama-3.2-1b", "Llama-3.2-1B", 16, 2048, 32, 8192, True, head_dim=64),
    _llama("llama-3.2-3b", "Llama-3.2-3B", 28, 3072, 24, 8192, True, head_dim=128),
    _llama("llama-3.1-8b", "Llama-3.1-8B", 32, 4096, 32, 14336, False),
    _llama("llama-3.1-70b", "Llama-3.1-70B", 80, 8192, 64, 28672, False),
    _llama("llama-3.1-405b", "Llama-3.1-405B", 126, 16384, 128, 53248, False),
)
"""Llama 3.x configs. Llama 3 and 3.3 70B, and Llama 3 8B, share the 3.1 shapes (aliases below)."""

ALIASES = {
    "llama-3-8b": "llama-3.1-8b",
    "llama-3-70b": "llama-3.1-70b",
    "llama-3.3-70b": "llama-3.1-70b",
}

_BY_NAME = {a.name: a for a in KNOWN_MODELS}


def known_model(name: str) -> Architecture | None:
    """A known model by name, case-insensitive, `-instruct` and `meta-` spellings accepted."""
    key = re.sub(r"[\s_]+", "-", name.strip().lower()).removeprefix("meta-").removesuffix("-instruct")
    key = ALIASES.get(key, key)
    return _BY_NAME.get(key)


def nearest_shape(params: float) -> Architecture:
    """The shape for a bare size: the known model nearest by parameter ratio, with `params` set."""
    nearest = min(KNOWN_MODELS, key=lambda a: abs(math.log(params / a.params)))
    return replace(
        nearest,
        name=f"{params / 1e9:g}B",
        params=params,
        counted=False,
        source=f"shape of {nearest.name}, the known model nearest in size ({nearest.source})",
    )


def known_names() -> list[str]:
    return [a.name for a in KNOWN_MODELS]
