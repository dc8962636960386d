"""The default DES agrees with the closed form on every topology and every collective (issue 20
item 8: a switch forwards cut-through), and all-to-all against oracles nobody here wrote.

Oracles: the all-to-all bandwidth terms of the literature -- (p-1)/p N/B through a
non-blocking switch (pairwise exchange, Thakur, Rabenseifner & Gropp, IJHPCA 2005; nccl-tests'
alltoall bus bandwidth = algbw (p-1)/p, PERFORMANCE.md) and the per-link load of a
bidirectional ring, N p/8 (p even) or N (p^2-1)/(8p) (p odd) per link direction (every block
on its shorter way round) -- and an independent DES run of every message at once.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from accelsim.cli import main as cli
from accelsim.netsim import alltoall as A
from accelsim.netsim import symmetric as S
from accelsim.netsim.alltoallv import all_to_all_v_time
from accelsim.netsim import topology as T
from accelsim.ring import bus_factor

OPS = ("reduce-scatter", "all-gather", "all-reduce", "all-to-all")
# every topology the CLI names, at moderate sizes; 2-D tori square and oblong
TOPOLOGIES = [("ring", 7), ("ring", 8), ("torus-2d", 16), ("torus-2d", 20),
              ("fully-connected", 6), ("switch", 8), ("switch", 13), ("dgx1", None),
              ("hfp8-64", None), ("multi-board", 24)]


def _time(name, chips, op, engine):
    spec = T.resolve(name, chips, bandwidth_Bps=None if name in ("dgx1", "hfp8-64",
                                                                 "multi-board") else 50e9,
                     latency_s=7e-7,  # only topologies of boards take an inter-board link
                     inter_board_Bps=20e9 if name in T.BOARD_KINDS else None)
    if op == "all-to-all":
        return A.time_all_to_all(A.plan_for(spec), 3e8, engine, alpha_s=2e-7)
    return S.time_collective(S.plan_for(spec), op, 150_000_001, 2, engine, alpha_s=2e-7,
                             reduce_Bps=400e9 if op != "all-gather" else None)


@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("name,chips", TOPOLOGIES, ids=lambda x: str(x))
def test_default_des_agrees_with_closed_form(name, chips, op):
    a, d = _time(name, chips, op, "analytic"), _time(name, chips, op, "des")
    assert a.algorithm == d.algorithm and a.chips == d.chips
    assert d.time_s == pytest.approx(a.time_s, rel=0.01), (a.algorithm, d.time_s / a.time_s)


def test_issue_switch_all_gather_and_all_to_all():
    """The issue's cases: 8 GPUs on a 450 GB/s switch, 1 GB (DES was 2.0x on all-gather)."""
    spec = T.resolve("switch", 8, bandwidth_Bps=450e9)
    for op in ("all-gather", "all-to-all"):
        if op == "all-to-all":
            a, d = (A.time_all_to_all(A.plan_for(spec), 1e9, e) for e in ("analytic", "des"))
        else:
            a, d = (S.time_collective(S.plan_for(spec), op, 10 ** 9, 1, e)
                    for e in ("analytic", "des"))
        assert a.time_s == pytest.approx(7 / 8 * 1e9 / 450e9, rel=1e-12)
        assert d.time_s == pytest.approx(a.time_s, rel=0.01)
        assert a.bus_bandwidth_GBps == pytest.approx(450.0, rel=1e-12)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 8, 11, 16])
def test_ring_all_to_all_is_the_link_load_bound(p):
    n, bw = 1e9, 10e9
    t = A.time_all_to_all(A.plan("ring", p, bandwidth_Bps=bw, latency_s=0.0), n).time_s
    if p == 2:
        load = Fraction(1, 2)  # one link: the other rank's half
    elif p % 2:
        load = Fraction(p * p - 1, 8 * p)
    else:
        load = Fraction(p, 8)
    assert t == pytest.approx(float(load) * n / bw, rel=1e-12)
    # latency: one step per hop of the longest shortest path
    t1 = A.time_all_to_all(A.plan("ring", p, bandwidth_Bps=bw, latency_s=1e-6), n).time_s
    assert t1 - t == pytest.approx(max(1, p // 2) * 1e-6, rel=1e-9)


def test_square_torus_all_to_all_meets_the_per_dimension_bound():
    # both dimension orders at once: each dimension's links carry N x side / 8 per direction
    for q in (4, 6):
        t = A.time_all_to_all(A.plan("torus-2d", q * q, bandwidth_Bps=1e9, latency_s=0.0),
                              1e9).time_s
        assert t == pytest.approx(q / 8 * 1e9 / 1e9, rel=1e-12)


def test_two_tier_all_to_all():
    """Nodes of an NVSwitch, a NIC per GPU: pairwise inside, then pairwise across nodes."""
    pl = A.two_tier_plan(8, 4, intra_Bps=450e9, inter_Bps=50e9)
    t = A.time_all_to_all(pl, 1e9).time_s
    assert t == pytest.approx(7 / 8 * 1e9 / 450e9 + 3 / 4 * 1e9 / 50e9, rel=1e-12)
    assert A.time_all_to_all(pl, 1e9, "des").time_s == pytest.approx(t, rel=1e-9)
    assert A.two_tier_plan(8, 1, intra_Bps=1e9, inter_Bps=1e9).levels[0].p == 8
    # latencies are per message (GPU to GPU): one per pairwise step
    lat = A.two_tier_plan(8, 4, intra_Bps=450e9, inter_Bps=50e9, intra_latency_s=1e-6,
                          inter_latency_s=2e-6)
    assert A.time_all_to_all(lat, 1e9).time_s == pytest.approx(t + 7e-6 + 3 * 2e-6, rel=1e-12)


def test_all_to_all_v():
    spec = T.resolve("switch", 8, bandwidth_Bps=450e9, latency_s=1e-6)
    p = 8
    # uniform: every message at once (no pairwise steps) lands on the pairwise bandwidth term
    u = np.full((p, p), 1e9 / p)
    a = all_to_all_v_time(spec, u)
    assert a.time_s == pytest.approx(2e-6 + 7 / 8 * 1e9 / 450e9, rel=1e-12)
    assert all_to_all_v_time(spec, u, "des").time_s == pytest.approx(a.time_s, rel=0.01)
    # skewed (MoE-like) routing: closed form = the busiest port; an unscheduled DES is at
    # or a little above that bound
    rng = np.random.default_rng(7)
    for _ in range(3):
        m = rng.gamma(0.5, 1e6, size=(p, p))
        off = m - np.diag(np.diag(m))
        a = all_to_all_v_time(spec, m)
        bound = max(off.sum(1).max(), off.sum(0).max()) / 450e9 + 2e-6
        assert a.time_s == pytest.approx(bound, rel=1e-12)
        d = all_to_all_v_time(spec, m, "des").time_s
        assert a.time_s * (1 - 1e-9) <= d <= 1.05 * a.time_s
    fc = T.resolve("fully-connected", 4, bandwidth_Bps=1e9)
    m = np.arange(16.0).reshape(4, 4) * 1e6
    assert all_to_all_v_time(fc, m).time_s == pytest.approx(14e6 / 1e9, rel=1e-12)
    assert all_to_all_v_time(fc, m, "des").time_s == pytest.approx(14e6 / 1e9, rel=1e-9)
    with pytest.raises(ValueError, match="8 x 8 byte matrix"):
        all_to_all_v_time(spec, np.ones((3, 3)))
    with pytest.raises(ValueError, match="switch and fully-connected"):
        all_to_all_v_time(T.resolve("ring", 8, bandwidth_Bps=1e9), np.ones((8, 8)))


def test_bus_factor_is_exact():
    for kind, f in (("reduce-scatter", 1), ("all-gather", 1), ("all-reduce", 2),
                    ("all-to-all", 1)):
        for p in (1, 2, 3, 7, 8, 1000):
            want = Fraction(f * (p - 1), p) if p > 1 else Fraction(0)
            assert bus_factor(kind, p) == pytest.approx(float(want), rel=1e-15)
    assert np.allclose(bus_factor("all_reduce", np.array([1, 2, 4])), [0.0, 1.0, 1.5])
    with pytest.raises(ValueError, match="unknown collective"):
        bus_factor("broadcast", 4)


def test_cli_all_to_all(capsys):
    assert cli(["collective", "--topology", "switch", "--chips", "8", "--op", "all-to-all",
                "--bytes", "1000000000", "--link-GBps", "450", "--engine", "both",
                "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] == pytest.approx(7 / 8 * 1e9 / 450e9, rel=1e-12)
    assert out["des_vs_analytic"] == pytest.approx(1.0, rel=0.01)
    assert cli(["collective", "--topology", "torus-2d", "--chips", "16", "--op", "all-to-all",
                "--bytes", "1000000", "--link-GBps", "1", "--mode", "explicit", "--engine",
                "both", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["time_s"] == pytest.approx(4 / 8 * 1e6 / 1e9, rel=1e-12)  # N side/8, both orders
    assert out["des_vs_analytic"] == pytest.approx(1.0, rel=1e-9)
    assert out["mode"] == "explicit" and out["transfers"] == 2 * 2 * 16 * 2 * 2


def _graphs():
    return [T.ring(2, 3e9, 1e-6), T.ring(7, 3e9, 1e-6), T.ring(8, 3e9, 1e-6),
            T.switch(8, 450e9, 1e-6), T.fully_connected(6, 3e9, 5e-7), T.dgx1(),
            T.multi_board(2, 25e9, 10e9), T.hfp8_64(25e9, 12e9), T.torus2d(3, 3, 3e9, 1e-6),
            T.torus2d(4, 4, 3e9, 1e-6), T.torus2d(4, 5, 3e9, 1e-6)]


@pytest.mark.parametrize("g", _graphs(), ids=lambda g: g.graph["name"])
def test_all_to_all_symmetric_equals_explicit(g):
    """Every transfer on the real links (the reference) against the closed form and the
    one-rank DES: the symmetry the plan assumes holds (no two flows share a link lane)."""
    from accelsim.netsim.analytic import analytic_time
    from accelsim.netsim.des import simulate

    pl = A.graph_plan(g)
    s = A.explicit_schedule(g, 1e8)
    assert (s.n_transfers, s.n_steps) == (pl.transfers, pl.steps)
    ca = A.analytic_time(pl, 1e8, alpha_s=1e-7).time_s
    assert analytic_time(s, alpha_s=1e-7).time_s == pytest.approx(ca, rel=1e-12)
    ed = simulate(s, alpha_s=1e-7).time_s
    assert ed == pytest.approx(ca, rel=1e-12)
    assert A.des_time(pl, 1e8, alpha_s=1e-7).time_s == pytest.approx(ed, rel=1e-12)


@pytest.mark.parametrize("g", [T.ring(p, 1e9) for p in (2, 3, 4, 5, 8, 9)]
                         + [T.torus2d(r, c, 1e9) for r, c in ((3, 3), (4, 4), (4, 5), (3, 6))]
                         + [T.switch(6, 1e9), T.fully_connected(5, 1e9)],
                         ids=lambda g: g.graph["name"])
def test_all_to_all_moves_every_block_along_a_shortest_path(g):
    """Conservation oracle (networkx shortest paths): the bytes x hops of the explicit schedule
    equal N/p x the shortest-path distance summed over every (source, destination) pair, so
    every block travels, and none the long way round."""
    import networkx as nx

    n = 1e6
    s = A.explicit_schedule(g, n)
    byte_hops = float((s.nbytes * np.diff(s.route_ptr)).sum())
    chips = T.chips(g)
    dist = dict(nx.all_pairs_shortest_path_length(g))
    want = sum(n / len(chips) * dist[a][b] for a in chips for b in chips if a != b)
    assert byte_hops == pytest.approx(want, rel=1e-12)


@pytest.mark.parametrize("name,chips", TOPOLOGIES, ids=lambda x: str(x))
def test_all_to_all_plan_from_spec_equals_plan_from_graph(name, chips):
    spec = T.resolve(name, chips, bandwidth_Bps=None if name in ("dgx1", "hfp8-64",
                                                                 "multi-board") else 5e9,
                     latency_s=3e-7)
    assert A.plan_for(spec) == A.graph_plan(T.generate(spec))


@pytest.mark.parametrize("algorithm,p,cycles", [("ring", q, c) for q in (2, 3, 4, 7, 8, 13)
                                                for c in (1, 3)]
                         + [("pairwise", 9, 1), ("direct", 5, 1)])
def test_all_to_all_level_closed_sums(algorithm, p, cycles):
    lv = A.AllToAllLevel(algorithm, p, 1, ((1e9, 1e-6),), cycles)
    fr = lv.step_fractions()
    assert len(fr) == lv.n_steps
    assert sum(fr) == pytest.approx(lv.load_fraction, rel=1e-12)


def test_collective_time_api_takes_all_to_all():
    from accelsim.netsim import collective_time

    g = T.torus2d(4, 5, 2e9, 1e-6)
    sym = collective_time(g, "all-to-all", 10 ** 6, 2, "des")
    exp = collective_time(g, "all-to-all", 10 ** 6, 2, "analytic", mode="explicit")
    assert sym.time_s == pytest.approx(exp.time_s, rel=1e-12) and sym.op == "all-to-all"
    pl = A.plan("switch", 8, bandwidth_Bps=450e9)
    assert collective_time(pl, "all-to-all", 10 ** 9).time_s == pytest.approx(7 / 8 / 450,
                                                                               rel=1e-12)
    with pytest.raises(ValueError, match="AllToAllPlan"):
        collective_time(pl, "all-reduce", 10 ** 9)
    with pytest.raises(ValueError, match="RingPlan"):
        collective_time(S.plan("ring", 4, bandwidth_Bps=1e9), "all-to-all", 10 ** 9)
