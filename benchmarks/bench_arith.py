"""Emulated multiply-accumulates per second of accelsim.arith.matmul, side by side with a yardstick.

Yardstick (issue 12): the 15-line numpy loop below -- fp32 products, fp32 running sums,
promotion every 64 -- whose output is bit-identical to ``fp32-fma`` with ``chunk=64`` (checked
here). Targets: engines with fp32 partial sums >= 0.7x the yardstick; ``hfp8`` (DLFloat16 steps,
chunk 64) and ``h100-fp8`` >= 1 G MAC/s at 512^3 on 2 cores and (issue 33) >= 0.4x the yardstick.
Each engine runs twice per round, with the ``jit`` extra (numba: the compiled datapaths) and
without it (``ACCELSIM_JIT=0``: the numpy datapaths), so the table shows that installing the
extra never makes an engine slower; targets are judged with the extra when numba is installed.
Every engine row is also run on the float64 reference datapath once (``fast=False``) and must
agree bit for bit. Min / median / max of ``--repeat`` runs, interleaved with the yardstick's so
each ratio is measured in one window; peak memory is the tracemalloc peak of one matmul over the
operands' float64 bytes. Run: ``python benchmarks/bench_arith.py`` (``--size 256`` for a quick look).
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import statistics
import time
import tracemalloc

import numpy as np

from accelsim.arith import get_engine, matmul
from accelsim.arith.kloop import default_threads
from accelsim.numerics import quantize
from _machine import cpu_model, jit_off, no_jit, ratios, spread  # noqa: E402 (benchmarks/ is on sys.path when run as a script)

TARGET_MACS = 1e9
TARGET_RATIO = 0.7  # engines with fp32 partial sums
TARGET_RATIO_8BIT = 0.4  # hfp8, h100-fp8 (issue 33), besides TARGET_MACS
# (label, preset, overrides, target kind)
ROWS = [
    ("fp32-fma chunk 64", "fp32-fma", {"chunk": 64}, "ratio"),
    ("fp32-fma", "fp32-fma", {}, "ratio"),
    ("bf16 x bf16 -> fp32 FMA", "fp32-fma", {"a_format": "bf16", "b_format": "bf16", "chunk": 64}, "ratio"),
    ("fp16 x fp16 -> fp32 FMA", "fp32-fma", {"a_format": "fp16", "b_format": "fp16", "chunk": 64}, "ratio"),
    ("hfp8", "hfp8", {}, "macs"),
    ("h100-fp8", "h100-fp8", {}, "macs"),
    ("exact", "exact", {}, None),
    ("exact fp32 x fp32", "exact", {"a_format": "fp32", "b_format": "fp32"}, None),
    ("fp16-fma", "fp16-fma", {}, None),
]


def numpy_loop(a, b, chunk=64):
    """The yardstick: fp32 products, fp32 running sums, promotion every ``chunk``."""
    a32, b32 = a.astype(np.float32), b.astype(np.float32)
    M, K = a32.shape
    out = np.zeros((M, b32.shape[1]), np.float32)
    for k0 in range(0, K, chunk):
        inner = np.zeros_like(out)
        for k in range(k0, min(K, k0 + chunk)):
            inner += a32[:, k, None] * b32[None, k, :]
        out += inner
    return out


def run_times(fns, repeat: int, clock=time.perf_counter) -> list[list[float]]:
    """Every run's time of each function, their runs interleaved: on a shared machine the load
    changes by the second, and interleaving keeps a ratio's two timings in the same window."""
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = clock()
            fn()
            runs[i].append(clock() - t0)
    return runs


med = statistics.median
HAVE_NUMBA = importlib.util.find_spec("numba") is not None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=512, help="M = N = K (default 512)")
    ap.add_argument("--repeat", type=int, default=3, help="runs per row (default 3)")
    args = ap.parse_args()
    n = args.size
    macs = n**3
    rng = np.random.default_rng(0)
    print(f"machine: {os.cpu_count()} cores (nproc), {cpu_model()}, Python {platform.python_version()}, "
          f"numpy {np.__version__}, load average {os.getloadavg()[0]:.1f} at start")
    print(f"GEMM {n} x {n} x {n} = {macs / 1e6:.1f} M MACs, min / median / max of {args.repeat} runs "
          f"(rates and targets on the median); matmul uses the "
          f"{default_threads()} usable cores (threads over output tiles or rows), the yardstick one\n")
    a64, b64 = rng.standard_normal((n, n)), rng.standard_normal((n, n))
    ya = quantize(a64, "e4m3fn", saturate=True)
    yb = quantize(b64, "e4m3fn", saturate=True)
    (t_yard_runs,) = run_times([lambda: numpy_loop(ya, yb)], args.repeat)
    t_yard = med(t_yard_runs)
    same = np.array_equal(numpy_loop(ya, yb).view(np.uint32),
                          matmul(ya, yb, get_engine("fp32-fma", chunk=64)).view(np.uint32))
    print(f"yardstick numpy loop (fp32, promotion every 64): {spread(t_yard_runs)} s = "
          f"{macs / t_yard / 1e9:.2f} G MAC/s (median); "
          f"bit-identical to fp32-fma chunk 64: {same}\n")
    t_np = med(run_times([lambda: a64 @ b64], args.repeat)[0])
    modes = ["jit", "no jit"] if HAVE_NUMBA else ["no jit"]
    print("jit extra (numba): " + ("installed: every engine runs with it and without it (ACCELSIM_JIT=0)"
                                   if HAVE_NUMBA else "not installed: the numpy datapaths only"))
    print("each row: the yardstick and the engine, runs interleaved; 'x yard' = yardstick time / "
          "engine time in that run's window (median);\n'1 thread, per CPU s' = G MAC per CPU second "
          f"of a one-thread run ({modes[0]}; its ratio to the yardstick's), a load-independent view")
    head = "".join(f" {'time s ' + m + ', min/med/max':>27} {'G MAC/s':>7} {'x yard':>6}" for m in modes)
    print(f"{'engine':<24}{head} {'target':>18} {'met':>4} {'= ref':>5} {'peak mem/ops':>12} {'1 thread, per CPU s':>20}")
    slower = []
    for label, preset, kw, target in ROWS:
        eng = get_engine(preset, **kw)
        a = quantize(a64, eng.a_format, saturate=True)
        b = quantize(b64, eng.b_format, saturate=True)
        run = lambda: matmul(a, b, eng)  # noqa: E731
        fns = [lambda: numpy_loop(ya, yb)] + [run if m == "jit" else no_jit(run) for m in modes]
        for fn in fns[1:]:
            fn()  # compile (the jit kernels) outside the timed runs
        t_ys, *t_modes = run_times(fns, args.repeat)
        cells = "".join(f" {spread(ts):>27} {macs / med(ts) / 1e9:7.2f} {med(ratios(t_ys, ts)):6.2f}"
                        for ts in t_modes)
        rate, ratio = macs / med(t_modes[0]), med(ratios(t_ys, t_modes[0]))  # with the extra if installed
        if len(t_modes) == 2 and eng.block_width is not None and ratio < med(ratios(t_ys, t_modes[1])):
            slower.append(label)  # (the exact engine takes no compiled path: its two columns differ by noise)
        one = ""
        if target:  # one thread, CPU seconds: what one idle core would do, whatever the load
            one_run = lambda: matmul(a, b, eng, threads=1)  # noqa: E731
            cy, c1 = run_times([lambda: numpy_loop(ya, yb), one_run if modes[0] == "jit" else no_jit(one_run)],
                               args.repeat, clock=time.process_time)
            one = f"{macs / med(c1) / 1e9:10.2f} ({med(ratios(cy, c1)):4.2f}x)"
        got = matmul(a, b, eng)
        ref = matmul(a, b, eng, fast=False)
        equal = np.array_equal(got.view(np.uint32), ref.view(np.uint32))
        if HAVE_NUMBA:
            with jit_off():
                equal = equal and np.array_equal(matmul(a, b, eng).view(np.uint32), ref.view(np.uint32))
        tracemalloc.start()
        matmul(a, b, eng)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        if target == "ratio":
            tgt, met = f">= {TARGET_RATIO}x yard", ratio >= TARGET_RATIO
        elif target == "macs":
            tgt, met = f">= 1 G/s, {TARGET_RATIO_8BIT}x", rate >= TARGET_MACS and ratio >= TARGET_RATIO_8BIT
        else:
            tgt, met = "-", None
        print(f"{label:<24}{cells} {tgt:>18} {'-' if met is None else ('yes' if met else 'NO'):>4} "
              f"{str(equal):>5} {peak / (a.nbytes + b.nbytes):12.1f} {one}")
    print(f"{'numpy f64 a @ b (BLAS)':<24} {t_np:27.4f} {macs / t_np / 1e9:7.1f} {t_yard / t_np:6.0f}")
    if HAVE_NUMBA:
        print(f"stepped engines slower with the jit extra than without (median ratio): {', '.join(slower) or 'none'}"
              " (the exact rows take no compiled path either way)")
    wide_range(a64, b64, rng, args.repeat)
    print(f"\nend load average {os.getloadavg()[0]:.1f} (other processes on the 2 cores slow every row alike)")
    return 0


def wide_range(a64, b64, rng, repeat: int) -> None:
    """The exact engine on FP32 operands spread over 2^-100 .. 2^100: the products span ~450
    bits, so the slices path runs many BLAS products and the limb reference many limbs."""
    from accelsim.arith.exact import exact_sums

    n = a64.shape[0]
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    a = quantize(a64 * 2.0 ** rng.integers(-100, 101, a64.shape), "fp32")
    b = quantize(b64 * 2.0 ** rng.integers(-100, 101, b64.shape), "fp32")
    print(f"\nexact engine, fp32 operands x 2^U(-100, 100) (products over ~450 bits), {n}^3:")
    ref = None
    for method in ("slices", "limbs"):
        t = med(run_times([lambda: exact_sums(a, b, eng, method=method)],
                          repeat if method == "slices" else 1)[0])
        got = exact_sums(a, b, eng, method=method)
        ref = got if ref is None else ref
        print(f"  {method:<8} {t:7.3f} s {n**3 / t / 1e9:8.3f} G MAC/s   = slices: {np.array_equal(got, ref)}")


if __name__ == "__main__":
    raise SystemExit(main())
