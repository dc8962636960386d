"""quantize / encode / decode: the vectorized golden model of every format in ``formats.py``.

General path (any input dtype, exact for float64): split |x| into its binade e = floor(log2|x|),
scale by the format's grid spacing 2^q(e) (exact: powers of two), round the integer significand,
then apply overflow, underflow and special-value rules. Fast path (float32 -> 8-bit, deterministic
modes): a deterministic rounding depends only on the sign, exponent, top 7 fraction bits and a
sticky bit, so a 2^17-entry code table built once by the general path encodes by lookup.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from . import hif8
from .formats import FloatFormat, get_format
from .rounding import check_mode, round_up

_CHUNK = 1 << 16


# ---------------------------------------------------------------- input checks
def _as_float64(x) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "biuf" and not _is_ml_float(arr.dtype):
        raise TypeError(f"expected a real numeric array, got dtype {arr.dtype}")
    with np.errstate(invalid="ignore"):  # signalling-NaN bit patterns quieten silently
        return arr.astype(np.float64, copy=False)


def _is_ml_float(dtype) -> bool:
    # ml_dtypes / en_dtypes scalar types (kind 'V') convert exactly to float64.
    try:
        return dtype.kind == "V" and np.dtype(dtype).itemsize <= 2 and np.can_cast(dtype, np.float64)
    except TypeError:
        return False


def _resolve(fmt, rounding, rng) -> tuple[FloatFormat, str]:
    f = get_format(fmt)
    mode = f.default_rounding if rounding is None else rounding
    return f, check_mode(mode, rng)


# ---------------------------------------------------------------- grid of each format
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
    q = _quantum(f, e)
    if f.layout == "hif8":
        off = hif8.tie_parity_offset(e)
    else:
        off = np.zeros(2048, dtype=np.int64)
    return pow2(-q), pow2(q), off


def _round_to_source(a: np.ndarray, mode: str) -> np.ndarray:
    """sr14/hybrid model an FP32 source and sr2 a bf16 source: round |x| there first (RNE)."""
    if mode == "sr2":
        return _quantize_general(a, get_format("bf16"), "rne", saturate=False, rng=None, nan_to_zero=False)
    return a.astype(np.float32).astype(np.float64)


def _quantize_general(x64, f: FloatFormat, mode: str, *, saturate: bool, rng, nan_to_zero: bool):
    with np.errstate(all="ignore"):
        a = np.abs(x64)
        if mode in ("sr14", "sr2", "hybrid"):
            a = _round_to_source(a, mode)
        down, upscale, off = _grid_tables(f)
        ef = (a.view(np.uint64) >> 52).view(np.int64)  # biased float64 exponent (sign is 0)
        s = a * down[ef]  # exact: power-of-two scaling into [0, 2^(m+1))
        fl = np.floor(s)
        lo_even = (((fl.astype(np.int64) + off[ef]) & 1) == 0) if mode == "rne" else None
        up = round_up(s, fl, lo_even, mode, rng=rng, a=a, e=ef - 1023)
        r = (fl + up) * upscale[ef]
        over = r > f.max  # also true for infinite inputs, fixed below
        if over.any():
            if saturate or mode == "rz":
                over_val = f.max
            else:
                over_val = np.inf if f.has_inf else np.nan
            r[over] = over_val
        if not f.has_subnormals:
            r *= r >= f.min_positive  # flush underflow to zero
        finite = np.isfinite(a)
        if not finite.all():
            inf_val = np.inf if f.has_inf else (f.max if saturate else np.nan)
            r[np.isinf(a)] = inf_val
            r[np.isnan(a)] = 0.0 if nan_to_zero else np.nan
        r = np.copysign(r, x64)
        if not f.has_negative_zero:
            r += 0.0  # -0.0 + 0.0 == +0.0
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
    if f.bits == 8:
        return _code_by_top_bits(f)[(u >> 48).view(np.int64)]
    ef = (u >> 52).view(np.int64)
    normal = ((ef - (1023 - f.bias)) << f.mbits) | ((u >> (52 - f.mbits)).view(np.int64) & ((1 << f.mbits) - 1))
    # below 2^emin: subnormals (or only zero for formats without them) are integer multiples
    with np.errstate(invalid="ignore", over="ignore"):  # large values overflow here, unused
        small = (mag * pow2(np.int64(f.mbits - f.emin))).astype(np.int64)
    is_small = mag < pow2(np.int64(f.emin))
    return normal + is_small * (small - normal)


def _values_to_codes(r: np.ndarray, neg: np.ndarray, f: FloatFormat) -> np.ndarray:
    """Codes of representable float64 values ``r`` (NaN/inf allowed); ``neg``: sign of NaNs."""
    dt = f.code_dtype
    if f.bits == 32:
        codes = r.astype(np.float32).view(np.uint32).copy()
        nan = np.isnan(r)
        if nan.any():
            codes[nan] = np.where(neg[nan], f.nan_code | (1 << 31), f.nan_code)
        return codes
    sign_bit = 1 << (f.bits - 1)
    mag = np.abs(r)
    finite = np.isfinite(mag)
    all_finite = finite.all()
    codes = _magnitude_codes(mag if all_finite else np.where(finite, mag, 0.0), f).astype(dt)
    # quantize already turned -0 into +0 for formats without a negative zero
    codes |= (np.signbit(r) * sign_bit).astype(dt)
    if not all_finite:
        nan = np.isnan(r)
        signed_nan = f.layout in ("ieee", "fn", "dlfloat")
        nan_codes = np.where(neg & signed_nan, f.nan_code | sign_bit, f.nan_code).astype(dt)
        codes = np.where(nan, nan_codes, codes)
        if f.has_inf:
            inf = np.isinf(r)
            codes = np.where(inf, np.where(r < 0, f.inf_code | sign_bit, f.inf_code).astype(dt), codes)
    return codes.astype(dt, copy=False)


# ---------------------------------------------------------------- fast path
@lru_cache(maxsize=None)
def _encode_lut(f: FloatFormat, mode: str, saturate: bool, nan_to_zero: bool) -> np.ndarray:
    """uint8 code for each (float32 bits >> 16, sticky of the low 16 bits) index."""
    i = np.arange(1 << 17, dtype=np.uint32)
    rep = ((i >> 1) << 16) | (i & 1)
    with np.errstate(invalid="ignore"):
        x = rep.view(np.float32).astype(np.float64)
    lut = _encode_general(x, f, mode, saturate=saturate, rng=None, nan_to_zero=nan_to_zero)
    lut.setflags(write=False)
    return lut


def _lut_eligible(x: np.ndarray, f: FloatFormat, mode: str) -> bool:
    return x.dtype == np.float32 and f.bits == 8 and mode in ("rne", "rna", "rz")


def _encode_float32_lut(x: np.ndarray, lut: np.ndarray) -> np.ndarray:
    u = np.ascontiguousarray(x).reshape(-1).view(np.uint32)
    out = np.empty(u.shape, dtype=np.uint8)
    n = u.size
    b1 = np.empty(min(n, _CHUNK), dtype=np.uint32)
    b2 = np.empty_like(b1)
    for start in range(0, n, _CHUNK):
        uc = u[start : start + _CHUNK]
        k = uc.size
        hi, lo = b1[:k], b2[:k]
        np.right_shift(uc, 16, out=hi)
        np.left_shift(hi, 1, out=hi)
        np.bitwise_and(uc, 0xFFFF, out=lo)
        np.minimum(lo, 1, out=lo)
        np.bitwise_or(hi, lo, out=hi)
        np.take(lut, hi, out=out[start : start + k])
    return out.reshape(x.shape)


def _encode_general(x64, f, mode, *, saturate, rng, nan_to_zero):
    r = _quantize_general(x64, f, mode, saturate=saturate, rng=rng, nan_to_zero=nan_to_zero)
    return _values_to_codes(r, np.signbit(x64), f)


def _chunked(fn, arr: np.ndarray, out_dtype, **kw) -> np.ndarray:
    """Apply ``fn`` over 2^16-element chunks converted to float64 one at a time: bounded
    temporaries, cache-resident passes. Stochastic draws come from the generator in element
    order, exactly as one call over the whole array would take them."""
    flat = arr.reshape(-1)
    if flat.size <= _CHUNK:  # one chunk: skip the copy into a preallocated output
        return np.asarray(fn(_as_float64(flat), **kw), dtype=out_dtype).reshape(arr.shape)
    _as_float64(flat[:0])  # dtype check before any work
    out = np.empty(flat.shape, dtype=out_dtype)
    for start in range(0, flat.size, _CHUNK):
        out[start : start + _CHUNK] = fn(_as_float64(flat[start : start + _CHUNK]), **kw)
    return out.reshape(arr.shape)


# ---------------------------------------------------------------- public API
def quantize(
    x,
    fmt,
    rounding: str | None = "rne",
    *,
    saturate: bool = False,
    rng: np.random.Generator | None = None,
    nan_to_zero: bool = False,
) -> np.ndarray:
    """Round ``x`` to values representable in ``fmt``; returns float64 of the same shape.

    One correct rounding from the exact input value (float64 inputs included). ``rounding=None``
    uses the format's ``default_rounding`` (``rna`` for dlfloat16 and hif8). Overflow goes to
    +-inf (NaN where the format has no inf), or to +-max with ``saturate=True`` (``rz`` always
    saturates, as in IEEE 754). ``nan_to_zero`` maps NaN inputs to 0 (HiF8 option).
    """
    f, mode = _resolve(fmt, rounding, rng)
    arr = np.asarray(x)
    if arr.dtype != object and _lut_eligible(arr, f, mode):
        codes = _encode_float32_lut(arr, _encode_lut(f, mode, bool(saturate), bool(nan_to_zero)))
        return decode_table(f)[codes]
    return _chunked(_quantize_general, arr, np.float64, f=f, mode=mode, saturate=bool(saturate), rng=rng,
                    nan_to_zero=bool(nan_to_zero))


def encode(
    x,
    fmt,
    rounding: str | None = "rne",
    *,
    saturate: bool = False,
    rng: np.random.Generator | None = None,
    nan_to_zero: bool = False,
) -> np.ndarray:
    """Round ``x`` like :func:`quantize` and return the codes (uint8/uint16/uint32)."""
    f, mode = _resolve(fmt, rounding, rng)
    arr = np.asarray(x)
    if arr.dtype != object and _lut_eligible(arr, f, mode):
        return _encode_float32_lut(arr, _encode_lut(f, mode, bool(saturate), bool(nan_to_zero)))
    return _chunked(_encode_general, arr, f.code_dtype, f=f, mode=mode, saturate=bool(saturate), rng=rng,
                    nan_to_zero=bool(nan_to_zero))


def decode(codes, fmt) -> np.ndarray:
    """float64 values of integer ``codes`` in ``fmt``'s bit layout."""
    f = get_format(fmt)
    c = np.asarray(codes)
    if c.dtype == object or c.dtype.kind not in "iu":
        raise TypeError(f"decode expects an integer code array, got dtype {c.dtype}")
    if c.size:
        lo, hi = int(c.min()), int(c.max())
        if lo < 0 or hi >= (1 << f.bits):
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"code {bad} out of range for {f.bits}-bit format {f.name!r} (valid 0..{(1 << f.bits) - 1})"
            )
    if f.bits == 32:
        with np.errstate(invalid="ignore"):  # signalling NaNs quieten
            return c.astype(np.uint32).view(np.float32).astype(np.float64)
    return decode_table(f)[c.astype(np.intp, copy=False)]
