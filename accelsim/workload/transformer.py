"""Decoder-only transformer family as frozen data, independent of timing: dense (GPT, Llama,
Mistral, Qwen2, GPT-NeoX) and mixture-of-experts (Mixtral, DeepSeek-V2/V3) models, with exact
parameter counts (PyTorch ``numel``, as Hugging Face ``transformers`` builds the model) and the
per-token forward FLOPs of every op, so a timing engine never re-derives a shape.

A model is a :class:`TransformerConfig`; :meth:`TransformerConfig.ops` lists its ops in forward
order (:class:`Op`: a linear layer, an attention matmul over the attended keys, or element-wise
work), each with its parameters, per-token active parameters and per-token forward FLOPs.
Model FLOPs follow the usual convention: 2 x the multiply-adds of every GEMM (linear layers and
the two attention matmuls), element-wise work not counted (Narayanan et al. SC'21; Kaplan et al.
2020). Attention variants: multi-head / grouped-query / multi-query by ``kv_heads``; DeepSeek's
multi-head latent attention (:class:`Mla`, DeepSeek-V2 paper section 2.1) as HF builds it.
The parts (:class:`Op`, the kinds, :class:`Moe`, :class:`Mla`) live in
:mod:`accelsim.workload.transformer_parts` and are importable from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from enum import StrEnum

from accelsim.bounds import MAX_MODEL_LAYERS
from accelsim.errors import InputError
from accelsim.workload.gpt import PRESETS as GPT_PRESETS
from accelsim.workload.gpt import GptConfig, check_dropout
# the parts, re-exported: this module is where callers import a model's vocabulary from
from accelsim.workload.transformer_parts import (_ACT_OP, _NORM_OP, Mla, MlpKind, Moe, NormKind,
                                                 Op, OpKind, PositionKind, _check_int, _enum)

__all__ = ["PRESETS", "Mla", "MlpKind", "Moe", "NormKind", "Op", "OpKind", "PositionKind",
           "TransformerConfig", "attended_pairs"]


def attended_pairs(seq: int, window: int = 0, causal: bool = True) -> int:
    """Query-key pairs of one sequence of ``seq`` tokens (one head) where each query attends at
    most ``window`` keys (0: no window), itself included: causal, ``sum_t min(t, window)`` for
    ``t = 1..seq`` (the lower triangle with its diagonal, a band of ``window`` under a
    window); not causal, ``seq x min(seq, window)``. The one owner of the count
    (:meth:`TransformerConfig.attended_keys`, the engine's attention op)."""
    _check_int("seq", seq, 1)
    _check_int("window", window, 0)
    w = window or seq
    if not causal:
        return seq * min(seq, w)
    if w >= seq:
        return seq * (seq + 1) // 2
    return w * (w + 1) // 2 + (seq - w) * w


@dataclass(frozen=True)
class TransformerConfig:
    """A decoder-only transformer. ``kv_heads`` (default ``heads``: MHA; 1: MQA; between: GQA),
    ``head_dim`` (default ``hidden // heads``) and ``ffn_size`` (default 4 x hidden) are
    resolved at construction. ``seq``: the maximum positions (size of a learned position table;
    the default sequence length). Biases: ``qkv_bias`` on the Q/K/V projections (MLA: on the
    down-projections, as DeepSeek's ``attention_bias``), ``out_bias`` on the attention output
    projection, ``mlp_bias`` on every MLP / expert linear. ``sliding_window``: each query
    attends at most that many keys (Mistral). ``parallel_residual``: attention and MLP read the
    same input (GPT-NeoX; changes no count). ``rotary_fraction``: the share of each head's
    dimensions RoPE rotates (GPT-NeoX ``rotary_pct``). ``mtp_layers``: DeepSeek-V3's
    multi-token-prediction modules, *not* in :attr:`n_params` (see :attr:`mtp_params`).
    With ``mla``, ``head_dim`` defaults to its query/key head dim and ``kv_heads`` plays no
    part. ``hidden_dropout`` / ``attention_dropout``: training dropout on the embedding and
    residual branches / on the attention probabilities (default 0: Llama, Mistral, Mixtral,
    Qwen2, GPT-NeoX and DeepSeek configs train without; 0 keeps no mask). Defaults are
    resolved once: ``dataclasses.replace`` keeps the resolved values."""

    name: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq: int
    kv_heads: int | None = None
    head_dim: int | None = None
    ffn_size: int | None = None
    mlp: MlpKind = MlpKind.GELU
    norm: NormKind = NormKind.LAYERNORM
    positions: PositionKind = PositionKind.LEARNED
    tied_embeddings: bool = True
    qkv_bias: bool = False
    out_bias: bool = False
    mlp_bias: bool = False
    sliding_window: int | None = None
    parallel_residual: bool = False
    rotary_fraction: float = 1.0
    moe: Moe | None = None
    mla: Mla | None = None
    mtp_layers: int = 0
    hidden_dropout: float = 0.0
    attention_dropout: float = 0.0
    source: str = field(default="", compare=False)

    def __post_init__(self) -> None:
        _check_int("TransformerConfig.layers", self.layers, 1, MAX_MODEL_LAYERS)
        for f in ("hidden", "heads", "vocab", "seq"):
            _check_int(f"TransformerConfig.{f}", getattr(self, f), 1)
        _check_int("TransformerConfig.mtp_layers", self.mtp_layers, 0, MAX_MODEL_LAYERS)
        for f, default in (("kv_heads", self.heads), ("ffn_size", 4 * self.hidden)):
            v = getattr(self, f)
            if v is None:
                object.__setattr__(self, f, default)
            else:
                _check_int(f"TransformerConfig.{f}", v, 1)
        if self.head_dim is None and self.mla is not None:
            object.__setattr__(self, "head_dim", self.mla.qk_head_dim)
        if self.head_dim is None:
            if self.hidden % self.heads:
                raise InputError(f"TransformerConfig: hidden {self.hidden} is not a multiple of "
                                 f"heads {self.heads}; give head_dim")
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        _check_int("TransformerConfig.head_dim", self.head_dim, 1)
        if self.heads % self.kv_heads:
            raise InputError(f"TransformerConfig: heads {self.heads} is not a multiple of "
                             f"kv_heads {self.kv_heads}")
        object.__setattr__(self, "mlp", _enum("TransformerConfig.mlp", MlpKind, self.mlp))
        object.__setattr__(self, "norm", _enum("TransformerConfig.norm", NormKind, self.norm))
        object.__setattr__(self, "positions",
                           _enum("TransformerConfig.positions", PositionKind, self.positions))
        for f in ("tied_embeddings", "qkv_bias", "out_bias", "mlp_bias", "parallel_residual"):
            if not isinstance(getattr(self, f), bool):
                raise InputError(f"TransformerConfig.{f} must be true or false, "
                                 f"got {getattr(self, f)!r}")
        if self.sliding_window is not None:
            _check_int("TransformerConfig.sliding_window", self.sliding_window, 1)
        for f in ("hidden_dropout", "attention_dropout"):
            check_dropout(f"TransformerConfig.{f}", getattr(self, f))
        rf = self.rotary_fraction
        if isinstance(rf, bool) or not isinstance(rf, (int, float)) or not 0 < rf <= 1:
            raise InputError(f"TransformerConfig.rotary_fraction must be in (0, 1], got {rf!r}")
        if self.moe is not None and not isinstance(self.moe, Moe):
            raise InputError(f"TransformerConfig.moe must be a Moe or None, got {self.moe!r}")
        if self.mla is not None and not isinstance(self.mla, Mla):
            raise InputError(f"TransformerConfig.mla must be an Mla or None, got {self.mla!r}")
        if self.mtp_layers and self.moe is None:
            raise InputError("TransformerConfig: mtp_layers needs a MoE model (DeepSeek-V3)")

    # ---- construction from the GPT description (one owner of the GPT numbers) ------------
    @classmethod
    def from_gpt(cls, cfg: GptConfig) -> TransformerConfig:
        """The GPT model of :mod:`accelsim.workload.gpt` (biased LayerNorm blocks, GeLU MLP,
        learned positions): ``seq`` is its position-table size ``cfg.n_positions``."""
        return cls(name=cfg.name, layers=cfg.layers, hidden=cfg.hidden, heads=cfg.heads,
                   vocab=cfg.vocab, seq=cfg.n_positions, ffn_size=cfg.ffn_size,
                   mlp=MlpKind.GELU, norm=NormKind.LAYERNORM, positions=PositionKind.LEARNED,
                   tied_embeddings=cfg.tied_embeddings, qkv_bias=True, out_bias=True,
                   mlp_bias=True, hidden_dropout=cfg.hidden_dropout,
                   attention_dropout=cfg.attention_dropout, source="accelsim.workload.gpt")

    def as_gpt(self, seq: int | None = None, *, causal: bool = True,
               flash_attention: bool = False) -> GptConfig:
        """This model as a :class:`GptConfig` (for front-ends that take one), sequence length
        ``seq`` (default: all positions); a ValueError naming the first feature a GPT model
        cannot express (GQA, SwiGLU, RMSNorm, rotary, MoE, ...)."""
        gpt = TransformerConfig.from_gpt(GptConfig(
            layers=self.layers, hidden=self.hidden, heads=self.heads, seq=self.seq,
            vocab=self.vocab, ffn=self.ffn_size, tied_embeddings=self.tied_embeddings,
            hidden_dropout=self.hidden_dropout, attention_dropout=self.attention_dropout))
        for f in ("kv_heads", "head_dim", "mlp", "norm", "positions", "qkv_bias", "out_bias",
                  "mlp_bias", "sliding_window", "parallel_residual", "rotary_fraction", "moe",
                  "mla", "mtp_layers"):
            if getattr(self, f) != getattr(gpt, f):
                mine, theirs = (str(x) if isinstance(x, StrEnum) else repr(x)
                                for x in (getattr(self, f), getattr(gpt, f)))
                raise InputError(f"model {self.name!r} is not a GPT model: {f} = {mine} "
                                 f"(GPT: {theirs})")
        seq = seq or self.seq
        return GptConfig(layers=self.layers, hidden=self.hidden, heads=self.heads, seq=seq,
                         vocab=self.vocab,
                         ffn=0 if self.ffn_size == 4 * self.hidden else self.ffn_size,
                         positions=0 if seq == self.seq else self.seq,
                         tied_embeddings=self.tied_embeddings,
                         causal=causal, flash_attention=flash_attention, name=self.name,
                         hidden_dropout=self.hidden_dropout,
                         attention_dropout=self.attention_dropout)

    # ---- structure --------------------------------------------------------------------------
    def is_moe_layer(self, i: int) -> bool:
        m = self.moe
        return m is not None and i >= m.first_dense_layers and i % m.layer_freq == 0

    @property
    def n_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.layers))

    def _norm(self, name: str, width: int) -> Op:
        return Op(name, _NORM_OP[self.norm], width=width)

    def _mlp(self, prefix: str, ffn: int, instances: int = 1, active: int = 1) -> list[Op]:
        h, b = self.hidden, self.mlp_bias
        ops = [Op(f"{prefix}.up", OpKind.LINEAR, h, ffn, b, instances=instances, active=active)]
        if self.mlp.gated:
            ops.append(Op(f"{prefix}.gate", OpKind.LINEAR, h, ffn, b, instances=instances,
                          active=active))
        return ops + [Op(f"{prefix}.act", _ACT_OP[self.mlp], width=ffn, instances=instances,
                         active=active),
                      Op(f"{prefix}.down", OpKind.LINEAR, ffn, h, b, instances=instances,
                         active=active)]

    def _attention(self) -> list[Op]:
        h, a, kv, d = self.hidden, self.heads, self.kv_heads, self.head_dim
        rot = self.positions is PositionKind.ROTARY
        if self.mla is None:
            ops = [Op("attn.q", OpKind.LINEAR, h, a * d, self.qkv_bias),
                   Op("attn.k", OpKind.LINEAR, h, kv * d, self.qkv_bias),
                   Op("attn.v", OpKind.LINEAR, h, kv * d, self.qkv_bias)]
            if rot:
                ops.append(Op("attn.rotary", OpKind.ROTARY,
                              width=round(d * self.rotary_fraction) * (a + kv)))
            qk, v = d, d
        else:
            m = self.mla
            qk, v = m.qk_head_dim, m.v_head_dim
            if m.q_lora_rank:
                ops = [Op("attn.q_a", OpKind.LINEAR, h, m.q_lora_rank, self.qkv_bias),
                       self._norm("attn.q_a_norm", m.q_lora_rank),
                       Op("attn.q_b", OpKind.LINEAR, m.q_lora_rank, a * qk)]
            else:
                ops = [Op("attn.q", OpKind.LINEAR, h, a * qk)]
            ops += [Op("attn.kv_a", OpKind.LINEAR, h, m.kv_lora_rank + m.qk_rope_head_dim,
                       self.qkv_bias),
                    self._norm("attn.kv_a_norm", m.kv_lora_rank),
                    Op("attn.kv_b", OpKind.LINEAR, m.kv_lora_rank,
                       a * (m.qk_nope_head_dim + m.v_head_dim))]
            if rot:
                ops.append(Op("attn.rotary", OpKind.ROTARY, width=m.qk_rope_head_dim * (a + 1)))
        return ops + [Op("attn.scores", OpKind.ATTENTION_SCORES, qk, heads=a),
                      Op("attn.softmax", OpKind.SOFTMAX, heads=a),
                      Op("attn.values", OpKind.ATTENTION_VALUES, v, heads=a),
                      Op("attn.o", OpKind.LINEAR, a * v, h, self.out_bias)]

    def _ffn(self, i: int) -> list[Op]:
        if not self.is_moe_layer(i):
            return self._mlp("mlp", self.ffn_size)
        m = self.moe
        ops = [Op("router.linear", OpKind.LINEAR, self.hidden, m.n_experts, m.router_bias)]
        ops += self._mlp("experts", m.expert_ffn_size, m.n_experts, m.top_k)
        if m.n_shared_experts:
            ops += self._mlp("shared_experts", m.n_shared_experts * m.expert_ffn_size)
        return ops

    def layer_ops(self, i: int) -> tuple[Op, ...]:
        """The ops of layer ``i`` (0-based) in forward order, named ``layers.{i}.<part>.<op>``."""
        if not 0 <= i < self.layers:
            raise IndexError(f"layer {i} out of range 0..{self.layers - 1}")
        h = self.hidden
        ops = ([self._norm("attn_norm.norm", h)] + self._attention()
               + [Op("attn_residual.add", OpKind.ADD, width=h), self._norm("mlp_norm.norm", h)]
               + self._ffn(i) + [Op("mlp_residual.add", OpKind.ADD, width=h)])
        return tuple(replace(op, name=f"layers.{i}.{op.name}") for op in ops)

    def embedding_ops(self) -> tuple[Op, ...]:
        ops = [Op("embed.tokens", OpKind.EMBEDDING, self.vocab, self.hidden)]
        if self.positions is PositionKind.LEARNED:
            ops += [Op("embed.positions", OpKind.EMBEDDING, self.seq, self.hidden),
                    Op("embed.add", OpKind.ADD, width=self.hidden)]
        return tuple(ops)

    def head_ops(self) -> tuple[Op, ...]:
        """Final norm and LM head (``tied``: the token-embedding matrix, no own parameters)."""
        return (self._norm("head.final_norm", self.hidden),
                Op("head.lm_head", OpKind.LINEAR, self.hidden, self.vocab,
                   tied=self.tied_embeddings))

    def ops(self) -> tuple[Op, ...]:
        """Every op of the forward pass, in order (embeddings, layers, head)."""
        out = list(self.embedding_ops())
        for i in range(self.layers):
            out += self.layer_ops(i)
        return tuple(out + list(self.head_ops()))

    # ---- parameters -------------------------------------------------------------------------
    def layer_params(self, i: int) -> dict[str, int]:
        """Parameters of layer ``i`` by part: ``attn_norm``, ``attn`` (projections and MLA's
        internal norms), ``mlp_norm``, then ``mlp`` (dense) or ``router``, ``experts``,
        ``shared_experts`` (MoE); parameter-free parts omitted."""
        out: dict[str, int] = {}
        for op in self.layer_ops(i):
            if op.params:
                out[op.group] = out.get(op.group, 0) + op.params
        return out

    def _count(self, active: bool) -> int:
        ends = self.embedding_ops() + self.head_ops()
        total = sum(op.active_params if active else op.params for op in ends)
        per_kind: dict[bool, int] = {}
        for i in range(self.layers):
            moe = self.is_moe_layer(i)
            if moe not in per_kind:
                per_kind[moe] = sum(op.active_params if active else op.params
                                    for op in self.layer_ops(i))
            total += per_kind[moe]
        return total

    @property
    def n_params(self) -> int:
        """Exact trainable parameters of the model (PyTorch ``numel``; a tied LM head counted
        once; MTP modules excluded)."""
        return self._count(active=False)

    @property
    def n_active_params(self) -> int:
        """Parameters one token uses: everything but the routed experts it is not sent to (the
        router, shared experts, embeddings and LM head included, as Mixtral's published
        12.9 B)."""
        return self._count(active=True)

    @property
    def mtp_params(self) -> int:
        """Parameters of DeepSeek-V3's ``mtp_layers`` multi-token-prediction modules that are
        not shared with the main model (embedding and output head are shared; V3 report
        section 2.2): per module an MoE layer, the ``2h x h`` projection and three RMSNorms
        (``enorm``, ``hnorm``, the shared head's norm)."""
        if not self.mtp_layers:
            return 0
        moe_layer = next(i for i in range(self.layers) if self.is_moe_layer(i))
        layer = sum(op.params for op in self.layer_ops(moe_layer))
        norms = 3 * self._norm("n", self.hidden).params
        return self.mtp_layers * (layer + 2 * self.hidden * self.hidden + norms)

    # ---- FLOPs ------------------------------------------------------------------------------
    def attended_keys(self, seq: int, *, causal: bool = True) -> int:
        """Query-key pairs one sequence of ``seq`` tokens computes: ``seq^2`` for a kernel that
        computes the full score matrix, ``sum_t min(t, window)`` for one that skips the masked
        part (causal: t keys for token t; ``sliding_window`` caps it)."""
        return attended_pairs(seq, self.sliding_window or 0, causal)

    def flops_per_token(self, keys: int = 0) -> int:
        """Forward FLOPs of one token that attends ``keys`` keys in every layer (decode with a
        KV cache of ``keys`` tokens incl. itself): linear layers (top-k experts) + attention."""
        return self.linear_flops_per_token + keys * self.attention_flops_per_key

    @property
    def linear_flops_per_token(self) -> int:
        """Forward FLOPs of every linear layer (routed experts: top-k; LM head included)."""
        return sum(op.flops() for op in self.ops() if op.kind is OpKind.LINEAR)

    @property
    def attention_flops_per_key(self) -> int:
        """Forward FLOPs of the two attention matmuls per query-key pair, all layers."""
        return sum(op.flops(1) for op in self.ops()
                   if op.kind in (OpKind.ATTENTION_SCORES, OpKind.ATTENTION_VALUES))

    def forward_flops(self, seq: int, *, causal: bool = True) -> int:
        """Forward FLOPs of one sequence of ``seq`` tokens (see :meth:`attended_keys`)."""
        return (seq * self.linear_flops_per_token
                + self.attended_keys(seq, causal=causal) * self.attention_flops_per_key)

    def model_flops(self, batch: int, seq: int, *, causal: bool = True) -> int:
        """Training model FLOPs of ``batch`` sequences: 3 x forward (no recomputation)."""
        _check_int("batch", batch, 1)
        return 3 * batch * self.forward_flops(seq, causal=causal)

    # ---- KV cache ---------------------------------------------------------------------------
    @property
    def kv_cache_elements_per_token(self) -> int:
        """Cached elements per token, all layers: K and V of every KV head
        (``2 x kv_heads x head_dim``), or MLA's compressed latent and rotary key
        (``kv_lora_rank + qk_rope_head_dim``, DeepSeek-V2 section 2.1.2)."""
        if self.mla is not None:
            per_layer = self.mla.kv_lora_rank + self.mla.qk_rope_head_dim
        else:
            per_layer = 2 * self.kv_heads * self.head_dim
        return self.layers * per_layer

    def kv_cache_elements(self, context: int) -> int:
        """Cached elements of one sequence with ``context`` tokens (a sliding window keeps at
        most ``sliding_window`` of them)."""
        _check_int("context", context, 1)
        w = self.sliding_window
        return (context if w is None else min(context, w)) * self.kv_cache_elements_per_token


# ---- presets ----------------------------------------------------------------------------------
_LLAMA3 = "https://huggingface.co/meta-llama/Meta-Llama-3-{}/blob/main/config.json"

#: Shipped models; every number from the cited config / paper. gpt2-small and gpt3-175b are
#: :data:`accelsim.workload.gpt.PRESETS` (their one owner; sources there).
PRESETS: dict[str, TransformerConfig] = {
    "gpt2-small": TransformerConfig.from_gpt(GPT_PRESETS["gpt2-small"]),
    "gpt3-175b": TransformerConfig.from_gpt(GPT_PRESETS["gpt3-175b"]),
    # Llama 3 (Grattafiori et al. 2024, Table 3): SwiGLU, RMSNorm, RoPE, GQA with 8 KV heads,
    # untied, no biases; dimensions from the HF config.json (attention_dropout 0.0 and no
    # hidden dropout: the dropout fields' default 0).
    "llama3-8b": TransformerConfig(
        name="llama3-8b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_size=14336,
        vocab=128256, seq=8192, mlp=MlpKind.SWIGLU, norm=NormKind.RMSNORM,
        positions=PositionKind.ROTARY, tied_embeddings=False, source=_LLAMA3.format("8B")),
    "llama3-70b": TransformerConfig(
        name="llama3-70b", layers=80, hidden=8192, heads=64, kv_heads=8, ffn_size=28672,
        vocab=128256, seq=8192, mlp=MlpKind.SWIGLU, norm=NormKind.RMSNORM,
        positions=PositionKind.ROTARY, tied_embeddings=False, source=_LLAMA3.format("70B")),
    # Mixtral of Experts (Jiang et al. 2024, arXiv:2401.04088, Table 1): 8 experts, top-2,
    # every layer MoE, no sliding window in the released config.
    "mixtral-8x7b": TransformerConfig(
        name="mixtral-8x7b", layers=32, hidden=4096, heads=32, kv_heads=8, ffn_size=14336,
        vocab=32000, seq=32768, mlp=MlpKind.SWIGLU, norm=NormKind.RMSNORM,
        positions=PositionKind.ROTARY, tied_embeddings=False,
        moe=Moe(n_experts=8, top_k=2, expert_ffn_size=14336),
        source="https://huggingface.co/mistralai/Mixtral-8x7B-v0.1/blob/main/config.json"),
    # DeepSeek-V3 (arXiv:2412.19437 section 4.2 and the HF config.json): 61 layers, the first
    # 3 dense (ffn 18432), then 256 routed experts (top-8 from at most 4 of 8 groups: n_group,
    # topk_group; "each token will be ensured to be sent to at most 4 nodes") + 1 shared; MLA with
    # q_lora 1536, kv_lora 512, 128 + 64 qk and 128 v head dims; 1 MTP module (not in
    # n_params); the router's noaux_tc selection bias is a checkpoint parameter.
    "deepseek-v3": TransformerConfig(
        name="deepseek-v3", layers=61, hidden=7168, heads=128, ffn_size=18432, vocab=129280,
        seq=163840, mlp=MlpKind.SWIGLU, norm=NormKind.RMSNORM, positions=PositionKind.ROTARY,
        tied_embeddings=False,
        moe=Moe(n_experts=256, top_k=8, expert_ffn_size=2048, n_shared_experts=1,
                first_dense_layers=3, router_bias=True, expert_groups=8, groups_per_token=4),
        mla=Mla(q_lora_rank=1536, kv_lora_rank=512, qk_nope_head_dim=128, qk_rope_head_dim=64,
                v_head_dim=128),
        mtp_layers=1,
        source="https://huggingface.co/deepseek-ai/DeepSeek-V3/blob/main/config.json"),
}
