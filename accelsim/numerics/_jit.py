"""Compiled one-pass casts (the optional extra ``jit``: numba) of float32/float64 arrays to the IEEE
formats with subnormals (bf16, fp16 from either; fp32 from float64), rne/rna/rz, ``saturate`` and
``nan_to_zero``: one correct rounding read straight from the input's bits (float64 input is never
rounded through float32), the canonical NaN code of ``general.py``. A twin of the general path,
tested bit for bit against it (tests/test_numerics_jit.py). ``fast.py`` imports this module (and
with it numba) only when such a cast is requested.

Per block of ``BLOCK`` elements, a short formula first (vectorized by LLVM): with ``a`` = |x|
bits, code = (a + kept LSB if rne + increment - rebias) >> (input - target fraction bits), the carry
walking into the exponent; it holds for |x| in [smallest normal of the target, first overflow) and
for 0 (for bf16 from float32, whose exponent range is float32's, for every finite |x|), and one
min and one max per block say whether it held. Otherwise the block is redone by ``_code``, still
branch-free: below the normal range the significand (hidden bit included) is shifted by its
distance to the subnormal grid 2^(emin - mbits), clamped at 63 (that far down every mode gives 0);
codes at or above the inf code are NaN, inf or overflow and take ``general.py``'s rules. So a NaN
costs its block (about 0.3 us), never a pass. float64 -> fp32 by rne is the hardware float32 cast
(one correct rounding) with only NaN (and ``saturate``) redone. Every constant is a uint64 in one
tuple: numba turns mixed uint64/int64 arithmetic into float64.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from .formats import FloatFormat

_INPUT = {  # input dtype -> (fraction bits, exponent bias, sign bit)
    np.dtype(np.float32): (23, 127, 31),
    np.dtype(np.float64): (52, 1023, 63),
}
_QNAN64, _INF64 = 0x7FF8000000000000, 0x7FF0000000000000


def handles(dtype, f: FloatFormat, mode: str) -> bool:
    """The kernels cover this cast: an IEEE format with subnormals narrower than the input."""
    dtype = np.dtype(dtype)
    if dtype not in _INPUT or mode not in ("rne", "rna", "rz"):
        return False
    if f.layout != "ieee" or not f.has_subnormals or f.bits not in (16, 32):
        return False
    fb, bias_in, _ = _INPUT[dtype]
    return f.mbits < fb and f.emax <= bias_in and f.emin >= 1 - bias_in  # inf and NaN map past the inf code


# indices into the constants tuple (module-level ints are compile-time constants for numba)
(_FB, _FRAC, _INF, _ELO, _REBIAS, _SH, _SUBBASE, _HALFMASK, _EVEN, _FIRSTBAD, _NANCODE, _OVERCODE,
 _SIGNIN, _SIGNOUT, _MINCODE, _VSH, _VREBIAS, _ADD, _LOM1, _HI, _HW, _QLOM1) = range(22)
BLOCK = 512  # elements rounded by the short formula before one range check (a NaN redoes its block)


def _compiled(fn):
    """``numba.njit(cache=True, nogil=True)``; where no cache location is writable (read-only
    source tree, NUMBA_CACHE_DIR and home: numba refuses ``cache=True``), compiled per process."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:
        return numba.njit(nogil=True)(fn)


@lru_cache(maxsize=None)
def params(dtype, f: FloatFormat, mode: str, saturate: bool, nan_to_zero: bool) -> tuple:
    """The uint64 constants of one cast (see the module docstring) and the subnormal scale."""
    fb, bias_in, sign_in = _INPUT[np.dtype(dtype)]
    sh = fb - f.mbits
    rebias = (bias_in - f.bias) << fb
    half = 1 << (sh - 1)
    add = {"rne": half - 1, "rna": half, "rz": 0}[mode]
    # the short formula holds for lo <= |x| < hi, and for 0; lo: f's smallest normal, or (f has
    # the input's exponent range, bf16 from float32) the smallest subnormal
    lo_normal = (bias_in + f.emin) << fb
    lo = 1 if bias_in == f.bias else lo_normal
    hi = (f.inf_code << sh) + rebias - (0 if mode == "rz" else half)  # first |x| that overflows
    # float64 -> binary32 by RNE is the hardware cast: one rounding, subnormals, overflow to inf
    hw = np.dtype(dtype) == np.float64 and (f.bits, f.ebits, f.mbits, f.bias) == (32, 8, 23, 127) and mode == "rne"
    if hw:
        lo = lo_normal = 1
        hi = hi if saturate else ((2 * bias_in + 1) << fb) + 1  # redo only NaN (and saturation)
    k = {
        _FB: fb,                                      # input fraction bits
        _FRAC: (1 << fb) - 1,                         # input fraction mask
        _INF: (2 * bias_in + 1) << fb,                # |x| pattern of inf (above: NaN)
        _ELO: bias_in + f.emin,                       # first input exponent field normal in f
        _REBIAS: rebias,                              # rebias of normal patterns
        _SH: sh,                                      # shift of normal patterns
        _SUBBASE: bias_in + fb + f.emin - f.mbits,    # subnormal shift = this - max(exponent field, 1)
        _HALFMASK: 0 if mode == "rz" else (1 << 64) - 1,
        _EVEN: 1 if mode == "rne" else 0,             # ties to even: add the kept LSB
        _FIRSTBAD: f.inf_code,                        # first magnitude code that is not finite
        _NANCODE: 0 if nan_to_zero else f.nan_code,   # code of a NaN input (sign kept)
        _OVERCODE: f.inf_code - 1 if (saturate or mode == "rz") else f.inf_code,  # finite overflow
        _SIGNIN: sign_in,
        _SIGNOUT: f.bits - 1,
        _MINCODE: 1 << f.mbits,                       # first normal code
        _VSH: 52 - f.mbits,                           # code -> float64 fraction shift
        _VREBIAS: (1023 - f.bias) << 52,              # code -> float64 rebias
        _ADD: (add - rebias) % (1 << 64),             # short formula: (a + lsb + this) >> sh
        _LOM1: lo - 1,
        _HI: hi,
        _HW: 1 if hw else 0,                          # the short formula is the float32 cast
        _QLOM1: lo_normal - 1,                        # quantize: subnormal codes need a multiply
    }
    return tuple(np.uint64(k[i]) for i in range(len(k))), float(np.ldexp(1.0, f.emin - f.mbits))


@_compiled
def _code(a, k):
    """Magnitude code of any |x| bits ``a`` (uint64): branch-free, so a block of them vectorizes."""
    one = np.uint64(1)
    e = a >> k[_FB]
    normal = e >= k[_ELO]
    ep = e if e > one else one
    sub_sh = k[_SUBBASE] - ep
    sub_sh = sub_sh if sub_sh < np.uint64(63) else np.uint64(63)
    op = (a - k[_REBIAS]) if normal else ((a & k[_FRAC]) | (k[_FRAC] + one if e != np.uint64(0) else np.uint64(0)))
    sh = k[_SH] if normal else sub_sh
    half = one << (sh - one)
    c = (op + ((half & k[_HALFMASK]) - k[_EVEN] + (k[_EVEN] & (op >> sh)))) >> sh
    if c >= k[_FIRSTBAD]:
        if a > k[_INF]:
            c = k[_NANCODE]
        elif a == k[_INF]:
            c = k[_FIRSTBAD]
        else:
            c = k[_OVERCODE]
    return c


@_compiled
def _value(c, k, scale):
    """float64 pattern of magnitude code ``c`` (canonical NaN code -> the quiet NaN np.nan is)."""
    if c > k[_FIRSTBAD]:
        return np.uint64(_QNAN64)
    if c == k[_FIRSTBAD]:
        return np.uint64(_INF64)
    if c >= k[_MINCODE]:
        return (c << k[_VSH]) + k[_VREBIAS]
    return np.float64(np.float64(c) * scale).view(np.uint64)


@_compiled
def encode_into(u, out, k):
    """Codes of the input bit patterns ``u`` (uint32/uint64) into ``out`` (uint16/uint32)."""
    absmask = k[_INF] | k[_FRAC]
    zero = np.uint64(0)
    for start in range(0, u.size, BLOCK):
        ub, ob = u[start : start + BLOCK], out[start : start + BLOCK]  # (indices from 0 vectorize)
        least, most = ~zero, zero  # of |x| - 1 (0 wraps to the top) and of |x|
        if k[_HW]:
            special = 0  # Inf/NaN results, counted with a float compare (vectorizes; a uint64
            for i in range(ub.size):  # max does not on AVX2): y - y is NaN exactly for them
                y = np.float32(np.uint64(ub[i]).view(np.float64))
                ob[i] = y.view(np.uint32)
                d = y - y
                special += d != d
            if special:
                most = k[_HI]
        else:
            for i in range(ub.size):  # the normal range (and 0): add, shift, no special case
                x = np.uint64(ub[i])
                a = x & absmask
                c = (a + (k[_EVEN] & (a >> k[_SH])) + k[_ADD]) >> k[_SH]
                ob[i] = (c if a != zero else zero) | ((x >> k[_SIGNIN]) << k[_SIGNOUT])
                least, most = min(least, a - np.uint64(1)), max(most, a)
        if least < k[_LOM1] or most >= k[_HI]:
            for i in range(ub.size):
                x = np.uint64(ub[i])
                ob[i] = _code(x & absmask, k) | ((x >> k[_SIGNIN]) << k[_SIGNOUT])


@_compiled
def quantize_into(u, out, k, scale):
    """float64 values (as uint64 patterns in ``out``) of the rounded input bit patterns ``u``."""
    absmask = k[_INF] | k[_FRAC]
    zero = np.uint64(0)
    for start in range(0, u.size, BLOCK):
        ub, ob = u[start : start + BLOCK], out[start : start + BLOCK]
        least, most = ~zero, zero
        if k[_HW]:
            special = 0  # as in encode_into
            for i in range(ub.size):
                y = np.float32(np.uint64(ub[i]).view(np.float64))
                ob[i] = np.float64(y).view(np.uint64)
                d = y - y
                special += d != d
            if special:
                most = k[_HI]
        else:
            for i in range(ub.size):
                x = np.uint64(ub[i])
                a = x & absmask
                c = (a + (k[_EVEN] & (a >> k[_SH])) + k[_ADD]) >> k[_SH]
                v = (c << k[_VSH]) + k[_VREBIAS]
                ob[i] = (v if a != zero else zero) | ((x >> k[_SIGNIN]) << np.uint64(63))
                least, most = min(least, a - np.uint64(1)), max(most, a)
        if least < k[_QLOM1] or most >= k[_HI]:
            for i in range(ub.size):
                x = np.uint64(ub[i])
                ob[i] = _value(_code(x & absmask, k), k, scale) | ((x >> k[_SIGNIN]) << np.uint64(63))

def cast(flat: np.ndarray, f: FloatFormat, mode: str, saturate: bool, nan_to_zero: bool, values: bool) -> np.ndarray:
    """Codes (or float64 values) of a 1-d float32/float64 array that ``handles`` accepts."""
    x = np.ascontiguousarray(flat)
    u = x.view(np.uint32 if x.dtype == np.float32 else np.uint64)
    k, scale = params(x.dtype, f, mode, saturate, nan_to_zero)
    if values:
        out = np.empty(x.size, np.float64)
        quantize_into(u, out.view(np.uint64), k, scale)
    else:
        out = np.empty(x.size, f.code_dtype)
        encode_into(u, out, k)
    return out
