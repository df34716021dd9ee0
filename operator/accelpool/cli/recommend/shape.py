"""A decoder-only transformer's shape, and what follows from it: its parameters (total, and active per
token for a mixture of experts), its linear layers (for LoRA) and its KV cache per token.

The shape is what a Hugging Face `config.json` states (`accelpool.cli.recommend.hfconfig` reads one);
the counts follow the modelling code of the families it reads (transformers' `modeling_llama.py`,
`modeling_mixtral.py`, `modeling_qwen2_moe.py`, `modeling_deepseek_v2.py`):

- **attention**, per layer: q `h x (n_q x d)`, k and v `h x (n_kv x d)` each, o `(n_q x d) x h`, with
  biases on q, k and v where the family has them (Qwen2). Multi-head latent attention (DeepSeek-V2/V3,
  `kv_lora_rank` set): q `h x n_q(d_nope + d_rope)` (or through a `q_lora_rank` bottleneck with its
  norm), kv down `h x (r_kv + d_rope)`, its norm `r_kv`, kv up `r_kv x n_q(d_nope + d_v)`, o `n_q d_v x h`.
- **MLP**, gated (gate, up and down: SwiGLU/GeGLU): `3 x h x i` per dense layer. A mixture-of-experts
  layer has E routed experts of width `i_moe` (`3 x h x i_moe` each), a router `h x E`, and shared
  experts always on (width `i_shared`; Qwen2-MoE also gates its shared expert, `h x 1`).
- **norms**: two of `h` per layer and a final one; **embeddings** `V x h`, and the output head another
  `V x h` unless tied. Extra per-head norms (Qwen3 q/k norms, Gemma 2's sandwich norms) are left out:
  under 0.01% of any model.
- **active parameters** (a mixture of experts): everything but the routed experts, plus k of the E
  experts of each sparse layer; embeddings and head included (Mixtral's published "12.9B active").
- **KV cache per token**: a key and a value per layer, `2 x n_kv x d`; with latent attention the
  compressed latent and the shared rotary key, `r_kv + d_rope` (what vLLM caches for MLA). Sliding
  windows are not modelled: the figure is the full-attention upper bound.

Pure; no I/O. The bottom layer of `accelpool.cli.recommend`.
"""

from __future__ import annotations

from dataclasses import dataclass, replace


@dataclass(frozen=True)
class Experts:
    """A mixture of experts' MLP, as `num_local_experts`/`num_experts`/`n_routed_experts` and the rest say."""

    routed: int
    """Routed experts per sparse layer (E)."""
    per_token: int
    """`num_experts_per_tok` (k)."""
    intermediate: int
    """Width of one routed expert: `moe_intermediate_size` (Mixtral: `intermediate_size`)."""
    shared_intermediate: int = 0
    """Width of the always-on shared experts together (Qwen2-MoE `shared_expert_intermediate_size`;
    DeepSeek `n_shared_experts x moe_intermediate_size`); 0 without."""
    shared_gate: bool = False
    """Qwen2-MoE's sigmoid gate on its shared expert (`h x 1`)."""
    dense_layers: int = 0
    """Layers with a dense MLP of `intermediate_size` instead (DeepSeek `first_k_dense_replace`,
    Qwen2-MoE `mlp_only_layers` and `decoder_sparse_step`)."""


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention (DeepSeek-V2/V3): keys and values through a rank-`kv_rank` latent."""

    kv_rank: int
    """`kv_lora_rank`."""
    q_rank: int | None
    """`q_lora_rank` (None: q projected directly)."""
    nope_dim: int
    """`qk_nope_head_dim`."""
    rope_dim: int
    """`qk_rope_head_dim`."""
    v_dim: int
    """`v_head_dim`."""


@dataclass(frozen=True)
class Linear:
    """A weight matrix of every layer that has it: `d_in x d_out`, `count` of them in the model."""

    name: str
    d_in: int
    d_out: int
    count: int
    routed: bool = False
    """A routed expert's: a token uses k of E of them."""
    router: bool = False


@dataclass(frozen=True)
class Architecture:
    """A decoder-only transformer's shape, as its `config.json` names the fields."""

    name: str
    params: float
    """Total parameters (embeddings included): counted from the shape (`counted`), or a size given."""
    layers: int
    """`num_hidden_layers`."""
    hidden: int
    """`hidden_size`."""
    heads: int
    """`num_attention_heads`."""
    kv_heads: int
    """`num_key_value_heads` (grouped-query attention: fewer KV heads than query heads)."""
    head_dim: int
    """`head_dim` (hidden / heads unless the config says otherwise, as Gemma's does)."""
    intermediate: int
    """`intermediate_size` of the gated MLP (of the dense layers, in a mixture of experts)."""
    source: str = ""
    """Where the shape comes from: the config's address, or how it was derived."""
    vocab: int = 0
    """`vocab_size` (0: not known, for a bare size's borrowed shape only when it is not counted)."""
    tied: bool = False
    """`tie_word_embeddings`: the output head shares the embedding matrix."""
    max_positions: int | None = None
    """`max_position_embeddings`: the longest context the model takes."""
    experts: Experts | None = None
    latent: Latent | None = None
    qkv_bias: bool = False
    """Biases on q, k and v (Qwen2), or on every attention projection (`attention_bias`)."""
    o_bias: bool = False
    counted: bool = False
    """`params` is counted from this shape (a config); False: a size given, the shape borrowed."""

    @property
    def kv_width(self) -> int:
        """Keys (or values) stored per token per layer: kv_heads x head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def kv_values_per_layer(self) -> int:
        """Values the KV cache holds per token per layer: 2 x kv_heads x head_dim, or the MLA latent."""
        if self.latent is not None:
            return self.latent.kv_rank + self.latent.rope_dim
        return 2 * self.kv_width

    @property
    def q_width(self) -> int:
        """The attention's query width: heads x head_dim (MLA: heads x (nope + rope))."""
        if self.latent is not None:
            return self.heads * (self.latent.nope_dim + self.latent.rope_dim)
        return self.heads * self.head_dim

    @property
    def active_params(self) -> float:
        """Parameters one token uses: all of them for a dense model; see the module docstring for MoE."""
        if self.experts is None or not self.counted:
            return self.params
        return self.params - self._idle_expert_params()

    def _idle_expert_params(self) -> float:
        assert self.experts is not None
        idle = 0.0
        for linear in linears(self):
            if linear.routed:
                idle += linear.d_in * linear.d_out * linear.count * (1 - self.experts.per_token / self.experts.routed)
        return idle

    def recounted(self, **changes: object) -> Architecture:
        """The shape with `changes`, its parameters counted again when they were counted from it."""
        changed = replace(self, **changes)  # type: ignore[arg-type]
        return replace(changed, params=float(count_params(changed))) if changed.counted else changed


def linears(a: Architecture) -> list[Linear]:
    """Every weight matrix of the model's layers (embeddings and head aside), with how many there are."""
    h, n = a.hidden, a.layers
    out: list[Linear] = []
    if a.latent is None:
        out += [
            Linear("q_proj", h, a.heads * a.head_dim, n),
            Linear("k_proj", h, a.kv_width, n),
            Linear("v_proj", h, a.kv_width, n),
            Linear("o_proj", a.heads * a.head_dim, h, n),
        ]
    else:
        m = a.latent
        if m.q_rank is None:
            out.append(Linear("q_proj", h, a.q_width, n))
        else:
            out += [Linear("q_a_proj", h, m.q_rank, n), Linear("q_b_proj", m.q_rank, a.q_width, n)]
        out += [
            Linear("kv_a_proj_with_mqa", h, m.kv_rank + m.rope_dim, n),
            Linear("kv_b_proj", m.kv_rank, a.heads * (m.nope_dim + m.v_dim), n),
            Linear("o_proj", a.heads * m.v_dim, h, n),
        ]
    e = a.experts
    dense = n if e is None else e.dense_layers
    if dense:
        out += [Linear(p, h, a.intermediate, dense) for p in ("gate_proj", "up_proj")]
        out.append(Linear("down_proj", a.intermediate, h, dense))
    if e is not None and n - dense:
        sparse = n - dense
        out += [Linear(f"experts.{p}", h, e.intermediate, sparse * e.routed, routed=True) for p in ("gate", "up")]
        out.append(Linear("experts.down", e.intermediate, h, sparse * e.routed, routed=True))
        out.append(Linear("router", h, e.routed, sparse, router=True))
        if e.shared_intermediate:
            out += [Linear(f"shared.{p}", h, e.shared_intermediate, sparse) for p in ("gate", "up")]
            out.append(Linear("shared.down", e.shared_intermediate, h, sparse))
        if e.shared_gate:
            out.append(Linear("shared_expert_gate", h, 1, sparse, router=True))
    return out


def count_params(a: Architecture) -> int:
    """Total parameters: the linear layers, attention biases and norms, embeddings and the head."""
    weights = sum(linear.d_in * linear.d_out * linear.count for linear in linears(a))
    biases = 0
    if a.qkv_bias:
        biases += a.layers * (a.q_width + 2 * a.kv_width)
    if a.o_bias:
        biases += a.layers * a.hidden
    norms = a.layers * 2 * a.hidden + a.hidden
    if a.latent is not None:
        norms += a.layers * (a.latent.kv_rank + (a.latent.q_rank or 0))
    embeddings = a.vocab * a.hidden * (1 if a.tied else 2)
    return weights + biases + norms + embeddings


def lora_params(a: Architecture, rank: int) -> float:
    """Adapter parameters, rank r on every linear layer but the routers (PEFT's `all-linear`, which
    adapts each expert's projections): r x (d_in + d_out) per matrix."""
    return float(rank * sum((m.d_in + m.d_out) * m.count for m in linears(a) if not m.router))
