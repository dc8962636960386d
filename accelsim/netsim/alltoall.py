"""All-to-all (and all-to-all-v) collectives: closed form and one-rank DES on every topology.

Every rank holds a buffer of N bytes, N/p for each rank (nccl-tests ``alltoall`` "size"; bus
bandwidth = algbw x (p-1)/p).  Algorithms, one per level of a topology (levels run in sequence,
each moving the whole buffer, as in hierarchical all-to-all: first to the right chip of the own
node or dimension, then across):

* ``pairwise`` (a non-blocking switch): p-1 steps, in step s rank i sends its block for rank
  i+s through the switch (the pairwise exchange of Thakur, Rabenseifner & Gropp, IJHPCA 2005):
  ``(p-1) (route latency + N/(p B))``, bandwidth term (p-1)/p N/B (8 GPUs on a 450 GB/s switch
  move 1 GB in 7/8 x 1e9 / 450e9 s);
* ``direct`` (fully connected): one step, every block on its own link: ``latency + N/(p B)``;
* ``ring`` (bidirectional rings: ring, torus dimensions, DGX-1's Hamiltonian cycles, rails):
  each block travels the shorter way round (a block at distance p/2 half each way); in step s
  every rank forwards to its neighbour the blocks still at distance >= s, so the steps carry
  ((p-1)/2 - s + 1) N/p (p odd) or (p/2 - s + 1/2) N/p (p even) per direction, p/2 steps;
  the sum is the per-link load bound of a ring all-to-all, N (p^2-1)/(8p) (odd) or N p/8
  (even) per link direction; with ``cycles`` disjoint Hamiltonian cycles the buffer is split
  over them.

Levels: ring, switch, fully-connected one level; DGX-1 its 3 Hamiltonian cycles; a 2-D torus
rows then columns (square: two halves in opposite orders at once, like the ring collectives);
multi-board the board's cycles, then the rail rings across boards; :func:`two_tier_plan` a
switch inside each node and a non-blocking NIC fabric across nodes.

The DES (:func:`des_time`) runs, per level, one chain of the representative rank's transfers
over that level's links (the rest of the system is symmetric), through the same simpy engine
as the ring collectives (cut-through switches, packets, latencies, ``alpha_s``).
All-to-all-v (uneven per-destination bytes, MoE routing) lives in :mod:`accelsim.netsim.alltoallv`.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass

import numpy as np

from accelsim.errors import InputError
from accelsim.netsim import topology as topo
from accelsim.netsim.analytic import CollectiveTime, check_overhead, check_rate
from accelsim.netsim.limits import MAX_PACKETS, MAX_TRANSFERS, check_limit
from accelsim.netsim.schedule import (
    Builder,
    Schedule,
    directional_rings,
    guard_transfers,
    hierarchical_rings,
    ring_phase,
    torus_rings,
)
from accelsim.ring import ring_collective_time

OP = "all-to-all"
ALGORITHMS = ("pairwise", "direct", "ring")
Hop = tuple  # ((bandwidth_Bps, latency_s), ...) per link of one hop's route


@dataclass(frozen=True)
class AllToAllLevel:
    """One level: ``groups`` disjoint groups of ``p`` ranks exchanging with ``algorithm`` over
    hops of route ``hop``; ``cycles`` disjoint Hamiltonian cycles share a ``ring`` level."""

    algorithm: str
    p: int
    groups: int
    hop: Hop
    cycles: int = 1

    def __post_init__(self) -> None:
        if self.algorithm not in ALGORITHMS:
            raise ValueError(f"unknown all-to-all algorithm {self.algorithm!r}; known: "
                             f"{', '.join(ALGORITHMS)}")
        for name, v in (("p", self.p), ("groups", self.groups), ("cycles", self.cycles)):
            if isinstance(v, bool) or not isinstance(v, int) or v < (2 if name == "p" else 1):
                raise ValueError(f"AllToAllLevel.{name} must be an integer >= "
                                 f"{2 if name == 'p' else 1}, got {v!r}")
        if not self.hop:
            raise ValueError("AllToAllLevel.hop must name at least one link")
        for bw, lat in self.hop:
            topo.check_link(bw, lat)

    @property
    def route_latency_s(self) -> float:
        return float(sum(lat for _, lat in self.hop))

    @property
    def slowest_Bps(self) -> float:
        return min(bw for bw, _ in self.hop)

    @property
    def n_steps(self) -> int:
        return {"pairwise": self.p - 1, "direct": 1}.get(self.algorithm, max(1, self.p // 2))

    @property
    def load_fraction(self) -> float:
        """Sum of :meth:`step_fractions` in closed form: the bytes one directional link
        carries over the level, per byte of a rank's buffer ((p-1)/p through a switch, 1/p on
        a direct link, p/8 or (p^2-1)/(8p) per ring cycle)."""
        p = self.p
        if self.algorithm == "pairwise":
            return (p - 1) / p
        if self.algorithm == "direct":
            return 1 / p
        if p == 2:
            return 1 / 2 / self.cycles
        return ((p * p - 1) / (8 * p) if p % 2 else p / 8) / self.cycles

    def step_fractions(self) -> list[float]:
        """Fraction of a rank's buffer that one step's transfer carries on one directional link
        (see the module docstring)."""
        p = self.p
        if self.algorithm == "pairwise":
            return [1 / p] * (p - 1)
        if self.algorithm == "direct":
            return [1 / p]
        if p == 2:  # one link: the one block goes in one step
            return [1 / 2 / self.cycles]
        if p % 2:
            m = (p - 1) // 2
            return [(m - s + 1) / p / self.cycles for s in range(1, m + 1)]
        return [(p / 2 - s + 0.5) / p / self.cycles for s in range(1, p // 2 + 1)]

    def time_s(self, n_bytes: float, alpha_s: float = 0.0) -> float:
        """Closed form of this level moving ``n_bytes`` per rank (O(1) at any size)."""
        lat = self.route_latency_s + alpha_s
        if self.algorithm == "pairwise":  # p-1 equal steps of N/p: the ring term's shape
            return ring_collective_time("reduce-scatter", self.p, n_bytes, self.slowest_Bps, lat)
        return self.n_steps * lat + self.load_fraction * n_bytes / self.slowest_Bps

    def transfers(self) -> int:
        """Transfers of the whole level (every rank, every link direction, every step)."""
        per_rank = {"pairwise": self.p - 1, "direct": self.p - 1}.get(
            self.algorithm, self.n_steps * (1 if self.p == 2 else 2 * self.cycles))
        return self.groups * self.p * per_rank


@dataclass(frozen=True)
class AllToAllPlan:
    """An all-to-all on ``chips`` ranks: levels in order (``mirrored``: two halves at once, the
    second in reverse level order; the levels must then be identical)."""

    name: str
    chips: int
    levels: tuple[AllToAllLevel, ...]
    mirrored: bool = False

    def __post_init__(self) -> None:
        if not self.levels:
            raise ValueError("AllToAllPlan needs at least one level")
        if math.prod(lv.p for lv in self.levels) != self.chips or any(
                lv.groups * lv.p != self.chips for lv in self.levels):
            raise ValueError(f"AllToAllPlan {self.name!r}: levels do not tile {self.chips} chips")
        if self.mirrored and (len(self.levels) < 2 or len(set(self.levels)) != 1):
            raise ValueError(f"AllToAllPlan {self.name!r}: a mirrored plan needs identical levels")

    @property
    def streams(self) -> int:
        return 2 if self.mirrored else 1

    @property
    def algorithm(self) -> str:
        parts = [f"{lv.algorithm} {lv.p}" + (f" x{lv.cycles} cycles" if lv.cycles > 1 else "")
                 for lv in self.levels]
        return " then ".join(parts) + (", both orders" if self.mirrored else "")

    @property
    def steps(self) -> int:
        return sum(lv.n_steps for lv in self.levels)

    @property
    def transfers(self) -> int:
        return self.streams * sum(lv.transfers() for lv in self.levels)


# ------------------------------------------------------------------------------ building plans

def _ring_cycles(g) -> int:
    from accelsim.netsim.rings import find_rings
    return len(find_rings(g))


def plan_for(spec: topo.TopologySpec, *, max_links: int | None = None) -> AllToAllPlan:
    """The all-to-all plan of a resolved topology (no graph except DGX-1's 8-chip cycle
    search)."""
    bw, lat, p = spec.bandwidth_Bps, spec.latency_s, spec.chips
    one = ((bw, lat),)
    if spec.kind == "ring":
        return AllToAllPlan(spec.name, p, (AllToAllLevel("ring", p, 1, one),))
    if spec.kind == "switch":
        return AllToAllPlan(spec.name, p, (AllToAllLevel("pairwise", p, 1, ((bw, lat),) * 2),))
    if spec.kind == "fully-connected":
        return AllToAllPlan(spec.name, p, (AllToAllLevel("direct", p, 1, one),))
    cyc = _ring_cycles(topo.dgx1(bw, lat))
    if spec.kind == "dgx1":
        return AllToAllPlan(spec.name, 8, (AllToAllLevel("ring", 8, 1, one, cyc),))
    if spec.kind == "multi-board":
        nb = spec.boards
        rail = ((spec.inter_board_Bps, spec.inter_board_latency_s),)
        return AllToAllPlan(spec.name, p, (AllToAllLevel("ring", 8, nb, one, cyc),
                                           AllToAllLevel("ring", nb, 8, rail)))
    if spec.kind == "torus2d":
        r, c = spec.rows, spec.cols
        return AllToAllPlan(spec.name, p, (AllToAllLevel("ring", c, r, one),
                                           AllToAllLevel("ring", r, c, one)), mirrored=r == c)
    raise ValueError(f"no all-to-all plan for topology kind {spec.kind!r}")  # pragma: no cover


def plan(name: str, chips: int | None = None, *, bandwidth_Bps: float | None = None,
         inter_board_Bps: float | None = None, latency_s: float | None = None,
         inter_board_latency_s: float | None = None) -> AllToAllPlan:
    """:func:`plan_for` of :func:`accelsim.netsim.topology.resolve`."""
    return plan_for(topo.resolve(name, chips, bandwidth_Bps=bandwidth_Bps,
                                 inter_board_Bps=inter_board_Bps, latency_s=latency_s,
                                 inter_board_latency_s=inter_board_latency_s))


def two_tier_plan(gpus_per_node: int, nodes: int, *, intra_Bps: float, inter_Bps: float,
                  intra_latency_s: float = 0.0, inter_latency_s: float = 0.0) -> AllToAllPlan:
    """Hierarchical all-to-all of ``nodes`` switch nodes (NVSwitch inside, one NIC per GPU on
    a non-blocking fabric across): pairwise inside every node (to the GPU with the right
    local index), then pairwise across nodes on the NICs (rail by rail).  Bandwidths are one
    GPU's port, one direction; latencies are GPU-to-GPU per message (as a node file gives
    them), split evenly over the two links of the route through the switch."""
    topo.check_count("gpus_per_node", gpus_per_node, 1)
    topo.check_count("nodes", nodes, 1)
    levels = []
    if gpus_per_node > 1:
        levels.append(AllToAllLevel("pairwise", gpus_per_node, nodes,
                                    ((intra_Bps, intra_latency_s / 2),) * 2))
    if nodes > 1:
        levels.append(AllToAllLevel("pairwise", nodes, gpus_per_node,
                                    ((inter_Bps, inter_latency_s / 2),) * 2))
    if not levels:
        raise InputError("an all-to-all needs at least 2 ranks")
    return AllToAllPlan(f"{nodes}x{gpus_per_node}-switch", gpus_per_node * nodes, tuple(levels))


# ------------------------------------------------------------------ explicit schedule (reference)

def _hop_of(g, route) -> Hop:
    return tuple((float(g.edges[u, v]["bandwidth_Bps"]), float(g.edges[u, v].get("latency_s", 0.0)))
                 for u, v, _ in route)


def _graph_levels(g) -> tuple[list, bool]:
    """``[(AllToAllLevel, groups)]`` of graph ``g`` and whether the plan is mirrored; a group
    is a list of directional rings (ring), a chip list (direct) or (chips, switch)
    (pairwise)."""
    kind = g.graph.get("topology")
    chips = topo.chips(g)
    p = len(chips)

    def ring_level(groups):
        rings = groups[0]
        q = len(rings[0].order)
        cycles = max(1, len(rings) // 2) if q > 2 else len(rings)
        return (AllToAllLevel("ring", q, len(groups), _hop_of(g, rings[0].hop_routes[0]),
                              cycles), groups)

    if kind == "switch":
        sw = next(n for n, k in g.nodes(data="kind") if k == "switch")
        hop = _hop_of(g, ((chips[0], sw, 0), (sw, chips[1], 0)))
        return [(AllToAllLevel("pairwise", p, 1, hop), [(chips, sw)])], False
    if kind == "fully-connected":
        return [(AllToAllLevel("direct", p, 1, _hop_of(g, ((chips[0], chips[1], 0),))),
                 [chips])], False
    if kind == "torus2d":
        rows, cols = torus_rings(g)
        return [ring_level(rows), ring_level(cols)], g.graph["rows"] == g.graph["cols"]
    if kind == "multi-board":
        intra, rail = hierarchical_rings(g)
        return [ring_level(list(intra.values())), ring_level(list(rail.values()))], False
    return [ring_level([directional_rings(g)])], False


def graph_plan(g) -> AllToAllPlan:
    """The all-to-all plan of topology graph ``g`` (the structure :func:`explicit_schedule`
    builds; equals :func:`plan_for` of the resolved spec)."""
    levels, mirrored = _graph_levels(g)
    return AllToAllPlan(g.graph.get("name", "topology"), len(topo.chips(g)),
                        tuple(lv for lv, _ in levels), mirrored=mirrored)


def explicit_schedule(g, n_bytes: float, *, max_transfers: int | None = MAX_TRANSFERS
                      ) -> Schedule:
    """Every transfer of the all-to-all of ``n_bytes`` per rank on graph ``g`` (the reference
    the symmetric engines are checked against): ring levels forward the blocks still on their
    way one hop per step (transfer (s, i) waits for (s-1, i-1) to arrive); pairwise steps go
    through the switch, each after the rank's previous one arrived; direct blocks all at once;
    a level's first transfers at a chip wait for what the level before delivered there."""
    topo.validate(g)
    _check_bytes(n_bytes)
    levels, mirrored = _graph_levels(g)
    pl = AllToAllPlan(g.graph.get("name", "topology"), len(topo.chips(g)),
                      tuple(lv for lv, _ in levels), mirrored=mirrored)
    guard_transfers("all-to-all", g, pl.transfers, max_transfers)
    b = Builder(g)
    per = n_bytes / pl.streams
    orders = [list(range(len(levels)))] + ([list(range(len(levels)))[::-1]] if mirrored else [])
    for order in orders:
        step, arr = 0, None
        for li in order:
            lv, groups = levels[li]
            fr = lv.step_fractions()
            first = (lambda c: []) if arr is None else (lambda c, a=arr: a.get(c, []))
            new: dict[int, list[int]] = {}
            for grp in groups:
                if lv.algorithm == "ring":
                    got = ring_phase(b, grp, 0.0, step, False, first,
                                      step_bytes=[f * per for f in fr])
                else:
                    got = _exchange(b, lv, grp, per, step, first)
                for c, ids in got.items():
                    new.setdefault(c, []).extend(ids)
            arr = new
            step += len(fr)
    return b.build("all-to-all", pl.algorithm, n_bytes, n_bytes,
                   notes=f"explicit all-to-all on {pl.name}")


def _exchange(b, lv: AllToAllLevel, grp, per: float, step0: int, first) -> dict:
    """Pairwise (through a switch) or direct transfers of one group; returns every arrival."""
    arrivals: dict[int, list[int]] = {}
    chips, sw = grp if lv.algorithm == "pairwise" else (grp, None)
    p = len(chips)
    idx = np.array([b.chip_idx[c] for c in chips], np.int32)
    prev = None
    shifts = range(1, p)
    for s in shifts:
        i = np.arange(p)
        j = (i + s) % p
        if sw is not None:
            route = np.array([[b.link_id(chips[a], sw, 0), b.link_id(sw, chips[c], 0)]
                              for a, c in zip(i, j)], np.int32)
        else:
            route = np.array([[b.link_id(chips[a], chips[c], 0)] for a, c in zip(i, j)],
                             np.int32)
        if prev is None or sw is None:  # first step, or direct: all at once
            fd = [first(int(idx[k])) for k in range(p)]
            deps = np.full((p, max(1, max(len(x) for x in fd))), -1, np.int64)
            for k, x in enumerate(fd):
                deps[k, :len(x)] = x
        else:
            deps = prev.reshape(p, 1)
        step = step0 + (s - 1 if sw is not None else 0)
        prev = b.add_block(np.full(p, step), idx, idx[j], per / p, False, route, deps)
        for k in range(p):
            arrivals.setdefault(int(idx[j[k]]), []).append(int(prev[k]))
    return arrivals


# ---------------------------------------------------------------------------------- engines

def _check_bytes(n_bytes: float) -> None:
    if not (isinstance(n_bytes, (int, float)) and not isinstance(n_bytes, bool)
            and math.isfinite(n_bytes) and n_bytes > 0):
        raise InputError(f"all-to-all size must be a positive finite number of bytes, "
                         f"got {n_bytes!r}")


def _result(pl: AllToAllPlan, engine: str, t: float, n_bytes: float, events: int = 0,
            wall_s: float = 0.0) -> CollectiveTime:
    return CollectiveTime(op=OP, engine=engine, time_s=t, payload_bytes=float(n_bytes),
                          padded_bytes=float(n_bytes), chips=pl.chips, algorithm=pl.algorithm,
                          steps=pl.steps, transfers=pl.transfers, events=events, wall_s=wall_s,
                          mode="symmetric")


def analytic_time(pl: AllToAllPlan, n_bytes: float, *, alpha_s: float = 0.0) -> CollectiveTime:
    """Closed form: the levels in sequence (a mirrored plan: one half of the buffer)."""
    check_overhead("alpha_s", alpha_s)
    _check_bytes(n_bytes)
    per = n_bytes / pl.streams
    return _result(pl, "analytic", sum(lv.time_s(per, alpha_s) for lv in pl.levels), n_bytes)


def packet_count(nbytes: np.ndarray, packet_bytes: float | None) -> int:
    if packet_bytes is None:
        return len(nbytes)
    return int(np.maximum(1, np.ceil(nbytes / packet_bytes)).sum())


def representative_schedule(pl: AllToAllPlan, n_bytes: float) -> Schedule:
    """One rank's chain per level over that level's (private) links; a level starts when the
    level before has delivered."""
    per = n_bytes / pl.streams
    links, bw, lat, sizes, routes, deps, dep_len, steps = [], [], [], [], [], [], [], []
    n = step0 = 0
    for lv in pl.levels:
        ids = list(range(len(links), len(links) + len(lv.hop)))
        for b_, l_ in lv.hop:
            links.append(("rep", len(links), 0))
            bw.append(b_)
            lat.append(l_)
        fr = lv.step_fractions()
        for j, f in enumerate(fr):
            sizes.append(f * per)
            routes.append(ids)
            steps.append(step0 + j)
            if n > 0:
                deps.append(n - 1)
                dep_len.append(1)
            else:
                dep_len.append(0)
            n += 1
        step0 += len(fr)
    route_len = [len(r) for r in routes]
    return Schedule(
        op=OP, algorithm=pl.algorithm + " (representative rank)", chips=(0, 1),
        payload_bytes=float(n_bytes), padded_bytes=float(n_bytes), links=tuple(links),
        link_bandwidth_Bps=np.asarray(bw, float), link_latency_s=np.asarray(lat, float),
        step=np.asarray(steps, np.int32), src=np.zeros(n, np.int32), dst=np.ones(n, np.int32),
        nbytes=np.asarray(sizes, float), reduce=np.zeros(n, bool), ring=np.zeros(n, np.int32),
        chunk=np.arange(n, dtype=np.int32),
        route_ptr=np.concatenate([[0], np.cumsum(route_len)]).astype(np.int64),
        route=np.asarray([x for r in routes for x in r], np.int32),
        dep_ptr=np.concatenate([[0], np.cumsum(dep_len)]).astype(np.int64),
        deps=np.asarray(deps, np.int32), notes=f"representative rank of {pl.name}")


def des_time(pl: AllToAllPlan, n_bytes: float, *, alpha_s: float = 0.0,
             packet_bytes: float | None = None, max_packets: int | None = MAX_PACKETS,
             env=None) -> CollectiveTime:
    """The simpy DES of the representative rank (module docstring)."""
    from accelsim.netsim.des import simulate

    check_overhead("alpha_s", alpha_s)
    check_rate("packet_bytes", packet_bytes)
    _check_bytes(n_bytes)
    s = representative_schedule(pl, n_bytes)
    check_limit(f"the DES of this all-to-all on {pl.name} (one representative rank)",
                packet_count(s.nbytes, packet_bytes), max_packets, "packets", "max_packets",
                "larger packets (packet_bytes) cost fewer")
    wall0 = time.perf_counter()
    d = simulate(s, alpha_s=alpha_s, packet_bytes=packet_bytes, env=env, max_packets=None)
    return dataclasses.replace(_result(pl, "des", d.time_s, n_bytes), events=d.events,
                               wall_s=time.perf_counter() - wall0)


def time_all_to_all(pl: AllToAllPlan, n_bytes: float, engine: str = "analytic", *,
                    alpha_s: float = 0.0, packet_bytes: float | None = None,
                    max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """All-to-all of ``n_bytes`` per rank on ``pl`` with the named engine."""
    if engine == "analytic":
        return analytic_time(pl, n_bytes, alpha_s=alpha_s)
    if engine == "des":
        return des_time(pl, n_bytes, alpha_s=alpha_s, packet_bytes=packet_bytes,
                        max_packets=max_packets)
    raise InputError(f"unknown engine {engine!r}; known: analytic, des")
