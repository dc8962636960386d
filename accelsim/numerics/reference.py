"""Slow, obviously-correct scalar rounding with exact ``fractions.Fraction`` arithmetic.

The oracle for the vectorized codec: 8-bit formats pick the two neighbours of |x| among the
format's enumerated values (ties to the even code); wider formats use the exact grid
floor(|x| / 2^q) * 2^q. Every decision is an exact rational comparison.
"""

from __future__ import annotations

import bisect
import math
from fractions import Fraction
from functools import lru_cache

from .formats import FloatFormat, get_format
from .rounding import HYBRID_TA_EXPONENT, ROUNDING_MODES

_SR_BITS = {"sr14": (14, "fp32"), "sr2": (2, "bf16"), "hybrid": (14, "fp32")}


def _floor_log2(v: Fraction) -> int:
    e = v.numerator.bit_length() - v.denominator.bit_length()
    while Fraction(2) ** e > v:
        e -= 1
    while Fraction(2) ** (e + 1) <= v:
        e += 1
    return e


def _pow2(k: int) -> Fraction:
    return Fraction(2) ** k


@lru_cache(maxsize=None)
def _enumerated(f: FloatFormat):
    """Sorted (value, code) of the positive finite values of an 8-bit format, zero included."""
    from .codec import decode_table  # the table itself is checked against ml_dtypes/en-dtypes

    t = decode_table(f)
    pairs = sorted((Fraction(float(t[c])), c) for c in range(1 << (f.bits - 1)) if math.isfinite(t[c]))
    return pairs


def _neighbours(f: FloatFormat, X: Fraction):
    """(lo, hi, lo_is_even) with lo <= X < hi; hi may be the virtual value just above max."""
    if f.bits == 8 and f.layout != "e8m0":  # (e8m0 ties go to the even significand, not code)
        pairs = _enumerated(f)
        i = bisect.bisect_right([p[0] for p in pairs], X)  # pairs[:i] <= X < pairs[i:]
        lo, lo_code = pairs[i - 1]
        if i < len(pairs):
            return lo, pairs[i][0], lo_code % 2 == 0
        top_ulp = _pow2(14) if f.layout == "hif8" else _pow2(f.emax - f.mbits)
        return lo, Fraction(f.max) + top_ulp, lo_code % 2 == 0
    e = _floor_log2(X) if X > 0 else f.emin
    q = (max(e, f.emin) if f.has_subnormals else e) - f.mbits
    n = math.floor(X / _pow2(q))
    return n * _pow2(q), (n + 1) * _pow2(q), n % 2 == 0


def _source_value(X: Fraction, src: str) -> Fraction:
    """|x| rounded (RNE) to the source format; None where that overflows to infinity."""
    v = round_reference(X, src, "rne")  # exact: no float64 step in between
    return None if math.isinf(v) else Fraction(v)


def round_reference(
    x: float,
    fmt,
    rounding: str = "rne",
    *,
    saturate: bool = False,
    u: float | None = None,
    nan_to_zero: bool = False,
) -> float:
    """Round one number to ``fmt``; ``u`` is the uniform draw in [0, 1) used by ``sr``. ``x``: a
    float, or an exact ``int``/``Fraction`` (rounded from its exact value, never via float64)."""
    f = get_format(fmt)
    if rounding not in ROUNDING_MODES:
        raise ValueError(f"unknown rounding mode {rounding!r}")
    if isinstance(x, (int, Fraction)) and not isinstance(x, bool):
        neg, X = x < 0, abs(Fraction(x))
    else:
        x = float(x)
        neg = math.copysign(1.0, x) < 0
        if math.isnan(x):
            return 0.0 if nan_to_zero else math.nan
        if math.isinf(x):
            v = math.inf if f.has_inf else (f.max if saturate or not f.has_nan else math.nan)
            if not f.signed and neg:
                return math.nan
            return -v if neg else v
        X = abs(Fraction(x))
    if not f.signed and (neg or X == 0):  # e8m0: no sign, no zero
        return math.nan
    mode = rounding
    if mode in _SR_BITS:
        nbits, src = _SR_BITS[mode]
        X = _source_value(X, src)
        if X is None:  # a finite value that overflows the source overflows the format
            v = f.max if saturate or not f.has_nan else (math.inf if f.has_inf else math.nan)
            return -v if neg else v
    lo, hi, lo_even = _neighbours(f, X)
    if X >= hi:  # beyond the virtual value above max
        r = None
    else:
        frac = (X - lo) / (hi - lo)
        if mode == "rz":
            up = False
        elif mode == "rna":
            up = frac >= Fraction(1, 2)
        elif mode == "rne":
            up = frac > Fraction(1, 2) or (frac == Fraction(1, 2) and not lo_even)
        elif mode == "sr":
            if u is None:
                raise ValueError("sr needs a uniform draw u")
            up = Fraction(u) < frac
        else:
            nbits, src = _SR_BITS[mode]
            disc = math.floor(frac * 2**nbits)
            e = _floor_log2(X) if X > 0 else 0
            src_m = 23 if src == "fp32" else 7
            lsbs = int(X / _pow2(e - src_m)) % 2**nbits if X > 0 else 0
            up = lsbs < disc
            if mode == "hybrid" and abs(e) < HYBRID_TA_EXPONENT:
                up = frac >= Fraction(1, 2)
        r = hi if up else lo
    if r is None or r > Fraction(f.max):
        if saturate or mode == "rz" or not f.has_nan:
            v = f.max
        else:
            v = math.inf if f.has_inf else math.nan
    else:
        if not f.has_subnormals and r < Fraction(f.min_positive):
            r = Fraction(f.min_positive) if f.layout == "e8m0" else Fraction(0)
        v = float(r)
    if neg and (v != 0 or f.has_negative_zero):
        v = -v
    return v
