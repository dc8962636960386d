"""Scale and speed of the netsim engines (issue 12, deliverable 3; issue 5, item 7).

1. Targets of the symmetric mode: analytic reduce-scatter / all-gather / all-reduce (and
   all-to-all) at 100,000 chips (< 1 s, < 500 MB) and the representative-rank DES at 4,096
   chips (< 10 s), ring, switch, square torus and hierarchical (multi-board), on ResNet-50's
   25.6 M FP16 gradients.
2. The explicit schedules beside them where they still run (their size guard refuses 4,096),
   with the symmetric/explicit agreement and speed-up measured in the same run.
3. What coarsening DES packets costs in accuracy against the fine model.

Each case runs in a fresh child process; wall time is the case's own (after imports), peak
memory the child's peak RSS (interpreter, numpy and networkx included).

Run:  python benchmarks/bench_netsim.py [--quick]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import resource
import statistics
import time

from _machine import cpu_model as _cpu_model, ratios, spread  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

N_PARAMS = 25_600_000  # ResNet-50 gradients (issue: 25.6 M)
FP16 = 2
OPS = ("reduce-scatter", "all-gather", "all-reduce")


def _rss_MiB() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB on Linux


def _symmetric(topology: str, chips: int, engine: str, ops, packet_bytes, q) -> None:
    t_imp = time.perf_counter()
    from accelsim.netsim import alltoall as A
    from accelsim.netsim import symmetric as S

    t0 = time.perf_counter()
    t_imp = t0 - t_imp
    ring_ops = [op for op in ops if op != "all-to-all"]
    pl = S.plan(topology, chips, bandwidth_Bps=32e9, latency_s=1e-6) if ring_ops else None
    res = [S.time_collective(pl, op, N_PARAMS, FP16, engine, packet_bytes=packet_bytes)
           for op in ring_ops]
    if "all-to-all" in ops:
        apl = A.plan(topology, chips, bandwidth_Bps=32e9, latency_s=1e-6)
        pl = pl or apl
        res.append(A.time_all_to_all(apl, N_PARAMS * FP16, engine, packet_bytes=packet_bytes))
    q.put(dict(wall_s=time.perf_counter() - t0, import_s=t_imp, rss=_rss_MiB(),
               algorithm=pl.algorithm,
               times={r.op: r.time_s for r in res}, events=sum(r.events for r in res),
               transfers=sum(r.transfers for r in res)))


def _explicit(topology: str, chips: int, engine: str, ops, packet_bytes, q) -> None:
    from accelsim.netsim import topology as T
    from accelsim.netsim.phases import time_schedule
    from accelsim.netsim.schedule import best_schedule

    t0 = time.perf_counter()
    g = T.build(topology, chips, bandwidth_Bps=32e9, latency_s=1e-6)
    res = [time_schedule(best_schedule(g, op, N_PARAMS, FP16, max_transfers=None), engine,
                         packet_bytes=packet_bytes, max_packets=None) for op in ops]
    q.put(dict(wall_s=time.perf_counter() - t0, rss=_rss_MiB(), algorithm=res[0].algorithm,
               times={r.op: r.time_s for r in res}, events=sum(r.events for r in res),
               transfers=sum(r.transfers for r in res)))


def run_case(fn, *args) -> dict:
    ctx = mp.get_context("fork")
    q = ctx.Queue()
    p = ctx.Process(target=fn, args=(*args, q))
    p.start()
    out = q.get()
    p.join()
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="skip the explicit 1,024-chip flat ring (about a minute)")
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each case in parts 1 and 2 (min / median / max printed)")
    args = ap.parse_args()
    rep = max(1, args.repeat)
    print(f"machine: {os.cpu_count()} CPUs, {_cpu_model()}, Python {platform.python_version()}")
    print(f"payload: {N_PARAMS:,} FP16 gradients = {N_PARAMS * FP16 / 1e6:.1f} MB per chip; "
          "links 32 GB/s, 1 us\n")

    print(f"1. Targets (symmetric mode; wall = plan + every op listed, in one process, min / "
          f"median / max of {rep} runs; the\n"
          "   one-time import of accelsim.netsim (numpy, networkx) shown beside it; targets on the "
          "median)")
    hdr = (f"{'case':<30}{'chips':>8}{'wall s':>23}{'+import s':>10}{'peak MiB':>10}{'target':>16}"
           f"{'wall/target':>12}{'MiB/target':>11}")
    print(hdr)
    targets = [("ring", 100_000, "analytic", OPS, 1.0, 500.0),
               ("multi-board", 100_000, "analytic", OPS, 1.0, 500.0),
               ("switch", 100_000, "analytic", OPS + ("all-to-all",), 1.0, 500.0),
               ("torus-2d", 99_856, "analytic", OPS + ("all-to-all",), 1.0, 500.0),
               ("ring", 100_000, "analytic", ("all-to-all",), 1.0, 500.0),
               ("ring", 4096, "des", ("reduce-scatter", "all-reduce"), 10.0, None),
               ("multi-board", 4096, "des", ("reduce-scatter", "all-reduce"), 10.0, None),
               ("switch", 4096, "des", ("all-gather", "all-to-all"), 10.0, None)]
    for topo, chips, engine, ops, t_max, mb_max in targets:
        runs = [run_case(_symmetric, topo, chips, engine, ops, None) for _ in range(rep)]
        walls = [x["wall_s"] for x in runs]
        r = dict(runs[0], wall_s=statistics.median(walls), rss=max(x["rss"] for x in runs))
        ok = r["wall_s"] < t_max and (mb_max is None or r["rss"] < mb_max)
        tgt = f"<{t_max:g} s" + (f", <{mb_max:g} MB" if mb_max else "")
        short = {"reduce-scatter": "RS", "all-gather": "AG", "all-reduce": "AR",
                 "all-to-all": "A2A"}
        print(f"{topo + ' ' + engine + ' ' + '/'.join(short[o] for o in ops):<30}"
              f"{chips:>8,}{spread(walls):>23}{r['import_s']:>10.3f}{r['rss']:>10.0f}{tgt:>16}"
              f"{r['wall_s'] / t_max:>12.4f}"
              f"{(r['rss'] / mb_max if mb_max else float('nan')):>11.2f}  "
              f"{'ok' if ok else 'MISSED'}")

    print(f"\n2. Symmetric vs explicit schedule, same engine, side by side (reduce-scatter; "
          f"seconds and per-run speed-ups min / median / max of {rep} alternating runs)")
    print(f"{'case':<30}{'chips':>6}{'explicit s':>23}{'symm. s':>23}{'speed-up':>20}"
          f"{'explicit MiB':>13}{'symm. MiB':>10}{'rel. diff':>11}{'events expl/symm':>20}")
    cases = [("ring", 64, "des"), ("multi-board", 64, "des"), ("multi-board", 1024, "des"),
             ("ring", 256, "analytic"), ("ring", 1024, "analytic")]
    if not args.quick:
        cases.append(("ring", 1024, "des"))
    for topo, chips, engine in cases:
        es, ss = [], []
        for _ in range(rep if (topo, chips, engine) != ("ring", 1024, "des") else 1):
            es.append(run_case(_explicit, topo, chips, engine, ("reduce-scatter",), None))
            ss.append(run_case(_symmetric, topo, chips, engine, ("reduce-scatter",), None))
        e, s = es[0], ss[0]
        ew, sw = [x["wall_s"] for x in es], [x["wall_s"] for x in ss]
        te, ts = e["times"]["reduce-scatter"], s["times"]["reduce-scatter"]
        print(f"{topo + ' ' + engine:<30}{chips:>6}{spread(ew):>23}{spread(sw):>23}"
              f"{spread(ratios(ew, sw), '{:.0f}'):>20}{e['rss']:>13.0f}{s['rss']:>10.0f}"
              f"{abs(ts - te) / te:>11.1e}{e['events']:>11,}/{s['events']:,}")

    print("\n3. Coarsening: DES packet size vs the fine model (16 KiB packets), explicit schedule "
          "(simulated times are deterministic; one run each).")
    print("Ring schedules are contention-free single-hop: packet size cannot change their time.")
    print("On a switch every hop is two links, forwarded cut-through: coarse packets cost")
    print("nothing either (store-and-forward would add one packet time per step).")
    print(f"{'case':<24}{'packet B':>12}{'events':>10}{'DES wall s':>11}{'sim time ms':>13}"
          f"{'err vs fine':>12}")
    for topo, chips in (("switch", 64), ("ring", 64)):
        fine = None
        for pk in (16384.0, 65536.0, 262144.0, None):
            r = run_case(_explicit, topo, chips, "des", ("reduce-scatter",), pk)
            t = r["times"]["reduce-scatter"]
            fine = fine or t
            size = "whole" if pk is None else f"{pk:.0f}"
            print(f"{topo + '-' + str(chips) + ' RS':<24}{size:>12}{r['events']:>10,}"
                  f"{r['wall_s']:>11.2f}{t * 1e3:>13.4f}"
                  f"{abs(t - fine) / fine:>12.2%}")


if __name__ == "__main__":
    main()
