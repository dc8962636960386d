"""All-to-all-v: uneven per-destination bytes (MoE dispatch and combine) on a switch or a
fully-connected system, every message at once.

Closed form: route latency + ``alpha_s`` + the most loaded link / its bandwidth (a switch
port's bytes in or out; a direct link's message), a bound a non-blocking crossbar schedule can
meet (Birkhoff-von Neumann decomposition).  DES: every message injected at time 0 on its
route, cut into packets that interleave on shared links (no global schedule), through the same
simpy engine as every collective (cut-through switch).  The uniform case is the all-to-all of
:mod:`accelsim.netsim.alltoall`.
"""

from __future__ import annotations

import time

import numpy as np

from accelsim.netsim import topology as topo
from accelsim.netsim.alltoall import packet_count
from accelsim.netsim.analytic import CollectiveTime, check_overhead, check_rate
from accelsim.netsim.limits import MAX_PACKETS, check_limit
from accelsim.netsim.schedule import Schedule


def _matrix(spec: topo.TopologySpec, matrix) -> np.ndarray:
    m = np.asarray(matrix, dtype=np.float64)
    p = spec.chips
    if m.shape != (p, p):
        raise ValueError(f"all-to-all-v needs a {p} x {p} byte matrix for {spec.name}, "
                         f"got shape {m.shape}")
    if not np.all(np.isfinite(m)) or np.any(m < 0):
        raise ValueError("all-to-all-v byte matrix entries must be finite and >= 0")
    m = m.copy()
    np.fill_diagonal(m, 0.0)  # a rank's block for itself stays local
    if not m.any():
        raise ValueError("all-to-all-v byte matrix sends nothing between ranks")
    return m


def all_to_all_v_time(spec: topo.TopologySpec, matrix, engine: str = "analytic", *,
                      alpha_s: float = 0.0, packet_bytes: float | None = None,
                      max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """All-to-all-v: ``matrix[i][j]`` bytes from rank i to rank j, every message at once, on a
    ``switch`` (through it) or ``fully-connected`` system.  Analytic: route latency +
    ``alpha_s`` + the most loaded link (a switch port's bytes in or out; a direct link's
    message) / its bandwidth, a lower bound that a crossbar schedule can meet.  DES: every
    message injected at time 0 on its route, cut into ``packet_bytes`` packets (default: 1/256
    of the largest message, at most ~200,000 packets) that interleave on shared links, with
    no global schedule: uniform matrices land within 0.5 % of the closed form, skewed (MoE-like)
    ones up to a few % above it (tests/test_netsim_agreement.py)."""
    from accelsim.netsim.des import simulate

    check_overhead("alpha_s", alpha_s)
    check_rate("packet_bytes", packet_bytes)
    if spec.kind not in ("switch", "fully-connected"):
        raise ValueError(f"all-to-all-v runs on switch and fully-connected topologies, not "
                         f"{spec.kind!r}")
    m = _matrix(spec, matrix)
    p, bw, lat = spec.chips, spec.bandwidth_Bps, spec.latency_s
    switch = spec.kind == "switch"
    load = max(m.sum(axis=1).max(), m.sum(axis=0).max()) if switch else m.max()
    steps = 1
    total = float(m.sum())
    src, dst = np.nonzero(m)
    pl_name = spec.name
    algorithm = "direct (all messages at once)"
    if engine == "analytic":
        t = (2 if switch else 1) * lat + alpha_s + load / bw
        return CollectiveTime(op="all-to-all-v", engine="analytic", time_s=t,
                              payload_bytes=total / p, padded_bytes=total / p, chips=p,
                              algorithm=algorithm, steps=steps, transfers=len(src),
                              mode="explicit")
    if engine != "des":
        raise ValueError(f"unknown engine {engine!r}; known: analytic, des")
    nbytes = m[src, dst]
    # default packets: 1/256 of the largest message, at most ~200,000 packets in all
    pk = (max(float(nbytes.max()) / 256, float(nbytes.sum()) / 200_000) if packet_bytes is None
          else packet_bytes)
    check_limit(f"the DES of this all-to-all-v on {pl_name}", packet_count(nbytes, pk),
                max_packets, "packets", "max_packets", "larger packets (packet_bytes) cost fewer")
    # links: switch: up i = 2i, down j = 2j+1; fully-connected: i->j = i*p + j
    if switch:
        links = tuple((a, b, 0) for i in range(p) for a, b in ((i, "switch"), ("switch", i)))
        route = np.stack([2 * src, 2 * dst + 1], axis=1).ravel()
        hops = 2
    else:
        links = tuple((i, j, 0) for i in range(p) for j in range(p))
        route = src * p + dst
        hops = 1
    n = len(src)
    s = Schedule(op="all-to-all", algorithm=algorithm, chips=tuple(range(p)),
                 payload_bytes=total / p, padded_bytes=total / p, links=links,
                 link_bandwidth_Bps=np.full(len(links), bw),
                 link_latency_s=np.full(len(links), lat),
                 step=np.zeros(n, np.int32), src=src.astype(np.int32), dst=dst.astype(np.int32),
                 nbytes=nbytes, reduce=np.zeros(n, bool), ring=np.zeros(n, np.int32),
                 chunk=np.zeros(n, np.int32),
                 route_ptr=(np.arange(n + 1) * hops).astype(np.int64),
                 route=route.astype(np.int32), dep_ptr=np.zeros(n + 1, np.int64),
                 deps=np.zeros(0, np.int32), notes="all-to-all-v")
    wall0 = time.perf_counter()
    d = simulate(s, alpha_s=alpha_s, packet_bytes=pk, max_packets=None)
    return CollectiveTime(op="all-to-all-v", engine="des", time_s=d.time_s,
                          payload_bytes=total / p, padded_bytes=total / p, chips=p,
                          algorithm=algorithm, steps=steps, transfers=n, events=d.events,
                          wall_s=time.perf_counter() - wall0, mode="explicit")
