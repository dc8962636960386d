"""The three gradient-reduction phases of a training step, per precision scheme.

reduce-scatter (gradients, ``scheme.reduce_scatter_bytes_per_elem`` / compression) ->
all-gather (gradients or updated weights) -> weight update, in the scheme's phase order
(HFP8 appendix D: hfp8 updates its 1/N shard between the two collectives and all-gathers 8-bit
weights).  The phases are serial; the total is their sum.  Collectives are timed on the
system's topology by either engine, in the symmetric mode (:mod:`accelsim.netsim.symmetric`:
closed form / one representative rank, the default) or on the explicit schedule
(:func:`schedule.best_schedule`, the reference; topologies whose rings are not symmetric always
use it); the weight update by :mod:`accelsim.netsim.update`.

Gradient compression divides the payload of the scheme's ``compressible_phases``
(reduce-scatter) by the factor and adds the compress/decompress pass to the reduce-scatter
(``compression_s`` shows that part).
"""

from __future__ import annotations

import dataclasses
import math
from collections import OrderedDict
from dataclasses import dataclass
from enum import StrEnum

import networkx as nx

from accelsim.arch.schemes import Scheme, get_scheme
from accelsim.netsim import alltoall, symmetric
from accelsim.netsim import topology as topo
from accelsim.netsim.alltoall import AllToAllPlan
from accelsim.netsim.analytic import CollectiveTime, analytic_time
from accelsim.netsim.limits import MAX_PACKETS, MAX_TRANSFERS
from accelsim.netsim.schedule import Schedule, best_schedule, link_table
from accelsim.netsim.symmetric import RingPlan
from accelsim.errors import InputError
from accelsim.netsim.update import (UpdateParams, check_counts, compression_cost,
                                    weight_update_cost)

class Engine(StrEnum):
    """How a collective is timed: the closed-form alpha-beta model or the simpy discrete-event
    simulation (a member prints and compares as its string)."""

    ANALYTIC = "analytic"
    DES = "des"


ENGINES: tuple[Engine, ...] = tuple(Engine)
class Mode(StrEnum):
    """How a collective's schedule is built: the symmetric plan (closed form / one representative
    rank, any size) or every transfer explicitly (the reference, O(chips^2))."""

    SYMMETRIC = "symmetric"
    EXPLICIT = "explicit"


MODES: tuple[Mode, ...] = tuple(Mode)


@dataclass(frozen=True)
class PhaseTimes:
    """Per-chip time of each gradient-reduction phase (seconds) and what produced it."""

    scheme: str
    engine: str
    chips: int
    n_params: int
    compression: float
    reduce_scatter_s: float  # includes compression_s
    all_gather_s: float
    weight_update_s: float
    total_s: float
    compression_s: float
    phase_order: tuple[str, ...]
    algorithm: str
    rs_payload_bytes: float
    ag_payload_bytes: float
    rs_bus_bandwidth_GBps: float
    ag_bus_bandwidth_GBps: float
    wu_elems_per_chip: int
    wu_bytes_per_chip: float
    wu_bound: str

    def as_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d["phase_order"] = "->".join(self.phase_order)
        return d


# A small cache of schedule *structure* (built with 1 byte per element); sweeps over bandwidth,
# compression and scheme then only rescale bytes and swap link rates.
_CACHE: OrderedDict = OrderedDict()
_CACHE_MAX = 32  # schedules
_CACHE_MAX_TRANSFERS = 4_000_000  # ~ 200 MB of columns; large systems evict early


def _signature(g: nx.Graph) -> tuple:
    nodes = tuple(sorted((str(n), tuple(sorted((k, str(v)) for k, v in d.items())))
                         for n, d in g.nodes(data=True)))
    edges = tuple(sorted((str(u), str(v), d.get("multiplicity", 1), d.get("tier", ""))
                         for u, v, d in g.edges(data=True)))
    return (g.graph.get("topology"), nodes, edges)


def schedule_for(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float, *,
                 pad: bool = True, max_transfers: int | None = MAX_TRANSFERS) -> Schedule:
    """``best_schedule`` with structure cached across bandwidths and payload precisions."""
    key = (_signature(g), op, int(n_elems), bool(pad))
    base = _CACHE.get(key)
    if base is None:
        base = best_schedule(g, op, n_elems, 1.0, pad=pad, max_transfers=max_transfers)
        _CACHE[key] = base
        while len(_CACHE) > 1 and (len(_CACHE) > _CACHE_MAX or sum(
                v.n_transfers for v in _CACHE.values()) > _CACHE_MAX_TRANSFERS):
            _CACHE.popitem(last=False)
    else:
        _CACHE.move_to_end(key)
    links, _, bw, lat = link_table(g)
    if links != base.links:  # same structure must give the same link order
        raise RuntimeError("schedule cache: link order changed")  # pragma: no cover
    return dataclasses.replace(base, nbytes=base.nbytes * bytes_per_elem,
                               payload_bytes=base.payload_bytes * bytes_per_elem,
                               padded_bytes=base.padded_bytes * bytes_per_elem,
                               link_bandwidth_Bps=bw, link_latency_s=lat)


def time_schedule(s: Schedule, engine: str = "analytic", *, alpha_s: float = 0.0,
                  reduce_Bps: float | None = None, packet_bytes: float | None = None,
                  max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """Time a schedule with the named engine."""
    if engine == "analytic":
        return analytic_time(s, alpha_s=alpha_s, reduce_Bps=reduce_Bps)
    if engine == "des":
        from accelsim.netsim.des import simulate
        return simulate(s, alpha_s=alpha_s, reduce_Bps=reduce_Bps, packet_bytes=packet_bytes,
                        max_packets=max_packets)
    raise InputError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")


_PLANS: OrderedDict = OrderedDict()


def plan_of(g: nx.Graph) -> RingPlan | None:
    """:func:`symmetric.plan_from_graph`, cached by structure and link parameters."""
    key = (_signature(g), tuple(sorted((str(u), str(v), d["bandwidth_Bps"],
                                        d.get("latency_s", 0.0))
                                       for u, v, d in g.edges(data=True))))
    if key not in _PLANS:
        _PLANS[key] = symmetric.plan_from_graph(g)
        while len(_PLANS) > _CACHE_MAX:
            _PLANS.popitem(last=False)
    _PLANS.move_to_end(key)
    return _PLANS[key]


def collective_time(topology: nx.Graph | RingPlan | AllToAllPlan, op: str, n_elems: int,
                    bytes_per_elem: float = 1.0, engine: str = "analytic", *,
                    mode: str = "symmetric", pad: bool = True, alpha_s: float = 0.0,
                    reduce_Bps: float | None = None, packet_bytes: float | None = None,
                    max_transfers: int | None = MAX_TRANSFERS,
                    max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """Time one collective on a topology graph or a :class:`symmetric.RingPlan`.

    ``mode="symmetric"`` times the symmetric plan (closed form / one representative rank);
    a graph whose rings are not symmetric falls back to the explicit schedule.
    ``mode="explicit"`` builds the explicit schedule (refused past ``max_transfers``).
    ``op="all-to-all"`` (:mod:`accelsim.netsim.alltoall`; ``n_elems x bytes_per_elem`` is each
    rank's send buffer) takes a graph or an :class:`~accelsim.netsim.alltoall.AllToAllPlan`.
    """
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if mode not in MODES:
        raise InputError(f"unknown mode {mode!r}; known: {', '.join(MODES)}")
    if op == "all-to-all" or isinstance(topology, AllToAllPlan):
        if op != "all-to-all" or isinstance(topology, RingPlan):
            raise InputError("reduce-scatter, all-gather and all-reduce take a graph or a "
                             "RingPlan, all-to-all a graph or an AllToAllPlan; got "
                             f"{op} on a {type(topology).__name__}")
        n_bytes = n_elems * bytes_per_elem
        if mode == "symmetric":
            pl = topology if isinstance(topology, AllToAllPlan) else alltoall.graph_plan(topology)
            return alltoall.time_all_to_all(pl, n_bytes, engine, alpha_s=alpha_s,
                                            packet_bytes=packet_bytes, max_packets=max_packets)
        if isinstance(topology, AllToAllPlan):
            raise InputError(f"{topology.name}: an AllToAllPlan has no explicit schedule; pass "
                             "the graph")
        s = alltoall.explicit_schedule(topology, n_bytes, max_transfers=max_transfers)
        return time_schedule(s, engine, alpha_s=alpha_s, packet_bytes=packet_bytes,
                             max_packets=max_packets)
    pl = topology if isinstance(topology, RingPlan) else None
    if pl is None:
        topo.validate(topology)  # a custom graph: missing attributes named, GB/s converted
    if pl is None and mode == "symmetric":
        pl = plan_of(topology)
    if pl is not None:
        if mode == "explicit":
            raise InputError(f"{pl.name}: a RingPlan has no explicit schedule; pass the graph")
        return symmetric.time_collective(pl, op, n_elems, bytes_per_elem, engine, pad=pad,
                                         alpha_s=alpha_s, reduce_Bps=reduce_Bps,
                                         packet_bytes=packet_bytes, max_packets=max_packets)
    s = schedule_for(topology, op, n_elems, bytes_per_elem, pad=pad,
                     max_transfers=max_transfers)
    return time_schedule(s, engine, alpha_s=alpha_s, reduce_Bps=reduce_Bps,
                         packet_bytes=packet_bytes, max_packets=max_packets)


def phase_times(g: nx.Graph | RingPlan, n_params: int, scheme: Scheme | str, *,
                memory_Bps: float, vector_ops_per_s: float, compression: float = 1.0,
                engine: str = "analytic", optimizer: str = "sgd-momentum", n_tensors: int = 0,
                update: UpdateParams = UpdateParams(), alpha_s: float = 0.0,
                reduce_Bps: float | None = None, packet_bytes: float | None = None,
                mode: str = "symmetric") -> PhaseTimes:
    """Three-phase breakdown on topology ``g`` from plain numbers (no config objects).

    ``g`` is a topology graph or, for systems too large for a graph, a
    :class:`symmetric.RingPlan` (``symmetric.plan(name, chips, ...)``).
    ``memory_Bps`` / ``vector_ops_per_s``: one chip's memory bandwidth and elementwise (SFU /
    vector) op rate; ``alpha_s``: per-step software/synchronisation overhead added to link
    latency; ``reduce_Bps``: rate at which a chip adds an incoming partial-sum chunk (None =
    free); ``mode``: see :func:`collective_time`.  Other knobs: :class:`UpdateParams`.
    """
    sc = get_scheme(scheme).for_optimizer(optimizer)  # the recipe the plan trains
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    if not (isinstance(compression, (int, float)) and math.isfinite(compression)
            and compression >= 1):
        raise InputError(f"compression factor must be a number >= 1, got {compression!r}")
    check_counts(n_params, n_tensors)  # 0 parameters: a model without weights
    n_chips = g.chips if isinstance(g, RingPlan) else sum(
        1 for _, k in g.nodes(data="kind") if k == "chip")
    if n_params == 0:  # a model without weights (e.g. only matmul layers): nothing to reduce
        return PhaseTimes(
            scheme=sc.name, engine=engine, chips=n_chips, n_params=0,
            compression=float(compression), reduce_scatter_s=0.0, all_gather_s=0.0,
            weight_update_s=0.0, total_s=0.0, compression_s=0.0, phase_order=sc.phase_order,
            algorithm="none", rs_payload_bytes=0.0, ag_payload_bytes=0.0,
            rs_bus_bandwidth_GBps=0.0, ag_bus_bandwidth_GBps=0.0, wu_elems_per_chip=0,
            wu_bytes_per_chip=0.0, wu_bound="none")

    def payload(phase: str, bpe: float) -> float:
        return bpe / compression if phase in sc.compressible_phases else bpe

    rs = collective_time(g, "reduce-scatter", n_params,
                         payload("reduce_scatter", sc.reduce_scatter_bytes_per_elem), engine,
                         mode=mode, alpha_s=alpha_s, reduce_Bps=reduce_Bps,
                         packet_bytes=packet_bytes)
    ag = collective_time(g, "all-gather", n_params,
                         payload("all_gather", sc.all_gather_bytes_per_elem), engine, mode=mode,
                         alpha_s=alpha_s, packet_bytes=packet_bytes)
    wu = weight_update_cost(n_params, sc, n_chips, memory_Bps=memory_Bps,
                            vector_ops_per_s=vector_ops_per_s, optimizer=optimizer,
                            n_tensors=n_tensors, params=update)
    comp = compression_cost(n_params, sc, compression, memory_Bps=memory_Bps,
                            vector_ops_per_s=vector_ops_per_s, params=update)
    rs_s = rs.time_s + comp.time_s
    return PhaseTimes(
        scheme=sc.name, engine=engine, chips=n_chips, n_params=n_params,
        compression=float(compression), reduce_scatter_s=rs_s, all_gather_s=ag.time_s,
        weight_update_s=wu.time_s, total_s=rs_s + ag.time_s + wu.time_s,
        compression_s=comp.time_s, phase_order=sc.phase_order, algorithm=rs.algorithm,
        rs_payload_bytes=rs.payload_bytes, ag_payload_bytes=ag.payload_bytes,
        rs_bus_bandwidth_GBps=rs.bus_bandwidth_GBps, ag_bus_bandwidth_GBps=ag.bus_bandwidth_GBps,
        wu_elems_per_chip=wu.elems, wu_bytes_per_chip=wu.bytes, wu_bound=wu.bound)


def single_chip_times(n_params: int, scheme: Scheme | str, *, memory_Bps: float,
                      vector_ops_per_s: float, optimizer: str = "sgd-momentum",
                      n_tensors: int = 0, update: UpdateParams = UpdateParams(),
                      engine: str = "analytic") -> PhaseTimes:
    """One chip: nothing to reduce or gather (and nothing to compress); the whole-model update
    remains (a 1-way shard is the whole model)."""
    sc = get_scheme(scheme)
    if engine not in ENGINES:
        raise InputError(f"unknown engine {engine!r}; known: {', '.join(ENGINES)}")
    wu = weight_update_cost(n_params, sc, 1, memory_Bps=memory_Bps,
                            vector_ops_per_s=vector_ops_per_s, optimizer=optimizer,
                            n_tensors=n_tensors, params=update)
    return PhaseTimes(
        scheme=sc.name, engine=engine, chips=1, n_params=n_params, compression=1.0,
        reduce_scatter_s=0.0, all_gather_s=0.0, weight_update_s=wu.time_s, total_s=wu.time_s,
        compression_s=0.0, phase_order=sc.phase_order, algorithm="none (1 chip)",
        rs_payload_bytes=0.0, ag_payload_bytes=0.0, rs_bus_bandwidth_GBps=0.0,
        ag_bus_bandwidth_GBps=0.0, wu_elems_per_chip=wu.elems, wu_bytes_per_chip=wu.bytes,
        wu_bound=wu.bound)
