"""The one schedule: how per-op times compose into an iteration (the owner of every overlap
and composition rule; :mod:`accelsim.engine.run` calls it for every front-end).

Data-parallel step (the HFP8 paper's throughput study, Sun et al., NeurIPS 2019, appendix D,
and ``predict``)::

    step_s        = compute_s + compression_s + exposed_comm_s
    compute_s     = fwd_s + bwd_data_s + wgrad_s
    comm_s        = reduce_scatter_s + all_gather_s + weight_update_s
    compression_s = the local gradient-compression pass (chip memory/vector work, not network)
    exposed       = comm_s - min(hidden, reduce_scatter_s)
    samples_per_s = minibatch / step_s

``hidden`` is how much back-propagation can cover: ``overlap`` x the backward pass
(:func:`combine`); the all-gather and weight update need the fully reduced gradients and are
never hidden (:func:`exposed_comm_s`). Per-layer gradient buckets are a schedule, not a rule:
:func:`accelsim.engine.scheduler.data_parallel_graph`.

Pipeline (1F1B, Narayanan et al. SC'21 section 2.2): ``m`` micro-batch slots of forward +
backward plus the bubble ``(p - 1) / v`` slots (:func:`pipeline_s`).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from accelsim.arch.schemes import OPTIMIZERS
from accelsim.bounds import PER_TENSOR_OVERHEAD_S, check_number
from accelsim.ring import bus_factor
from accelsim.errors import InputError


ENGINES = ("analytic", "des")

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
    optimizer: sgd, sgd-momentum or adamw (with the scheme, the formats of every state).
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
            raise InputError(f"minibatch must be a positive integer, got {self.minibatch!r}")
        for name in ("overlap", "per_tensor_overhead_s", "memory_efficiency", "compression"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise InputError(f"{name} must be a finite number, got {v!r}")
        if not 0.0 <= self.overlap <= 1.0:
            raise InputError(f"overlap must be in [0, 1], got {self.overlap!r}")
        check_number("per_tensor_overhead_s", self.per_tensor_overhead_s, *PER_TENSOR_OVERHEAD_S)
        if not 0.0 < self.memory_efficiency <= 1.0:
            raise InputError(f"memory_efficiency must be in (0, 1], got {self.memory_efficiency!r}")
        if self.compression < 1:
            raise InputError(f"compression must be >= 1, got {self.compression!r}")
        if self.optimizer not in OPTIMIZERS:
            raise InputError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, "
                             f"got {self.optimizer!r}")
        if self.engine not in ENGINES:
            raise InputError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")


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
                raise InputError(f"ComputeProfile.{f} must be finite and >= 0, got {v!r}")
        if self.minibatch < 1:
            raise InputError(f"ComputeProfile.minibatch must be >= 1, got {self.minibatch}")

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
                raise InputError(f"CommPhases.{f.name} must be finite and >= 0, got {v!r}")

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

    @property
    def peak_samples_per_s(self) -> float:
        """Samples per second at the peak FLOP rate (the step's useful FLOPs per sample at the
        system's peak): the compute-bound ceiling of this step."""
        return self.peak_flops_per_s * self.samples_per_s / self.achieved_flops_per_s


STEP_COLUMNS = tuple(f.name for f in fields(StepTime))


def exposed_comm_s(reduce_scatter_s: float, all_gather_s: float, weight_update_s: float,
                   hidden_s: float) -> float:
    """The one overlap rule: only the reduce-scatter can hide behind back-propagation (the
    all-gather and the weight update need the fully reduced gradients), never more of it than
    there is. ``hidden_s`` is how much back-propagation could cover: a fraction of the backward
    pass (:func:`combine`) or what a schedule of per-layer buckets hid."""
    return reduce_scatter_s + all_gather_s + weight_update_s \
        - min(max(hidden_s, 0.0), reduce_scatter_s)


def combine(profile: ComputeProfile, comm: CommPhases, *, overlap: float = 0.0) -> StepTime:
    """Per-iteration time and throughput from compute and communication, the reduce-scatter
    hidden behind ``overlap`` x the backward pass (:func:`step_time`)."""
    if not (0.0 <= overlap <= 1.0):
        raise InputError(f"overlap must be in [0, 1], got {overlap!r}")
    return step_time(profile, comm, hidden_s=overlap * profile.backward_s)


def step_time(profile: ComputeProfile, comm: CommPhases, *, hidden_s: float) -> StepTime:
    """Per-iteration time and throughput (pure arithmetic; the one owner of the step-time rule:
    step = compute + compression pass + exposed comm, :func:`exposed_comm_s` with ``hidden_s``
    of back-propagation covering the reduce-scatter)."""
    exposed = exposed_comm_s(comm.reduce_scatter_s, comm.all_gather_s, comm.weight_update_s,
                             hidden_s)
    hidden = comm.comm_s - exposed
    step = profile.compute_s + comm.compression_s + exposed
    if step <= 0:
        raise InputError("training step time is zero: compute and communication are both empty")
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


def split_layer_comm_factor(chips: int, chip_mp) -> np.ndarray:
    """Reduce-scatter / all-gather time of a layer split ``chip_mp`` ways over chips, relative
    to the same layer data parallel over all ``chips``: its ``p = chips / m`` replicas reduce
    ``1/m`` of its weights (the ring bandwidth term ``(p-1)/p``, :mod:`accelsim.ring`)."""
    m = np.asarray(chip_mp, dtype=np.float64)
    if chips == 1:
        return np.ones_like(m)
    return bus_factor("reduce-scatter", chips / m) / bus_factor("reduce-scatter", chips) / m


def layer_gradient_shares(params, chip_mp, chips: int, comm: CommPhases, n_params: int,
                          sharded_update: bool) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each layer's share of the whole model's gradient reduction (``comm``, data parallel over
    all chips), apportioned by parameter count: (reduce-scatter, all-gather, weight update)
    seconds for layers of ``params`` parameters split ``chip_mp`` ways over chips (a replicated
    update by ``1/m``; a sharded one is ``1/N`` either way)."""
    params = np.asarray(params, dtype=np.float64)
    n = max(n_params, 1)
    f_comm = split_layer_comm_factor(chips, chip_mp)
    f_wu = np.ones(len(params)) if sharded_update \
        else 1.0 / np.asarray(chip_mp, dtype=np.float64)
    return (params * (comm.reduce_scatter_s / n) * f_comm,
            params * (comm.all_gather_s / n) * f_comm,
            params * (comm.weight_update_s / n) * f_wu)


# --------------------------------------------------------------------------- pipeline
def pipeline_s(slot_s: float, n_micro: int, stages: int, interleave: int = 1
               ) -> tuple[float, float]:
    """``(pipeline, bubble)`` seconds of a 1F1B pipeline of ``n_micro`` micro-batches over
    ``stages`` stages with ``interleave`` model chunks per stage, one micro-batch's forward +
    backward on the slowest stage taking ``slot_s`` (Narayanan et al. SC'21: the bubble is
    ``(p - 1) / v`` slots). Unequal stages (an uneven split): the slowest one's slot, every
    stage at its pace (:func:`accelsim.engine.transformer.critical_stage`)."""
    bubble = (stages - 1) / interleave * slot_s
    return n_micro * slot_s + bubble, bubble
