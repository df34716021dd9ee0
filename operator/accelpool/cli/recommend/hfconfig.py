"""Reading a decoder-only transformer's shape from its Hugging Face `config.json` (already parsed).

Who calls it: `accelpool recommend --model-config PATH|JSON` (through `parse`), and `architectures`
for its built-in models, which are config.json contents too.

The fields read, as transformers' configuration classes name them: `hidden_size`,
`num_hidden_layers`, `num_attention_heads`, `num_key_value_heads` (default: the heads),
`intermediate_size`, `vocab_size`, `tie_word_embeddings` (default: the family's; Gemma ties),
`max_position_embeddings`, `head_dim` (default `hidden_size / num_attention_heads`),
`attention_bias`; a mixture of experts: `num_local_experts` (Mixtral) / `num_experts` (Qwen) /
`n_routed_experts` (DeepSeek), `num_experts_per_tok`, `moe_intermediate_size`,
`shared_expert_intermediate_size` (Qwen2-MoE) or `n_shared_experts` (DeepSeek),
`first_k_dense_replace` and `moe_layer_freq` (DeepSeek), `mlp_only_layers` and
`decoder_sparse_step` (Qwen); latent attention (DeepSeek): `kv_lora_rank`, `q_lora_rank`,
`qk_nope_head_dim`, `qk_rope_head_dim`, `v_head_dim`.

The families read (`model_type`) are those whose modelling code has the shape `shape` counts:
attention, a gated MLP (or experts of gated MLPs) and RMS norms. Anything else is refused with a
`ConfigError` naming the field, its value and what would be valid; no field is guessed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from accelpool.cli.recommend.shape import Architecture, Experts, Latent, count_params

FAMILIES: dict[str, bool] = {
    # model_type -> tie_word_embeddings when the config leaves it out (the configuration class' default)
    "llama": False,
    "mistral": False,
    "mixtral": False,
    "qwen2": False,
    "qwen2_moe": False,
    "qwen3": False,
    "qwen3_moe": False,
    "gemma": True,
    "gemma2": True,
    "phi3": False,
    "deepseek_v2": False,
    "deepseek_v3": False,
}
"""Decoder-only families read, with their `tie_word_embeddings` default."""

QKV_BIAS = {"qwen2", "qwen2_moe"}
"""Families whose q, k and v projections always carry a bias (transformers `modeling_qwen2.py`)."""

ENCODER_DECODER = {"t5", "mt5", "umt5", "bart", "mbart", "marian", "pegasus", "whisper", "encoder-decoder", "longt5"}
ENCODER_ONLY = {"bert", "roberta", "xlm-roberta", "deberta", "deberta-v2", "distilbert", "electra", "albert"}
WHOLE = "a whole number of at least 1"


class ConfigError(ValueError):
    """A config.json that cannot be read as a supported decoder-only transformer: the field, its value,
    and what would be valid."""

    def __init__(self, field: str, value: object, valid: str) -> None:
        self.field = field
        self.value = value
        self.valid = valid
        shown = "missing" if value is MISSING else repr(value)
        super().__init__(f"{field} {shown}: {valid}")


class _Missing:
    def __repr__(self) -> str:
        return "missing"


MISSING: Any = _Missing()


def read(config: object, name: str | None = None, source: str = "") -> Architecture:
    """The shape `config` (a parsed config.json) states, its parameters counted; ConfigError if it cannot."""
    if not isinstance(config, Mapping):
        raise ConfigError("config", type(config).__name__, "a JSON object (the contents of config.json)")
    family = _family(config)
    heads = _whole(config, "num_attention_heads")
    hidden = _whole(config, "hidden_size")
    kv_heads = _whole(config, "num_key_value_heads", heads)
    if heads % kv_heads:
        raise ConfigError("num_key_value_heads", kv_heads, f"a divisor of num_attention_heads ({heads})")
    layers = _whole(config, "num_hidden_layers")
    head_dim = _whole(config, "head_dim", None) or hidden // heads
    tied = config.get("tie_word_embeddings", FAMILIES[family])
    if not isinstance(tied, bool):
        raise ConfigError("tie_word_embeddings", tied, "true or false")
    experts = _experts(config, layers)
    needs_dense = experts is None or experts.dense_layers > 0
    intermediate = _whole(config, "intermediate_size", MISSING if needs_dense else 0)
    if experts is not None and experts.intermediate == 0:
        if not intermediate:
            raise ConfigError("moe_intermediate_size", MISSING, WHOLE + " (one expert's width; or intermediate_size)")
        experts = replace(experts, intermediate=intermediate)
    attention_bias = config.get("attention_bias", False)
    if not isinstance(attention_bias, bool):
        raise ConfigError("attention_bias", attention_bias, "true or false")
    shape = Architecture(
        name=name or _name(config, family),
        params=0.0,
        layers=layers,
        hidden=hidden,
        heads=heads,
        kv_heads=kv_heads,
        head_dim=head_dim,
        intermediate=intermediate,
        source=source,
        vocab=_whole(config, "vocab_size"),
        tied=tied,
        max_positions=_whole(config, "max_position_embeddings", None),
        experts=experts,
        latent=_latent(config),
        qkv_bias=family in QKV_BIAS or attention_bias,
        o_bias=attention_bias,
        counted=True,
    )
    return replace(shape, params=float(count_params(shape)))


def _family(config: Mapping[str, Any]) -> str:
    model_type = config.get("model_type", MISSING)
    supported = f"a decoder-only family: one of {', '.join(FAMILIES)}"
    if config.get("is_encoder_decoder") is True:
        raise ConfigError("is_encoder_decoder", True, f"an encoder-decoder model cannot be sized here; {supported}")
    if not isinstance(model_type, str):
        raise ConfigError("model_type", model_type, supported)
    if model_type in ENCODER_DECODER:
        raise ConfigError("model_type", model_type, f"an encoder-decoder model cannot be sized here; {supported}")
    if model_type in ENCODER_ONLY:
        raise ConfigError("model_type", model_type, f"an encoder-only model cannot be sized here; {supported}")
    if "text_config" in config and model_type not in FAMILIES:
        raise ConfigError(
            "model_type", model_type, f"a multimodal wrapper: pass its text_config object instead; {supported}"
        )
    if model_type not in FAMILIES:
        raise ConfigError("model_type", model_type, supported)
    architectures = config.get("architectures")
    if architectures is not None:
        if not isinstance(architectures, list) or not all(isinstance(a, str) for a in architectures):
            raise ConfigError("architectures", architectures, 'a list of class names, e.g. ["LlamaForCausalLM"]')
        if architectures and not any(a.endswith("ForCausalLM") for a in architectures):
            raise ConfigError("architectures", architectures, "a causal language model (a class named …ForCausalLM)")
    return model_type


def _name(config: Mapping[str, Any], family: str) -> str:
    named = config.get("_name_or_path")
    if isinstance(named, str) and named.strip():
        return named.strip()
    architectures = config.get("architectures")
    if isinstance(architectures, list) and architectures and isinstance(architectures[0], str):
        return architectures[0]
    return family


def _whole(config: Mapping[str, Any], field: str, default: Any = MISSING) -> Any:
    """A whole number of at least 1; `default` where absent or null (MISSING: required)."""
    value = config.get(field)
    if value is None:
        if default is MISSING:
            raise ConfigError(field, MISSING, WHOLE)
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, value, WHOLE)
    return value


def _experts(config: Mapping[str, Any], layers: int) -> Experts | None:
    fields = [f for f in ("num_local_experts", "num_experts", "n_routed_experts") if config.get(f) is not None]
    if not fields:
        return None
    field = fields[0]
    routed = _whole(config, field)
    if routed == 1:
        return None
    per_token = _whole(config, "num_experts_per_tok")
    if per_token > routed:
        raise ConfigError("num_experts_per_tok", per_token, f"at most {field} ({routed})")
    width = _whole(config, "moe_intermediate_size", 0)
    shared = _whole(config, "shared_expert_intermediate_size", 0)
    n_shared = config.get("n_shared_experts")
    if n_shared is not None and not shared:
        if isinstance(n_shared, bool) or not isinstance(n_shared, int) or n_shared < 0:
            raise ConfigError("n_shared_experts", n_shared, "a whole number (0 or more)")
        if n_shared and not width:
            raise ConfigError("moe_intermediate_size", MISSING, WHOLE + " (the width of one shared expert)")
        shared = n_shared * width
    return Experts(
        routed=routed,
        per_token=per_token,
        intermediate=width,
        shared_intermediate=shared,
        shared_gate=config.get("model_type") == "qwen2_moe" and shared > 0,
        dense_layers=_dense_layers(config, layers),
    )


def _dense_layers(config: Mapping[str, Any], layers: int) -> int:
    """Layers with a dense MLP: DeepSeek's first `first_k_dense_replace` and those off `moe_layer_freq`;
    Qwen's `mlp_only_layers` and those off `decoder_sparse_step`."""
    first = config.get("first_k_dense_replace", 0) or 0
    if isinstance(first, bool) or not isinstance(first, int) or not 0 <= first <= layers:
        raise ConfigError("first_k_dense_replace", first, f"a whole number from 0 to num_hidden_layers ({layers})")
    frequency = _whole(config, "moe_layer_freq", 1)
    step = _whole(config, "decoder_sparse_step", 1)
    only = config.get("mlp_only_layers") or []
    if not isinstance(only, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in only):
        raise ConfigError("mlp_only_layers", only, "a list of layer indices")
    sparse = [i >= first and i % frequency == 0 and i not in only and (i + 1) % step == 0 for i in range(layers)]
    return sparse.count(False)


def _latent(config: Mapping[str, Any]) -> Latent | None:
    if config.get("kv_lora_rank") is None:
        return None
    return Latent(
        kv_rank=_whole(config, "kv_lora_rank"),
        q_rank=_whole(config, "q_lora_rank", None),
        nope_dim=_whole(config, "qk_nope_head_dim"),
        rope_dim=_whole(config, "qk_rope_head_dim"),
        v_dim=_whole(config, "v_head_dim"),
    )
