"""Symmetric collectives timed without explicit p^2 schedules.

Every collective accelsim builds is symmetric: ``k`` edge-disjoint directional rings of ``p``
chips (a flat ring, k rings, a ring through a switch), or two such levels in sequence
(hierarchical: intra-board rings on every board, then rail rings across boards; a 2-D torus:
rows then columns, and columns then rows on two streams at once).  In each step
of a ring pass every hop of every ring carries one segment on its own link lanes, so when each
ring is *homogeneous* (all its hops have the same route of bandwidths and latencies) all p
positions of a ring run in lock step and one position stands for all:

* analytic engine (closed form): a pass takes ``p - 1`` identical steps of
  ``max route latency + alpha_s + segment / slowest lane + reduction``, the explicit engine's
  step-synchronous cost (:func:`analytic.ring_collective_time` owns the formula);
* DES engine (one representative rank): simpy runs, per pass and per distinct hop route, ONE
  chain of ``p - 1`` transfers over that route's links, each waiting on the one before, and the
  next pass waits on every chain -- exactly the dependencies the explicit schedule gives one
  chip (the rings of a pass never share a link lane, so per link there is one flow to time).

Memory and time are O(rings x p) for the DES and O(levels) for the analytic engine instead of
O(k p^2).  :class:`RingPlan` describes the symmetric structure; :func:`plan_from_graph` derives
it from any topology graph with the explicit builders' own ring search (``None`` when a ring is
not homogeneous or rings share a lane: those keep the explicit schedule), :func:`plan_for`
from a :class:`~accelsim.netsim.topology.TopologySpec` without building a graph for ring,
switch and multi-board systems of any size.  The explicit schedules
(:mod:`accelsim.netsim.schedule`) stay the reference: tests and ``scripts/netsim_validate.py``
check both engines against them.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import time
from dataclasses import dataclass
from fractions import Fraction

import networkx as nx
import numpy as np

from accelsim.errors import InputError
from accelsim.netsim import topology as topo
from accelsim.netsim.analytic import (
    CollectiveTime,
    check_overhead,
    check_rate,
    ring_collective_time,
)
from accelsim.netsim.limits import MAX_GRAPH_LINKS, MAX_PACKETS, check_limit
from accelsim.netsim.rings import EXACT_MAX_CHIPS
from accelsim.netsim.schedule import (
    DirRing,
    Schedule,
    check_bytes_per_elem,
    check_op,
    directional_rings,
    hierarchical_rings,
    pad_elems,
    stream_granule,
    torus_algorithm,
    torus_algorithm_name,
    torus_rings,
    torus_share,
)

Hop = tuple  # one ring hop's route: ((bandwidth_Bps, latency_s), ...) per link, in order


@dataclass(frozen=True)
class RingLevel:
    """One level of a symmetric collective: ``groups`` disjoint groups of ``p`` chips, each
    running ``k`` directional rings; ``hops`` are the distinct hop routes over all of them
    (every ring is homogeneous: all its hops share one route)."""

    p: int
    k: int
    groups: int
    hops: tuple[Hop, ...]

    def __post_init__(self) -> None:
        for name, v in (("p", self.p), ("k", self.k), ("groups", self.groups)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "p" else 1):
                raise ValueError(f"RingLevel.{name} must be an integer >= "
                                 f"{2 if name == 'p' else 1}, got {v!r}")
        if not self.hops or any(not hop for hop in self.hops):
            raise ValueError("RingLevel.hops must name at least one non-empty hop route")
        for hop in self.hops:
            for bw, lat in hop:
                topo.check_link(bw, lat)

    @property
    def route_latency_s(self) -> float:
        """The largest hop latency (links summed in route order, as the explicit engine)."""
        return max(float(np.add.reduce(np.array([lat for _, lat in hop], float)))
                   for hop in self.hops)

    @property
    def slowest_Bps(self) -> float:
        return min(bw for hop in self.hops for bw, _ in hop)

    def transfers(self) -> int:
        """Transfers of one explicit pass of this level: every ring, every step, every chip."""
        return self.groups * self.k * self.p * (self.p - 1)


@dataclass(frozen=True)
class RingPlan:
    """A symmetric collective on ``chips`` chips: its levels in reduce-scatter order.

    ``mirrored`` (two levels, a 2-D torus): the vector is split in two streams run at once in
    lock step, stream 0 (``share`` of the vector) through the levels in order, stream 1 (the
    rest) in reverse order -- rows then columns, and columns then rows.  In each phase the two
    streams are on different levels, hence on disjoint links; a step of either stream starts
    when the step before has arrived in both (one kernel, one step loop), so a phase step
    costs the larger of the two streams' steps."""

    name: str
    chips: int
    algorithm: str
    levels: tuple[RingLevel, ...]
    mirrored: bool = False
    share: Fraction = Fraction(1, 2)

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("RingPlan needs at least one level")
        if math.prod(lv.p for lv in self.levels) != self.chips or any(
                lv.groups * lv.p != self.chips for lv in self.levels):
            raise ValueError(f"RingPlan {self.name!r}: levels {self.levels} do not tile "
                             f"{self.chips} chips")
        if self.mirrored and (len(self.levels) != 2 or not 0 < self.share < 1):
            raise ValueError(f"RingPlan {self.name!r}: a mirrored plan needs two levels and a "
                             f"share in (0, 1), got {len(self.levels)} levels, share "
                             f"{self.share}")

    @property
    def streams(self) -> int:
        """Streams of the vector run at once (2 when mirrored)."""
        return 2 if self.mirrored else 1

    def _orders(self) -> list[tuple[list[int], Fraction]]:
        """(level order, share of the vector) per stream."""
        first = list(range(len(self.levels)))
        if not self.mirrored:
            return [(first, Fraction(1))]
        return [(first, self.share), (first[::-1], 1 - self.share)]

    def _stream_split(self, order: list[int], i: int) -> int:
        """Segments of level ``i`` in a stream running the levels in ``order``."""
        pos = order.index(i)
        lv = self.levels[i]
        return math.prod(self.levels[j].p for j in order[:pos]) * lv.k * lv.p

    @property
    def granule(self) -> int:
        """Elements must be a multiple of this (the padding rule of :mod:`schedule`)."""
        if not self.mirrored:
            return math.lcm(*(self._split(i) for i in range(len(self.levels))))
        return stream_granule([[self._stream_split(o, i) for i in o] for o, _ in self._orders()],
                              [sh for _, sh in self._orders()])

    def phases(self, op: str, n_elems: int, bytes_per_elem: float, pad: bool = True
               ) -> tuple[int, list[list[tuple[int, bool, float]]]]:
        """(padded element count, phases): each phase the ``(level, reduces, segment bytes)``
        its streams run at once."""
        check_op(op)
        check_bytes_per_elem(bytes_per_elem)
        n_pad = pad_elems(n_elems, self.granule, pad, f"{op} on {self.name}")
        per_stream = []
        for order, share in self._orders():
            n = n_pad * share.numerator // share.denominator
            rs = [(i, True) for i in order]
            ag = [(i, False) for i in order[::-1]]
            passes = {"reduce-scatter": rs, "all-gather": ag, "all-reduce": rs + ag}[op]
            per_stream.append([(i, red, n // self._stream_split(order, i) * bytes_per_elem)
                               for i, red in passes])
        return n_pad, [list(ph) for ph in zip(*per_stream)]

    def _split(self, i: int) -> int:
        """Level ``i`` segments: 1/(p_0 ... p_{i-1}) of the vector over k_i x p_i."""
        lv = self.levels[i]
        return math.prod(x.p for x in self.levels[:i]) * lv.k * lv.p

    def passes(self, op: str) -> list[tuple[int, bool]]:
        """``(level index, reduces)`` in execution order."""
        check_op(op)
        rs = [(i, True) for i in range(len(self.levels))]
        ag = [(i, False) for i in reversed(range(len(self.levels)))]
        return {"reduce-scatter": rs, "all-gather": ag, "all-reduce": rs + ag}[op]

    def steps(self, op: str) -> int:
        if self.mirrored:  # a phase lasts as long as its longer stream
            return sum(max(lv.p for lv in self.levels) - 1 for _ in self.passes(op))
        return sum(self.levels[i].p - 1 for i, _ in self.passes(op))

    def transfers(self, op: str) -> int:
        """Transfers the explicit schedule of ``op`` holds."""
        return self.streams * sum(self.levels[i].transfers() for i, _ in self.passes(op))

    def sizes(self, op: str, n_elems: int, bytes_per_elem: float, pad: bool = True
              ) -> tuple[int, list[float]]:
        """(padded element count, segment bytes per level, of one stream)."""
        check_op(op)
        check_bytes_per_elem(bytes_per_elem)
        n_pad = pad_elems(n_elems, self.granule, pad, f"{op} on {self.name}")
        n = n_pad // self.streams
        return n_pad, [n // self._split(i) * bytes_per_elem for i in range(len(self.levels))]


# ------------------------------------------------------------------------------ building plans

def _hop(g: nx.Graph, route) -> Hop:
    return tuple((float(g.edges[u, v]["bandwidth_Bps"]), float(g.edges[u, v].get("latency_s", 0.0)))
                 for u, v, _ in route)


def _level(g: nx.Graph, groups: list[list[DirRing]]) -> RingLevel | None:
    """The level run by ``groups`` (each a list of directional rings), or None when a ring is
    not homogeneous, groups differ in shape or two hops share a link lane."""
    p, k = len(groups[0][0].order), len(groups[0])
    hops: set = set()
    used: set = set()
    for rings in groups:
        if len(rings) != k:
            return None
        for dr in rings:
            if len(dr.order) != p:
                return None
            mine = {_hop(g, route) for route in dr.hop_routes}
            if len(mine) != 1:
                return None
            hops |= mine
            for route in dr.hop_routes:
                for lane in route:
                    if lane in used:
                        return None
                    used.add(lane)
    return RingLevel(p=p, k=k, groups=len(groups), hops=tuple(sorted(hops)))


def plan_from_graph(g: nx.Graph) -> RingPlan | None:
    """The symmetric plan of the collective :func:`schedule.best_schedule` builds on ``g``
    (same ring search), or None when it is not symmetric (see :func:`_level`)."""
    topo.validate(g)
    name = g.graph.get("name", "topology")
    n = len(topo.chips(g))
    if g.graph.get("topology") == "multi-board":
        intra, rail = hierarchical_rings(g)
        l1 = _level(g, list(intra.values()))
        l2 = _level(g, list(rail.values()))
        if l1 is None or l2 is None:
            return None
        return RingPlan(name, n, f"hierarchical (intra x{l1.k}, rail x{l2.k})", (l1, l2))
    if g.graph.get("topology") == "torus2d" and torus_algorithm(g) != "rings":
        rows, cols = (_level(g, groups) for groups in torus_rings(g))
        if rows is None or cols is None:
            return None
        share = torus_share(g.graph["rows"], g.graph["cols"])
        return RingPlan(name, n, torus_algorithm_name(share, rows.k, cols.k), (rows, cols),
                        mirrored=True, share=share)
    lv = _level(g, [directional_rings(g)])
    return None if lv is None else RingPlan(name, n, f"ring x{lv.k}", (lv,))


@functools.lru_cache(maxsize=None)
def _dgx1_board_rings() -> int:
    """Directional rings the ring search finds on one hybrid cube-mesh board (6)."""
    return len(directional_rings(topo.dgx1()))


def plan_for(spec: topo.TopologySpec, *, max_links: int | None = MAX_GRAPH_LINKS) -> RingPlan:
    """The symmetric plan of a resolved topology.  Ring, switch, multi-board and torus
    systems are closed forms (no graph, any size: a ring of p > 2 chips has one cycle, two
    directions; a switch one logical ring of two-link hops; a multi-board system the board's
    rings then one rail ring per local index; a torus its rows then columns and columns then
    rows, on two streams in lock step); dgx1, fully-connected and the 3x4 torus graphs are
    built (refused past :data:`limits.MAX_GRAPH_LINKS`) and searched like the explicit
    builders do."""
    bw, lat, p = spec.bandwidth_Bps, spec.latency_s, spec.chips
    if spec.kind == "ring":
        k = 1 if p == 2 else 2
        return RingPlan(spec.name, p, f"ring x{k}", (RingLevel(p, k, 1, (((bw, lat),),)),))
    if spec.kind == "switch":
        return RingPlan(spec.name, p, "ring x1",
                        (RingLevel(p, 1, 1, (((bw, lat), (bw, lat)),)),))
    if spec.kind == "multi-board":
        nb, k1 = spec.boards, _dgx1_board_rings()
        k2 = 1 if nb == 2 else 2
        l1 = RingLevel(8, k1, nb, (((bw, lat),),))
        l2 = RingLevel(nb, k2, 8, (((spec.inter_board_Bps, spec.inter_board_latency_s),),))
        return RingPlan(spec.name, 8 * nb, f"hierarchical (intra x{k1}, rail x{k2})", (l1, l2))
    if spec.kind == "torus2d" and (spec.rows == spec.cols or p > EXACT_MAX_CHIPS):
        # dimension-wise (schedule.torus_algorithm): no graph, any size
        hop = (((bw, lat),),)
        rows = RingLevel(spec.cols, 2, spec.rows, hop)
        cols = RingLevel(spec.rows, 2, spec.cols, hop)
        share = torus_share(spec.rows, spec.cols)
        return RingPlan(spec.name, p, torus_algorithm_name(share, 2, 2), (rows, cols),
                        mirrored=True, share=share)
    g = topo.generate(spec, max_links=max_links)
    out = plan_from_graph(g)
    if out is None:  # pragma: no cover - every generator's rings are homogeneous
        raise ValueError(f"{spec.name}: the ring search found rings that are not symmetric")
    return out


def plan(name: str, chips: int | None = None, *, bandwidth_Bps: float | None = None,
         inter_board_Bps: float | None = None, latency_s: float | None = None,
         inter_board_latency_s: float | None = None,
         max_links: int | None = MAX_GRAPH_LINKS) -> RingPlan:
    """:func:`plan_for` of :func:`accelsim.netsim.topology.resolve` (the keywords of
    :func:`accelsim.netsim.topology.build`)."""
    return plan_for(topo.resolve(name, chips, bandwidth_Bps=bandwidth_Bps,
                                 inter_board_Bps=inter_board_Bps, latency_s=latency_s,
                                 inter_board_latency_s=inter_board_latency_s),
                    max_links=max_links)


# ---------------------------------------------------------------------------------- engines

def _result(pl: RingPlan, op: str, engine: str, t: float, n_elems: int, n_pad: int,
            bytes_per_elem: float, events: int = 0, wall_s: float = 0.0) -> CollectiveTime:
    return CollectiveTime(op=op, engine=engine, time_s=t, payload_bytes=n_elems * bytes_per_elem,
                          padded_bytes=n_pad * bytes_per_elem, chips=pl.chips,
                          algorithm=pl.algorithm, steps=pl.steps(op), transfers=pl.transfers(op),
                          events=events, wall_s=wall_s, mode="symmetric")


def analytic_time(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                  pad: bool = True, alpha_s: float = 0.0, reduce_Bps: float | None = None
                  ) -> CollectiveTime:
    """Closed form of :func:`accelsim.netsim.analytic.analytic_time` on the explicit schedule:
    per pass, p-1 steps of (route latency + alpha_s + reduction) + segment / slowest lane."""
    check_overhead("alpha_s", alpha_s)
    check_rate("reduce_Bps", reduce_Bps)
    if pl.mirrored:
        return _mirrored_analytic(pl, op, n_elems, bytes_per_elem, pad, alpha_s, reduce_Bps)
    n_pad, seg = pl.sizes(op, n_elems, bytes_per_elem, pad)
    total = 0.0
    for i, reduces in pl.passes(op):
        lv = pl.levels[i]
        gamma = seg[i] / reduce_Bps if reduces and reduce_Bps is not None else 0.0
        total += ring_collective_time("reduce-scatter", lv.p, seg[i] * lv.p, lv.slowest_Bps,
                                      lv.route_latency_s + alpha_s + gamma)
    return _result(pl, op, "analytic", total, n_elems, n_pad, bytes_per_elem)


def _mirrored_analytic(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float, pad: bool,
                       alpha_s: float, reduce_Bps: float | None) -> CollectiveTime:
    """Step-synchronous closed form of a mirrored plan: a phase step costs the largest route
    latency + alpha_s + the largest segment / slowest lane + the largest reduction of the
    streams still running (the explicit engine's per-step maxima)."""
    n_pad, phases = pl.phases(op, n_elems, bytes_per_elem, pad)
    total = 0.0
    for ph in phases:
        done = 0
        for until in sorted({pl.levels[i].p - 1 for i, _, _ in ph}):
            run = [(pl.levels[i], red, seg) for i, red, seg in ph if pl.levels[i].p - 1 >= until]
            gamma = max((seg / reduce_Bps if red and reduce_Bps is not None else 0.0)
                        for _, red, seg in run)
            step = (max(lv.route_latency_s for lv, _, _ in run) + alpha_s
                    + max(seg / lv.slowest_Bps for lv, _, seg in run) + gamma)
            total += (until - done) * step
            done = until
    return _result(pl, op, "analytic", total, n_elems, n_pad, bytes_per_elem)


def des_packets(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                pad: bool = True, packet_bytes: float | None = None) -> int:
    """Packets the representative DES of ``op`` simulates (its size guard)."""
    check_rate("packet_bytes", packet_bytes)
    _, phases = pl.phases(op, n_elems, bytes_per_elem, pad)
    total = 0
    for ph in phases:
        for i, _, seg in ph:
            lv = pl.levels[i]
            per = 1 if packet_bytes is None else max(1, math.ceil(seg / packet_bytes))
            total += len(lv.hops) * (lv.p - 1) * per
    return total


def representative_schedule(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float = 1.0,
                            *, pad: bool = True) -> Schedule:
    """The schedule of one representative rank: per pass and distinct hop route, one chain of
    p-1 transfers over that route's (private) links; a pass's first transfers wait on the last
    transfers of every chain of the pass before.  A mirrored plan's phase holds the chains of
    both streams, a step of each waiting on the step before of every chain (lock step)."""
    if pl.mirrored:
        n_pad, phases = pl.phases(op, n_elems, bytes_per_elem, pad)
    else:
        n_pad, seg = pl.sizes(op, n_elems, bytes_per_elem, pad)
        phases = [[(i, red, seg[i])] for i, red in pl.passes(op)]
    links, bw, lat = [], [], []
    cols = {k: [] for k in ("step", "nbytes", "reduce", "ring", "chunk", "route_len")}
    routes, deps, dep_len = [], [], []
    prev_last: list[int] = []
    n = step0 = 0
    for i_ph, ph in enumerate(phases):
        last = []
        chains = []  # first transfer id and length of every chain of the phase
        for i, reduces, sg in ph:
            lv = pl.levels[i]
            m = lv.p - 1
            for hop in lv.hops:
                ids = list(range(len(links), len(links) + len(hop)))
                for b_, l_ in hop:
                    links.append(("rep", len(links), 0))
                    bw.append(b_)
                    lat.append(l_)
                cols["step"].append(np.arange(step0, step0 + m))
                cols["nbytes"].append(np.full(m, sg))
                cols["reduce"].append(np.full(m, reduces))
                cols["ring"].append(np.full(m, len(last) + 1000 * i_ph))
                cols["chunk"].append(np.arange(m))
                routes.append(np.tile(np.asarray(ids, np.int32), m))
                cols["route_len"].append(np.full(m, len(ids)))
                chains.append((n, m))
                n += m
                last.append(n - 1)
        for c0, m in chains:
            deps.append(np.asarray(prev_last, np.int32))
            if len(ph) == 1:  # one stream: each transfer waits on the one before
                deps.append(np.arange(c0, c0 + m - 1, dtype=np.int32))
                dep_len.append(np.concatenate([[len(prev_last)], np.ones(m - 1, np.int64)]))
                continue
            counts = [len(prev_last)]
            for t in range(1, m):  # lock step: the step before of every chain still running
                before = [d0 + t - 1 for d0, dm in chains if t - 1 < dm]
                deps.append(np.asarray(before, np.int32))
                counts.append(len(before))
            dep_len.append(np.asarray(counts, np.int64))
        prev_last = last
        step0 += max(m for _, m in chains)
    cat = {k: np.concatenate(v) for k, v in cols.items()}
    return Schedule(
        op=op, algorithm=pl.algorithm + " (representative rank)", chips=(0, 1),
        payload_bytes=n_elems * bytes_per_elem, padded_bytes=n_pad * bytes_per_elem,
        links=tuple(links), link_bandwidth_Bps=np.asarray(bw, float),
        link_latency_s=np.asarray(lat, float), step=cat["step"].astype(np.int32),
        src=np.zeros(n, np.int32), dst=np.ones(n, np.int32), nbytes=cat["nbytes"].astype(float),
        reduce=cat["reduce"].astype(bool), ring=cat["ring"].astype(np.int32),
        chunk=cat["chunk"].astype(np.int32),
        route_ptr=np.concatenate([[0], np.cumsum(cat["route_len"])]).astype(np.int64),
        route=np.concatenate(routes).astype(np.int32),
        dep_ptr=np.concatenate([[0], np.cumsum(np.concatenate(dep_len))]).astype(np.int64),
        deps=np.concatenate(deps).astype(np.int32),
        notes=f"representative rank of {pl.name}")


def des_time(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
             pad: bool = True, alpha_s: float = 0.0, reduce_Bps: float | None = None,
             packet_bytes: float | None = None, max_packets: int | None = MAX_PACKETS,
             env=None) -> CollectiveTime:
    """The simpy DES of ``op`` on one representative rank (module docstring); equals
    :func:`accelsim.netsim.des.simulate` on the explicit schedule."""
    from accelsim.netsim.des import simulate

    check_overhead("alpha_s", alpha_s)
    check_rate("reduce_Bps", reduce_Bps)
    check_limit(f"the DES of this {op} on {pl.name} (one representative rank)",
                des_packets(pl, op, n_elems, bytes_per_elem, pad=pad,
                            packet_bytes=packet_bytes), max_packets, "packets", "max_packets",
                "larger packets (packet_bytes) cost fewer")
    wall0 = time.perf_counter()
    s = representative_schedule(pl, op, n_elems, bytes_per_elem, pad=pad)
    d = simulate(s, alpha_s=alpha_s, reduce_Bps=reduce_Bps, packet_bytes=packet_bytes, env=env,
                 max_packets=None)
    n_pad, _ = pl.sizes(op, n_elems, bytes_per_elem, pad)
    return dataclasses.replace(_result(pl, op, "des", d.time_s, n_elems, n_pad, bytes_per_elem),
                               events=d.events, wall_s=time.perf_counter() - wall0)


def time_collective(pl: RingPlan, op: str, n_elems: int, bytes_per_elem: float = 1.0,
                    engine: str = "analytic", *, pad: bool = True, alpha_s: float = 0.0,
                    reduce_Bps: float | None = None, packet_bytes: float | None = None,
                    max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """Time ``op`` on ``pl`` with the named engine (``analytic`` or ``des``)."""
    if engine == "analytic":
        return analytic_time(pl, op, n_elems, bytes_per_elem, pad=pad, alpha_s=alpha_s,
                             reduce_Bps=reduce_Bps)
    if engine == "des":
        return des_time(pl, op, n_elems, bytes_per_elem, pad=pad, alpha_s=alpha_s,
                        reduce_Bps=reduce_Bps, packet_bytes=packet_bytes, max_packets=max_packets)
    raise InputError(f"unknown engine {engine!r}; known: analytic, des")
