"""A decoder-only transformer as the engine times it: a
:class:`~accelsim.workload.transformer.TransformerConfig` (GPT, Llama/GQA/SwiGLU/RMSNorm/rotary,
MoE, MLA) at one sequence length, lowered per GPU to the typed ops of
:mod:`accelsim.engine.graph` under a tensor x expert parallel split.

The one lowering, for training (``llm``) and inference (``infer``) alike
(:func:`layer_ops`): per layer and micro-batch of ``T`` tokens

* attention projections: Q, K and V fused into one column-parallel GEMM
  ``(T, (a + 2 kv) d / t, h)`` (Megatron's fused QKV; GQA shrinks K and V), the output
  projection row-parallel ``(T, h, a d_v / t)``; MLA (DeepSeek) as its four projections, the two
  down-projections replicated over the tensor-parallel ranks (Megatron-Core's MLA keeps them
  whole), the two up-projections column-parallel;
* attention: :class:`~accelsim.engine.graph.AttentionOp` over ``a / t`` query heads and
  ``kv / t`` key/value heads (MLA: the mean of its query/key and value head dims, which keeps
  both matmuls' FLOPs exact);
* MLP: fc1 column-parallel ``(T, f / t, h)``, gated MLPs (SwiGLU/GeGLU) with gate and up fused
  ``(T, 2 f / t, h)`` (Megatron's ``gated_linear_unit``), fc2 row-parallel ``(T, h, f / t)``;
* MoE layers: the router ``(T, E, h)`` (replicated), the ``E / ep`` local experts as ``E / ep``
  GEMMs of ``m_e = ceil(ep T k / E)`` tokens each (balanced routing, dropless; a capacity
  factor caps ``m_e`` at the expert capacity), split ``t`` ways like a dense MLP (Megatron-Core's
  default expert tensor parallelism = ``tp``), shared experts as one dense MLP, and the token
  dispatch and combine: two all-to-alls forward and two backward over the expert-parallel
  group of ``T k h / t`` elements per GPU (:func:`a2a_elements`);
* element-wise kernels by their HBM bytes (:func:`elementwise_bytes`);
* the LM head ``(T, V / t, h)`` (vocabulary-parallel).

A GPT model (:class:`~accelsim.workload.gpt.GptConfig`) lowers to exactly the ops the GPT-only
engine timed: the same shapes, in the same order (:meth:`Decoder.from_gpt`).
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from accelsim.arch.model import BLOCK_SCALE_BYTES, OPERAND_BYTES
from accelsim.engine.graph import AttentionOp, ElementwiseOp, GemmOp, attention_precision
from accelsim.engine.stack import FUSED_ELEMENTWISE_BYTES
from accelsim.engine.stages import StageSplit
from accelsim.errors import InputError
from accelsim.workload.gpt import GptConfig
from accelsim.workload.transformer import MlpKind, OpKind, PositionKind, TransformerConfig


@dataclass(frozen=True)
class Decoder:
    """``config`` run at ``seq`` tokens per sequence; ``causal`` masks the future; a
    ``flash_attention`` kernel keeps no score matrix and skips the masked half."""

    config: TransformerConfig
    seq: int
    causal: bool = True
    flash_attention: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.config, TransformerConfig):
            raise InputError(f"Decoder.config must be a TransformerConfig, got {self.config!r}")
        if isinstance(self.seq, bool) or not isinstance(self.seq, int) or self.seq < 1:
            raise InputError(f"sequence length must be an integer >= 1, got {self.seq!r}")
        if self.config.positions is PositionKind.LEARNED and self.seq > self.config.seq:
            raise InputError(f"model {self.config.name!r}: seq {self.seq} exceeds its "
                             f"{self.config.seq} learned positions")

    @classmethod
    def from_gpt(cls, g: GptConfig) -> Decoder:
        return cls(TransformerConfig.from_gpt(g), g.seq, g.causal, g.flash_attention)

    @classmethod
    def of(cls, model: GptConfig | Decoder) -> Decoder:
        """The one conversion at the engine's door."""
        if isinstance(model, Decoder):
            return model
        if isinstance(model, GptConfig):
            return cls.from_gpt(model)
        raise InputError(f"a model must be a GptConfig or a Decoder, got {type(model).__name__}")

    # ---- the dimensions the engine reads -------------------------------------------------
    @property
    def name(self) -> str:
        return self.config.name

    @property
    def layers(self) -> int:
        return self.config.layers

    @property
    def hidden(self) -> int:
        return self.config.hidden

    @property
    def heads(self) -> int:
        return self.config.heads

    @property
    def kv_heads(self) -> int:
        """Key/value heads (MLA: every head has its own keys and values once decompressed)."""
        return self.config.heads if self.config.mla is not None else self.config.kv_heads

    @property
    def vocab(self) -> int:
        return self.config.vocab

    @property
    def ffn_size(self) -> int:
        return self.config.ffn_size

    @property
    def head_dim(self) -> int:
        """The head dim the attention op runs at (MLA: mean of query/key and value dims)."""
        m = self.config.mla
        return self.config.head_dim if m is None else (m.qk_head_dim + m.v_head_dim) // 2

    @property
    def v_head_dim(self) -> int:
        m = self.config.mla
        return self.config.head_dim if m is None else m.v_head_dim

    @property
    def n_positions(self) -> int:
        """Rows of a learned position table (0: rotary or no positions)."""
        return self.config.seq if self.config.positions is PositionKind.LEARNED else 0

    @property
    def n_params(self) -> int:
        return self.config.n_params

    @property
    def n_active_params(self) -> int:
        return self.config.n_active_params

    @property
    def is_moe(self) -> bool:
        return self.config.moe is not None

    @property
    def attention_fraction(self) -> float:
        """Share of the s x s score work the kernel does: a flash kernel its attended pairs
        (causal: the lower triangle with its diagonal; a sliding window: its band), an unfused
        one every score."""
        if self.flash_attention:
            return self.attended_keys / self.seq ** 2
        return 1.0

    @property
    def window(self) -> int:
        """Keys each query attends at most (the config's sliding window; 0: none)."""
        return self.config.sliding_window or 0

    @property
    def alibi(self) -> bool:
        """Whether the attention scores carry ALiBi's bias (the model's positions)."""
        return self.config.positions is PositionKind.ALIBI

    @property
    def attended_keys(self) -> int:
        """Query-key pairs one sequence computes: a kernel that computes the full score matrix
        counts all of them (as Megatron's model FLOPs do)."""
        return self.config.attended_keys(self.seq, causal=self.causal and self.flash_attention)

    def model_flops(self, batch: int) -> float:
        """Forward + backward model FLOPs of ``batch`` sequences (3 x forward, no recompute)."""
        linear, per_key = _flops_terms(self.config)
        return float(3 * batch * (self.seq * linear + self.attended_keys * per_key))

    def attention_flops(self, batch: int) -> float:
        """Forward FLOPs of the attention matmuls of every layer for ``batch`` sequences."""
        return float(batch * self.attended_keys * _flops_terms(self.config)[1])

    def head_flops(self, batch: int) -> float:
        """Forward FLOPs of the LM head for ``batch`` sequences."""
        return 2.0 * batch * self.seq * self.hidden * self.vocab

    # ---- parameters per tensor-parallel split -----------------------------------------------
    def layer_param_split(self, moe: bool) -> tuple[int, int, int, int, int]:
        """(split, split_linear, replicated_linear, expert, total) parameters of one layer:
        ``split`` the parameters divided over the tensor-parallel ranks (column-parallel
        weights and biases, row-parallel weights), ``split_linear`` their weight matrices
        alone, ``replicated_linear`` the replicated weight matrices (MLA's down-projections,
        the router), ``expert`` the routed experts' parameters (divided over ``ep x tp``),
        ``total`` all of the layer's."""
        return _layer_param_split(self.config, self._layer_index(moe))

    def _layer_index(self, moe: bool) -> int:
        return _layer_index(self.config, moe)

    def stage_layers(self, pp: int, interleave: int = 1, split: StageSplit = StageSplit()
                     ) -> list[tuple[int, int]]:
        """(dense, MoE) layers of each of ``pp`` pipeline stages (:meth:`chunk_layers`)."""
        return list(_stage_layers(self.config, pp, interleave, split))

    def chunk_layers(self, pp: int, interleave: int = 1, split: StageSplit = StageSplit()
                     ) -> tuple[tuple[range, ...], ...]:
        """``[stage][chunk]`` -> the layer indices it holds: contiguous blocks of ``layers /
        pp`` (a remainder: the first stages one more), with ``interleave`` v chunks per stage
        chunk c of stage s after chunk c of the stages before it (Narayanan et al. SC'21's
        interleaved assignment); an uneven ``split`` (:mod:`accelsim.engine.stages`,
        Megatron-core's rules) sets each chunk's count."""
        return _chunk_layers(self.config.layers, pp, interleave, split)

    def check_split(self, tp: int, ep: int) -> None:
        c = self.config
        kv = self.kv_heads
        if kv % tp and tp % kv:
            raise InputError(f"kv_heads {kv} and tp {tp}: one must divide the other")
        if ep > 1 and c.moe is None:
            raise InputError(f"ep {ep} needs a mixture-of-experts model ({self.name!r} is dense)")
        if c.moe is not None:
            if c.moe.n_experts % ep:
                raise InputError(f"ep {ep} must divide the {c.moe.n_experts} experts")
            if c.moe.expert_ffn_size % tp:
                raise InputError(f"expert ffn {c.moe.expert_ffn_size} not divisible by tp {tp}")


# the model's structure is fixed data: derived once per config (a plan search asks again and
# again)
@functools.lru_cache(maxsize=256)
def _flops_terms(c: TransformerConfig) -> tuple[int, int]:
    return c.linear_flops_per_token, c.attention_flops_per_key


@functools.lru_cache(maxsize=256)
def _layer_index(c: TransformerConfig, moe: bool) -> int:
    for i in range(c.layers):
        if c.is_moe_layer(i) == moe:
            return i
    raise ValueError(f"model {c.name!r} has no {'MoE' if moe else 'dense'} layer")


@functools.lru_cache(maxsize=1024)
def _chunk_layers(layers: int, pp: int, interleave: int, split: StageSplit
                  ) -> tuple[tuple[range, ...], ...]:
    sizes = split.chunk_sizes(layers, pp, interleave)
    out = [[range(0)] * interleave for _ in range(pp)]
    start = 0
    for ch in range(interleave):  # chunk-major, as Megatron numbers the layers
        for s in range(pp):
            out[s][ch] = range(start, start + sizes[s][ch])
            start += sizes[s][ch]
    return tuple(tuple(r) for r in out)


@functools.lru_cache(maxsize=1024)
def _stage_layers(c: TransformerConfig, pp: int, interleave: int, split: StageSplit
                  ) -> tuple[tuple[int, int], ...]:
    out = []
    for chunks in _chunk_layers(c.layers, pp, interleave, split):
        n = sum(len(r) for r in chunks)
        moe = sum(c.is_moe_layer(i) for r in chunks for i in r)
        out.append((n - moe, moe))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def _layer_param_split(c: TransformerConfig, i: int) -> tuple[int, int, int, int, int]:
    split = split_lin = rep_lin = expert = total = 0
    for op in c.layer_ops(i):
        total += op.params
        if op.kind is not OpKind.LINEAR:
            continue
        part = op.name.split(".")[-2:]
        w = op.in_features * op.out_features * op.instances
        if op.instances > 1:  # routed experts
            expert += op.params
        elif part[1] in ("q_a", "kv_a") or part[0] == "router":
            rep_lin += w
        elif part[1] in ("o", "down"):  # row-parallel: the bias stays whole
            split += w
            split_lin += w
        else:  # column-parallel
            split += op.params
            split_lin += w
    return split, split_lin, rep_lin, expert, total


def _mlp_gemms(prefix: str, tokens: int, ffn: int, h: int, tp: int, gated: bool, gp: str,
               count: int = 1) -> tuple[GemmOp, GemmOp]:
    width = (2 if gated else 1) * ffn // tp
    return (GemmOp(f"{prefix}fc1", tokens, width, h, gp, count),
            GemmOp(f"{prefix}fc2", tokens, h, ffn // tp, gp, count))


def expert_tokens(model: Decoder, tokens: int, ep: int) -> tuple[int, int]:
    """(tokens per active expert, active experts per GPU) when the ``ep`` GPUs of the
    expert-parallel group route ``tokens`` tokens in all to ``top_k`` experts each, uniformly at
    random: ``n = tokens x top_k`` choices hit ``E (1 - (1 - 1/E)^n)`` distinct experts
    in expectation (all of them in training; a few at small-batch decode, whose weights alone
    are read), ``1/ep`` of them on each GPU; the tokens spread evenly over them (dropless), or
    at most the expert capacity (GShard/Switch capacity factor)."""
    m = model.config.moe
    n = tokens * m.top_k
    hit = min(m.n_experts, math.ceil(m.n_experts * -math.expm1(n * math.log1p(-1 / m.n_experts))
                                     - 1e-9)) if m.n_experts > 1 else 1
    local = max(1, math.ceil(hit / ep))
    even = math.ceil(n / (local * ep))
    cap = m.expert_capacity(tokens)
    return max(1, even if cap is None else min(even, cap)), local


def a2a_elements(model: Decoder, tokens: int, tp: int) -> float:
    """Elements one GPU sends in one all-to-all (dispatch or combine) of an MoE layer: its
    share of the ``tokens`` tokens (split over the tensor-parallel ranks), ``top_k`` copies
    of each hidden vector."""
    return tokens * model.config.moe.top_k * model.hidden / tp


def layer_gemms(model: Decoder, moe: bool, tokens: int, tp: int, ep: int, gp: str, *,
                etp: int | None = None, group_tokens: int | None = None
                ) -> tuple[GemmOp, ...]:
    """The linear GEMMs of one layer on one GPU for ``tokens`` tokens, in forward order;
    routed experts sliced ``etp`` ways (default ``tp``) and fed by the ``group_tokens`` tokens
    of the expert-parallel group (default ``ep x tokens``: each rank brings its own)."""
    c, h, t, T = model.config, model.hidden, tp, tokens
    a, kv = c.heads, model.kv_heads
    out: list[GemmOp] = []
    if c.mla is None:
        d = c.head_dim
        out.append(GemmOp("qkv", T, (a + 2 * kv) * d // t, h, gp))
    else:
        m = c.mla
        if m.q_lora_rank:
            out += [GemmOp("q_down", T, m.q_lora_rank, h, gp),
                    GemmOp("q_up", T, a * m.qk_head_dim // t, m.q_lora_rank, gp)]
        else:
            out.append(GemmOp("q", T, a * m.qk_head_dim // t, h, gp))
        out += [GemmOp("kv_down", T, m.kv_lora_rank + m.qk_rope_head_dim, h, gp),
                GemmOp("kv_up", T, a * (m.qk_nope_head_dim + m.v_head_dim) // t,
                       m.kv_lora_rank, gp)]
    out.append(GemmOp("proj", T, h, a * model.v_head_dim // t, gp))
    gated = c.mlp is not MlpKind.GELU
    if not moe:
        out += _mlp_gemms("", T, c.ffn_size, h, t, gated, gp)
        return tuple(out)
    e = c.moe
    out.append(GemmOp("router", T, e.n_experts, h, gp))
    m_e, local = expert_tokens(model, ep * T if group_tokens is None else group_tokens, ep)
    out += _mlp_gemms("experts.", m_e, e.expert_ffn_size, h, t if etp is None else etp, gated,
                      gp, local)
    if e.n_shared_experts:
        out += _mlp_gemms("shared.", T, e.n_shared_experts * e.expert_ffn_size, h, t, gated, gp)
    return tuple(out)


def cast_bytes(precision: str, elements: float, fused: bool) -> float:
    """HBM bytes of casting ``elements`` 16-bit elements to a GEMM input ``precision`` (none for
    16 bits and wider). Unfused (``Stack.fuse_casts`` False), the cast is its own kernel: read
    2 bytes, write the format's :data:`accelsim.arch.model.OPERAND_BYTES` (the element plus its
    share of the block scales; a block's amax is taken in the same pass) -- 3 for the 8-bit
    formats. Fused into the kernel that produces the tensor (a GEMM's epilogue, a LayerNorm or
    activation kernel, which write the low-precision tensor in place of the 16-bit one), the
    round trip is gone; what remains is writing the block scales
    (:data:`accelsim.arch.model.BLOCK_SCALE_BYTES`, none for per-tensor scaling). A
    per-tensor amax and scale (a few bytes per tensor) is not priced either way."""
    if OPERAND_BYTES[precision] >= 2:
        return 0.0
    if fused:
        return BLOCK_SCALE_BYTES.get(precision, 0.0) * elements
    return (2 + OPERAND_BYTES[precision]) * elements


def elementwise_bytes(model: Decoder, moe: bool, tokens: int, tp: int, sequence_parallel: bool,
                      gemms: tuple[GemmOp, ...], gp: str,
                      fuse_casts: bool = False) -> float:
    """HBM bytes of one layer's element-wise kernels for ``tokens`` tokens, forward (16-bit):
    the two norms 2 x 4 and dropout + residual 2 x 7 per hidden element (Megatron's fused
    kernels; replicated over the tensor-parallel ranks unless sequence parallel); the MLP
    activation 16 bytes per 4 FFN elements for GeLU with its bias (read and write, split), a
    gated activation 1.5 x that (it reads gate and up); rotary: read and write the rotated
    query and key elements; MoE: the routed tokens' permutation and un-permutation (read and
    write 2 bytes, dispatch and combine); GEMM inputs narrower than 16 bits add their casts
    (:func:`cast_bytes` of every GEMM input, fused or not by ``fuse_casts``). The score
    softmax is the attention op's."""
    c, h, t = model.config, model.hidden, tp
    sbh = tokens * h
    fused = FUSED_ELEMENTWISE_BYTES  # per element of each kernel (one owner: the stack's)
    norms_residuals = 2 * fused["layernorm"] + 2 * fused["add"]  # 22
    act = 4 * fused["gelu"] * (1.5 if c.mlp is not MlpKind.GELU else 1)  # per 4 FFN elements
    if not moe:
        ffn_elems = c.ffn_size
    else:
        e = c.moe
        ffn_elems = e.top_k * e.expert_ffn_size + e.n_shared_experts * e.expert_ffn_size
    nbytes = norms_residuals * sbh / (t if sequence_parallel else 1) \
        + act * sbh * (ffn_elems / (4 * h)) / t
    if c.positions is PositionKind.ROTARY:
        rot = next(op for op in c.layer_ops(0) if op.kind is OpKind.ROTARY)
        nbytes += 4 * tokens * rot.width / t
    if moe:
        nbytes += 8 * a2a_elements(model, tokens, t)
    return nbytes + cast_bytes(gp, sum(g.m * g.k * g.count for g in gemms), fuse_casts)


def layer_ops(model: Decoder, moe: bool, tokens: int, batch: int, tp: int, ep: int,
              sequence_parallel: bool, gp: str, fuse_casts: bool = False
              ) -> tuple[tuple[GemmOp, ...], AttentionOp, ElementwiseOp]:
    """The ops of one (dense or MoE) layer on one GPU for ``batch`` sequences of the model's
    ``seq`` tokens (``tokens = batch x seq``)."""
    gemms = layer_gemms(model, moe, tokens, tp, ep, gp)
    kv = model.kv_heads
    attn = AttentionOp(batch=batch, heads=model.heads // tp, seq=model.seq,
                       head_dim=model.head_dim, kv_heads=max(1, kv // tp),
                       causal=model.causal, flash=model.flash_attention,
                       precision=attention_precision(gp), window=model.window,
                       alibi=model.alibi)
    ew = ElementwiseOp("elementwise",
                       elementwise_bytes(model, moe, tokens, tp, sequence_parallel, gemms, gp,
                                         fuse_casts))
    return gemms, attn, ew


def head_op(model: Decoder, tokens: int, tp: int, gp: str, vocab_multiple: int = 1) -> GemmOp:
    """The vocabulary-parallel LM head; the vocabulary padded to a multiple of
    ``vocab_multiple x tp`` first (what a software stack does: ``Stack.vocab_multiple``)."""
    step = vocab_multiple * tp
    return GemmOp("lm_head", tokens, -(-model.vocab // step) * step // tp, model.hidden, gp)


__all__ = ["Decoder", "a2a_elements", "cast_bytes", "elementwise_bytes", "expert_tokens",
           "head_op", "layer_gemms", "layer_ops"]
