"""2-D torus collectives run dimension-wise (issue 21 item 15).

Oracles: the dimension-decomposed ring cost of the collective literature -- each dimension's
bidirectional ring over its own links, the second dimension on the 1/p_1 share the first left
(Sack & Gropp, "Collective algorithms for multiported torus networks", ACM TOPC 2015;
Y. Lu, "Mapping collective algorithms to physical topologies", spicemonkey.github.io/
collective-comm, section 3) -- and set semantics replayed on the explicit schedule.
"""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.netsim import symmetric as S
from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time
from accelsim.netsim.schedule import best_schedule

OPS = ("reduce-scatter", "all-gather", "all-reduce")


def literature_rs(r: int, c: int, n_bytes: float, bw: float, lat: float, halves: int) -> float:
    """Dimension-wise reduce-scatter of n_bytes: rows (c chips, 2 directions) on the whole
    share, then columns (r chips) on 1/c of it; ``halves`` = 2 runs the two dimension orders
    at once on half the vector each (square tori)."""
    n = n_bytes / halves
    return (c - 1) * (lat + n / (2 * c) / bw) + (r - 1) * (lat + n / (2 * c * r) / bw)


@pytest.mark.parametrize("r,c", [(3, 3), (4, 4), (4, 5), (5, 7), (8, 8), (6, 10)])
def test_closed_form_is_the_dimension_wise_ring_cost(r, c):
    bw, lat = 12e9, 7e-7
    pl = S.plan_from_graph(T.torus2d(r, c, bw, lat))
    halves = 2 if r == c else 1
    assert pl.algorithm.startswith("dimension-wise") and pl.mirrored == (r == c)
    n = pl.granule * 1000
    rs = S.analytic_time(pl, "reduce-scatter", n, 2).time_s
    assert rs == pytest.approx(literature_rs(r, c, 2 * n, bw, lat, halves), rel=1e-12)
    assert S.analytic_time(pl, "all-gather", n, 2).time_s == pytest.approx(rs, rel=1e-12)
    assert S.analytic_time(pl, "all-reduce", n, 2).time_s == pytest.approx(2 * rs, rel=1e-12)
    # bandwidth term: (p-1)/p N over the 2 (4 on a square torus: both orders at once)
    # directional links a chip sends on; steps (r-1)+(c-1), not p-1
    bw_term = S.analytic_time(S.plan_from_graph(T.torus2d(r, c, bw, 0.0)), "reduce-scatter",
                              n, 2).time_s
    p = r * c
    assert bw_term == pytest.approx((p - 1) / p * 2 * n / (2 * halves * bw), rel=1e-12)
    assert pl.steps("reduce-scatter") == (r - 1) + (c - 1)


def test_four_by_four_uses_both_dimensions():
    """The issue's case: a 4x4 torus was timed as one 16-chip bidirectional ring."""
    bw, n = 25e9, 2 ** 24
    torus = S.time_collective(S.plan("torus-2d", 16, bandwidth_Bps=bw, latency_s=1e-6),
                              "all-reduce", n, 2)
    one_ring = S.time_collective(S.plan("ring", 16, bandwidth_Bps=bw, latency_s=1e-6),
                                 "all-reduce", n, 2)
    assert torus.time_s < 0.55 * one_ring.time_s
    # graph-free square plan == the plan found on the graph
    assert S.plan("torus-2d", 16, bandwidth_Bps=bw, latency_s=1e-6) == S.plan_from_graph(
        T.torus2d(4, 4, bw, 1e-6))


def test_non_square_small_torus_keeps_the_better_rings():
    # 3x4: the exact search packs two Hamiltonian rings (every link), which beats one
    # dimension at a time; the torus plan says so
    pl = S.plan_from_graph(T.torus2d(3, 4, 1e9))
    assert pl.algorithm == "ring x4"


def _replay_rs(s, mask, seed):
    """Contributor sets of a reduce-scatter pass (transfers in ``mask``, in id order, which is
    dependency order); ``seed(chip)`` is what a chip's partial sum covers before the pass."""
    have, owners = {}, {}
    for t in np.flatnonzero(mask):
        src, dst, key = int(s.src[t]), int(s.dst[t]), (int(s.ring[t]), int(s.chunk[t]))
        have[(dst, key)] = have.get((dst, key), seed(dst)) | have.get((src, key), seed(src))
        owners[key] = dst
    return have, owners


@pytest.mark.parametrize("r,c", [(4, 4), (3, 5)])
def test_dimension_wise_reduce_scatter_semantics(r, c):
    g = T.torus2d(r, c, 1e9)
    s = best_schedule(g, "reduce-scatter", 60 * r * c * 4, 1)
    row = lambda x: {x // c * c + j for j in range(c)}  # noqa: E731
    col = lambda x: {i * c + x % c for i in range(r)}  # noqa: E731
    streams = [(row, col)] + ([(col, row)] if r == c else [])
    per_stream = s.ring.max() + 1
    assert per_stream == len(streams) * 2 * (r + c)
    base = 0
    for first, _ in streams:
        n1 = 2 * (r if first is row else c)  # directional rings of the first dimension
        lvl1 = (s.ring >= base) & (s.ring < base + n1)
        lvl2 = (s.ring >= base + n1) & (s.ring < base + 2 * (r + c))
        have1, own1 = _replay_rs(s, lvl1, lambda x: {x})
        assert own1 and all(have1[(d, k)] == first(d) for k, d in own1.items())
        have2, own2 = _replay_rs(s, lvl2, first)
        assert own2 and all(have2[(d, k)] == set(range(r * c)) for k, d in own2.items())
        # every chip ends owning the same number of fully reduced segments
        assert len(set(np.bincount(list(own2.values()), minlength=r * c))) == 1
        base += 2 * (r + c)


@pytest.mark.parametrize("op", OPS)
def test_explicit_analytic_equals_closed_form_on_square_and_oblong(op):
    for r, c in ((5, 5), (4, 6)):
        g = T.torus2d(r, c, 9e9, 4e-7)
        pl = S.plan_from_graph(g)
        n = pl.granule * 7
        a = analytic_time(best_schedule(g, op, n, 2), alpha_s=1e-7, reduce_Bps=100e9)
        b = S.analytic_time(pl, op, n, 2, alpha_s=1e-7, reduce_Bps=100e9)
        assert a.algorithm == b.algorithm and a.transfers == b.transfers
        assert b.time_s == pytest.approx(a.time_s, rel=1e-12)


@pytest.mark.parametrize("chips", [16, 20, 30, 36, 48, 60, 64, 12])
def test_spec_plan_equals_graph_plan(chips):
    spec = T.resolve("torus-2d", chips, bandwidth_Bps=3e9, latency_s=2e-7)
    assert S.plan_for(spec) == S.plan_from_graph(T.generate(spec))


def test_large_oblong_torus_needs_no_graph():
    pl = S.plan("torus-2d", 250 * 400, bandwidth_Bps=1e9, max_links=10)  # no graph built
    assert pl.algorithm == "dimension-wise (rows x2, columns x2)" and not pl.mirrored
