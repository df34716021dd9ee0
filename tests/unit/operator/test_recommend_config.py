"""`--model-config`: shapes read from published Hugging Face config.json files, their parameters
counted and checked against the totals the model makers publish, and bad configs refused by name.

The configs are the shape fields of each checkpoint's config.json on huggingface.co (other keys,
such as rope and token ids, left out: the sizing reads none of them). Published totals and their
tolerances:

- meta-llama/Meta-Llama-3-8B: 8,030,261,248 parameters (the checkpoint's count; Meta's "8B"): exact.
- mistralai/Mistral-7B-v0.1: "7.3B" (mistral.ai, "Announcing Mistral 7B"): within 1% (the post rounds).
- mistralai/Mixtral-8x7B-v0.1: "46.7B total parameters but only uses 12.9B parameters per token"
  (mistral.ai, "Mixtral of experts"): within 0.5%.
- Qwen/Qwen1.5-MoE-A2.7B-Chat: "14.3B parameters in total and 2.7B activated parameters" (model card):
  within 1%.
- deepseek-ai/DeepSeek-V2-Lite: "15.7B total parameters, 2.4B activated" (model card): total within
  0.5%; DeepSeek counts activated parameters without the input embedding (0.21B here), so that is
  taken off ours before comparing, within 3%.
- google/gemma-7b: 7,751,248,896 non-embedding parameters (Gemma technical report, arXiv:2403.08295,
  Table 2): exact. Its embedding row (786,825,216) counts a 256,128-token padded vocabulary; the
  config's is 256,000.

KV cache per token: Llama 3 8B 128 KiB at 16 bits ([hf31] in test_recommend_memory); latent
attention caches `(d_c + d_h^R) x l` values (DeepSeek-V2, arXiv:2405.04434, §2.1.4, Table 1).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from accelpool import cli
from accelpool.cli.recommend import Request, Workload, estimate, known_model
from accelpool.cli.recommend.hfconfig import ConfigError, read
from accelpool.cli.recommend.memory import PRECISIONS, kv_cache_bytes
from accelpool.cli.recommend.shape import lora_params

LLAMA_3_8B: dict[str, Any] = {
    "architectures": ["LlamaForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 8192,
    "model_type": "llama",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "tie_word_embeddings": False,
    "vocab_size": 128256,
}
MISTRAL_7B: dict[str, Any] = {
    "architectures": ["MistralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mistral",
    "num_attention_heads": 32,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "sliding_window": 4096,
    "tie_word_embeddings": False,
    "vocab_size": 32000,
}
MIXTRAL_8X7B: dict[str, Any] = {
    "architectures": ["MixtralForCausalLM"],
    "hidden_size": 4096,
    "intermediate_size": 14336,
    "max_position_embeddings": 32768,
    "model_type": "mixtral",
    "num_attention_heads": 32,
    "num_experts_per_tok": 2,
    "num_hidden_layers": 32,
    "num_key_value_heads": 8,
    "num_local_experts": 8,
    "vocab_size": 32000,
}
QWEN15_MOE_A27B: dict[str, Any] = {
    "architectures": ["Qwen2MoeForCausalLM"],
    "decoder_sparse_step": 1,
    "hidden_size": 2048,
    "intermediate_size": 5632,
    "max_position_embeddings": 32768,
    "model_type": "qwen2_moe",
    "moe_intermediate_size": 1408,
    "num_attention_heads": 16,
    "num_experts": 60,
    "num_experts_per_tok": 4,
    "num_hidden_layers": 24,
    "num_key_value_heads": 16,
    "shared_expert_intermediate_size": 5632,
    "tie_word_embeddings": False,
    "vocab_size": 151936,
}
DEEPSEEK_V2_LITE: dict[str, Any] = {
    "architectures": ["DeepseekV2ForCausalLM"],
    "first_k_dense_replace": 1,
    "hidden_size": 2048,
    "intermediate_size": 10944,
    "kv_lora_rank": 512,
    "max_position_embeddings": 163840,
    "model_type": "deepseek_v2",
    "moe_intermediate_size": 1408,
    "moe_layer_freq": 1,
    "n_routed_experts": 64,
    "n_shared_experts": 2,
    "num_attention_heads": 16,
    "num_experts_per_tok": 6,
    "num_hidden_layers": 27,
    "num_key_value_heads": 16,
    "q_lora_rank": None,
    "qk_nope_head_dim": 128,
    "qk_rope_head_dim": 64,
    "tie_word_embeddings": False,
    "v_head_dim": 128,
    "vocab_size": 102400,
}
GEMMA_7B: dict[str, Any] = {
    "architectures": ["GemmaForCausalLM"],
    "head_dim": 256,
    "hidden_size": 3072,
    "intermediate_size": 24576,
    "max_position_embeddings": 8192,
    "model_type": "gemma",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 16,
    "vocab_size": 256000,
}


def test_llama_3_8b_counts_its_checkpoint_exactly() -> None:
    shape = read(LLAMA_3_8B)
    assert shape.params == 8_030_261_248 and shape.active_params == shape.params
    assert (shape.head_dim, shape.kv_heads, shape.max_positions) == (128, 8, 8192)
    assert kv_cache_bytes(shape, 2, 1, 1) == 128 * 1024


def test_the_built_in_llamas_are_read_as_configs_are() -> None:
    built_in = known_model("llama-3.1-8b")
    assert built_in is not None and built_in.counted and built_in.params == read(LLAMA_3_8B).params
    assert lora_params(built_in, 16) == 41_943_040  # PEFT's count, as test_recommend_memory checks


def test_mistral_7b() -> None:
    assert read(MISTRAL_7B).params / 1e9 == pytest.approx(7.3, rel=0.01)


def test_mixtral_total_and_active() -> None:
    shape = read(MIXTRAL_8X7B)
    assert shape.params / 1e9 == pytest.approx(46.7, rel=0.005)
    assert shape.active_params / 1e9 == pytest.approx(12.9, rel=0.005)
    assert shape.experts is not None and (shape.experts.routed, shape.experts.intermediate) == (8, 14336)


def test_qwen2_moe_with_a_gated_shared_expert() -> None:
    shape = read(QWEN15_MOE_A27B)
    assert shape.params / 1e9 == pytest.approx(14.3, rel=0.01)
    assert shape.active_params / 1e9 == pytest.approx(2.7, rel=0.01)
    assert shape.qkv_bias and shape.experts is not None and shape.experts.shared_gate


def test_deepseek_v2_lite_latent_attention_dense_first_layer_and_shared_experts() -> None:
    shape = read(DEEPSEEK_V2_LITE)
    assert shape.params / 1e9 == pytest.approx(15.7, rel=0.005)
    input_embedding = shape.vocab * shape.hidden
    assert (shape.active_params - input_embedding) / 1e9 == pytest.approx(2.4, rel=0.03)
    assert shape.experts is not None and (shape.experts.dense_layers, shape.experts.shared_intermediate) == (1, 2816)
    assert kv_cache_bytes(shape, 1, 1, 1) == 27 * (512 + 64)


def test_gemma_head_dim_and_implicitly_tied_embeddings() -> None:
    shape = read(GEMMA_7B)
    assert (shape.head_dim, shape.q_width, shape.tied) == (256, 4096, True)
    assert shape.params - shape.vocab * shape.hidden == 7_751_248_896
    assert kv_cache_bytes(shape, 2, 1, 1) == 2 * 28 * 16 * 256 * 2


def test_a_mixture_of_experts_holds_every_expert_and_computes_with_the_active_ones() -> None:
    shape = read(MIXTRAL_8X7B)
    one = estimate(Request(shape, PRECISIONS["bf16"], Workload.INFERENCE, context=4096, batch=1))
    assert one.term("weights") == shape.params * 2
    assert one.terms[0].formula == "46.7B params (12.9B active) x 2 B (bf16)"
    assert one.flops_per_token == 2 * shape.active_params
    assert one.bytes_per_step == shape.active_params * 2 + one.term("kv_cache")
    many = estimate(Request(shape, PRECISIONS["bf16"], Workload.INFERENCE, context=4096, batch=64))
    assert many.bytes_per_step == shape.params * 2 + many.term("kv_cache"), "a big batch reads every expert"
    full = estimate(Request(shape, PRECISIONS["bf16"], Workload.FULL, context=4096, batch=1))
    assert full.flops_per_token == 6 * shape.active_params
    assert lora_params(shape, 16) > lora_params(read(MISTRAL_7B), 16), "every expert is adapted"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}, "model_type 't5': an encoder-decoder"),
        ({"is_encoder_decoder": True}, "is_encoder_decoder True: an encoder-decoder model"),
        ({"model_type": "bert"}, "model_type 'bert': an encoder-only model"),
        ({"model_type": "gpt2"}, "model_type 'gpt2': a decoder-only family: one of llama, mistral"),
        ({"model_type": None}, "model_type missing: a decoder-only family"),
        ({"architectures": ["LlamaForSequenceClassification"]}, "architectures ['LlamaForSequenceClassification']"),
        ({"num_hidden_layers": None}, "num_hidden_layers missing: a whole number of at least 1"),
        ({"hidden_size": 0}, "hidden_size 0: a whole number of at least 1"),
        ({"hidden_size": "4096"}, "hidden_size '4096': a whole number"),
        ({"num_key_value_heads": 5}, "num_key_value_heads 5: a divisor of num_attention_heads (32)"),
        ({"tie_word_embeddings": "no"}, "tie_word_embeddings 'no': true or false"),
        ({"num_local_experts": 8, "num_experts_per_tok": 9}, "num_experts_per_tok 9: at most num_local_experts (8)"),
        ({"num_local_experts": 8}, "num_experts_per_tok missing"),
    ],
)
def test_bad_configs_name_the_field_the_value_and_what_is_valid(change: dict[str, Any], named: str) -> None:
    config = {**LLAMA_3_8B, **change}
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(ConfigError) as raised:
        read(config)
    assert str(raised.value).startswith(named), str(raised.value)


def recommend(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(["recommend", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_the_command_reads_a_config_file_or_its_json(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(MIXTRAL_8X7B))
    code, out, err = recommend(capsys, "--model-config", str(path), "-o", "json")
    assert code == 0, err
    model = json.loads(out)["model"]
    assert model["name"] == "MixtralForCausalLM" and model["source"] == f"config.json {path}"
    assert model["experts"] == {"routed": 8, "perToken": 2, "intermediate": 14336, "sharedIntermediate": 0,
                                "denseLayers": 0}  # fmt: skip
    assert model["activeParams"] / 1e9 == pytest.approx(12.9, rel=0.005)
    code, out, err = recommend(capsys, "mixtral-8x7b", "--model-config", json.dumps(MIXTRAL_8X7B))
    assert code == 0, err
    assert out.startswith("mixtral-8x7b (46.7B params, 12.9B active, 8 experts / 2 per token, 32 layers")


def test_the_models_context_bounds_the_default_and_the_flag(capsys: pytest.CaptureFixture[str]) -> None:
    gemma = json.dumps(GEMMA_7B)
    code, out, err = recommend(capsys, "--model-config", gemma, "-o", "json")
    assert code == 0 and json.loads(out)["request"]["context"] == 8192
    code, out, err = recommend(capsys, "--model-config", gemma, "--context", "32768")
    assert (code, out) == (2, "")
    assert err.startswith("error: --context 32768: at most the model's max_position_embeddings (8192)")


@pytest.mark.parametrize(
    ("given", "named"),
    [
        ("{not json", "error: --model-config JSON '{not json': not JSON (Expecting property name"),
        ('{"model_type": "t5"}', "error: --model-config JSON: model_type 't5': an encoder-decoder model"),
        ("/nonexistent/config.json", "error: --model-config '/nonexistent/config.json': cannot read it"),
        ('{"model_type": "llama"}', "error: --model-config JSON: num_attention_heads missing: a whole number"),
    ],
)
def test_bad_model_configs_are_named(capsys: pytest.CaptureFixture[str], given: str, named: str) -> None:
    code, out, err = recommend(capsys, "--model-config", given)
    assert (code, out) == (2, ""), err
    assert err.startswith(named), err


def test_a_config_file_is_named_in_its_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    path = tmp_path / "t5.json"
    path.write_text(json.dumps({"model_type": "t5", "architectures": ["T5ForConditionalGeneration"]}))
    code, _, err = recommend(capsys, "--model-config", str(path))
    assert code == 2 and err.startswith(f"error: --model-config {path}: model_type 't5': an encoder-decoder")
    code, _, err = recommend(capsys)
    assert code == 2 and err.startswith("error: MODEL '': a size (8B), a known model, or --model-config")
