"""The training-step model: one iteration of data-parallel training = per-layer compute
(forward, backward-data, weight-gradient; the explorer's best mapping) followed by gradient
reduction (reduce-scatter, weight update, all-gather; :mod:`accelsim.netsim`).

Models the throughput study of the HFP8 paper (Sun et al., NeurIPS 2019, appendix D)::

    step_s        = compute_s + compression_s + exposed_comm_s
    compute_s     = fwd_s + bwd_data_s + wgrad_s            (best mapping found by the explorer)
    comm_s        = reduce_scatter_s + all_gather_s + weight_update_s
    compression_s = the local gradient-compression pass (chip memory/vector work, not network)
    exposed       = comm_s - min(overlap * (bwd_data_s + wgrad_s), reduce_scatter_s)
    samples_per_s = minibatch / step_s

``overlap`` is the fraction of the backward pass during which the gradient reduce-scatter may run
(layer-wise gradients are ready early); the all-gather and weight update need the fully reduced
gradients and are never hidden. A scenario is a typed :class:`accelsim.arch.System` (bandwidth
and other overrides already applied, :mod:`accelsim.arch.scenario`), a ``Workload``, a scheme and
one frozen :class:`TrainingParams`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from accelsim.arch import System
from accelsim.arch.schemes import get_scheme
from accelsim.dse.sweep import Infeasible
from accelsim.workload import Workload

ENGINES = ("analytic", "des")
OPTIMIZERS = ("sgd", "sgd-momentum", "adam")

#: How the compute of one iteration is mapped (see :mod:`accelsim.dse.explore`): chips are data
#: parallel, as in the paper, so the gradient reduction is the whole model over all chips; the
#: cores of a chip are free per layer (minibatch or output-channel split), as the paper's
#: design-space exploration tool "maps each layer".
COMPUTE_STRATEGY = "data-chips"


# --------------------------------------------------------------------------- parameters
@dataclass(frozen=True)
class TrainingParams:
    """The one frozen parameter object of a scenario: every knob of the step model that is not
    the hardware (the hardware is the ``System``).

    minibatch: global minibatch, samples per iteration over all chips (data parallel).
    overlap: fraction of the backward pass during which the reduce-scatter can run (0: the
        gradient reduction starts after back-propagation, as the paper's numbers imply).
    per_tensor_overhead_s: fixed cost per parameter tensor per optimizer step on a chip
        (descriptor setup, synchronisation, scale bookkeeping); a sharded (HFP8) update still
        visits every tensor's slice, so this cost does not shrink with the shard.
    memory_efficiency: fraction of peak chip memory bandwidth a streaming update kernel reaches.
    optimizer: sgd, sgd-momentum or adam (optimizer state per parameter).
    compression: gradient compression factor of the reduce-scatter (1 = none).
    engine: collective timing engine, analytic (alpha-beta) or des (simpy).
    """

    minibatch: int
    overlap: float = 0.0
    per_tensor_overhead_s: float = 0.0
    memory_efficiency: float = 1.0
    optimizer: str = "sgd-momentum"
    compression: float = 1.0
    engine: str = "analytic"

    def __post_init__(self) -> None:
        if isinstance(self.minibatch, bool) or not isinstance(self.minibatch, int) \
                or self.minibatch < 1:
            raise ValueError(f"minibatch must be a positive integer, got {self.minibatch!r}")
        for name in ("overlap", "per_tensor_overhead_s", "memory_efficiency", "compression"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise ValueError(f"{name} must be a finite number, got {v!r}")
        if not 0.0 <= self.overlap <= 1.0:
            raise ValueError(f"overlap must be in [0, 1], got {self.overlap!r}")
        if self.per_tensor_overhead_s < 0:
            raise ValueError(f"per_tensor_overhead_s must be >= 0, got {self.per_tensor_overhead_s!r}")
        if not 0.0 < self.memory_efficiency <= 1.0:
            raise ValueError(f"memory_efficiency must be in (0, 1], got {self.memory_efficiency!r}")
        if self.compression < 1:
            raise ValueError(f"compression must be >= 1, got {self.compression!r}")
        if self.optimizer not in OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"got {self.optimizer!r}")
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")


# --------------------------------------------------------------------------- data
@dataclass(frozen=True)
class ComputeProfile:
    """Per-iteration compute time of one data-parallel replica (seconds) for one scheme."""

    scheme: str
    minibatch: int  # global minibatch (samples per iteration, all chips)
    fwd_s: float
    bwd_data_s: float
    wgrad_s: float
    flops: float  # useful FLOPs per iteration (all chips): 2 * MACs of fwd + bwd_data + wgrad
    peak_flops: float  # system peak FLOP/s at the scheme's compute precision
    elementwise_s: float = 0.0  # part of fwd_s + bwd_data_s spent in non-GEMM layers

    def __post_init__(self) -> None:
        for f in ("fwd_s", "bwd_data_s", "wgrad_s", "flops", "peak_flops", "elementwise_s"):
            v = getattr(self, f)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"ComputeProfile.{f} must be finite and >= 0, got {v!r}")
        if self.minibatch < 1:
            raise ValueError(f"ComputeProfile.minibatch must be >= 1, got {self.minibatch}")

    @property
    def compute_s(self) -> float:
        return self.fwd_s + self.bwd_data_s + self.wgrad_s

    @property
    def backward_s(self) -> float:
        return self.bwd_data_s + self.wgrad_s


@dataclass(frozen=True)
class CommPhases:
    """Gradient-reduction phase times per iteration (seconds)."""

    reduce_scatter_s: float  # network part only
    all_gather_s: float
    weight_update_s: float
    compression_s: float = 0.0  # local compress/decompress pass (chip memory/vector work)

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not (math.isfinite(v) and v >= 0):
                raise ValueError(f"CommPhases.{f.name} must be finite and >= 0, got {v!r}")

    @property
    def comm_s(self) -> float:
        return self.reduce_scatter_s + self.all_gather_s + self.weight_update_s


@dataclass(frozen=True)
class StepTime:
    """One training iteration: where the time goes and the resulting throughput."""

    scheme: str
    minibatch: int
    fwd_s: float
    bwd_data_s: float
    wgrad_s: float
    compute_s: float
    elementwise_s: float  # non-GEMM part of compute_s
    reduce_scatter_s: float
    all_gather_s: float
    weight_update_s: float
    comm_s: float
    compression_s: float
    hidden_comm_s: float
    exposed_comm_s: float
    step_s: float
    samples_per_s: float
    comm_fraction: float  # exposed communication / step time
    achieved_flops_per_s: float  # useful FLOP/s
    peak_flops_per_s: float  # system peak at the scheme's compute precision
    utilization: float  # achieved / peak

    def as_row(self) -> dict[str, Any]:
        return asdict(self)


STEP_COLUMNS = tuple(f.name for f in fields(StepTime))


def exposed_comm_s(reduce_scatter_s: float, all_gather_s: float, weight_update_s: float,
                   hidden_s: float) -> float:
    """The one overlap rule: only the reduce-scatter can hide behind back-propagation (the
    all-gather and the weight update need the fully reduced gradients), never more of it than
    there is. ``hidden_s`` is how much back-propagation could cover: a fraction of the backward
    pass here, a per-layer timeline in :mod:`accelsim.dse.explore`."""
    return reduce_scatter_s + all_gather_s + weight_update_s \
        - min(max(hidden_s, 0.0), reduce_scatter_s)


def combine(profile: ComputeProfile, comm: CommPhases, *, overlap: float = 0.0) -> StepTime:
    """Per-iteration time and throughput from compute and communication (pure arithmetic; the
    one owner of the step-time rule: step = compute + compression pass + exposed comm)."""
    if not (0.0 <= overlap <= 1.0):
        raise ValueError(f"overlap must be in [0, 1], got {overlap!r}")
    exposed = exposed_comm_s(comm.reduce_scatter_s, comm.all_gather_s, comm.weight_update_s,
                             overlap * profile.backward_s)
    hidden = comm.comm_s - exposed
    step = profile.compute_s + comm.compression_s + exposed
    if step <= 0:
        raise ValueError("training step time is zero: compute and communication are both empty")
    achieved = profile.flops / step
    return StepTime(
        scheme=profile.scheme, minibatch=profile.minibatch, fwd_s=profile.fwd_s,
        bwd_data_s=profile.bwd_data_s, wgrad_s=profile.wgrad_s, compute_s=profile.compute_s,
        elementwise_s=profile.elementwise_s, reduce_scatter_s=comm.reduce_scatter_s,
        all_gather_s=comm.all_gather_s, weight_update_s=comm.weight_update_s, comm_s=comm.comm_s,
        compression_s=comm.compression_s, hidden_comm_s=hidden, exposed_comm_s=exposed,
        step_s=step, samples_per_s=profile.minibatch / step, comm_fraction=exposed / step,
        achieved_flops_per_s=achieved, peak_flops_per_s=profile.peak_flops,
        utilization=achieved / profile.peak_flops if profile.peak_flops > 0 else float("nan"),
    )


# --------------------------------------------------------------------------- communication
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


# --------------------------------------------------------------------------- compute
def compute_profile(system: System, workload: Workload, scheme: str,
                    minibatch: int) -> ComputeProfile:
    """Forward / backward-data / weight-gradient time of the best plan the explorer finds
    under :data:`COMPUTE_STRATEGY` (every chip takes a slice of the minibatch, as in the paper;
    inside a chip each layer picks how its cores split the work, best dataflow and scratchpad
    tiles). Element-wise layers' backward time counts as backward-data (it sits on the error
    path).

    Cached per argument set. The data-parallel chip mapping never moves activations between
    chips, so the off-chip links do not enter compute: the cache key drops them, and a bandwidth
    sweep computes each profile once."""
    links = replace(system.link, bandwidth_Bps=1.0, latency_s=0.0)
    return _compute_profile(replace(system, link=links, inter_board_link=links), workload,
                            get_scheme(scheme).name, int(minibatch))


@functools.lru_cache(maxsize=64)
def _compute_profile(system: System, workload: Workload, scheme: str,
                     minibatch: int) -> ComputeProfile:
    from accelsim.dse.explore import explore

    if minibatch < system.chips:
        raise Infeasible(f"minibatch {minibatch} < {system.chips} chips: a chip would be idle "
                         "(data parallelism needs at least one sample per chip)")
    sc = get_scheme(scheme)
    # Gradient communication is charged by the step model, not inside the plan choice: with a
    # data-parallel mapping and no overlap every dataflow pays the same communication.
    zero = {"reduce_scatter_s": 0.0, "all_gather_s": 0.0, "weight_update_s": 0.0}
    res = explore(system, workload, minibatch, sc, strategies=(COMPUTE_STRATEGY,),
                  overlap=(False,), comm=zero, executor="serial")
    if not res.best.get("feasible", True):
        raise Infeasible(f"no feasible plan: {res.best.get('reason', '')}")
    lay = res.layers
    gemm = lay["layer"].map({ly.name: ly.is_gemm for ly in workload.layers}).astype(bool)
    return ComputeProfile(scheme=sc.name, minibatch=minibatch, fwd_s=res.fwd_s,
                          bwd_data_s=res.bwd_data_s, wgrad_s=res.wgrad_s,
                          flops=float(lay["flops"].sum()),
                          peak_flops=float(system.peak_flops(sc.compute_precision)),
                          elementwise_s=float(lay.loc[~gemm, "time_s"].sum()))


# --------------------------------------------------------------------------- one training step
def training_step(system: System, workload: Workload, scheme: str,
                  params: TrainingParams) -> StepTime:
    """Per-iteration time and samples/s of ``workload`` on ``system`` under ``scheme``."""
    if not isinstance(params, TrainingParams):
        raise TypeError(f"params must be TrainingParams, got {type(params).__name__}")
    profile = compute_profile(system, workload, scheme, params.minibatch)
    return combine(profile, comm_phases(system, workload, scheme, params), overlap=params.overlap)
