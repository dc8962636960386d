"""Encode / quantize / decode speed and memory of accelsim.numerics against ml_dtypes, side by side.

Run: python benchmarks/bench_numerics.py [--n 4000000] [--repeat 5]
One run, same arrays for every row; best-of-N wall time, ours and the reference timed alternately;
peak extra memory from tracemalloc. References: ml_dtypes astype (bf16, FP8), numpy astype for
fp16 and fp32 (ml_dtypes has neither; numpy's cast is the one users call), en-dtypes for HiF8. ml_dtypes
casts float64 through float32 (two roundings): rows marked "2R" count the elements where that
differs from our single rounding (each checked against the exact reference in the tests).
"""

from __future__ import annotations

import argparse
import os
import time
import tracemalloc

import numpy as np
from _machine import cpu_model as _cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)


def _pair(fn_ours, fn_ref, repeat: int) -> tuple[float, float]:
    """Best-of-``repeat`` times of two functions measured alternately (fair under load)."""
    fn_ours(), fn_ref()  # warm-up (tables, caches)
    t_o, t_r = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn_ours()
        t1 = time.perf_counter()
        fn_ref()
        t2 = time.perf_counter()
        t_o.append(t1 - t0)
        t_r.append(t2 - t1)
    return min(t_o), min(t_r)


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
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions, best kept (default 5)")
    args = ap.parse_args(argv)

    import ml_dtypes

    from accelsim.numerics import decode, encode, quantize
    from accelsim.numerics.fast import CHUNK

    try:
        import en_dtypes
    except ImportError:  # pragma: no cover
        en_dtypes = None

    n = args.n
    rng = np.random.default_rng(0)
    x64 = rng.standard_normal(n) * np.exp2(rng.uniform(-12, 8, n))
    x32 = x64.astype(np.float32)
    print(f"machine: {os.cpu_count()} cpus, {_cpu_model()}; numpy {np.__version__}, ml_dtypes "
          f"{ml_dtypes.__version__}; n = {n:,}; data N(0,1) * 2^U(-12,8)")
    cases = [
        ("bf16", "rne", ml_dtypes.bfloat16),
        ("fp16", "rne", np.float16),
        ("e4m3fn", "rne", ml_dtypes.float8_e4m3fn),
        ("e5m2", "rne", ml_dtypes.float8_e5m2),
        ("hfp8-143", "rne", ml_dtypes.float8_e4m3b11fnuz),
    ]
    if en_dtypes is not None:
        cases.append(("hif8", "rna", en_dtypes.hifloat8))
    hdr = (f"{'op':8s} {'format':9s} {'mode':4s} {'input':7s} {'ours M/s':>9s} {'ref M/s':>8s} {'ratio':>6s}"
           f" {'same codes':>12s}")
    print(hdr)
    print("-" * len(hdr))
    worst: dict[str, float] = {}

    def row(op, name, mode, x, t_o, t_r, same, group):
        ratio = t_r / t_o
        worst[group] = min(worst.get(group, np.inf), ratio)
        print(f"{op:8s} {name:9s} {mode:4s} {str(x.dtype):7s} {n / t_o / 1e6:9.0f} {n / t_r / 1e6:8.0f} "
              f"{ratio:6.2f} {same:>12s}")

    for name, mode, ref_t in cases:
        view = np.uint8 if np.dtype(ref_t).itemsize == 1 else np.uint16
        for x in (x32, x64):
            ours = encode(x, name, mode)
            with np.errstate(all="ignore"):
                ref = x.astype(ref_t).view(view)
            diff = int(np.count_nonzero(ours != ref))
            same = "yes" if diff == 0 else f"2R: {diff}"
            t_o, t_r = _pair(lambda: encode(x, name, mode), lambda: x.astype(ref_t), args.repeat)
            if x is x64:
                group = "encode from float64"
            else:
                group = "16-bit encode from float32" if view is np.uint16 else "8-bit encode from float32"
            row("encode", name, mode, x, t_o, t_r, same, group)
    for name, mode, ref_t in cases[:2]:
        for x in (x32, x64):
            same = "yes" if np.array_equal(quantize(x, name, mode), x.astype(ref_t).astype(np.float64),
                                           equal_nan=True) else "2R"
            t_o, t_r = _pair(lambda: quantize(x, name, mode), lambda: x.astype(ref_t).astype(np.float64),
                             args.repeat)
            row("quantize", name, mode, x, t_o, t_r, same, "16-bit quantize")  # ref: astype, then to float64
    ours = encode(x64, "fp32")
    same = "yes" if np.array_equal(ours, x64.astype(np.float32).view(np.uint32)) else "no"
    t_o, t_r = _pair(lambda: encode(x64, "fp32"), lambda: x64.astype(np.float32), args.repeat)
    row("encode", "fp32", "rne", x64, t_o, t_r, same, "fp32 from float64 (ref: numpy cast)")
    print("ratio = reference time / our time (>= 1: at least as fast). Worst per group: "
          + "; ".join(f"{g} {w:.2f}" for g, w in worst.items()))

    # a NaN costs only its own code: one NaN in every chunk vs none
    xn = x32.copy()
    xn[:: CHUNK] = np.nan
    for name in ("bf16", "fp16", "e4m3fn"):
        t_nan, t_clean = _pair(lambda: encode(xn, name), lambda: encode(x32, name), 3 * args.repeat)
        print(f"one NaN per {CHUNK}-element chunk, {name} encode: {t_nan / t_clean:.2f}x the clean time")
    for name in ("e4m3fn", "bf16", "fp32"):
        codes = encode(x32, name)
        decode(codes[:8], name)
        out_bytes = 8 * n
        peak = _peak_bytes(lambda: decode(codes, name))
        print(f"decode {name}: peak {peak / 2**20:.1f} MiB = output {out_bytes / 2**20:.1f} MiB + "
              f"{(peak - out_bytes) / 2**20:.2f} MiB (one chunk = {8 * CHUNK / 2**20:.2f} MiB of float64)")
    peak_q = _peak_bytes(lambda: quantize(x32, "bf16")) / (8 * n)
    print(f"quantize float32 -> bf16 values: peak {peak_q:.2f}x the float64 output")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
