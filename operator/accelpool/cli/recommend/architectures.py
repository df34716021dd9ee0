"""Model shapes for the memory model: a table of known models and Llama-style defaults by size.

The KV cache and the activations depend on a model's shape, not only its parameter count, so
each size is paired with an `Architecture`. Known models carry their published configuration
(the `config.json` Meta publishes on Hugging Face for each checkpoint; parameter counts are the
checkpoints' exact totals). A bare size (`13B`) takes the shape of the known model nearest to
it in parameter count (by ratio), and every field can be overridden from the command line.

Declarative data and pure lookups; no I/O.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, replace

LLAMA_SOURCE = "huggingface.co/meta-llama/{repo}/blob/main/config.json"


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape, as its `config.json` names the fields."""

    name: str
    params: float
    """Total parameters (embeddings included)."""
    layers: int
    """`num_hidden_layers`."""
    hidden: int
    """`hidden_size`."""
    heads: int
    """`num_attention_heads`."""
    kv_heads: int
    """`num_key_value_heads` (grouped-query attention: fewer KV heads than query heads)."""
    head_dim: int
    """`head_dim` (hidden / heads for Llama 3)."""
    intermediate: int
    """`intermediate_size` of the SwiGLU MLP."""
    source: str = ""
    """Where the shape comes from: the config's address, or how it was derived."""

    @property
    def kv_width(self) -> int:
        """Keys (or values) stored per token per layer: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim


def _llama(
    name: str, repo: str, params: float, layers: int, hidden: int, heads: int, intermediate: int
) -> Architecture:
    """Every Llama 3.x size has 8 KV heads and head_dim = hidden / heads."""
    return Architecture(
        name=name,
        params=params,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=8,
        head_dim=hidden // heads,
        intermediate=intermediate,
        source=LLAMA_SOURCE.format(repo=repo),
    )


KNOWN_MODELS: tuple[Architecture, ...] = (
    _llama("llama-3.2-1b", "Llama-3.2-1B", 1_235_814_400, 16, 2048, 32, 8192),
    _llama("llama-3.2-3b", "Llama-3.2-3B", 3_212_749_824, 28, 3072, 24, 8192),
    _llama("llama-3.1-8b", "Llama-3.1-8B", 8_030_261_248, 32, 4096, 32, 14336),
    _llama("llama-3.1-70b", "Llama-3.1-70B", 70_553_706_496, 80, 8192, 64, 28672),
    _llama("llama-3.1-405b", "Llama-3.1-405B", 405_853_388_800, 126, 16384, 128, 53248),
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
        source=f"shape of {nearest.name}, the known model nearest in size ({nearest.source})",
    )


def known_names() -> list[str]:
    return [a.name for a in KNOWN_MODELS]
