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

from dataclasses import replace

from accelsim.arch import System
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.arch.states import StateFormats, param_bytes
from accelsim.engine import decoder, eager, float8, fsdp, pytorch_kernels, tp_overlap
from accelsim.engine.comm import Comm, comm, cp_comm, fabric_of
from accelsim.engine.decoder import Decoder
from accelsim.engine.energy import StepEnergy, step_energy
from accelsim.engine.memory import GIB, Memory, memory
from accelsim.engine.mixed_precision import MixedPrecision, resolve
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.graph import (
    AttentionOp,
    Stream,
    ElementwiseOp,
    GemmOp,
    Phase,
    attention_precision,
    elementwise_s,
    gemm_fwd_bwd_s,
    gemm_timed,
)
from accelsim.engine.stack import (FUSED_LOSS_BYTES, AttentionKernel, KernelKind, Stack,
                                   sm_scale)
from accelsim.engine.stack_ops import attention_times, stack_formats
from accelsim.engine.pipeline import overlapped_pipeline_s
from accelsim.engine.schedule import pipeline_s
from accelsim.engine.scheduler import Graph, Schedule, Task, schedule
from accelsim.engine.prediction import OpTime, Prediction
from accelsim.netsim.update import update_bytes_per_elem
from accelsim.workload.gpt import GptConfig
from accelsim.errors import InputError

def layer_ops(model: GptConfig | Decoder, plan: Plan, formats: StateFormats, moe: bool = False,
              vocab_multiple: int = 1, fuse_casts: bool = False
              ) -> tuple[tuple[GemmOp, ...], AttentionOp, ElementwiseOp, GemmOp]:
    """The ops of one (dense or MoE) layer on one GPU and one micro-batch
    (:func:`accelsim.engine.decoder.layer_ops`: for GPT, Megatron's split QKV (T, 3h/t, h),
    projection (T, h, h/t), FC1 (T, F/t, h), FC2 (T, h, F/t), T = b s tokens; attention over
    the GPU's a/t heads), and the LM head (vocabulary-parallel, the vocabulary padded to a
    multiple of ``vocab_multiple x t``); casts to a narrow GEMM input format fused into their
    producers or not (``fuse_casts``: :func:`accelsim.engine.decoder.cast_bytes`)."""
    model = Decoder.of(model)
    # this rank's tokens: with context parallelism seq / cp of each sequence
    T, gp = model.seq // plan.cp * plan.micro_batch, formats.gemm_precision
    gemms, attn, ew = decoder.layer_ops(model, moe, T, plan.micro_batch, plan.tp, plan.ep,
                                        plan.sequence_parallel, gp, fuse_casts)
    return gemms, attn, ew, decoder.head_op(model, T, plan.tp, gp, vocab_multiple)


def layer_op_times(model: GptConfig | Decoder, plan: Plan, formats: StateFormats,
                   system: System, params: LlmParams, moe: bool = False, *, autocast: bool
                   ) -> tuple[list[OpTime], list[OpTime]]:
    """Per-op times of one layer and of the LM head (with its softmax / cross-entropy passes
    over the logits: 3 and 2 x 2 bytes per logit forward and backward) on one micro-batch; an
    eager stack's element-wise kernels under ``autocast`` or not (the run's,
    :func:`accelsim.engine.mixed_precision.resolve`). Under torchao.float8 the LM head stays
    bf16 (:mod:`accelsim.engine.float8`)."""
    model = Decoder.of(model)
    stack = params.stack
    linear, attn, ew, head = layer_ops(model, plan, formats, moe, stack.vocab_multiple,
                                       stack.fuse_casts)
    recipe = float8.recipe_of(formats)
    if recipe is not None:
        head = replace(head, precision="bf16")
    bw = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    gfloor = stack.floor_s(KernelKind.GEMM)
    rows: list[OpTime] = []
    for g in linear:
        fw, bk = gemm_fwd_bwd_s(system, g, gfloor)
        bound = gemm_timed(system, g.m, g.n, g.k, g.precision, g.count).bound
        rows.append(OpTime(g.name, Phase.FWD, fw, g.flops, g.bytes, bound))
        rows.append(OpTime(g.name, Phase.BWD, bk, 2 * g.flops, 2 * g.bytes, bound))
    rows += _attention_rows(system, attn, stack, bw, plan)
    T, V = model.seq // plan.cp * plan.micro_batch, model.vocab / plan.tp
    if stack.fused:
        rows.append(OpTime(ew.name, Phase.FWD, elementwise_s(ew, bw), 0.0, ew.bytes, "memory"))
        rows.append(OpTime(ew.name, Phase.BWD, 2 * elementwise_s(ew, bw), 0.0, 2 * ew.bytes,
                           "memory"))
        loss_f, loss_b = (n * T * V for n in FUSED_LOSS_BYTES)
        loss = ((loss_f / bw, loss_f), (loss_b / bw, loss_b))
    else:  # eager: every element-wise op its own kernel (accelsim.engine.eager), or compiled
        efloor, sm = stack.floor_s(KernelKind.ELEMENTWISE), sm_scale(system.chip)
        for phase, kernels in zip((Phase.FWD, Phase.BWD), pytorch_kernels.layer_kernels(
                stack, model, plan.micro_batch, formats.gemm_precision, recipe, moe,
                autocast=autocast)):
            t, nbytes = eager.stream_s(kernels, bw, efloor, sm)
            rows.append(OpTime(ew.name, phase, t, 0.0, nbytes, "memory"))
        loss = tuple(eager.stream_s(k, bw, efloor, sm) for k in pytorch_kernels.head_kernels(
            stack, model, plan.micro_batch, pytorch_kernels.activation_precision(formats),
            autocast=autocast))
    hf, hb = gemm_fwd_bwd_s(system, head, gfloor)
    hbound = gemm_timed(system, head.m, head.n, head.k, head.precision, head.count).bound
    head_rows = [OpTime("lm_head", Phase.FWD, hf, head.flops, head.bytes, hbound),
                 OpTime("lm_head", Phase.BWD, hb, 2 * head.flops, 2 * head.bytes, hbound),
                 OpTime("loss", Phase.FWD, loss[0][0], 0.0, loss[0][1], "memory"),
                 OpTime("loss", Phase.BWD, loss[1][0], 0.0, loss[1][1], "memory")]
    return rows, head_rows


def _attention_rows(system: System, attn: AttentionOp, stack: Stack, stream_Bps: float,
                    plan: Plan) -> list[OpTime]:
    """The attention's forward and backward rows on one rank, by the stack's kernel (one
    owner, :func:`accelsim.engine.stack_ops.attention_times`), under context parallelism the
    rank's share of it (:func:`accelsim.engine.context.rank_attention`, the one owner of the
    split that infer's prefill uses too)."""
    from accelsim.engine.context import rank_attention

    attn, mul, div = rank_attention(attn, plan.cp, plan.cp_algo)
    passes = attention_times(system, attn, stack, stream_Bps)[1]
    return [OpTime("attention", Phase(ph), t * mul / div, fl * mul / div, by * mul / div, bd)
            for ph, t, fl, by, bd in passes]


def _phase_s(rows: list[OpTime], phase: Phase, names: tuple[str, ...] | None = None) -> float:
    return sum(r.time_s for r in rows if r.phase == phase and (names is None or r.op in names))


def grad_accumulation_s(mem: Memory, plan: Plan, scheme: StateFormats, hbm_Bps: float) -> float:
    """Seconds per micro-batch that an unfused gradient accumulation adds to the backward pass
    (the linear weight matrices at the scheme's bytes, the rest at its other scheme's)."""
    if plan.grad_accumulation_fusion:
        return 0.0
    per = lambda x: x.grad_accumulation_bytes  # noqa: E731
    nbytes = param_bytes(mem.counts, scheme, per)
    if mem.expert_params:  # the routed experts this GPU holds
        nbytes += param_bytes(mem.expert_counts, scheme, per)
    return nbytes / hbm_Bps


def optimizer_step_bytes(mem: Memory, plan: Plan, scheme: StateFormats) -> float:
    """HBM bytes of one GPU's optimizer step over the parameters it updates (its ZeRO shard),
    each parameter at its own formats (FP8-LM: the linear weight matrices at FP8-LM's, the rest
    at bf16's): the bytes per parameter of the one update model,
    :func:`accelsim.netsim.update_bytes_per_elem` (read gradient, master weight and moments;
    write master weight, moments and the working copy), for the plan's optimizer; routed
    experts sharded over the ``dp / ep`` ranks that hold them."""
    shard = plan.shard_group if plan.fsdp else (plan.dp_cp if plan.zero >= 1 else 1)

    def per_param(f: StateFormats) -> float:
        return sum(update_bytes_per_elem(get_scheme(f.name).for_optimizer(plan.optimizer),
                                         plan.optimizer))

    nbytes = param_bytes(mem.counts, scheme, per_param) / shard
    if mem.expert_params:  # routed experts: ZeRO shards them over the dp / ep ranks sharing them
        nbytes += param_bytes(mem.expert_counts, scheme, per_param) / (
            plan.dp // plan.ep if plan.zero >= 1 else 1)
    return nbytes


def step_schedule(pipeline_s: float, window_s: float, dp_ops, optimizer_s: float) -> Schedule:
    """The iteration after its micro-batches, as the one scheduler places it: the pipeline on
    the compute stream, its last ``window_s`` the last micro-batch's backward pass; the
    data-parallel reductions (``dp_ops``: (CommOp, seconds)) on their stream from the start of
    that window (``window_s`` 0: after the pipeline flush, Megatron's local DDP; the backward
    pass: PyTorch DDP's buckets), the optimizer step once they and the pipeline are done, the
    ZeRO weight gathers after it."""
    g = Graph()
    g.add(Task("pipeline", "micro-batches", Phase.FWD, pipeline_s - window_s))
    start = g.last()
    g.add(Task("pipeline", "last backward", Phase.BWD, window_s, deps=start))
    reduce = [(o, t) for o, t in dp_ops if o.name.endswith("dp_reduce")]
    for op, t in reduce:
        g.add(Task("grads", op.name, Phase.STEP, t, Stream.DP, deps=start, bytes=op.bytes,
                   bound="comm"))
    g.add(Task("optimizer", "update", Phase.STEP, optimizer_s,
               deps=tuple(sorted({*g.last(Stream.COMPUTE), *g.last(Stream.DP)}))))
    for op, t in dp_ops:
        if not op.name.endswith("dp_reduce"):
            g.add(Task("grads", op.name, Phase.STEP, t, Stream.DP, deps=g.last(Stream.COMPUTE),
                       bytes=op.bytes, bound="comm"))
    return schedule(g.tasks)


def _at_power_limit(model: Decoder, plan: Plan, scheme: Scheme | str, system: System,
                    params: LlmParams, engine: str) -> Prediction:
    """:func:`predict` at the highest SM clock whose step-average power fits the limit."""
    from accelsim.engine.limiter import at_power_limit

    def timed(s: System) -> tuple[Prediction, StepEnergy | None]:
        r = predict(model, plan, scheme, s, params, engine=engine)
        return r, r.energy

    pred, clock = at_power_limit(system, timed)
    # MFU and the peak stay against the preset's (datasheet) peak, not the limited clock's
    gp = get_scheme(scheme).formats(plan.optimizer).gemm_precision
    return replace(pred, power_model=True, clock_MHz=clock / 1e6,
                   peak_flops_per_gpu=system.peak_flops(gp) / system.chips)


def _resolve(model: Decoder, plan: Plan, scheme: Scheme | str, system: System,
             params: LlmParams) -> tuple[Decoder, StateFormats, MixedPrecision]:
    """The plan's checks, and the model, state formats and precision policy the stack runs
    (eager PyTorch: fp32 master weights, autocast's copies or FSDP's param dtype,
    :mod:`accelsim.engine.mixed_precision`; a flash-attention stack: flash attention)."""
    sc = get_scheme(scheme).formats(plan.optimizer)
    plan.check_model(model)
    plan.check_placement(system.chips)
    if not params.stack.fused:  # eager PyTorch (accelsim.engine.eager): one GPU or DDP
        if plan.cp > 1:
            raise InputError(f"cp {plan.cp}: context parallelism runs Transformer Engine's "
                             f"attention (stack megatron), not stack {params.stack.name}")
        pytorch_kernels.check_plan(model, plan, sc, params.stack)
    elif float8.recipe_of(sc) is not None:
        raise InputError(f"scheme {sc.name}: torchao.float8 runs on the pytorch stacks "
                         f"(--stack pytorch or pytorch-compile), not stack {params.stack.name}")
    mp = resolve(plan, sc, params.stack)
    sc = stack_formats(get_scheme(scheme), plan.optimizer, params.stack, mp.autocast)
    if params.stack.attention is AttentionKernel.FLASH:
        model = replace(model, flash_attention=True)
    if not system.chip.core.supports(sc.gemm_precision):
        raise InputError(f"system {system.name!r} has no {sc.gemm_precision} rate "
                         f"(scheme {sc.name})")
    return model, sc, mp


def _memory(model: Decoder, plan: Plan, sc: StateFormats, params: LlmParams,
            mp: MixedPrecision) -> Memory:
    """The memory account under the stack (eager PyTorch: its activations, under autocast or
    not; FSDP: the states sharded over the shard group, plus the gathered units in the param
    dtype, :mod:`accelsim.engine.fsdp`)."""
    if plan.fsdp:
        sharded = replace(plan, fsdp=False, hsdp=0, zero=3, dp=plan.shard_group,
                          fsdp_param_dtype=None)
        mem = fsdp.with_fsdp_memory(memory(model, sharded, sc, params.memory_reserve_GiB * GIB),
                                    model, plan, mp.param_bytes)
    else:
        mem = memory(model, plan, sc, params.memory_reserve_GiB * GIB)
    if params.stack.fused:
        return mem
    return replace(mem, activations_bytes=pytorch_kernels.activation_bytes(
                       model, plan, pytorch_kernels.activation_precision(sc),
                       autocast=mp.autocast),
                   # one GPU, one micro-batch: zero_grad(set_to_none=True) frees them; DDP's
                   # reducer keeps its gradient buckets (a full gradient copy) allocated across
                   # steps, and accumulation keeps the first micro-batch's gradients while the
                   # next one's activations build up
                   grads_freed_each_step=plan.dp == 1 and plan.n_micro == 1)


def _per_layer(rows: list[OpTime], cm: Comm, plan: Plan, a2a_f: float, a2a_b: float
               ) -> tuple[float, float, float]:
    """(forward, backward, recompute) seconds of one layer and micro-batch on the critical
    path: its ops, the tensor-parallel collectives, the all-to-alls (only their part longer
    than another micro-batch's computation with ``overlap_moe_comm``)."""
    f = _phase_s(rows, Phase.FWD) + cm.tp_layer_pass_s + cm.cp_layer_pass_s
    b = _phase_s(rows, Phase.BWD) + cm.tp_layer_bwd_s + cm.cp_layer_bwd_s
    if a2a_f or a2a_b:
        if plan.overlap_moe_comm:  # beside another micro-batch's forward + backward
            hidden = _phase_s(rows, Phase.FWD) + _phase_s(rows, Phase.BWD)
            b += max(0.0, a2a_f + a2a_b - hidden)
        else:
            f, b = f + a2a_f, b + a2a_b
    if plan.recompute == "full":
        return f, b, f
    if plan.recompute == "selective":
        # the attention again, with its context-parallel KV exchange
        return f, b, _phase_s(rows, Phase.FWD, ("attention",)) + cm.cp_layer_pass_s
    return f, b, 0.0


def _with_cp(cm: Comm, model: Decoder, plan: Plan, fabric, sc: StateFormats,
             rows: list[OpTime]) -> Comm:
    """``cm`` with context parallelism's KV exchange (:func:`accelsim.engine.comm.cp_comm`),
    the ring overlapped with this layer's attention (``rows``)."""
    if plan.cp == 1:
        return cm
    ops, f, b, nbytes = cp_comm(model, plan, fabric, attention_precision(sc.gemm_precision),
                                _phase_s(rows, Phase.FWD, ("attention",)),
                                _phase_s(rows, Phase.BWD, ("attention",)))
    return replace(cm, cp_ops=ops, cp_layer_pass_s=f, cp_layer_bwd_s=b, cp_bytes=nbytes)


def _recompute_flops(model: Decoder, plan: Plan) -> float:
    """FLOPs recomputation adds per iteration (full: the forward again, not the head's;
    selective: attention's)."""
    B = plan.global_batch
    if plan.recompute == "full":
        return model.model_flops(B) / 3 - model.head_flops(B)
    if plan.recompute == "selective":
        return model.attention_flops(B)
    return 0.0


def _with_tp_overlap(cm: Comm, model: Decoder, plan: Plan, sc: StateFormats, system: System,
                     params: LlmParams) -> Comm:
    """``cm``, with ``tp_comm_overlap`` its collectives in chunks beside their GEMMs
    (Transformer Engine's userbuffers, :mod:`accelsim.engine.tp_overlap`)."""
    if not plan.tp_comm_overlap:
        return cm
    return tp_overlap.with_overlap(cm, model, layer_ops(model, plan, sc)[0], plan.tp, system,
                                   params.stack)


def _a2a_exposed_s(cm: Comm, plan: Plan, mrows: list[OpTime]) -> float:
    """One MoE layer's all-to-alls on the critical path per micro-batch (with
    ``overlap_moe_comm``: the part longer than the layer's forward + backward computation)."""
    a2a = cm.ep_layer_pass_s + cm.ep_layer_bwd_s
    if mrows and plan.overlap_moe_comm:
        return max(0.0, a2a - _phase_s(mrows, Phase.FWD) - _phase_s(mrows, Phase.BWD))
    return a2a


def critical_stage(plan: Plan, layer_s: list[float], head_s: float) -> tuple[int, bool]:
    """(the slowest stage, whether its time includes the LM head and loss) from each stage's
    layers' seconds per micro-batch (``layer_s``) and the head's (``head_s``). An uneven
    split (:attr:`Plan.stage_split`) times each stage on its own work: the head on the last
    stage. Without one the head is charged to the stage with the slowest layers (the last
    stage of an even split; with a remainder of layers, the first stages' extra layer and
    the head counted together: conservative, as the validated rows were timed). Every stage
    then runs at the slowest one's pace (:func:`accelsim.engine.schedule.pipeline_s`)."""
    holder = layer_s.index(max(layer_s)) if plan.stage_split.even else plan.pp - 1
    cost = [t + (head_s if s == holder else 0.0) for s, t in enumerate(layer_s)]
    critical = cost.index(max(cost))
    return critical, critical == holder


def _pipeline(fwd_s: float, bwd_s: float, plan: Plan, send_s: float) -> tuple[float, float]:
    """``(pipeline, bubble)``: the closed-form 1F1B with each send inside its pass, or with
    ``pp_comm_overlap`` the interleaved schedule with the sends on their own stream."""
    if plan.pp_comm_overlap:
        return overlapped_pipeline_s(fwd_s, bwd_s, plan, send_s)
    return pipeline_s(fwd_s + bwd_s, plan.n_micro, plan.pp, plan.interleave)


def predict(model: GptConfig | Decoder, plan: Plan, scheme: Scheme | str, system: System,
            params: LlmParams = LlmParams(), *, engine: str = "analytic") -> Prediction:
    """Predict one training iteration of ``model`` (a GPT, or any
    :class:`~accelsim.engine.decoder.Decoder`: GQA, SwiGLU, MoE with expert parallelism, MLA)
    under ``plan`` on nodes like ``system``; ``scheme`` (a name of the one registry,
    :mod:`accelsim.arch.schemes`) and the plan's optimizer fix every state format; ``engine``
    times the collectives (``analytic`` closed form, or netsim's ``des``). The iteration is
    timed on the slowest pipeline stage (its dense and MoE layers). With the chip's power model
    enforced (``--power-model``), the whole iteration runs at the highest SM clock whose average
    power stays within the limit (:mod:`accelsim.engine.limiter`)."""
    model = Decoder.of(model)
    power = system.chip.power
    if power is not None and power.enforced:
        return _at_power_limit(model, plan, scheme, system, params, engine)
    name = get_scheme(scheme).formats(plan.optimizer).name
    model, sc, mp = _resolve(model, plan, scheme, system, params)
    fabric = fabric_of(system, params, engine)
    mem = _memory(model, plan, sc, params, mp)
    cm = _with_tp_overlap(comm(model, plan, sc, fabric, mem), model, plan, sc, system, params)
    lrows, hrows = layer_op_times(model, plan, sc, system, params, autocast=mp.autocast)
    cm = _with_cp(cm, model, plan, fabric, sc, lrows)
    mrows = layer_op_times(model, plan, sc, system, params, moe=True,
                           autocast=mp.autocast)[0] if model.is_moe \
        else []
    f_d, b_d, rec_d = _per_layer(lrows, cm, plan, 0.0, 0.0)
    f_m, b_m, rec_m = _per_layer(mrows, cm, plan, cm.ep_layer_pass_s, cm.ep_layer_bwd_s) \
        if mrows else (0.0, 0.0, 0.0)
    a2a_exposed = _a2a_exposed_s(cm, plan, mrows)
    stages = model.stage_layers(plan.pp, plan.interleave, plan.stage_split)
    critical, head_on = critical_stage(
        plan, [d * (f_d + b_d + rec_d) + (m * (f_m + b_m + rec_m) if m else 0.0)
               for d, m in stages], _phase_s(hrows, Phase.FWD) + _phase_s(hrows, Phase.BWD))
    dense, moe = stages[critical]
    head_f, head_b = (_phase_s(hrows, ph) if head_on else 0.0 for ph in (Phase.FWD, Phase.BWD))

    def stage_sum(d_val: float, m_val: float) -> float:
        return d_val * dense + (m_val * moe if moe else 0.0) if dense else m_val * moe

    hbm = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    accumulate = grad_accumulation_s(mem, plan, sc, hbm)
    p2p = 0.0 if plan.pp_comm_overlap else plan.interleave * cm.pp_p2p_s  # else beside
    fwd = stage_sum(f_d, f_m) + head_f + p2p
    bwd = stage_sum(b_d + rec_d, b_m + rec_m) + head_b + p2p + accumulate
    pipeline, bubble = _pipeline(fwd, bwd, plan, cm.pp_p2p_s)
    # one fused optimizer call: its bytes at the stack's stream bandwidth (eager: the fused
    # AdamW kernel's measured bandwidth, carried to this chip), at least one call
    opt_Bps = params.stack.update_Bps(system.chip, hbm)
    opt_s = max(optimizer_step_bytes(mem, plan, sc) / opt_Bps,
                params.stack.floor_s(KernelKind.OPTIMIZER))
    if plan.fsdp:  # per-unit gathers and reductions beside the layers, every micro-batch
        fc = fsdp.fsdp_comm(model, plan, fabric, mp.param_bytes)
        # per unit: the layer's times (a model with MoE layers: the mean over its layers)
        unit_f, unit_b = (f_d, b_d + rec_d) if not moe else (
            stage_sum(f_d, f_m) / model.layers, stage_sum(b_d + rec_d, b_m + rec_m) / model.layers)
        tail = fsdp.fsdp_schedule(
            model.layers, plan.n_micro, unit_f, unit_b, _phase_s(hrows, Phase.FWD),
            _phase_s(hrows, Phase.BWD), fc, opt_s, params.stack.comm_contention,
            plan.reshard_after_forward)
        pipeline, bubble = plan.n_micro * (fwd + bwd), 0.0
        cm = replace(cm, dp_ops=(), dp_bytes=sum(t.bytes for t in tail.tasks),
                     dp_reduce_s=sum(t.time_s for t in tail.tasks if t.stream == Stream.DP),
                     dp_gather_s=sum(t.time_s for t in tail.tasks
                                     if t.stream == Stream.FSDP))
    else:
        tail = step_schedule(pipeline, bwd if plan.overlap_grad_reduce else 0.0, cm.dp_ops,
                             opt_s)
    total = tail.makespan_s
    dp_exposed = total - pipeline - opt_s
    mflops = model.model_flops(plan.global_batch)
    pred = Prediction(
        model=model, plan=plan, scheme=name, iteration_time_s=total, pipeline_s=pipeline,
        bubble_s=bubble, dp_comm_s=dp_exposed, optimizer_s=opt_s, forward_s=fwd, backward_s=bwd,
        model_flops=mflops, hardware_flops=mflops + _recompute_flops(model, plan),
        peak_flops_per_gpu=system.peak_flops(sc.gemm_precision) / system.chips,
        memory=mem, comm=cm, layer_ops=tuple(lrows), head_ops=tuple(hrows),
        recompute_s=rec_d, grad_accumulation_s=accumulate, moe_layer_ops=tuple(mrows),
        moe_recompute_s=rec_m, critical_stage=critical, head_on_critical=head_on,
        moe_a2a_exposed_s=a2a_exposed,
        memory_capacity_bytes=float(system.chip.memory_capacity_bytes), step=tail,
        mixed_precision=mp)
    if system.chip.power is None:
        return pred
    return replace(pred, energy=step_energy(system, pred.work_rows(), sc.gemm_precision, total,
                                            plan.gpus, plan.tp * plan.dp * plan.cp))
