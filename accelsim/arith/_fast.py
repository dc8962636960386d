"""Vectorized float64 building blocks for the engine: error-free sums and fast rounding.

``round_fast`` rounds float64 values to a narrow format (rne/rna/rz) with a handful of numpy
passes; it equals ``accelsim.numerics.quantize`` for those modes (tested against it), and exists
only because the engine calls it once per K-step on every output (quantize's general path costs
~3x more). ``two_sum`` + ``round_to_odd`` turn the exact sum of two float64s into one float64
from which any rounding to <= 51 significant bits is a single correct rounding
(Boldo & Melquiond, "Emulation of FMA and correctly rounded sums: proved algorithms using
rounding to odd", IEEE TC 2008).
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from accelsim.numerics import FloatFormat

# A very negative exponent for zero terms: below any real exponent, still safe in int32 sums.
ZERO_EXP = -10000  # a sum of two still fits int16


def floor_log2(x: np.ndarray) -> np.ndarray:
    """floor(log2|x|) as int32 for finite nonzero x (ZERO_EXP for zeros)."""
    _, e = np.frexp(x)
    e = e.astype(np.int32)
    e -= 1
    e[x == 0] = ZERO_EXP
    return e


def two_sum(a: np.ndarray, b: np.ndarray):
    """(s, e) with s = fl(a + b) and a + b = s + e exactly (Knuth; no branch on magnitudes).

    Callers run under np.errstate(invalid="ignore"): inf - inf happens only where s is inf.
    """
    s = a + b
    bb = s - a
    e = (a - (s - bb)) + (b - bb)
    return s, e


def round_to_odd(s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """The exact value s + e (|e| <= ulp(s)/2) rounded to 53 bits with round-to-odd."""
    idx = np.flatnonzero(e)  # usually few: most FMA sums are exact in float64
    if idx.size == 0:
        return s
    out = np.array(s, dtype=np.float64, copy=True).reshape(-1)
    sv, ev = out[idx], np.asarray(e).reshape(-1)[idx]
    fix = ((sv.view(np.int64) & 1) == 0) & np.isfinite(sv) & ~np.isnan(ev)
    out[idx[fix]] = np.nextafter(sv[fix], np.where(ev[fix] > 0, np.inf, -np.inf))
    return out.reshape(np.shape(s))


_MAG = np.int64(0x7FFF_FFFF_FFFF_FFFF)
_SIGN = ~_MAG


@lru_cache(maxsize=None)
def _consts(f: FloatFormat, mode: str):
    drop = 52 - f.mbits
    add = {"rne": (1 << (drop - 1)) - 1, "rna": 1 << (drop - 1), "rz": 0}.get(mode)
    if add is None:
        raise ValueError(f"round_fast supports rne/rna/rz, not {mode!r}")
    lo = int(np.float64(f.min_normal).view(np.int64))
    hi = int(np.float64(f.max).view(np.int64))
    return drop, np.int64(add), np.int64(~((1 << drop) - 1)), np.int64(lo), np.uint64(hi - lo)


def round_fast(x: np.ndarray, f: FloatFormat, mode: str, *, saturate: bool = False) -> np.ndarray:
    """Round float64 ``x`` to format ``f`` with rne, rna or rz (one rounding, like quantize).

    Values in the format's normal range are rounded on the float64 bit pattern (a carry out of
    the kept significand bits bumps the exponent, as it should); the rare rest (the format's
    subnormal range, overflow, non-finite) goes through ``_round_general``.
    """
    drop, add, keep, lo, span = _consts(f, mode)
    x = np.ascontiguousarray(x, dtype=np.float64)
    bits = x.view(np.int64)
    # two temporaries, reused in place: fresh multi-MB arrays cost page faults on every call
    r = np.bitwise_and(bits, _MAG)
    t = np.right_shift(r, drop)
    if mode == "rne":
        t &= 1
        t += add
        r += t
    elif mode == "rna":
        r += add
    r &= keep
    # unsigned range test: rounded below the normal range, overflow, inf, nan -> general path
    # (a value just below min_normal that rounds up to it on its own grid rounds to it on the
    # coarser subnormal grid as well); zeros (r == 0) are already right
    np.subtract(r, lo, out=t)
    odd = t.view(np.uint64) > span
    np.bitwise_and(bits, _SIGN, out=t)
    r |= t
    out = r.view(np.float64)
    if odd.any():
        idx = np.flatnonzero(odd.reshape(-1))
        flat = out.reshape(-1)
        idx = idx[flat[idx] != 0]
        if idx.size:
            flat[idx] = _round_general(x.reshape(-1)[idx], f, mode, saturate)
    if not f.has_negative_zero:
        out[out == 0] = 0.0
    return out


def _round_general(x: np.ndarray, f: FloatFormat, mode: str, saturate: bool) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.maximum(floor_log2(x), f.emin)
        s = (f.mbits - e).astype(np.int32)
        y = np.ldexp(x, s)
        if mode == "rne":
            r = np.rint(y)
        elif mode == "rz":
            r = np.trunc(y)
        elif mode == "rna":
            r = np.copysign(np.floor(np.abs(y) + 0.5), y)
        else:
            raise ValueError(f"round_fast supports rne/rna/rz, not {mode!r}")
        out = np.ldexp(r, -s)
        big = np.abs(out) > f.max
        if big.any():
            if saturate or mode == "rz":
                repl = f.max
            else:
                repl = np.inf if f.has_inf else np.nan
            out = np.where(big & np.isfinite(x), np.copysign(repl, x), out)
            if not f.has_inf:
                out = np.where(np.isinf(x), (np.copysign(f.max, x) if saturate else np.nan), out)
        if not f.has_subnormals:
            out = np.where(np.abs(out) < f.min_normal, np.copysign(0.0, x), out)
        if not f.has_negative_zero:
            out = np.where(out == 0, 0.0, out)
    return out


def cut_bits(x: np.ndarray, frac_bits: int, mode: str) -> np.ndarray:
    """Keep ``frac_bits`` fraction bits below each value's own leading bit (rz or rne)."""
    with np.errstate(invalid="ignore"):
        s = (frac_bits - floor_log2(x)).astype(np.int32)
        y = np.ldexp(x, s)
        r = np.trunc(y) if mode == "rz" else np.rint(y)
        return np.where(x == 0, x, np.ldexp(r, -s))


def field_exponents(x: np.ndarray, f: FloatFormat, zero=ZERO_EXP, dtype=np.int16) -> np.ndarray:
    """Exponent field value of each operand (subnormals at emin), ``zero`` for zeros."""
    e = np.maximum(floor_log2(x), f.emin)
    return np.where(x == 0, zero, e).astype(dtype)


# ---- exact multi-limb sums: signed integer digits -> one round-to-odd float64 ----------------

def carry_digits(D: np.ndarray, w: int) -> np.ndarray:
    """Carry-normalize signed int64 digits in place: D[0] .. D[-2] into [0, 2^w), the carries
    (floor shifts) moved up into the top digit, which keeps the sign. Same value
    sum_i D[i] 2^(i w); the caller keeps |D| below 2^62."""
    for i in range(D.shape[0] - 1):
        c = D[i] >> w
        D[i] -= c << w
        D[i + 1] += c
    return D


def digits_round_to_odd(D: np.ndarray, w: int, s0) -> np.ndarray:
    """Round-to-odd float64 of X = sum_i D[i] 2^(s0 + i w), from signed int64 digits.

    D has shape (n, ...) with |D[i]| < 2^60 (``s0``: int, or ints broadcastable to D.shape[1:]).
    The digits are carry-normalized (every digit but the top in [0, 2^w)), so the top nonzero
    digit gives the sign; a negative sum is negated and normalized again. From the top nonzero
    digit down, the next digits fill a 63-bit integer window whose leading bit is bit 62 and the
    rest of X goes into a sticky flag; the top 53 window bits, with the lowest set when anything
    below them is nonzero, are X rounded to odd -- one float64 from which rounding to any format
    of <= 51 significant bits is a single correct rounding (Boldo & Melquiond, IEEE TC 2008).
    Exact zeros come back as +0. Needs 1 <= w <= 52 and a result in float64's normal range.
    """
    D = carry_digits(np.array(D, dtype=np.int64, copy=True), w)
    n = D.shape[0]
    neg = D[-1] < 0  # the lower digits are non-negative and below 2^w: the top decides the sign
    if neg.any():
        D[:, neg] = -D[:, neg]
        carry_digits(D, w)  # digits of -X; unchanged where already non-negative
    nz = D != 0
    j = n - 1 - np.argmax(nz[::-1], axis=0)  # top nonzero digit (0 where X == 0)
    top = np.take_along_axis(D, j[None], axis=0)[0]
    bits = np.frexp(top.astype(np.float64))[1].astype(np.int64)  # bit length of top (<= 61)
    bits -= (top >> np.clip(bits - 1, 0, 63)) == 0  # the float conversion may have rounded up
    win = top << np.clip(63 - bits, 0, 63)  # leading bit at bit 62
    sticky = np.zeros(top.shape, dtype=bool)
    reach = -(-62 // w)  # digits below the top that can touch the window
    for k in range(1, min(reach, n - 1) + 1):
        idx = j - k
        d = np.where(idx >= 0, np.take_along_axis(D, np.maximum(idx, 0)[None], axis=0)[0], 0)
        sh = 63 - bits - k * w  # where digit j-k's lowest bit lands in the window
        left = np.clip(sh, 0, 62)
        right = np.clip(-sh, 0, 62)  # lower digits are < 2^w: a shift by 62 clears them
        win |= (d << left) >> right
        sticky |= (d & ((np.int64(1) << right) - 1)) != 0
    if n - 1 > reach:  # whole digits below the window: only whether one is nonzero matters
        below = np.logical_or.accumulate(nz, axis=0)
        lo = j - reach - 1
        sticky |= (lo >= 0) & np.take_along_axis(below, np.maximum(lo, 0)[None], axis=0)[0]
    odd = ((win & 1023) != 0) | sticky
    r = ((win >> 10) | odd).astype(np.float64)  # < 2^53: exact
    e = np.asarray(s0, dtype=np.int64) + j * w + bits - 53
    out = np.ldexp(r, e.astype(np.int32))
    out[~nz.any(axis=0)] = 0.0
    return np.where(neg, -out, out)


def split_slices(X: np.ndarray, top: np.ndarray, beta: int, n: int) -> list[np.ndarray]:
    """X cut by truncation into n integer-valued slices: X = sum_s S_s 2^(top - (s+1) beta)
    exactly, each S_s an integer below 2^beta in magnitude (``top``: int exponents broadcastable
    to X, |X| < 2^top). Exact while X has no bits below 2^(top - n beta) (the caller's n)."""
    R = np.array(X, dtype=np.float64, copy=True)
    out = []
    for s in range(n):
        unit = np.ldexp(1.0, (top - (s + 1) * beta).astype(np.int32))  # powers of two: exact
        S = np.trunc(R / unit)
        R -= S * unit
        out.append(S)
    return out
