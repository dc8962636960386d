"""A transformer training prediction and what it reports: one plan's iteration (time, memory,
communication, energy), its per-op breakdown rows and its trace (:mod:`accelsim.engine.trace`);
built by :func:`accelsim.engine.transformer.predict`.
"""

from __future__ import annotations

from dataclasses import dataclass

from accelsim.engine.comm import Comm
from accelsim.engine.decoder import Decoder
from accelsim.engine.energy import StepEnergy
from accelsim.engine.graph import Phase, Stream
from accelsim.engine.memory import GIB, Memory, memory_fit
from accelsim.engine.mixed_precision import MixedPrecision
from accelsim.engine.plan import Plan
from accelsim.engine.scheduler import Schedule
from accelsim.engine.trace import TRACE_MICROBATCHES, Row, Timeline

#: most pipeline stages the trace draws as tracks, and most stage x micro-batch passes it
#: schedules (beyond: the critical stage's micro-batches op type by op type)
MAX_TRACE_STAGES = 32
MAX_TRACE_PASSES = 20_000


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
    #: whether the critical stage's time includes the LM head and loss
    #: (:func:`accelsim.engine.transformer.critical_stage`)
    head_on_critical: bool = True
    moe_a2a_exposed_s: float = 0.0  # per MoE layer and micro-batch, forward + backward
    energy: StepEnergy | None = None  # None: the chip has no power model
    power_model: bool = False  # the step timed at its power-limited clock (--power-model)
    clock_MHz: float | None = None  # that clock (None: the preset's fixed clock)
    memory_capacity_bytes: float | None = None  # one GPU's (fits_memory compares with it)
    #: the iteration after its micro-batches as scheduled (the pipeline, the data-parallel
    #: collectives, the optimizer step: :func:`accelsim.engine.transformer.step_schedule`)
    step: Schedule | None = None
    #: the run's precision policy (:func:`accelsim.engine.mixed_precision.resolve`)
    mixed_precision: MixedPrecision = MixedPrecision(autocast=False)

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
        out = [0] * self.model.layers
        p = self.plan
        for stage, chunks in enumerate(self.model.chunk_layers(p.pp, p.interleave,
                                                               p.stage_split)):
            for r in chunks:
                for i in r:
                    out[i] = stage
        return out

    def rows(self) -> list[Row]:
        """The breakdown (:mod:`accelsim.engine.trace`): every op of every layer, phase and
        stage over the iteration; the critical path is the critical stage's layers, plus the
        LM head when its time includes it (the stage the model times), so other stages' layers
        are not exposed."""
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
            comm_ops = list(cm.tp_ops) + list(cm.cp_ops) + (list(cm.ep_ops) if moe else [])
            shown_of = {(o.name, o.phase): e for (o, _), e in zip(cm.tp_ops, cm.tp_exposed)}
            if moe and cm.ep_ops:
                ef, eb = self._a2a_exposed()
                for ph, e, total in ((Phase.FWD, ef, cm.ep_layer_pass_s),
                                     (Phase.BWD, eb, cm.ep_layer_bwd_s)):
                    for o, t in cm.ep_ops:
                        if o.phase == ph:
                            shown_of[(o.name, o.phase)] = e * t / total if total > 0 \
                                else 0.0
            pieces += [(o.name, o.phase, t, 0.0, o.bytes, "comm", o.stream)
                       for o, t in comm_ops if t > 0 or o.bytes > 0]
            pieces.append(("recompute", Phase.BWD,
                           self.moe_recompute_s if moe else self.recompute_s, 0.0, 0.0,
                           "recompute", Stream.COMPUTE))
            for op, ph, t, fl, by, bound, stream in pieces:
                if t > 0 or by > 0:
                    shown = shown_of.get((op, ph), t)
                    out.append(Row(f"layer{i}", op, ph, stage, m, t * m,
                                   shown * m if on_path else 0.0, fl * m, by * m, bound,
                                   stream))
        for o in self.head_ops:
            out.append(Row("head", o.op, o.phase, p.pp - 1, m, o.time_s * m,
                           o.time_s * m if self.head_on_critical else 0.0,
                           o.flops * m, o.bytes * m, o.bound, o.stream))
        # the sends between stages carry the activations forward and their gradients back
        # (half of the iteration's pipeline bytes each way); on their own stream
        # (pp_comm_overlap) what they expose is in the pipeline's bubble
        step = [("pipeline", "p2p", Phase.FWD, v * cm.pp_p2p_s * m, v * m, Stream.PP,
                 cm.pp_bytes / 2),
                ("pipeline", "p2p", Phase.BWD, v * cm.pp_p2p_s * m, v * m, Stream.PP,
                 cm.pp_bytes / 2),
                ("grads", "grad_accumulation", Phase.BWD, self.grad_accumulation_s * m, m,
                 Stream.COMPUTE, 0.0),
                ("pipeline", "bubble", Phase.STEP, self.bubble_s, 1, Stream.COMPUTE, 0.0)]
        for layer, op, ph, t, n, stream, nbytes in step:
            if t > 0:
                hidden = op == "p2p" and p.pp_comm_overlap
                out.append(Row(layer, op, ph, 0, n, t, 0.0 if hidden else t, 0.0, nbytes, op,
                               stream))
        # the optimizer step and the data-parallel collectives as scheduled after the
        # micro-batches (the pipeline's own rows are above)
        out += [r for r in self.step.rows() if r.layer != "pipeline" and r.time_s > 0]
        return out

    def timeline(self) -> Timeline:
        """The iteration as trace events (:mod:`accelsim.engine.trace`): the 1F1B pipeline
        (interleaved with model chunks) as scheduled (:mod:`accelsim.engine.pipeline`; one
        track per stage, every stage at the critical one's pace as the timing assumes; without
        chunks the first :data:`~accelsim.engine.trace.TRACE_MICROBATCHES` micro-batches layer
        by layer and op by op, with chunks one event per chunk's pass), then the data-parallel
        step as scheduled; past the trace's limits the critical stage's micro-batches op type
        by op type."""
        plan = self.plan
        if plan.fsdp:  # the FSDP schedule is the whole iteration, layer by layer
            return self.step.timeline()
        if plan.pp <= MAX_TRACE_STAGES \
                and plan.pp * plan.n_micro * plan.interleave <= MAX_TRACE_PASSES:
            return self._pipeline_timeline()
        return self._merged_timeline()

    def _stage_pieces(self, stage: int, phase: Phase) -> list[tuple[str, str, float, Stream]]:
        """(event name, op, seconds, stream) of one micro-batch's ``phase`` on ``stage``, in
        order: every layer's ops and its tensor-parallel (and expert) communication, the
        recomputation, the head and loss on the last stage, the send to the next stage."""
        cm, plan = self.comm, self.plan
        fwd = phase == Phase.FWD
        out = []
        layers = [i for i, st in enumerate(self._stage_of_layer()) if st == stage]
        for i in (layers if fwd else layers[::-1]):
            moe = self.model.config.is_moe_layer(i)
            ops = self.moe_layer_ops if moe else self.layer_ops
            out += [(f"layer{i} {o.op}", o.op, o.time_s, o.stream) for o in ops
                    if o.phase == phase]
            tp = cm.tp_layer_pass_s if fwd else cm.tp_layer_bwd_s
            out.append((f"layer{i} tp_comm", "tp_comm", tp, Stream.TP))
            if plan.cp > 1:
                cp = cm.cp_layer_pass_s if fwd else cm.cp_layer_bwd_s
                out.append((f"layer{i} cp_comm", "cp_comm", cp, Stream.CP))
            if moe:
                a2a = self._a2a_exposed()[0 if fwd else 1]
                out.append((f"layer{i} all_to_all", "all_to_all", a2a, Stream.TP))
            if not fwd:
                rec = self.moe_recompute_s if moe else self.recompute_s
                out.append((f"layer{i} recompute", "recompute", rec, Stream.COMPUTE))
        if stage == plan.pp - 1:
            out += [(o.op, o.op, o.time_s, o.stream) for o in self.head_ops if o.phase == phase]
        if not fwd:
            out.append(("grad_accumulation", "grad_accumulation", self.grad_accumulation_s,
                        Stream.COMPUTE))
        if not plan.pp_comm_overlap:  # else on the send streams, as scheduled
            out.append(("p2p", "p2p", plan.interleave * cm.pp_p2p_s, Stream.PP))
        return [x for x in out if x[2] > 0]

    def _pipeline_timeline(self) -> Timeline:
        from accelsim.engine.pipeline import pipeline_schedule

        p, m, v = self.plan.pp, self.plan.n_micro, self.plan.interleave
        send = self.comm.pp_p2p_s if self.plan.pp_comm_overlap else 0.0
        sched = pipeline_schedule([self.forward_s] * p, [self.backward_s] * p, m, send, v)
        tl = Timeline()
        pieces = {(st, ph): self._stage_pieces(st, ph) for st in range(p)
                  for ph in (Phase.FWD, Phase.BWD)}
        for t, start in zip(sched.tasks, sched.start_s):
            if t.op == "send":
                if t.time_s > 0:
                    tl.beside(f"p2p ({t.phase})", start, t.time_s, f"stage {t.stage} send",
                              op="p2p")
                continue
            k, c = int(t.op.split()[-1]), int(t.layer.split()[-1])
            track = f"stage {t.stage}"
            if k >= TRACE_MICROBATCHES or v > 1:  # a chunk's pass: one event
                tl.beside((f"chunk {c} " if v > 1 else "") + f"micro-batch {k} ({t.phase})",
                          start, t.time_s, track, op=f"{t.phase} pass", micro_batch=k,
                          chunk=c)
                continue
            at = start
            for name, op, dur, stream in pieces[(t.stage, t.phase)]:
                tl.beside(f"{name} ({t.phase})", at, dur, track, op=op, micro_batch=k,
                          on=str(stream))
                at += dur
        for e in self.step.timeline().events:  # the collectives and the optimizer step
            if not e.name.startswith("pipeline"):
                tl.beside(e.name, e.start_s, e.dur_s, e.stream, **dict(e.args))
        tl.t = self.iteration_time_s
        return tl

    def _merged_timeline(self) -> Timeline:
        p, cm = self.plan, self.comm
        dense, moe = self.model.stage_layers(p.pp, p.interleave, p.stage_split)[
            self.critical_stage]
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
            if p.cp > 1:
                cp = cm.cp_layer_pass_s if phase == Phase.FWD else cm.cp_layer_bwd_s
                out.append((f"cp_comm x{layers}", layers * cp, Stream.CP))
            if moe:
                ep = self._a2a_exposed()[0 if phase == Phase.FWD else 1]
                out.append((f"all_to_all (exposed) x{moe}", moe * ep, Stream.TP))
            if phase == Phase.BWD:
                out.append((f"recompute x{layers}", dense * self.recompute_s
                            + moe * self.moe_recompute_s, Stream.COMPUTE))
                out.append(("grad_accumulation", self.grad_accumulation_s, Stream.COMPUTE))
            out += [(o.op, o.time_s, o.stream) for o in self.head_ops
                    if o.phase == phase and self.head_on_critical]
            if not p.pp_comm_overlap:
                out.append(("p2p", p.interleave * cm.pp_p2p_s, Stream.PP))
            return out

        tl = Timeline()
        tl.micro_batches(p.n_micro, pieces(Phase.FWD), pieces(Phase.BWD))
        tl.run("bubble", self.bubble_s)
        # then the step as scheduled: the collectives and the optimizer at their starts
        for e in self.step.timeline().events:
            if not e.name.startswith("pipeline"):
                tl.beside(e.name, e.start_s, e.dur_s, e.stream, **dict(e.args))
        tl.t = self.iteration_time_s
        return tl

    @property
    def tp_comm_exposed_s(self) -> float:
        """Tensor-parallel communication on the critical stage's path per iteration (its
        layers' forward, backward and fully recomputed passes, every micro-batch; with
        ``tp_comm_overlap`` the part its GEMMs do not hide)."""
        cm, p = self.comm, self.plan
        layers = sum(self.model.stage_layers(p.pp, p.interleave, p.stage_split)[
            self.critical_stage])
        passes = 2 if p.recompute == "full" else 1
        return layers * p.n_micro * (passes * cm.tp_layer_pass_s + cm.tp_layer_bwd_s)

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
            **memory_fit(self.memory.total_bytes, self.memory_capacity_bytes),
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
            "cp_comm_GB": self.comm.cp_bytes / 1e9,  # per iteration, per GPU (cp > 1)
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
            "gpus": p.gpus, "tp": p.tp, "pp": p.pp, "dp": p.dp, "ep": p.ep, "cp": p.cp,
            "cp_algo": p.cp_algo,
            "micro_batch": p.micro_batch, "global_batch": p.global_batch,
            "interleave": p.interleave, "recompute": p.recompute,
            "sequence_parallel": p.sequence_parallel, "zero": p.zero,
            "overlap_grad_reduce": p.overlap_grad_reduce,
            "overlap_moe_comm": p.overlap_moe_comm,
            "grad_accumulation_fusion": p.grad_accumulation_fusion, "scheme": self.scheme,
            "fsdp": p.fsdp, "hsdp": p.hsdp,
            "fsdp_param_dtype": self.mixed_precision.fsdp_param_dtype,
            "fsdp_reduce_dtype": p.fsdp_reduce_dtype if p.fsdp else None,
            "autocast": self.mixed_precision.autocast,
            "tp_comm_overlap": p.tp_comm_overlap, "pp_comm_overlap": p.pp_comm_overlap,
            "tp_comm_exposed_s": self.tp_comm_exposed_s,
            "stage_layers": [sum(x) for x in self.model.stage_layers(p.pp, p.interleave,
                                                                    p.stage_split)],
            "critical_stage": self.critical_stage, "memory_stage": self.memory.stage,
        }
