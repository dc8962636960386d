"""Engines against exact arithmetic: Fraction oracles written here from the IEEE definition,
math.fsum, numerics.quantize, and the scalar reference twin (hypothesis)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arith import dot, fma, get_engine, matmul
from accelsim.arith._fast import round_fast
from accelsim.arith.reference import dot_reference
from accelsim.numerics import decode, get_format, quantize

# (precision p incl. hidden bit, emin, max) straight from IEEE 754 / the bf16 definition
IEEE = {"fp16": (11, -14, 65504.0), "fp32": (24, -126, float(np.finfo(np.float32).max)),
        "bf16": (8, -126, float.fromhex("0x1.fep127"))}


def ieee_round(X: Fraction, fmt: str, neg_zero: bool = False) -> float:
    """Correct RNE rounding of an exact rational to an IEEE binary format (the test oracle)."""
    p, emin, fmax = IEEE[fmt]
    if X == 0:
        return -0.0 if neg_zero else 0.0
    a = abs(X)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    q = Fraction(2) ** (max(e, emin) - p + 1)
    n, rem = divmod(a, q)
    n = int(n)
    if rem > q / 2 or (rem == q / 2 and n % 2):
        n += 1
    v = n * q
    r = math.inf if v > Fraction(fmax) else float(v)
    return -r if X < 0 else r


def _finite_values(fmt: str) -> np.ndarray:
    bits = get_format(fmt).bits
    v = decode(np.arange(2**bits, dtype=np.uint32).astype(get_format(fmt).code_dtype), fmt)
    return np.unique(v[np.isfinite(v)])


FP16 = _finite_values("fp16")


def _same(x: float, y: float) -> bool:
    return (math.isnan(x) and math.isnan(y)) or (x == y and math.copysign(1, x) == math.copysign(1, y))


# ---- the fast rounding helper equals numerics.quantize --------------------------------------

@pytest.mark.parametrize("fmt", ["fp32", "fp16", "bf16", "dlfloat16", "e4m3fn", "e5m2", "hfp8-143"])
@pytest.mark.parametrize("mode", ["rne", "rna", "rz"])
def test_round_fast_equals_quantize(fmt, mode):
    rng = np.random.default_rng(7)
    f = get_format(fmt)
    x = rng.standard_normal(4000) * 2.0 ** rng.integers(-45, 45, 4000)
    grid = quantize(x, fmt, "rz")
    ties = grid + np.ldexp(np.abs(grid), -(f.mbits + 1))  # exact midpoints in the normal range
    edges = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, f.max, -f.max, f.max * (1 + 2.0**-20),
                      f.min_normal, f.min_normal * (1 - 2.0**-12), f.min_normal / 2, f.min_subnormal,
                      f.min_subnormal / 2, -f.min_subnormal * 0.75])
    x = np.concatenate([x, ties, edges])
    for sat in (False, True):
        a = round_fast(x, f, mode, saturate=sat)
        b = quantize(x, fmt, mode, saturate=sat)
        same = (a == b) & (np.signbit(a) == np.signbit(b)) | (np.isnan(a) & np.isnan(b))
        assert same.all(), (x[~same][:3], a[~same][:3], b[~same][:3])


# ---- fp16-fma is one correctly rounded fp16 FMA ----------------------------------------------

def _fma_oracle(a: float, b: float, c: float) -> float:
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    both_neg_zero = exact == 0 and math.copysign(1, a * b) < 0 and math.copysign(1, c) < 0
    return ieee_round(exact, "fp16", neg_zero=both_neg_zero)


def _edge_triples():
    sub = [2.0**-24, 3 * 2.0**-24, 2.0**-14 - 2.0**-24, -(2.0**-20)]
    out = []
    for s in sub:  # subnormal products and sums
        out += [(s, 1.0, s), (s, 0.5, 2.0**-24), (s, -1.0, 2.0**-14), (2.0**-7, 2.0**-10, s)]
    out += [(300.0, 300.0, 0.0), (256.0, 256.0, -1.0), (255.875, 256.0, 65504.0),
            (65504.0, 1.0, 16.0), (65504.0, 1.0, 15.99), (-65504.0, 2.0, 65504.0)]  # overflow
    a = 1.0 + 2.0**-10
    out += [(a, a, -1.0), (a, a, -(a * a - 2.0**-20)), (a, -a, 1.0 + 2.0**-9),  # cancellation
            (1.0, 1.0, -1.0), (-0.0, 1.0, -0.0), (0.0, -1.0, -0.0), (0.0, 1.0, -0.0)]
    out += [(2.0**-11, 1.0, 1.0), (2.0**-11, 1.0, 1.0 + 2.0**-10), (-(2.0**-11), 1.0, -1.0),  # ties
            (2.0**-12, 1.0, -1.0), (3 * 2.0**-12, 1.0, 1.0), (2.0**-11, 1.0 + 2.0**-10, 1.0)]
    return [tuple(float(np.float16(v)) for v in t) for t in out]


def test_fp16_fma_edges_and_random_equal_one_rounding():
    eng = get_engine("fp16-fma")
    rng = np.random.default_rng(11)
    rand = FP16[rng.integers(0, FP16.size, (3, 3000))]
    near = FP16[np.abs(FP16) < 1e-3]  # many subnormal and small-normal triples
    small = near[rng.integers(0, near.size, (3, 1000))]
    edges = np.array(_edge_triples()).T
    A, B, C = np.concatenate([rand, small, edges], axis=1)
    got = fma(A, B, C, eng)
    for a, b, c, g in zip(A, B, C, got):
        assert _same(float(g), _fma_oracle(a, b, c)), (a, b, c, g)


# ---- exact: sum of exact products, rounded once ----------------------------------------------

def test_exact_equals_fsum_rounded_once():
    """e4m3 products are multiples of 2^-18 below 2^18: their float64 sums are exact, so fsum
    is the exact value and one float32 conversion the one rounding."""
    rng = np.random.default_rng(3)
    vals = _finite_values("e4m3fn")
    a = vals[rng.integers(0, vals.size, (20, 700))]
    b = vals[rng.integers(0, vals.size, (700, 9))]
    got = matmul(a, b, get_engine("exact"))
    want = np.array([[np.float32(math.fsum(a[i] * b[:, j])) for j in range(9)] for i in range(20)])
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))


@pytest.mark.parametrize("fa,fb,out", [("e5m2", "e5m2", "fp32"), ("e4m3fn", "e5m2", "bf16"),
                                       ("e5m2", "e4m3fn", "fp16")])
def test_exact_equals_fraction_sum_rounded_once(fa, fb, out):
    """Products spanning 2^-32..2^32 (two float64 limbs), cancelling giants and ties."""
    rng = np.random.default_rng(5)
    va, vb = _finite_values(fa), _finite_values(fb)
    K = 300
    a = va[rng.integers(0, va.size, (12, K))]
    b = vb[rng.integers(0, vb.size, (12, K))]
    tiny_a, tiny_b = va[va > 0].min(), vb[vb > 0].min()
    a[0, :3], b[0, :3] = [va.max(), tiny_a, -va.max()], [vb.max(), tiny_b, vb.max()]
    a[0, 3:], b[0, 3:] = 0.0, 0.0
    eng = get_engine("exact", a_format=fa, b_format=fb, out_format=out)
    got = dot(a, b, eng)
    for i in range(a.shape[0]):
        X = sum((Fraction(x) * Fraction(y) for x, y in zip(a[i], b[i])), Fraction(0))
        assert _same(float(got[i]), ieee_round(X, out)), i
    # giant + tiny - giant: the tiny product survives (a float64 running sum would lose it)
    assert got[0] == ieee_round(Fraction(tiny_a) * Fraction(tiny_b), out)
    if out != "fp16":
        assert got[0] != 0


def test_exact_hif8_keeps_denormal_products():
    """HiF8's denormals (down to 2^-22) lie below 2^(emin - mbits): the limb split must count
    them, or 2^11 + 2^-13 + 2^-44 loses its last term and rounds to even (2048) instead of up."""
    a, b = np.array([2.0**15, 2.0**-6, 2.0**-22]), np.array([2.0**-4, 2.0**-7, 2.0**-22])
    eng = get_engine("exact", a_format="hif8", b_format="hif8")
    X = sum(Fraction(x) * Fraction(y) for x, y in zip(a, b))
    assert dot(a, b, eng) == ieee_round(X, "fp32") == 2048.0 + 2.0**-12


# ---- fast engine == scalar reference (hypothesis) --------------------------------------------

VARIANTS = {
    "hfp8": {},
    "hfp8-nochunk": {"chunk": None},
    "hfp8-rne-chunk8": {"chunk": 8, "step_rounding": "rne", "outer_rounding": "rz"},
    "fp16-fma": {},
    "fp32-fma": {},
    "h100-fp8": {},
    "h100-fp8-fast": {"fast_accum": True},
    "h100-fp8-w4-rne": {"block_width": 4, "chunk": 8, "align_bits": 5, "step_bits": 6,
                        "align_rounding": "rne", "align_exponent": "value"},
    "h100-fp8-split3": {"split_k": 3, "out_format": "bf16"},
    "exact": {},
    "exact-mixed": {"b_format": "e5m2", "out_format": "fp16"},
    "exact-hif8": {"a_format": "hif8", "b_format": "hif8"},  # denormals below 2^(emin - mbits)
    "fp16-fma-prod-e5m2": {"product_format": "bf16", "step_format": "fp32", "out_format": "fp32"},
    # fast datapaths (tests/test_arith_fastpaths.py): native fp32 sums of bf16 products, FP8
    # products into fp16 / bf16 steps on float64 / float32 bit tricks
    "fp32-fma-bf16-chunk16": {"a_format": "bf16", "b_format": "bf16", "chunk": 16},
    "hfp8-fp16-steps": {"a_format": "e4m3fn", "b_format": "e5m2", "step_format": "fp16",
                        "step_rounding": "rne", "outer_format": "fp32", "outer_rounding": "rne", "chunk": 16},
    "hfp8-bf16-steps-rz": {"a_format": "e4m3fn", "b_format": "e4m3fn", "step_format": "bf16",
                           "step_rounding": "rz", "outer_format": "bf16", "outer_rounding": "rna"},
}


def _preset_of(variant: str) -> str:
    for p in ("hfp8", "fp16-fma", "fp32-fma", "h100-fp8", "exact"):
        if variant.startswith(p):
            return p
    raise KeyError(variant)


@st.composite
def _case(draw):
    variant = draw(st.sampled_from(sorted(VARIANTS)))
    eng = get_engine(_preset_of(variant), **VARIANTS[variant])
    K = draw(st.integers(eng.split_k, 70))
    va, vb = _finite_values(eng.a_format), _finite_values(eng.b_format)
    if eng.a_format == "fp16":  # keep fp16 FMA chains mostly finite
        va = va[np.abs(va) < 64]
        vb = vb[np.abs(vb) < 64]
    ia = draw(st.lists(st.integers(0, va.size - 1), min_size=K, max_size=K))
    ib = draw(st.lists(st.integers(0, vb.size - 1), min_size=K, max_size=K))
    return variant, eng, va[ia], vb[ib]


@given(_case())
@settings(max_examples=150)
def test_fast_engine_equals_reference(case):
    variant, eng, a, b = case
    got = dot(a, b, eng)
    want = dot_reference(a, b, eng)
    assert (math.isnan(got) and isinstance(want, float) and math.isnan(want)) or got == want, variant
