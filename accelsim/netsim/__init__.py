"""Network simulation of gradient reduction: topologies, explicit collective schedules, an
analytic alpha-beta-gamma engine and a simpy discrete-event engine, and the weight-update model
(HFP8 paper, Sun et al., NeurIPS 2019, appendix D).

Public entry points::

    gradient_reduction_times(system, n_params, scheme, ...) -> PhaseTimes   # from a System
    phase_times(graph, n_params, scheme, memory_Bps=..., vector_ops_per_s=...)  # plain numbers
    best_schedule(graph, op, n_elems, bytes_per_elem) -> Schedule
    analytic_time(schedule) / des.simulate(schedule) -> CollectiveTime

simpy is imported only when the DES engine runs.
"""

from accelsim.netsim.analytic import CollectiveTime, analytic_time
from accelsim.netsim.phases import ENGINES, PhaseTimes, phase_times, time_schedule
from accelsim.netsim.schedule import Schedule, best_schedule, hierarchical_schedule, ring_schedule
from accelsim.netsim.system import gradient_reduction_times, system_graph
from accelsim.netsim.update import UpdateParams, compression_cost, weight_update_cost

__all__ = [
    "CollectiveTime", "ENGINES", "PhaseTimes", "Schedule", "UpdateParams", "analytic_time",
    "best_schedule", "compression_cost", "gradient_reduction_times", "hierarchical_schedule",
    "phase_times", "ring_schedule", "system_graph", "time_schedule", "weight_update_cost",
]
