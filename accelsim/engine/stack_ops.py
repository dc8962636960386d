"""A software stack's kernels for the op kinds it has rules for: the one lowering applies them
to a layer list (``predict``, ``explore``) as the transformer path applies them to the ops it
builds, so one model described either way gets one answer under one stack (docs/engine.md,
"The same GPT-2 step three ways").

* the vocabulary: a GEMM whose output width is the workload's vocabulary (the rows of its
  largest embedding table: the LM head) is padded to the stack's ``vocab_multiple``
  (Megatron-LM pads it; eager PyTorch runs what the model states, on cuBLAS's unaligned
  path); the head keeps only its input for the backward pass (its other operand is the tied
  embedding table, a parameter);
* attention (an ``attention`` layer: an SDPA node): the stack's attention kernel,
  :func:`attention_times`, the function the transformer path times its attention with;
* a fused stack's element-wise layers (LayerNorm, GELU, the residual bias-dropout-add) at
  :data:`~accelsim.engine.stack.FUSED_ELEMENTWISE_BYTES` per element and the loss at
  :data:`~accelsim.engine.stack.FUSED_LOSS_BYTES` per logit, at the stack's stream bandwidth,
  and their activations as Korthikanti et al. count them (the add's 1-byte dropout mask, the
  loss's 16-bit logits and fp32 softmax);
* every other kind (conv, BatchNorm, ReLU, pooling, embeddings, an eager stack's element-wise
  layers) stays on perf's per-layer model.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from accelsim.arch import System
from accelsim.arch.schemes import Scheme
from accelsim.engine.graph import (AttentionOp, attention_parts, attention_precision,
                                   flash_attention_parts)
from accelsim.engine.layer_ops import AttentionLayerOp, LayerOp, LossOp, MatmulOp
from accelsim.arch.states import ParamCounts, StateFormats
from accelsim.engine.memory import LOGIT_BYTES, model_state_bytes
from accelsim.engine.plan import LlmParams
from accelsim.errors import InputError
from accelsim.engine.stack import (FUSED_ELEMENTWISE_BYTES, FUSED_LOSS_BYTES, AttentionKernel,
                                   KernelKind, Stack)
from accelsim.perf.gemm import OPERAND_BYTES
from accelsim.workload import Workload
from accelsim.workload.model import Layer

#: one phase of a stack-timed op: (phase, seconds, FLOPs, HBM bytes, bound)
StackPhase = tuple[str, float, float, float, str]

def attention_op(op: AttentionLayerOp) -> AttentionOp:
    """The transformer path's :class:`~accelsim.engine.graph.AttentionOp` of an attention
    layer, at attention's precision (:func:`~accelsim.engine.graph.attention_precision`)."""
    la = op.layer
    return AttentionOp(batch=op.batch, heads=la.heads, seq=la.tokens, head_dim=la.head_dim,
                       kv_heads=la.kv_heads, causal=la.causal, flash=la.flash_attention,
                       precision=attention_precision(op.precision))


def stack_formats(scheme: Scheme, optimizer: str, stack: Stack) -> StateFormats:
    """Every state's format under ``scheme`` and ``optimizer`` as the stack keeps them
    (autocast: fp32 weights that are the master copy, :func:`accelsim.engine.eager.
    autocast_formats`)."""
    from accelsim.engine.eager import autocast_formats

    formats = scheme.formats(optimizer)
    return autocast_formats(formats, optimizer) if stack.autocast else formats


def attention_times(system: System, attn: AttentionOp, stack: Stack, stream_Bps: float
                    ) -> tuple[AttentionOp, tuple[StackPhase, StackPhase]]:
    """The op the stack runs for ``attn`` (a flash-kernel stack: flash) and its forward and
    backward (seconds, FLOPs, bytes, bound): the flash kernel model, or the two GEMMs on the
    GEMM model plus (unfused) the score pass at ``stream_Bps``."""
    if not system.chip.core.supports(attn.precision):  # bf16 attention on a chip without it
        attn = replace(attn, precision=attention_precision(attn.precision, system.chip.core))
    if stack.attention is AttentionKernel.FLASH:  # one fused kernel (SDPA)
        attn = replace(attn, flash=True)
        f, b, bound = flash_attention_parts(system, attn, stack.flash, stream_Bps,
                                            stack.floor_s(KernelKind.ATTENTION))
        bflops, bbytes = attn.backward_flops, attn.backward_bytes
    else:
        f, b, bound = attention_parts(system, attn, stream_Bps)
        bflops, bbytes = 2 * attn.flops, 2 * attn.bytes
    return attn, (("fwd", f, attn.flops, attn.bytes, bound),
                  ("bwd", b, bflops, bbytes, bound))


def vocabulary(workload: Workload) -> int:
    """The workload's vocabulary: the rows of its largest embedding table (0: none)."""
    return max((la.vocab for la in workload.layers if la.kind == "embedding"), default=0)


def padded_vocab(vocab: int, stack: Stack) -> int:
    """The vocabulary as the stack pads it (a multiple of ``vocab_multiple``; one GPU)."""
    return -(-vocab // stack.vocab_multiple) * stack.vocab_multiple


def is_vocab_head(layer: Layer, vocab: int, stack: Stack) -> bool:
    """A GEMM layer whose output width is the vocabulary, stated or padded: the LM head."""
    width = layer.n if layer.kind == "matmul" else layer.out_features
    return bool(vocab) and layer.kind in ("matmul", "linear") and width in (
        vocab, padded_vocab(vocab, stack))


def pad_head(layer: Layer, vocab: int, stack: Stack) -> Layer:
    """``layer`` with the vocabulary padded to the stack's multiple if it is the LM head."""
    if not is_vocab_head(layer, vocab, stack):
        return layer
    padded = padded_vocab(vocab, stack)
    if layer.kind == "matmul":
        return replace(layer, n=padded)
    return replace(layer, out_features=padded)


def stack_phases(system: System, op: LayerOp, stack: Stack, stream_Bps: float, *,
                 fused: bool) -> tuple[StackPhase, ...] | None:
    """The phases of ``op`` as the stack runs them on one chip (``fused``: the layer list's
    element-wise layers fused, the stack's and the front-end's fusion), or None where the stack
    has no rule for the op's kind (perf's per-layer model times it)."""
    if isinstance(op, AttentionLayerOp):
        return attention_times(system, attention_op(op), stack, stream_Bps)[1]
    if not (fused and stack.fused):
        return None
    if isinstance(op, LossOp):
        logits = op.batch * math.prod(op.layer.shape)
        f, b = (n * logits for n in FUSED_LOSS_BYTES)
        return ("fwd", f / stream_Bps, 0.0, f, "memory"), ("bwd", b / stream_Bps, 0.0, b,
                                                           "memory")
    per = FUSED_ELEMENTWISE_BYTES.get(op.kind)
    if per is None:
        return None
    f = per * op.batch * math.prod(op.layer.shape)
    return ("fwd", f / stream_Bps, 0.0, f, "memory"), ("bwd", 2 * f / stream_Bps, 0.0, 2 * f,
                                                       "memory")


def saved_bytes_per_sample(op: LayerOp, stack: Stack, vocab: int, *, fused: bool
                           ) -> float | None:
    """Activation bytes one sample of ``op`` keeps for the backward pass under the stack, or
    None where the layer model's count stands: attention its Q, K, V (and, without a flash
    kernel, the 5 bytes per score Korthikanti counts: softmax output, dropout mask and output);
    the LM head its input; a fused stack's residual add its 1-byte dropout mask and the loss
    its logits (:data:`accelsim.engine.memory.LOGIT_BYTES`)."""
    la = op.layer
    if isinstance(op, AttentionLayerOp):
        a = attention_op(op)
        scores = 0 if (a.flash or stack.attention is AttentionKernel.FLASH) else 5
        return la.input_elements * OPERAND_BYTES[a.precision] + scores * la.heads * la.tokens**2
    if isinstance(op, MatmulOp) and is_vocab_head(la, vocab, stack):
        return la.m * la.k * la.count * OPERAND_BYTES[op.precision]
    if not (fused and stack.fused):
        return None
    if isinstance(op, LossOp):
        return math.prod(la.shape) * LOGIT_BYTES
    if op.kind == "add":
        return math.prod(la.shape) * 1.0
    return None


def layer_list_memory_bytes(workload: Workload, ops: tuple[LayerOp, ...], batch: int,
                            formats: StateFormats, saved: list[float | None], *, dp,
                            mp=1.0) -> float:
    """Bytes one chip holds for a layer list under a stack (arrays indexed by layer, as
    :func:`accelsim.engine.memory.layer_memory_bytes`): at global ``batch`` over ``dp``
    data-parallel x ``mp`` model-parallel chips per layer (scalars or per-layer arrays), its
    1/mp slice of each layer's parameters with the transformer path's model states
    (:func:`accelsim.engine.memory.model_state_bytes`: a linear or convolution weight matrix at
    the scheme's bytes, the rest at its other's) and the activations of its ``ceil(batch /
    dp)`` samples, the stack's count where it has one (``saved``, per sample; else the
    layer's own), element-wise layers split with their channels."""
    per_lin = sum(model_state_bytes(ParamCounts(linear=1.0, rest=0.0), formats, 0, 1))
    per_rest = sum(model_state_bytes(ParamCounts(linear=0.0, rest=1.0), formats, 0, 1))
    states, act, ew = [], [], []
    for op, kept in zip(ops, saved):
        la = op.layer
        lin = 0
        if la.kind in ("conv", "linear"):
            lin = la.n_params - la.bias * (la.out_channels if la.kind == "conv"
                                           else la.out_features)
        states.append(lin * per_lin + (la.n_params - lin) * per_rest)
        act.append(la.saved_elements * OPERAND_BYTES[op.precision] if kept is None else kept)
        ew.append(not la.is_gemm)
    mp = np.asarray(mp, dtype=np.float64)
    per_chip = np.ceil(batch / np.asarray(dp, dtype=np.float64)) * np.asarray(act) \
        / np.where(ew, mp, 1.0)
    return float((np.asarray(states) / mp).sum() + per_chip.sum())


def refuse_without_stack(op: LayerOp) -> None:
    """An attention layer has no time without a stack's attention kernel: InputError."""
    if op.kind == "attention":
        raise InputError(f"layer {op.name!r}: an attention layer runs on a software stack's "
                         "attention kernel: give a stack (--stack)")


def stack_columns(system: System, op: LayerOp, params: LlmParams | None, mappings,
                  index: int) -> dict[str, np.ndarray] | None:
    """Layer ``index``'s ``op`` under each data-parallel ``mappings`` as the stack of
    ``params`` runs it (the ``chip_dp x chip_mp`` chips of a mapping share its samples), in the
    columns of perf's :func:`~accelsim.perf.layer_model.evaluate_layer` (``explore``'s
    points), or None where there is no stack or it has no rule for the op's kind (an attention
    layer needs one: InputError)."""
    if params is None:
        return refuse_without_stack(op)
    stack, fused = params.stack, system.chip.fusion
    bw = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    if stack_phases(system, replace(op, batch=1), stack, bw, fused=fused) is None:
        return None
    cols: dict[str, list] = {}
    for j, m in enumerate(mappings):
        share = m.chip_dp * m.chip_mp
        ok = share <= system.chips and m.chip_dp <= op.batch
        for phase, t, fl, by, bd in stack_phases(system, replace(op, batch=-(-op.batch // share)),
                                                 stack, bw, fused=fused):
            row = dict(layer=op.name, kind=op.kind, precision=op.precision, chip_dp=m.chip_dp,
                       chip_mp=m.chip_mp, core_dp=m.core_dp, core_mp=m.core_mp, dataflow="",
                       M=0, N=0, K=0, count=0, flops=fl * share, compute_s=0.0,
                       scratchpad_s=0.0, memory_s=by / bw, sfu_s=0.0, comm_s=0.0,
                       cache_s=0.0, latency_s=0.0, layout_s=0.0, algorithm="",
                       time_s=t if ok else math.inf, bound=bd, tile_m=0, tile_n=0, tile_k=0,
                       feasible=ok, reason="" if ok else "more chips than samples",
                       phase=phase, index=index, mapping_id=j)
            for k, v in row.items():
                cols.setdefault(k, []).append(v)
    return {k: np.asarray(v, dtype=object if isinstance(v[0], str) else None)
            for k, v in cols.items()}


def stack_memory(workload: Workload, ops: tuple[LayerOp, ...], batch: int, scheme: Scheme,
                 optimizer: str, stack: Stack, *, fused: bool):
    """``(dp, mp) -> bytes``: :func:`layer_list_memory_bytes` of the lowered ``ops`` at global
    ``batch`` under the stack (its state formats and stash), for a plan's data- and
    model-parallel split per layer."""
    vocab = vocabulary(workload)
    saved = [saved_bytes_per_sample(op, stack, vocab, fused=fused) for op in ops]
    formats = stack_formats(scheme, optimizer, stack)
    return lambda dp, mp=1.0: layer_list_memory_bytes(workload, ops, batch, formats, saved,
                                                      dp=dp, mp=mp)
