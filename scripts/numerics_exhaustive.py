"""Exhaustive check: every one of the 2^32 float32 bit patterns encodes exactly like the reference.

    python scripts/numerics_exhaustive.py [--formats e4m3fn,e5m2,...] [--chunk-log2 24]

References: ml_dtypes astype (rne) for e4m3fn, e5m2, hfp8-143 (float8_e4m3b11fnuz), hfp8-152,
bf16; numpy astype for fp16 (NaN payloads compared by class and sign: numpy keeps payloads, we
emit the canonical quiet NaN); en-dtypes hifloat8 astype (TA = rna) for hif8.
Prints mismatches per format and the wall time; exit status 1 on any mismatch.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np


def _references():
    import ml_dtypes

    refs = {
        "e4m3fn": ("rne", ml_dtypes.float8_e4m3fn),
        "e5m2": ("rne", ml_dtypes.float8_e5m2),
        "hfp8-143": ("rne", ml_dtypes.float8_e4m3b11fnuz),
        "hfp8-152": ("rne", ml_dtypes.float8_e5m2),
        "bf16": ("rne", ml_dtypes.bfloat16),
        "fp16": ("rne", np.float16),
    }
    try:
        import en_dtypes

        refs["hif8"] = ("rna", en_dtypes.hifloat8)
    except ImportError:
        print("en-dtypes not installed: skipping hif8", file=sys.stderr)
    return refs


def check_format(name: str, mode: str, ref_type, chunk_log2: int) -> tuple[int, float]:
    from tqdm import tqdm

    from accelsim.numerics import decode, encode

    itemsize = np.dtype(ref_type).itemsize
    view = np.uint8 if itemsize == 1 else np.uint16
    step = 1 << chunk_log2
    bad = 0
    t0 = time.perf_counter()
    for start in tqdm(range(0, 1 << 32, step), desc=f"{name:9s} {mode}", unit="chunk", leave=False):
        u = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32)
        x = u.view(np.float32)
        ours = encode(x, name, mode)
        with np.errstate(all="ignore"):
            ref = x.astype(ref_type).view(view)
        if name == "fp16":
            nan = np.isnan(decode(ref, name))
            bad += int(np.count_nonzero(np.isnan(decode(ours, name)) != nan))
            bad += int(np.count_nonzero((ours[nan] >> 15) != (ref[nan] >> 15)))
            bad += int(np.count_nonzero(ours[~nan] != ref[~nan]))
        else:
            bad += int(np.count_nonzero(ours != ref))
    return bad, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    refs = _references()
    ap.add_argument("--formats", default=",".join(refs), help=f"comma-separated subset of {','.join(refs)}")
    ap.add_argument("--chunk-log2", type=int, default=24, help="log2 of patterns per chunk (default 24)")
    args = ap.parse_args(argv)
    names = [n for n in args.formats.split(",") if n]
    unknown = [n for n in names if n not in refs]
    if unknown:
        ap.error(f"unknown format(s) {unknown}; choose from {list(refs)}")
    total_bad = 0
    t_all = time.perf_counter()
    for name in names:
        mode, ref_type = refs[name]
        bad, dt = check_format(name, mode, ref_type, args.chunk_log2)
        total_bad += bad
        print(f"{name:9s} {mode}: {bad} mismatches over 2^32 float32 patterns ({dt:.0f} s)", flush=True)
    verdict = "PASS" if total_bad == 0 else "FAIL"
    print(f"{verdict}: {total_bad} mismatches in total, {time.perf_counter() - t_all:.0f} s")
    return 0 if total_bad == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
