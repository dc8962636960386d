"""The one memory account: what a chip holds per training iteration.

Layer workloads (``predict``, the explorer's plans; :func:`layer_memory_bytes`): per parameter
the compute weight (storage precision; normalisation parameters FP16), its gradient, the master
weight, optimizer state, compute copy and residual of the scheme -- the optimizer-side copies
sharded over the data-parallel chips for a sharded update -- plus the activations each layer
keeps for its backward pass.

Transformers under 3-D parallelism (``llm``; :func:`memory`): model states (weights, gradients,
optimizer states per scheme, sharded by ZeRO stage) and activations (Korthikanti et al. 2022,
"Reducing Activation Recomputation in Large Transformer Models", arXiv:2205.05198, section 4).

Activations per layer per micro-batch, in bytes, with 16-bit tensors (Korthikanti Table 2):
no parallelism sbh(34 + 5as/h); tensor parallel sbh(10 + 24/t + 5as/(ht)); tensor + sequence
parallel sbh/t (34 + 5as/h); selective recomputation drops the 5as/h term; full recomputation
keeps only the 2sbh layer input. The 34 splits into 10 replicated without sequence parallelism
(two LayerNorm inputs 4, QKV and FC1 inputs 2 + 2, two dropout masks 2) and 24 split over the
tensor-parallel ranks (Q and K 4, V 2, projection input 2, GeLU input 8, FC2 input 8); a scheme
that saves linear-layer inputs in FP8 halves the 2 + 2 + 2 + 8 of those inputs. Dropout keeps
its masks only when the model trains with it: PyTorch's dropout at p = 0 returns its input and
saves nothing (aten/src/ATen/native/Dropout.cpp, ``_dropout_impl``: ``if (p == 0 || !train ...)
return input``), so a model without hidden dropout (Llama, Mistral, ...) keeps neither residual
mask (34 - 2) nor the embedding's, and one without attention dropout keeps of the 5as/h score
bytes only the softmax output (2as/h: the dropout's output is that same tensor). The first
pipeline stage holds ``pp`` micro-batches in flight under 1F1B, so it stores L layers' worth
(times 1 + (p-1)/(p v) interleaved; Korthikanti section 4.2.3); that stage is the one reported.
Without pipeline parallelism that stage also holds the loss: the 16-bit logits and their fp32
copy for Megatron's vocabulary-parallel cross entropy (kept for its backward), 6 bytes per
logit. A scheme with ``other_scheme`` (fp8-lm) keeps its own bytes for the linear layers'
weight matrices only and the other scheme's for the rest
(:func:`accelsim.arch.states.param_bytes`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from accelsim.arch.states import StateFormats, ParamCounts, param_bytes
from accelsim.arch.schemes import OPTIMIZERS, get_scheme
from accelsim.engine.plan import Plan
from accelsim.perf.gemm import OPERAND_BYTES
from accelsim.perf.layer_model import NORM_PARAM_BYTES
from accelsim.engine.decoder import Decoder
from accelsim.engine import context
from accelsim.engine.graph import attention_precision
from accelsim.workload.gpt import GptConfig
from accelsim.workload.transformer import MlpKind

GIB = 2 ** 30


def layer_memory_bytes(params, weight_bytes, act_bytes_per_sample, elementwise, batch: int,
                       scheme, *, dp, mp=1.0, optimizer: str = "sgd-momentum") -> float:
    """Bytes one chip holds for a layer workload (arrays indexed by layer) at global
    ``batch`` under ``dp`` data-parallel x ``mp`` model-parallel chips per layer (scalars or
    per-layer arrays): per parameter of its 1/mp slice the compute weight (``weight_bytes``),
    gradient and the scheme's optimizer-side copies (master weight, optimizer state, compute
    copy, residual; sharded over ``dp`` for a sharded update; one optimizer state per state
    tensor of ``optimizer``); the activations of its ``ceil(batch / dp)`` samples
    (channel-split element-wise layers split their stash too)."""
    sc = get_scheme(scheme).for_optimizer(optimizer)
    n_state = OPTIMIZERS[optimizer][0]
    dp = np.asarray(dp, dtype=np.float64)
    mp = np.asarray(mp, dtype=np.float64)
    state = (sc.master_weight_bytes + n_state * sc.optimizer_state_bytes + sc.compute_copy_bytes
             + sc.residual_bytes)
    state = state / dp if sc.sharded_update else state
    w = np.asarray(params, dtype=np.float64) / mp
    act = np.ceil(batch / dp) * np.asarray(act_bytes_per_sample, dtype=np.float64) \
        / np.where(elementwise, mp, 1.0)
    return float((w * (np.asarray(weight_bytes) + sc.gradient_bytes + state)).sum()
                 + act.sum())


def workload_memory_bytes(workload, batch: int, scheme, precisions: dict[str, str], *,
                          dp: int = 1, optimizer: str = "sgd-momentum") -> float:
    """Bytes one chip holds when ``dp`` chips train ``workload`` data parallel at ``batch``
    samples each (:func:`layer_memory_bytes` with every layer whole on every chip)."""
    params, wb, act, ew = [], [], [], []
    for layer in workload.layers:
        b = OPERAND_BYTES[precisions[layer.name]]
        params.append(layer.n_params)
        wb.append(b if layer.is_gemm else NORM_PARAM_BYTES)
        act.append(layer.saved_elements * b)
        ew.append(not layer.is_gemm)
    return layer_memory_bytes(params, wb, act, np.array(ew, dtype=bool), batch * dp, scheme,
                              dp=dp, optimizer=optimizer)


@dataclass(frozen=True)
class Memory:
    """Bytes per GPU on the most loaded pipeline stage (``stage``; an even split: the first)."""

    params: float  # parameters held by the stage (before ZeRO sharding)
    linear_params: float  # of which the linear layers' weight matrices
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserve_bytes: float = 0.0  # outside the tensors: contexts, communicator buffers, allocator
    expert_params: float = 0.0  # of ``params``: routed experts' weight matrices (1/ep of them)
    #: the gradients are freed after each step (PyTorch's ``zero_grad(set_to_none=True)``, its
    #: default since 2.0): they are allocated during the backward pass as the activations are
    #: freed, so the peak holds the larger of the two, not both
    grads_freed_each_step: bool = False
    #: the pipeline stage this account is of (the worst one)
    stage: int = 0

    @property
    def counts(self) -> ParamCounts:
        """The stage's parameters outside the routed experts, split as the scheme prices them
        (linear weights / the rest); data parallel over all ``dp`` ranks."""
        return ParamCounts(linear=self.linear_params,
                           rest=self.params - self.linear_params - self.expert_params)

    @property
    def expert_counts(self) -> ParamCounts:
        """The routed experts' weight matrices on this GPU; data parallel over ``dp / ep``."""
        return ParamCounts(linear=self.expert_params, rest=0.0)

    @property
    def model_states_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        if self.grads_freed_each_step:
            return (self.weights_bytes + self.optimizer_bytes
                    + max(self.grads_bytes, self.activations_bytes) + self.reserve_bytes)
        return self.model_states_bytes + self.activations_bytes + self.reserve_bytes

    @property
    def total_GiB(self) -> float:
        return self.total_bytes / GIB


def _stage_params(model: Decoder, plan: Plan, layers: tuple[int, int], first: bool,
                  last: bool) -> tuple[float, float, float]:
    """(params, linear params, routed-expert weight params) per GPU of a pipeline stage
    holding ``layers`` (dense, MoE) layers: each layer's tensor-parallel part split over the
    ranks (LayerNorms, the row-parallel biases and the replicated projections whole), routed
    experts over ``ep x tp``; the first stage adds the vocabulary-parallel word embedding and
    the (replicated) position table, the last the final norm and the head: an untied one, or a
    tied one's copy when the last stage is not also the first (Megatron-core's GPTModel
    allocates the output layer's weight unless the same stage holds the embedding it shares:
    ``skip_weight_param_allocation=pre_process and share_embeddings_and_output_weights``)."""
    t, ep = plan.tp, plan.ep
    n = lin = ex = 0.0
    for count, moe in zip(layers, (False, True)):
        if not count:
            continue
        split, split_lin, rep_lin, expert, total = model.layer_param_split(moe)
        n += count * (split / t + (total - split - expert) + expert / (ep * t))
        lin += count * split_lin / t + count * rep_lin
        ex += count * expert / (ep * t)
    h = model.hidden
    emb = 0.0
    if first:
        emb = model.vocab * h / t + model.n_positions * h
    if last:
        norm = model.config.head_ops()[0].params
        head = 0 if model.config.tied_embeddings and first else model.vocab * h
        emb += norm + head / t
    return n + emb, lin, ex


def stage_params(model: GptConfig | Decoder, plan: Plan) -> float:
    """Parameters per GPU of the largest pipeline stage (see :func:`_stage_params`)."""
    return _largest_stage(Decoder.of(model), plan)[1][0]


def _largest_stage(model: Decoder, plan: Plan) -> tuple[int, tuple[float, float, float]]:
    best = (-1, (-1.0, 0.0, 0.0))
    for i in range(plan.pp):
        p = _own_params(model, plan, i)
        if p[0] > best[1][0]:
            best = (i, p)
    return best


def _own_params(model: Decoder, plan: Plan, stage: int) -> tuple[float, float, float]:
    """:func:`_stage_params` of ``stage``: the embedding on the first stage; the head on the
    last when it is also the first (pp 1) or the plan splits its stages unevenly. An even
    split's account is the first stage's: its embedding is at least the last stage's head (the
    same vocab x h / t matrix; the head lacks the position table) and it holds the most
    micro-batches, so the head and final norm (h parameters more) are left out there."""
    layers = model.stage_layers(plan.pp, plan.interleave, plan.stage_split)[stage]
    last = stage == plan.pp - 1 and (plan.pp == 1 or not plan.stage_split.even)
    return _stage_params(model, plan, layers, stage == 0, last)


def stage_linear_params(model: GptConfig | Decoder, plan: Plan) -> float:
    """Weight-matrix parameters of the largest stage's linear layers on one GPU (no biases):
    the tensors FP8 schemes store as FP8."""
    return _largest_stage(Decoder.of(model), plan)[1][1]


#: bytes per logit the loss holds: the 16-bit logits and their fp32 copy that Megatron's
#: vocabulary-parallel cross entropy turns into the softmax in place and saves for backward
LOGIT_BYTES = 2 + 4


def activation_bytes_per_layer(model: GptConfig | Decoder, plan: Plan, scheme: StateFormats,
                               moe: bool = False) -> float:
    """Saved activations of one (dense or MoE) layer and one micro-batch on one GPU (bytes):
    Korthikanti's accounting with the attention tensors at their real widths (GQA's smaller
    K and V, MLA's head dims), a gated MLP's gate and up outputs both kept, and an MoE layer's
    ``top_k`` permuted copies of its input with the experts' FFN tensors per routed copy."""
    model = Decoder.of(model)
    c = model.config
    s, b, h, a, t = model.seq, plan.micro_batch, model.hidden, model.heads, plan.tp
    sbh = s // plan.cp * b * h  # this rank's seq / cp tokens (its scores still span all s keys)
    if plan.recompute == "full":
        return 2 * sbh / (t if plan.sequence_parallel else 1)
    r = scheme.saved_linear_input_bytes / 2
    m = c.mla
    dq, dv = (c.head_dim, c.head_dim) if m is None else (m.qk_head_dim, m.v_head_dim)
    kv = model.kv_heads
    qkv = 2 * (a * dq + kv * dq + kv * dv) / h  # Korthikanti's Q and K 4, V 2 for MHA
    fc_out = 16 if c.mlp is not MlpKind.GELU else 8  # fc1 outputs (gate and up: twice)
    if moe:
        e = c.moe
        ffn = e.top_k * e.expert_ffn_size + e.n_shared_experts * e.expert_ffn_size
        routed = 2 * r * e.top_k  # the permuted copies of the input, one per chosen expert
    else:
        ffn, routed = model.ffn_size, 0
    f_ratio = ffn / (4 * h)  # Korthikanti's 8 + 8 are FFN = 4h tensors
    # the two LayerNorm inputs, the QKV and FC1 inputs, and the two 1-byte residual dropout
    # masks when the model has hidden dropout
    replicated = 4 + 2 * r + 2 * r + (2 if c.hidden_dropout else 0)
    if routed:
        replicated += routed
    split = qkv + 2 * r * (a * dv / h) + f_ratio * (fc_out + 8 * r)
    # Korthikanti's score bytes: softmax output 2, dropout mask 1 and dropout output 2
    score_bytes = 5 if c.attention_dropout else 2
    scores = (0.0 if (plan.recompute == "selective" or model.flash_attention)
              else score_bytes * a * s / h)
    if plan.sequence_parallel:
        return sbh * (replicated + split + scores) / t
    return sbh * (replicated + (split + scores) / t)


def in_flight_layers(model: GptConfig | Decoder, plan: Plan, stage: int | None = None
                     ) -> float:
    """Layers' worth of micro-batch activations a stage holds at its peak: 1F1B's stage ``s``
    (of ``p``) holds ``min(p - s, m)`` micro-batches, interleaved ``2 (p - s - 1) + (v - 1) p
    + 1`` chunk passes (its warm-up and the first steady forward; at most ``m v``), or all
    ``m v`` when ``m = p``: Megatron's interleaved schedule then runs every forward pass
    before any backward on every stage (``schedules.py``,
    ``forward_backward_pipelining_with_interleaving``: ``if num_microbatches ==
    pipeline_parallel_size: num_warmup_microbatches = total_num_microbatches``). ``stage``
    None: the largest stage's layers at the first stage's count (an even split: the first
    stage, which holds the most)."""
    model = Decoder.of(model)
    p, v, m = plan.pp, plan.interleave, plan.n_micro
    stages = model.stage_layers(p, v, plan.stage_split)
    if stage is None:
        per_stage = max(sum(s) for s in stages)
        if v > 1 and m == p:
            return per_stage * m
        factor = 1 + (p - 1) / (p * v) if v > 1 else 1.0
        return per_stage * min(p, m) * factor
    if v == 1:
        return sum(stages[stage]) * min(p - stage, m)
    if m == p:
        return sum(stages[stage]) * m
    return sum(stages[stage]) / v * min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v)


def model_state_bytes(counts: ParamCounts, scheme: StateFormats, zero: int, dp: int
                      ) -> tuple[float, float, float]:
    """(weights, gradients, optimizer states) bytes of ``counts`` parameters on one GPU under
    ZeRO stage ``zero`` over ``dp`` ranks (Rajbhandari et al. SC'20, section 5: stage 1 shards
    the optimizer states, 2 also the gradients, 3 also the weights). The weights include the
    scheme's cached low-precision copies of the linear weight matrices."""
    w = (param_bytes(counts, scheme, lambda x: x.weight_bytes)
         + counts.linear * scheme.fp8_weight_cache_bytes) / (dp if zero >= 3 else 1)
    g = param_bytes(counts, scheme, lambda x: x.grad_bytes) / (dp if zero >= 2 else 1)
    o = param_bytes(counts, scheme, lambda x: x.optimizer_bytes) / (dp if zero >= 1 else 1)
    return w, g, o


def memory(model: GptConfig | Decoder, plan: Plan, scheme: StateFormats,
           reserve_bytes: float = 0.0) -> Memory:
    """Memory per GPU: model states after ZeRO sharding (routed experts over the ``dp / ep``
    ranks that share them) and activations, plus ``reserve_bytes`` outside the tensors
    (``LlmParams.memory_reserve_GiB``). An even split: the stage with the most parameters,
    holding the largest stage's layers of activations at the first stage's micro-batches in
    flight. An uneven split (:attr:`Plan.stage_split`): every stage on its own layers,
    parameters (the embedding on the first, the head on the last) and micro-batches in
    flight (:func:`in_flight_layers`); the worst stage."""
    model = Decoder.of(model)
    plan.check_model(model)
    if plan.stage_split.even:
        stage, counts = _largest_stage(model, plan)
        return _stage_memory(model, plan, scheme, reserve_bytes, stage, counts,
                             in_flight_layers(model, plan), True, plan.pp == 1)
    return max((_stage_memory(model, plan, scheme, reserve_bytes, s, _own_params(model, plan, s),
                              in_flight_layers(model, plan, s), s == 0, s == plan.pp - 1)
                for s in range(plan.pp)), key=lambda mem: mem.total_bytes)


def _stage_memory(model: Decoder, plan: Plan, scheme: StateFormats, reserve_bytes: float,
                  stage: int, counts: tuple[float, float, float], in_flight: float,
                  embedding: bool, loss: bool) -> Memory:
    """The memory of one stage holding ``counts`` (params, linear, expert) parameters and
    ``in_flight`` layers' worth of activations (their mix of dense and MoE layers as
    ``stage``'s); ``embedding``: the embedding's dropout masks of its micro-batches in
    flight (a model with hidden dropout); ``loss``: the loss's logits of one micro-batch."""
    n, lin, ex = counts
    w, g, o = model_state_bytes(ParamCounts(linear=lin, rest=n - lin - ex), scheme, plan.zero,
                                plan.dp_cp)
    if ex:
        we, ge, oe = model_state_bytes(ParamCounts(linear=ex, rest=0.0), scheme, plan.zero,
                                       plan.dp // plan.ep)
        w, g, o = w + we, g + ge, o + oe
    dense, moe = model.stage_layers(plan.pp, plan.interleave, plan.stage_split)[stage]
    per_layer = activation_bytes_per_layer(model, plan, scheme)
    if moe:
        per_layer = (dense * per_layer + moe * activation_bytes_per_layer(
            model, plan, scheme, moe=True)) / (dense + moe)
    act = per_layer * in_flight
    if plan.recompute == "full" and dense + moe:
        # the layer being recomputed holds its full activations once, during its backward
        act += activation_bytes_per_layer(model, replace(plan, recompute="none"), scheme,
                                          moe=moe > 0)
    tokens = model.seq // plan.cp * plan.micro_batch  # this rank's
    if embedding and model.config.hidden_dropout:
        # embedding dropout mask (1 byte per element) of each in-flight micro-batch
        act += tokens * model.hidden * min(plan.pp, plan.n_micro) / (
            plan.tp if plan.sequence_parallel else 1)
    if loss:  # the loss's logits on this stage
        act += tokens * model.vocab / plan.tp * LOGIT_BYTES
    # context parallelism's KV buffers during one layer's attention
    act += context.buffer_bytes(model, plan, attention_precision(scheme.gemm_precision))
    return Memory(params=n, linear_params=lin, weights_bytes=w, grads_bytes=g,
                  optimizer_bytes=o, activations_bytes=act, reserve_bytes=reserve_bytes,
                  expert_params=ex, stage=stage)


def memory_fit(need_bytes: float, capacity_bytes: float | None) -> dict:
    """The JSON fields every front-end reports beside its memory per chip:
    ``memory_capacity_GiB`` (one chip's) and ``fits_memory`` (the need within it); none when
    the capacity is unknown."""
    if capacity_bytes is None:
        return {}
    return {"memory_capacity_GiB": capacity_bytes / GIB,
            "fits_memory": bool(need_bytes <= capacity_bytes)}

