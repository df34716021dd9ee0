"""The memory model: what a workload needs in accelerator memory, term by term.

Every term is in bytes; `P` is the parameter count, `T` the trainable (LoRA adapter) count, `s`
the context (sequence) length, `b` the batch (inference) or micro-batch per device (training),
`L`, `h` the layers and hidden size, `n_kv x d_head` the KV width. Sources: [tm101] EleutherAI,
"Transformer Math 101", https://blog.eleuther.ai/transformer-math/; [hf31] Hugging Face, "Llama
3.1", https://huggingface.co/blog/llama31; [zero] arXiv:1910.02054; [vllm] arXiv:2309.06180;
[act] arXiv:2205.05198; [qlora] arXiv:2305.14314. The tests check the figures quoted here.

- **weights** `P x w`, w the bytes of one weight in the chosen dtype: fp32 4, fp16/bf16 2,
  fp8/int8 1, int4 0.5 ([tm101] *Inference*; [hf31] *Inference Memory Requirements*: 8B → 16/8/4 GB,
  70B → 140/70/35 GB, 405B → 810/405/203 GB at 16/8/4 bits). Quantisation scales (one per 64-128
  weights) are left out (< 3%).
- **KV cache** (inference) `2 x L x n_kv x d_head x k x s x b`, k the KV cache's bytes per value
  (the model's 16-bit dtype, 1 for fp8, or `--kv-dtype`): a key and a value per layer per token
  ([vllm] §2; the same formula in [hf31], whose table gives 8B 15.62 GiB and 70B 39.06 GiB for
  128k tokens; its 405B row doubles the formula for the 8 KV heads of Meta's config.json, which
  we follow). With latent attention (DeepSeek) `L x (r_kv + d_rope) x k x s x b` (`shape`).
- **gradients**, **optimizer** (full fine-tune and pre-training: mixed-precision Adam, [zero] §3.1):
  16-bit weights 2P, 16-bit gradients 2P, and 12P of optimizer state: the fp32 master weights 4P
  plus Adam's two fp32 moments 8P: 16 bytes a parameter (the paper's 7.5B model needs 120 GB). In
  fp32: weights 4P, gradients 4P, moments 8P, also 16P.
- **LoRA** (and QLoRA: LoRA over a 4-bit base, [qlora]): the base is frozen at its
  dtype (`P x w`); the adapters, rank r on every linear layer (PEFT's `all-linear`), train in fp32
  with Adam: adapter weights 4T, gradients 4T, moments 8T, where each adapted matrix adds
  `r x (d_in + d_out)`: `T = r x L x ((h+q) + 2(h+kv) + (q+h) + 2(h+i) + (i+h))` for q, k, v, o,
  gate, up and down (q = heads x d_head, kv = n_kv x d_head, i the MLP's intermediate size); a
  mixture of experts adapts every expert's and shared expert's gate, up and down (`shape.lora_params`).
- **activations** (training), kept per device for one micro-batch, 16-bit ([act] §4, quoted in
  [tm101] *Activations and Batch Size*): with full activation checkpointing each layer keeps only its input,
  `2 x s x b x h x L`; without, `34 x s x b x h x L` (attention scores not stored, as with
  FlashAttention: the paper's selective-recomputation figure). fp32 doubles both.
- **overhead** per device: the CUDA context, cuBLAS/NCCL workspaces and the framework, 1 GiB
  (PyTorch's context alone takes 0.3-2 GiB). Placement (`accelpool.cli.recommend.fit`) also keeps 10% of
  each device free for allocator fragmentation, as vLLM's default `gpu_memory_utilization=0.9`.

Compute per token: 2P FLOPs for inference (forward), 6P for full fine-tuning and pre-training
(forward 2P + backward 4P, [tm101] *Compute Requirements*), 4P for LoRA (the
backward pass computes activation gradients through the frozen base but no weight gradients).
For a mixture of experts P is the active parameters (`Architecture.active_params`): a token runs
through k of E experts. Memory holds every expert; a decode step reads the active weights of each
sequence of the batch, at most all of them (`min(P_total, b x P_active)`).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from accelpool.cli.recommend.architectures import Architecture
from accelpool.cli.recommend.shape import lora_params as lora_params

GiB = 2**30
OVERHEAD_BYTES = 1 * GiB
"""Per device: CUDA context, library workspaces and framework."""
ADAM_MIXED_BYTES = 16
"""Bytes per trained parameter under mixed-precision Adam (ZeRO §3.1: 2 + 2 + 12)."""
DEFAULT_LORA_RANK = 16


class Workload(enum.StrEnum):
    INFERENCE = "inference"
    LORA = "lora"
    FULL = "full"
    PRETRAIN = "pretrain"


WORKLOAD_ALIASES = {
    "inference": Workload.INFERENCE,
    "serve": Workload.INFERENCE,
    "serving": Workload.INFERENCE,
    "lora": Workload.LORA,
    "qlora": Workload.LORA,
    "full": Workload.FULL,
    "fine-tune": Workload.FULL,
    "finetune": Workload.FULL,
    "full-fine-tune": Workload.FULL,
    "pretrain": Workload.PRETRAIN,
    "pre-train": Workload.PRETRAIN,
    "pretraining": Workload.PRETRAIN,
    "pre-training": Workload.PRETRAIN,
}


@dataclass(frozen=True)
class Precision:
    """A weight dtype: its bytes per weight, the dtype matmuls run in, and the KV cache's bytes."""

    name: str
    weight_bytes: float
    compute: tuple[str, ...]
    """The dtypes its matmuls can run in, preferred first: the part needs a catalog peak in one of them
    (weight-only int8/int4 dequantise to bf16, or to fp16 on parts without bf16, as GPTQ/AWQ kernels do)."""
    kv_bytes: float
    trainable: bool
    """Full fine-tuning and pre-training can train weights held in it."""


PRECISIONS: dict[str, Precision] = {
    "fp32": Precision("fp32", 4, ("fp32",), 4, True),
    "fp16": Precision("fp16", 2, ("fp16",), 2, True),
    "bf16": Precision("bf16", 2, ("bf16",), 2, True),
    "fp8": Precision("fp8", 1, ("fp8",), 1, False),
    "int8": Precision("int8", 1, ("bf16", "fp16"), 2, False),
    "int4": Precision("int4", 0.5, ("bf16", "fp16"), 2, False),
}
PRECISION_ALIASES = {
    "float32": "fp32",
    "float16": "fp16",
    "half": "fp16",
    "bfloat16": "bf16",
    "float8": "fp8",
    "e4m3": "fp8",
    "8bit": "int8",
    "8-bit": "int8",
    "4bit": "int4",
    "4-bit": "int4",
    "nf4": "int4",
    "q4": "int4",
    **{name: name for name in PRECISIONS},
}
KV_DTYPES = {"fp32": 4.0, "fp16": 2.0, "bf16": 2.0, "fp8": 1.0, "int8": 1.0}


class Scope(enum.StrEnum):
    SHARDED = "sharded"
    """Divided among the devices of a placement (tensor parallelism, ZeRO-3/FSDP)."""
    PER_DEVICE = "per-device"
    """Held by every device."""


@dataclass(frozen=True)
class Term:
    name: str
    bytes: float
    formula: str
    scope: Scope


@dataclass(frozen=True)
class Request:
    """What to size: a model, its dtype, the workload and its shape."""

    model: Architecture
    precision: Precision
    workload: Workload
    context: int
    batch: int
    kv_bytes: float | None = None
    """KV cache bytes per value; None: the precision's."""
    lora_rank: int = DEFAULT_LORA_RANK
    checkpointing: bool = True


@dataclass(frozen=True)
class Estimate:
    request: Request
    terms: tuple[Term, ...]
    trainable_params: float
    flops_per_token: float
    bytes_per_step: float
    """Inference: bytes read from memory per decode step (weights + the batch's KV cache)."""

    @property
    def total_bytes(self) -> float:
        """All terms on a single device."""
        return sum(t.bytes for t in self.terms)

    def term(self, name: str) -> float:
        return sum(t.bytes for t in self.terms if t.name == name)

    def bytes_per_device(self, devices: int) -> float:
        """Each device's share over `devices`: sharded terms divided, per-device terms whole."""
        sharded = sum(t.bytes for t in self.terms if t.scope is Scope.SHARDED)
        return sharded / devices + sum(t.bytes for t in self.terms if t.scope is Scope.PER_DEVICE)


def kv_cache_bytes(model: Architecture, kv_bytes: float, context: int, batch: int) -> float:
    """`2 x L x n_kv x d_head x k x s x b` (latent attention: `L x (r_kv + d_rope) x k x s x b`)."""
    return model.layers * model.kv_values_per_layer * kv_bytes * context * batch


def activation_bytes(request: Request) -> float:
    """Korthikanti et al. §4: 2·sbhL with full checkpointing, 34·sbhL without (16-bit; fp32 doubles)."""
    m = request.model
    factor = 2 if request.checkpointing else 34
    scale = 2 if request.precision.name == "fp32" else 1
    return factor * scale * request.context * request.batch * m.hidden * m.layers


def estimate(request: Request) -> Estimate:
    """Every memory term of `request`, with its formula, and the compute per token."""
    if request.workload is Workload.INFERENCE:
        return _inference(request)
    if request.workload is Workload.LORA:
        return _lora(request)
    return _full_training(request)


def _weights(request: Request) -> Term:
    p, w = request.model.params, request.precision.weight_bytes
    active = request.model.active_params
    count = f"{_n(p)} params" + (f" ({_n(active)} active)" if active < p else "")
    return Term("weights", p * w, f"{count} x {w:g} B ({request.precision.name})", Scope.SHARDED)


def _overhead() -> Term:
    return Term("overhead", OVERHEAD_BYTES, "CUDA context, workspaces, framework: 1 GiB per device", Scope.PER_DEVICE)


def _inference(request: Request) -> Estimate:
    m = request.model
    k = request.kv_bytes if request.kv_bytes is not None else request.precision.kv_bytes
    kv = kv_cache_bytes(m, k, request.context, request.batch)
    weights = _weights(request)
    if m.latent is None:
        per_token = f"2 x {m.layers} layers x {m.kv_heads}x{m.head_dim}"
    else:
        per_token = f"{m.layers} layers x ({m.latent.kv_rank}+{m.latent.rope_dim}) latent"
    formula = f"{per_token} x {k:g} B x {request.context} tokens x {request.batch}"
    kv_term = Term("kv_cache", kv, formula, Scope.SHARDED)
    weights_read = min(m.params, request.batch * m.active_params) * request.precision.weight_bytes
    return Estimate(request, (weights, kv_term, _overhead()), 0.0, 2 * m.active_params, weights_read + kv)


def _activations(request: Request) -> Term:
    m = request.model
    factor = "2" if request.checkpointing else "34"
    how = "checkpointed" if request.checkpointing else "no checkpointing"
    formula = f"{factor} x {request.context} x {request.batch} x {m.hidden} x {m.layers} layers ({how})"
    return Term("activations", activation_bytes(request), formula, Scope.PER_DEVICE)


def _lora(request: Request) -> Estimate:
    m = request.model
    t = lora_params(m, request.lora_rank)
    base = _weights(request)
    weights = Term(
        "weights",
        base.bytes + 4 * t,
        f"{base.formula} + {_n(t)} adapter params x 4 B (r={request.lora_rank})",
        Scope.SHARDED,
    )
    terms = (
        weights,
        Term("gradients", 4 * t, f"{_n(t)} adapter params x 4 B", Scope.SHARDED),
        Term("optimizer", 8 * t, f"{_n(t)} adapter params x 8 B (Adam moments, fp32)", Scope.SHARDED),
        _activations(request),
        _overhead(),
    )
    return Estimate(request, terms, t, 4 * m.active_params, 0.0)


def _full_training(request: Request) -> Estimate:
    p, w = request.model.params, request.precision.weight_bytes
    optimizer = ADAM_MIXED_BYTES - 2 * w
    states = "Adam moments, fp32" if w == 4 else "fp32 master + Adam moments"
    terms = (
        _weights(request),
        Term("gradients", p * w, f"{_n(p)} params x {w:g} B", Scope.SHARDED),
        Term("optimizer", p * optimizer, f"{_n(p)} params x {optimizer:g} B ({states})", Scope.SHARDED),
        _activations(request),
        _overhead(),
    )
    return Estimate(request, terms, p, 6 * request.model.active_params, 0.0)


def _n(count: float) -> str:
    """1.2e9 → `1.2B`, 4.2e7 → `42M`."""
    if count >= 1e9:
        return f"{count / 1e9:.3g}B"
    return f"{count / 1e6:.3g}M"
