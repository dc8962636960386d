"""Exhaustive check: every one of the 2^32 float32 bit patterns encodes exactly like the reference.

    python scripts/numerics_exhaustive.py [--formats e4m3fn,e5m2,...] [--chunk-log2 24]
    python scripts/numerics_exhaustive.py --against general [--modes rne,rna,rz] [--formats bf16,fp16]

``--against general`` compares the bit-trick fast path with the exact general path instead (every
format, every deterministic mode, saturate off and on); slow (the general path is ~50 ns/element).

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


def check_against_general(name: str, mode: str, chunk_log2: int, stride: int = 1) -> tuple[int, float]:
    from tqdm import tqdm

    from accelsim.numerics import encode, get_format
    from accelsim.numerics.general import encode_general

    f = get_format(name)
    step = 1 << chunk_log2
    bad = 0
    t0 = time.perf_counter()
    for start in tqdm(range(0, 1 << 32, step * stride), desc=f"{name:9s} {mode}", unit="chunk", leave=False):
        x = np.arange(start, start + step, dtype=np.uint64).astype(np.uint32).view(np.float32)
        with np.errstate(invalid="ignore"):
            x64 = x.astype(np.float64)
        for saturate in (False, True):
            ours = encode(x, name, mode, saturate=saturate)
            ref = encode_general(x64, f, mode, saturate=saturate, rng=None, nan_to_zero=False)
            bad += int(np.count_nonzero(ours != ref))
    return bad, time.perf_counter() - t0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    refs = _references()
    ap.add_argument("--formats", default=",".join(refs), help=f"comma-separated subset of {','.join(refs)}")
    ap.add_argument("--chunk-log2", type=int, default=24, help="log2 of patterns per chunk (default 24)")
    ap.add_argument("--against", choices=("libraries", "general"), default="libraries",
                    help="compare with ml_dtypes/numpy/en-dtypes (default) or with our general path")
    ap.add_argument("--modes", default="rne,rna,rz", help="modes for --against general")
    ap.add_argument("--stride", type=int, default=1, help="--against general: check one chunk in STRIDE (smoke runs)")
    args = ap.parse_args(argv)
    names = [n for n in args.formats.split(",") if n]
    if args.against == "general":
        from accelsim.numerics import FORMAT_NAMES

        if args.formats == ",".join(refs):
            names = [n for n in FORMAT_NAMES if n != "fp32"]
        total_bad = 0
        for name in names:
            for mode in args.modes.split(","):
                bad, dt = check_against_general(name, mode, args.chunk_log2, args.stride)
                total_bad += bad
                span = "2^32" if args.stride == 1 else f"2^32/{args.stride}"
                print(f"{name:9s} {mode}: {bad} fast-vs-general mismatches over {span} patterns x 2 saturate "
                      f"({dt:.0f} s)", flush=True)
        print(f"{'PASS' if total_bad == 0 else 'FAIL'}: {total_bad} mismatches in total")
        return 0 if total_bad == 0 else 1
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
