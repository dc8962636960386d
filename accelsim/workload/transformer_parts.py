"""The parts a decoder-only transformer is described in, independent of timing: the kinds of
MLP, norm and position encoding, one forward op (:class:`Op`, :class:`OpKind`) with its exact
parameters and per-token FLOPs, and the two variants of a layer, mixture-of-experts
(:class:`Moe`) and DeepSeek's multi-head latent attention (:class:`Mla`). The model that
assembles them is :class:`accelsim.workload.transformer.TransformerConfig`."""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from accelsim.bounds import MAX_DIM
from accelsim.errors import InputError, check_int


class MlpKind(StrEnum):
    """``gelu``: fc1 -> GeLU -> fc2 (2 matrices); ``swiglu`` / ``geglu``: act(gate) * up -> down
    (3 matrices; SiLU resp. GeLU on the gate, Shazeer 2020)."""

    GELU = "gelu"
    SWIGLU = "swiglu"
    GEGLU = "geglu"

    @property
    def gated(self) -> bool:
        return self is not MlpKind.GELU


class NormKind(StrEnum):
    """``layernorm``: scale and bias (2 x width parameters); ``rmsnorm``: scale only."""

    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"


class PositionKind(StrEnum):
    """``learned``: a ``seq x hidden`` position table (GPT-2/3); ``rotary``: RoPE, no parameters;
    ``alibi``: ALiBi's per-head linear bias on the attention scores (Press et al. 2022; MPT,
    BLOOM), no parameters, added inside the attention kernel; ``none``: no position encoding."""

    LEARNED = "learned"
    ROTARY = "rotary"
    ALIBI = "alibi"
    NONE = "none"


class OpKind(StrEnum):
    """What an :class:`Op` does. Only ``linear`` and the two attention matmuls have FLOPs in the
    model-FLOPs convention; the rest is element-wise work of ``Op.elements`` per token."""

    EMBEDDING = "embedding"
    LINEAR = "linear"
    ATTENTION_SCORES = "attention_scores"   # Q.K^T per head over the attended keys
    ATTENTION_VALUES = "attention_values"   # P.V per head over the attended keys
    SOFTMAX = "softmax"
    LAYERNORM = "layernorm"
    RMSNORM = "rmsnorm"
    GELU = "gelu"
    SWIGLU = "swiglu"       # silu(gate) * up
    GEGLU = "geglu"         # gelu(gate) * up
    ROTARY = "rotary"
    ADD = "add"             # residual


_ACT_OP = {MlpKind.GELU: OpKind.GELU, MlpKind.SWIGLU: OpKind.SWIGLU, MlpKind.GEGLU: OpKind.GEGLU}
_NORM_OP = {NormKind.LAYERNORM: OpKind.LAYERNORM, NormKind.RMSNORM: OpKind.RMSNORM}


@dataclass(frozen=True)
class Op:
    """One op of the forward pass, per token.

    linear: ``in_features x out_features`` weights (+ ``out_features`` bias) in ``instances``
    copies (the experts), of which a token passes ``active`` (top-k); ``tied``: the weight is
    another op's (the tied LM head): no parameters of its own.
    embedding: a ``in_features`` (rows) x ``out_features`` table, looked up (no FLOPs).
    attention_scores / attention_values: ``heads`` dot products of length ``in_features``
    per attended key. Element-wise ops: ``width`` elements per token per active instance
    (softmax: ``heads`` per attended key)."""

    name: str
    kind: OpKind
    in_features: int = 0
    out_features: int = 0
    bias: bool = False
    tied: bool = False
    instances: int = 1
    active: int = 1
    heads: int = 0
    width: int = 0

    @property
    def group(self) -> str:
        """The part of the layer this op belongs to (``attn``, ``mlp``, ``experts``, ...)."""
        return self.name.split(".")[-2] if self.name.startswith("layers.") else \
            self.name.split(".")[0]

    def _weights(self) -> int:
        return self.in_features * self.out_features + (self.out_features if self.bias else 0)

    @property
    def params(self) -> int:
        """Trainable parameters (all instances)."""
        k = self.kind
        if k is OpKind.LINEAR:
            return 0 if self.tied else self.instances * self._weights()
        if k is OpKind.EMBEDDING:
            return self.in_features * self.out_features
        if k is OpKind.LAYERNORM:
            return 2 * self.width
        if k is OpKind.RMSNORM:
            return self.width
        return 0

    @property
    def active_params(self) -> int:
        """Parameters one token uses (a routed expert op: ``active`` of its instances)."""
        if self.kind is OpKind.LINEAR and self.instances > 1:
            return 0 if self.tied else self.active * self._weights()
        return self.params

    def flops(self, keys: int = 0) -> int:
        """Forward FLOPs for one token that attends ``keys`` keys (2 per multiply-add)."""
        if self.kind is OpKind.LINEAR:
            return 2 * self.in_features * self.out_features * self.active
        if self.kind in (OpKind.ATTENTION_SCORES, OpKind.ATTENTION_VALUES):
            return 2 * self.heads * self.in_features * keys
        return 0

    def elements(self, keys: int = 0) -> int:
        """Elements of element-wise work per token (softmax: per attended key)."""
        if self.kind is OpKind.SOFTMAX:
            return self.heads * keys
        if self.kind in (OpKind.LINEAR, OpKind.EMBEDDING, OpKind.ATTENTION_SCORES,
                         OpKind.ATTENTION_VALUES):
            return 0
        return self.width * self.active


@dataclass(frozen=True)
class Mla:
    """DeepSeek multi-head latent attention (DeepSeek-V2, arXiv:2405.04434 section 2.1): queries
    through a ``q_lora_rank`` bottleneck (0: a plain ``hidden -> heads x qk_head_dim`` projection,
    DeepSeek-V2-Lite), keys and values from a shared ``kv_lora_rank`` latent plus one decoupled
    ``qk_rope_head_dim`` rotary key shared by all heads."""

    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int = 0

    def __post_init__(self) -> None:
        for f in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            _check_int(f"Mla.{f}", getattr(self, f), 1)
        _check_int("Mla.q_lora_rank", self.q_lora_rank, 0)

    @property
    def qk_head_dim(self) -> int:
        return self.qk_nope_head_dim + self.qk_rope_head_dim


@dataclass(frozen=True)
class Moe:
    """Mixture-of-experts feed-forward layers. Layer ``i`` is MoE when ``i >= first_dense_layers``
    and ``i % layer_freq == 0`` (DeepSeek's ``first_k_dense_replace`` / ``moe_layer_freq``);
    the others are dense MLPs of the model's ``ffn_size``. Each MoE layer has a router (a
    ``hidden x n_experts`` linear; ``router_bias``: DeepSeek-V3's per-expert selection bias,
    ``e_score_correction_bias``), ``n_experts`` routed experts of ``expert_ffn_size`` of which
    a token uses ``top_k``, and ``n_shared_experts`` that every token uses (one MLP of
    ``n_shared_experts x expert_ffn_size``, as DeepSeek builds them). ``capacity_factor``:
    tokens an expert takes per step, relative to an even share (None: dropless).
    ``expert_groups`` / ``groups_per_token``: group-limited routing (DeepSeek's ``n_group`` /
    ``topk_group``): a token's experts come from at most ``groups_per_token`` of the
    ``expert_groups`` equal groups (0: no limit). It changes which experts, not how many: no
    parameter or FLOP moves; with one group per node (DeepSeek-V3's layout) it bounds the
    nodes a token is sent to (:mod:`accelsim.engine.comm`)."""

    n_experts: int
    top_k: int
    expert_ffn_size: int
    n_shared_experts: int = 0
    first_dense_layers: int = 0
    layer_freq: int = 1
    capacity_factor: float | None = None
    router_bias: bool = False
    expert_groups: int = 1
    groups_per_token: int = 0

    def __post_init__(self) -> None:
        _check_int("Moe.n_experts", self.n_experts, 1)
        _check_int("Moe.expert_groups", self.expert_groups, 1)
        _check_int("Moe.groups_per_token", self.groups_per_token, 0)
        if self.n_experts % self.expert_groups:
            raise InputError(f"Moe: {self.n_experts} experts do not split into "
                             f"{self.expert_groups} groups")
        if self.groups_per_token > self.expert_groups:
            raise InputError(f"Moe: groups_per_token {self.groups_per_token} > expert_groups "
                             f"{self.expert_groups}")
        _check_int("Moe.top_k", self.top_k, 1)
        _check_int("Moe.expert_ffn_size", self.expert_ffn_size, 1)
        for f in ("n_shared_experts", "first_dense_layers"):
            _check_int(f"Moe.{f}", getattr(self, f), 0)
        _check_int("Moe.layer_freq", self.layer_freq, 1)
        if self.top_k > self.n_experts:
            raise InputError(f"Moe: top_k {self.top_k} > n_experts {self.n_experts}")
        cf = self.capacity_factor
        if cf is not None and (isinstance(cf, bool) or not isinstance(cf, (int, float))
                               or not math.isfinite(cf) or cf <= 0):
            raise InputError(f"Moe.capacity_factor must be a positive number or None, got {cf!r}")

    def expert_capacity(self, tokens: int) -> int | None:
        """Tokens one expert processes per step for ``tokens`` routed tokens:
        ``ceil(capacity_factor x tokens x top_k / n_experts)`` (GShard / Switch); None when
        dropless (an expert takes whatever the router sends)."""
        if self.capacity_factor is None:
            return None
        return math.ceil(self.capacity_factor * tokens * self.top_k / self.n_experts)


def _check_int(name: str, v, minimum: int, maximum: int = MAX_DIM) -> None:
    check_int(name, v, minimum, maximum)  # a size or count: at most a tensor dimension


def _enum(name: str, enum: type[StrEnum], v):
    try:
        return enum(v)
    except ValueError:
        raise InputError(f"{name} must be one of {', '.join(e.value for e in enum)}, "
                         f"got {v!r}") from None
