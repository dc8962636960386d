"""Bit-exact encode against ml_dtypes (and numpy's float16) for rne, float32 and float64 inputs."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from accelsim.numerics import decode, encode, get_format, quantize
from accelsim.numerics.reference import round_reference

ML = {
    "fp16": np.float16,
    "bf16": ml_dtypes.bfloat16,
    "e4m3fn": ml_dtypes.float8_e4m3fn,
    "e5m2": ml_dtypes.float8_e5m2,
    "hfp8-143": ml_dtypes.float8_e4m3b11fnuz,
    "hfp8-152": ml_dtypes.float8_e5m2,
}


def _ref_codes(x, name):
    t = ML[name]
    with np.errstate(all="ignore"):
        return x.astype(t).view(np.uint8 if np.dtype(t).itemsize == 1 else np.uint16)


def _assert_codes_equal(ours, ref, name, x):
    if name == "fp16":  # numpy keeps NaN payloads; we emit the canonical quiet NaN (sign kept)
        nan = np.isnan(decode(ref, name))
        assert np.array_equal(np.isnan(decode(ours, name)), nan)
        assert np.array_equal(ours[nan] >> 15, ref[nan] >> 15)
        ours, ref, x = ours[~nan], ref[~nan], x[~nan]
    bad = np.flatnonzero(ours != ref)
    assert bad.size == 0, (
        f"{name}: {bad.size} mismatches, first x={x[bad[:5]]!r} ours={ours[bad[:5]]} ml_dtypes={ref[bad[:5]]}"
    )


def special_float32(name) -> np.ndarray:
    """Every class of float32 input for a target: all representable values, all midpoints
    (ties at every binade) and their float32 neighbours, overflow edges, subnormals of both
    formats, zeros, infinities, NaNs with payloads, float32 extremes."""
    f = get_format(name)
    t = decode(np.arange(1 << f.bits), name)
    v = np.unique(np.abs(t[np.isfinite(t)]))
    mids = (v[1:] + v[:-1]) / 2
    top = f.max + 2.0 ** (f.emax - f.mbits - 1)  # overflow threshold (max + half ulp)
    pts = np.concatenate([v, mids, [top, 2 * f.max, f.min_subnormal / 2, f.min_subnormal / 4]])
    with np.errstate(over="ignore"):
        pts = pts.astype(np.float32)
        nb = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    f32 = np.finfo(np.float32)
    extra = np.array(
        [0.0, f32.smallest_subnormal, f32.smallest_normal, f32.max, np.inf], dtype=np.float32
    )
    nans = np.array([0x7FC00000, 0x7F800001, 0x7FA00000, 0x7FFFFFFF], dtype=np.uint32).view(np.float32)
    allp = np.concatenate([nb, extra, nans])
    return np.concatenate([allp, -allp])


@pytest.mark.parametrize("name", list(ML))
def test_special_classes_float32_bit_exact(name):
    x = special_float32(name)
    _assert_codes_equal(encode(x, name, "rne"), _ref_codes(x, name), name, x)


@pytest.mark.parametrize("name", list(ML))
def test_random_float32_bit_exact(name):
    rng = np.random.default_rng(20260101)
    bits = rng.integers(0, 1 << 32, 1_000_000, dtype=np.uint64).astype(np.uint32)
    # half uniform bit patterns (all classes), half concentrated on the format's range
    f = get_format(name)
    lo, hi = np.log2(f.min_subnormal) - 2, np.log2(f.max) + 1
    with np.errstate(over="ignore"):
        near = (rng.standard_normal(1_000_000) * np.exp2(rng.uniform(lo, hi, 1_000_000))).astype(np.float32)
    x = np.concatenate([bits.view(np.float32), near])
    _assert_codes_equal(encode(x, name, "rne"), _ref_codes(x, name), name, x)


@pytest.mark.parametrize("name", list(ML))
def test_float64_inputs_single_rounding(name):
    """ml_dtypes converts float64 through float32 (two roundings); we round once. Where the two
    differ, float32(x) is a tie of the target grid that x itself is not, and our answer equals
    the exact Fraction reference."""
    rng = np.random.default_rng(7)
    f = get_format(name)
    lo, hi = np.log2(f.min_subnormal) - 2, np.log2(f.max) + 1
    n = 300_000
    x = rng.standard_normal(n) * np.exp2(rng.uniform(lo, hi, n))
    # values just off the ties, where double rounding bites
    t = decode(np.arange(1 << min(f.bits, 8)) if f.bits == 8 else np.arange(0, 1 << 16, 97), name)
    v = np.unique(np.abs(t[np.isfinite(t)]))
    mids = (v[1:] + v[:-1]) / 2
    x = np.concatenate([x, mids * (1 + 2.0**-40), mids * (1 - 2.0**-40)])
    ours = encode(x, name, "rne")
    ref = _ref_codes(x, name)
    diff = np.flatnonzero(ours != ref)
    with np.errstate(over="ignore"):
        x32 = x.astype(np.float32).astype(np.float64)
    for i in diff[:200]:
        assert x32[i] != x[i]
        assert quantize(x[i : i + 1], name)[0] == round_reference(float(x[i]), name, "rne")
    same = np.setdiff1d(np.arange(x.size), diff)
    _assert_codes_equal(ours[same], ref[same], name, x[same])
    # outside the double-rounding cases everything agrees
    assert np.all(x32[diff] != x[diff])


def test_fp32_from_float64_matches_numpy_cast():
    rng = np.random.default_rng(11)
    bits = rng.integers(0, np.iinfo(np.uint64).max, 500_000, dtype=np.uint64, endpoint=True)
    x = bits.view(np.float64)
    x = x[np.isfinite(x)]
    with np.errstate(over="ignore"):
        ref = x.astype(np.float32)
    assert np.array_equal(encode(x, "fp32"), ref.view(np.uint32))
    assert np.array_equal(quantize(x, "fp32"), ref.astype(np.float64))
