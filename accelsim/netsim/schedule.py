"""Collective algorithms as explicit schedules: which chunk moves over which link in which step.

A :class:`Schedule` is a list of *transfers* stored column-wise (numpy arrays, so a 1024-chip
ring with a million transfers stays small).  Transfer ``t`` moves ``nbytes[t]`` from chip
``src[t]`` to ``dst[t]`` along a route of directional link lanes, in logical ``step[t]``; it may
start only when all transfers in ``deps[t]`` have arrived (and, for reduce-scatter, after the
receiver has added the incoming partial sums: ``reduce[t]`` marks transfers whose *payload is
reduced on arrival*).

Builders:

* :func:`ring_schedule` -- reduce-scatter / all-gather / all-reduce over ``k`` edge-disjoint
  rings, each used in both directions (``2k`` directional rings), data split evenly over them.
* :func:`hierarchical_schedule` -- multi-board systems: intra-board rings, then rail rings
  across boards (reduce-scatter); the reverse for all-gather; all-reduce is their composition.
* :func:`torus_schedule` -- 2-D tori dimension-wise: rows then columns, and columns then rows
  on the rest of the vector, at once in lock step; both run on :func:`level_schedule`.

Padding rule (documented, never guessed): a collective over ``S`` split counts (directional
rings x chips, times the rail split for hierarchical schedules) needs the element count to be a
multiple of the *granule* ``S``.  With ``pad=True`` (default) the vector is zero-padded up to
the next multiple and the padded bytes are reported (``padded_bytes``); with ``pad=False`` a
non-multiple raises ``ValueError``.  Bandwidths are always reported on the UNPADDED size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import networkx as nx
import numpy as np

from accelsim.errors import InputError
from accelsim.netsim.limits import MAX_TRANSFERS, check_limit
from accelsim.netsim.rings import EXACT_MAX_CHIPS, find_rings
from accelsim.netsim.topology import chips as chip_nodes
from accelsim.netsim.topology import validate

OPS = ("reduce-scatter", "all-gather", "all-reduce")


@dataclass(frozen=True, eq=False)
class Schedule:
    """An explicit collective schedule on a topology (see module docstring)."""

    op: str
    algorithm: str
    chips: tuple
    payload_bytes: float  # the logical vector size N per chip (nccl-tests "size")
    padded_bytes: float  # N after the zero-padding rule
    links: tuple  # directional link lanes: (u, v, lane)
    link_bandwidth_Bps: np.ndarray
    link_latency_s: np.ndarray
    step: np.ndarray  # int32 [T]
    src: np.ndarray  # int32 [T] index into chips
    dst: np.ndarray  # int32 [T]
    nbytes: np.ndarray  # float64 [T]
    reduce: np.ndarray  # bool [T]: receiver reduces the payload before it can be forwarded
    ring: np.ndarray  # int32 [T]: directional-ring pass the transfer belongs to (-1 explicit)
    chunk: np.ndarray  # int32 [T]: which segment of that ring's share it carries
    route_ptr: np.ndarray  # int64 [T+1]
    route: np.ndarray  # int32 [R] link ids
    dep_ptr: np.ndarray  # int64 [T+1]
    deps: np.ndarray  # int32 [D] transfer ids
    rings: tuple = field(default=())
    notes: str = ""

    @property
    def n_transfers(self) -> int:
        return int(self.step.shape[0])

    @property
    def n_steps(self) -> int:
        return int(self.step.max()) + 1 if self.n_transfers else 0

    @property
    def p(self) -> int:
        return len(self.chips)


# ---------------------------------------------------------------------------- link tables

def link_table(g: nx.Graph):
    """Directional link lanes of ``g``: ``(links, index, bandwidth, latency)``."""
    links, bw, lat = [], [], []
    for u, v, d in sorted(g.edges(data=True), key=lambda e: (str(e[0]), str(e[1]))):
        for lane in range(int(d.get("multiplicity", 1))):
            for a, b in ((u, v), (v, u)):
                links.append((a, b, lane))
                bw.append(d["bandwidth_Bps"])
                lat.append(d.get("latency_s", 0.0))
    index = {lk: i for i, lk in enumerate(links)}
    return tuple(links), index, np.asarray(bw, float), np.asarray(lat, float)


class Builder:
    """Accumulates transfers column-wise; routes are looked up in the link index."""

    def __init__(self, g: nx.Graph):
        self.g = g
        self.links, self.index, self.bw, self.lat = link_table(g)
        self.chips = tuple(chip_nodes(g))
        self.chip_idx = {c: i for i, c in enumerate(self.chips)}
        self.cols = {k: [] for k in ("step", "src", "dst", "nbytes", "reduce", "ring", "chunk")}
        self.n_rings = 0
        self.routes: list[np.ndarray] = []
        self.depl: list[np.ndarray] = []  # per block: deps as [n, k] arrays (-1 = none)
        self.n = 0

    def link_id(self, u, v, lane) -> int:
        try:
            return self.index[(u, v, lane)]
        except KeyError:
            raise ValueError(f"schedule references missing link {u}->{v} lane {lane} in "
                             f"{self.g.graph.get('name', 'topology')}") from None

    def add_block(self, step, src, dst, nbytes, reduce, route_ids, deps, ring=-1, chunk=-1):
        """Add ``n`` transfers; ``route_ids`` [n, h] link ids; ``deps`` [n, k] ids or -1."""
        n = len(step)
        base = self.n
        self.cols["ring"].append(np.broadcast_to(np.asarray(ring, np.int32), (n,)).copy())
        self.cols["chunk"].append(np.broadcast_to(np.asarray(chunk, np.int32), (n,)).copy())
        self.cols["step"].append(np.asarray(step, np.int32))
        self.cols["src"].append(np.asarray(src, np.int32))
        self.cols["dst"].append(np.asarray(dst, np.int32))
        self.cols["nbytes"].append(np.broadcast_to(np.asarray(nbytes, float), (n,)).copy())
        self.cols["reduce"].append(np.broadcast_to(np.asarray(reduce, bool), (n,)).copy())
        self.routes.append(np.asarray(route_ids, np.int32).reshape(n, -1))
        self.depl.append(np.asarray(deps, np.int64).reshape(n, -1))
        self.n += n
        return np.arange(base, base + n)

    def build(self, op, algorithm, payload_bytes, padded_bytes, rings=(), notes="") -> Schedule:
        cat = {k: (np.concatenate(v) if v else np.zeros(0)) for k, v in self.cols.items()}
        route_ptr = [0]
        route_parts, dep_parts, dep_ptr = [], [], [0]
        for r in self.routes:
            route_parts.append(r.ravel())
            route_ptr.extend((route_ptr[-1] + np.arange(1, r.shape[0] + 1) * r.shape[1]).tolist())
        for d in self.depl:
            valid = d >= 0
            counts = valid.sum(axis=1)
            dep_parts.append(d[valid])
            dep_ptr.extend((dep_ptr[-1] + np.cumsum(counts)).tolist())
        return Schedule(
            op=op, algorithm=algorithm, chips=self.chips, payload_bytes=float(payload_bytes),
            padded_bytes=float(padded_bytes), links=self.links, link_bandwidth_Bps=self.bw,
            link_latency_s=self.lat, step=cat["step"].astype(np.int32),
            src=cat["src"].astype(np.int32), dst=cat["dst"].astype(np.int32),
            nbytes=cat["nbytes"].astype(float), reduce=cat["reduce"].astype(bool),
            ring=cat["ring"].astype(np.int32), chunk=cat["chunk"].astype(np.int32),
            route_ptr=np.asarray(route_ptr, np.int64),
            route=(np.concatenate(route_parts) if route_parts else np.zeros(0)).astype(np.int32),
            dep_ptr=np.asarray(dep_ptr, np.int64),
            deps=(np.concatenate(dep_parts) if dep_parts else np.zeros(0)).astype(np.int32),
            rings=tuple(rings), notes=notes)


# ------------------------------------------------------------------------ directional rings

@dataclass(frozen=True)
class DirRing:
    """One directional ring: chip order and, per hop, the route as ``(u, v, lane)`` links."""

    order: tuple
    hop_routes: tuple  # hop i: tuple of (u, v, lane) from order[i] to order[i+1]


def directional_rings(g: nx.Graph, nodes: list | None = None) -> list[DirRing]:
    """Both directions of every edge-disjoint ring on ``g`` (one direction for 2 chips).

    A topology without direct rings among the chips (a switch) gets one logical ring through
    its switch: ``u -> switch -> v`` per hop (only one direction: the reverse would reuse every
    up- and down-link).
    """
    nodes = list(chip_nodes(g) if nodes is None else nodes)
    rings = find_rings(g, nodes)
    out: list[DirRing] = []
    for r in rings:
        for rev in ((False,) if len(nodes) == 2 else (False, True)):
            hops = r.hops(reverse=rev)
            order = tuple(h[0] for h in hops)
            out.append(DirRing(order=order, hop_routes=tuple((h,) for h in hops)))
    if out:
        return out
    switches = [n for n, k in g.nodes(data="kind") if k == "switch"]
    for s in switches:
        if all(g.has_edge(c, s) for c in nodes):
            n = len(nodes)
            hops = tuple(((nodes[i], s, 0), (s, nodes[(i + 1) % n], 0)) for i in range(n))
            return [DirRing(order=tuple(nodes), hop_routes=hops)]
    raise ValueError(f"{g.graph.get('name', 'topology')}: no ring over the chips found "
                     "(no Hamiltonian cycle and no common switch)")


def pad_elems(n_elems: int, granule: int, pad: bool, what: str) -> int:
    """The element count after the padding rule (module docstring) for ``granule``."""
    if (not isinstance(n_elems, (int, np.integer)) or isinstance(n_elems, bool)
            or n_elems <= 0):
        raise InputError(f"{what}: element count must be a positive integer, got {n_elems!r}")
    if n_elems % granule == 0:
        return int(n_elems)
    if not pad:
        raise ValueError(f"{what}: {n_elems} elements do not divide into {granule} equal chunks "
                         f"(directional rings x chips); pad to "
                         f"{math.ceil(n_elems / granule) * granule} "
                         "or allow zero-padding")
    return int(math.ceil(n_elems / granule) * granule)


def ring_phase(b: Builder, drings: list[DirRing], seg_bytes: float, step0: int, reduce: bool,
                first_deps, step_bytes: list[float] | None = None) -> np.ndarray:
    """Append one reduce-scatter (``reduce``) or all-gather pass over ``drings``.

    Each directional ring of p chips runs p-1 steps; at step s the chip at ring position i
    sends one segment (``seg_bytes``) to position i+1: segment (i - s) mod p, its running
    partial sum, when reducing (so position i ends owning segment i+1); segment (i + 1 - s)
    mod p, the one it owns or last received, when gathering.  Transfer (s, i) depends on (s-1, i-1)
    (the segment it forwards arrived there); step-0 transfers depend on ``first_deps(chip)``.
    Returns, per chip index, the ids of the transfers *arriving* at it in the last step.
    ``step_bytes`` (a forwarding pass, e.g. a ring all-to-all): one entry per step, the bytes
    every hop carries in that step, instead of p-1 steps of ``seg_bytes``.
    """
    p = len(drings[0].order)
    arrivals: dict[int, list[int]] = {}
    for dr in drings:
        pos_chip = np.array([b.chip_idx[c] for c in dr.order], np.int32)
        hop_ids = np.array([[b.link_id(*lk) for lk in route] for route in dr.hop_routes], np.int32)
        ids_prev = None
        ring_id = b.n_rings
        b.n_rings += 1
        n_steps = p - 1 if step_bytes is None else len(step_bytes)
        for s in range(n_steps):
            i = np.arange(p)
            if s == 0:
                fd = [first_deps(int(pos_chip[k])) for k in range(p)]
                width = max((len(x) for x in fd), default=0)
                deps = np.full((p, max(width, 1)), -1, np.int64)
                for k, x in enumerate(fd):
                    deps[k, :len(x)] = x
            else:
                deps = ids_prev[(i - 1) % p].reshape(p, 1)
            chunk = (i - s) % p if reduce else (i + 1 - s) % p
            ids_prev = b.add_block(np.full(p, step0 + s), pos_chip, pos_chip[(i + 1) % p],
                                   seg_bytes if step_bytes is None else step_bytes[s], reduce,
                                   hop_ids, deps, ring_id, chunk)
        for k in range(p):
            arrivals.setdefault(int(pos_chip[(k + 1) % p]), []).append(int(ids_prev[k]))
    return arrivals


def check_op(op: str) -> None:
    if op not in OPS:
        raise InputError(f"unknown collective {op!r}; known: {', '.join(OPS)}")


def check_bytes_per_elem(bytes_per_elem) -> None:
    if not (isinstance(bytes_per_elem, (int, float)) and not isinstance(bytes_per_elem, bool)
            and math.isfinite(bytes_per_elem) and bytes_per_elem > 0):
        raise InputError(f"bytes per element must be a positive finite number, "
                         f"got {bytes_per_elem!r}")


def guard_transfers(op: str, g: nx.Graph, n: int, max_transfers: int | None) -> None:
    check_limit(f"the explicit {op} schedule on {g.graph.get('name', 'topology')}", n,
                max_transfers, "transfers", "max_transfers",
                "the symmetric mode times it without one")


def ring_schedule(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                  pad: bool = True, drings: list[DirRing] | None = None,
                  max_transfers: int | None = MAX_TRANSFERS) -> Schedule:
    """Reduce-scatter / all-gather / all-reduce of an ``n_elems`` vector over all directional
    rings of ``g``: the vector is split evenly over the rings, each ring's share into p
    segments.  Refuses (:class:`~accelsim.netsim.limits.SizeLimitError`) schedules of more
    than ``max_transfers`` transfers before building them."""
    check_op(op)
    validate(g)
    check_bytes_per_elem(bytes_per_elem)
    drings = directional_rings(g) if drings is None else drings
    p = len(drings[0].order)
    k = len(drings)
    guard_transfers(op, g, k * p * (p - 1) * (2 if op == "all-reduce" else 1), max_transfers)
    n_pad = pad_elems(n_elems, k * p, pad, f"{op} on {g.graph.get('name', 'topology')}")
    seg = n_pad // (k * p) * bytes_per_elem
    b = Builder(g)
    none = lambda c: []  # noqa: E731
    if op in ("reduce-scatter", "all-reduce"):
        arr = ring_phase(b, drings, seg, 0, True, none)
    if op == "all-gather":
        ring_phase(b, drings, seg, 0, False, none)
    elif op == "all-reduce":
        ring_phase(b, drings, seg, p - 1, False, lambda c: arr.get(c, []))
    return b.build(op, f"ring x{k}", n_elems * bytes_per_elem, n_pad * bytes_per_elem,
                   rings=tuple(d.order for d in drings))


def hierarchical_rings(g: nx.Graph) -> tuple[dict, dict]:
    """The directional rings of a multi-board graph: ``({board: intra-board rings},
    {local index: rail rings})``.  Board 0's intra-board rings are found once and shifted onto
    the other boards; each rail's rings are found on the rail's own subgraph."""
    boards = sorted({d["board"] for _, d in g.nodes(data=True) if d.get("kind") == "chip"})
    per = g.graph.get("chips_per_board", 8)
    board_nodes = {bd: sorted(n for n, d in g.nodes(data=True) if d.get("board") == bd)
                   for bd in boards}
    intra = g.edge_subgraph([(u, v) for u, v, t in g.edges(data="tier") if t != "inter"])
    base_rings = directional_rings(intra.subgraph(board_nodes[boards[0]]).copy())

    def shift(dr: DirRing, off: int) -> DirRing:
        return DirRing(order=tuple(c + off for c in dr.order),
                       hop_routes=tuple(tuple((u + off, v + off, ln) for u, v, ln in hop)
                                        for hop in dr.hop_routes))

    intra_rings = {bd: [shift(r, board_nodes[bd][0] - board_nodes[boards[0]][0])
                        for r in base_rings] for bd in boards}
    rail_rings = {}
    for local in range(per):
        rail = [board_nodes[bd][local] for bd in boards]
        rail_g = g.subgraph(rail).copy()
        rail_rings[local] = directional_rings(rail_g, rail)
    return intra_rings, rail_rings


def coupled_ring_passes(b: Builder, passes: list, step0: int, first_deps) -> dict:
    """Ring passes run at once in lock step: ``passes`` is a list of ``(groups, segment bytes,
    reduce)`` (groups: lists of directional rings, as in :func:`ring_phase`).  Within each
    ring, transfer (s, i) waits on (s-1, i-1) as in :func:`ring_phase`, and ALSO on every
    transfer of the other passes arriving at its sender in step s-1 (one kernel, one step
    loop); step-0 transfers wait on ``first_deps(chip)``.  Returns, per chip index, the
    transfers arriving at it in the last step of each ring."""
    rings = []  # (pass, chip at each position, hop link ids, ring id, segment, reduce)
    for k, (groups, seg, reduce) in enumerate(passes):
        for grp in groups:
            for dr in grp:
                rings.append((k, np.array([b.chip_idx[c] for c in dr.order], np.int32),
                              np.array([[b.link_id(*lk) for lk in route]
                                        for route in dr.hop_routes], np.int32),
                              b.n_rings, seg, reduce))
                b.n_rings += 1
    n_steps = max(len(r[1]) - 1 for r in rings)
    prev: dict[int, np.ndarray] = {}
    arrived: dict[int, dict[int, list[int]]] = {}  # pass -> chip -> ids arriving last step
    final: dict[int, list[int]] = {}
    for s in range(n_steps):
        now: dict[int, dict[int, list[int]]] = {}
        for r_i, (k, pos_chip, hop_ids, ring_id, seg, reduce) in enumerate(rings):
            p = len(pos_chip)
            if s >= p - 1:
                continue
            i = np.arange(p)
            rows = []
            for q in range(p):
                chip = int(pos_chip[q])
                if s == 0:
                    rows.append(list(first_deps(chip)))
                    continue
                own = [int(prev[r_i][(q - 1) % p])]
                rows.append(own + [t for kk, got in arrived.items() if kk != k
                                   for t in got.get(chip, ())])
            deps = np.full((p, max(1, max(len(x) for x in rows))), -1, np.int64)
            for q, x in enumerate(rows):
                deps[q, :len(x)] = x
            chunk = (i - s) % p if reduce else (i + 1 - s) % p
            ids = b.add_block(np.full(p, step0 + s), pos_chip, pos_chip[(i + 1) % p], seg,
                              reduce, hop_ids, deps, ring_id, chunk)
            prev[r_i] = ids
            for q in range(p):
                dst = int(pos_chip[(q + 1) % p])
                now.setdefault(k, {}).setdefault(dst, []).append(int(ids[q]))
                if s == p - 2:
                    final.setdefault(dst, []).append(int(ids[q]))
        arrived = now
    return final


def stream_granule(splits_by_stream: list[list[int]], shares: list[Fraction]) -> int:
    """Elements must be a multiple of this so that every stream's share splits evenly into
    each of its levels' segments (one stream of share 1: the lcm of its splits)."""
    d, m = math.lcm(*(s.denominator for s in shares)), 1
    for splits, share in zip(splits_by_stream, shares):
        g = math.lcm(*splits)
        num = share.numerator * (d // share.denominator)
        m = math.lcm(m, g // math.gcd(num, g))
    return d * m


def level_schedule(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float,
                   levels: list[list[list[DirRing]]], *, mirrored: bool = False,
                   share: Fraction = Fraction(1, 2), algorithm: str, notes: str = "",
                   pad: bool = True, max_transfers: int | None = MAX_TRANSFERS) -> Schedule:
    """A collective run level by level: ``levels[i]`` is a list of disjoint chip groups, each a
    list of directional rings over the group.  Reduce-scatter runs the levels in order, each on
    the share the levels before left a chip with (level i's segments are 1/(p_0 ... p_{i-1})
    of the vector over k_i x p_i); all-gather runs them in reverse; all-reduce composes them.
    A chip's first transfers of a level wait for every transfer of the level before arriving
    at it.  ``mirrored`` (two levels): the vector is split in two streams run at once in lock
    step (:func:`coupled_ring_passes`), ``share`` of it through the levels in order, the rest
    in reverse order (a 2-D torus: rows then columns, and columns then rows, so both
    dimensions' links are busy at every step)."""
    check_op(op)
    check_bytes_per_elem(bytes_per_elem)
    shapes = [(len(groups[0][0].order), len(groups[0]), len(groups)) for groups in levels]
    streams = [list(range(len(levels)))]
    shares = [Fraction(1)]
    if mirrored:
        if len(levels) != 2 or not 0 < share < 1:
            raise ValueError("a mirrored schedule needs two levels and a share in (0, 1)")
        streams.append(streams[0][::-1])
        shares = [Fraction(share), 1 - Fraction(share)]

    def splits(order):  # level -> its split count in this stream's order
        out, before = {}, 1
        for i in order:
            p, k, _ = shapes[i]
            out[i] = before * k * p
            before *= p
        return out

    per_pass = sum(grp * k * p * (p - 1) for p, k, grp in shapes)
    guard_transfers(op, g, len(streams) * per_pass * (2 if op == "all-reduce" else 1),
                    max_transfers)
    granule = stream_granule([list(splits(o).values()) for o in streams], shares)
    n_pad = pad_elems(n_elems, granule, pad, f"{op} on {g.graph.get('name', 'topology')}")
    b = Builder(g)

    def run_level(groups, seg, step0, reduce, first):
        arr: dict[int, list[int]] = {}
        for rs in groups:
            for c, ids in ring_phase(b, rs, seg, step0, reduce, first).items():
                arr.setdefault(c, []).extend(ids)
        return arr

    def passes_of(order):
        rs = [(i, True) for i in order]
        ag = [(i, False) for i in order[::-1]]
        return {"reduce-scatter": rs, "all-gather": ag, "all-reduce": rs + ag}[op]

    if not mirrored:
        split = splits(streams[0])
        step, arr = 0, None
        for i, reduce in passes_of(streams[0]):
            first = (lambda c: []) if arr is None else (lambda c, a=arr: a.get(c, []))
            arr = run_level(levels[i], n_pad // split[i] * bytes_per_elem, step, reduce, first)
            step += shapes[i][0] - 1
    else:
        per_stream = []
        for order, sh in zip(streams, shares):
            n, split = n_pad * sh.numerator // sh.denominator, splits(order)
            per_stream.append([(levels[i], n // split[i] * bytes_per_elem, red, shapes[i][0])
                               for i, red in passes_of(order)])
        step, arr = 0, None
        for phase in zip(*per_stream):
            first = (lambda c: []) if arr is None else (lambda c, a=arr: a.get(c, []))
            arr = coupled_ring_passes(b, [(grp, seg, red) for grp, seg, red, _ in phase], step,
                                      first)
            step += max(p for *_, p in phase) - 1
    return b.build(op, algorithm, n_elems * bytes_per_elem, n_pad * bytes_per_elem,
                   rings=tuple(r.order for r in levels[0][0]), notes=notes)


def hierarchical_schedule(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                          pad: bool = True, max_transfers: int | None = MAX_TRANSFERS
                          ) -> Schedule:
    """Two-level collective on a multi-board graph (nodes with ``board``/``local``).

    Reduce-scatter: (1) every board reduce-scatters the whole vector over its intra-board
    directional rings (each chip ends with 1/8); (2) each rail (same local index on all boards)
    reduce-scatters that 1/8 over the rail ring in both directions (each chip ends with
    1/(8 x boards)).  All-gather runs the two levels in reverse; all-reduce composes them.
    """
    check_op(op)
    validate(g)
    intra_rings, rail_rings = hierarchical_rings(g)
    nb, per = len(intra_rings), len(rail_rings)
    k1, k2 = len(intra_rings[next(iter(intra_rings))]), len(rail_rings[0])
    return level_schedule(g, op, n_elems, bytes_per_elem,
                          [list(intra_rings.values()), list(rail_rings.values())],
                          algorithm=f"hierarchical (intra x{k1}, rail x{k2})",
                          notes=f"{nb} boards x {per} chips; intra-board rings then rail rings",
                          pad=pad, max_transfers=max_transfers)


# ------------------------------------------------------------------------------- 2-D torus

def torus_rings(g: nx.Graph) -> tuple[list[list[DirRing]], list[list[DirRing]]]:
    """The dimension rings of a 2-D torus graph: per row, then per column, both directions of
    its wrap-around cycle (its own links only)."""
    r, c = g.graph["rows"], g.graph["cols"]

    def line(nodes: list) -> list[DirRing]:
        out = []
        for seq in (nodes, nodes[::-1]):
            n = len(seq)
            out.append(DirRing(order=tuple(seq), hop_routes=tuple(
                ((seq[i], seq[(i + 1) % n], 0),) for i in range(n))))
        return out

    return ([line([i * c + j for j in range(c)]) for i in range(r)],
            [line([i * c + j for i in range(r)]) for j in range(c)])


def torus_algorithm(g: nx.Graph) -> str:
    """How accelsim runs collectives on a 2-D torus graph: ``"mirrored"`` (dimension-wise, two
    streams in lock step, one rows then columns, the other columns then rows, so both
    dimensions' links carry data at every step; :func:`torus_share` splits the vector; a
    square torus: bandwidth term (p-1)/p N/(4B) in 2(sqrt(p)-1) steps), except ``"rings"`` on
    the one small oblong torus whose exact ring search (<= ``rings.EXACT_MAX_CHIPS`` chips:
    3x4) packs Hamiltonian rings over every link, (p-1)/p N/(4B), which beats it there."""
    r, c = g.graph["rows"], g.graph["cols"]
    if r != c and r * c <= EXACT_MAX_CHIPS and len(directional_rings(g)) > 2:
        return "rings"
    return "mirrored"


def torus_share(rows: int, cols: int) -> Fraction:
    """Share of the vector in the rows-first stream: c/(r+c), which makes both streams' first
    dimension segments equal (N x/(2c) = N (1-x)/(2r)); it minimises the lock-step time
    (the step-synchronous cost is piecewise linear in the share, falling up to this point and
    rising after it); 1/2 on a square torus."""
    return Fraction(cols, rows + cols)


def torus_algorithm_name(share: Fraction, k_rows: int, k_cols: int) -> str:
    a, d = share.numerator, share.denominator
    split = "" if share == Fraction(1, 2) else f" {a}:{d - a}"
    return f"dimension-wise, both orders{split} (rows x{k_rows}, columns x{k_cols})"


def torus_schedule(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                   pad: bool = True, max_transfers: int | None = MAX_TRANSFERS) -> Schedule:
    """The collective accelsim runs on a 2-D torus graph (:func:`torus_algorithm`)."""
    check_op(op)
    validate(g)
    how = torus_algorithm(g)
    if how == "rings":
        return ring_schedule(g, op, n_elems, bytes_per_elem, pad=pad,
                             max_transfers=max_transfers)
    rows, cols = torus_rings(g)
    share = torus_share(g.graph["rows"], g.graph["cols"])
    return level_schedule(g, op, n_elems, bytes_per_elem, [rows, cols], mirrored=True,
                          share=share, algorithm=torus_algorithm_name(share, 2, 2),
                          notes=f"{g.graph['rows']} x {g.graph['cols']} torus",
                          pad=pad, max_transfers=max_transfers)


def best_schedule(g: nx.Graph, op: str, n_elems: int, bytes_per_elem: float = 1.0, *,
                  pad: bool = True, max_transfers: int | None = MAX_TRANSFERS) -> Schedule:
    """The schedule accelsim uses for ``g``: hierarchical on multi-board graphs, dimension-wise
    on 2-D tori (:func:`torus_algorithm`), rings else."""
    if g.graph.get("topology") == "multi-board":
        return hierarchical_schedule(g, op, n_elems, bytes_per_elem, pad=pad,
                                     max_transfers=max_transfers)
    if g.graph.get("topology") == "torus2d":
        return torus_schedule(g, op, n_elems, bytes_per_elem, pad=pad,
                              max_transfers=max_transfers)
    return ring_schedule(g, op, n_elems, bytes_per_elem, pad=pad, max_transfers=max_transfers)


def from_transfers(g: nx.Graph, op: str, transfers: list[dict], payload_bytes: float) -> Schedule:
    """A hand-written schedule: each transfer a dict with ``step, src, dst, nbytes, route``
    (list of ``(u, v)`` or ``(u, v, lane)``), optional ``deps`` (indices of earlier transfers)
    and ``reduce``.  Raises ValueError for a missing link, a broken route or a bad dependency."""
    check_op(op)
    validate(g)
    b = Builder(g)
    for t, tr in enumerate(transfers):
        route = [tuple(lk) if len(lk) == 3 else (lk[0], lk[1], 0) for lk in tr["route"]]
        if not route or route[0][0] != tr["src"] or route[-1][1] != tr["dst"] or any(
                route[i][1] != route[i + 1][0] for i in range(len(route) - 1)):
            raise ValueError(f"transfer {t}: route {route} does not lead from {tr['src']} to "
                             f"{tr['dst']}")
        ids = [b.link_id(*lk) for lk in route]
        deps = list(tr.get("deps", ()))
        if any(not (0 <= d < t) for d in deps):
            raise ValueError(f"transfer {t}: dependencies {deps} must name earlier transfers")
        if not tr["nbytes"] > 0:
            raise ValueError(f"transfer {t}: nbytes must be > 0, got {tr['nbytes']!r}")
        for c in (tr["src"], tr["dst"]):
            if c not in b.chip_idx:
                raise ValueError(f"transfer {t}: {c!r} is not a chip of the topology")
        b.add_block([tr["step"]], [b.chip_idx[tr["src"]]], [b.chip_idx[tr["dst"]]],
                    tr["nbytes"], tr.get("reduce", False), np.array([ids]),
                    np.array([deps or [-1]]))
    return b.build(op, "explicit", payload_bytes, payload_bytes)
