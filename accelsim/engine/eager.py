"""What eager PyTorch launches for one GPT layer, and what it keeps: the element-wise kernels
of the ``pytorch`` stack (:data:`accelsim.engine.stack.PYTORCH`) with the HBM bytes each reads
and writes, the activations autograd saves, and the loss's logits.

The model is the GPT of ``benchmarks/device_h100_transformer.py`` (nanoGPT's block: pre-norm
LayerNorm, fused QKV ``nn.Linear``, SDPA, projection, GELU MLP, residual adds, no dropout) run
one op at a time. Under bf16/fp16 autocast (PyTorch's autocast op lists: ``linear`` and
``matmul`` in 16 bits, ``layer_norm`` in fp32) the residual stream stays fp32 (an fp32 tensor
plus a 16-bit one is fp32), every LayerNorm reads and writes fp32 and its output is cast to 16
bits for the next linear layer, every fp32 weight and bias is cast to 16 bits on each forward
(and its 16-bit gradient back to fp32). Linear biases run in the cuBLASLt epilogue (no kernel
of their own forward; their gradient is a reduction over the tokens). Without autocast (fp32 or
TF32 schemes) everything is 4 bytes and no cast runs.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from accelsim.arch.model import OPERAND_BYTES
from accelsim.arch.states import StateFormats
from accelsim.engine.graph import ElementwiseOp, elementwise_s
from accelsim.engine.plan import Plan
from accelsim.engine.stack import EagerKernel as K
from accelsim.engine.stack import kernel_Bps
from accelsim.errors import InputError
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder

#: bytes of one fp32 element (the residual stream, LayerNorm, master weights, the loss)
F32 = 4


def _sizes(model: GptConfig | Decoder, micro_batch: int, precision: str
           ) -> tuple[int, int, int, int, int, int]:
    """(T tokens, h, f, e activation bytes, r residual bytes, c 1 under autocast else 0)."""
    e = OPERAND_BYTES[precision]
    return (model.seq * micro_batch, model.hidden, model.ffn_size, e, F32,
            1 if e < F32 else 0)


def gpt_block(model: GptConfig | Decoder) -> tuple[bool, bool]:
    """(biases, learned positions) of a model built of the GPT block these kernels list
    (LayerNorm, GELU MLP, multi-head attention): GPT-2/3 (biases, a position table) or an
    MPT-style block (no biases; ALiBi or no positions, no table). Anything else is an
    InputError naming what differs."""
    if isinstance(model, GptConfig):
        return True, True
    from accelsim.workload.transformer_parts import MlpKind, NormKind, PositionKind

    c = model.config
    odd = [name for name, bad in (
        ("a non-GELU MLP", c.mlp is not MlpKind.GELU), ("RMSNorm", c.norm is not NormKind.LAYERNORM),
        ("grouped-query attention", c.kv_heads != c.heads or c.mla is not None),
        ("MoE", c.moe is not None), ("rotary positions", c.positions is PositionKind.ROTARY),
        ("sliding-window attention", c.sliding_window is not None),
        ("a parallel residual", c.parallel_residual),
        ("biases on some linear layers only", len({c.qkv_bias, c.out_bias, c.mlp_bias}) > 1))
        if bad]
    if odd:
        raise InputError(f"the pytorch stack's eager kernels are the GPT block's (LayerNorm, "
                         f"GELU MLP, multi-head attention; learned or no positions): "
                         f"{c.name} has {', '.join(odd)}")
    return c.mlp_bias, c.positions is PositionKind.LEARNED


def layer_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str
                  ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) element-wise kernels of one layer and micro-batch, one op each
    (a block without biases: no bias gradients or casts)."""
    T, h, f, e, r, c = _sizes(model, micro_batch, precision)
    biased = gpt_block(model)[0]
    w = (("qkv", 3 * h * h, 3 * h), ("proj", h * h, h), ("fc1", h * f, f), ("fc2", f * h, h))
    add = K.ADD_MIXED if c else K.ADD  # fp32 residual + a 16-bit branch under autocast
    fwd: list[ElementwiseOp] = [
        ElementwiseOp("ln1", T * h * 2 * r, kind=K.LAYERNORM),
        # SDPA's cuDNN kernel takes Q, K, V dense: each is copied out of the permuted QKV view
        *(ElementwiseOp(f"{x}_contiguous", T * h * 2 * e, kind=K.PERMUTE) for x in "qkv"),
        ElementwiseOp("attn_out_copy", T * h * 2 * e, kind=K.PERMUTE),  # (b,a,s,d)->(b,s,h)
        ElementwiseOp("residual_add1", T * h * (2 * r + e), kind=add),
        ElementwiseOp("ln2", T * h * 2 * r, kind=K.LAYERNORM),
        ElementwiseOp("gelu", T * f * 2 * e, kind=K.GELU),
        ElementwiseOp("residual_add2", T * h * (2 * r + e), kind=add),
    ]
    bwd: list[ElementwiseOp] = [
        ElementwiseOp("gelu_bwd", T * f * 3 * e, kind=K.GELU_BWD),
        ElementwiseOp("ln2_bwd", T * h * 3 * r, kind=K.LAYERNORM_BWD),
        ElementwiseOp("ln2_bwd_weights", T * h * 2 * r, kind=K.LAYERNORM_BWD),
        ElementwiseOp("residual_grad_add1", T * h * 3 * r, kind=K.ADD),
        ElementwiseOp("attn_out_copy_bwd", T * h * 2 * e, kind=K.PERMUTE),
        # the cuDNN backward takes Q, K, V, O and dO dense: five more strided copies (the
        # profile of GPT-2 small, accelsim/data/h100_device/breakdown.json: 123 strided
        # T x h copies per step, 10 per layer + 3)
        *(ElementwiseOp(f"{x}_contiguous_bwd", T * h * 2 * e, kind=K.PERMUTE)
          for x in ("q", "k", "v", "o", "do")),
        ElementwiseOp("qkv_grad_stack", T * 3 * h * 2 * e, kind=K.CAT),  # dQ, dK, dV
        ElementwiseOp("qkv_grad_permute", T * 3 * h * 2 * e, kind=K.PERMUTE),  # back to (b,s,3h)
        ElementwiseOp("ln1_bwd", T * h * 3 * r, kind=K.LAYERNORM_BWD),
        ElementwiseOp("ln1_bwd_weights", T * h * 2 * r, kind=K.LAYERNORM_BWD),
        ElementwiseOp("residual_grad_add2", T * h * 3 * r, kind=K.ADD),
    ]
    if biased:
        bwd += [ElementwiseOp(f"{name}_bias_grad", T * n * e, kind=K.REDUCE)
                for name, _, n in w]
    if c:
        fwd += [ElementwiseOp("ln1_cast", T * h * (r + e), kind=K.CAST_DOWN),
                ElementwiseOp("ln2_cast", T * h * (r + e), kind=K.CAST_DOWN)]
        bwd += [ElementwiseOp(f"{x}_cast_bwd", T * h * (r + e), kind=K.CAST_UP)
                for x in ("ln1", "ln2", "fc2_out", "proj_out")]
        for name, nw, nb in w:  # each forward casts the fp32 parameters; each backward back
            fwd.append(ElementwiseOp(f"{name}_weight_cast", nw * (F32 + e), kind=K.CAST_DOWN))
            bwd.append(ElementwiseOp(f"{name}_weight_grad_cast", nw * (e + F32),
                                     kind=K.CAST_UP))
            if biased:
                fwd.append(ElementwiseOp(f"{name}_bias_cast", nb * (F32 + e),
                                         kind=K.CAST_DOWN))
                bwd.append(ElementwiseOp(f"{name}_bias_grad_cast", nb * (e + F32),
                                         kind=K.CAST_UP))
    return tuple(fwd), tuple(bwd)


def head_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str
                 ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) element-wise kernels outside the layers, per micro-batch: the
    embeddings, the final LayerNorm, the tied LM-head weight's cast, and the loss as
    nanoGPT-style code writes it, ``cross_entropy(logits.float(), targets)``: the 16-bit logits
    cast to fp32, log-softmax, NLL; backward the NLL gradient (zero-filled, then scattered),
    the log-softmax gradient, the cast back; the embedding gradient accumulated with the
    head's (tied)."""
    T, h, f, e, r, c = _sizes(model, micro_batch, precision)
    N, Vh = T * model.vocab, model.vocab * h
    if gpt_block(model)[1]:  # the token and the position gathers, added
        fwd = [ElementwiseOp("embedding", T * h * (2 * r + 2 * r)),
               ElementwiseOp("embedding_add", T * h * 3 * r, kind=K.ADD)]
    else:
        fwd = [ElementwiseOp("embedding", T * h * 2 * r)]
    fwd += [ElementwiseOp("ln_f", T * h * 2 * r, kind=K.LAYERNORM),
            ElementwiseOp("log_softmax", N * 2 * F32, kind=K.SOFTMAX),
            ElementwiseOp("nll", T * F32)]
    bwd = [ElementwiseOp("nll_bwd_fill", N * F32, kind=K.FILL),
           ElementwiseOp("nll_bwd_scatter", T * F32),
           ElementwiseOp("log_softmax_bwd", N * 3 * F32, kind=K.SOFTMAX_BWD),
           ElementwiseOp("ln_f_bwd", T * h * 3 * r, kind=K.LAYERNORM_BWD),
           ElementwiseOp("ln_f_bwd_weights", T * h * 2 * r, kind=K.LAYERNORM_BWD),
           ElementwiseOp("embedding_bwd", T * h * r + Vh * F32),  # zero-fill + index add
           ElementwiseOp("tied_grad_add", Vh * 3 * F32, kind=K.ADD)]
    if c:
        fwd += [ElementwiseOp("ln_f_cast", T * h * (r + e), kind=K.CAST_DOWN),
                ElementwiseOp("lm_head_weight_cast", Vh * (F32 + e), kind=K.CAST_DOWN),
                ElementwiseOp("logits_float", N * (e + F32), kind=K.CAST_UP)]
        bwd += [ElementwiseOp("logits_float_bwd", N * (F32 + e), kind=K.CAST_DOWN),
                ElementwiseOp("ln_f_cast_bwd", T * h * (e + r), kind=K.CAST_UP),
                ElementwiseOp("lm_head_weight_grad_cast", Vh * (e + F32), kind=K.CAST_UP)]
    return tuple(fwd), tuple(bwd)


def activation_bytes_per_layer(model: GptConfig | Decoder, micro_batch: int, precision: str
                               ) -> float:
    """What autograd saves for one layer's backward pass (bytes, one micro-batch): the fp32
    LayerNorm inputs (2), the 16-bit inputs of the four linear layers, SDPA's Q, K, V, output
    and fp32 log-sum-exp per head, and GELU's input (FC1's output; its output is FC2's input)."""
    T, h, f, e, r, _ = _sizes(model, micro_batch, precision)
    return T * (2 * r * h + 7 * e * h + 2 * e * f + F32 * model.heads)


def head_activation_bytes(model: GptConfig | Decoder, micro_batch: int, precision: str
                          ) -> float:
    """The rest at the peak (the start of the loss's backward pass), one micro-batch: the final
    LayerNorm's fp32 input and 16-bit output, the head weight's 16-bit copy, and per logit the
    16-bit logits, the saved fp32 log-softmax, the NLL gradient and the log-softmax gradient
    being written (e + 12 bytes)."""
    T, h, f, e, r, c = _sizes(model, micro_batch, precision)
    return T * h * (r + e) + c * model.vocab * h * e + T * model.vocab * (e + 3 * F32)


def stream_s(kernels: tuple[ElementwiseOp, ...], hbm_Bps: float, floor_s: float,
             sm: float = 1.0) -> tuple[float, float]:
    """(seconds, bytes) of ``kernels`` run one after another, each at its kind's bandwidth on
    a chip whose plain stream reaches ``hbm_Bps`` and whose SM-side rate is ``sm`` x the
    H100's (:func:`accelsim.engine.stack.kernel_Bps`, measured), and taking at least the
    per-call floor ``floor_s``."""
    return (sum(elementwise_s(k, kernel_Bps(k.kind, hbm_Bps, sm), floor_s) for k in kernels),
            sum(k.bytes for k in kernels))


def check_plan(model: Decoder, plan: Plan, formats: StateFormats) -> None:
    """Raise InputError for what the eager stack does not run: tensor, pipeline or sequence
    parallelism and selective recomputation (Megatron-LM's; eager PyTorch here is one GPU, DDP
    or FSDP, with or without activation checkpointing of whole blocks), 8-bit GEMMs
    (Transformer Engine's: ``--stack megatron``), and a model other than the GPT block whose
    kernels this module lists (:func:`gpt_block`)."""
    gpt_block(model)
    used = [f"{k} {v}" for k, v, off in (("tp", plan.tp, 1), ("pp", plan.pp, 1),
                                         ("sequence_parallel", plan.sequence_parallel, False))
            if v != off] + (["recompute selective"] if plan.recompute == "selective" else [])
    if used:
        raise InputError(f"the pytorch stack is eager PyTorch on one GPU, DDP or FSDP: "
                         f"{', '.join(used)} is Megatron-LM's (use the megatron stack)")
    if OPERAND_BYTES[formats.gemm_precision] < 2:
        raise InputError(f"the pytorch stack runs 16- or 32-bit GEMMs (autocast); "
                         f"{formats.name}'s {formats.gemm_precision} GEMMs run under Transformer "
                         "Engine (the megatron stack)")


def autocast_formats(formats: StateFormats, optimizer: str) -> StateFormats:
    """The training states of a 16-bit scheme under autocast: the fp32 scheme's (fp32
    weights that are the master copy, fp32 gradients and moments, fp32 gradient all-reduce
    under DDP) with the scheme's GEMM precision, 16-bit activations, and the 16-bit weight
    copies each forward makes and autograd keeps for the backward pass (2 bytes per linear
    weight, ``fp8_weight_cache_bytes``). 32-bit schemes are unchanged."""
    if OPERAND_BYTES[formats.gemm_precision] >= F32:
        return formats
    from accelsim.arch.schemes import get_scheme

    f32 = get_scheme("fp32").formats(optimizer)
    e = OPERAND_BYTES[formats.gemm_precision]
    return replace(f32, gemm_precision=formats.gemm_precision, act_gather_bytes=e,
                   act_reduce_bytes=e, saved_linear_input_bytes=e, fp8_weight_cache_bytes=e)


def activation_bytes(model: GptConfig | Decoder, plan: Plan, precision: str) -> float:
    """Saved activations of one GPU at the peak (every layer of every in-flight micro-batch,
    one micro-batch in flight without a pipeline, plus the head and loss). With activation
    checkpointing of every block (``recompute full``: ``checkpoint_wrapper``) each layer keeps
    its input (the fp32 residual stream under autocast) and the layer being recomputed holds
    its saved tensors once."""
    layer = activation_bytes_per_layer(model, plan.micro_batch, precision)
    if plan.recompute == "full":
        T, h, _, _, r, _ = _sizes(model, plan.micro_batch, precision)
        kept = model.layers * T * h * r + layer
    else:
        kept = model.layers * layer
    return kept + head_activation_bytes(model, plan.micro_batch, precision)
