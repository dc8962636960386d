"""Speed of the perf/dse area (issue 4 item 7), measured side by side in one run.

    python benchmarks/bench_perf.py [--workers 2] [--repeat 5]

Every time is min / median / max over the runs (``--repeat``; the DSE ``--dse-repeat``).

1. per-layer systolic cycles of all of SCALE-Sim's ResNet-50 (54 layers, 128x128, WS and OS,
   SCALE-Sim compatible): the vectorized model vs the slow per-fold reference loop, and SCALE-Sim
   v3's own wall time as recorded in the golden files' headers (target: well under 1 s);
2. the per-layer x phase roofline table of torchvision ResNet-50 on the 64-chip system;
3. the full design-space exploration of ResNet-50 on arch_configs/hfp8-64chip.toml for the three
   schemes fp16, fp8, hfp8 (target: < 30 s on 2 cores), with a process pool vs serially
   (``--skip-dse`` leaves it out);
4. the GPU model (issue 11): one ``gemm_time`` (target < 0.2 s) and one ResNet-50 ``predict``
   (target < 1 s) on arch_configs/a100-sxm.toml, in process and as the CLI commands
   (``accelsim gemm`` / ``accelsim predict --json``: Python start-up and imports included).
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
import os
import platform
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path
from _machine import cpu_model as _cpu_model, ratios, spread, timed  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

REPO = Path(__file__).resolve().parents[1]
GOLDEN = REPO / "tests" / "data" / "scalesim"




def _timeit(fn, repeat: int) -> list[float]:
    """Every run's seconds (the report prints min / median / max)."""
    return timed(fn, repeat)


med = statistics.median


def _scalesim_wall_s(dataflow: str) -> float | None:
    path = GOLDEN / f"scalesim_v3_resnet50_128x128_{dataflow}_cycles.csv"
    if not path.is_file():
        return None
    m = re.search(r"SCALE-Sim wall time (\d+) s", path.read_text())
    return float(m.group(1)) if m else None


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", type=int, default=2, help="process-pool workers for the DSE")
    p.add_argument("--repeat", type=int, default=5, help="repetitions of the fast timings")
    p.add_argument("--dse-repeat", type=int, default=3, help="runs of the 64-chip DSE (3.)")
    p.add_argument("--skip-dse", action="store_true", help="leave out the 64-chip DSE (3.)")
    args = p.parse_args(argv)

    from accelsim.arch import load_system
    from accelsim.dse import explore
    from accelsim.perf import gemm_cycles, layer_table, workload_cycles
    from accelsim.workload import load_workload, read_scalesim_topology

    print(f"machine: {os.cpu_count()} CPUs ({len(os.sched_getaffinity(0))} usable), "
          f"{_cpu_model()}, Python {platform.python_version()}, {platform.system()}")
    rows = []
    topo = read_scalesim_topology(GOLDEN / "resnet50_scalesim_topology.csv")
    for df in ("ws", "os"):
        fast = _timeit(lambda: workload_cycles(topo, 128, 128, df, scalesim_compat=True),
                       args.repeat)
        gem = [layer.gemms(1)["fwd"] for layer in topo.layers]
        slow = _timeit(lambda: [gemm_cycles(g.M, g.N, g.K, 128, 128, df) for g in gem], 1)
        ss = _scalesim_wall_s(df)
        rows.append((f"ResNet-50 cycles, 54 layers, 128x128 {df} (table, vectorized)", fast,
                     f"slow reference loop (no table) {med(slow) * 1e3:.1f} ms"
                     + (f"; SCALE-Sim v3 {ss:.0f} s (recorded) = {ss / med(fast):,.0f}x"
                        if ss else "")))

    sys64 = load_system(REPO / "arch_configs" / "hfp8-64chip.toml")
    resnet = load_workload(REPO / "workloads" / "resnet50.toml")
    t = _timeit(lambda: layer_table(sys64, resnet, 1024, "hfp8"), args.repeat)
    rows.append(("ResNet-50 layer x phase roofline table (175 layers, 1 mapping)", t, ""))

    from accelsim.engine.run import predict_step
    from accelsim.perf.gemm import gemm_time

    a100 = load_system(REPO / "arch_configs" / "a100-sxm.toml")
    t = _timeit(lambda: gemm_time(a100, 8192, 8192, 8192, "bf16"), args.repeat)
    rows.append(("gemm_time 8192^3 bf16 on A100 (in process)", t, f"target 0.2 s: {0.2 / med(t):,.0f}x under"))
    t = _timeit(lambda: predict_step(a100, resnet, 256, "fp16", fusion=True), args.repeat)
    rows.append(("predict ResNet-50 b256 fp16 on A100 (in process)", t, f"target 1 s: {1 / med(t):.1f}x under"))
    env = dict(os.environ, PYTHONPATH=str(REPO))
    # the floor any numpy-based CLI pays on this machine: the interpreter plus `import numpy`
    floor = _timeit(lambda: subprocess.run([sys.executable, "-c", "import numpy"], cwd=REPO,
                                           env=env, check=True, capture_output=True), 5)
    rows.append(("python -c 'import numpy' (floor of any numpy CLI)", floor, ""))
    for name, cmd, target in (
            ("accelsim gemm --json (CLI, incl. Python start-up)",
             ["gemm", "--system", "arch_configs/a100-sxm.toml", "--m", "8192", "--n", "8192",
              "--k", "8192", "--scheme", "bf16", "--json"], 0.2),
            ("accelsim predict resnet50 --json (CLI, incl. start-up)",
             ["predict", "--system", "arch_configs/a100-sxm.toml", "--workload", "resnet50",
              "--batch", "256", "--scheme", "fp16", "--json"], 1.0)):
        t = _timeit(lambda: subprocess.run([sys.executable, "-m", "accelsim", *cmd], cwd=REPO,
                                           env=env, check=True, capture_output=True), 5)
        rows.append((name, t, f"target {target} s: {'met' if med(t) < target else 'MISSED'}; "
                              f"{med(t) - med(floor):.3f} s above the numpy floor (medians)"))
    if args.skip_dse:
        res = []
        _report(rows, res)
        return 0

    def dse(executor, workers=None):
        return [explore(sys64, resnet, 1024, s, executor=executor, max_workers=workers)
                for s in ("fp16", "fp8", "hfp8")]

    ser, par = [], []
    for _ in range(max(1, args.dse_repeat)):  # alternately: both see the same load
        t0 = time.perf_counter()
        res = dse("serial")
        ser.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with ProcessPoolExecutor(max_workers=args.workers) as pool:  # one pool for all schemes
            dse(pool)
        par.append(time.perf_counter() - t0)
    n_pts = sum(len(r.points) for r in res)
    rows.append(("full DSE ResNet-50, 64 chips, fp16+fp8+hfp8, serial", ser, f"{n_pts:,} points"))
    rows.append((f"same, one pool of {args.workers} processes (incl. start-up)", par,
                 f"{spread(ratios(ser, par), '{:.2f}')}x serial (per-run ratios)"))
    _report(rows, res)
    return 0


def _report(rows, res) -> None:
    w = max(len(r[0]) for r in rows)
    print(f"\n{'benchmark':<{w}}  {'seconds: min / median / max':>29}  notes")
    for name, secs, note in rows:
        print(f"{name:<{w}}  {spread(secs, '{:.4f}'):>29}  {note}")
    if res:
        print("\nbest plans (batch 1024):")
        for r in res:
            b = r.best
            print(f"  {r.scheme:>5}: {b['strategy']}/{b['dataflow']}/overlap={b['overlap']}: "
                  f"{b['samples_per_s']:,.0f} images/s, step {b['step_s'] * 1e3:.3f} ms, "
                  f"{b['utilization']:.1%} of peak")


if __name__ == "__main__":
    sys.exit(main())
