"""The exact engine with wide operand formats (fp32, bf16, fp16) against exact Fraction sums.

Oracles written here from the definitions: the exact sum of the products in ``fractions``, its
round-to-odd at 53 bits (what ``exact_sums`` promises), and its correct rounding to fp32 / bf16 /
fp16 (what ``matmul`` / ``dot`` return). Operands are drawn as raw bit patterns, so every
exponent of the format is equally likely: subnormals, zeros of both signs, the largest values.
Every path of the engine ("slices", "limbs", "two-limb", "blas", and ``fast=False``) is checked.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arith import dot, get_engine, matmul
from accelsim.arith._fast import digits_round_to_odd
from accelsim.arith.exact import exact_sums

# precision p (with the hidden bit), emin, largest finite value: IEEE 754 / the bf16 definition
IEEE = {"fp32": (24, -126, float(np.finfo(np.float32).max)),
        "bf16": (8, -126, float.fromhex("0x1.fep127")),
        "fp16": (11, -14, 65504.0)}


def _exp(a: Fraction) -> int:
    e = a.numerator.bit_length() - a.denominator.bit_length()
    return e - 1 if Fraction(2) ** e > a else e


def round_odd53(X: Fraction) -> float:
    """X rounded to 53 significant bits by round-to-odd (truncate; last bit set if inexact)."""
    if X == 0:
        return 0.0
    q = Fraction(2) ** (_exp(abs(X)) - 52)
    n, rem = divmod(abs(X), q)
    n = int(n) | (1 if rem else 0)
    return math.copysign(float(n * q), X)


def round_to(X: Fraction, fmt: str, mode: str = "rne") -> float:
    """Correct rounding of X to an IEEE binary format (rne, rna or rz; overflow: inf / max)."""
    p, emin, fmax = IEEE[fmt]
    if X == 0:
        return 0.0
    q = Fraction(2) ** (max(_exp(abs(X)), emin) - p + 1)
    n, rem = divmod(abs(X), q)
    n = int(n)
    if mode == "rne":
        n += rem > q / 2 or (rem == q / 2 and n % 2 == 1)
    elif mode == "rna":
        n += rem >= q / 2
    v = n * q
    if v > Fraction(fmax):
        r = fmax if mode == "rz" else math.inf
    else:
        r = float(v)
    return math.copysign(r, X)


def exact(a, b) -> Fraction:
    return sum((Fraction(x) * Fraction(y) for x, y in zip(a, b)), Fraction(0))


def _values(bits: list[int], fmt: str) -> np.ndarray:
    """Finite values of a format from raw bit patterns (non-finite patterns become 0)."""
    if fmt == "fp32":
        v = np.array(bits, dtype=np.uint32).view(np.float32)
    elif fmt == "bf16":
        v = (np.array(bits, dtype=np.uint32) << 16).view(np.float32)
    else:
        v = np.array(bits, dtype=np.uint16).view(np.float16)
    with np.errstate(invalid="ignore"):
        v = v.astype(np.float64)  # NaN patterns stay NaN: replaced below
    return np.where(np.isfinite(v), v, 0.0)


def _same(x: float, y: float) -> bool:
    return x == y or (math.isnan(x) and math.isnan(y))


@st.composite
def operands(draw, fmt: str, k_max: int = 300):
    """(a, b) of length K: random bit patterns plus the hard cases -- x and -x, a giant product
    cancelled by its negative around a tiny one, and a constructed tie at an fp32 midpoint."""
    width = 32 if fmt == "fp32" else 16
    K = draw(st.integers(1, k_max))
    a = _values(draw(st.lists(st.integers(0, 2**width - 1), min_size=K, max_size=K)), fmt)
    b = _values(draw(st.lists(st.integers(0, 2**width - 1), min_size=K, max_size=K)), fmt)
    kind = draw(st.sampled_from(["random", "negated", "cancel", "tie"]))
    if kind == "negated" and K >= 2:  # every product appears with both signs: the sum is 0
        h = K // 2
        a[h:2 * h], b[h:2 * h] = -a[:h], b[:h]
    elif kind == "cancel" and K >= 3:  # giant + tiny - giant: only the tiny product survives
        i = draw(st.integers(0, K - 3))
        a[i + 1], b[i + 1] = -a[i], b[i]
        a[i + 2], b[i + 2] = a[K - 1], b[K - 1]
        a[K - 1] = b[K - 1] = 0.0
    elif kind == "tie" and K >= 3:
        # m + ulp(m)/2 sits exactly on an fp32 midpoint; a third product, far below, decides
        # the rounding: a float64 sum would lose it and round to even
        m = float(np.float32(draw(st.floats(1.0, 2.0))) * 2.0 ** draw(st.integers(-60, 60)))
        half = 2.0 ** (math.frexp(m)[1] - 1 - 24)
        sign = draw(st.sampled_from([1.0, -1.0, 0.0]))
        a[:3] = [m, half, sign * 2.0**-100]
        b[:3] = [1.0, 1.0, 2.0**-100]
        a[3:] = 0.0
        if fmt != "fp32":  # m, half must be in the operand format: use a bf16/fp16 grid
            a[:3] = [1.0 + 2.0**-7, 2.0**-8, sign * 2.0**-12] if fmt == "bf16" else [1.0 + 2.0**-10, 2.0**-11, sign * 2.0**-14]
            b[:3] = [1.0, 1.0, 2.0**-12] if fmt == "bf16" else [1.0, 1.0, 2.0**-14]
    return a, b


FAST = ["slices", "limbs", "two-limb", "auto"]


def _sums(a, b, eng, method):
    """exact_sums of one dot product on one path; None where the path cannot take the data."""
    try:
        return float(exact_sums(a[None, :], b[None, :], eng, paired=True, method=method)[0, 0])
    except ValueError:
        assert method in ("two-limb", "blas")  # only these refuse data (span too wide)
        return None


@pytest.mark.parametrize("fmt", ["fp32", "bf16", "fp16"])
@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_exact_sums_are_round_to_odd_of_the_exact_sum(fmt, data):
    a, b = data.draw(operands(fmt))
    eng = get_engine("exact", a_format=fmt, b_format=fmt)
    want = round_odd53(exact(a, b))
    for method in FAST + ["blas"]:
        got = _sums(a, b, eng, method)
        assert got is None or got == want, (method, got, want)
    ref = float(exact_sums(a[None, :], b[None, :], eng, paired=True, fast=False)[0, 0])
    assert ref == want


@given(data=st.data())
@settings(max_examples=60, deadline=None)
def test_engine_output_is_one_correct_rounding(data):
    """matmul / dot with fp32 or bf16 operands, fp32 / bf16 / fp16 outputs, rne / rna / rz."""
    fa = data.draw(st.sampled_from(["fp32", "bf16"]))
    a, b = data.draw(operands(fa, k_max=120))
    fb = data.draw(st.sampled_from(["fp32", "bf16"])) if fa == "bf16" else "fp32"  # bf16 in fp32
    out = data.draw(st.sampled_from(["fp32", "bf16", "fp16"]))
    mode = data.draw(st.sampled_from(["rne", "rna", "rz"]))
    eng = get_engine("exact", a_format=fa, b_format=fb, out_format=out, out_rounding=mode)
    want = round_to(exact(a, b), out, mode)
    assert _same(dot(a, b, eng), want)
    assert _same(dot(a, b, eng, fast=False), want)
    # the same dot as a matmul column next to another one: per-output limbs/slices don't mix
    B = np.stack([b, b[::-1]], axis=1)
    got = matmul(a[None, :], B, eng)[0]
    assert _same(float(got[0]), want)
    assert _same(float(got[1]), round_to(exact(a, b[::-1]), out, mode))


def test_ties_need_the_far_product():
    """1 + 2^-24 + 2^-200 (three fp32 products): the fp32 rounding goes up; a float64 sum
    (1 + 2^-24 exactly, the 2^-200 lost) rounds to even, 1.0."""
    a = np.array([1.0, 2.0**-24, 2.0**-100])
    b = np.array([1.0, 1.0, 2.0**-100])
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    assert np.float32(a @ b) == 1.0  # the naive answer
    for method in ("slices", "limbs"):
        assert float(exact_sums(a[None], b[None], eng, paired=True, method=method)[0, 0]) == round_odd53(exact(a, b))
    assert dot(a, b, eng) == 1.0 + 2.0**-23
    assert dot(a, -b, eng) == -(1.0 + 2.0**-23)
    assert dot(a, b * np.array([1, 1, -1]), eng) == 1.0


@given(st.data())
@settings(max_examples=40, deadline=None)
def test_matmul_paths_agree_with_fraction_on_blocks(data):
    """A small (M, K) x (K, N) GEMM over fp32 rows of very different ranges (slices are cut per
    row/column): every output equals the Fraction oracle on both fast paths and the reference."""
    M, K, N = (data.draw(st.integers(1, 4)), data.draw(st.integers(1, 40)), data.draw(st.integers(1, 4)))
    bits = st.lists(st.integers(0, 2**32 - 1), min_size=M * K + K * N, max_size=M * K + K * N)
    v = _values(data.draw(bits), "fp32")
    A, B = v[:M * K].reshape(M, K), v[M * K:].reshape(K, N)
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    want = np.array([[round_odd53(exact(A[i], B[:, j])) for j in range(N)] for i in range(M)])
    for method in ("slices", "limbs", "auto"):
        assert np.array_equal(exact_sums(A, B, eng, method=method), want), method
    assert np.array_equal(exact_sums(A, B, eng, fast=False), want)


def test_fp32_exact_engine_at_scale_agrees_between_paths():
    """A 64 x 300 x 48 GEMM with N(0,1) values scaled by 2^U(-140, 120): every fp32 exponent
    band at once, so the slices path needs many slices and the limb path many limbs."""
    rng = np.random.default_rng(17)
    A = (rng.standard_normal((64, 300)) * 2.0 ** rng.integers(-140, 120, (64, 300))).astype(np.float32)
    B = (rng.standard_normal((300, 48)) * 2.0 ** rng.integers(-140, 120, (300, 48))).astype(np.float32)
    A, B = A.astype(np.float64), B.astype(np.float64)
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    s = exact_sums(A, B, eng, method="slices")
    assert np.array_equal(s, exact_sums(A, B, eng, method="limbs"))
    for i, j in [(0, 0), (5, 7), (63, 47), (31, 20)]:
        assert s[i, j] == round_odd53(exact(A[i], B[:, j]))


@pytest.mark.parametrize("fa,fb", [("e4m3fn", "e4m3fn"), ("e4m3fn", "e5m2"), ("e5m2", "e5m2"),
                                   ("hif8", "hif8")])
def test_all_paths_equal_on_fp8(fa, fb):
    """FP8 products over K = 300 (one or two float64 limbs, the pre-existing paths): blas (where
    it applies), two-limb, slices, limbs and fast=False give the same bits."""
    from accelsim.numerics import decode, get_format

    rng = np.random.default_rng(9)
    out = {}
    for f in (fa, fb):
        v = decode(np.arange(2**8).astype(get_format(f).code_dtype), f)
        out[f] = v[np.isfinite(v)]
    A = out[fa][rng.integers(0, out[fa].size, (24, 300))]
    B = out[fb][rng.integers(0, out[fb].size, (300, 16))]
    A[0, :3], B[:3, 0] = [out[fa].max(), out[fa][out[fa] > 0].min(), -out[fa].max()], \
        [out[fb].max(), out[fb][out[fb] > 0].min(), out[fb].max()]
    eng = get_engine("exact", a_format=fa, b_format=fb)
    ref = exact_sums(A, B, eng, fast=False)
    for method in ("two-limb", "slices", "limbs", "auto"):
        assert np.array_equal(exact_sums(A, B, eng, method=method), ref), method
    assert ref[0, 0] == round_odd53(exact(A[0], B[:, 0]))


def test_product_format_and_specials():
    """A product_format rounds each product first (two-limb or limbs path, not slices); NaN/Inf
    operands keep their IEEE classes as before."""
    a = np.array([[1.0 + 2.0**-20, 3.0, 2.0**-120]])
    b = np.array([[1.0 + 2.0**-20], [-3.0], [2.0**-10]])
    eng = get_engine("exact", a_format="fp32", b_format="fp32", product_format="bf16")
    # (1 + 2^-20)^2 -> 1 in bf16; 2^-130 is a bf16 subnormal; 1 - 9 + 2^-130 -> -8 in fp32
    assert matmul(a, b, eng)[0, 0] == -8.0
    assert exact_sums(a, b, eng)[0, 0] == round_odd53(Fraction(1) - 9 + Fraction(2) ** -130)
    with pytest.raises(ValueError, match="product_format"):
        exact_sums(a, b, eng, method="slices")
    e32 = get_engine("exact", a_format="fp32", b_format="fp32")
    A = np.array([[np.inf, 1.0], [1.0, 0.0], [np.nan, 1.0], [np.inf, 2.0**-149]])
    B = np.array([[1.0, 0.0, -1.0], [2.0**100, 1.0, 1.0]])
    got = matmul(A, B, e32)
    assert got[0, 0] == np.inf and np.isnan(got[0, 1]) and got[0, 2] == -np.inf
    assert got[1, 0] == 1.0 and np.isnan(got[2]).all()
    assert got[3, 0] == np.inf and np.isnan(got[3, 1])


def test_method_errors():
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    a = np.array([[2.0**100, 2.0**-100]])
    b = np.array([[1.0], [1.0]])
    with pytest.raises(ValueError, match="method='fastest'"):
        exact_sums(a, b, eng, method="fastest")
    with pytest.raises(ValueError, match="one BLAS product"):
        exact_sums(a, b, eng, method="blas")
    with pytest.raises(ValueError, match="two float64 limbs"):
        exact_sums(a, b, eng, method="two-limb")
    for bad in (np.inf, -np.inf, np.nan):
        with pytest.raises(ValueError, match="finite operands"):
            exact_sums(np.array([[1.0, bad]]), b, eng)


@given(st.data())
@settings(max_examples=200, deadline=None)
def test_digits_round_to_odd_equals_fraction(data):
    """The int64 digit combiner alone: random signed digits (|D| < 2^52, or < 2^59 with
    carries pending), digit widths 1..52, exponents down to -600."""
    n = data.draw(st.integers(1, 8))
    w = data.draw(st.integers(1, 52))
    big = data.draw(st.sampled_from([52, 59]))
    digit = st.one_of(st.integers(-(2**big) + 1, 2**big - 1), st.sampled_from([0, 1, -1, 2**w, -(2**w)]))
    D = np.array(data.draw(st.lists(digit, min_size=n, max_size=n)), dtype=np.int64)
    s0 = data.draw(st.integers(-600, 300))
    X = sum((Fraction(int(d)) * Fraction(2) ** (s0 + i * w) for i, d in enumerate(D)), Fraction(0))
    got = float(digits_round_to_odd(D[:, None], w, s0)[0])
    assert got == round_odd53(X)


def test_blocks_and_tiles_never_change_a_bit(monkeypatch):
    """Output blocks of the slices path (512 x 512, each with its own slice counts) and row /
    K tiles of the limb paths (forced small here) give the same bits as one block."""
    import accelsim.arith.exact as exact_mod

    rng = np.random.default_rng(4)
    A = (rng.standard_normal((600, 40)) * 2.0 ** rng.integers(-30, 30, (600, 40))).astype(np.float32).astype(np.float64)
    B = (rng.standard_normal((40, 530)) * 2.0 ** rng.integers(-30, 30, (40, 530))).astype(np.float32).astype(np.float64)
    A[:300] *= 2.0**-60  # the top-left blocks need fewer slices than the bottom ones
    eng = get_engine("exact", a_format="fp32", b_format="fp32")
    want = {m: exact_sums(A, B, eng, method=m) for m in ("slices", "limbs")}
    assert np.array_equal(want["slices"], want["limbs"])
    monkeypatch.setattr(exact_mod, "_TILE_ELEMS", 4096)
    for m in ("slices", "limbs"):
        assert np.array_equal(exact_sums(A, B, eng, method=m), want[m]), m
    P = exact_sums(A, B[:, :1].T.repeat(600, 0), eng, paired=True, method="slices")
    assert np.array_equal(P, want["limbs"][:, :1])
