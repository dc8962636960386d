"""What eager PyTorch launches for a decoder layer other than the GPT block
(:mod:`accelsim.engine.eager`): the Llama block (RMSNorm, SwiGLU/GeGLU, rotary positions,
grouped-query attention, no biases) and the mixes of those parts with the GPT block's
(LayerNorm, GELU MLP, learned or no positions, biases on any linear layer), on the ``pytorch``
stack (:data:`accelsim.engine.stack.PYTORCH`), with the HBM bytes each kernel reads and writes
and what autograd saves.

The code is Hugging Face's ``LlamaDecoderLayer`` (``transformers/models/llama/
modeling_llama.py``) run one op at a time under bf16/fp16 autocast over fp32 weights, as the
GPT block is: the residual stream stays fp32 (``T`` tokens, hidden ``h``, ``a`` query and ``kv``
key/value heads of ``d``, FFN ``f``; ``e`` bytes per 16-bit element, ``r = 4`` per fp32 one).
Assumptions, stated once: Q, K, V come from one fused projection and gate and up from one
(the engine's GEMMs, :func:`accelsim.engine.decoder.layer_gemms`; gpt-fast's ``wqkv``), so
autocast casts each norm's output once; every pointwise arithmetic kernel (mul, add, neg,
pow) streams at the measured fp32 add's bandwidth (``add``), a row reduction at LayerNorm's
(``layernorm``), a reduction over tokens at the bias gradient's (``reduce``), SiLU at GELU's.

* **RMSNorm** (``LlamaRMSNorm`` on the fp32 stream: no upcast kernel): forward ``x.pow(2)``
  (8 Th), ``.mean(-1)`` (4 Th + 4 T), ``+ eps`` and ``rsqrt`` (8 T each), ``x * rstd``
  (8 Th + 4 T), ``weight * x`` (8 Th + 4 h), autocast's cast of the output (Th (r + e));
  backward (PyTorch's ``derivatives.yaml`` formulas) the cast back (Th (e + r)), the weight
  mul's input gradient (8 Th + 4 h), its weight gradient (the product, 12 Th; the sum over
  tokens, 4 Th + 4 h), the ``x * rstd`` input gradient (8 Th + 4 T) and its ``rstd`` gradient
  (12 Th; the row sum, 4 Th + 4 T), ``rsqrt``'s (``result.pow(3)``, 8 T; two muls, 8 T and
  12 T), ``mean``'s (the expanded gradient / h, 4 T + 4 Th), ``pow``'s (``x.pow(1)`` a copy,
  ``* 2``, ``* grad``: 8, 8, 12 Th) and the two gradients of ``x`` summed (12 Th).
* **Rotary** (``apply_rotary_pos_emb`` on Q and K, each ``N = T heads d`` elements; cos and
  sin ``T d`` each): forward ``rotate_half`` (neg of one half, N e; cat, 2 N e), ``* sin``
  and ``* cos`` (2 N e + T d e each), the add (3 N e); backward ``grad * cos`` and
  ``grad * sin`` (2 N e + T d e each), the neg's (N e), the two slices' backward (a zero
  fill, N e, and the half copied in, N e, each) and the three gradients of the tensor
  summed (two adds, 3 N e each).
* **Grouped-query attention**: ``repeat_kv`` (Hugging Face's and torchtitan's Llama: K and V
  expanded to ``a`` heads and materialised before SDPA, a strided copy of ``T kv d e`` read,
  ``T a d e`` written, each; backward the sum over each group of repeats, a reduction), then
  SDPA's strided copies as the GPT block's (:func:`accelsim.engine.eager.sdpa_kernels`) at
  ``a d`` per token, the gradients of Q, K, V stacked back at ``(a + 2 kv) d``.
* **Gated MLP** (``down(act(gate(x)) * up(x))``): forward the activation (2 Tf e), the mul
  (3 Tf e); backward the mul's two gradients (3 Tf e each), the activation's (3 Tf e) and the
  gate and up gradients concatenated for the fused GEMM (4 Tf e).
* Norms, residual adds, GELU, linear layers' bias gradients and weight casts, the loss: the
  GPT block's kernels (:mod:`accelsim.engine.eager`). An untied LM head is a linear layer (its
  weight cast); a tied one the GPT block's.

Without autocast (FSDP's 16-bit param dtype, :mod:`accelsim.engine.mixed_precision`) the stream,
the weights and every kernel above are 16-bit (``r = e``), no weight casts run, and RMSNorm
upcasts its input and casts the normalized output back before the weight
(:func:`rmsnorm_kernels`).

An MoE layer's feed-forward block replaces the MLP's kernels (:mod:`accelsim.engine.eager_moe`);
multi-head latent attention, a parallel residual and partial rotary are refused
(:func:`check_block`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accelsim.engine import eager
from accelsim.engine.eager import F32, Kernels
from accelsim.engine.graph import ElementwiseOp
from accelsim.engine.stack import EagerKernel as K
from accelsim.errors import InputError

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder

Op = ElementwiseOp


def check_block(model: Decoder) -> None:
    """InputError naming what the eager kernels of this module do not list."""
    c = model.config
    odd = [name for name, bad in (
        ("multi-head latent attention", c.mla is not None),
        ("a parallel residual", c.parallel_residual),
        ("partial rotary", c.rotary_fraction != 1.0)) if bad]
    if odd:
        raise InputError(f"the pytorch stacks' eager kernels cover decoders of LayerNorm or "
                         f"RMSNorm, GELU, gated or MoE MLPs, multi-head or grouped-query "
                         f"attention, learned, rotary, ALiBi or no positions: {c.name} has "
                         f"{', '.join(odd)}")


def rmsnorm_kernels(name: str, T: int, h: int, e: int, c: int) -> Kernels:
    """Hugging Face's ``LlamaRMSNorm`` over ``T`` vectors of ``h``, one op per kernel (module
    docstring): on the fp32 stream, its output cast to 16 bits under autocast (``c``); on a
    16-bit stream without autocast (FSDP's param dtype) ``hidden_states.to(torch.float32)``
    first (a cast up), the statistics in fp32, the normalized output cast back to the input's
    dtype before the 16-bit weight multiplies it (``weight * hidden_states.to(input_dtype)``),
    each cast's gradient the reverse cast."""
    r = F32  # the statistics chain
    pure = not c and e < F32
    w = e if pure else r  # the weight multiply's elements
    chain_f = [Op(f"{name}_pow", T * h * 2 * r, kind=K.ADD),
               Op(f"{name}_mean", T * h * r + T * r, kind=K.LAYERNORM),
               Op(f"{name}_eps_add", T * 2 * r), Op(f"{name}_rsqrt", T * 2 * r),
               Op(f"{name}_scale", T * h * 2 * r + T * r, kind=K.ADD)]
    weight_f = [Op(f"{name}_weight", T * h * 2 * w + h * w, kind=K.ADD)]
    weight_b = [Op(f"{name}_weight_bwd", T * h * 2 * w + h * w, kind=K.ADD),
                Op(f"{name}_weight_grad_mul", T * h * 3 * w, kind=K.ADD),
                Op(f"{name}_weight_grad_sum", T * h * w + h * w, kind=K.REDUCE)]
    chain_b = [Op(f"{name}_scale_bwd", T * h * 2 * r + T * r, kind=K.ADD),
               Op(f"{name}_rstd_grad_mul", T * h * 3 * r, kind=K.ADD),
               Op(f"{name}_rstd_grad_sum", T * h * r + T * r, kind=K.LAYERNORM),
               Op(f"{name}_rsqrt_bwd_pow", T * 2 * r), Op(f"{name}_rsqrt_bwd_mul", T * 2 * r),
               Op(f"{name}_rsqrt_bwd_grad", T * 3 * r),
               Op(f"{name}_mean_bwd", T * r + T * h * r, kind=K.ADD),
               Op(f"{name}_pow_bwd_copy", T * h * 2 * r),
               Op(f"{name}_pow_bwd_scale", T * h * 2 * r, kind=K.ADD),
               Op(f"{name}_pow_bwd_grad", T * h * 3 * r, kind=K.ADD),
               Op(f"{name}_grad_add", T * h * 3 * r, kind=K.ADD)]
    if pure:
        up, down = T * h * (e + r), T * h * (r + e)
        return ([Op(f"{name}_float", up, kind=K.CAST_UP), *chain_f,
                 Op(f"{name}_to_input", down, kind=K.CAST_DOWN), *weight_f],
                [*weight_b, Op(f"{name}_to_input_bwd", up, kind=K.CAST_UP), *chain_b,
                 Op(f"{name}_float_bwd", down, kind=K.CAST_DOWN)])
    fwd, bwd = chain_f + weight_f, weight_b + chain_b
    if c:
        fwd.append(Op(f"{name}_cast", T * h * (r + e), kind=K.CAST_DOWN))
        bwd.insert(0, Op(f"{name}_cast_bwd", T * h * (e + r), kind=K.CAST_UP))
    return fwd, bwd


def rotary_kernels(name: str, T: int, n: int, d: int, e: int) -> Kernels:
    """``apply_rotary_pos_emb`` on one tensor of ``n = T heads d`` elements (module
    docstring)."""
    cs = T * d * e  # the cos or sin table read by a mul
    fwd = [Op(f"{name}_rot_neg", n * e, kind=K.ADD), Op(f"{name}_rot_cat", 2 * n * e, kind=K.CAT),
           Op(f"{name}_sin", 2 * n * e + cs, kind=K.ADD),
           Op(f"{name}_cos", 2 * n * e + cs, kind=K.ADD),
           Op(f"{name}_rope_add", 3 * n * e, kind=K.ADD)]
    bwd = [Op(f"{name}_cos_bwd", 2 * n * e + cs, kind=K.ADD),
           Op(f"{name}_sin_bwd", 2 * n * e + cs, kind=K.ADD),
           Op(f"{name}_rot_neg_bwd", n * e, kind=K.ADD),
           *(k for half in ("x1", "x2") for k in (
               Op(f"{name}_{half}_slice_bwd_fill", n * e, kind=K.FILL),
               Op(f"{name}_{half}_slice_bwd_copy", n * e))),
           Op(f"{name}_grad_add1", 3 * n * e, kind=K.ADD),
           Op(f"{name}_grad_add2", 3 * n * e, kind=K.ADD)]
    return fwd, bwd


def gqa_sdpa_kernels(T: int, q: int, kv: int, e: int) -> Kernels:
    """SDPA over ``q = a d`` query and ``kv = kv_heads d`` key/value elements per token:
    ``repeat_kv`` of K and V where ``kv < q`` (a strided copy each; backward the sum over
    the repeats), then the GPT block's strided copies at ``q`` wide, the gradients of Q, K, V
    stacked and permuted back at ``q + 2 kv`` (module docstring)."""
    fwd: list[Op] = []
    bwd: list[Op] = []
    if kv < q:
        fwd += [Op(f"repeat_kv_{x}", T * (kv + q) * e, kind=K.PERMUTE) for x in "kv"]
        bwd += [Op(f"repeat_kv_{x}_bwd", T * (q + kv) * e, kind=K.REDUCE) for x in "kv"]
    f, b = eager.sdpa_kernels(T, q, e)
    width = q + 2 * kv
    b = [k if not k.name.startswith("qkv_grad_") else Op(k.name, T * width * 2 * e, kind=k.kind)
         for k in b]
    return fwd + f, b + bwd


def glu_kernels(name: str, T: int, f: int, e: int) -> Kernels:
    """``act(gate) * up`` over ``T x f`` 16-bit elements from the fused gate-up GEMM's output
    (module docstring)."""
    fwd = [Op(f"{name}_act", T * f * 2 * e, kind=K.GELU),
           Op(f"{name}_mul", T * f * 3 * e, kind=K.ADD)]
    bwd = [Op(f"{name}_mul_bwd_gate", T * f * 3 * e, kind=K.ADD),
           Op(f"{name}_mul_bwd_up", T * f * 3 * e, kind=K.ADD),
           Op(f"{name}_act_bwd", T * f * 3 * e, kind=K.GELU_BWD),
           Op(f"{name}_gate_up_grad_cat", T * f * 4 * e, kind=K.CAT)]
    return fwd, bwd


def _norm(model: Decoder, name: str, T: int, e: int, c: int) -> Kernels:
    from accelsim.workload.transformer_parts import NormKind

    if model.config.norm is NormKind.RMSNORM:
        return rmsnorm_kernels(name, T, model.hidden, e, c)
    return eager.norm_kernels(name, T, model.hidden, e, c)


def layer_parts(model: Decoder, T: int, e: int, c: int, mlp: list[Kernels] | None = None
                ) -> list[Kernels]:
    """Each part's (forward, backward) kernels of one layer on ``T`` tokens, in order; ``mlp``
    (an MoE block's, :func:`accelsim.engine.eager_moe.moe_parts`) in place of the MLP's."""
    from accelsim.workload.transformer_parts import MlpKind, PositionKind

    cfg, h, f, d = model.config, model.hidden, model.ffn_size, model.head_dim
    a, kv = model.heads, model.kv_heads
    parts = [_norm(model, "norm1", T, e, c)]
    if cfg.positions is PositionKind.ROTARY:
        parts += [rotary_kernels("q", T, T * a * d, d, e), rotary_kernels("k", T, T * kv * d,
                                                                          d, e)]
    parts += [gqa_sdpa_kernels(T, a * d, kv * d, e),
              eager.residual_kernels("residual_add1", "proj_out", T, h, e, c),
              _norm(model, "norm2", T, e, c)]
    gated = cfg.mlp is not MlpKind.GELU
    if mlp is None:
        parts.append(glu_kernels("mlp", T, f, e) if gated else eager.gelu_kernels("gelu", T, f,
                                                                                    e))
    else:
        parts += mlp
    parts.append(eager.residual_kernels("residual_add2", "fc2_out", T, h, e, c))
    width = (2 if gated else 1) * f
    linears = [("qkv", (a + 2 * kv) * d * h, (a + 2 * kv) * d * cfg.qkv_bias),
               ("proj", a * d * h, h * cfg.out_bias)]
    if mlp is None:
        linears += [("fc1", h * width, width * cfg.mlp_bias), ("fc2", f * h, h * cfg.mlp_bias)]
    parts += [eager.linear_kernels(name, T, nw, nb, e, c) for name, nw, nb in linears]
    return parts


def head_parts(model: Decoder, T: int, e: int, c: int) -> list[Kernels]:
    """The kernels outside the layers, per micro-batch: the embedding (and a learned position
    table's gather and add), the final norm, the loss (:func:`accelsim.engine.eager.
    loss_kernels`), the table's gradient, and a tied head's weight cast or an untied head's
    (a linear layer)."""
    from accelsim.workload.transformer_parts import PositionKind

    h, V, r, tied = model.hidden, model.vocab, eager.residual_bytes(e, c), \
        model.config.tied_embeddings
    embed = ([Op("embedding", T * h * 4 * r), Op("embedding_add", T * h * 3 * r, kind=K.ADD)]
             if model.config.positions is PositionKind.LEARNED
             else [Op("embedding", T * h * 2 * r)])
    parts = [(embed, []), _norm(model, "norm_f", T, e, c), eager.loss_kernels(T, T * V, e),
             eager.table_kernels(T, h, V * h, e, c, tied=tied)]
    if not tied:
        parts.append(eager.linear_kernels("lm_head", T, V * h, 0, e, c))
    return parts


def activation_bytes_per_layer(model: Decoder, T: int, e: int, c: int,
                               mlp: float | None = None) -> float:
    """What autograd saves for one layer on ``T`` tokens (bytes): per RMSNorm its fp32 input
    and its normalized output on the residual stream's format (autocast ``c``: fp32; else the
    16-bit copy the weight multiplies), a LayerNorm its input (the stream's format), the 16-bit inputs of the four linear
    layers, with rotary the QKV projection's output (Q and K are views of it) and the two
    rotated halves, SDPA's Q, K, V (repeated), output and fp32 log-sum-exp per head, and the
    MLP's activation input (a gated MLP: gate and up, and the activation's output); ``mlp``
    bytes (an MoE block's, :func:`accelsim.engine.eager_moe.activation_bytes`) in place of
    the MLP's (its two linear inputs and the activation's)."""
    from accelsim.workload.transformer_parts import MlpKind, NormKind, PositionKind

    cfg, h, f, d = model.config, model.hidden, model.ffn_size, model.head_dim
    a, kv = model.heads, model.kv_heads
    r = eager.residual_bytes(e, c)
    norms = 2 * ((F32 + r) if cfg.norm is NormKind.RMSNORM else r) * h
    linear_in = e * (h + a * d)
    rot = e * ((a + 2 * kv) + (a + kv)) * d if cfg.positions is PositionKind.ROTARY else 0
    sdpa = 4 * a * d * e + a * F32
    dense = T * (e * (h + f) + (3 if cfg.mlp is not MlpKind.GELU else 1) * f * e)
    return T * (norms + linear_in + rot + sdpa) + (dense if mlp is None else mlp)
