"""The two-tier fabric of a node file as netsim times it: the NVSwitch port of each GPU inside
a node, its InfiniBand NIC across nodes (rail-aligned), a group spanning both as a hierarchical
collective (node, then rail). The one network model of every front-end: the gradient
collectives of ``predict`` (:func:`accelsim.netsim.system.system_graph`, the same links at the
same factor), the tensor-, pipeline-, expert- and data-parallel traffic of ``llm`` and
``infer``, and ``accelsim collective --system``. Both tiers run at ``system.network_efficiency``
of their wire rate (the fabric preset's one fitted number, with its source in the preset).

Ring collectives use :func:`accelsim.ring.ring_collective_time` (the ring term of accelsim),
or on request the discrete-event engine on a switch ring (``engine="des"``); all-to-alls the
two-tier plan of :mod:`accelsim.netsim.alltoall`.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

from accelsim.arch import System
from accelsim.errors import InputError
from accelsim.netsim.nccl import NCCL_SIMPLE, TREE_BANDWIDTH_FACTOR, NcclLatency
from accelsim.ring import ALL_TO_ALL_EFFICIENCY, ring_collective_time

ENGINES = ("analytic", "des")
#: DES packet size: collectives move in pipelined chunks of this many bytes (assumption: the
#: order of NCCL's per-channel chunks, 512 KiB-4 MiB; with cut-through switches the time does
#: not depend on it, the event count does)
DES_PACKET_BYTES = 4 * 2 ** 20


@functools.lru_cache(maxsize=4096)
def _des_ring(kind: str, ranks: int, size_bytes: float, bandwidth_Bps: float,
              latency_s: float) -> float:
    """One ring collective on a ``ranks``-port switch, timed by netsim's DES (symmetric mode)."""
    # the DES only on request: importing it (simpy, networkx) is not free for every prediction
    from accelsim.netsim import symmetric
    from accelsim.netsim.phases import collective_time

    # a switch ring step crosses two links (GPU -> switch -> GPU): half the node file's
    # GPU-to-GPU latency on each, so a step costs the latency the closed form charges
    pl = symmetric.plan("switch", ranks, bandwidth_Bps=bandwidth_Bps, latency_s=latency_s / 2)
    return collective_time(pl, kind, math.ceil(size_bytes), bytes_per_elem=1.0, engine="des",
                           packet_bytes=DES_PACKET_BYTES).time_s




@dataclass(frozen=True)
class Fabric:
    """The two tiers a node file describes, with the achievable-bandwidth factor applied."""

    gpus_per_node: int
    intra_Bps: float
    intra_latency_s: float
    inter_Bps: float
    inter_latency_s: float
    engine: str = "analytic"
    a2a_scale: float = 1.0  # an all-to-all's achievable bandwidth over a ring collective's
    #: NCCL's latency model for groups that span nodes (:mod:`accelsim.netsim.nccl`): the
    #: collective's latency is NCCL's (base + per-step, ring or tree, as its tuner picks) in
    #: place of the links' per-step latency; None: the links' latency (groups inside one node
    #: always)
    nccl: NcclLatency | None = None

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise InputError(f"unknown engine {self.engine!r}; known: {', '.join(ENGINES)}")
        if self.nccl is not None and not isinstance(self.nccl, NcclLatency):
            raise InputError(f"nccl must be an accelsim.netsim.nccl.NcclLatency or None, got "
                             f"{type(self.nccl).__name__}")

    def ring(self, kind: str, ranks: int, size_bytes: float, bandwidth_Bps: float,
             latency_s: float) -> float:
        if self.engine == "des" and ranks > 1 and size_bytes > 0:
            return _des_ring(kind, ranks, float(size_bytes), bandwidth_Bps, latency_s)
        return ring_collective_time(kind, ranks, size_bytes, bandwidth_Bps, latency_s)

    @classmethod
    def of(cls, system: System, *, engine: str = "analytic",
           all_to_all_efficiency: float = ALL_TO_ALL_EFFICIENCY,
           nccl: NcclLatency | None = NCCL_SIMPLE) -> Fabric:
        """The fabric of a node file: the NVSwitch port inside a node, the GPU's NIC across
        nodes, both at ``system.network_efficiency`` of their wire rate (the fabric preset's
        one fitted factor); an all-to-all at ``all_to_all_efficiency`` of the wire rate;
        ``nccl``: NCCL's latency for groups spanning nodes (None: the links')."""
        if system.boards != 1:
            raise InputError(f"system {system.name!r}: the two-tier fabric is a node file's "
                             f"(boards = 1), got boards = {system.boards} (time a multi-board "
                             "topology with `accelsim collective --topology`)")
        if system.inter_board_link is None:
            raise InputError(f"system {system.name!r}: no inter_board link (the per-GPU NIC) "
                             "to reach other nodes")
        a2a = all_to_all_efficiency
        if isinstance(a2a, bool) or not isinstance(a2a, int | float) or not 0 < a2a <= 1:
            raise InputError(f"all_to_all_efficiency must be in (0, 1], got {a2a!r}")
        e = system.network_efficiency
        ln, ib = system.link, system.inter_board_link
        return cls(gpus_per_node=system.chips,
                   intra_Bps=ln.bandwidth_Bps * ln.links_per_chip * e,
                   intra_latency_s=ln.latency_s,
                   inter_Bps=ib.bandwidth_Bps * ib.links_per_chip * e,
                   inter_latency_s=ib.latency_s, engine=engine,
                   a2a_scale=a2a / e, nccl=nccl)

    def split(self, size: int, stride: int) -> tuple[int, int]:
        """(members per node, nodes) of a group of ``size`` ranks spaced ``stride`` apart."""
        n = self.gpus_per_node
        if stride % n and n % stride:
            raise InputError(f"stride {stride}: ranks that far apart do not tile {n}-GPU nodes "
                             f"(give a divisor or a multiple of {n})")
        if stride >= n:
            return 1, size
        per_node = min(size, max(1, n // stride))
        return per_node, -(-size // per_node)

    def collective_s(self, kind: str, size_bytes: float, ranks: int, stride: int) -> float:
        """Time of one ring collective (nccl-tests ``size`` = the whole buffer) in a group.
        A group spanning nodes with :attr:`nccl` set: the tiers' bandwidth terms plus NCCL's
        latency, the cheaper of ring and tree for an all-reduce (NCCL's tuner)."""
        if ranks <= 1 or size_bytes <= 0:
            return 0.0
        kin, kout = self.split(ranks, stride)
        if kout == 1:
            return self.ring(kind, kin, size_bytes, self.intra_Bps, self.intra_latency_s)
        if self.nccl is None:
            return self._tiers(kind, size_bytes, kin, kout, self.intra_latency_s,
                               self.inter_latency_s)
        bw = self._tiers(kind, size_bytes, kin, kout, 0.0, 0.0)
        t = bw + self.nccl.ring_s(kind, kin * kout, kout)
        if kind == "all-reduce":
            t = min(t, bw / TREE_BANDWIDTH_FACTOR + self.nccl.tree_allreduce_s(kin * kout, kout))
        return t

    def _tiers(self, kind: str, size_bytes: float, kin: int, kout: int, intra_lat: float,
               inter_lat: float) -> float:
        """A group of ``kout`` > 1 nodes, ``kin`` ranks each: one ring across nodes, or
        hierarchical (node-level reduce-scatter, rail-level collective on 1/kin, node
        all-gather), each ring step at the given latencies."""
        intra = (self.intra_Bps, intra_lat)
        inter = (self.inter_Bps, inter_lat)
        if kin == 1:
            return self.ring(kind, kout, size_bytes, *inter)
        if kind == "all-reduce":
            return (self.ring("reduce-scatter", kin, size_bytes, *intra)
                    + self.ring("all-reduce", kout, size_bytes / kin, *inter)
                    + self.ring("all-gather", kin, size_bytes, *intra))
        return (self.ring(kind, kin, size_bytes, *intra)
                + self.ring(kind, kout, size_bytes / kin, *inter))

    def all_to_all_s(self, size_bytes: float, ranks: int, stride: int,
                     inter_fraction: float = 1.0) -> float:
        """Time of one all-to-all of ``size_bytes`` per GPU in a group of ``ranks`` spaced
        ``stride`` apart: pairwise inside each node, then across nodes on the NICs
        (:func:`accelsim.netsim.alltoall.two_tier_plan`, closed form); the cross-node level
        carries ``inter_fraction`` of its pairwise share (a dispatch that sends each token once
        per node, not once per expert)."""
        if ranks <= 1 or size_bytes <= 0:
            return 0.0
        from accelsim.netsim import alltoall

        kin, kout = self.split(ranks, stride)
        pl = alltoall.two_tier_plan(kin, kout, intra_Bps=self.intra_Bps * self.a2a_scale,
                                    inter_Bps=self.inter_Bps * self.a2a_scale,
                                    intra_latency_s=self.intra_latency_s,
                                    inter_latency_s=self.inter_latency_s)
        if inter_fraction == 1.0 or kout == 1:
            return alltoall.analytic_time(pl, size_bytes).time_s
        per = size_bytes / pl.streams
        intra, inter = pl.levels if kin > 1 else ((), pl.levels[0])
        t = inter.time_s(per * inter_fraction)
        return t + (intra.time_s(per) if kin > 1 else 0.0)

    def nodes_of(self, ranks: int, stride: int) -> int:
        """Nodes a group of ``ranks`` spaced ``stride`` apart spans."""
        return self.split(ranks, stride)[1]

    def p2p_s(self, nbytes: float, across_nodes: bool) -> float:
        if nbytes <= 0:
            return 0.0
        if across_nodes:
            return self.inter_latency_s + nbytes / self.inter_Bps
        return self.intra_latency_s + nbytes / self.intra_Bps


def collective_time_s(system: System, kind: str, size_bytes: float, ranks: int | None = None,
                      stride: int = 1, *, engine: str = "analytic") -> float:
    """Seconds of one collective (``kind``: reduce-scatter, all-gather, all-reduce,
    all-to-all; ``size_bytes`` the whole buffer, nccl-tests' size) among ``ranks`` GPUs
    ``stride`` apart (default: every GPU of one node) on ``system``'s fabric: what ``accelsim
    collective --system`` prints and every front-end's communication rows use."""
    fab = Fabric.of(system, engine=engine)
    n = system.chips if ranks is None else ranks
    for name, v in (("ranks", n), ("stride", stride)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise InputError(f"collective_time_s: {name} must be an integer >= 1, got {v!r}")
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int | float) \
            or not math.isfinite(size_bytes) or size_bytes < 0:
        raise InputError(f"collective_time_s: size_bytes must be a finite number >= 0, got "
                         f"{size_bytes!r}")
    if kind == "all-to-all":
        return fab.all_to_all_s(size_bytes, n, stride)
    if kind not in ("reduce-scatter", "all-gather", "all-reduce"):
        raise InputError(f"unknown collective {kind!r}; known: reduce-scatter, all-gather, "
                         "all-reduce, all-to-all")
    return fab.collective_s(kind, size_bytes, n, stride)
