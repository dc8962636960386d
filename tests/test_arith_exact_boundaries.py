"""The exact engine at the edges of its bit-span rules, against an exact Fraction oracle.

``exact_sums`` picks its path from the bits the products can occupy: one BLAS product when the
products span at most ``53 - ceil(log2(K + 1))`` bits (every partial sum then fits a float64),
two float64 limbs within twice that, operand slices of ``(53 - ceil(log2(K + 1))) // 2`` bits,
limbs of ``52 - ceil(log2(K + 1))`` bits. The span is read from the data: the largest operand's
exponent above, the smallest nonzero operand's last significand bit below. A rule one bit too
generous is silent on random data (mutation testing found two such mutants surviving); it shows
only when the products fill their span exactly and the sum needs more than 53 bits.

Here the operands are BUILT to a chosen span: the largest |a|, |b| have all significand bits set
(2 - 2^-m times a power of two), the smallest have their last bit set (1 + 2^-m times a power of
two), so the products cover exactly ``2 + da + db + 2m`` bits, for every span one below, at and
one above each rule's limit, and K on both sides of every change of ``ceil(log2(K + 1))``. The
oracle: the exact sum of the products in ``fractions.Fraction``, rounded to odd at 53 bits (what
``exact_sums`` promises), written here from the definition.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from accelsim.arith import get_engine
from accelsim.arith.exact import exact_sums
from fraction_oracles import round_odd53

MBITS = {"fp32": 23, "bf16": 7, "fp16": 10}  # stored significand bits (IEEE 754 / bf16)
#: the most negative exponent of a normal number of each format (IEEE 754 / bf16)
EMIN = {"fp32": -126, "bf16": -126, "fp16": -14}
METHODS = ("auto", "blas", "slices", "two-limb", "limbs")


def exact_dot(a, b) -> Fraction:
    return sum((Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b)), Fraction(0))


def in_format(x: float, fmt: str) -> bool:
    """x is exactly representable in ``fmt`` (normal range only, as the builders use it)."""
    m = MBITS[fmt]
    f, e = math.frexp(abs(x))  # x = f 2^e, 0.5 <= f < 1
    return x == 0 or (e - 1 >= EMIN[fmt] and (f * 2.0 ** (m + 1)).is_integer())


def limit(K: int) -> int:
    """Bits of a product span whose K-term float64 sum is exact in any order: the largest b with
    (K + 1) 2^b <= 2^53 (K integers below 2^b, in units of the span's last bit, and every
    partial sum, stay below 2^53), i.e. 53 - ceil(log2(K + 1))."""
    return max(b for b in range(54) if (K + 1) * 2 ** b <= 2 ** 53)


def feasible(fmt: str, span: int) -> bool:
    """A span ``build`` can make: at least one product's own width (2 + 2 m bits)."""
    return span >= 2 + 2 * MBITS[fmt]


def build(fmt: str, K: int, span: int, *, ea: int = 0, eb: int = 0, signs=None,
          fill: np.ndarray | None = None):
    """(a, b) of length K >= 2 whose products span exactly ``span`` bits: a[0] b[0] has every
    bit of the top, a[-1] b[-1] the last bit of the bottom. The others: copies of the top
    product (``fill`` None: their sum carries above the top, so it needs more bits than one
    product, as in issue 22's example), or ``fill`` values in [1, 2) scaled into the span."""
    m = MBITS[fmt]
    d = span - 2 - 2 * m  # da + db
    if d < 0:
        raise ValueError("span below one product's own width")
    da = d // 2
    db = d - da
    top = 2.0 - 2.0 ** -m
    bot = 1.0 + 2.0 ** -m
    a = np.empty(K)
    b = np.empty(K)
    a[0], b[0] = top * 2.0 ** ea, top * 2.0 ** eb
    a[-1], b[-1] = bot * 2.0 ** (ea - da), bot * 2.0 ** (eb - db)
    for i in range(1, K - 1):
        if fill is None:
            a[i], b[i] = a[0], b[0]
            continue
        f = float(fill[i % len(fill)])
        # a value of the format between the extremes: f rounded to m bits, shifted into range
        g = math.floor(f * 2.0 ** m) / 2.0 ** m
        a[i] = g * 2.0 ** (ea - (i * da) // max(1, K - 1))
        b[i] = g * 2.0 ** (eb - (i * db) // max(1, K - 1))
    if signs is not None:
        a *= np.asarray(signs, dtype=float)[:K]
    for x in (*a, *b):
        assert in_format(float(x), fmt), (x, fmt)
    return a, b


def check_all_paths(a, b, fmt: str) -> dict:
    """Every path of exact_sums (paired and as a 1 x K @ K x 1 matmul, plus the fast=False
    reference) equals round-to-odd of the exact sum; a path may refuse data outside its range
    only with a ValueError (blas, two-limb). Returns {method: value}."""
    eng = get_engine("exact", a_format=fmt, b_format=fmt)
    want = round_odd53(exact_dot(a, b))
    got = {}
    for method in METHODS:
        for paired in (True, False):
            A, B = (a[None, :], b[None, :]) if paired else (a[None, :], b[:, None])
            try:
                v = float(exact_sums(A, B, eng, paired=paired, method=method)[0, 0])
            except ValueError:
                assert method in ("blas", "two-limb"), method
                continue
            assert v == want, (f"{method} (paired={paired}): {v!r} != round-to-odd "
                               f"{want!r} of the exact sum")
            got[method] = v
    ref = float(exact_sums(a[None, :], b[None, :], eng, paired=True, fast=False)[0, 0])
    assert ref == want
    return got


def test_issue_example_one_past_the_blas_limit():
    """K = 3 fp32 operands from issue 22: the products span 52 bits, one more than a 3-term
    float64 sum holds (51), and the exact sum needs 54 bits: the round-to-odd result differs
    from the float64 (round-to-nearest) sum, so choosing one BLAS product here is wrong."""
    e = 2.0 ** -23
    a = np.array([2 - e, 2 - e, 2.0 ** -4 * (1 + e)])
    b = np.array([2 - e, 2 - e, 1 + e])
    X = exact_dot(a, b)
    assert round_odd53(X) != float(X)  # the sum is not a float64: the rounding rule shows
    assert float(np.dot(a, b)) != round_odd53(X)
    got = check_all_paths(a, b, "fp32")
    assert "blas" not in got  # the BLAS path refuses a 52-bit span at K = 3


KS = (1, 2, 3, 4, 7, 8, 15, 16, 31)


@pytest.mark.parametrize("fmt,K,delta", [
    (f, k, d) for f in ("fp32", "bf16") for k in KS if k >= 2 for d in (-1, 0, 1)
    if feasible(f, limit(k) + d)])
def test_blas_limit_from_both_sides(fmt, K, delta):
    """Products spanning limit(K) - 1, limit(K) and limit(K) + 1 bits: every path equals the
    oracle, and the one-BLAS-product path is taken exactly up to the limit."""
    span = limit(K) + delta
    a, b = build(fmt, K, span)
    got = check_all_paths(a, b, fmt)
    assert ("blas" in got) == (delta <= 0), (K, span)


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
@pytest.mark.parametrize("K", [2, 3, 4, 8, 16])
@pytest.mark.parametrize("delta", [-1, 0, 1])
def test_two_limb_limit_from_both_sides(fmt, K, delta):
    """Products spanning 2 limit(K) - 1 .. + 1 bits: the two-limb path holds up to twice the
    one-limb limit and refuses beyond; every path equals the oracle."""
    span = 2 * limit(K) + delta
    a, b = build(fmt, K, span)
    got = check_all_paths(a, b, fmt)
    assert ("two-limb" in got) == (delta <= 0), (K, span)


@pytest.mark.parametrize("fmt", ["fp32", "bf16"])
@pytest.mark.parametrize("K", [2, 3, 7, 8])
@pytest.mark.parametrize("rule", ["slice", "limb"])
def test_slice_and_limb_widths_from_both_sides(fmt, K, rule):
    """Spans one below, at and one above whole multiples of the slice width
    ((53 - ceil(log2(K+1))) // 2 per operand, so twice that per product) and of the limb width
    (52 - ceil(log2(K+1))): where the count of slices / limbs steps up."""
    width = 2 * (limit(K) // 2) if rule == "slice" else limit(K) - 1
    for mult in (1, 2, 3):
        for delta in (-1, 0, 1):
            span = mult * width + delta
            if not feasible(fmt, span):
                continue
            for signs in (None, [1, -1] * K):
                a, b = build(fmt, K, span, signs=signs)
                check_all_paths(a, b, fmt)


def test_one_past_the_limit_the_float64_sum_is_inexact():
    """The constructed cases one bit past the BLAS limit matter: for K = 3, 7, 15, 31 (K - 1
    copies of the top product carry the sum up by log2(K - 1) bits) the exact sum needs more
    than 53 bits, so a float64 sum (what one BLAS product returns) would be rounded to nearest
    where the engine must round to odd."""
    for K in (3, 7, 15, 31):
        a, b = build("fp32", K, limit(K) + 1)
        X = exact_dot(a, b)
        assert round_odd53(X) != float(X), K
        assert float(sum(x * y for x, y in zip(a, b))) != round_odd53(X), K


@st.composite
def boundary_operands(draw):
    """Operands whose product span sits within two bits of a rule's limit: the BLAS limit, the
    two-limb limit, or a multiple of the slice / limb width, for K across the changes of
    ceil(log2(K + 1)); random exponents, signs and in-between values."""
    fmt = draw(st.sampled_from(["fp32", "bf16"]))
    K = draw(st.sampled_from([2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33]))
    L = limit(K)
    edge = draw(st.sampled_from([L, 2 * L, 2 * (L // 2), 2 * 2 * (L // 2), L - 1,
                                 2 * (L - 1)]))
    span = edge + draw(st.integers(-2, 2))
    m = MBITS[fmt]
    span = max(span, 2 + 2 * m)
    ea = draw(st.integers(-20, 20))
    eb = draw(st.integers(-20, 20))
    signs = draw(st.lists(st.sampled_from([1.0, -1.0]), min_size=K, max_size=K))
    fill = np.array(draw(st.lists(st.floats(1.0, 2.0, exclude_max=True), min_size=1,
                                  max_size=4)))
    a, b = build(fmt, K, span, ea=ea, eb=eb, signs=signs, fill=fill)
    perm = np.array(draw(st.permutations(range(K))))
    return fmt, a[perm], b[perm]


@given(boundary_operands())
@settings(max_examples=150, deadline=None)
def test_every_path_is_exact_at_the_span_boundaries(case):
    fmt, a, b = case
    check_all_paths(a, b, fmt)
