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
* an eager stack's (pytorch) layers launch what eager PyTorch launches for them
  (:mod:`accelsim.engine.eager`'s per-op kernels, the transformer path's inventory: fp32
  LayerNorms, mixed residual adds, GELU, the loss over ``logits.float()``, the embedding
  table's gradient, SDPA's strided copies, a linear layer's bias gradient and autocast's
  weight casts), each at its kind's measured bandwidth with the per-call floor, and keep what
  autograd keeps; a GEMM at least the stack's per-call floor;
* every other kind (conv, BatchNorm, ReLU, pooling) stays on perf's per-layer model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from accelsim.arch import System
from accelsim.arch.schemes import Scheme
from accelsim.engine.graph import (AttentionOp, attention_parts, attention_precision,
                                   flash_attention_parts)
from accelsim.engine.layer_ops import (AttentionLayerOp, EmbeddingOp, LayerOp, LinearOp, LossOp,
                                      MatmulOp)
from accelsim.arch.states import ParamCounts, StateFormats
from accelsim.engine.memory import LOGIT_BYTES, model_state_bytes
from accelsim.engine.plan import LlmParams
from accelsim.errors import InputError
from accelsim.engine import eager
from accelsim.engine.stack import (FUSED_ELEMENTWISE_BYTES, FUSED_LOSS_BYTES, AttentionKernel,
                                   KernelKind, Stack, sm_scale)
from accelsim.perf.gemm import OPERAND_BYTES
from accelsim.workload import Workload
from accelsim.workload.model import Layer

#: one phase of a stack-timed op: (phase, seconds, FLOPs, HBM bytes, bound)
StackPhase = tuple[str, float, float, float, str]


@dataclass(frozen=True)
class Rules:
    """A stack applied to one layer list on one chip: the stack, whether the list is a
    transformer's (it has an attention layer: the stack's element-wise kernels are a
    transformer's) and whether its fused kernels apply (:meth:`of`), the stream bandwidth of
    its element-wise kernels, the chip's SM rate (:func:`accelsim.engine.stack.sm_scale`),
    the workload's vocabulary and whether its LM head is the embedding table (tied)."""

    stack: Stack
    transformer: bool
    fused: bool
    stream_Bps: float
    sm: float
    vocab: int
    tied: bool

    @classmethod
    def of(cls, system: System, workload: Workload, params: LlmParams) -> Rules:
        """The rules for ``workload`` on ``system``'s chip. A stack's element-wise kernels are
        a transformer's (Megatron-LM fuses LayerNorm, bias-GeLU and bias-dropout-add around
        its attention and MLP blocks; eager PyTorch's inventory is the GPT block's): they
        apply to a layer list with an attention layer (the fused ones on a chip that fuses);
        a convolutional network's element-wise layers stay on perf's fusion rule (cuDNN's
        epilogues)."""
        vocab = vocabulary(workload)
        transformer = any(la.kind == "attention" for la in workload.layers)
        if params.stack.compiled and transformer:
            raise InputError(f"stack {params.stack.name}: its fused groups are a decoder's "
                             "(accelsim.engine.compiled); a layer list runs on megatron or "
                             "pytorch")
        return cls(params.stack, transformer,
                   system.chip.fusion and params.stack.fused and transformer,
                   system.chip.memory_bandwidth_Bps * params.memory_efficiency,
                   sm_scale(system.chip), vocab,
                   any(la.kind == "matmul" and is_vocab_head(la, vocab, params.stack)
                       for la in workload.layers))

def attention_op(op: AttentionLayerOp) -> AttentionOp:
    """The transformer path's :class:`~accelsim.engine.graph.AttentionOp` of an attention
    layer, at attention's precision (:func:`~accelsim.engine.graph.attention_precision`)."""
    la = op.layer
    return AttentionOp(batch=op.batch, heads=la.heads, seq=la.tokens, head_dim=la.head_dim,
                       kv_heads=la.kv_heads, causal=la.causal, flash=la.flash_attention,
                       precision=attention_precision(op.precision))


def stack_formats(scheme: Scheme, optimizer: str, stack: Stack, autocast: bool = True
                  ) -> StateFormats:
    """Every state's format under ``scheme`` and ``optimizer`` as the stack keeps them (the
    pytorch stacks: fp32 weights that are the master copy, and under ``autocast`` its 16-bit
    weight copies, :func:`accelsim.engine.eager.pytorch_formats`)."""
    formats = scheme.formats(optimizer)
    return eager.pytorch_formats(formats, optimizer, autocast) if stack.autocast else formats


def step_scheme(scheme: Scheme, optimizer: str, stack: Stack | None) -> Scheme:
    """The scheme whose states the data-parallel step reduces and updates under the stack:
    autocast's fp32 master weights, gradients and moments (the scheme of
    :func:`stack_formats`), else ``scheme``."""
    if stack is None or not stack.autocast:
        return scheme
    from accelsim.arch.schemes import get_scheme

    return get_scheme(stack_formats(scheme, optimizer, stack).name)


def attention_times(system: System, attn: AttentionOp, stack: Stack, stream_Bps: float
                    ) -> tuple[AttentionOp, tuple[StackPhase, StackPhase]]:
    """The op the stack runs for ``attn`` (a flash-kernel stack, or one that runs the model's
    choice and a flash-attention model: flash) and its forward and
    backward (seconds, FLOPs, bytes, bound): the flash kernel model, or the two GEMMs on the
    GEMM model plus (unfused) the score pass at ``stream_Bps``."""
    if not system.chip.core.supports(attn.precision):  # bf16 attention on a chip without it
        attn = replace(attn, precision=attention_precision(attn.precision, system.chip.core))
    if stack.attention is AttentionKernel.FLASH or (
            stack.attention is AttentionKernel.AS_MODEL and attn.flash):  # one fused kernel
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


def _autocast(op: LayerOp, stack: Stack) -> tuple[int, int]:
    """(16-bit activation bytes, 1 under autocast else 0) of ``op`` on an eager stack."""
    e = OPERAND_BYTES[op.precision]
    return e, int(stack.autocast and e < eager.F32)


def eager_kernels(op: LayerOp, rules: Rules) -> eager.Kernels | None:
    """What eager PyTorch launches for ``op`` beside its GEMMs (:mod:`accelsim.engine.eager`'s
    per-op kernels), or None where there is no rule (perf's per-layer model times it)."""
    la, b = op.layer, op.batch
    e, c = _autocast(op, rules.stack)
    if isinstance(op, AttentionLayerOp):
        return eager.sdpa_kernels(b * la.tokens, la.heads * la.head_dim, e)
    if isinstance(op, LinearOp):
        return eager.linear_kernels(op.name, b * la.tokens, la.in_features * la.out_features,
                                    la.out_features if la.bias else 0, e, c)
    if isinstance(op, EmbeddingOp):
        gather = [eager.ElementwiseOp(op.name, b * la.tokens * la.dim * 2 * eager.F32)]
        if la.vocab != rules.vocab:
            return gather, []
        fwd, bwd = eager.table_kernels(b * la.tokens, la.dim, la.vocab * la.dim, e, c,
                                       rules.tied)
        return gather + fwd, bwd
    if isinstance(op, LossOp):
        n = b * math.prod(la.shape)
        return eager.loss_kernels(n // la.shape[-1], n, e)
    n = b * math.prod(la.shape or (0,))
    if op.kind == "layernorm":
        return eager.norm_kernels(op.name, n // la.shape[-1], la.shape[-1], e, c)
    if op.kind == "add":
        return eager.residual_kernels(op.name, op.name, n, 1, e, c)
    if op.kind == "gelu":
        return eager.gelu_kernels(op.name, n, 1, e)
    return None


def _streamed(kernels: eager.Kernels, rules: Rules) -> tuple[StackPhase, ...]:
    """(forward, backward) phases of eager kernels run one after another
    (:func:`accelsim.engine.eager.stream_s`: each at its kind's bandwidth and per-call floor)."""
    floor = rules.stack.floor_s(KernelKind.ELEMENTWISE)
    out = []
    for phase, k in zip(("fwd", "bwd"), kernels):
        t, nbytes = eager.stream_s(tuple(k), rules.stream_Bps, floor, rules.sm)
        out.append((phase, t, 0.0, nbytes, "memory"))
    return tuple(out)


def stack_phases(system: System, op: LayerOp, rules: Rules) -> tuple[StackPhase, ...] | None:
    """The phases of ``op`` as the stack runs them on one chip, or None where the stack has
    no rule for the op's kind (perf's per-layer model times it; a GEMM's extra kernels are
    :func:`extra_phases`)."""
    stack = rules.stack
    kernels = eager_kernels(op, rules) if rules.transformer and not stack.fused else None
    if isinstance(op, AttentionLayerOp):
        rows = attention_times(system, attention_op(op), stack, rules.stream_Bps)[1]
        if kernels is None:
            return rows
        return tuple((ph, t + x[1], fl, by + x[3], bd)
                     for (ph, t, fl, by, bd), x in zip(rows, _streamed(kernels, rules)))
    if kernels is not None and not op.layer.is_gemm:
        return _streamed(kernels, rules)
    if not rules.fused:
        return None
    if isinstance(op, LossOp):
        logits = op.batch * math.prod(op.layer.shape)
        f, b = (n * logits for n in FUSED_LOSS_BYTES)
        return ("fwd", f / rules.stream_Bps, 0.0, f, "memory"), (
            "bwd", b / rules.stream_Bps, 0.0, b, "memory")
    per = FUSED_ELEMENTWISE_BYTES.get(op.kind)
    if per is None:
        return None
    f = per * op.batch * math.prod(op.layer.shape)
    return ("fwd", f / rules.stream_Bps, 0.0, f, "memory"), (
        "bwd", 2 * f / rules.stream_Bps, 0.0, 2 * f, "memory")


def extra_phases(op: LayerOp, rules: Rules) -> tuple[StackPhase, ...]:
    """An eager stack's kernels beside a GEMM layer's GEMMs (a linear layer's bias gradient
    and weight casts), as phases of the layer; none on a fused stack."""
    if rules.stack.fused or not rules.transformer or not op.layer.is_gemm:
        return ()
    kernels = eager_kernels(op, rules)
    if kernels is None:
        return ()
    return tuple(p for p, k in zip(_streamed(kernels, rules), kernels) if k)


def saved_bytes_per_sample(op: LayerOp, rules: Rules) -> float | None:
    """Activation bytes one sample of ``op`` keeps for the backward pass under the stack, or
    None where the layer model's count stands. Attention: its Q, K, V (and, without a flash
    kernel, the 5 bytes per score Korthikanti counts: softmax output, dropout mask and output);
    SDPA (eager) Q, K, V, O and the fp32 log-sum-exp per head. The LM head its input. A fused
    stack's residual add its 1-byte dropout mask and the loss its logits
    (:data:`accelsim.engine.memory.LOGIT_BYTES`); an eager stack's LayerNorm its fp32 input
    and the loss the 16-bit logits, the saved fp32 log-softmax and the two fp32 gradients at
    the start of its backward pass (:func:`accelsim.engine.eager.head_activation_bytes`)."""
    la, stack = op.layer, rules.stack
    if isinstance(op, AttentionLayerOp):
        a = attention_op(op)
        if not stack.fused:
            return la.tokens * (4 * la.heads * la.head_dim * OPERAND_BYTES[a.precision]
                                + la.heads * eager.F32)
        scores = 0 if (a.flash or stack.attention is AttentionKernel.FLASH) else 5
        return la.input_elements * OPERAND_BYTES[a.precision] + scores * la.heads * la.tokens**2
    if isinstance(op, MatmulOp) and is_vocab_head(la, rules.vocab, stack):
        return la.m * la.k * la.count * OPERAND_BYTES[op.precision]
    if not stack.fused and rules.transformer:
        if isinstance(op, LossOp):
            return math.prod(la.shape) * (_autocast(op, stack)[0] + 3 * eager.F32)
        if op.kind == "layernorm":
            return math.prod(la.shape) * eager.F32
        return None
    if not rules.fused:
        return None
    if isinstance(op, LossOp):
        return math.prod(la.shape) * LOGIT_BYTES
    if op.kind == "add":
        return math.prod(la.shape) * 1.0
    return None


def layer_list_memory_bytes(ops: tuple[LayerOp, ...], batch: int, formats: StateFormats,
                            saved: list[float | None], rules: Rules, *, dp, mp=1.0) -> float:
    """Bytes one chip holds for a layer list under a stack (arrays indexed by layer, as
    :func:`accelsim.engine.memory.layer_memory_bytes`): at global ``batch`` over ``dp``
    data-parallel x ``mp`` model-parallel chips per layer (scalars or per-layer arrays), its
    1/mp slice of each layer's parameters with the transformer path's model states
    (:func:`accelsim.engine.memory.model_state_bytes`: a linear or convolution weight matrix at
    the scheme's bytes, the rest at its other's; under autocast the tied head's 16-bit weight
    copy too) and the activations of its ``ceil(batch / dp)`` samples, the stack's count where
    it has one (``saved``, per sample; else the layer's own), element-wise layers split with
    their channels. An eager stack on one chip frees the gradients each step
    (``zero_grad(set_to_none=True)``, as :class:`accelsim.engine.memory.Memory`): the peak
    holds the larger of them and the activations."""
    lin_b = model_state_bytes(ParamCounts(linear=1.0, rest=0.0), formats, 0, 1)
    rest_b = model_state_bytes(ParamCounts(linear=0.0, rest=1.0), formats, 0, 1)
    states, act, ew = np.zeros((len(ops), 3)), [], []
    for i, (op, kept) in enumerate(zip(ops, saved)):
        la = op.layer
        lin = 0
        if la.kind in ("conv", "linear"):
            lin = la.n_params - la.bias * (la.out_channels if la.kind == "conv"
                                           else la.out_features)
        states[i] = np.multiply(lin, lin_b) + np.multiply(la.n_params - lin, rest_b)
        if rules.tied and isinstance(op, MatmulOp) and is_vocab_head(la, rules.vocab,
                                                                       rules.stack):
            states[i, 0] += la.k * la.n * formats.fp8_weight_cache_bytes  # autocast's copy
        act.append(la.saved_elements * OPERAND_BYTES[op.precision] if kept is None else kept)
        ew.append(not la.is_gemm)
    mp = np.asarray(mp, dtype=np.float64)
    w, g, o = (states / np.broadcast_to(mp, len(ops))[:, None]).sum(axis=0)
    a = float((np.ceil(batch / np.asarray(dp, dtype=np.float64)) * np.asarray(act)
               / np.where(ew, mp, 1.0)).sum())
    if not rules.stack.fused and np.all(np.asarray(dp) == 1):
        return float(w + o + max(g, a))
    return float(w + g + o + a)


def refuse_without_stack(op: LayerOp) -> None:
    """An attention layer has no time without a stack's attention kernel: InputError."""
    if op.kind == "attention":
        raise InputError(f"layer {op.name!r}: an attention layer runs on a software stack's "
                         "attention kernel: give a stack (--stack)")


def stack_columns(system: System, op: LayerOp, rules: Rules | None, mappings,
                  index: int) -> dict[str, np.ndarray] | None:
    """Layer ``index``'s ``op`` under each of ``mappings`` as the stack runs it (the
    ``chip_dp x chip_mp`` chips of a mapping share its samples; a GEMM layer: the kernels an
    eager stack adds beside its GEMMs, :func:`extra_phases`), in the columns of perf's
    :func:`~accelsim.perf.layer_model.evaluate_layer` (``explore``'s points), or None where
    there is no stack or it has no rule for the op's kind (an attention layer needs one:
    InputError)."""
    if rules is None:
        return refuse_without_stack(op)

    def phases(b: int) -> tuple[StackPhase, ...] | None:
        one = replace(op, batch=b)
        return extra_phases(one, rules) if op.layer.is_gemm else stack_phases(system, one,
                                                                              rules)
    if not phases(1):
        return None
    cols: dict[str, list] = {}
    for j, m in enumerate(mappings):
        share = m.chip_dp * m.chip_mp
        ok = share <= system.chips and m.chip_dp <= op.batch
        for phase, t, fl, by, bd in phases(-(-op.batch // share)):
            row = dict(layer=op.name, kind=op.kind, precision=op.precision, chip_dp=m.chip_dp,
                       chip_mp=m.chip_mp, core_dp=m.core_dp, core_mp=m.core_mp, dataflow="",
                       M=0, N=0, K=0, count=0, flops=fl * share, compute_s=0.0,
                       scratchpad_s=0.0, memory_s=by / rules.stream_Bps, sfu_s=0.0,
                       comm_s=0.0, cache_s=0.0, latency_s=0.0, layout_s=0.0, algorithm="",
                       time_s=t if ok else math.inf, bound=bd, tile_m=0, tile_n=0, tile_k=0,
                       feasible=ok, reason="" if ok else "more chips than samples",
                       phase=phase, index=index, mapping_id=j)
            for k, v in row.items():
                cols.setdefault(k, []).append(v)
    return {k: np.asarray(v, dtype=object if isinstance(v[0], str) else None)
            for k, v in cols.items()}


def stack_memory(ops: tuple[LayerOp, ...], batch: int, scheme: Scheme, optimizer: str,
                 rules: Rules):
    """``(dp, mp) -> bytes``: :func:`layer_list_memory_bytes` of the lowered ``ops`` at global
    ``batch`` under the stack (its state formats and stash), for a plan's data- and
    model-parallel split per layer."""
    saved = [saved_bytes_per_sample(op, rules) for op in ops]
    formats = stack_formats(scheme, optimizer, rules.stack)
    return lambda dp, mp=1.0: layer_list_memory_bytes(ops, batch, formats, saved, rules,
                                                      dp=dp, mp=mp)
