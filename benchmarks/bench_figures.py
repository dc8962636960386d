"""Speed of the main job: ``accelsim figures`` end to end, analytic and DES engines, side by side.

Targets (issue 6): under 60 s with the analytic engine and under 5 minutes with the DES engine
on a 2-core machine. Run: ``python benchmarks/bench_figures.py`` (``--quick``: analytic only).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from _machine import cpu_model, ratios, spread  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

REPO = Path(__file__).resolve().parents[1]
TARGETS_S = {"analytic": 60.0, "des": 300.0}




def time_main_job(engine: str) -> float:
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "accelsim", "figures", "--out", out, "--engine",
                        engine, "--no-progress"], cwd=REPO, check=True,
                       stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def time_sweep(executor: str, workers: int) -> float:
    """An 8-point sweep with 8 distinct compute profiles (minibatch x scheme): the explorer runs
    once per point, so this measures the process pool's parallel speed-up."""
    with tempfile.TemporaryDirectory() as out:
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "accelsim", "sweep", "--axis", "minibatch=256,384,512,768",
                        "--axis", "scheme=fp16,fp8", "--executor", executor, "--workers",
                        str(workers), "--no-progress", "--out", f"{out}/s.csv"], cwd=REPO,
                       check=True, stdout=subprocess.DEVNULL)
        return time.perf_counter() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="analytic engine only")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each job")
    args = ap.parse_args()
    engines = ["analytic"] if args.quick else ["analytic", "des"]
    rep = max(1, args.repeat)
    print(f"machine: {os.cpu_count()} cores (nproc), {cpu_model()}, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start "
          "(a parallel speed-up needs idle cores)")
    print(f"min / median / max over {rep} runs")
    print(f"{'job':<34} {'time_s':>20} {'target_s':>9} {'target/median':>14}")
    for eng in engines:
        t = [time_main_job(eng) for _ in range(rep)]
        print(f"{'accelsim figures --engine ' + eng:<34} {spread(t, '{:.1f}'):>20} "
              f"{TARGETS_S[eng]:9.0f} {TARGETS_S[eng] / statistics.median(t):13.1f}x")
    if not args.quick:
        ts, tp = [], []
        for _ in range(rep):  # alternately: both see the same load
            ts.append(time_sweep("serial", 1))
            tp.append(time_sweep("process", os.cpu_count() or 1))
        print(f"{'accelsim sweep (8 points) serial':<34} {spread(ts, '{:.1f}'):>20}")
        print(f"{'accelsim sweep (8 points) process':<34} {spread(tp, '{:.1f}'):>20} {'':9} "
              f"{spread(ratios(ts, tp), '{:.2f}')}x speed-up on {os.cpu_count()} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
