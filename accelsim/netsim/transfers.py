"""An explicit collective schedule as data: which chunk moves over which link in which step.

A :class:`Schedule` is a list of *transfers* stored column-wise (numpy arrays, so a 1024-chip
ring with a million transfers stays small).  Transfer ``t`` moves ``nbytes[t]`` from chip
``src[t]`` to ``dst[t]`` along a route of directional link lanes, in logical ``step[t]``; it may
start only when all transfers in ``deps[t]`` have arrived (and, for reduce-scatter, after the
receiver has added the incoming partial sums: ``reduce[t]`` marks transfers whose *payload is
reduced on arrival*).  A :class:`Builder` accumulates transfers block by block; every
algorithm (:mod:`accelsim.netsim.schedule`, :mod:`accelsim.netsim.alltoall`) builds on it,
and :func:`from_transfers` takes a hand-written list.

Padding rule (documented, never guessed): a collective over ``S`` split counts (directional
rings x chips, times the rail split for hierarchical schedules) needs the element count to be a
multiple of the *granule* ``S``.  With ``pad=True`` (default) the vector is zero-padded up to
the next multiple and the padded bytes are reported (``padded_bytes``); with ``pad=False`` a
non-multiple raises ``ValueError`` (:func:`pad_elems`).  Bandwidths are always reported on the
UNPADDED size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import networkx as nx
import numpy as np

from accelsim.errors import InputError
from accelsim.netsim.limits import check_limit
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


# ------------------------------------------------------------------ checks every builder shares

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
