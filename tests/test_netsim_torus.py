"""2-D torus collectives run dimension-wise, both orders at once (issue 21 item 15).

Oracles: the dimension-decomposed ring cost of the collective literature -- each dimension's
bidirectional ring over its own links, the second dimension on the 1/p_1 share the first left
(Sack & Gropp, "Collective algorithms for multiported torus networks", ACM TOPC 2015;
Y. Lu, "Mapping collective algorithms to physical topologies", spicemonkey.github.io/
collective-comm, section 3) -- and set semantics replayed on the explicit schedule.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest

from accelsim.netsim import symmetric as S
from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time
from accelsim.netsim.schedule import best_schedule

OPS = ("reduce-scatter", "all-gather", "all-reduce")


def literature_rs(r: int, c: int, n_bytes: float, bw: float, lat: float) -> float:
    """Dimension-wise reduce-scatter of n_bytes, both dimension orders at once in lock step:
    a share x = c/(r+c) goes rows (c chips, 2 directions, segments x N/(2c)) then columns
    (r chips, on 1/c of it), the rest columns then rows; each step costs the latency plus the
    larger of the two streams' segments still running (written out step by step here)."""
    x = c / (r + c)
    streams = [[(c - 1, x * n_bytes / (2 * c)), (r - 1, x * n_bytes / (2 * c * r))],
               [(r - 1, (1 - x) * n_bytes / (2 * r)), (c - 1, (1 - x) * n_bytes / (2 * r * c))]]
    total = 0.0
    for phase in range(2):
        for t in range(max(c, r) - 1):
            total += lat + max(seg for steps, seg in (s[phase] for s in streams) if t < steps) / bw
    return total


@pytest.mark.parametrize("r,c", [(3, 3), (4, 4), (4, 5), (5, 7), (8, 8), (6, 10), (7, 4)])
def test_closed_form_is_the_dimension_wise_ring_cost(r, c):
    bw, lat = 12e9, 7e-7
    pl = S.plan_from_graph(T.torus2d(r, c, bw, lat))
    assert pl.algorithm.startswith("dimension-wise, both orders") and pl.mirrored
    n = pl.granule * 1000
    rs = S.analytic_time(pl, "reduce-scatter", n, 2).time_s
    assert rs == pytest.approx(literature_rs(r, c, 2 * n, bw, lat), rel=1e-12)
    assert S.analytic_time(pl, "all-gather", n, 2).time_s == pytest.approx(rs, rel=1e-12)
    assert S.analytic_time(pl, "all-reduce", n, 2).time_s == pytest.approx(2 * rs, rel=1e-12)
    p = r * c
    bw_term = S.analytic_time(S.plan_from_graph(T.torus2d(r, c, bw, 0.0)), "reduce-scatter",
                              n, 2).time_s
    if r == c:  # both halves busy all the time: the 4-links-per-chip bound (p-1)/p N/(4B)
        assert bw_term == pytest.approx((p - 1) / p * 2 * n / (4 * bw), rel=1e-12)
    else:  # between that bound and one dimension at a time ((p-1)/p N/(2B))
        assert (p - 1) / p * 2 * n / (4 * bw) < bw_term < (p - 1) / p * 2 * n / (2 * bw)
    assert pl.steps("reduce-scatter") == 2 * (max(r, c) - 1)


def test_oblong_torus_by_hand():
    """4x8, no latency: a 2/3 share goes rows first. Phase 1: 7 steps of N/24 (both streams'
    segments equal); phase 2: 3 steps of N/96 (columns, 2/3 share), then 4 of N/192 (rows,
    1/3): 7/24 + 3/96 + 4/192 = 11/32 N/B, against 31/64 N/B one dimension at a time."""
    pl = S.plan("torus-2d", 32, bandwidth_Bps=1.0, latency_s=0.0)
    assert pl.algorithm == "dimension-wise, both orders 2:1 (rows x2, columns x2)"
    n = pl.granule
    t = S.analytic_time(pl, "reduce-scatter", n, 1).time_s
    assert t == pytest.approx(float(Fraction(11, 32)) * n, rel=1e-12)


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
    s = best_schedule(g, "reduce-scatter", 60 * r * c * (r + c) * 4, 1)
    row = lambda x: {x // c * c + j for j in range(c)}  # noqa: E731
    col = lambda x: {i * c + x % c for i in range(r)}  # noqa: E731
    # ring ids, phase by phase: rows-first stream's rows (2r rings), columns-first stream's
    # columns (2c); then the first stream's columns, the second's rows
    assert s.ring.max() + 1 == 4 * (r + c)
    bounds = np.cumsum([0, 2 * r, 2 * c, 2 * c, 2 * r])
    ids = lambda k: (s.ring >= bounds[k]) & (s.ring < bounds[k + 1])  # noqa: E731
    for lvl1, lvl2, first in ((0, 2, row), (1, 3, col)):
        have1, own1 = _replay_rs(s, ids(lvl1), lambda x: {x})
        assert own1 and all(have1[(d, k)] == first(d) for k, d in own1.items())
        have2, own2 = _replay_rs(s, ids(lvl2), first)
        assert own2 and all(have2[(d, k)] == set(range(r * c)) for k, d in own2.items())
        # every chip ends owning the same number of fully reduced segments
        assert len(set(np.bincount(list(own2.values()), minlength=r * c))) == 1


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
    assert pl.algorithm == "dimension-wise, both orders 8:5 (rows x2, columns x2)"
