"""quantize / encode / decode: the public codec of every format in ``formats.py``.

Inputs are checked here and rounded exactly once: float32/float64 arrays in deterministic modes
take the bit-trick twins in ``fast.py``; everything else goes, 2^16 elements at a time, through
the exact general path in ``general.py``. Integers above 2^53 and long doubles reach it rounded to
odd in float64 (one correct rounding for every format here; ``sr`` refuses them).
"""

from __future__ import annotations

import functools

import numpy as np
import numpy.typing as npt

from . import fast
from .formats import FloatFormat, get_format
from .general import decode_table, encode_general, quantize_general  # noqa: F401 (public twins)
from .rounding import pow2  # noqa: F401 (public)

#: what a ``fmt`` argument takes: a preset name, a FloatFormat, or a numpy/ml_dtypes dtype
#: (or its scalar type) with the same values (see :func:`get_format`)
FormatLike = str | FloatFormat | np.dtype | type
from .rounding import check_mode

_CHUNK = 1 << 16
_encode_lut = fast.encode_lut  # the names the tests use
_encode_general = encode_general
_quantize_general = quantize_general
_TWO53 = 1 << 53


# ---------------------------------------------------------------- input checks
def _is_ml_float(dtype) -> bool:
    # ml_dtypes / en_dtypes scalar types (kind 'V') convert exactly to float64.
    try:
        return dtype.kind == "V" and np.dtype(dtype).itemsize <= 2 and np.can_cast(dtype, np.float64)
    except TypeError:
        return False


def _check_dtype(arr: np.ndarray) -> None:
    if arr.dtype == object or arr.dtype.kind not in "biuf" and not _is_ml_float(arr.dtype):
        raise TypeError(f"expected a real numeric array, got dtype {arr.dtype}")


def _as_float64(x) -> np.ndarray:
    """float64 view of ``x`` for statistics (S2FP8): plain conversion after the dtype check."""
    arr = np.asarray(x)
    _check_dtype(arr)
    with np.errstate(invalid="ignore"):  # signalling-NaN bit patterns quieten silently
        return arr.astype(np.float64, copy=False)


def _odd_step(u: np.ndarray, away: np.ndarray, inexact: np.ndarray) -> np.ndarray:
    """Round-to-odd from a round-to-nearest pattern ``u``: step back where it went away from
    zero, set the last bit where inexact (sign-magnitude patterns)."""
    u -= away & inexact
    u |= inexact
    return u


def _exact_float64(arr: np.ndarray, mode: str) -> np.ndarray:
    """float64 twin of ``arr`` that rounds to every format exactly as ``arr`` does: the value
    itself where float64 holds it, else the value rounded to odd at >= 43 bits (>= 2 bits more
    than fp32's 24, the widest target: one correct rounding for rne/rna/rz and the FP32/bf16
    sources of sr14/sr2/hybrid). ``sr`` compares a draw with the exact fraction: refused."""
    _check_dtype(arr)
    kind, size = arr.dtype.kind, arr.dtype.itemsize
    with np.errstate(invalid="ignore", over="ignore"):  # sNaN patterns quieten; wide -> inf
        x64 = arr.astype(np.float64)
        if kind in "iu" and size == 8 and arr.size:
            lo, hi = int(arr.min()), int(arr.max())
            if lo < -_TWO53 or hi > _TWO53:
                u = arr.view(np.uint64)
                neg = arr < 0 if kind == "i" else np.zeros(arr.shape, bool)
                m = np.where(neg, np.uint64(0) - u, u)  # |x| as uint64 (int64 min included)
                low = m & np.uint64(0x7FF)
                big = m > np.uint64(_TWO53)
                inexact = big & (low != 0)
                if mode == "sr" and inexact.any():
                    bad = arr.reshape(-1)[np.flatnonzero(inexact)[0]]
                    raise ValueError(f"rounding 'sr' needs inputs exact in float64; {arr.dtype} value {bad} is not "
                                     f"(|x| > 2^53 with low bits set): round it to float64 first if that is meant")
                odd = np.where(big, (m & ~np.uint64(0x7FF)) | (inexact.astype(np.uint64) << np.uint64(11)), m)
                x64 = np.where(neg, -odd.astype(np.float64), odd.astype(np.float64))
        elif kind == "f" and size > 8 and np.finfo(arr.dtype).nmant > 52 and arr.size:
            back = x64.astype(arr.dtype)
            inexact = (back != arr) & ~np.isnan(arr)
            if inexact.any():
                if mode == "sr":
                    bad = arr.reshape(-1)[np.flatnonzero(inexact)[0]]
                    raise ValueError(f"rounding 'sr' needs inputs exact in float64; {arr.dtype} value {bad!r} is not: "
                                     "round it to float64 first if that is meant")
                u = x64.view(np.uint64)
                _odd_step(u, (np.abs(back) > np.abs(arr)).astype(np.uint64), inexact.astype(np.uint64))
    return x64


def _check_bool(name: str, value) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__} {value!r:.40}")
    return bool(value)


def _resolve(fmt, rounding, rng, saturate, nan_to_zero) -> tuple[FloatFormat, str, bool, bool]:
    f = get_format(fmt)
    mode = f.default_rounding if rounding is None else rounding
    return (f, check_mode(mode, rng), _check_bool("saturate", saturate), _check_bool("nan_to_zero", nan_to_zero))


def _keep_mask(x, result: np.ndarray):
    """A masked input gives a masked result with the same mask (masked slots are still
    computed from the underlying data, and an ``sr`` draw is still taken for each)."""
    if isinstance(x, np.ma.MaskedArray):
        return np.ma.MaskedArray(result, mask=np.ma.getmaskarray(x).copy())
    return result


def _chunked(fn, arr: np.ndarray, out_dtype, mode: str, **kw) -> np.ndarray:
    """Apply ``fn`` over 2^16-element chunks converted to float64 one at a time: bounded
    temporaries, cache-resident passes. Stochastic draws come from the generator in element
    order, exactly as one call over the whole array would take them."""
    flat = arr.reshape(-1)
    if flat.size <= _CHUNK:  # one chunk: skip the copy into a preallocated output
        return np.asarray(fn(_exact_float64(flat, mode), mode=mode, **kw), dtype=out_dtype).reshape(arr.shape)
    _check_dtype(arr)  # before any work
    out = np.empty(flat.shape, dtype=out_dtype)
    for start in range(0, flat.size, _CHUNK):
        out[start : start + _CHUNK] = fn(_exact_float64(flat[start : start + _CHUNK], mode), mode=mode, **kw)
    return out.reshape(arr.shape)


@functools.lru_cache(maxsize=64)
def fits(f: FloatFormat, dtype: np.dtype) -> bool:
    """Whether every value of ``f`` (inf and NaN included) is exactly a value of the numpy float
    ``dtype``: then :func:`quantize` can return ``dtype`` without a second rounding."""
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return False
    if dtype.itemsize >= 8:
        return True
    if f.bits > 16:  # fp32: only float32 (or wider) holds it
        return f.name == "fp32" and dtype.itemsize >= 4
    v = decode_table(f)
    v = v[np.isfinite(v)]
    with np.errstate(over="ignore", under="ignore"):
        return bool(np.array_equal(v.astype(dtype).astype(np.float64), v))


def _is_scalar(x) -> bool:
    """A Python or numpy scalar (not a 0-d array): the result is a scalar too."""
    return np.isscalar(x) or isinstance(x, np.generic)


def _round(x, fmt, rounding, saturate, rng, nan_to_zero, values: bool):
    f, mode, saturate, nan_to_zero = _resolve(fmt, rounding, rng, saturate, nan_to_zero)
    arr = np.asarray(np.ma.getdata(x))
    if arr.dtype != object and fast.eligible(arr.dtype, f, mode):
        out = fast.encode(arr, f, mode, saturate=saturate, nan_to_zero=nan_to_zero, values=values, rng=rng)
    else:
        fn, dt = (quantize_general, np.float64) if values else (encode_general, f.code_dtype)
        out = _chunked(fn, arr, dt, mode, f=f, saturate=saturate, rng=rng, nan_to_zero=nan_to_zero)
    if values and arr.dtype.kind == "f" and arr.dtype.itemsize < 8 and fits(f, arr.dtype):
        out = out.astype(arr.dtype)  # exact: every value of f is a value of the input's dtype
    if _is_scalar(x):
        return out[()]
    return _keep_mask(x, out)


# ---------------------------------------------------------------- public API
def quantize(
    x: npt.ArrayLike,
    fmt: FormatLike,
    rounding: str | None = None,
    *,
    saturate: bool = False,
    rng: np.random.Generator | None = None,
    nan_to_zero: bool = False,
) -> np.ndarray | np.generic:
    """Round ``x`` to values representable in ``fmt``.

    ``fmt``: a format name, a :class:`FloatFormat` or a numpy/ml_dtypes dtype
    (``ml_dtypes.float8_e4m3fn``; see :func:`get_format`). The result has ``x``'s shape; its
    dtype is ``x``'s float32/float16 dtype where every value of ``fmt`` is one of that dtype
    (:func:`fits`: float32 holds every format here, float16 the 8-bit ones and fp16), else
    float64. A scalar gives a numpy scalar, an array an array.

    One correct rounding from the exact input value (float64, int64 and long double inputs
    included). ``rounding``: the format's own ``default_rounding`` unless named (``rne`` for the
    IEEE-style formats, ``rna``, round half away, for dlfloat16 and HiF8's TA): a mode the format
    does not define, such as ``rne`` for hif8, must be asked for by name. Overflow goes to +-inf (NaN where the format has no inf), or to +-max with
    ``saturate=True`` (``rz`` always saturates, as in IEEE 754; sr14/sr2/hybrid saturate a value
    that overflows their FP32/bf16 source too). ``nan_to_zero`` maps NaN inputs to 0 (HiF8
    option). ``saturate`` and ``nan_to_zero`` must be bools, ``rng`` a numpy Generator or None.
    A masked array gives a masked array with the same mask.
    """
    return _round(x, fmt, rounding, saturate, rng, nan_to_zero, values=True)


def encode(
    x: npt.ArrayLike,
    fmt: FormatLike,
    rounding: str | None = None,
    *,
    saturate: bool = False,
    rng: np.random.Generator | None = None,
    nan_to_zero: bool = False,
) -> np.ndarray | np.generic:
    """Round ``x`` like :func:`quantize` and return the codes (uint8/uint16/uint32; a scalar
    for a scalar)."""
    return _round(x, fmt, rounding, saturate, rng, nan_to_zero, values=False)


def decode(codes: npt.ArrayLike, fmt: FormatLike) -> np.ndarray | np.generic:
    """float64 values of integer ``codes`` in ``fmt``'s bit layout (a scalar for a scalar code).
    Peak memory: the output
    plus one chunk (codes are looked up 2^16 at a time)."""
    f = get_format(fmt)
    c = np.asarray(np.ma.getdata(codes))
    if c.dtype == object or c.dtype.kind not in "iu":
        raise TypeError(f"decode expects an integer code array, got dtype {c.dtype}")
    if c.size:
        lo, hi = int(c.min()), int(c.max())
        if lo < 0 or hi >= (1 << f.bits):
            bad = lo if lo < 0 else hi
            raise ValueError(
                f"code {bad} out of range for {f.bits}-bit format {f.name!r} (valid 0..{(1 << f.bits) - 1})"
            )
    out = np.empty(c.shape, dtype=np.float64)
    flat_out = out.reshape(-1)
    flat_c = c.reshape(-1) if c.flags.c_contiguous else c.flat
    table = decode_table(f) if f.bits <= 16 else None
    scratch = np.empty(min(c.size, _CHUNK) if fast.truncated_float32(f) else 0, np.uint32)
    for start in range(0, c.size, _CHUNK):
        cc = np.asarray(flat_c[start : start + _CHUNK])
        if table is not None:
            fast.decode_into(cc, flat_out[start : start + cc.size], f, table, scratch)
        else:
            with np.errstate(invalid="ignore"):  # signalling NaNs quieten
                flat_out[start : start + cc.size] = cc.astype(np.uint32).view(np.float32)
    if _is_scalar(codes):
        return out[()]
    return _keep_mask(codes, out)
