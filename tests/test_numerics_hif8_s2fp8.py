"""HiF8 encode against en-dtypes (TA rounding), overflow/underflow edges; S2FP8 statistics."""

from __future__ import annotations

import numpy as np
import pytest

from accelsim.numerics import decode, encode, quantize, s2fp8_quantize, s2fp8_stats

en = pytest.importorskip("en_dtypes")


def _en_codes(x):
    with np.errstate(all="ignore"):
        return x.astype(en.hifloat8).view(np.uint8)


def test_hif8_rna_matches_en_dtypes_random_and_edges():
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << 32, 1_000_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    near = (rng.standard_normal(1_000_000) * np.exp2(rng.uniform(-25, 17, 1_000_000))).astype(np.float32)
    t = decode(np.arange(256), "hif8")
    v = np.unique(np.abs(t[np.isfinite(t)]))
    mids = ((v[1:] + v[:-1]) / 2).astype(np.float32)
    edges = np.array([1.25 * 2**15, 2**16, 1.5 * 2**15, 2.0**-23, 1.5 * 2.0**-23, 2.0**-24, np.inf, np.nan],
                     dtype=np.float32)
    pts = np.concatenate([v.astype(np.float32), mids, edges])
    pts = np.concatenate([pts, np.nextafter(pts, np.float32(0)), np.nextafter(pts, np.float32(np.inf))])
    x = np.concatenate([bits, near, pts, -pts])
    with np.errstate(invalid="ignore"):
        x64 = x.astype(np.float64)
    for xs in (x, x64):
        ours = encode(xs, "hif8", "rna")
        assert np.array_equal(ours, _en_codes(xs)), np.flatnonzero(ours != _en_codes(xs))[:5]


def test_hif8_edges_documented():
    # overflow threshold for TA: 1.25 x 2^15 (midpoint to the virtual 1.5 x 2^15) -> inf
    below = np.nextafter(1.25 * 2**15, 0)
    assert list(quantize([below, 1.25 * 2**15], "hif8", "rna")) == [2**15, np.inf]
    assert list(quantize([1.25 * 2**15], "hif8", "rne")) == [2**15]  # tie goes to the even code
    assert list(quantize([1e6, -1e6], "hif8", "rna", saturate=True)) == [2**15, -(2**15)]
    # between 2^-23 and 2^-22: TA rounds 2^-23 up to the smallest denormal, below goes to 0
    assert list(quantize([2.0**-23, np.nextafter(2.0**-23, 0)], "hif8", "rna")) == [2.0**-22, 0.0]
    # NaN-to-zero option; a single zero (no -0)
    assert list(quantize([np.nan], "hif8", "rna", nan_to_zero=True)) == [0.0]
    assert encode([-0.0], "hif8")[0] == 0 and encode([np.nan], "hif8")[0] == 0x80
    assert list(encode([np.inf, -np.inf], "hif8")) == [0x6F, 0xEF]


def test_overflow_policies_per_format():
    assert np.isnan(quantize([1e6], "e4m3fn")[0]) and quantize([1e6], "e4m3fn", saturate=True)[0] == 448
    assert quantize([1e6], "e5m2")[0] == np.inf and quantize([-1e6], "e5m2", saturate=True)[0] == -57344
    assert quantize([1e6], "e5m2", "rz")[0] == 57344  # IEEE: round-toward-zero never overflows
    assert quantize([np.inf], "e5m2", saturate=True)[0] == np.inf  # infinities stay infinite
    assert quantize([np.inf], "e4m3fn", saturate=True)[0] == 448  # no inf in the format
    assert np.isnan(quantize([31.0], "hfp8-143")[0])  # tie to even 32 > max 30 -> NaN
    assert np.isnan(quantize([1e10], "dlfloat16", "rna")[0])
    # dlfloat16 flushes underflow to zero (no subnormals)
    assert quantize([2.0**-31, 2.0**-32], "dlfloat16", "rna").tolist() == [0.0, 0.0]


def test_s2fp8_definition():
    rng = np.random.default_rng(0)
    x = rng.standard_normal(4096) * 1e-5
    alpha, beta = s2fp8_stats(x)
    lg = np.log2(np.abs(x))
    assert alpha == pytest.approx(15 / (lg.max() - lg.mean()), rel=1e-12)
    assert beta == pytest.approx(-alpha * lg.mean(), rel=1e-12)
    r = s2fp8_quantize(x)
    # the squeezed maximum sits at 2^15, representable in E5M2; signs are kept
    assert np.isclose(2**beta * np.abs(x).max() ** alpha, 2.0**15)
    assert np.all(np.sign(r.values[r.values != 0]) == np.sign(x[r.values != 0]))
    # values of the squeezed tensor are exactly E5M2 values
    y = 2**r.beta * np.abs(r.values) ** r.alpha
    assert np.allclose(y, quantize(y, "e5m2"), rtol=1e-9)
    # relative error near the mean magnitude is about E5M2's, far better than plain E5M2
    mid = np.abs(np.log2(np.abs(x)) - lg.mean()) < 1
    assert np.max(np.abs(r.values[mid] / x[mid] - 1)) < 0.15 / alpha + 1e-9
    # plain E5M2 flushes most of this tensor to zero; S2FP8 keeps the bulk of it
    assert np.mean(quantize(x, "e5m2") == 0) > 0.5 > np.mean(r.values == 0)


def test_s2fp8_degenerate_tensors():
    assert np.array_equal(s2fp8_quantize(np.zeros(3)).values, np.zeros(3))
    # All magnitudes equal: the map is a pure shift (alpha = 1) that is exact in real arithmetic;
    # in floating point it goes through exp2(log2(.)), which libm rounds differently on different
    # builds (AVX-512 numpy: exp2(log2(3)) = 2.9999999999999996). The invariant is a few ulps,
    # with the signs and zeros kept exactly.
    v = s2fp8_quantize([3.0, -3.0, 0.0]).values
    np.testing.assert_allclose(v, [3.0, -3.0, 0.0], rtol=4 * np.finfo(np.float64).eps, atol=0)
    assert np.signbit(v).tolist() == [False, True, False] and v[2] == 0.0


def test_a_formats_own_rounding_is_the_default():
    """issue 21, item 14: ``quantize(x, "hif8")`` rounds as HiF8 does (TA: ties away), checked
    against en-dtypes; RNE for hif8 only when named."""
    assert quantize(1.0625, "hif8") == 1.125  # the tie between 1.0 and 1.125 goes away from 0
    assert quantize(1.0625, "hif8", "rne") == 1.0
    t = decode(np.arange(256), "hif8")
    v = np.unique(np.abs(t[np.isfinite(t)]))
    ties = np.concatenate([(v[1:] + v[:-1]) / 2, -(v[1:] + v[:-1]) / 2])
    assert np.array_equal(encode(ties, "hif8"), _en_codes(ties))
    # dlfloat16's default is rna too; the IEEE-style formats keep rne
    tie16 = 1 + 2.0**-10  # halfway between 1 and 1 + 2^-9 in dlfloat16's 9 fraction bits
    assert quantize(tie16, "dlfloat16") == 1 + 2.0**-9
    assert quantize(1 + 2.0**-11, "fp16") == 1.0
