"""Network simulation of gradient reduction: topologies, explicit collective schedules, an
analytic alpha-beta-gamma engine and a simpy discrete-event engine, and the weight-update model
(HFP8 paper, Sun et al., NeurIPS 2019, appendix D).

Public entry points::

    gradient_reduction_times(system, n_params, scheme, ...) -> PhaseTimes   # from a System
    phase_times(graph | plan, n_params, scheme, memory_Bps=..., vector_ops_per_s=...)
    collective_time(graph | plan, op, n_elems, bytes_per_elem=2.0, engine="des", mode="symmetric")
    plan(name, chips, bandwidth_Bps=...) -> RingPlan     # symmetric, no graph, any size
    best_schedule(graph, op, n_elems, bytes_per_elem) -> Schedule   # explicit, the reference
    analytic_time(schedule) / des.simulate(schedule) -> CollectiveTime
    ring_collective_time(kind, ranks, size_bytes, bandwidth_Bps, latency_s)  # THE ring term
    alltoall.plan(name, chips, ...) -> AllToAllPlan; alltoall.time_all_to_all(plan, n_bytes, engine)
    alltoallv.all_to_all_v_time(spec, byte_matrix, engine)  # uneven routing (MoE)

simpy is imported only when the DES engine runs.  Size guards: :mod:`accelsim.netsim.limits`.
"""

from accelsim.netsim import alltoall, alltoallv
from accelsim.netsim.alltoall import AllToAllPlan, time_all_to_all
from accelsim.netsim.alltoallv import all_to_all_v_time
from accelsim.netsim.analytic import CollectiveTime, analytic_time, ring_collective_time
from accelsim.netsim.limits import SizeLimitError
from accelsim.netsim.phases import (
    ENGINES,
    MODES,
    Engine,
    Mode,
    PhaseTimes,
    collective_time,
    phase_times,
    time_schedule,
)
from accelsim.netsim.schedule import Schedule, best_schedule, hierarchical_schedule, ring_schedule
from accelsim.netsim.symmetric import RingLevel, RingPlan, plan, plan_for, plan_from_graph
from accelsim.netsim.system import gradient_reduction_times, system_graph
from accelsim.netsim.update import UpdateParams, compression_cost, weight_update_cost

__all__ = [
    "AllToAllPlan", "CollectiveTime", "ENGINES", "Engine", "MODES", "Mode", "PhaseTimes",
    "RingLevel", "RingPlan", "Schedule", "all_to_all_v_time", "alltoall", "alltoallv",
    "time_all_to_all",
    "SizeLimitError", "UpdateParams", "analytic_time", "best_schedule", "collective_time",
    "compression_cost", "gradient_reduction_times", "hierarchical_schedule", "phase_times",
    "plan", "plan_for", "plan_from_graph", "ring_collective_time", "ring_schedule",
    "system_graph", "time_schedule", "weight_update_cost",
]
