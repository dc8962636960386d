"""Encode / quantize / decode speed and memory of accelsim.numerics against ml_dtypes, side by side.

Run: python benchmarks/bench_numerics.py [--n 4000000] [--repeat 5]
One run, same arrays for every row; min / median / max of N wall times, ours and the yardstick timed alternately
(fair under load; the load average is printed). Yardsticks (issue #12): ml_dtypes' bfloat16 and
float8 casts, en-dtypes' hifloat8, numpy's float16 cast (ml_dtypes has no fp16: numpy's is the one
its users call) and numpy's float32 cast for fp32. The yardstick of every row is the RNE cast, also
for our rna/rz/sr rows (the casts have no other mode). ``target`` rows are the issue's: RNE
encode/quantize of bf16/fp16 from float32 and float64, fp32 from float64, every 8-bit format from
float64; ``info`` rows have no target. ml_dtypes casts float64 through float32 (two roundings):
``2R: k`` counts the elements where that differs from our single rounding (the tests check ours
against the exact Fraction reference). Rows the numba kernels cover (extra ``jit``: bf16/fp16
rne/rna/rz, fp32 from float64) are timed with the kernels on (the default) and off
(``ACCELSIM_JIT=0``: the numpy/ml_dtypes paths) in the same run, both ratios printed; ``met``
judges the default path. The first-call cost of the kernels (compile into an empty cache, then
load from it) is measured in two fresh interpreters at the end.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

import numpy as np
from _machine import cpu_model as _cpu_model, no_jit, ratios, spread  # noqa: E402 (benchmarks/ is on sys.path when run as a script)


def _times(fns, repeat: int) -> list[list[float]]:
    """Every run's time of several functions, measured alternately (a change of load hits all
    alike, so per-run ratios are fair); the report prints min / median / max."""
    for fn in fns:  # warm-up (tables, caches, compiled kernels)
        fn()
    runs: list[list[float]] = [[] for _ in fns]
    for _ in range(repeat):
        for i, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn()
            runs[i].append(time.perf_counter() - t0)
    return runs


def _pair(fn_ours, fn_ref, repeat: int) -> tuple[list[float], list[float]]:
    t_o, t_r = _times([fn_ours, fn_ref], repeat)
    return t_o, t_r


_FIRST_CALL = """
import time
t0 = time.perf_counter()
import numpy as np
from accelsim.numerics import encode, quantize
x = np.linspace(-3.0, 3.0, 1000)
encode(x.astype(np.float32), "bf16")
t1 = time.perf_counter()
for dt in (np.float32, np.float64):
    encode(x.astype(dt), "bf16"), quantize(x.astype(dt), "bf16")
encode(x, "fp32")
print(f"{t1 - t0:.2f} {time.perf_counter() - t0:.2f}")
"""


def _first_call_seconds(cache_dir: str) -> tuple[float, float]:
    """(import + first bf16 encode, + the other four kernel kinds) in a fresh interpreter."""
    env = dict(os.environ, NUMBA_CACHE_DIR=cache_dir, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    out = subprocess.run([sys.executable, "-c", _FIRST_CALL], env=env, capture_output=True, text=True, check=True)
    first, total = out.stdout.split()
    return float(first), float(total)


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4_000_000, help="array length (default 4M)")
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions (default 5)")
    args = ap.parse_args(argv)

    import ml_dtypes

    from accelsim.numerics import decode, encode, get_format, quantize
    from accelsim.numerics.codec import _CHUNK as DECODE_CHUNK
    from accelsim.numerics.fast import CHUNK, jit_for, ml_bfloat16

    try:
        import numba
        numba_version = numba.__version__
    except ImportError:
        numba_version = None

    try:
        import en_dtypes
    except ImportError:  # pragma: no cover
        en_dtypes = None

    n, rep = args.n, args.repeat
    rng = np.random.default_rng(0)
    x64 = rng.standard_normal(n) * np.exp2(rng.uniform(-12, 8, n))
    x32 = x64.astype(np.float32)
    t_start = time.perf_counter()
    print(f"machine: {os.cpu_count()} cpus, {_cpu_model()}; load average {os.getloadavg()[0]:.2f} (1 min); "
          f"numpy {np.__version__}, ml_dtypes {ml_dtypes.__version__}; n = {n:,}; data N(0,1) * 2^U(-12,8); "
          f"min / median / max over {rep} alternating runs")
    print(f"bf16 RNE by ml_dtypes' cast when the kernels are off (probe passed): {ml_bfloat16() is not None}; "
          f"numba kernels: {'numba ' + numba_version if numba_version else 'not installed'}")
    hdr = (f"{'op':8s} {'format':9s} {'mode':4s} {'input':7s} {'jit M/s':>8s} {'numpy M/s':>9s} {'ref M/s':>8s} "
           f"{'jit x':>16s} {'numpy x':>16s} {'same codes':>11s}  {'kind':6s} {'met':>3s}")
    print(hdr)
    print("-" * len(hdr))
    summary: list[tuple[str, float, float]] = []  # (row, ratio of the default path, ratio without the kernels)

    def row(op, name, mode, x, fn_ours, fn_ref, same, target):
        jit = jit_for(x.dtype, get_format(name), mode) is not None
        if jit:
            t_j, t_o, t_r = _times([fn_ours, no_jit(fn_ours), fn_ref], rep)
        else:
            (t_o, t_r), t_j = _pair(fn_ours, fn_ref, rep), None
        r_o = ratios(t_r, t_o)  # per-run yardstick time / our time
        r_j = ratios(t_r, t_j) if jit else r_o
        ratio, ratio_o = statistics.median(r_j), statistics.median(r_o)
        met = ("yes" if ratio >= 1 else "NO") if target else ""
        if target:
            summary.append((f"{op} {name} {mode} {x.dtype}", ratio, ratio_o))
        mps = lambda t: n / statistics.median(t) / 1e6  # noqa: E731
        jit_rate, jit_ratio = (f"{mps(t_j):8.0f}", spread(r_j, "{:.2f}")) if jit else ("-", "-")
        print(f"{op:8s} {name:9s} {mode:4s} {str(x.dtype):7s} {jit_rate:>8s} {mps(t_o):9.0f} "
              f"{mps(t_r):8.0f} {jit_ratio:>16s} {spread(r_o, '{:.2f}'):>16s} {same:>11s}  "
              f"{'target' if target else 'info':6s} {met:>3s}")

    def codes_same(ours, ref) -> str:
        diff = int(np.count_nonzero(ours != ref))
        return "yes" if diff == 0 else f"2R: {diff}"

    # 16-bit: every mode, float32 and float64 in; the yardstick is the RNE cast (sr draws from a Generator)
    sixteen = [("bf16", ml_dtypes.bfloat16), ("fp16", np.float16)]
    for name, ref_t in sixteen:
        for op in ("encode", "quantize"):
            for x in (x32, x64):
                with np.errstate(all="ignore"):
                    ref_codes = x.astype(ref_t)
                for mode in ("rne", "rna", "rz", "sr"):
                    g = (lambda: np.random.default_rng(1)) if mode == "sr" else (lambda: None)
                    if op == "encode":
                        ours = lambda: encode(x, name, mode, rng=g())  # noqa: E731
                        ref = lambda: x.astype(ref_t)  # noqa: E731
                        same = codes_same(ours(), ref_codes.view(np.uint16)) if mode == "rne" else "-"
                    else:
                        ours = lambda: quantize(x, name, mode, rng=g())  # noqa: E731
                        # the same output dtype as ours: float32 in -> float32 out (the format fits)
                        ref = lambda: x.astype(ref_t).astype(x.dtype)  # noqa: E731
                        same = ("yes" if np.array_equal(ours(), ref(), equal_nan=True) else "2R") if mode == "rne" else "-"
                    row(op, name, mode, x, ours, ref, same, mode == "rne")
    # fp32 from float64: numpy's cast is the yardstick (ml_dtypes has no float32 type)
    same = codes_same(encode(x64, "fp32"), x64.astype(np.float32).view(np.uint32))
    row("encode", "fp32", "rne", x64, lambda: encode(x64, "fp32"), lambda: x64.astype(np.float32), same, True)
    # 8-bit: float32 (info) and float64 (target) in
    eight = [("e4m3fn", "rne", ml_dtypes.float8_e4m3fn), ("e5m2", "rne", ml_dtypes.float8_e5m2),
             ("hfp8-143", "rne", ml_dtypes.float8_e4m3b11fnuz)]
    if en_dtypes is not None:
        eight.append(("hif8", "rna", en_dtypes.hifloat8))
    for name, mode, ref_t in eight:
        for x in (x32, x64):
            with np.errstate(all="ignore"):
                same = codes_same(encode(x, name, mode), x.astype(ref_t).view(np.uint8))
            row("encode", name, mode, x, lambda: encode(x, name, mode), lambda: x.astype(ref_t), same, x is x64)
    worst = min(summary, key=lambda s: s[1])
    missed = [f"{k} {r:.2f}" for k, r, _ in summary if r < 1]
    missed_off = sum(r < 1 for _, _, r in summary)
    print(f"ratio = yardstick time / our time per run, min / median / max (>= 1: at least as fast; "
          f"targets judged on the median); jit: the numba kernels, numpy: "
          f"ACCELSIM_JIT=0. Targets met {len(summary) - len(missed)}/{len(summary)} "
          f"(without the kernels {len(summary) - missed_off}/{len(summary)}); worst: {worst[0]} {worst[1]:.2f}; "
          f"missed: {'; '.join(missed) or 'none'}")

    # a NaN costs only its own code: one NaN in every chunk vs none
    xn = x32.copy()
    xn[::CHUNK] = np.nan
    for name in ("bf16", "fp16", "e4m3fn"):
        t_nan, t_clean = _pair(lambda: encode(xn, name), lambda: encode(x32, name), 3 * rep)
        print(f"one NaN per {CHUNK}-element chunk, {name} encode: "
              f"{spread(ratios(t_nan, t_clean), '{:.2f}')}x the clean time")
    for name in ("e4m3fn", "bf16", "fp32"):
        codes = encode(x32, name)
        decode(codes[:8], name)
        out_bytes = 8 * n
        peak = _peak_bytes(lambda: decode(codes, name))
        print(f"decode {name}: peak {peak / 2**20:.1f} MiB = output {out_bytes / 2**20:.1f} MiB + "
              f"{(peak - out_bytes) / 2**20:.2f} MiB (one decode chunk = {8 * DECODE_CHUNK / 2**20:.2f} MiB of float64)")
    for x in (x32, x64):
        peak_q = _peak_bytes(lambda: quantize(x, "bf16")) / (8 * n)
        print(f"quantize {x.dtype} -> bf16 values: peak {peak_q:.2f}x the float64 output")
    if numba_version:
        with tempfile.TemporaryDirectory() as cache:
            cold, warm = _first_call_seconds(cache), _first_call_seconds(cache)
        print(f"kernels' first call in a fresh interpreter (import, numba, first bf16 encode / + 4 more kinds): "
              f"cold cache {cold[0]:.2f} / {cold[1]:.2f} s (compile), warm cache {warm[0]:.2f} / {warm[1]:.2f} s (load)")
    print(f"load average {os.getloadavg()[0]:.2f} at the end; {time.perf_counter() - t_start:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
