"""Collective schedules and the two timing engines.

Oracles nobody here wrote: set semantics of reduce-scatter / all-gather (every owner ends with
the contributions of all chips), the textbook ring formula (p-1)(alpha + N/(k p B)), the
bandwidth lower bound (p-1)/p x N/B, and NVIDIA's DGX-1 ring ceiling of 6 x 25 GB/s.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time, ring_time_closed_form
from accelsim.netsim.des import simulate
from accelsim.netsim.schedule import (
    best_schedule,
    directional_rings,
    from_transfers,
    hierarchical_schedule,
    ring_schedule,
)

OPS = ("reduce-scatter", "all-gather", "all-reduce")


def flat_graphs():
    return [T.ring(2, 10e9, 1e-6), T.ring(7, 10e9, 1e-6), T.dgx1(),
            T.fully_connected(5, 8e9, 2e-7), T.torus2d(4, 4, 10e9, 5e-7),
            T.switch(6, 10e9, 1e-6)]


# ----------------------------------------------------------------------- semantics oracle

def check_semantics(s, chips_of_board=None):
    """Replay the schedule on contributor sets in dependency order and check the result.

    reduce-scatter: the receiver of the last transfer of each (ring, chunk) holds all chips.
    all-gather: every chip has received every (ring, chunk) that it did not own at the start.
    """
    order = np.arange(s.n_transfers)  # ids are created after their dependencies
    for t in order:
        deps = s.deps[s.dep_ptr[t]:s.dep_ptr[t + 1]]
        assert (deps < t).all()
    have: dict = {}
    owners_rs = {}
    for t in order:
        src, dst, key = int(s.src[t]), int(s.dst[t]), (int(s.ring[t]), int(s.chunk[t]))
        if s.reduce[t]:
            if not have.get((src, key)):
                have[(src, key)] = {src} if chips_of_board is None else None
            if have[(src, key)] is None:  # second level: seed with the chip's first-level result
                have[(src, key)] = set(chips_of_board(src))
            cur = have.get((dst, key))
            if cur is None:
                cur = {dst} if chips_of_board is None else set(chips_of_board(dst))
            have[(dst, key)] = cur | have[(src, key)]
            owners_rs[key] = dst
        else:
            have.setdefault(("ag", dst), set()).add(key)
    return have, owners_rs


@pytest.mark.parametrize("g", flat_graphs(), ids=lambda g: g.graph["name"])
def test_ring_reduce_scatter_semantics(g):
    s = ring_schedule(g, "reduce-scatter", 10_000, 2)
    have, owners = check_semantics(s)
    k = len(directional_rings(g))
    assert len(owners) == k * s.p  # every segment of every ring has one final owner
    for key, dst in owners.items():
        assert have[(dst, key)] == set(range(s.p))
    # each chip owns exactly k segments: the reduce-scatter output is spread evenly
    assert sorted(np.bincount(list(owners.values()), minlength=s.p)) == [k] * s.p


@pytest.mark.parametrize("g", flat_graphs(), ids=lambda g: g.graph["name"])
def test_ring_all_gather_semantics(g):
    s = ring_schedule(g, "all-gather", 10_000, 1)
    have, _ = check_semantics(s)
    k = len(directional_rings(g))
    for c in range(s.p):
        assert len(have[("ag", c)]) == k * (s.p - 1)  # all segments but its own, per ring


@pytest.mark.parametrize("boards", [2, 8])
def test_hierarchical_reduce_scatter_semantics(boards):
    g = T.multi_board(boards, 25e9)
    s = hierarchical_schedule(g, "reduce-scatter", 48 * 16 * boards, 2)
    first = s.step < 7
    # level 1: within each board, owners hold the whole board
    have1, own1 = check_semantics(_subset(s, first))
    for key, dst in own1.items():
        assert have1[(dst, key)] == {8 * (dst // 8) + i for i in range(8)}
    # level 2 seeded with level-1 results: owners hold all chips of the system
    have2, own2 = check_semantics(_subset(s, ~first), chips_of_board=lambda c: range(
        8 * (c // 8), 8 * (c // 8) + 8))
    assert len(own2) == 8 * len(directional_rings(T.ring(boards, 1.0))) * boards
    for key, dst in own2.items():
        assert have2[(dst, key)] == set(range(8 * boards))


def _subset(s, mask):
    import dataclasses
    return dataclasses.replace(s, step=s.step[mask], src=s.src[mask], dst=s.dst[mask],
                               nbytes=s.nbytes[mask], reduce=s.reduce[mask], ring=s.ring[mask],
                               chunk=s.chunk[mask], dep_ptr=np.zeros(mask.sum() + 1, np.int64),
                               deps=np.zeros(0, np.int32),
                               route_ptr=np.arange(mask.sum() + 1), route=np.zeros(mask.sum(),
                                                                                    np.int32))


# ---------------------------------------------------------------------- engines agree

@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("g", flat_graphs() + [T.hfp8_64(32e9, 16e9)],
                         ids=lambda g: g.graph["name"])
def test_des_equals_analytic_contention_free(g, op):
    s = best_schedule(g, op, 96_000, 2)
    kw = dict(alpha_s=3e-7, reduce_Bps=200e9)
    a = analytic_time(s, **kw)
    # switch routes are two hops, forwarded cut-through: whole-transfer packets are exact too
    d = simulate(s, **kw)
    assert d.time_s == pytest.approx(a.time_s, rel=1e-9)


def _via_switch(bw_up, bw_down, lat_up, lat_down):
    import networkx as nx
    g = nx.Graph(name="two-chip-switch", topology="switch")
    g.add_nodes_from([0, 1, 2], kind="chip")
    g.add_node("sw", kind="switch")
    for c, bw, lat in ((0, bw_up, lat_up), (1, bw_down, lat_down), (2, bw_up, lat_up)):
        g.add_edge(c, "sw", bandwidth_Bps=bw, latency_s=lat, multiplicity=1)
    return g


@pytest.mark.parametrize("bw_up,bw_down", [(10e9, 10e9), (10e9, 4e9), (4e9, 10e9)])
def test_switch_forwards_cut_through(bw_up, bw_down):
    """Hand-derived virtual cut-through: one message of S bytes through a switch arrives after
    both latencies plus ONE serialisation at the slower link; store-and-forward pays one per
    hop; two senders into one output port take turns on it."""
    S, l1, l2 = 3e6, 2e-6, 5e-7
    g = _via_switch(bw_up, bw_down, l1, l2)
    one = [dict(step=0, src=0, dst=1, nbytes=S, route=[(0, "sw"), ("sw", 1)])]
    s = from_transfers(g, "all-gather", one, S)
    assert simulate(s).time_s == pytest.approx(l1 + l2 + S / min(bw_up, bw_down), rel=1e-12)
    assert simulate(s, cut_through=False).time_s == pytest.approx(
        l1 + S / bw_up + l2 + S / bw_down, rel=1e-12)
    # packets pipeline store-and-forward towards the cut-through time
    assert simulate(s, cut_through=False, packet_bytes=S / 1000).time_s == pytest.approx(
        l1 + l2 + S / min(bw_up, bw_down), rel=2e-3)
    two = one + [dict(step=0, src=2, dst=1, nbytes=S, route=[(2, "sw"), ("sw", 1)])]
    d = simulate(from_transfers(g, "all-gather", two, S)).time_s
    # the first message holds the output port until its tail is through (at the slower
    # rate), then the second one streams behind it
    assert d == pytest.approx(l1 + max(S / bw_up, S / bw_down) + S / bw_down + l2, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(p=st.integers(2, 12), m=st.integers(1, 50), bw=st.floats(1e8, 1e11),
       lat=st.floats(0, 1e-5), op=st.sampled_from(OPS), packets=st.integers(1, 4))
def test_ring_matches_textbook_formula(p, m, bw, lat, op, packets):
    g = T.ring(p, bw, lat)
    k = 1 if p == 2 else 2
    n = k * p * m
    s = ring_schedule(g, op, n, 4)
    expect = ring_time_closed_form(p, n * 4, k, bw, lat, op)
    if op == "all-gather":
        expect = ring_time_closed_form(p, n * 4, k, bw, lat, "reduce-scatter")
    a = analytic_time(s)
    d = simulate(s, packet_bytes=n * 4 / (k * p) / packets)
    assert a.time_s == pytest.approx(expect, rel=1e-9)
    assert d.time_s == pytest.approx(expect, rel=1e-9)


@pytest.mark.parametrize("p", [4, 16, 64])
def test_ring_reduce_scatter_meets_lower_bound(p):
    # per-chip bandwidth B = 2 directional links x b; zero latency: exactly (p-1)/p N/B
    b = 12.5e9
    n = 2 * p * 1000
    t = analytic_time(ring_schedule(T.ring(p, b), "reduce-scatter", n, 2)).time_s
    assert t == pytest.approx((p - 1) / p * (2 * n) / (2 * b), rel=1e-12)
    # with latency the time exceeds the bound and approaches it as N grows
    ts = [analytic_time(ring_schedule(T.ring(p, b, 1e-6), "reduce-scatter", 2 * p * m, 2)).time_s
          / ((p - 1) / p * 4 * p * m / (2 * b)) for m in (10, 10_000, 10_000_000)]
    assert ts[0] > ts[1] > ts[2] > 1 and ts[2] < 1.001


@pytest.mark.parametrize("op", OPS)
def test_dgx1_ceiling_150GBps(op):
    g = T.dgx1()
    bus = []
    for n in (1_000, 1_000_000, 100_000_000, 2_000_000_000):
        r = analytic_time(best_schedule(g, op, n, 1))
        assert r.bus_bandwidth_GBps <= 150.0 + 1e-9
        bus.append(r.bus_bandwidth_GBps)
    assert bus == sorted(bus) and bus[-1] > 149.9


def test_bus_bandwidth_convention():
    g = T.ring(8, 10e9)
    rs = analytic_time(ring_schedule(g, "reduce-scatter", 1600, 1))
    ar = analytic_time(ring_schedule(g, "all-reduce", 1600, 1))
    assert rs.bus_bandwidth_GBps == pytest.approx(1600 / rs.time_s / 1e9 * 7 / 8)
    assert ar.bus_bandwidth_GBps == pytest.approx(1600 / ar.time_s / 1e9 * 2 * 7 / 8)
    assert ar.bus_bandwidth_GBps == pytest.approx(rs.bus_bandwidth_GBps)  # both 2 x 10 GB/s
    assert rs.bus_bandwidth_GBps == pytest.approx(20.0)


def test_contention_shows():
    g = T.ring(3, 1e9)
    one = [dict(step=0, src=0, dst=1, nbytes=1e6, route=[(0, 1)])]
    two = one + [dict(step=0, src=0, dst=1, nbytes=1e6, route=[(0, 1)])]
    t1 = analytic_time(from_transfers(g, "all-gather", one, 1e6)).time_s
    a2 = analytic_time(from_transfers(g, "all-gather", two, 2e6)).time_s
    d2 = simulate(from_transfers(g, "all-gather", two, 2e6), packet_bytes=1e4)
    assert t1 == pytest.approx(1e-3) and a2 == pytest.approx(2e-3)
    assert d2.time_s == pytest.approx(2e-3, rel=1e-9)
    # the two flows share the link packet by packet: neither finishes early
    # (multi-hop contention: 0->1->2 and 1->2 share link 1->2)
    three = [dict(step=0, src=0, dst=2, nbytes=1e6, route=[(0, 1), (1, 2)]),
             dict(step=0, src=1, dst=2, nbytes=1e6, route=[(1, 2)])]
    d3 = simulate(from_transfers(g, "all-gather", three, 2e6), packet_bytes=1e4)
    assert 2e-3 <= d3.time_s <= 2.02e-3


def test_des_deterministic():
    s = best_schedule(T.torus2d(3, 4, 7e9, 3e-7), "all-reduce", 12_345, 2)
    a = simulate(s, packet_bytes=100.0)
    b = simulate(s, packet_bytes=100.0)
    assert a.time_s == b.time_s and a.events == b.events


def test_bad_schedules_rejected():
    g = T.ring(4, 1e9)
    with pytest.raises(ValueError, match="missing link 0->2"):
        from_transfers(g, "all-gather", [dict(step=0, src=0, dst=2, nbytes=1, route=[(0, 2)])], 1)
    with pytest.raises(ValueError, match="missing link 0->1 lane 1"):
        from_transfers(g, "all-gather", [dict(step=0, src=0, dst=1, nbytes=1,
                                              route=[(0, 1, 1)])], 1)
    with pytest.raises(ValueError, match="does not lead"):
        from_transfers(g, "all-gather", [dict(step=0, src=0, dst=2, nbytes=1, route=[(0, 1)])], 1)
    with pytest.raises(ValueError, match="earlier transfers"):
        from_transfers(g, "all-gather", [dict(step=0, src=0, dst=1, nbytes=1, route=[(0, 1)],
                                              deps=[0])], 1)
    with pytest.raises(ValueError, match="unknown collective"):
        ring_schedule(g, "broadcast", 8)


def test_padding_rule():
    g = T.ring(4, 1e9)  # 2 directional rings x 4 chips: granule 8 elements
    with pytest.raises(ValueError, match="do not divide into 8 equal chunks"):
        ring_schedule(g, "reduce-scatter", 10, 2, pad=False)
    s = ring_schedule(g, "reduce-scatter", 10, 2)
    assert s.padded_bytes == 16 * 2 and s.payload_bytes == 20
    assert s.nbytes.sum() == pytest.approx(2 * 3 * 4 * 4)  # rings x steps x chips x 4-byte seg
    h = hierarchical_schedule(T.hfp8_64(), "reduce-scatter", 1, 1)
    assert h.padded_bytes == math.lcm(48, 128)
    with pytest.raises(ValueError, match="positive integer"):
        ring_schedule(g, "reduce-scatter", 0, 2)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 25), packet=st.sampled_from([None, 5e3]))
def test_des_respects_physical_bounds_on_random_schedules(seed, n, packet):
    """Any schedule, contended or not: the DES can neither beat the busiest link's total
    load nor the latency+serialisation of the longest dependency chain, and never takes longer
    than the sum of all activity (every packet's transmission and flight on every hop): the
    engine is work-conserving, so something is always moving until the end."""
    import networkx as nx

    rng = np.random.default_rng(seed)
    g = T.torus2d(3, 3, float(rng.uniform(1e8, 1e10)), float(rng.uniform(0, 1e-5)))
    trs = []
    for t in range(n):
        src, dst = (int(x) for x in rng.choice(9, 2, replace=False))
        path = nx.shortest_path(g, src, dst)
        deps = sorted({int(d) for d in rng.integers(0, t, size=min(t, 2))}) if t else []
        trs.append(dict(step=t, src=src, dst=dst, nbytes=float(rng.uniform(1e3, 1e5)),
                        route=list(zip(path[:-1], path[1:])), deps=deps))
    s = from_transfers(g, "all-gather", trs, sum(t["nbytes"] for t in trs))
    d = simulate(s, packet_bytes=packet).time_s
    bw = s.link_bandwidth_Bps[0]
    lat = s.link_latency_s[0]
    load = {}
    for tr in trs:
        for hop in tr["route"]:
            load[hop] = load.get(hop, 0.0) + tr["nbytes"]
    npk = [1 if packet is None else math.ceil(tr["nbytes"] / packet) for tr in trs]
    one = [len(tr["route"]) * (k * lat + tr["nbytes"] / bw) for tr, k in zip(trs, npk)]
    chain = [0.0] * n  # longest dependency chain, each transfer alone at full speed
    for t, tr in enumerate(trs):
        alone = len(tr["route"]) * lat + tr["nbytes"] / bw
        chain[t] = alone + max((chain[k] for k in tr["deps"]), default=0.0)
    assert d >= max(load.values()) / bw * (1 - 1e-9)
    assert d >= max(chain) * (1 - 1e-9)
    assert d <= sum(one) * (1 + 1e-9)
