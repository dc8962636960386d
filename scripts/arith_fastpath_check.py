"""Fast datapaths == float64 reference datapath, bit for bit, on many larger random GEMMs.

The hypothesis test (tests/test_arith_fastpaths.py) covers small shapes; this runs ``--cases``
random engines (FMA with fp32/dlfloat16/fp16/bf16 steps and every rounding, H100-style aligned
blocks) on GEMMs up to 48 x 384 x 48 with operand mixes of every code, N(0,1), tiny, huge and
NaN/Inf, and counts which datapath ran and any mismatching output word. Exit status 1 on a
mismatch. Run: ``python scripts/arith_fastpath_check.py --cases 300 --seed 0`` (~5 s; 5,000 cases ~1.5 min).
"""

from __future__ import annotations

import argparse
import collections
import time

import numpy as np

from accelsim.arith import get_engine, matmul
from accelsim.arith.datapath import choose_path
from accelsim.numerics import decode, get_format, quantize

FP8 = [("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e5m2"), ("hfp8-143", "hfp8-152"),
       ("hif8", "hif8")]
WIDE = [("bf16", "bf16"), ("fp16", "fp16"), ("bf16", "e4m3fn")]
MIXES = ("codes", "normal", "tiny", "huge", "specials")


def operand(rng, fmt, shape, mix):
    f = get_format(fmt)
    if mix == "codes":
        v = decode(np.arange(2**f.bits, dtype=np.uint32).astype(f.code_dtype), fmt)
        v = v[np.isfinite(v)]
        return v[rng.integers(0, v.size, shape)]
    scale = {"tiny": f.min_normal * 4, "huge": f.max / 4}.get(mix, 1.0)
    x = quantize(rng.standard_normal(shape) * scale * 2.0 ** rng.integers(-3, 4, shape), fmt, saturate=True)
    if mix == "specials":
        pick = rng.random(shape)
        x[pick < 0.01] = np.nan
        if f.has_inf:
            x[(pick >= 0.01) & (pick < 0.02)] = np.inf
    return x


def random_engine(rng):
    pick = lambda xs: xs[rng.integers(len(xs))]  # noqa: E731
    chunk = pick([None, 8, 64, 128])
    kind = pick(["fp32", "narrow", "aligned"])
    if kind == "fp32":
        fa, fb = pick(FP8 + WIDE)
        return get_engine("fp32-fma", a_format=fa, b_format=fb, chunk=chunk,
                          step_rounding=pick(["rne", "rne", "rz"]), out_format=pick(["fp32", "bf16"]))
    if kind == "narrow":
        fa, fb = pick(FP8)
        step = pick(["dlfloat16", "fp16", "bf16"])
        return get_engine("hfp8", a_format=fa, b_format=fb, step_format=step, chunk=chunk,
                          step_rounding=pick(["rne", "rna", "rz"]), outer_format=pick([step, "fp32"]),
                          outer_rounding=pick(["rne", "rna"]), out_format="fp32")
    fa, fb = pick(FP8[:4] + WIDE[:2])
    W = pick([8, 16, 32])
    f = int(rng.integers(8, 15)) if fa[0] != "b" and fa != "fp16" else int(rng.integers(8, 29))
    return get_engine("h100-fp8", a_format=fa, b_format=fb, block_width=W, align_bits=f,
                      step_bits=pick([min(f, 23), None]), align_rounding=pick(["rz", "rne"]),
                      chunk=None if chunk is None else W * 4)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=300)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    paths: collections.Counter = collections.Counter()
    bad = 0
    t0 = time.perf_counter()
    for i in range(args.cases):
        eng = random_engine(rng)
        M, K, N = int(rng.integers(1, 49)), int(rng.integers(1, 385)), int(rng.integers(1, 49))
        mix = MIXES[rng.integers(len(MIXES))]
        a, b = operand(rng, eng.a_format, (M, K), mix), operand(rng, eng.b_format, (K, N), mix)
        finite_a, finite_b = np.where(np.isfinite(a), a, 0), np.where(np.isfinite(b), b, 0)
        paths[type(choose_path(eng, finite_a, finite_b, paired=False)).__name__] += 1
        got, ref = matmul(a, b, eng), matmul(a, b, eng, fast=False)
        n = int(np.count_nonzero(got.view(np.uint32) != ref.view(np.uint32)))
        if n:
            bad += 1
            print(f"case {i}: {n} mismatching words, {M}x{K}x{N}, {mix}, {eng}")
    print(f"{args.cases} cases in {time.perf_counter() - t0:.0f} s; datapaths: {dict(paths)}; "
          f"cases with a mismatch: {bad}")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
