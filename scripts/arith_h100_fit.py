"""Pin the h100-fp8 parameters on the H100 bits: mismatch counts over a parameter grid.

Every engine variant is run on all 53,459 stored outputs (tests/data/h100_fp8, a copy of
../shared/data/h100_fp8); the table lists the mismatching words per variant, best first. The
preset is the unique zero of the grid. Run: ``python scripts/arith_h100_fit.py`` (~1 min).
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path

import numpy as np

from accelsim.arith import dot, get_engine, matmul
from accelsim.numerics import decode

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "h100_fp8" / "h100_fp8_gemm.npz"
FMT = {"e4m3": "e4m3fn", "e5m2": "e5m2"}


def load_cases():
    with np.load(DATA, allow_pickle=False) as d:
        npz = {k: d[k] for k in d.files}
    cases = []
    for k in sorted(npz):
        if not k.endswith("_a"):
            continue
        base = k[:-2]
        fa, fb = (FMT[x] for x in base.split("_")[-2].split("x"))
        a, b = decode(npz[base + "_a"], fa), decode(npz[base + "_b"], fb)
        for fast in (0, 1):
            for out in ("f32", "bf16"):
                key = f"{base}_d_{out}_fast{fast}"
                if key in npz:
                    cases.append((key, fa, fb, fast, out, a, b, npz[key]))
    return cases


def mismatches(cases, **overrides) -> int:
    bad = 0
    for key, fa, fb, fast, out, a, b, ref in cases:
        kw = dict(overrides)
        if fast:
            kw["chunk"] = None
        eng = get_engine("h100-fp8", a_format=fa, b_format=fb, out_format="fp32" if out == "f32" else "bf16", **kw)
        r = matmul(a, b, eng) if key.startswith("rand") else dot(a, b, eng)
        got = r.view(np.uint32) if out == "f32" else (r.view(np.uint32) >> 16).astype(np.uint16)
        bad += int(np.count_nonzero(got != ref.reshape(got.shape)))
    return bad


def main() -> int:
    cases = load_cases()
    total = sum(c[-1].size for c in cases)
    print(f"fit rows: all {total} stored H100 output words of {len(cases)} cases (label 'fit' "
          "in scripts/validate_all.py: the preset is chosen on these same words)")
    t0 = time.perf_counter()
    rows = []
    for bits, width, chunk, rnd, expo in itertools.product((11, 12, 13, 14, 15), (8, 16, 32, 64),
                                                           (64, 128, 256, None), ("rz", "rne"),
                                                           ("field", "value")):
        if chunk is not None and chunk % width:
            continue
        kw = dict(align_bits=bits, step_bits=bits, block_width=width, chunk=chunk,
                  align_rounding=rnd, step_bits_rounding=rnd, align_exponent=expo)
        rows.append((mismatches(cases, **kw), kw))
    for sb in (12, 14, None):  # step cut different from the alignment cut
        kw = dict(step_bits=sb)
        rows.append((mismatches(cases, **kw), kw))
    rows.sort(key=lambda r: r[0])
    print(f"{len(rows)} variants x {total} H100 output words, {time.perf_counter() - t0:.0f} s")
    print(f"{'mismatches':>10}  variant (fast_accum=1 data always run without promotion)")
    for bad, kw in rows[:15]:
        print(f"{bad:>10}  {kw}")
    zeros = [kw for bad, kw in rows if bad == 0]
    print(f"\nvariants matching every bit: {len(zeros)}: {zeros}")
    return 0 if len(zeros) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
