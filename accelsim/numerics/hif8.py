"""HiFloat8 (Luo et al., "Ascend HiFloat8 Format for Deep Learning", arXiv 2409.16626, Sec. 2).

Code = sign | dot prefix | sign-magnitude exponent (hidden leading magnitude 1) | mantissa:
prefix 11/10/01/001/0001 -> exponent widths 4/3/2/1/0 with 1/2/3/3/3 mantissa bits, and prefix
0000 -> denormal 2^(M-23), M = 1..7. 0x00 is zero, 0x80 NaN, 0x6F/0xEF +-inf.
"""

from __future__ import annotations

import numpy as np

NAN_CODE = 0x80
INF_CODE = 0x6F
EMAX = 15
EMIN = -15
DENORMAL_EMIN = -22  # smallest denormal 2^-22 (M = 1)


def mantissa_bits(exponent: np.ndarray) -> np.ndarray:
    """Stored mantissa bits of a normal HiF8 value with exponent ``E`` (|E| <= 15)."""
    a = np.abs(exponent)
    return np.where(a <= 3, 3, np.where(a <= 7, 2, 1))


def quantum_exponent(e: np.ndarray) -> np.ndarray:
    """log2 of the spacing of HiF8 values inside binade ``[2^e, 2^(e+1))``.

    Normal binades (e >= -15) hold ``mantissa_bits(e)`` fraction bits; the denormal binades
    2^-22..2^-16 hold only their power of two; below 2^-22 the grid is {0, 2^-22}.
    """
    e = np.asarray(e)
    return np.where(e >= EMIN, e - mantissa_bits(np.clip(e, -15, 15)), np.maximum(e, DENORMAL_EMIN))


def decode_table() -> np.ndarray:
    """float64 value of each of the 256 codes."""
    c = np.arange(256, dtype=np.int64)
    sign = np.where(c >> 7, -1.0, 1.0)
    r = c & 0x7F
    b = [(r >> k) & 1 for k in range(7)]  # b[6] is the first dot bit
    val = np.zeros(256)
    # (mask of codes, exponent-field width D, exponent sign bit, magnitude bits, mantissa bits)
    d4 = (b[6] == 1) & (b[5] == 1)
    d3 = (b[6] == 1) & (b[5] == 0)
    d2 = (b[6] == 0) & (b[5] == 1)
    d1 = (r >> 4) == 0b001
    d0 = (r >> 3) == 0b0001
    dn = (r >> 3) == 0
    for mask, width, mb in ((d4, 4, 1), (d3, 3, 2), (d2, 2, 3), (d1, 1, 3)):
        exp_field = (r >> mb) & ((1 << width) - 1)
        esign = exp_field >> (width - 1)
        mag = (1 << (width - 1)) | (exp_field & ((1 << (width - 1)) - 1))
        e = np.where(esign == 1, -mag, mag)
        man = r & ((1 << mb) - 1)
        v = np.ldexp(1.0 + man / (1 << mb), e)
        val = np.where(mask, v, val)
    val = np.where(d0, 1.0 + (r & 7) / 8.0, val)
    m = r & 7
    val = np.where(dn, np.where(m == 0, 0.0, np.ldexp(1.0, m - 23)), val)
    val = sign * val
    val[0] = 0.0
    val[NAN_CODE] = np.nan
    val[INF_CODE] = np.inf
    val[INF_CODE | 0x80] = -np.inf
    return val


def tie_parity_offset(e: np.ndarray) -> np.ndarray:
    """Offset added to the integer significand ``floor(|x| / 2^q)`` so that its parity is the
    parity of the lower candidate's code (round-half-even means: the even code wins).

    Normal binades: the mantissa LSB is the code LSB, offset 0. Denormal binade e (candidate 2^e,
    significand 1) has code M = e + 23: offset 1 when e is odd (M even). Below 2^-22 the lower
    candidate is 0 (code 0x00, significand 0): offset 0.
    """
    e = np.asarray(e)
    den = (e >= DENORMAL_EMIN) & (e < EMIN)
    return np.where(den & (e % 2 != 0), 1, 0).astype(np.int64)
