"""The engine's entry points: one training iteration of a workload on a system under a plan,
timed by perf (compute), netsim (communication) and the one schedule
(:mod:`accelsim.engine.schedule`), with the one memory account (:mod:`accelsim.engine.memory`).

* :func:`simulate`: the one call -- (system, workload, plan, scheme, options) -> a typed result with
  time, memory, the per-op breakdown and the trace, for any workload;
* :func:`predict_workload`: a layer workload, data parallel over a system's chips;
* :func:`data_parallel_step`: gradient reduction, update and schedule for a compute profile
  (``predict``, the HFP8 study and sweeps, whose compute mapping comes from the explorer);
* :func:`accelsim.engine.transformer.predict`: a transformer under 3-D parallelism (``llm``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from accelsim.arch import System
from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.bounds import MEMORY_RESERVE_GiB, check_bool, check_number
from accelsim.engine.energy import StepEnergy, rows_work, work_energy
from accelsim.engine.graph import CommKind, CommOp, Phase, Stream, UpdateOp
from accelsim.engine.layers import PhaseSums, phase_sums
from accelsim.engine.lower import data_parallel_program
from accelsim.engine.plan import LlmParams, Plan
from accelsim.engine.stack_ops import step_scheme
from accelsim.engine.scheduler import (LayerPhases, Schedule, Task, data_parallel_graph,
                                       schedule)
from accelsim.engine.schedule import (
    CommPhases,
    ComputeProfile,
    StepTime,
    TrainingParams,
    combine,
)
from accelsim.engine.trace import Row, Timeline
from accelsim.perf.gemm import FITTED, Efficiency
from accelsim.workload import Workload
from accelsim.workload.gpt import GptConfig

if TYPE_CHECKING:
    from accelsim.engine.decoder import Decoder
    from accelsim.engine.transformer import Prediction
from accelsim.errors import InputError


def comm_phases(system: System, workload: Workload, scheme: str,
                params: TrainingParams) -> CommPhases:
    """Gradient-reduction phases from :func:`accelsim.netsim.gradient_reduction_times` on the
    system as built (its link bandwidths are the scenario's). On one chip there is nothing to
    reduce: only the weight update remains."""
    from accelsim.netsim import UpdateParams, gradient_reduction_times

    upd = UpdateParams(memory_efficiency=params.memory_efficiency,
                       per_tensor_overhead_s=params.per_tensor_overhead_s)
    p = gradient_reduction_times(system, int(workload.n_params), scheme,
                                 compression=params.compression, engine=params.engine,
                                 optimizer=params.optimizer,
                                 n_tensors=workload.n_param_tensors, update=upd)
    return CommPhases(reduce_scatter_s=p.reduce_scatter_s - p.compression_s,
                      all_gather_s=p.all_gather_s, weight_update_s=p.weight_update_s,
                      compression_s=p.compression_s)


def update_efficiency(system: System, stack: LlmParams) -> float:
    """The fraction of HBM the stack's optimizer step streams at on ``system``'s chip: the
    transformer path's update bandwidth (:meth:`accelsim.engine.stack.Stack.update_Bps`), one
    number per stack whichever front-end asks."""
    hbm = system.chip.memory_bandwidth_Bps
    return stack.stack.update_Bps(system.chip, hbm * stack.memory_efficiency) / hbm


def training_params(minibatch: int, *, optimizer: str = "sgd-momentum",
                    engine: str = "analytic", compression: float = 1.0,
                    efficiency: Efficiency = FITTED, system: System | None = None,
                    stack: LlmParams | None = None) -> TrainingParams:
    """The step parameters ``predict`` and ``explore`` time a layer workload's data-parallel
    step with (one owner): no overlap, no per-tensor overhead, the update streaming at the
    ``stack``'s update efficiency on ``system`` (:func:`update_efficiency`) or, without a
    stack, ``efficiency``'s fitted memory efficiency (the HFP8 study passes its calibrated
    setup instead)."""
    eff = efficiency.memory_efficiency if stack is None else update_efficiency(system, stack)
    return TrainingParams(minibatch=minibatch, memory_efficiency=eff,
                          optimizer=optimizer, engine=engine, compression=compression)


def data_parallel_step(system: System, workload: Workload, scheme, params: TrainingParams,
                       profile: ComputeProfile) -> StepTime:
    """One data-parallel iteration: ``profile``'s compute, the gradient reduction and weight
    update of ``workload``'s parameters over ``system``'s chips, composed by the schedule."""
    if workload.n_params == 0:  # nothing to reduce or update (e.g. a workload of matmuls)
        comm = CommPhases(0.0, 0.0, 0.0, 0.0)
    else:
        comm = comm_phases(system, workload, scheme, params)
    return combine(profile, comm, overlap=params.overlap)


@dataclass(frozen=True)
class WorkloadPrediction:
    """One data-parallel training iteration of a layer workload (``predict``): the schedule's
    :class:`StepTime`, the compute profile per layer and phase, the memory account, and the
    program -- the lowered layers and the step the data-parallel transformation appends
    (gradient CommOps, the UpdateOp; :func:`accelsim.engine.lower.data_parallel_program`)."""

    system: System
    workload: Workload
    scheme: Scheme
    optimizer: str
    batch: int  # samples per chip
    fusion: bool
    phases: PhaseSums
    step: StepTime
    memory_reserve_bytes: float = 0.0
    program: tuple = ()
    clock_MHz: float | None = None  # the power-limited clock the step ran at (None: fixed)
    energy: StepEnergy | None = None  # the step's energy at that clock (a power table only)

    @property
    def memory_bytes(self) -> float:
        return self.phases.memory_bytes + self.memory_reserve_bytes

    @property
    def model_flops(self) -> float:
        """Model FLOPs of the iteration over its global minibatch: 3 x the forward FLOPs
        (2 x multiply-adds) of every GEMM layer (conv, linear, matmul), the MFU convention (no
        recomputation; backward counted as twice the forward, whether or not the first layer's
        input gradient is computed) -- ``model_flops_per_iteration`` in ``predict --json``, so
        an import can be checked against a hand count."""
        return 3 * self.workload.flops(self.batch * self.system.chips)["fwd"]

    def as_dict(self) -> dict:
        """The JSON fields of ``accelsim predict``."""
        st, ps, system = self.step, self.phases, self.system
        cap = system.chip.memory_capacity_bytes
        return {
            "system": system.name, "workload": self.workload.name, "scheme": self.scheme.name,
            "optimizer": self.optimizer, "batch": self.batch, "chips": system.chips,
            "fusion": "on" if self.fusion else "off", "layout": system.chip.layout,
            "winograd": "on" if system.chip.winograd else "off",
            "samples_per_s": st.samples_per_s, "step_time_s": st.step_s,
            "tflops": st.achieved_flops_per_s / 1e12, "peak_tflops": st.peak_flops_per_s / 1e12,
            "memory_GiB": self.memory_bytes / 2**30,
            "memory_reserve_GiB": self.memory_reserve_bytes / 2**30,
            "memory_capacity_GiB": cap / 2**30,
            "fits_memory": bool(self.memory_bytes <= cap),
            "compute_s": st.compute_s, "fwd_s": st.fwd_s, "bwd_data_s": st.bwd_data_s,
            "wgrad_s": st.wgrad_s, "elementwise_s": st.elementwise_s, "launch_s": ps.launch_s,
            "comm_s": st.comm_s, "exposed_comm_s": st.exposed_comm_s,
            "weight_update_s": st.weight_update_s, "dataflow": ps.dataflow,
            "power_model": self.clock_MHz is not None, "clock_MHz": self.clock_MHz,
        }

    def step_ops(self) -> list[tuple[CommOp | UpdateOp, float]]:
        """The program's step ops after back-propagation, in order, each with its seconds
        (netsim's: :func:`comm_phases`)."""
        st = self.step
        seconds = {CommKind.REDUCE_SCATTER: st.reduce_scatter_s,
                   CommKind.ALL_GATHER: st.all_gather_s}
        out = []
        for op in self.program[len(self.phases.ops):]:
            if isinstance(op, UpdateOp):
                out.append((op, st.weight_update_s))
            elif op.kind in seconds:
                out.append((op, seconds[op.kind]))
            else:
                raise ValueError(f"data-parallel step op {op!r} has no time in the schedule")
        return out

    def graph(self) -> tuple[Task, ...]:
        """The iteration as one per-rank op graph (:func:`accelsim.engine.scheduler.
        data_parallel_graph`): the layers' phases on the compute stream, the compression
        pass, then the program's step ops in the scheme's phase order, the collectives on the
        data-parallel stream (the reduction starts after back-propagation, as the HFP8
        paper's numbers imply; the update needs the reduced gradients)."""
        layers: dict[int, list] = {}
        for p in self.phases.layer_phases:
            layers.setdefault(id(p.op), [p.op, []])[1].append(
                (Phase(p.phase), p.time_s, p.flops, p.bytes, p.bound))
        step = [Task("grads", op.name, Phase.STEP, t,
                     op.stream if isinstance(op, CommOp) else Stream.COMPUTE, bytes=op.bytes)
                for op, t in self.step_ops()]
        return data_parallel_graph(
            [LayerPhases(op.name, op.kind, tuple(ph)) for op, ph in layers.values()],
            step=step, compression_s=self.step.compression_s)

    def schedule(self) -> Schedule:
        """:meth:`graph` placed on its streams by the one scheduler."""
        return schedule(self.graph())

    def rows(self) -> list[Row]:
        """The breakdown, read from :meth:`schedule` (rows in execution order; a step op of no
        time is left out)."""
        return [r for r in self.schedule().rows() if r.time_s > 0 or r.phase != Phase.STEP]

    def timeline(self) -> Timeline:
        """The trace, read from :meth:`schedule`."""
        return self.schedule().timeline()


def predict_workload(system: System, workload: Workload, batch: int, scheme: str | Scheme, *,
                     fusion: bool, layout: str | None = None,
                     efficiency: Efficiency | None = None, winograd: bool | None = None,
                     optimizer: str = "sgd-momentum", memory_reserve_bytes: float = 0.0,
                     collective_engine: str = "analytic",
                     stack: LlmParams | None = None) -> WorkloadPrediction:
    """One training iteration of ``workload`` at ``batch`` per chip on ``system`` (kernel fusion
    on/off; activation ``layout`` and ``winograd`` None = the config's; ``winograd=True`` needs
    a chip with a memory hierarchy, else ValueError) under ``optimizer``'s state formats: the
    compute model (:func:`accelsim.engine.layers.phase_sums`) plus the gradient reduction and
    weight update (:func:`data_parallel_step`); ``memory_reserve_bytes`` outside the tensors.
    ``stack``: the software stack whose kernels run the op kinds it has rules for (attention,
    the LM head's vocabulary, a fused stack's element-wise layers and loss) and whose update
    efficiency streams the optimizer step (:mod:`accelsim.engine.stack_ops`); None: perf's
    calibrated per-layer model for every layer and the update at ``efficiency``'s (the
    validated layer-workload numbers)."""
    eff = FITTED if efficiency is None else efficiency
    if system.chip.power_limited:
        return _layers_at_power_limit(system, workload, batch, scheme, fusion=fusion,
                                      layout=layout, efficiency=eff, winograd=winograd,
                                      optimizer=optimizer,
                                      memory_reserve_bytes=memory_reserve_bytes,
                                      collective_engine=collective_engine, stack=stack)
    lo, hi = MEMORY_RESERVE_GiB
    check_number("memory_reserve_bytes", memory_reserve_bytes, lo * 2**30, hi * 2**30)
    system = system.with_fusion(fusion)
    if layout is not None:
        system = system.with_layout(layout)
    if winograd is not None:
        system = system.with_winograd(winograd)
    scheme = get_scheme(scheme)
    ps = phase_sums(system, workload, batch, scheme, efficiency=eff, optimizer=optimizer,
                    stack=stack)
    minibatch = batch * system.chips
    profile = ComputeProfile(scheme=scheme.name, minibatch=minibatch, fwd_s=ps.fwd_s,
                             bwd_data_s=ps.bwd_data_s, wgrad_s=ps.wgrad_s, flops=ps.flops,
                             peak_flops=system.peak_flops(scheme.compute_precision),
                             elementwise_s=ps.elementwise_s)
    params = training_params(minibatch, optimizer=optimizer, engine=collective_engine,
                             efficiency=eff, system=system, stack=stack)
    step = step_scheme(scheme, optimizer, None if stack is None else stack.stack)
    st = data_parallel_step(system, workload, step, params, profile)
    program = data_parallel_program(ps.ops, workload, step, optimizer, system.chips,
                                    compression=params.compression)
    return WorkloadPrediction(system=system, workload=workload, scheme=scheme,
                              optimizer=optimizer, batch=batch, fusion=fusion, phases=ps,
                              step=st, memory_reserve_bytes=memory_reserve_bytes,
                              program=program)


def layer_step_energy(pred: WorkloadPrediction) -> StepEnergy | None:
    """The energy of a layer workload's step over its compute-stream rows, every chip doing
    the same work (the communication rows move link bytes, which the power model does not
    price). A layer row's FLOPs are the whole system's (the minibatch over every chip, as
    :func:`accelsim.engine.layers.phase_sums` counts them) and its bytes one chip's (its
    memory stream's time at its bandwidth), so only the bytes are multiplied by the chips.
    None without a power table."""
    system, st = pred.system, pred.step
    w = rows_work(r for r in pred.rows() if r.stream == Stream.COMPUTE)
    return work_energy(system, pred.scheme.compute_precision, st.step_s, system.chips,
                       replace(w, bytes=w.bytes * system.chips))


def _layers_at_power_limit(system: System, workload: Workload, batch: int, scheme, **kw
                           ) -> WorkloadPrediction:
    """:func:`predict_workload` at the highest SM clock whose step-average power fits the
    chip's limit (:mod:`accelsim.engine.limiter`), the power-limited default."""
    from accelsim.engine.limiter import at_power_limit

    def timed(s: System) -> tuple[WorkloadPrediction, StepEnergy | None]:
        r = predict_workload(s, workload, batch, scheme, **kw)
        e = layer_step_energy(r)
        return replace(r, energy=e), e

    pred, clock = at_power_limit(system, timed)
    return replace(pred, clock_MHz=clock / 1e6)


def predict_step(system, workload, batch: int, scheme, *, fusion: bool,
                 layout: str | None = None, efficiency=None,
                 winograd: bool | None = None) -> dict:
    """:func:`predict_workload`'s JSON fields (the SGD-momentum recipe, no memory reserve)."""
    return predict_workload(system, workload, batch, scheme, fusion=fusion, layout=layout,
                            efficiency=efficiency, winograd=winograd).as_dict()


@dataclass(frozen=True)
class Options:
    """How a front-end runs a plan: its software stack and engines.

    fusion: fuse element-wise layers into GEMMs (layer workloads; transformers model fused
        kernels only). None: the chip's default (on with a memory hierarchy).
    layout, winograd: activation layout and Winograd convolutions (layer workloads; None: the
        config's).
    stack: the software stack's global parameters (:class:`accelsim.engine.LlmParams`: network
        and element-wise efficiencies of the transformer path, the memory reserve of both).
    collective_engine: ``analytic`` closed forms or netsim's ``des``.
    """

    fusion: bool | None = None
    layout: str | None = None
    winograd: bool | None = None
    stack: LlmParams = LlmParams(memory_reserve_GiB=0.0)
    collective_engine: str = "analytic"

    def __post_init__(self) -> None:
        if self.collective_engine not in ("analytic", "des"):
            raise InputError(f"Options.collective_engine must be 'analytic' or 'des', got "
                             f"{self.collective_engine!r}")
        if self.layout not in (None, "nhwc", "nchw"):
            raise InputError(f"Options.layout must be 'nhwc' or 'nchw', got {self.layout!r}")
        for f in ("fusion", "winograd"):  # None: the config's; "off" is refused, not truthy
            if getattr(self, f) is not None:
                check_bool(f"Options.{f}", getattr(self, f))
        if not isinstance(self.stack, LlmParams):
            raise InputError(f"Options.stack must be an LlmParams, got {self.stack!r}")


def simulate(system: System, workload: Workload | GptConfig | Decoder, plan: Plan,
             scheme: Scheme | str,
             options: Options = Options()) -> Prediction | WorkloadPrediction:
    """The engine's one entry point: one training iteration of ``workload`` (a generated
    transformer workload or a :class:`~accelsim.workload.gpt.GptConfig` -- any plan; a layer
    workload -- data parallel over the system's chips, ``plan.dp == system.chips``, one
    micro-batch of ``plan.micro_batch`` samples per chip) under ``plan`` and ``scheme``.

    Returns a :class:`~accelsim.engine.transformer.Prediction` or a
    :class:`WorkloadPrediction`: both give ``as_dict()`` (time, throughput, memory),
    ``rows()`` (the per-op breakdown) and ``timeline()`` (the trace)."""
    from accelsim.engine.transformer import predict

    from accelsim.engine.decoder import Decoder

    model = workload if isinstance(workload, GptConfig | Decoder) else workload.transformer
    if model is not None:
        if options.fusion is False:
            raise InputError("the transformer path models fused kernels only (fusion off is "
                             "not modelled)")
        return predict(model, plan, scheme, system, options.stack,
                       engine=options.collective_engine)
    layer_plan = Plan(tp=1, pp=1, dp=system.chips, micro_batch=plan.micro_batch,
                      global_batch=plan.micro_batch * system.chips, optimizer=plan.optimizer)
    if plan != layer_plan:
        raise InputError(f"workload {workload.name!r} is a layer list: it trains data parallel "
                         f"over the system's {system.chips} chips (tp 1, pp 1, dp "
                         f"{system.chips}, global batch = micro-batch x dp, no ZeRO, recompute, "
                         f"interleave or sequence parallelism); got {plan}")
    fusion = options.fusion if options.fusion is not None else (
        system.chip.default_fusion)
    return predict_workload(system, workload, plan.micro_batch, scheme, fusion=fusion,
                            layout=options.layout, winograd=options.winograd,
                            optimizer=plan.optimizer,
                            memory_reserve_bytes=options.stack.memory_reserve_GiB * 2**30,
                            collective_engine=options.collective_engine, stack=options.stack)
