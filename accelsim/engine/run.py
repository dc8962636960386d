"""The engine's entry points: one training iteration of a workload on a system under a plan,
timed by perf (compute), netsim (communication) and the one schedule
(:mod:`accelsim.engine.schedule`), with the one memory account (:mod:`accelsim.engine.memory`).

* :func:`predict_step`: a layer workload, data parallel over a system's chips (``predict``);
* :func:`data_parallel_step`: gradient reduction, update and schedule for a compute profile
  (``predict``, the HFP8 study and sweeps, whose compute mapping comes from the explorer);
* :func:`accelsim.engine.transformer.predict`: a transformer under 3-D parallelism (``llm``).
"""

from __future__ import annotations

from accelsim.arch import System
from accelsim.arch.schemes import get_scheme
from accelsim.engine.layers import phase_sums
from accelsim.engine.schedule import (
    CommPhases,
    ComputeProfile,
    StepTime,
    TrainingParams,
    combine,
)
from accelsim.perf.gemm import FITTED
from accelsim.workload import Workload


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


def data_parallel_step(system: System, workload: Workload, scheme, params: TrainingParams,
                       profile: ComputeProfile) -> StepTime:
    """One data-parallel iteration: ``profile``'s compute, the gradient reduction and weight
    update of ``workload``'s parameters over ``system``'s chips, composed by the schedule."""
    if workload.n_params == 0:  # nothing to reduce or update (e.g. a workload of matmuls)
        comm = CommPhases(0.0, 0.0, 0.0, 0.0)
    else:
        comm = comm_phases(system, workload, scheme, params)
    return combine(profile, comm, overlap=params.overlap)


def predict_step(system, workload, batch: int, scheme, *, fusion: bool,
                 layout: str | None = None, efficiency=None,
                 winograd: bool | None = None) -> dict:
    """One training iteration of ``workload`` at ``batch`` per chip on ``system`` (kernel fusion
    on/off; activation ``layout`` and ``winograd`` None = the config's; ``winograd=True`` needs
    a chip with a memory hierarchy, else ValueError): the compute model
    (:func:`accelsim.engine.layers.phase_sums`) plus the gradient reduction and weight update
    (:func:`data_parallel_step`). Returns the JSON fields."""
    eff = FITTED if efficiency is None else efficiency
    system = system.with_fusion(fusion)
    if layout is not None:
        system = system.with_layout(layout)
    if winograd is not None:
        system = system.with_winograd(winograd)
    scheme = get_scheme(scheme)
    ps = phase_sums(system, workload, batch, scheme, efficiency=eff)
    minibatch = batch * system.chips
    profile = ComputeProfile(scheme=scheme.name, minibatch=minibatch, fwd_s=ps.fwd_s,
                             bwd_data_s=ps.bwd_data_s, wgrad_s=ps.wgrad_s, flops=ps.flops,
                             peak_flops=system.peak_flops(scheme.compute_precision),
                             elementwise_s=ps.elementwise_s)
    params = TrainingParams(minibatch=minibatch, memory_efficiency=eff.memory_efficiency)
    st = data_parallel_step(system, workload, scheme, params, profile)
    return {
        "system": system.name, "workload": workload.name, "scheme": scheme.name,
        "batch": batch, "chips": system.chips, "fusion": "on" if fusion else "off",
        "layout": system.chip.layout, "winograd": "on" if system.chip.winograd else "off",
        "samples_per_s": st.samples_per_s, "step_time_s": st.step_s,
        "tflops": st.achieved_flops_per_s / 1e12, "peak_tflops": st.peak_flops_per_s / 1e12,
        "memory_GiB": ps.memory_bytes / 2**30,
        "memory_capacity_GiB": system.chip.memory_capacity_bytes / 2**30,
        "fits_memory": bool(ps.memory_bytes <= system.chip.memory_capacity_bytes),
        "compute_s": st.compute_s, "fwd_s": st.fwd_s, "bwd_data_s": st.bwd_data_s,
        "wgrad_s": st.wgrad_s, "elementwise_s": st.elementwise_s, "launch_s": ps.launch_s,
        "comm_s": st.comm_s, "exposed_comm_s": st.exposed_comm_s,
        "weight_update_s": st.weight_update_s, "dataflow": ps.dataflow,
    }
