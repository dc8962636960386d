"""The HFP8 study's training step: the explorer picks the compute mapping, the engine times the
iteration (:func:`accelsim.engine.data_parallel_step`).

Compute is mapped under :data:`COMPUTE_STRATEGY`: chips are data parallel, as in the paper, so
the gradient reduction is the whole model over all chips; the cores of a chip are free per layer
(minibatch or output-channel split), as the paper's design-space exploration tool "maps each
layer".
"""

from __future__ import annotations

import functools
from dataclasses import replace

from accelsim.arch import System
from accelsim.arch.schemes import get_scheme
from accelsim.dse.explore import explore
from accelsim.dse.sweep import Infeasible
from accelsim.engine.run import data_parallel_step
from accelsim.engine.schedule import ComputeProfile, StepTime, TrainingParams
from accelsim.workload import Workload

COMPUTE_STRATEGY = "data-chips"


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
    links = replace(system.link, bandwidth_Bps=1e9, latency_s=1e-6)  # any plausible link
    return _compute_profile(replace(system, link=links, inter_board_link=links), workload,
                            get_scheme(scheme).name, int(minibatch))


@functools.lru_cache(maxsize=64)
def _compute_profile(system: System, workload: Workload, scheme: str,
                     minibatch: int) -> ComputeProfile:
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


def training_step(system: System, workload: Workload, scheme: str,
                  params: TrainingParams) -> StepTime:
    """Per-iteration time and samples/s of ``workload`` on ``system`` under ``scheme``: the
    explorer's compute profile, then the engine's gradient reduction, update and schedule."""
    if not isinstance(params, TrainingParams):
        raise TypeError(f"params must be TrainingParams, got {type(params).__name__}")
    profile = compute_profile(system, workload, scheme, params.minibatch)
    return data_parallel_step(system, workload, scheme, params, profile)
