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
that saves linear-layer inputs in FP8 halves the 2 + 2 + 2 + 8 of those inputs. The first
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
from accelsim.workload.gpt import GptConfig

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
    """Bytes per GPU on the most loaded (first) pipeline stage."""

    params: float  # parameters held by the stage (before ZeRO sharding)
    linear_params: float  # of which the linear layers' weight matrices
    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserve_bytes: float = 0.0  # outside the tensors: contexts, communicator buffers, allocator

    @property
    def counts(self) -> ParamCounts:
        """The stage's parameters split as the scheme prices them (linear weights / the rest)."""
        return ParamCounts(linear=self.linear_params, rest=self.params - self.linear_params)

    @property
    def model_states_bytes(self) -> float:
        return self.weights_bytes + self.grads_bytes + self.optimizer_bytes

    @property
    def total_bytes(self) -> float:
        return self.model_states_bytes + self.activations_bytes + self.reserve_bytes

    @property
    def total_GiB(self) -> float:
        return self.total_bytes / GIB


def stage_params(model: GptConfig, plan: Plan) -> float:
    """Parameters per GPU of the first pipeline stage (the largest one): its layers split over
    the tensor-parallel ranks (LayerNorms and the row-parallel biases replicated) plus the
    vocabulary-parallel word embedding and the (replicated) position embedding."""
    h, f, t = model.hidden, model.ffn_size, plan.tp
    split = 4 * h * h + 2 * h * f + 3 * h + f  # QKV, projection, FC1, FC2 weights; QKV, FC1 bias
    layer = split / t + (model.params_per_layer - split)
    n_layers = model.layers // plan.pp
    emb = model.vocab * h / t + model.n_positions * h
    if plan.pp == 1:
        emb += 2 * h + model.head_params / t  # final LayerNorm and an untied head, same stage
    return n_layers * layer + emb


def stage_linear_params(model: GptConfig, plan: Plan) -> float:
    """Weight-matrix parameters of the first stage's linear layers on one GPU (QKV, projection,
    FC1, FC2; no biases): the tensors FP8 schemes store as FP8."""
    h, f = model.hidden, model.ffn_size
    return model.layers // plan.pp * (4 * h * h + 2 * h * f) / plan.tp


#: bytes per logit the loss holds: the 16-bit logits and their fp32 copy that Megatron's
#: vocabulary-parallel cross entropy turns into the softmax in place and saves for backward
LOGIT_BYTES = 2 + 4


def activation_bytes_per_layer(model: GptConfig, plan: Plan, scheme: StateFormats) -> float:
    """Saved activations of one layer and one micro-batch on one GPU (bytes)."""
    s, b, h, a, t = model.seq, plan.micro_batch, model.hidden, model.heads, plan.tp
    sbh = s * b * h
    f_ratio = model.ffn_size / (4 * h)  # Korthikanti's 8 + 8 are FFN = 4h tensors
    if plan.recompute == "full":
        return 2 * sbh / (t if plan.sequence_parallel else 1)
    r = scheme.saved_linear_input_bytes / 2
    replicated = 4 + 2 + 2 * r + 2 * r
    split = 4 + 2 + 2 * r + f_ratio * (8 + 8 * r)
    scores = 0.0 if (plan.recompute == "selective" or model.flash_attention) else 5 * a * s / h
    if plan.sequence_parallel:
        return sbh * (replicated + split + scores) / t
    return sbh * (replicated + (split + scores) / t)


def in_flight_layers(model: GptConfig, plan: Plan) -> float:
    """Layers' worth of micro-batch activations the first stage holds at its peak."""
    p, v = plan.pp, plan.interleave
    per_stage = model.layers / p
    in_flight = min(p, plan.n_micro)
    factor = 1 + (p - 1) / (p * v) if v > 1 else 1.0
    return per_stage * in_flight * factor


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


def memory(model: GptConfig, plan: Plan, scheme: StateFormats, reserve_bytes: float = 0.0
           ) -> Memory:
    """Memory per GPU: model states after ZeRO sharding and activations of the first stage,
    plus ``reserve_bytes`` outside the tensors (``LlmParams.memory_reserve_GiB``)."""
    plan.check_model(model)
    n = stage_params(model, plan)
    lin = stage_linear_params(model, plan)
    w, g, o = model_state_bytes(ParamCounts(linear=lin, rest=n - lin), scheme, plan.zero,
                                plan.dp)
    act = activation_bytes_per_layer(model, plan, scheme) * in_flight_layers(model, plan)
    if plan.recompute == "full":
        # the layer being recomputed holds its full activations once, during its backward
        act += activation_bytes_per_layer(model, replace(plan, recompute="none"), scheme)
    # embedding dropout mask (1 byte per element) of each in-flight micro-batch
    act += model.seq * plan.micro_batch * model.hidden * min(plan.pp, plan.n_micro) / (
        plan.tp if plan.sequence_parallel else 1)
    if plan.pp == 1:  # the loss on the same stage
        act += model.seq * plan.micro_batch * model.vocab / plan.tp * LOGIT_BYTES
    return Memory(params=n, linear_params=lin, weights_bytes=w, grads_bytes=g,
                  optimizer_bytes=o, activations_bytes=act, reserve_bytes=reserve_bytes)
