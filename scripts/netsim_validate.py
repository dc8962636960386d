"""Exhaustive cross-check of the two netsim engines (longer than the unit tests).

For every topology x collective x size x latency x packet size below, builds the schedule,
times it analytically and with the DES, and prints the largest relative disagreement per
topology, plus the DGX-1 bus-bandwidth curve against its 150 GB/s ceiling.

Run: python scripts/netsim_validate.py
"""

from __future__ import annotations

import itertools
import time

from accelsim.netsim import topology as T
from accelsim.netsim.analytic import analytic_time
from accelsim.netsim.des import simulate
from accelsim.netsim.schedule import best_schedule


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


def main() -> None:
    t0 = time.perf_counter()
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
                for pk in ((seg / 256,) if multi_hop else (None, seg / 3)):
                    d = simulate(s, alpha_s=2e-7, reduce_Bps=300e9, packet_bytes=pk).time_s
                    worst[name] = max(worst.get(name, 0.0), abs(d - a) / a)
                    n += 1
    print(f"{n} DES runs vs analytic; largest relative difference per topology:")
    for name, e in sorted(worst.items()):
        print(f"  {name:<22} {e:.2e}{'  (two-hop store-and-forward)' if 'switch' in name else ''}")
    print("\nDGX-1 bus bandwidth (GB/s) vs size, ceiling 6 x 25 = 150:")
    for size in (10**3, 10**5, 10**7, 10**9, 4 * 10**9):
        r = analytic_time(best_schedule(T.dgx1(), "all-reduce", size, 1))
        print(f"  {size:>12,} B  {r.bus_bandwidth_GBps:8.3f}")
    print(f"\n{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
