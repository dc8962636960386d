"""Iteration time, throughput, TFLOPS and MFU of a 3-D parallel GPT training run on a node file.

Per layer and micro-batch the tensor-parallel GEMMs (Megatron column/row split: QKV (T, 3h/t, h),
scores and P.V per head, projection (T, h, h/t), FC1 (T, F/t, h), FC2 (T, h, F/t), T = b s
tokens; backward = data-gradient + weight-gradient GEMMs of the same shapes) are timed by
:func:`accelsim.perf.gemm.gemm_time`, element-wise kernels by their bytes over HBM bandwidth,
and the tensor-parallel collectives by :mod:`accelsim.engine.comm` (not overlapped, as in
Megatron-LM 2021). The last pipeline stage also runs the LM head. The 1F1B pipeline takes
``(m + p - 1)`` micro-batch slots of forward + backward, interleaved ``(m + (p-1)/v)``
(Narayanan et al. SC'21, section 2.2); point-to-point transfers sit on the critical path once
per chunk; the data-parallel collectives and the optimizer step follow the pipeline flush.
Without gradient-accumulation fusion each micro-batch's backward pass also streams its weight
gradients through HBM: the scheme's ``grad_accumulation_bytes`` per parameter (bf16: the
16-bit gradient written and read, the fp32 main gradient read and written).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from accelsim.arch import System
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.arch.states import StateFormats, param_bytes
from accelsim.engine.comm import Comm, Fabric, comm
from accelsim.engine.memory import GIB, Memory, memory
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.schedule import exposed_comm_s, pipeline_s
from accelsim.netsim.update import update_bytes_per_elem
from accelsim.perf.gemm import gemm_time
from accelsim.workload.gpt import GptConfig

ATTENTION_PRECISION = "bf16"  # score and P.V matmuls stay 16-bit in every scheme


@functools.lru_cache(maxsize=65536)
def _gemm_s(system: System, m: int, n: int, k: int, count: int, precision: str) -> float:
    return gemm_time(system, m, n, k, precision, count=count).time_s


def _gemm_pass_s(system: System, shapes, phase: str) -> float:
    """Sum of GEMM times; ``phase`` fwd: C = A B, bwd: dA (m, k, n) + dB (k, n, m)."""
    total = 0.0
    for m, n, k, count, prec, frac in shapes:
        if phase == "fwd":
            total += frac * _gemm_s(system, m, n, k, count, prec)
        else:
            total += frac * (_gemm_s(system, m, k, n, count, prec)
                             + _gemm_s(system, k, n, m, count, prec))
    return total


@dataclass(frozen=True)
class LayerTimes:
    """Seconds of one layer (or the head) on one micro-batch."""

    linear_fwd_s: float
    attention_fwd_s: float
    elementwise_fwd_s: float
    linear_bwd_s: float
    attention_bwd_s: float
    elementwise_bwd_s: float
    scores_fwd_s: float  # the score softmax / mask / dropout part of elementwise_fwd_s


def layer_times(model: GptConfig, plan: Plan, scheme: StateFormats, system: System,
                params: LlmParams) -> tuple[LayerTimes, float, float]:
    """Per-layer compute times, and the LM head's forward and backward seconds."""
    s, b, h, a, t = model.seq, plan.micro_batch, model.hidden, model.heads, plan.tp
    f, d, T = model.ffn_size, model.head_dim, model.seq * plan.micro_batch
    gp = scheme.gemm_precision
    linear = [(T, 3 * h // t, h, 1, gp, 1.0), (T, h, h // t, 1, gp, 1.0),
              (T, f // t, h, 1, gp, 1.0), (T, h, f // t, 1, gp, 1.0)]
    frac = model.attention_fraction
    attention = [(s, s, d, b * a // t, ATTENTION_PRECISION, frac),
                 (s, d, s, b * a // t, ATTENTION_PRECISION, frac)]
    # element-wise bytes (16-bit): LayerNorms 2 x 4, dropout + residual 2 x 7 (replicated over
    # the tensor-parallel ranks unless sequence parallel), bias + GeLU 16 (FFN-sized, split);
    # softmax + mask + dropout on the scores 7 a s^2 b (none with a flash kernel, fused there)
    sbh = s * b * h
    rep = 22 * sbh / (t if plan.sequence_parallel else 1)
    split = 16 * sbh * (f / (4 * h)) / t
    scores = 0.0 if model.flash_attention else 7 * a * s * s * b / t
    fwd_bytes = rep + split + scores
    if gp in ("fp8", "hfp8"):
        # casts of the four linear inputs to 8 bits: read 2 bytes, write 1 byte per element
        fwd_bytes += 3 * T * (2 * h + (h + f) / t)
    bw = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    lt = LayerTimes(
        linear_fwd_s=_gemm_pass_s(system, linear, "fwd"),
        attention_fwd_s=_gemm_pass_s(system, attention, "fwd"),
        elementwise_fwd_s=fwd_bytes / bw,
        linear_bwd_s=_gemm_pass_s(system, linear, "bwd"),
        attention_bwd_s=_gemm_pass_s(system, attention, "bwd"),
        elementwise_bwd_s=2 * fwd_bytes / bw,
        scores_fwd_s=scores / bw,
    )
    head = [(T, -(-model.vocab // t), h, 1, gp, 1.0)]
    head_fwd = _gemm_pass_s(system, head, "fwd") + 3 * T * model.vocab / t * 2 / bw  # + softmax
    head_bwd = _gemm_pass_s(system, head, "bwd") + T * model.vocab / t * 2 * 2 / bw
    return lt, head_fwd, head_bwd


@dataclass(frozen=True)
class Prediction:
    """One plan's predicted iteration (all per GPU unless named otherwise)."""

    model: GptConfig
    plan: Plan
    scheme: str
    iteration_time_s: float
    pipeline_s: float
    bubble_s: float
    dp_comm_s: float  # exposed (not hidden behind the backward pass)
    optimizer_s: float
    forward_s: float  # one micro-batch, slowest stage, incl. TP comm and p2p
    backward_s: float
    model_flops: float  # per iteration, whole job, no recomputation
    hardware_flops: float  # per iteration, whole job, with recomputation
    peak_flops_per_gpu: float
    memory: Memory
    comm: Comm

    @property
    def samples_per_s(self) -> float:
        return self.plan.global_batch / self.iteration_time_s

    @property
    def tokens_per_s(self) -> float:
        return self.samples_per_s * self.model.seq

    @property
    def tflops_per_gpu(self) -> float:
        """Executed FLOPs per GPU per second / 1e12 (with recomputation, as Megatron reports)."""
        return self.hardware_flops / self.iteration_time_s / self.plan.gpus / 1e12

    @property
    def mfu(self) -> float:
        """Model FLOPs utilization against the peak of the scheme's GEMM precision."""
        return self.model_flops / self.iteration_time_s / self.plan.gpus / self.peak_flops_per_gpu

    def as_dict(self) -> dict:
        p = self.plan
        return {
            "iteration_time_s": self.iteration_time_s,
            "samples_per_s": self.samples_per_s,
            "tokens_per_s": self.tokens_per_s,
            "tflops_per_gpu": self.tflops_per_gpu,
            "mfu": self.mfu,
            "memory_GiB_per_gpu": self.memory.total_GiB,
            "weights_GiB": self.memory.weights_bytes / GIB,
            "grads_GiB": self.memory.grads_bytes / GIB,
            "optimizer_GiB": self.memory.optimizer_bytes / GIB,
            "activations_GiB": self.memory.activations_bytes / GIB,
            "memory_reserve_GiB": self.memory.reserve_bytes / GIB,
            # units as the names say (docs/llm.md's table): _GB 1e9 bytes, _GiB 2^30 bytes
            "weight_comm_GB": self.comm.weight_bytes / 1e9,  # per iteration, per GPU
            "activation_comm_GB": self.comm.activation_bytes / 1e9,  # per iteration, per GPU
            "activation_comm_GB_per_microbatch":
                self.comm.activation_bytes / self.plan.n_micro / 1e9,
            "tp_input_comm_GiB_per_microbatch":
                self.comm.tp_input_bytes / self.plan.n_micro / GIB,  # FP8-LM Table 7
            "tp_comm_GB": self.comm.tp_bytes / 1e9,
            "pp_comm_GB": self.comm.pp_bytes / 1e9,
            "pipeline_s": self.pipeline_s,
            "bubble_s": self.bubble_s,
            "dp_comm_s": self.dp_comm_s,
            "optimizer_s": self.optimizer_s,
            "params": self.model.n_params,
            "gpus": p.gpus, "tp": p.tp, "pp": p.pp, "dp": p.dp,
            "micro_batch": p.micro_batch, "global_batch": p.global_batch,
            "interleave": p.interleave, "recompute": p.recompute,
            "sequence_parallel": p.sequence_parallel, "zero": p.zero,
            "overlap_grad_reduce": p.overlap_grad_reduce,
            "grad_accumulation_fusion": p.grad_accumulation_fusion, "scheme": self.scheme,
        }


def grad_accumulation_s(mem: Memory, plan: Plan, scheme: StateFormats, hbm_Bps: float) -> float:
    """Seconds per micro-batch that an unfused gradient accumulation adds to the backward pass
    (the linear weight matrices at the scheme's bytes, the rest at its other scheme's)."""
    if plan.grad_accumulation_fusion:
        return 0.0
    return param_bytes(mem.counts, scheme, lambda x: x.grad_accumulation_bytes) / hbm_Bps


def optimizer_step_bytes(mem: Memory, plan: Plan, scheme: StateFormats) -> float:
    """HBM bytes of one GPU's optimizer step over the parameters it updates (its ZeRO shard),
    each parameter at its own formats (FP8-LM: the linear weight matrices at FP8-LM's, the rest
    at bf16's): the bytes per parameter of the one update model,
    :func:`accelsim.netsim.update_bytes_per_elem` (read gradient, master weight and moments;
    write master weight, moments and the working copy), for the plan's optimizer."""
    shard = plan.dp if plan.zero >= 1 else 1

    def per_param(f: StateFormats) -> float:
        return sum(update_bytes_per_elem(get_scheme(f.name).for_optimizer(plan.optimizer),
                                         plan.optimizer))

    return param_bytes(mem.counts, scheme, per_param) / shard


def predict(model: GptConfig, plan: Plan, scheme: Scheme | str, system: System,
            params: LlmParams = LlmParams(), *, engine: str = "analytic") -> Prediction:
    """Predict one training iteration of ``model`` under ``plan`` on nodes like ``system``;
    ``scheme`` (a name of the one registry, :mod:`accelsim.arch.schemes`) and the plan's
    optimizer fix every state format; ``engine`` times the collectives (``analytic`` closed
    form, or netsim's ``des``)."""
    sc = get_scheme(scheme).formats(plan.optimizer)
    plan.check_model(model)
    plan.check_placement(system.chips)
    if not system.chip.core.supports(sc.gemm_precision):
        raise ValueError(f"system {system.name!r} has no {sc.gemm_precision} rate "
                         f"(scheme {sc.name})")
    fabric = Fabric.of(system, params, engine)
    mem = memory(model, plan, sc, params.memory_reserve_GiB * GIB)
    cm = comm(model, plan, sc, fabric, mem)
    lt, head_f, head_b = layer_times(model, plan, sc, system, params)
    layers = model.layers // plan.pp
    f_layer = lt.linear_fwd_s + lt.attention_fwd_s + lt.elementwise_fwd_s + cm.tp_layer_pass_s
    b_layer = lt.linear_bwd_s + lt.attention_bwd_s + lt.elementwise_bwd_s + cm.tp_layer_bwd_s
    if plan.recompute == "full":
        b_layer += f_layer
    elif plan.recompute == "selective":
        b_layer += lt.attention_fwd_s + lt.scores_fwd_s
    v = plan.interleave
    hbm = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    fwd = layers * f_layer + head_f + v * cm.pp_p2p_s
    bwd = layers * b_layer + head_b + v * cm.pp_p2p_s + grad_accumulation_s(mem, plan, sc, hbm)
    pipeline, bubble = pipeline_s(fwd + bwd, plan.n_micro, plan.pp, v)
    opt_s = optimizer_step_bytes(mem, plan, sc) / hbm
    # the optimizer step is charged on its own (opt_s): no update term in the overlap rule
    dp_exposed = exposed_comm_s(cm.dp_reduce_s, cm.dp_gather_s, 0.0,
                                bwd if plan.overlap_grad_reduce else 0.0)
    total = pipeline + dp_exposed + opt_s
    B = plan.global_batch
    mflops = model.model_flops(B)
    fwd_flops = mflops / 3
    extra = 0.0
    if plan.recompute == "full":
        extra = fwd_flops - 2 * B * model.seq * model.hidden * model.vocab  # no head recompute
    elif plan.recompute == "selective":
        extra = 2 * B * model.heads * 2 * model.seq ** 2 * model.head_dim \
            * model.attention_fraction * model.layers
    return Prediction(
        model=model, plan=plan, scheme=sc.name, iteration_time_s=total, pipeline_s=pipeline,
        bubble_s=bubble, dp_comm_s=dp_exposed, optimizer_s=opt_s, forward_s=fwd, backward_s=bwd,
        model_flops=mflops, hardware_flops=mflops + extra,
        peak_flops_per_gpu=system.peak_flops(sc.gemm_precision) / system.chips,
        memory=mem, comm=cm)
