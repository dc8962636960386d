"""Thin adapter from an :class:`accelsim.arch.System` to netsim's plain-number functions.

Takes the typed ``System`` as built once at the top (bandwidth overrides are applied by
:mod:`accelsim.arch.scenario` before anything here runs); every field is read directly.
"""

from __future__ import annotations

import networkx as nx

from accelsim.arch import System
from accelsim.arch.schemes import Scheme
from accelsim.errors import InputError
from accelsim.netsim import topology as topo
from accelsim.netsim.phases import PhaseTimes, phase_times, single_chip_times
from accelsim.netsim.update import UpdateParams


def system_graph(system: System) -> nx.Graph:
    """The system's topology graph: its links at the achievable fraction of their wire rate
    (``system.network_efficiency``, the fabric's one fitted factor, applied here and in
    :class:`accelsim.netsim.fabric.Fabric` for every caller) and their latencies. A node
    file's latency is GPU to GPU; on a switch that path crosses two links, each taking half."""
    inter = system.inter_board_link if system.boards > 1 else None
    e = system.network_efficiency
    hops = 2 if system.topology == "switch" else 1
    return topo.build(system.topology, system.chips, bandwidth_Bps=system.link.bandwidth_Bps * e,
                      inter_board_Bps=None if inter is None else inter.bandwidth_Bps * e,
                      latency_s=system.link.latency_s / hops,
                      inter_board_latency_s=None if inter is None else inter.latency_s)


def chip_rates(system: System) -> tuple[float, float]:
    """(memory bandwidth in bytes/s, element-wise vector/SFU ops per second) of one chip."""
    return system.chip.memory_bandwidth_Bps, system.chip.sfu_ops_per_s


def gradient_reduction_times(system: System, n_params: int, scheme: Scheme | str, *,
                             compression: float = 1.0, engine: str = "analytic",
                             optimizer: str = "sgd-momentum", n_tensors: int = 0,
                             update: UpdateParams = UpdateParams(), alpha_s: float = 0.0,
                             reduce_Bps: float | None = None) -> PhaseTimes:
    """Reduce-scatter, all-gather and weight-update time per training step on ``system``.

    See :func:`accelsim.netsim.phases.phase_times` for the model and the knobs.
    """
    if not isinstance(system, System):
        raise TypeError(f"system must be an accelsim.arch.System, got {type(system).__name__}")
    mem, vec = chip_rates(system)
    if system.chips == 1 and compression != 1:
        raise InputError(f"compression {compression!r}: {system.name} is one chip: no gradient "
                         "reduction to compress")
    if system.chips == 1:
        return single_chip_times(n_params, scheme, memory_Bps=mem, vector_ops_per_s=vec,
                                 optimizer=optimizer, n_tensors=n_tensors, update=update,
                                 engine=engine)
    return phase_times(system_graph(system), n_params, scheme, memory_Bps=mem,
                       vector_ops_per_s=vec, compression=compression, engine=engine,
                       optimizer=optimizer, n_tensors=n_tensors, update=update, alpha_s=alpha_s,
                       reduce_Bps=reduce_Bps)
