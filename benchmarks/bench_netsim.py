"""Scale and speed of the netsim engines (issue 5, item 7).

Times the simpy DES of a reduce-scatter of ResNet-50's 25.6 M FP16 gradients on 64 and 1024
chips, beside the analytic engine on the same schedule, and reports simulated events per
second and peak memory (each case runs in a fresh child process; peak RSS of that process).
Then shows what coarsening DES packets costs in accuracy against the fine model.

Run:  python benchmarks/bench_netsim.py [--quick]
Targets: 64 chips < 5 s, 1024 chips < 60 s (DES wall time, one core).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import time
from _machine import cpu_model as _cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

N_PARAMS = 25_600_000  # ResNet-50 gradients (issue: 25.6 M)
FP16 = 2




def _case(topology: str, chips: int, link_GBps: float, packet_bytes, q) -> None:
    from accelsim.netsim import topology as T
    from accelsim.netsim.analytic import analytic_time
    from accelsim.netsim.des import simulate
    from accelsim.netsim.schedule import best_schedule

    t0 = time.perf_counter()
    g = T.build(topology, chips, bandwidth_Bps=link_GBps * 1e9, latency_s=1e-6)
    s = best_schedule(g, "reduce-scatter", N_PARAMS, FP16)
    t_build = time.perf_counter() - t0
    t1 = time.perf_counter()
    a = analytic_time(s)
    t_an = time.perf_counter() - t1
    d = simulate(s, packet_bytes=packet_bytes)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux
    q.put(dict(case=f"{g.graph['name']} RS", chips=s.p, algorithm=s.algorithm,
               transfers=s.n_transfers, packet_bytes=packet_bytes, build_s=t_build,
               analytic_wall_s=t_an, des_wall_s=d.wall_s, events=d.events,
               events_per_s=d.events / d.wall_s, analytic_time_s=a.time_s, des_time_s=d.time_s,
               rel_err=abs(d.time_s - a.time_s) / a.time_s, peak_rss_MiB=rss))


def run_case(*args) -> dict:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=_case, args=(*args, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 1024-chip flat ring")
    args = ap.parse_args()
    print(f"machine: {os.cpu_count()} CPUs, {_cpu_model()}, Python {platform.python_version()}")
    print(f"payload: {N_PARAMS:,} FP16 gradients = {N_PARAMS * FP16 / 1e6:.1f} MB per chip; "
          "link latency 1 us\n")
    cases = [("ring", 64, 32.0, None), ("hfp8-64", 64, 32.0, None),
             ("multi-board", 1024, 32.0, None)]
    if not args.quick:
        cases.append(("ring", 1024, 32.0, None))
    hdr = (f"{'case':<24}{'chips':>6}{'transfers':>11}{'events':>10}{'DES wall s':>11}"
           f"{'events/s':>11}{'analytic s':>11}{'DES/analytic':>13}{'peak MiB':>10}  target")
    print(hdr)
    for c in cases:
        r = run_case(*c)
        target = 5.0 if r["chips"] <= 64 else 60.0
        ok = "ok" if r["des_wall_s"] < target else "MISSED"
        print(f"{r['case']:<24}{r['chips']:>6}{r['transfers']:>11,}{r['events']:>10,}"
              f"{r['des_wall_s']:>11.2f}{r['events_per_s']:>11,.0f}{r['analytic_wall_s']:>11.3f}"
              f"{r['des_time_s'] / r['analytic_time_s']:>13.6f}{r['peak_rss_MiB']:>10.0f}"
              f"  < {target:g} s {ok}")

    print("\nCoarsening: DES packet size vs the fine model (16 KiB packets).")
    print("Ring schedules are contention-free single-hop: packet size cannot change their time.")
    print("On a switch every hop is two links (store-and-forward per packet), so coarse")
    print("packets add one packet time per step; that is the error coarsening introduces.")
    print(f"{'case':<24}{'packet B':>12}{'events':>10}{'DES wall s':>11}{'sim time ms':>13}"
          f"{'err vs fine':>12}")
    for topo, chips in (("switch", 64), ("ring", 64)):
        fine = None
        for pk in (16384.0, 65536.0, 262144.0, None):
            r = run_case(topo, chips, 32.0, pk)
            fine = fine or r
            err = abs(r["des_time_s"] - fine["des_time_s"]) / fine["des_time_s"]
            print(f"{r['case']:<24}{'whole' if pk is None else f'{pk:.0f}':>12}{r['events']:>10,}"
                  f"{r['des_wall_s']:>11.2f}{r['des_time_s'] * 1e3:>13.4f}{err:>12.2%}")


if __name__ == "__main__":
    main()
