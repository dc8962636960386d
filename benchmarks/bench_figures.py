"""Speed of the main job: ``accelsim figures`` end to end, analytic and DES engines, side by side.

Targets (issue 6): under 60 s with the analytic engine and under 5 minutes with the DES engine
on a 2-core machine. Run: ``python benchmarks/bench_figures.py`` (``--quick``: analytic only).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from _machine import cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

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
    args = ap.parse_args()
    engines = ["analytic"] if args.quick else ["analytic", "des"]
    print(f"machine: {os.cpu_count()} cores (nproc), {cpu_model()}, Python "
          f"{platform.python_version()}, load average {os.getloadavg()[0]:.1f} at start "
          "(a parallel speed-up needs idle cores)")
    print(f"{'job':<34} {'time_s':>8} {'target_s':>9} {'target/time':>12}")
    for eng in engines:
        t = time_main_job(eng)
        print(f"{'accelsim figures --engine ' + eng:<34} {t:8.1f} {TARGETS_S[eng]:9.0f} "
              f"{TARGETS_S[eng] / t:11.1f}x")
    if not args.quick:
        ts = time_sweep("serial", 1)
        tp = time_sweep("process", os.cpu_count() or 1)
        print(f"{'accelsim sweep (8 points) serial':<34} {ts:8.1f}")
        print(f"{'accelsim sweep (8 points) process':<34} {tp:8.1f} {'':9} {ts / tp:11.2f}x "
              f"speed-up on {os.cpu_count()} workers")
    return 0


if __name__ == "__main__":
    sys.exit(main())
