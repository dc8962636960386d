"""Encode speed and peak memory of accelsim.numerics against ml_dtypes / en-dtypes, side by side.

Run: python benchmarks/bench_numerics.py [--n 10000000] [--repeat 5]
Same float32 array for every row; best-of-N wall time; peak extra memory from tracemalloc.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
import tracemalloc

import numpy as np
from _machine import cpu_model as _cpu_model  # noqa: E402 (benchmarks/ is on sys.path when run as a script)




def _best(fn, repeat: int) -> float:
    fn()  # warm-up (builds and caches the lookup table)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def _peak_bytes(fn) -> int:
    tracemalloc.start()
    tracemalloc.reset_peak()
    fn()
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return peak


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=10_000_000, help="array length (default 10M)")
    ap.add_argument("--repeat", type=int, default=5, help="timed repetitions, best kept (default 5)")
    args = ap.parse_args(argv)

    import ml_dtypes

    from accelsim.numerics import encode

    try:
        import en_dtypes
    except ImportError:  # pragma: no cover
        en_dtypes = None

    rng = np.random.default_rng(0)
    x = (rng.standard_normal(args.n) * np.exp2(rng.uniform(-12, 8, args.n))).astype(np.float32)
    print(f"machine: {os.cpu_count()} cpus, {_cpu_model()}; numpy {np.__version__}; n = {args.n:,} float32")
    cases = [
        ("e4m3fn", "rne", ml_dtypes.float8_e4m3fn),
        ("e5m2", "rne", ml_dtypes.float8_e5m2),
        ("hfp8-143", "rne", ml_dtypes.float8_e4m3b11fnuz),
    ]
    if en_dtypes is not None:
        cases.append(("hif8", "rna", en_dtypes.hifloat8))
    hdr = f"{'format':9s} {'mode':5s} {'ours Melem/s':>13s} {'ref Melem/s':>12s} {'ratio':>6s} {'same codes':>10s} {'peak/input':>10s}"
    print(hdr)
    print("-" * len(hdr))
    worst = np.inf
    for name, mode, ref_t in cases:
        ours = encode(x, name, mode)
        ref = x.astype(ref_t).view(np.uint8)
        same = bool(np.array_equal(ours, ref))
        t_ours = _best(lambda: encode(x, name, mode), args.repeat)
        t_ref = _best(lambda: x.astype(ref_t), args.repeat)
        peak = _peak_bytes(lambda: encode(x, name, mode)) / x.nbytes
        ratio = t_ref / t_ours
        worst = min(worst, ratio)
        print(
            f"{name:9s} {mode:5s} {args.n / t_ours / 1e6:13.1f} {args.n / t_ref / 1e6:12.1f} "
            f"{ratio:6.2f} {str(same):>10s} {peak:10.2f}"
        )
    print(f"ratio = reference time / our time (>= 1 means at least as fast); worst {worst:.2f}")
    from accelsim.numerics import quantize

    peak_q = _peak_bytes(lambda: quantize(x, "e4m3fn")) / x.nbytes
    print(f"quantize float32 -> e4m3fn values (float64 output = 2x input): peak/input {peak_q:.2f}x")
    peak64 = _peak_bytes(lambda: encode(x[: args.n // 10].astype(np.float64), "e4m3fn")) / (x.nbytes / 10 * 2)
    print(f"general path (float64 input, e4m3fn rne encode): peak/input {peak64:.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
