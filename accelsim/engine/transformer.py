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

from dataclasses import dataclass, replace

from accelsim.arch import System
from accelsim.arch.model import OPERAND_BYTES
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.arch.states import StateFormats, param_bytes
from accelsim.engine import decoder, eager
from accelsim.engine.comm import Comm, comm, fabric_of
from accelsim.engine.decoder import Decoder
from accelsim.engine.energy import StepEnergy, step_energy
from accelsim.engine.memory import GIB, Memory, memory
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.graph import (
    AttentionOp,
    ElementwiseOp,
    GemmOp,
    Phase,
    Stream,
    attention_parts,
    attention_precision,
    elementwise_s,
    flash_attention_parts,
    gemm_fwd_bwd_s,
    gemm_timed,
)
from accelsim.engine.stack import (AttentionKernel, EagerKernel, KernelKind, kernel_Bps,
                                   sm_scale)
from accelsim.engine.schedule import exposed_comm_s, pipeline_s
from accelsim.engine.trace import Row, Timeline
from accelsim.netsim.update import update_bytes_per_elem
from accelsim.workload.gpt import GptConfig
from accelsim.errors import InputError

@dataclass(frozen=True)
class OpTime:
    """One op of one transformer layer (or of the LM head) on one micro-batch: seconds on its
    stream, FLOPs and HBM bytes, what bounds it."""

    op: str
    phase: Phase
    time_s: float
    flops: float
    bytes: float
    bound: str
    stream: Stream = Stream.COMPUTE


def layer_ops(model: GptConfig | Decoder, plan: Plan, formats: StateFormats, moe: bool = False,
              vocab_multiple: int = 1
              ) -> tuple[tuple[GemmOp, ...], AttentionOp, ElementwiseOp, GemmOp]:
    """The ops of one (dense or MoE) layer on one GPU and one micro-batch
    (:func:`accelsim.engine.decoder.layer_ops`: for GPT, Megatron's split QKV (T, 3h/t, h),
    projection (T, h, h/t), FC1 (T, F/t, h), FC2 (T, h, F/t), T = b s tokens; attention over
    the GPU's a/t heads), and the LM head (vocabulary-parallel, the vocabulary padded to a
    multiple of ``vocab_multiple x t``)."""
    model = Decoder.of(model)
    T, gp = model.seq * plan.micro_batch, formats.gemm_precision
    gemms, attn, ew = decoder.layer_ops(model, moe, T, plan.micro_batch, plan.tp, plan.ep,
                                        plan.sequence_parallel, gp)
    return gemms, attn, ew, decoder.head_op(model, T, plan.tp, gp, vocab_multiple)


def layer_op_times(model: GptConfig | Decoder, plan: Plan, formats: StateFormats,
                   system: System, params: LlmParams, moe: bool = False
                   ) -> tuple[list[OpTime], list[OpTime]]:
    """Per-op times of one layer and of the LM head (with its softmax / cross-entropy passes
    over the logits: 3 and 2 x 2 bytes per logit forward and backward) on one micro-batch."""
    model = Decoder.of(model)
    stack = params.stack
    linear, attn, ew, head = layer_ops(model, plan, formats, moe, stack.vocab_multiple)
    if not system.chip.core.supports(attn.precision):  # bf16 attention on a chip without it
        attn = replace(attn, precision=attention_precision(attn.precision, system.chip.core))
    bw = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    gfloor = stack.floor_s(KernelKind.GEMM)
    rows: list[OpTime] = []
    for g in linear:
        fw, bk = gemm_fwd_bwd_s(system, g, gfloor)
        bound = gemm_timed(system, g.m, g.n, g.k, g.precision, g.count).bound
        rows.append(OpTime(g.name, Phase.FWD, fw, g.flops, g.bytes, bound))
        rows.append(OpTime(g.name, Phase.BWD, bk, 2 * g.flops, 2 * g.bytes, bound))
    if stack.attention is AttentionKernel.FLASH:  # one fused kernel (SDPA)
        attn = replace(attn, flash=True)
        af, ab, abound = flash_attention_parts(system, attn, stack.flash, bw,
                                               stack.floor_s(KernelKind.ATTENTION))
        bflops, bbytes = attn.backward_flops, attn.backward_bytes
    else:
        af, ab, abound = attention_parts(system, attn, bw)
        bflops, bbytes = 2 * attn.flops, 2 * attn.bytes
    rows.append(OpTime("attention", Phase.FWD, af, attn.flops, attn.bytes, abound))
    rows.append(OpTime("attention", Phase.BWD, ab, bflops, bbytes, abound))
    T, V = model.seq * plan.micro_batch, model.vocab / plan.tp
    if stack.fused:
        rows.append(OpTime(ew.name, Phase.FWD, elementwise_s(ew, bw), 0.0, ew.bytes, "memory"))
        rows.append(OpTime(ew.name, Phase.BWD, 2 * elementwise_s(ew, bw), 0.0, 2 * ew.bytes,
                           "memory"))
        loss_f, loss_b = 3 * T * V * 2, T * V * 2 * 2
        loss = ((loss_f / bw, loss_f), (loss_b / bw, loss_b))
    else:  # eager: every element-wise op its own kernel (accelsim.engine.eager)
        efloor, sm = stack.floor_s(KernelKind.ELEMENTWISE), sm_scale(system.chip)
        for phase, kernels in zip((Phase.FWD, Phase.BWD), eager.layer_kernels(
                model, plan.micro_batch, formats.gemm_precision)):
            t, nbytes = eager.stream_s(kernels, bw, efloor, sm)
            rows.append(OpTime(ew.name, phase, t, 0.0, nbytes, "memory"))
        loss = tuple(eager.stream_s(k, bw, efloor, sm) for k in eager.head_kernels(
            model, plan.micro_batch, formats.gemm_precision))
    hf, hb = gemm_fwd_bwd_s(system, head, gfloor)
    hbound = gemm_timed(system, head.m, head.n, head.k, head.precision, head.count).bound
    head_rows = [OpTime("lm_head", Phase.FWD, hf, head.flops, head.bytes, hbound),
                 OpTime("lm_head", Phase.BWD, hb, 2 * head.flops, 2 * head.bytes, hbound),
                 OpTime("loss", Phase.FWD, loss[0][0], 0.0, loss[0][1], "memory"),
                 OpTime("loss", Phase.BWD, loss[1][0], 0.0, loss[1][1], "memory")]
    return rows, head_rows


def _phase_s(rows: list[OpTime], phase: Phase, names: tuple[str, ...] | None = None) -> float:
    return sum(r.time_s for r in rows if r.phase == phase and (names is None or r.op in names))


@dataclass(frozen=True)
class Prediction:
    """One plan's predicted iteration (all per GPU unless named otherwise)."""

    model: Decoder
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
    layer_ops: tuple[OpTime, ...] = ()  # one layer, one micro-batch
    head_ops: tuple[OpTime, ...] = ()  # the LM head and loss, one micro-batch
    recompute_s: float = 0.0  # per layer and micro-batch, in the backward pass
    grad_accumulation_s: float = 0.0  # per micro-batch (unfused accumulation)
    moe_layer_ops: tuple[OpTime, ...] = ()  # one MoE layer, one micro-batch
    moe_recompute_s: float = 0.0
    critical_stage: int = 0  # the stage the iteration is timed on (the slowest)
    moe_a2a_exposed_s: float = 0.0  # per MoE layer and micro-batch, forward + backward
    energy: StepEnergy | None = None  # None: the chip has no power model
    power_model: bool = False  # the step timed at its power-limited clock (--power-model)
    clock_MHz: float | None = None  # that clock (None: the preset's fixed clock)

    def work_rows(self) -> list[Row]:
        """The compute rows of :meth:`rows` summed per op over every layer of its kind (the same
        FLOPs, bytes and times in a few rows: what the energy account needs, cheaply)."""
        m, c = self.plan.n_micro, self.model.config
        n_moe = c.n_moe_layers
        out = []
        for ops, n in ((self.layer_ops, self.model.layers - n_moe), (self.moe_layer_ops, n_moe)):
            for o in ops if n else ():
                k = n * m
                out.append(Row("layers", o.op, o.phase, 0, k, o.time_s * k, 0.0, o.flops * k,
                               o.bytes * k, o.bound, o.stream))
        for o in self.head_ops:
            out.append(Row("head", o.op, o.phase, 0, m, o.time_s * m, 0.0, o.flops * m,
                           o.bytes * m, o.bound, o.stream))
        return out

    def _a2a_exposed(self) -> tuple[float, float]:
        """(forward, backward) exposed all-to-all of one MoE layer and micro-batch."""
        e = self.moe_a2a_exposed_s
        f = min(self.comm.ep_layer_pass_s, e)
        return f, e - f

    def _stage_of_layer(self) -> list[int]:
        p, v, L = self.plan.pp, self.plan.interleave, self.model.layers
        if v > 1:
            per_chunk = L // (p * v)
            return [(i // per_chunk) % p for i in range(L)]
        out: list[int] = []
        for stage, (d, m) in enumerate(self.model.stage_layers(p)):
            out += [stage] * (d + m)
        return out

    def rows(self) -> list[Row]:
        """The breakdown (:mod:`accelsim.engine.trace`): every op of every layer, phase and
        stage over the iteration; the critical path is the first stage's layers plus the LM
        head (the stage the model times), so other stages' layers are not exposed."""
        p, m, v = self.plan, self.plan.n_micro, self.plan.interleave
        cm = self.comm
        out: list[Row] = []
        for i, stage in enumerate(self._stage_of_layer()):
            on_path = stage == self.critical_stage
            moe = self.model.config.is_moe_layer(i)
            ops = self.moe_layer_ops if moe else self.layer_ops
            pieces = [(o.op, o.phase, o.time_s, o.flops, o.bytes, o.bound, o.stream)
                      for o in ops]
            # the CommOps the tensor- and expert-parallel transformations inserted (bytes sent
            # per GPU); the all-to-alls' exposed share split over each phase's ops by time
            comm_ops = list(cm.tp_ops) + (list(cm.ep_ops) if moe else [])
            shown_of = {}
            if moe and cm.ep_ops:
                ef, eb = self._a2a_exposed()
                for ph, e, total in ((Phase.FWD, ef, cm.ep_layer_pass_s),
                                     (Phase.BWD, eb, cm.ep_layer_bwd_s)):
                    for o, t in cm.ep_ops:
                        if o.phase == ph:
                            shown_of[o.name] = e * t / total if total > 0 else 0.0
            pieces += [(o.name, o.phase, t, 0.0, o.bytes, "comm", o.stream)
                       for o, t in comm_ops if t > 0 or o.bytes > 0]
            pieces.append(("recompute", Phase.BWD,
                           self.moe_recompute_s if moe else self.recompute_s, 0.0, 0.0,
                           "recompute", Stream.COMPUTE))
            for op, ph, t, fl, by, bound, stream in pieces:
                if t > 0 or by > 0:
                    shown = shown_of.get(op, t)
                    out.append(Row(f"layer{i}", op, ph, stage, m, t * m,
                                   shown * m if on_path else 0.0, fl * m, by * m, bound,
                                   stream))
        for o in self.head_ops:
            out.append(Row("head", o.op, o.phase, p.pp - 1, m, o.time_s * m, o.time_s * m,
                           o.flops * m, o.bytes * m, o.bound, o.stream))
        step = [("pipeline", "p2p", Phase.FWD, v * cm.pp_p2p_s * m, v * m, Stream.PP),
                ("pipeline", "p2p", Phase.BWD, v * cm.pp_p2p_s * m, v * m, Stream.PP),
                ("grads", "grad_accumulation", Phase.BWD, self.grad_accumulation_s * m, m,
                 Stream.COMPUTE),
                ("pipeline", "bubble", Phase.STEP, self.bubble_s, 1, Stream.COMPUTE),
                ("optimizer", "update", Phase.STEP, self.optimizer_s, 1, Stream.COMPUTE)]
        for layer, op, ph, t, n, stream in step:
            if t > 0:
                out.append(Row(layer, op, ph, 0, n, t, t, 0.0, 0.0, op, stream))
        # the hidden part of the data-parallel traffic comes off the reductions, in order
        hidden = cm.dp_s - self.dp_comm_s
        for op, t in cm.dp_ops:
            if t > 0:
                shown = t
                if op.name.endswith("dp_reduce"):
                    shown = max(0.0, t - hidden)
                    hidden -= t - shown
                out.append(Row("grads", op.name, Phase.STEP, 0, 1, t, shown, 0.0, op.bytes,
                               "comm", Stream.DP))
        return out

    def timeline(self) -> Timeline:
        """The iteration on the critical stage as trace events (:mod:`accelsim.engine.trace`)."""
        p, cm = self.plan, self.comm
        dense, moe = self.model.stage_layers(p.pp, p.interleave)[self.critical_stage]
        layers = dense + moe
        by_op: dict[tuple[str, Phase], float] = {}
        for ops, n in ((self.layer_ops, dense), (self.moe_layer_ops, moe)):
            for o in ops if n else ():
                by_op[(o.op, o.phase)] = by_op.get((o.op, o.phase), 0.0) + n * o.time_s

        def pieces(phase: Phase) -> list[tuple[str, float, Stream]]:
            out = [(f"{op} x{layers}", t, Stream.COMPUTE) for (op, ph), t in by_op.items()
                   if ph == phase]
            tp = cm.tp_layer_pass_s if phase == Phase.FWD else cm.tp_layer_bwd_s
            out.append((f"tp_comm x{layers}", layers * tp, Stream.TP))
            if moe:
                ep = self._a2a_exposed()[0 if phase == Phase.FWD else 1]
                out.append((f"all_to_all (exposed) x{moe}", moe * ep, Stream.TP))
            if phase == Phase.BWD:
                out.append((f"recompute x{layers}", dense * self.recompute_s
                            + moe * self.moe_recompute_s, Stream.COMPUTE))
                out.append(("grad_accumulation", self.grad_accumulation_s, Stream.COMPUTE))
            out += [(o.op, o.time_s, o.stream) for o in self.head_ops if o.phase == phase]
            out.append(("p2p", p.interleave * cm.pp_p2p_s, Stream.PP))
            return out

        tl = Timeline()
        tl.micro_batches(p.n_micro, pieces(Phase.FWD), pieces(Phase.BWD))
        backprop_end = tl.t
        tl.run("bubble", self.bubble_s)
        # the hidden part of the gradient reduction runs during the last backward pass; the
        # optimizer step follows the reduction and the ZeRO weight gathers follow the step
        hidden = cm.dp_s - self.dp_comm_s
        tl.beside("dp_reduce (hidden)", backprop_end - hidden, hidden, Stream.DP)
        tl.run("dp_reduce", max(0.0, cm.dp_reduce_s - hidden), Stream.DP)
        tl.run("optimizer", self.optimizer_s)
        tl.run("dp_gather", cm.dp_gather_s, Stream.DP)
        return tl

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
            "all_to_all_GB": self.comm.ep_bytes / 1e9,  # per iteration, per GPU (MoE, ep > 1)
            "pp_comm_GB": self.comm.pp_bytes / 1e9,
            "pipeline_s": self.pipeline_s,
            "bubble_s": self.bubble_s,
            "dp_comm_s": self.dp_comm_s,
            "optimizer_s": self.optimizer_s,
            "energy_J": None if self.energy is None else self.energy.energy_J,  # all GPUs
            # one name per meaning: power_W is the whole system's (as explore's and sweep's)
            "power_W": None if self.energy is None else self.energy.power_W * p.gpus,
            "power_W_per_gpu": None if self.energy is None else self.energy.power_W,
            "power_model": self.power_model,
            "clock_MHz": self.clock_MHz,
            "params": self.model.n_params,
            "active_params": self.model.n_active_params,
            "model": self.model.name,
            "seq": self.model.seq,
            "gpus": p.gpus, "tp": p.tp, "pp": p.pp, "dp": p.dp, "ep": p.ep,
            "micro_batch": p.micro_batch, "global_batch": p.global_batch,
            "interleave": p.interleave, "recompute": p.recompute,
            "sequence_parallel": p.sequence_parallel, "zero": p.zero,
            "overlap_grad_reduce": p.overlap_grad_reduce,
            "overlap_moe_comm": p.overlap_moe_comm,
            "grad_accumulation_fusion": p.grad_accumulation_fusion, "scheme": self.scheme,
        }


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
    shard = plan.dp if plan.zero >= 1 else 1

    def per_param(f: StateFormats) -> float:
        return sum(update_bytes_per_elem(get_scheme(f.name).for_optimizer(plan.optimizer),
                                         plan.optimizer))

    nbytes = param_bytes(mem.counts, scheme, per_param) / shard
    if mem.expert_params:  # routed experts: ZeRO shards them over the dp / ep ranks sharing them
        nbytes += param_bytes(mem.expert_counts, scheme, per_param) / (
            plan.dp // plan.ep if plan.zero >= 1 else 1)
    return nbytes


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
        from accelsim.engine.limiter import at_power_limit

        def timed(s: System) -> tuple[Prediction, StepEnergy | None]:
            r = predict(model, plan, scheme, s, params, engine=engine)
            return r, r.energy

        pred, clock = at_power_limit(system, timed)
        # MFU and the peak stay against the preset's (datasheet) peak, not the limited clock's
        gp = get_scheme(scheme).formats(plan.optimizer).gemm_precision
        return replace(pred, power_model=True, clock_MHz=clock / 1e6,
                       peak_flops_per_gpu=system.peak_flops(gp) / system.chips)
    sc = get_scheme(scheme).formats(plan.optimizer)
    plan.check_model(model)
    plan.check_placement(system.chips)
    name = sc.name
    if not params.stack.fused:  # eager PyTorch (accelsim.engine.eager): one GPU or DDP
        eager.check_plan(model, plan, sc)
        if params.stack.autocast:
            sc = eager.autocast_formats(sc, plan.optimizer)
    if params.stack.attention is AttentionKernel.FLASH:
        model = replace(model, flash_attention=True)
    if not system.chip.core.supports(sc.gemm_precision):
        raise InputError(f"system {system.name!r} has no {sc.gemm_precision} rate "
                         f"(scheme {sc.name})")
    fabric = fabric_of(system, params, engine)
    mem = memory(model, plan, sc, params.memory_reserve_GiB * GIB)
    if not params.stack.fused:
        mem = replace(mem, activations_bytes=eager.activation_bytes(model, plan,
                                                                    sc.gemm_precision),
                      # one GPU, one micro-batch: zero_grad(set_to_none=True) frees them;
                      # DDP's reducer keeps its gradient buckets (a full gradient copy)
                      # allocated across steps, and accumulation keeps the first micro-batch's
                      # gradients while the next one's activations build up
                      grads_freed_each_step=plan.dp == 1 and plan.n_micro == 1)
    cm = comm(model, plan, sc, fabric, mem)
    lrows, hrows = layer_op_times(model, plan, sc, system, params)
    mrows = layer_op_times(model, plan, sc, system, params, moe=True)[0] if model.is_moe \
        else []

    def per_layer(rows: list[OpTime], a2a_f: float, a2a_b: float) -> tuple[float, float, float]:
        f = _phase_s(rows, Phase.FWD) + cm.tp_layer_pass_s
        b = _phase_s(rows, Phase.BWD) + cm.tp_layer_bwd_s
        if a2a_f or a2a_b:
            if plan.overlap_moe_comm:  # beside another micro-batch's forward + backward
                hidden = _phase_s(rows, Phase.FWD) + _phase_s(rows, Phase.BWD)
                b += max(0.0, a2a_f + a2a_b - hidden)
            else:
                f, b = f + a2a_f, b + a2a_b
        if plan.recompute == "full":
            rec = f
        elif plan.recompute == "selective":
            rec = _phase_s(rows, Phase.FWD, ("attention",))
        else:
            rec = 0.0
        return f, b, rec

    f_d, b_d, rec_d = per_layer(lrows, 0.0, 0.0)
    f_m, b_m, rec_m = per_layer(mrows, cm.ep_layer_pass_s, cm.ep_layer_bwd_s) if mrows \
        else (0.0, 0.0, 0.0)
    a2a = cm.ep_layer_pass_s + cm.ep_layer_bwd_s
    a2a_exposed = a2a
    if mrows and plan.overlap_moe_comm:
        a2a_exposed = max(0.0, a2a - _phase_s(mrows, Phase.FWD) - _phase_s(mrows, Phase.BWD))
    stages = model.stage_layers(plan.pp, plan.interleave)
    cost = [d * (f_d + b_d + rec_d) + (m * (f_m + b_m + rec_m) if m else 0.0)
            for d, m in stages]
    critical = cost.index(max(cost))
    dense, moe = stages[critical]

    def stage_sum(d_val: float, m_val: float) -> float:
        return d_val * dense + (m_val * moe if moe else 0.0) if dense else m_val * moe

    v = plan.interleave
    hbm = system.chip.memory_bandwidth_Bps * params.memory_efficiency
    accumulate = grad_accumulation_s(mem, plan, sc, hbm)
    fwd = stage_sum(f_d, f_m) + _phase_s(hrows, Phase.FWD) + v * cm.pp_p2p_s
    bwd = stage_sum(b_d + rec_d, b_m + rec_m) + _phase_s(hrows, Phase.BWD) + v * cm.pp_p2p_s \
        + accumulate
    pipeline, bubble = pipeline_s(fwd + bwd, plan.n_micro, plan.pp, v)
    # one fused optimizer call: its bytes at the stack's stream bandwidth (eager: the fused
    # AdamW kernel's measured bandwidth, carried to this chip), at least one call
    opt_Bps = hbm if params.stack.fused else kernel_Bps(EagerKernel.OPTIMIZER, hbm,
                                                        sm_scale(system.chip))
    opt_s = max(optimizer_step_bytes(mem, plan, sc) / opt_Bps,
                params.stack.floor_s(KernelKind.OPTIMIZER))
    # the optimizer step is charged on its own (opt_s): no update term in the overlap rule
    dp_exposed = exposed_comm_s(cm.dp_reduce_s, cm.dp_gather_s, 0.0,
                                bwd if plan.overlap_grad_reduce else 0.0)
    total = pipeline + dp_exposed + opt_s
    B = plan.global_batch
    mflops = model.model_flops(B)
    extra = 0.0
    if plan.recompute == "full":
        extra = mflops / 3 - model.head_flops(B)  # no head recompute
    elif plan.recompute == "selective":
        extra = model.attention_flops(B)
    pred = Prediction(
        model=model, plan=plan, scheme=name, iteration_time_s=total, pipeline_s=pipeline,
        bubble_s=bubble, dp_comm_s=dp_exposed, optimizer_s=opt_s, forward_s=fwd, backward_s=bwd,
        model_flops=mflops, hardware_flops=mflops + extra,
        peak_flops_per_gpu=system.peak_flops(sc.gemm_precision) / system.chips,
        memory=mem, comm=cm, layer_ops=tuple(lrows), head_ops=tuple(hrows),
        recompute_s=rec_d, grad_accumulation_s=accumulate, moe_layer_ops=tuple(mrows),
        moe_recompute_s=rec_m, critical_stage=critical, moe_a2a_exposed_s=a2a_exposed)
    if system.chip.power is None:
        return pred
    return replace(pred, energy=step_energy(system, pred.work_rows(), sc.gemm_precision, total,
                                            plan.gpus, plan.tp * plan.dp))
