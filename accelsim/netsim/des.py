"""Discrete-event simulation (simpy) of an explicit collective schedule.

Each directional link lane is a FIFO server with its own bandwidth and latency: a packet holds
the link for ``bytes / bandwidth`` and arrives ``latency`` later (store-and-forward per hop on
multi-hop routes).  A transfer is cut into packets of ``packet_bytes`` (default: the whole
transfer is one packet) and injects its next packet when the previous one has left the first
link, so transfers sharing a link interleave packet by packet (fair sharing) -- that is where
contention shows.  A transfer may start when all its dependencies have arrived (plus, when its
receiver reduces, the reduction time ``nbytes / reduce_Bps``) and a per-transfer software
overhead ``alpha_s``.

On a contention-free schedule of single-hop transfers this reproduces the analytic
step-synchronous model exactly (up to float rounding); with contention or multi-hop routes it
differs, which is the point.  Deterministic: no randomness, FIFO ties broken by creation order
(simpy's event queue is ordered by time, priority and insertion id).

Coarsening: events scale with packets x hops, so ``packet_bytes`` trades fidelity of the
packet-level interleaving for speed; ``benchmarks/bench_netsim.py`` shows the error.  The
packet count is checked before anything is simulated (``max_packets``).

This engine runs any schedule; :mod:`accelsim.netsim.symmetric` hands it a representative one
(one chain per ring class) for the symmetric collectives, the explicit schedule stays its
reference.
"""

from __future__ import annotations

import time
from collections import deque

import numpy as np

from accelsim.netsim.analytic import CollectiveTime, check_overhead, check_rate
from accelsim.netsim.limits import MAX_PACKETS, check_limit
from accelsim.netsim.schedule import Schedule


class _Link:
    __slots__ = ("bw", "lat", "busy", "queue")

    def __init__(self, bw: float, lat: float):
        self.bw = bw
        self.lat = lat
        self.busy = False
        self.queue: deque = deque()


def packets_per_transfer(s: Schedule, packet_bytes: float | None) -> np.ndarray:
    """How many packets each transfer of ``s`` is cut into (at least one)."""
    check_rate("packet_bytes", packet_bytes)
    if packet_bytes is None:
        return np.ones(s.n_transfers, np.int64)
    with np.errstate(over="ignore"):
        n = np.ceil(s.nbytes / packet_bytes)
    return np.maximum(1, np.minimum(n, 2.0**62)).astype(np.int64)


def simulate(s: Schedule, *, alpha_s: float = 0.0, reduce_Bps: float | None = None,
             packet_bytes: float | None = None, env=None,
             max_packets: int | None = MAX_PACKETS) -> CollectiveTime:
    """Run ``s`` in a simpy environment (a fresh one unless ``env`` is given) and return the
    time at which the last transfer (and its reduction) completes.  Refuses
    (:class:`~accelsim.netsim.limits.SizeLimitError`) runs of more than ``max_packets``
    packets before simulating anything."""
    check_overhead("alpha_s", alpha_s)
    check_rate("reduce_Bps", reduce_Bps)
    npk_arr = packets_per_transfer(s, packet_bytes)
    check_limit(f"the DES of this {s.op} ({s.n_transfers:,} transfers)",
                int(npk_arr.sum(dtype=np.float64)), max_packets, "packets", "max_packets",
                "larger packets (packet_bytes) cost fewer")
    import simpy

    wall0 = time.perf_counter()
    env = simpy.Environment() if env is None else env
    t0 = env.now
    n = s.n_transfers
    nbytes = s.nbytes.tolist()
    reduce = s.reduce.tolist()
    rptr = s.route_ptr.tolist()
    route = s.route.tolist()
    pending = np.diff(s.dep_ptr).tolist()
    owner = np.repeat(np.arange(n, dtype=np.int64), np.diff(s.dep_ptr))
    order = np.argsort(s.deps, kind="stable")
    dependents_flat = owner[order].tolist()
    dptr = np.concatenate([[0], np.cumsum(np.bincount(s.deps, minlength=n))]).tolist()
    npk = npk_arr.tolist()
    sent = [0] * n
    arrived = [0] * n
    links: dict[int, _Link] = {}
    bw_all, lat_all = s.link_bandwidth_Bps, s.link_latency_s
    for lid in set(route):
        links[lid] = _Link(float(bw_all[lid]), float(lat_all[lid]))
    counter = [0]  # simulated events
    timeout = env.timeout

    def enqueue(link: _Link, pkt) -> None:
        if link.busy:
            link.queue.append(pkt)
        else:
            transmit(link, pkt)

    def transmit(link: _Link, pkt) -> None:
        link.busy = True
        counter[0] += 1
        ev = timeout(pkt[3] / link.bw, (link, pkt))
        ev.callbacks.append(tx_done)

    def tx_done(ev) -> None:
        link, pkt = ev.value
        if link.queue:
            transmit(link, link.queue.popleft())
        else:
            link.busy = False
        t, i, hop, size = pkt
        if hop == 0 and sent[t] < npk[t]:
            inject(t)
        if link.lat > 0:
            counter[0] += 1
            e2 = timeout(link.lat, pkt)
            e2.callbacks.append(arrive_ev)
        else:
            arrive(pkt)

    def arrive_ev(ev) -> None:
        arrive(ev.value)

    def arrive(pkt) -> None:
        t, i, hop, size = pkt
        hop += 1
        if rptr[t] + hop < rptr[t + 1]:
            enqueue(links[route[rptr[t] + hop]], (t, i, hop, size))
            return
        arrived[t] += 1
        if arrived[t] == npk[t]:
            if reduce_Bps is not None and reduce[t]:
                counter[0] += 1
                e3 = timeout(nbytes[t] / reduce_Bps, t)
                e3.callbacks.append(done_ev)
            else:
                done(t)

    def done_ev(ev) -> None:
        done(ev.value)

    def done(t: int) -> None:
        for k in range(dptr[t], dptr[t + 1]):
            d = dependents_flat[k]
            pending[d] -= 1
            if pending[d] == 0:
                start(d)

    def start_ev(ev) -> None:
        inject(ev.value)

    def start(t: int) -> None:
        if alpha_s > 0:
            counter[0] += 1
            e4 = timeout(alpha_s, t)
            e4.callbacks.append(start_ev)
        else:
            inject(t)

    def inject(t: int) -> None:
        i = sent[t]
        sent[t] = i + 1
        enqueue(links[route[rptr[t]]], (t, i, 0, nbytes[t] / npk[t]))  # equal packets

    for t in range(n):
        if pending[t] == 0:
            start(t)
    env.run()
    if any(a != k for a, k in zip(arrived, npk)):  # pragma: no cover - a dependency cycle
        raise ValueError("schedule did not complete: dependency cycle or unreachable transfer")
    return CollectiveTime(op=s.op, engine="des", time_s=float(env.now - t0),
                          payload_bytes=s.payload_bytes, padded_bytes=s.padded_bytes, chips=s.p,
                          algorithm=s.algorithm, steps=s.n_steps, transfers=n,
                          events=counter[0], wall_s=time.perf_counter() - wall0)
