"""Exhaustive cross-check of the netsim engines and modes (longer than the unit tests).

1. Symmetric mode vs explicit schedules: for every topology generator (ring, switch, 2-D torus,
   fully-connected, multi-board) at every chip count up to ``--max-chips`` (256; fully-connected
   to 32, where the greedy ring search is still quick) and every collective, the closed-form
   analytic time equals the explicit schedule's analytic time and (up to ``--des-max-chips``)
   the representative-rank DES equals the DES of the explicit schedule; prints the largest
   relative difference per generator and engine.
2. DES vs analytic on the explicit schedules: for every topology x collective x size x latency
   x packet size below, the largest relative disagreement per topology.
3. The DGX-1 bus-bandwidth curve against its 150 GB/s ceiling.

Run: python scripts/netsim_validate.py [--max-chips 256] [--des-max-chips 64]
"""

from __future__ import annotations

import argparse
import itertools
import time

from accelsim.netsim import symmetric as S
from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time
from accelsim.netsim.des import simulate
from accelsim.netsim.schedule import best_schedule, directional_rings, ring_schedule

OPS = ("reduce-scatter", "all-gather", "all-reduce")


def symmetric_graphs(max_chips: int):
    """(generator, graph) at every chip count up to ``max_chips``."""
    for p in range(2, max_chips + 1):
        yield "ring", T.ring(p, 10e9, 1e-6)
        yield "switch", T.switch(p, 10e9, 1e-6)
        if p <= 32:
            yield "fully-connected", T.fully_connected(p, 8e9, 2e-7)
        if p >= 9:
            spec = None
            try:
                spec = T.resolve("torus2d", p, bandwidth_Bps=10e9, latency_s=5e-7)
            except ValueError:
                pass  # no r x c factorisation with r, c >= 3
            if spec is not None:
                yield "torus2d", T.generate(spec)
        if p % 8 == 0 and p >= 16:
            yield "multi-board", T.multi_board(p // 8, 25e9, 9e9, 1e-6, 3e-6)


def symmetric_vs_explicit(max_chips: int, des_max_chips: int, *, quiet: bool = False) -> dict:
    """{(generator, engine): largest relative difference} of the symmetric (closed-form /
    representative-rank) mode against explicit schedules; printed unless ``quiet``."""
    worst: dict = {}
    n_runs = 0
    skipped = []
    for kind, g in symmetric_graphs(max_chips):
        p = len(T.chips(g))
        try:
            pl = S.plan_from_graph(g)
            drings = None if kind == "multi-board" else directional_rings(g)
        except ValueError as exc:  # the ring search found no ring: neither mode can run
            skipped.append(f"{g.graph['name']} ({exc})")
            continue
        for op in OPS:
            s = (best_schedule(g, op, 123_457, 2) if drings is None
                 else ring_schedule(g, op, 123_457, 2, drings=drings))
            kw = dict(alpha_s=3e-7, reduce_Bps=200e9)
            pk = 257.0 if kind == "switch" else None
            pairs = [("analytic", analytic_time(s, **kw).time_s,
                      S.analytic_time(pl, op, 123_457, 2, **kw).time_s)]
            if p <= des_max_chips:
                pairs.append(("des", simulate(s, packet_bytes=pk, **kw).time_s,
                              S.des_time(pl, op, 123_457, 2, packet_bytes=pk, **kw).time_s))
            for engine, ref, sym in pairs:
                key = (kind, engine)
                worst[key] = max(worst.get(key, 0.0), abs(sym - ref) / ref)
                n_runs += 1
    if quiet:
        return worst
    print(f"1. {n_runs} symmetric vs explicit timings (chips <= {max_chips}, DES <= "
          f"{des_max_chips}); largest relative difference per generator and engine:")
    for (kind, engine), e in sorted(worst.items()):
        print(f"  {kind:<16} {engine:<9} {e:.1e}")
    for sk in skipped:
        print(f"  skipped: {sk}")
    return worst


def graphs(lat: float):
    yield T.ring(2, 10e9, lat)
    for p in (3, 8, 16, 33):
        yield T.ring(p, 10e9, lat)
    for r, c in ((3, 3), (4, 4), (4, 5)):
        yield T.torus2d(r, c, 10e9, lat)
    for p in (4, 7, 10):
        yield T.fully_connected(p, 10e9, lat)
    yield T.switch(8, 10e9, lat)
    yield T.dgx1(25e9, lat)
    yield T.multi_board(2, 25e9, 12.5e9, lat)
    yield T.hfp8_64(25e9, 12.5e9, lat)


#: Packet size of the two-hop (switch) DES runs, as a fraction of the largest segment.
SWITCH_PACKET_FRACTION = 1 / 256


def des_vs_analytic() -> tuple[dict[str, float], int]:
    """({topology: largest relative DES - analytic difference}, runs) on explicit schedules."""
    worst: dict[str, float] = {}
    n = 0
    for lat in (0.0, 1e-6):
        for g in graphs(lat):
            name = g.graph["name"]
            for op, size in itertools.product(("reduce-scatter", "all-gather", "all-reduce"),
                                              (1, 1000, 123_457, 10_000_000)):
                s = best_schedule(g, op, size, 2)
                a = analytic_time(s, alpha_s=2e-7, reduce_Bps=300e9).time_s
                multi_hop = g.graph["topology"] == "switch"
                seg = float(s.nbytes.max())
                for pk in ((seg * SWITCH_PACKET_FRACTION,) if multi_hop else (None, seg / 3)):
                    d = simulate(s, alpha_s=2e-7, reduce_Bps=300e9, packet_bytes=pk).time_s
                    worst[name] = max(worst.get(name, 0.0), abs(d - a) / a)
                    n += 1
    return worst, n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-chips", type=int, default=256)
    ap.add_argument("--des-max-chips", type=int, default=64)
    args = ap.parse_args()
    t0 = time.perf_counter()
    symmetric_vs_explicit(args.max_chips, args.des_max_chips)
    print(f"  ({time.perf_counter() - t0:.0f} s)\n")
    worst, n = des_vs_analytic()
    print(f"2. {n} DES runs vs analytic (explicit schedules); largest relative difference per "
          "topology:")
    for name, e in sorted(worst.items()):
        print(f"  {name:<22} {e:.2e}{'  (two-hop store-and-forward)' if 'switch' in name else ''}")
    print("\n3. DGX-1 bus bandwidth (GB/s) vs size, ceiling 6 x 25 = 150:")
    for size in (10**3, 10**5, 10**7, 10**9, 4 * 10**9):
        r = analytic_time(best_schedule(T.dgx1(), "all-reduce", size, 1))
        print(f"  {size:>12,} B  {r.bus_bandwidth_GBps:8.3f}")
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
