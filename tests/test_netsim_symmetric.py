"""Symmetric collectives (closed form / one representative rank) against the explicit schedules.

The oracle is the explicit schedule (every transfer of every ring, timed by the same two
engines), plus the textbook ring formula.  The symmetric analytic time must equal the explicit
analytic time (to float summation order), the representative-rank DES the explicit DES, for
every topology generator and op; ``scripts/netsim_validate.py`` repeats it at every size up to
256 chips.  Also: the size guards refuse before allocating, with the count and the limit.
"""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.cli import main as cli
from accelsim.netsim import phase_times
from accelsim.netsim import symmetric as S
from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time, ring_collective_time, ring_time_closed_form
from accelsim.netsim.des import simulate
from accelsim.netsim.limits import SizeLimitError
from accelsim.netsim.phases import collective_time
from accelsim.netsim.schedule import best_schedule

OPS = ("reduce-scatter", "all-gather", "all-reduce")
KW = dict(alpha_s=3e-7, reduce_Bps=200e9)


def both_ways(g, op, n, bpe=2, *, des=True, packet_bytes=None, pl=None):
    """(explicit analytic, symmetric analytic, explicit DES, symmetric DES) on ``g``."""
    pl = S.plan_from_graph(g) if pl is None else pl
    assert pl is not None
    s = best_schedule(g, op, n, bpe)
    ea, sa = analytic_time(s, **KW), S.analytic_time(pl, op, n, bpe, **KW)
    for f in ("steps", "transfers", "padded_bytes", "payload_bytes", "algorithm", "chips"):
        assert getattr(ea, f) == getattr(sa, f), f
    assert sa.mode == "symmetric" and ea.mode == "explicit"
    if not des:
        return ea, sa, None, None
    ed = simulate(s, packet_bytes=packet_bytes, **KW)
    sd = S.des_time(pl, op, n, bpe, packet_bytes=packet_bytes, **KW)
    return ea, sa, ed, sd


def check(g, ops, n, **kw):
    """Every op in ``ops`` on ``g`` (the ring search runs once for the symmetric plan)."""
    pl = S.plan_from_graph(g)
    for op in ((ops,) if isinstance(ops, str) else ops):
        ea, sa, ed, sd = both_ways(g, op, n, pl=pl, **kw)
        assert sa.time_s == pytest.approx(ea.time_s, rel=1e-12, abs=0)
        if ed is not None:
            assert sd.time_s == pytest.approx(ed.time_s, rel=1e-12, abs=0)
            assert sd.events < ed.events or g.number_of_nodes() <= 3


# ------------------------------------------------------------ symmetric == explicit, per generator

@pytest.mark.parametrize("p", list(range(2, 13)) + [16, 31, 64])
def test_ring_sizes(p):
    check(T.ring(p, 10e9, 1e-6), OPS, 96_001)


@pytest.mark.parametrize("p", [100, 256])
def test_ring_large_analytic(p):
    check(T.ring(p, 7e9, 2e-6), ("reduce-scatter", "all-reduce"), 1_000_003, des=False)


@pytest.mark.parametrize("p", [2, 3, 5, 8, 17, 32])
def test_switch_sizes(p):
    # two-hop routes through a cut-through switch, cut into packets: the representative rank
    # must reproduce the explicit DES exactly
    check(T.switch(p, 10e9, 1e-6), OPS, 50_000, packet_bytes=257.0)


@pytest.mark.parametrize("rc", [(3, 3), (3, 4), (4, 4), (4, 5), (5, 6), (5, 7), (6, 6), (8, 8)])
def test_torus_sizes(rc):
    check(T.torus2d(*rc, 10e9, 5e-7), OPS, 123_457)


@pytest.mark.parametrize("p", [2, 3, 4, 5, 6, 7, 8, 13])
def test_fully_connected_sizes(p):
    check(T.fully_connected(p, 8e9, 2e-7), OPS, 123_457)


@pytest.mark.parametrize("boards", [2, 3, 4, 5, 8, 13, 32])
def test_multi_board_sizes(boards):
    check(T.multi_board(boards, 25e9, 9e9, 1e-6, 3e-6), OPS, 1_234_567, des=boards <= 8)


def test_dgx1_and_hfp8_64():
    check(T.dgx1(), OPS, 25_557_032)
    check(T.hfp8_64(32e9, 16e9), OPS, 25_557_032)


@settings(max_examples=15, deadline=None)
@given(p=st.integers(2, 9), n=st.integers(1, 10**6), bw=st.floats(1e8, 1e11),
       lat=st.floats(0, 1e-5), op=st.sampled_from(OPS), pk=st.sampled_from([None, 1e3, 7e3]),
       kind=st.sampled_from(["ring", "switch", "multi-board"]))
def test_random_links_and_packets(p, n, bw, lat, op, pk, kind):
    g = (T.multi_board(p, bw, bw / 3, lat, 2 * lat) if kind == "multi-board"
         else T.build(kind, p, bandwidth_Bps=bw, latency_s=lat))
    check(g, op, n, packet_bytes=pk)


# ------------------------------------------------------- closed-form plans (no graph) == graph

def test_plans_without_graph_equal_graph_plans_every_size():
    """The graph-free plans of ring, switch and multi-board are the plans the ring search
    finds on the built graph (multi-board: every size up to 256 chips; ring and switch every
    size to 64 and the script every size to 256): equal plans time equally."""
    for p in list(range(2, 65)) + [100, 128, 255, 256]:
        for kind in ("ring", "switch"):
            spec = T.resolve(kind, p, bandwidth_Bps=3e9, latency_s=2e-7)
            assert S.plan_for(spec) == S.plan_from_graph(T.generate(spec)), (kind, p)
    for boards in range(2, 33):
        spec = T.resolve("multi-board", 8 * boards, inter_board_Bps=7e9,
                         inter_board_latency_s=3e-6)
        assert S.plan_for(spec) == S.plan_from_graph(T.generate(spec)), boards


def test_plan_matches_textbook_ring_and_scales():
    pl = S.plan("ring", 100_000, bandwidth_Bps=25e9, latency_s=1e-6)
    n = 2 * 100_000 * 128
    for op in OPS:
        r = S.analytic_time(pl, op, n, 2)
        assert r.time_s == pytest.approx(ring_time_closed_form(100_000, 2 * n, 2, 25e9, 1e-6, op),
                                         rel=1e-12)
        assert r.transfers == 2 * 100_000 * 99_999 * (2 if op == "all-reduce" else 1)
    # a billion chips: a closed form, no graph, no schedule (padded to one byte per segment)
    big = S.analytic_time(S.plan("ring", 10**9, bandwidth_Bps=25e9), "all-reduce", 10**8)
    assert big.padded_bytes == 2 * 10**9
    assert big.time_s == pytest.approx(2 * (10**9 - 1) * 1 / 25e9, rel=1e-12)


@pytest.mark.parametrize("kind,chips", [("ring", 1024), ("multi-board", 1024)])
def test_des_representative_large(kind, chips):
    # contention-free single-hop rings: the DES equals the analytic model at scale
    pl = S.plan(kind, chips, bandwidth_Bps=25e9, latency_s=1e-6)
    for op in OPS:
        a = S.analytic_time(pl, op, 25_600_000, 2, **KW)
        d = S.des_time(pl, op, 25_600_000, 2, **KW)
        assert d.time_s == pytest.approx(a.time_s, rel=1e-9)
        assert d.events < 20 * chips


# -------------------------------------------------------------------- fallback, API, ring term

def test_asymmetric_ring_falls_back_to_explicit():
    g = T.ring(5, 10e9, 1e-6)
    g.edges[2, 3]["bandwidth_Bps"] = 4e9  # one slow link: positions no longer in lock step
    assert S.plan_from_graph(g) is None
    for engine in ("analytic", "des"):
        r = collective_time(g, "all-reduce", 10_000, 2, engine, packet_bytes=100.0)
        s = best_schedule(g, "all-reduce", 10_000, 2)
        ref = analytic_time(s) if engine == "analytic" else simulate(s, packet_bytes=100.0)
        assert r.mode == "explicit" and r.time_s == ref.time_s


def test_phase_times_symmetric_explicit_and_plan_agree():
    rates = dict(memory_Bps=900e9, vector_ops_per_s=1.92e12)
    g = T.hfp8_64(32e9, 16e9)
    pl = S.plan("hfp8-64", bandwidth_Bps=32e9, inter_board_Bps=16e9)
    for scheme in ("fp16", "hfp8"):
        a = phase_times(g, 25_557_032, scheme, **rates)
        b = phase_times(g, 25_557_032, scheme, mode="explicit", **rates)
        c = phase_times(pl, 25_557_032, scheme, **rates)
        for f in ("reduce_scatter_s", "all_gather_s", "total_s"):
            assert getattr(a, f) == pytest.approx(getattr(b, f), rel=1e-12)
            assert getattr(c, f) == getattr(a, f)
        assert a.chips == c.chips == 64
    with pytest.raises(ValueError, match="unknown mode 'fast'"):
        phase_times(g, 1000, "fp16", mode="fast", **rates)


def test_ring_collective_time():
    # (p-1)(lat + N/(p B)); all-reduce twice; arrays broadcast; one rank costs nothing
    assert ring_collective_time("reduce-scatter", 4, 4e6, 1e9, 1e-6) == pytest.approx(
        3 * (1e-6 + 1e-3))
    assert ring_collective_time("all_reduce", 4, 4e6, 1e9) == pytest.approx(2 * 3e-3)
    assert ring_collective_time("all_gather", 4, 4e6, 1e9) == pytest.approx(3e-3)
    t = ring_collective_time("all_reduce", np.array([1, 2, 8]), 8e6, np.array([1e9, 2e9, 1e9]))
    assert t.tolist() == pytest.approx([0.0, 2 * 1 / 2 * 8e6 / 2e9, 2 * 7 / 8 * 8e6 / 1e9])
    # with no latency it is the bandwidth term f (p-1)/p size/bw bit for bit, in that order
    # (the layer model's collectives can call it without moving a number)
    rng = np.random.default_rng(7)
    p, n, bw = rng.integers(0, 300, 500), rng.uniform(1, 1e10, 500), rng.uniform(1e8, 1e12, 500)
    with np.errstate(divide="ignore", invalid="ignore"):
        ref = np.where(p > 1, 2.0 * (p - 1) / p * n / bw, 0.0)
    assert np.array_equal(ring_collective_time("all_reduce", p, n, bw), ref)
    with pytest.raises(ValueError, match="unknown ring collective 'broadcast'"):
        ring_collective_time("broadcast", 4, 1, 1)
    with pytest.raises(ValueError, match="bandwidth_Bps > 0"):
        ring_collective_time("all-reduce", 4, 1, 0.0)


def test_bad_plans_and_inputs():
    with pytest.raises(ValueError, match="RingLevel.p must be an integer >= 2"):
        S.RingLevel(1, 1, 1, (((1e9, 0.0),),))
    with pytest.raises(ValueError, match="link bandwidth"):
        S.RingLevel(4, 2, 1, (((float("nan"), 0.0),),))
    with pytest.raises(ValueError, match="do not tile"):
        S.RingPlan("x", 5, "ring", (S.RingLevel(4, 2, 1, (((1e9, 0.0),),)),))
    pl = S.plan("ring", 8, bandwidth_Bps=1e9)
    with pytest.raises(ValueError, match="alpha_s must be a finite"):
        S.analytic_time(pl, "all-reduce", 64, alpha_s=float("inf"))
    with pytest.raises(ValueError, match="reduce_Bps must be a positive finite"):
        S.des_time(pl, "all-reduce", 64, reduce_Bps=float("nan"))
    with pytest.raises(ValueError, match="unknown collective 'gather'"):
        S.analytic_time(pl, "gather", 64)
    with pytest.raises(ValueError, match="do not divide into 16"):
        S.analytic_time(pl, "all-reduce", 17, pad=False)
    with pytest.raises(ValueError, match="unknown engine"):
        S.time_collective(pl, "all-reduce", 64, engine="fast")


# ----------------------------------------------------------------------------------- size guards

def test_guards_refuse_before_allocating():
    g = T.ring(4096, 25e9)
    t0 = time.process_time()
    with pytest.raises(SizeLimitError, match=r"67,092,480 transfers \(limit 4,000,000\); "
                                             r"raise max_transfers"):
        best_schedule(g, "all-reduce", 51_200_000, 1)
    assert time.process_time() - t0 < 5  # generous: it must not have built 67 M transfers
    s = best_schedule(T.ring(64, 25e9), "reduce-scatter", 1000, 1, max_transfers=10_000)
    assert s.n_transfers == 2 * 64 * 63
    with pytest.raises(SizeLimitError, match="8,064 transfers"):
        best_schedule(T.ring(64, 25e9), "reduce-scatter", 1000, 1, max_transfers=8_000)
    with pytest.raises(SizeLimitError, match=r"would take 33,600 packets \(limit 1,000\)"):
        simulate(best_schedule(T.dgx1(), "reduce-scatter", 4800, 1), max_packets=1000,
                 packet_bytes=1.0)
    with pytest.raises(SizeLimitError, match="4,999,950,000 links"):
        T.fully_connected(100_000, 1e9)
    with pytest.raises(SizeLimitError, match="raise max_packets"):
        S.des_time(S.plan("ring", 10**9, bandwidth_Bps=1e9), "all-reduce", 10**8)


def run_cli(capsys, *argv):
    rc = cli(["collective", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def test_cli_edges(capsys):
    rc, _, err = run_cli(capsys, "--topology", "dgx1", "--op", "all-reduce", "--bytes",
                         "100000000", "--engine", "des", "--packet-bytes", "1")
    assert rc == 2 and "29,166,676 packets (limit 1,000,000)" in err and "--max-packets" in err
    assert err.count("\n") == 1
    rc, out, _ = run_cli(capsys, "--topology", "ring", "--chips", "1000000000", "--op",
                         "all-reduce", "--bytes", "100000000", "--link-GBps", "25", "--json")
    r = json.loads(out)
    assert rc == 0 and r["mode"] == "symmetric" and r["chips"] == 10**9
    assert r["time_s"] == pytest.approx(ring_collective_time("all-reduce", 10**9, 2e9, 50e9),
                                        rel=1e-12)
    for flag, bad in (("--alpha-us", "inf"), ("--alpha-us", "nan"), ("--latency-us", "-1"),
                      ("--link-GBps", "inf"), ("--packet-bytes", "nan")):
        rc, _, err = run_cli(capsys, "--topology", "ring", "--chips", "8", "--op", "all-reduce",
                             "--bytes", "1000", "--link-GBps", "25", flag, bad)
        assert rc == 2 and f"argument {flag}: must be " in err and "finite" in err and bad in err
    rc, _, err = run_cli(capsys, "--topology", "ring", "--chips", "4096", "--op", "all-reduce",
                         "--bytes", "51200000", "--link-GBps", "25", "--mode", "explicit")
    assert rc == 2 and "67,092,480 transfers" in err and "--max-transfers" in err
    rc, out, _ = run_cli(capsys, "--topology", "hfp8-64", "--op", "all-reduce", "--bytes",
                         "1000000", "--engine", "both", "--json", "--mode", "explicit",
                         "--max-transfers", "8000")
    ex = json.loads(out)
    rc2, out, _ = run_cli(capsys, "--topology", "hfp8-64", "--op", "all-reduce", "--bytes",
                          "1000000", "--engine", "both", "--json")
    sy = json.loads(out)
    assert rc == rc2 == 0 and ex["mode"] == "explicit" and sy["mode"] == "symmetric"
    assert sy["time_s"] == pytest.approx(ex["time_s"], rel=1e-12)
    assert sy["des_time_s"] == ex["des_time_s"]
