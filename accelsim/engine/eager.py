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
TF32 schemes) everything is 4 bytes and no cast runs. A 16-bit run without autocast (FSDP2's
``param_dtype`` compute, :mod:`accelsim.engine.mixed_precision`) runs every op on 16-bit
tensors: a 16-bit residual stream and norms, 16-bit weights and their gradients, no weight
casts; the loss still over ``logits.float()``.
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


def residual_bytes(e: int, c: int) -> int:
    """Bytes per element of the residual stream, the norms and the weights (and their
    gradients) of a run whose activations take ``e``: fp32 under autocast (``c``), else
    ``e``."""
    return F32 if c else e


def sizes(model: GptConfig | Decoder, micro_batch: int, precision: str, autocast: bool = True
          ) -> tuple[int, int, int, int, int, int]:
    """(T tokens, h, f, e activation bytes, r residual bytes, c 1 under autocast else 0):
    ``autocast`` (the run's, :func:`accelsim.engine.mixed_precision.resolve`) applies to
    16-bit activations only."""
    e = OPERAND_BYTES[precision]
    c = 1 if autocast and e < F32 else 0
    return model.seq * micro_batch, model.hidden, model.ffn_size, e, residual_bytes(e, c), c


def gpt_block_differences(model: GptConfig | Decoder) -> list[str]:
    """What makes ``model`` other than the GPT block these kernels list (LayerNorm, GELU MLP,
    multi-head attention, learned or no positions, biases on all linear layers or none):
    empty for GPT-2/3 and an MPT-style block."""
    if isinstance(model, GptConfig):
        return []
    from accelsim.workload.transformer_parts import MlpKind, NormKind, PositionKind

    c = model.config
    return [name for name, bad in (
        ("a non-GELU MLP", c.mlp is not MlpKind.GELU), ("RMSNorm", c.norm is not NormKind.LAYERNORM),
        ("grouped-query attention", c.kv_heads != c.heads or c.mla is not None),
        ("MoE", c.moe is not None), ("rotary positions", c.positions is PositionKind.ROTARY),
        ("sliding-window attention", c.sliding_window is not None),
        ("a parallel residual", c.parallel_residual),
        ("biases on some linear layers only", len({c.qkv_bias, c.out_bias, c.mlp_bias}) > 1))
        if bad]


def gpt_block(model: GptConfig | Decoder) -> tuple[bool, bool]:
    """(biases, learned positions) of a model built of the GPT block these kernels list
    (LayerNorm, GELU MLP, multi-head attention): GPT-2/3 (biases, a position table) or an
    MPT-style block (no biases; ALiBi or no positions, no table). Anything else is an
    InputError naming what differs (other dense decoders run
    :mod:`accelsim.engine.eager_llama`'s kernels)."""
    if isinstance(model, GptConfig):
        return True, True
    from accelsim.workload.transformer_parts import PositionKind

    c = model.config
    odd = gpt_block_differences(model)
    if odd:
        raise InputError(f"the pytorch stack's eager kernels are the GPT block's (LayerNorm, "
                         f"GELU MLP, multi-head attention; learned or no positions): "
                         f"{c.name} has {', '.join(odd)}")
    return c.mlp_bias, c.positions is PositionKind.LEARNED


Kernels = tuple[list[ElementwiseOp], list[ElementwiseOp]]  # (forward, backward)


def norm_kernels(name: str, T: int, h: int, e: int, c: int) -> Kernels:
    """A LayerNorm over ``T`` vectors of ``h`` on the residual stream's format (input and
    weight gradients backward), its fp32 output cast to 16 bits under autocast (``c``) and
    its gradient back."""
    r = residual_bytes(e, c)
    fwd = [ElementwiseOp(name, T * h * 2 * r, kind=K.LAYERNORM)]
    bwd = [ElementwiseOp(f"{name}_bwd", T * h * 3 * r, kind=K.LAYERNORM_BWD),
           ElementwiseOp(f"{name}_bwd_weights", T * h * 2 * r, kind=K.LAYERNORM_BWD)]
    if c:
        fwd.append(ElementwiseOp(f"{name}_cast", T * h * (F32 + e), kind=K.CAST_DOWN))
        bwd.append(ElementwiseOp(f"{name}_cast_bwd", T * h * (F32 + e), kind=K.CAST_UP))
    return fwd, bwd


def residual_kernels(name: str, branch: str, T: int, h: int, e: int, c: int) -> Kernels:
    """The residual stream plus a ``branch`` output (fp32 plus 16 bits under autocast: a mixed
    add, and the branch's gradient cast back to 16 bits)."""
    r = residual_bytes(e, c)
    fwd = [ElementwiseOp(name, T * h * (2 * r + e), kind=K.ADD_MIXED if c else K.ADD)]
    bwd = [ElementwiseOp(name.replace("add", "grad_add"), T * h * 3 * r, kind=K.ADD)]
    if c:
        bwd.append(ElementwiseOp(f"{branch}_cast_bwd", T * h * (F32 + e), kind=K.CAST_UP))
    return fwd, bwd


def gelu_kernels(name: str, T: int, f: int, e: int) -> Kernels:
    """GELU over ``T x f`` 16-bit elements (read, write; backward also reads the input)."""
    return ([ElementwiseOp(name, T * f * 2 * e, kind=K.GELU)],
            [ElementwiseOp(f"{name}_bwd", T * f * 3 * e, kind=K.GELU_BWD)])


def linear_kernels(name: str, T: int, n_weight: int, n_bias: int, e: int, c: int) -> Kernels:
    """What a linear layer launches beside its GEMMs: its bias gradient (a reduction over the
    tokens; the forward bias runs in the cuBLASLt epilogue) and, under autocast, the casts of
    its fp32 weight and bias every forward and of their gradients back."""
    fwd: list[ElementwiseOp] = []
    bwd = [ElementwiseOp(f"{name}_bias_grad", T * n_bias * e, kind=K.REDUCE)] if n_bias else []
    if c:  # (a layer without a bias: no bias gradient or casts)
        fwd.append(ElementwiseOp(f"{name}_weight_cast", n_weight * (F32 + e), kind=K.CAST_DOWN))
        bwd.append(ElementwiseOp(f"{name}_weight_grad_cast", n_weight * (e + F32),
                                 kind=K.CAST_UP))
        if n_bias:
            fwd.append(ElementwiseOp(f"{name}_bias_cast", n_bias * (F32 + e), kind=K.CAST_DOWN))
            bwd.append(ElementwiseOp(f"{name}_bias_grad_cast", n_bias * (e + F32),
                                     kind=K.CAST_UP))
    return fwd, bwd


def sdpa_kernels(T: int, h: int, e: int) -> Kernels:
    """The strided copies around cuDNN's SDPA kernels on ``T`` tokens of ``h`` = heads x head
    dim: Q, K, V made dense from the permuted QKV view and the output back to (b, s, h)
    forward; the backward takes Q, K, V, O and dO dense (the profile of GPT-2 small,
    accelsim/data/h100_device/breakdown.json: 123 strided T x h copies per step, 10 per layer
    + 3), and stacks and permutes dQ, dK, dV back."""
    fwd = [*(ElementwiseOp(f"{x}_contiguous", T * h * 2 * e, kind=K.PERMUTE) for x in "qkv"),
           ElementwiseOp("attn_out_copy", T * h * 2 * e, kind=K.PERMUTE)]
    bwd = [ElementwiseOp("attn_out_copy_bwd", T * h * 2 * e, kind=K.PERMUTE),
           *(ElementwiseOp(f"{x}_contiguous_bwd", T * h * 2 * e, kind=K.PERMUTE)
             for x in ("q", "k", "v", "o", "do")),
           ElementwiseOp("qkv_grad_stack", T * 3 * h * 2 * e, kind=K.CAT),
           ElementwiseOp("qkv_grad_permute", T * 3 * h * 2 * e, kind=K.PERMUTE)]
    return fwd, bwd


def layer_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str,
                  autocast: bool = True
                  ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) element-wise kernels of one layer and micro-batch, one op each
    (a block without biases: no bias gradients or casts)."""
    T, h, f, e, r, c = sizes(model, micro_batch, precision, autocast)
    b = 1 if gpt_block(model)[0] else 0
    parts = [norm_kernels("ln1", T, h, e, c), sdpa_kernels(T, h, e),
             residual_kernels("residual_add1", "proj_out", T, h, e, c),
             norm_kernels("ln2", T, h, e, c), gelu_kernels("gelu", T, f, e),
             residual_kernels("residual_add2", "fc2_out", T, h, e, c)]
    parts += [linear_kernels(name, T, nw, nb, e, c) for name, nw, nb in (
        ("qkv", 3 * h * h, 3 * h * b), ("proj", h * h, h * b), ("fc1", h * f, f * b),
        ("fc2", f * h, h * b))]
    return flat(parts)


def flat(parts: list[Kernels]) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) kernels of ``parts`` in order."""
    return (tuple(k for fwd, _ in parts for k in fwd),
            tuple(k for _, bwd in parts for k in bwd))


def loss_kernels(T: int, N: int, e: int) -> Kernels:
    """``cross_entropy(logits.float(), targets)`` over ``N`` logits of ``T`` tokens: 16-bit
    logits cast to fp32 (autocast's fp32 op, or the model's own ``.float()`` without it),
    log-softmax, NLL; backward the NLL gradient (zero-filled, then scattered), the log-softmax
    gradient, the cast back."""
    fwd = [ElementwiseOp("log_softmax", N * 2 * F32, kind=K.SOFTMAX),
           ElementwiseOp("nll", T * F32)]
    bwd = [ElementwiseOp("nll_bwd_fill", N * F32, kind=K.FILL),
           ElementwiseOp("nll_bwd_scatter", T * F32),
           ElementwiseOp("log_softmax_bwd", N * 3 * F32, kind=K.SOFTMAX_BWD)]
    if e < F32:
        fwd.append(ElementwiseOp("logits_float", N * (e + F32), kind=K.CAST_UP))
        bwd.append(ElementwiseOp("logits_float_bwd", N * (F32 + e), kind=K.CAST_DOWN))
    return fwd, bwd


def table_kernels(T: int, h: int, n_table: int, e: int, c: int, tied: bool) -> Kernels:
    """The vocabulary table's backward (its gradient zero-filled, then the rows index-added;
    the weights' format) and, ``tied`` to the LM head, the head's weight cast every forward,
    its gradient cast back (autocast) and added to the table's."""
    w = residual_bytes(e, c)
    fwd: list[ElementwiseOp] = []
    bwd = [ElementwiseOp("embedding_bwd", T * h * w + n_table * w)]
    if tied:
        bwd.append(ElementwiseOp("tied_grad_add", n_table * 3 * w, kind=K.ADD))
        if c:
            fwd.append(ElementwiseOp("lm_head_weight_cast", n_table * (F32 + e),
                                     kind=K.CAST_DOWN))
            bwd.append(ElementwiseOp("lm_head_weight_grad_cast", n_table * (e + F32),
                                     kind=K.CAST_UP))
    return fwd, bwd


def head_kernels(model: GptConfig | Decoder, micro_batch: int, precision: str,
                 autocast: bool = True
                 ) -> tuple[tuple[ElementwiseOp, ...], tuple[ElementwiseOp, ...]]:
    """(forward, backward) element-wise kernels outside the layers, per micro-batch: the
    embeddings, the final LayerNorm, the tied LM-head weight's cast, and the loss as
    nanoGPT-style code writes it (:func:`loss_kernels`); the embedding gradient accumulated
    with the head's (tied)."""
    T, h, f, e, r, c = sizes(model, micro_batch, precision, autocast)
    embed = ([ElementwiseOp("embedding", T * h * (2 * r + 2 * r)),  # two gathers, added
              ElementwiseOp("embedding_add", T * h * 3 * r, kind=K.ADD)]
             if gpt_block(model)[1] else [ElementwiseOp("embedding", T * h * 2 * r)])
    parts = [(embed, []),
             norm_kernels("ln_f", T, h, e, c), loss_kernels(T, T * model.vocab, e),
             table_kernels(T, h, model.vocab * h, e, c, tied=True)]
    return flat(parts)


def activation_bytes_per_layer(model: GptConfig | Decoder, micro_batch: int, precision: str,
                               autocast: bool = True) -> float:
    """What autograd saves for one layer's backward pass (bytes, one micro-batch): the
    LayerNorm inputs (2; on the residual stream's format), the 16-bit inputs of the four linear
    layers, SDPA's Q, K, V, output and fp32 log-sum-exp per head, and GELU's input (FC1's
    output; its output is FC2's input)."""
    T, h, f, e, r, _ = sizes(model, micro_batch, precision, autocast)
    return T * (2 * r * h + 7 * e * h + 2 * e * f + F32 * model.heads)


def head_activation_bytes(model: GptConfig | Decoder, micro_batch: int, precision: str,
                          autocast: bool = True) -> float:
    """The rest at the peak (the start of the loss's backward pass), one micro-batch: the final
    LayerNorm's fp32 input and 16-bit output, the head weight's 16-bit copy, and per logit the
    16-bit logits, the saved fp32 log-softmax, the NLL gradient and the log-softmax gradient
    being written (e + 12 bytes)."""
    T, h, f, e, r, c = sizes(model, micro_batch, precision, autocast)
    return T * h * (r + e) + c * model.vocab * h * e + T * model.vocab * (e + 3 * F32)


def stream_s(kernels: tuple[ElementwiseOp, ...], hbm_Bps: float, floor_s: float,
             sm: float = 1.0) -> tuple[float, float]:
    """(seconds, bytes) of ``kernels`` run one after another, each at its kind's bandwidth on
    a chip whose plain stream reaches ``hbm_Bps`` and whose SM-side rate is ``sm`` x the
    H100's (:func:`accelsim.engine.stack.kernel_Bps`, measured), and taking at least the
    per-call floor ``floor_s``."""
    return (sum(elementwise_s(k, kernel_Bps(k.kind, hbm_Bps, sm), floor_s) for k in kernels),
            sum(k.bytes for k in kernels))


def check_plan(model: Decoder, plan: Plan, formats: StateFormats, torchao: bool = False
               ) -> None:
    """Raise InputError for what the eager stack does not run: tensor, pipeline or sequence
    parallelism and selective recomputation (Megatron-LM's; eager PyTorch here is one GPU, DDP
    or FSDP, with or without activation checkpointing of whole blocks), 8-bit GEMMs
    (Transformer Engine's: ``--stack megatron``) unless ``torchao`` runs them
    (:mod:`accelsim.engine.float8`). Which models the stacks' kernels express is
    :func:`accelsim.engine.pytorch_kernels.check_model`'s."""
    used = [f"{k} {v}" for k, v, off in (("tp", plan.tp, 1), ("pp", plan.pp, 1),
                                         ("sequence_parallel", plan.sequence_parallel, False))
            if v != off]
    if used:
        raise InputError(f"the pytorch stack is eager PyTorch on one GPU, DDP or FSDP: "
                         f"{', '.join(used)} is Megatron-LM's (use the megatron stack)")
    if plan.recompute == "selective":
        raise InputError("recompute selective is Megatron-LM's (attention's core recomputed; "
                         "use the megatron stack); on the pytorch stacks activation "
                         "checkpointing of chosen ops has no one definition and is not "
                         "modelled: use recompute full (every block checkpointed) or none")
    if OPERAND_BYTES[formats.gemm_precision] < 2 and not torchao:
        raise InputError(f"the pytorch stack runs 16- or 32-bit GEMMs (autocast) or torchao's "
                         f"FP8 (schemes torchao-fp8-tensorwise, torchao-fp8-rowwise); "
                         f"{formats.name}'s {formats.gemm_precision} GEMMs run under Transformer "
                         "Engine (the megatron stack)")


def pytorch_formats(formats: StateFormats, optimizer: str, autocast: bool = True
                    ) -> StateFormats:
    """The training states of a 16-bit scheme on the pytorch stacks: the fp32 scheme's (fp32
    weights that are the master copy, fp32 gradients and moments, fp32 gradient all-reduce
    under DDP) with the scheme's GEMM precision, 16-bit activations and, under ``autocast``,
    the 16-bit weight copies each forward makes and autograd keeps for the backward pass (2
    bytes per linear weight, ``fp8_weight_cache_bytes``; without autocast FSDP's gathered
    16-bit units are the compute copies, :mod:`accelsim.engine.fsdp`). 32-bit schemes, and
    schemes whose weights are already their fp32 master (torchao.float8's), are unchanged."""
    if OPERAND_BYTES[formats.gemm_precision] >= F32 or formats.weight_bytes >= F32:
        return formats
    from accelsim.arch.schemes import get_scheme

    f32 = get_scheme("fp32").formats(optimizer)
    e = OPERAND_BYTES[formats.gemm_precision]
    return replace(f32, gemm_precision=formats.gemm_precision, act_gather_bytes=e,
                   act_reduce_bytes=e, saved_linear_input_bytes=e,
                   fp8_weight_cache_bytes=e if autocast else 0)
