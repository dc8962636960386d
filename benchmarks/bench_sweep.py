"""Parallel speed-up of ``run_sweep`` with accelsim's real evaluator, side by side in one run.

Target (issue 12, deliverable 4): 2 worker processes beat a serial run on any sweep with more than
a few dozen points. The realistic sweep is 108 points: 3 schemes x 4 minibatches (12 compute
profiles, each a full explorer run) x 3 bandwidths x 3 compression ratios (cheap communication
terms). Each configuration runs in a fresh interpreter (cold caches, as a user's run is) and is
timed around ``run_sweep`` only; every number is min / median / max over ``--repeat`` runs (the
machine is shared).

  serial               one process; its compute-profile cache hits for 8 of every 9 points
  pool, point tasks    the old pool: one point per task, so every worker recomputes profiles
  pool, contiguous     2 workers take contiguous runs of the sweep order (the default)
  pool, group_by       2 workers, one task per (system, workload, scheme, minibatch)
  one profile          49 points sharing one profile (a bandwidth x compression sweep): the one
                       group is cut in two, each worker computes the profile, then half the points

Run: ``python benchmarks/bench_sweep.py`` (about a minute on 2 cores).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

from _machine import cpu_model, ratios, spread  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

REPO = Path(__file__).resolve().parents[1]

CHILD = """
import json, os, sys, time
from accelsim.dse import sweep as sw
from accelsim.dse import scenario
from accelsim.dse.scenario import evaluate_point

def timed(p):  # the real evaluator, plus which process ran the point and its CPU time so far
    row = evaluate_point(p, drop=spec.param_names)
    row.update(cpu_s=time.process_time(), pid=os.getpid())
    return row

cfg = json.loads(sys.argv[1])
spec = sw.spec_from_assignments(axes=cfg["axes"], defaults=scenario.defaults())
timed.columns = (*scenario.output_columns(spec), "cpu_s", "pid")
group = cfg["group"]
if group == "point":
    group = lambda p: sw.point_id(p)  # one point per task: the pool before grouping
elif group == "scenario":
    group = scenario.group_by()  # what accelsim sweep uses
kw = dict(executor=cfg["executor"], workers=cfg["workers"], progress=False, group_by=group)
c0, t0 = time.process_time(), time.perf_counter()
table = sw.run_sweep(spec, timed, None, **kw)
wall, own = time.perf_counter() - t0, time.process_time() - c0
assert (table.status == "ok").all(), table[table.status != "ok"].reason.tolist()
me = os.getpid()
workers = [] if cfg["executor"] == "serial" else table.groupby("pid").cpu_s.max().tolist()
print(json.dumps({"s": wall, "own_cpu": own, "worker_cpu": workers, "n": len(table),
                  "ips": table.samples_per_s.round(6).tolist()}))
"""

REALISTIC = ["scheme=fp16,fp8,hfp8", "minibatch=256,384,512,768", "chip_GBps=32,64,128",
             "compression=1,4,16"]
ONE_PROFILE = ["chip_GBps=16,32,64,128,256,512,1024", "compression=1,2,4,8,16,32,64"]


def run_once(axes, executor, workers, group, cores):
    cfg = json.dumps({"axes": axes, "executor": executor, "workers": workers, "group": group})
    r = subprocess.run([sys.executable, "-c", CHILD, cfg], cwd=REPO, check=True,
                       capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO)})
    got = json.loads(r.stdout.strip().splitlines()[-1])
    # The time this run would take on `cores` idle cores, from CPU times (immune to the other
    # load): the sweep process's own work (counted as if it never overlapped the workers') plus
    # the busiest worker, or all the CPU spread over the cores, whichever is longer.
    total = got["own_cpu"] + sum(got["worker_cpu"])
    got["cpu"] = total
    got["critical"] = max(got["own_cpu"] + max(got["worker_cpu"], default=0.0), total / cores)
    return got


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3, help="runs per configuration")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    w = args.workers
    print(f"machine: {os.cpu_count()} cores (nproc), {cpu_model()}, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start "
          "(a parallel speed-up needs idle cores)")
    print(f"min / median / max over {args.repeat} interleaved runs. wall: seconds (machine load "
          "included); x: serial / this, per run; cpu: CPU seconds of all processes (median); "
          f"critical: the wall time on {w} idle cores implied by the CPU times (this process + "
          f"the busiest worker, or all CPU / {w})")
    print(f"{'sweep':<44} {'points':>6} {'wall_s':>20} {'x':>17} {'cpu_s':>6} "
          f"{'critical_s':>20} {'x':>17}")
    failed = False
    for name, axes, configs in (
        ("108 points, 12 profiles", REALISTIC,
         [("serial", "serial", 1, None), (f"pool x{w}, point tasks", "process", w, "point"),
          (f"pool x{w}, contiguous", "process", w, None),
          (f"pool x{w}, group_by", "process", w, "scenario")]),
        ("49 points, 1 profile", ONE_PROFILE,
         [("serial", "serial", 1, None), (f"pool x{w}, group_by", "process", w, "scenario"),
          (f"pool x{w}, contiguous", "process", w, None)]),
    ):
        runs = {label: [] for label, *_ in configs}
        for _ in range(args.repeat):  # interleaved, so a change of machine load hits all alike
            for label, executor, workers, group in configs:
                runs[label].append(run_once(axes, executor, workers, group, w))
        ref_runs = runs[configs[0][0]]
        for label, *_ in configs:
            mine = runs[label]
            if any(g["ips"] != ref_runs[0]["ips"] for g in mine):  # same rows on every executor
                print(f"  !! {label}: rows differ from the serial run")
                failed = True
            wall = [g["s"] for g in mine]
            crit = [g["critical"] for g in mine]
            x_wall = ratios([g["s"] for g in ref_runs], wall)
            x_crit = ratios([g["critical"] for g in ref_runs], crit)
            print(f"{name + ': ' + label:<44} {mine[0]['n']:>6} {spread(wall, '{:.2f}'):>20} "
                  f"{spread(x_wall, '{:.2f}'):>17} {statistics.median(g['cpu'] for g in mine):6.2f} "
                  f"{spread(crit, '{:.2f}'):>20} {spread(x_crit, '{:.2f}'):>17}")
    print(f"load average {os.getloadavg()[0]:.1f} at the end")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
