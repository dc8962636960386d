"""The general rounding path: exact for any float64 input, every format, every rounding mode.

Split |x| into its binade e = floor(log2|x|), scale by the format's grid spacing 2^q(e) (exact:
powers of two), round the integer significand, then apply overflow, underflow and special-value
rules. ``fast.py`` holds bit-trick twins for float32/float64 inputs; both are tested against this
path and against the exact ``reference.py``.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import hif8
from .formats import FloatFormat, get_format
from .rounding import SOURCE_ROUNDED, round_up


def pow2(k: np.ndarray) -> np.ndarray:
    """2.0**k for integer arrays with -1022 <= k <= 1023, built from the bits (exact, fast)."""
    return ((np.asarray(k, dtype=np.int64) + 1023) << 52).view(np.float64)


def _quantum(f: FloatFormat, e: np.ndarray) -> np.ndarray:
    """Exponent q of the grid spacing 2^q inside binade [2^e, 2^(e+1))."""
    if f.layout == "hif8":
        return hif8.quantum_exponent(e)
    if f.has_subnormals:
        return np.maximum(e, f.emin) - f.mbits
    # no subnormals: unbounded grid, flushed below min_positive afterwards; binades far below
    # the range share one grid (they all flush) so 2^-q stays a normal float64
    return np.maximum(e, f.emin - 2 * f.mbits - 8) - f.mbits


@lru_cache(maxsize=None)
def _grid_tables(f: FloatFormat):
    """Per float64 exponent field (0..2047): 2^-q, 2^q and the tie-parity offset."""
    e = np.arange(2048, dtype=np.int64) - 1023  # field 0 (zero, subnormal doubles) -> -1023
    q = np.clip(_quantum(f, e), -1022, 1022)  # only field 2047 (inf/NaN) is clipped: inf * 2^-q = inf
    if f.layout == "hif8":
        off = hif8.tie_parity_offset(e)
    else:
        off = np.zeros(2048, dtype=np.int64)
    return pow2(-q), pow2(q), off


def _round_to_source(a: np.ndarray, mode: str) -> np.ndarray:
    """sr14/hybrid model an FP32 source and sr2 a bf16 source: round |x| there first (RNE).
    A finite |x| that overflows the source becomes inf here and is treated as an overflow."""
    if mode == "sr2":
        return quantize_general(a, get_format("bf16"), "rne", saturate=False, rng=None, nan_to_zero=False)
    return a.astype(np.float32).astype(np.float64)


def quantize_general(x64, f: FloatFormat, mode: str, *, saturate: bool, rng, nan_to_zero: bool,
                     draws=None) -> np.ndarray:
    """float64 values of ``x64`` rounded to ``f``. ``draws``: the uniform draws of ``sr``, one per
    element, when the caller took them already (a subset of a chunk); else ``rng`` is used."""
    with np.errstate(all="ignore"):
        a = np.abs(x64)
        if mode in SOURCE_ROUNDED:
            a = _round_to_source(a, mode)
        down, upscale, off = _grid_tables(f)
        ef = (a.view(np.uint64) >> 52).view(np.int64)  # biased float64 exponent (sign is 0)
        s = a * down[ef]  # exact: power-of-two scaling into [0, 2^(m+1))
        fl = np.floor(s)
        lo_even = (((fl.astype(np.int64) + off[ef]) & 1) == 0) if mode == "rne" else None
        up = round_up(s, fl, lo_even, mode, rng=rng, a=a, e=ef - 1023, draws=draws)
        r = (fl + up) * upscale[ef]
        # finite overflow, source overflow (sr14/sr2/hybrid) and infinite inputs (fixed below)
        over = np.flatnonzero(r > f.max)
        if over.size:
            if saturate or mode == "rz" or not f.has_nan:  # no inf, no NaN: saturate (finite, int)
                r[over] = f.max
            else:
                r[over] = np.inf if f.has_inf else np.nan
        if f.layout == "e8m0":  # no zero: positive values below 2^-127 become 2^-127
            np.maximum(r, f.min_positive, out=r)
        elif not f.has_subnormals:
            r *= r >= f.min_positive  # flush underflow to zero
        bad = np.flatnonzero(~np.isfinite(x64))  # each NaN/inf input costs only its own element
        if bad.size:
            xb = x64[bad]
            inf_val = np.inf if f.has_inf else (f.max if saturate or not f.has_nan else np.nan)
            r[bad] = np.where(np.isnan(xb), 0.0 if nan_to_zero else np.nan, inf_val)
        r = np.copysign(r, x64)
        if not f.has_negative_zero:
            r += 0.0  # -0.0 + 0.0 == +0.0
        if not f.signed:  # e8m0: zero, negative and NaN inputs have no value but NaN
            r[~(x64 > 0)] = np.nan
    return r


# ---------------------------------------------------------------- code tables
@lru_cache(maxsize=None)
def decode_table(fmt) -> np.ndarray:
    """float64 value of every code of a format with at most 16 bits (read-only array)."""
    f = get_format(fmt)
    if f.bits > 16:
        raise ValueError(f"format {f.name!r} has {f.bits}-bit codes; no decode table")
    if f.layout == "hif8":
        t = hif8.decode_table()
    elif f.layout == "e8m0":
        c = np.arange(1 << f.bits, dtype=np.int64)
        t = np.where(c == f.nan_code, np.nan, np.ldexp(1.0, c - f.bias))
    elif f.layout == "int":
        c = np.arange(1 << f.bits, dtype=np.int64)
        t = np.ldexp(((c + (1 << (f.bits - 1))) % (1 << f.bits) - (1 << (f.bits - 1))).astype(np.float64), -f.mbits)
    else:
        c = np.arange(1 << f.bits, dtype=np.int64)
        neg = (c >> (f.bits - 1)) & 1
        ef = (c >> f.mbits) & ((1 << f.ebits) - 1)
        m = c & ((1 << f.mbits) - 1)
        eall, mall = (1 << f.ebits) - 1, (1 << f.mbits) - 1
        normal = np.ldexp(1.0 + m / (1 << f.mbits), ef - f.bias)
        if f.has_subnormals:
            sub = np.ldexp(m.astype(np.float64), f.emin - f.mbits)
            t = np.where(ef == 0, sub, normal)
        else:
            t = np.where((ef == 0) & (m == 0), 0.0, normal)
        if f.layout == "ieee":
            t = np.where(ef == eall, np.where(m == 0, np.inf, np.nan), t)
        elif f.layout in ("fn", "dlfloat"):
            t = np.where((ef == eall) & (m == mall), np.nan, t)
        t = np.where(neg == 1, -t, t)
        if f.layout == "fnuz":
            t[1 << (f.bits - 1)] = np.nan
    t = np.ascontiguousarray(t, dtype=np.float64)
    t.setflags(write=False)
    return t


@lru_cache(maxsize=None)
def _code_by_top_bits(f: FloatFormat) -> np.ndarray:
    """uint8 code of each positive finite value of an 8-bit format, keyed by the top 16 bits of
    its float64 pattern (11 exponent + 4 fraction bits hold every 8-bit value here exactly)."""
    t = decode_table(f)
    half = t[:128]
    ok = np.isfinite(half)
    keys = (half[ok].view(np.uint64) >> 48).astype(np.intp)
    if np.unique(keys).size != keys.size:  # pragma: no cover - guards a future wider format
        raise ValueError(f"format {f.name!r}: values not distinguishable by their top 16 bits")
    table = np.zeros(1 << 16, dtype=np.uint8)
    table[keys] = np.arange(128)[ok]
    return table


def _magnitude_codes(mag: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Codes (sign bit clear) of representable finite magnitudes ``mag``, from their bits."""
    u = mag.view(np.uint64)
    if f.layout == "e8m0":  # every finite value is a power of two >= 2^-127: the exponent field
        return (u >> 52).view(np.int64) - (1023 - f.bias)
    if f.bits == 8:
        return _code_by_top_bits(f)[(u >> 48).view(np.int64)]
    ef = (u >> 52).view(np.int64)
    normal = ((ef - (1023 - f.bias)) << f.mbits) | ((u >> (52 - f.mbits)).view(np.int64) & ((1 << f.mbits) - 1))
    # below 2^emin: subnormals (or only zero for formats without them) are integer multiples
    with np.errstate(invalid="ignore", over="ignore"):  # large values overflow here, unused
        small = (mag * pow2(np.int64(f.mbits - f.emin))).astype(np.int64)
    is_small = mag < pow2(np.int64(f.emin))
    return normal + is_small * (small - normal)


def special_codes(r: np.ndarray, neg: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Codes of non-finite values ``r`` (NaN or +-inf); ``neg``: the sign of each NaN's input."""
    dt = f.code_dtype
    if not f.has_nan:
        raise ValueError(f"format {f.name!r} has no NaN code: cannot encode a NaN (quantize gives NaN; "
                         "replace NaNs first)")
    sign_bit = 1 << (f.bits - 1)
    signed_nan = f.layout in ("ieee", "fn", "dlfloat")
    nan_codes = np.where(neg & signed_nan, f.nan_code | sign_bit, f.nan_code)
    if f.has_inf:
        inf_codes = np.where(r < 0, f.inf_code | sign_bit, f.inf_code)
        nan_codes = np.where(np.isinf(r), inf_codes, nan_codes)
    return nan_codes.astype(dt)


def values_to_codes(r: np.ndarray, neg: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Codes of representable float64 values ``r`` (NaN/inf allowed); ``neg``: sign of NaNs."""
    dt = f.code_dtype
    if f.bits == 32:
        codes = r.astype(np.float32).view(np.uint32).copy()
        nan = np.flatnonzero(np.isnan(r))
        if nan.size:
            codes[nan] = np.where(neg[nan], f.nan_code | (1 << 31), f.nan_code)
        return codes
    mag = np.abs(r)
    bad = np.flatnonzero(~np.isfinite(mag))
    if bad.size:
        mag[bad] = 0.0
    if f.layout == "int":  # two's complement of the integer r * 2^mbits
        codes = (np.rint(np.where(np.signbit(r), -mag, mag) * 2.0**f.mbits).astype(np.int64)
                 & ((1 << f.bits) - 1)).astype(dt)
    else:
        codes = _magnitude_codes(mag, f).astype(dt)
    if f.signed and f.layout != "int":
        # quantize already turned -0 into +0 for formats without a negative zero
        codes |= (np.signbit(r) * (1 << (f.bits - 1))).astype(dt)
    if bad.size:  # each NaN/inf costs only its own code
        codes[bad] = special_codes(r[bad], neg[bad], f)
    return codes


def encode_general(x64, f, mode, *, saturate, rng, nan_to_zero, draws=None):
    r = quantize_general(x64, f, mode, saturate=saturate, rng=rng, nan_to_zero=nan_to_zero, draws=draws)
    return values_to_codes(r, np.signbit(x64), f)
