"""The exact engine (``block_width=None``): every output is the exact sum of its K products,
returned as one float64 rounded to odd, so the rounding to the output format is a single correct
rounding (Boldo & Melquiond, IEEE TC 2008). Any operand formats: products of two <= 24-bit
significands are exact in float64 (fp32 x fp32: 2^-298 .. 2^256); their sum is formed exactly
by BLAS over integer operand slices (after Ozaki et al., Numer. Algorithms 59, 2012) or by
float64 limbs of the products, and the pieces are combined as int64 digits
(:func:`accelsim.arith._fast.digits_round_to_odd`). Exactness of each path: ``exact_sums``.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.numerics import get_format

from ._fast import digits_round_to_odd, round_fast, round_to_odd, split_slices, two_sum
from .engine import EngineConfig
from .kloop import Operands

_TILE_ELEMS = 1 << 20  # products (or digit sums) held at a time: the memory guard


def _fmt(name):
    return get_format(name)


def _spacing_exp(f) -> int:
    """log2 of the format's smallest spacing: 2^(emin - mbits), or below it for HiF8's denormals."""
    return min(f.emin - f.mbits, math.frexp(f.min_subnormal)[1] - 1)


def _value_span(X: np.ndarray, f):
    """(top, low) with every nonzero |x| < 2^top and a multiple of 2^low (the format's spacing
    at the smallest nonzero value); None when X has no nonzero value."""
    ax = np.abs(X)
    big = ax.max(initial=0.0)
    if big == 0:
        return None
    small = float(ax.min(where=ax > 0, initial=np.inf))
    return math.frexp(big)[1], max(math.frexp(small)[1] - 1 - f.mbits, _spacing_exp(f))


def _product_span(A, B, cfg: EngineConfig):
    """(top, low) bounding the bits of every product from the DATA: |a b| < 2^top, and each
    product a multiple of 2^low (a product of two multiples; after ``product_format`` rounding
    a multiple of that format's spacing, possibly rounded up to 2^top); None: all products 0."""
    sa, sb = _value_span(A, _fmt(cfg.a_format)), _value_span(B, _fmt(cfg.b_format))
    if sa is None or sb is None:
        return None
    top, low = sa[0] + sb[0], sa[1] + sb[1]
    if cfg.product_format is not None:
        top, low = top + 1, min(low, _spacing_exp(_fmt(cfg.product_format)))
    return top, low


def _product_tiles(A, B, cfg: EngineConfig, paired: bool, special: np.ndarray):
    """(row slice, (rows, k, N) block of products) over tiles of rows x K-slices, at most
    ``_TILE_ELEMS`` products each. Products that ``product_format`` rounds to +-inf/NaN are
    summed into ``special`` (their IEEE class) and zeroed in the block."""
    M, K = A.shape
    N = special.shape[1]
    ops = Operands(A, B, paired, np.float64)
    rows = max(1, min(M, _TILE_ELEMS // max(1, N)))
    kt = max(1, _TILE_ELEMS // (rows * max(1, N)))
    for r0 in range(0, M, rows):
        rs = slice(r0, min(M, r0 + rows))
        for k0 in range(0, K, kt):
            p = ops.block(rs, slice(0, N), k0, min(K, k0 + kt))
            if cfg.product_format is not None:
                p = round_fast(p, _fmt(cfg.product_format), cfg.product_rounding)
                bad = ~np.isfinite(p)
                if bad.any():
                    special[rs] += np.where(bad, p, 0.0).sum(axis=1)
                    p[bad] = 0.0
            yield rs, p


def _limb_digits(A, B, cfg: EngineConfig, paired: bool, s0: int, n: int, w: int, special):
    """Limb i (split exponent s_i = s0 + i w) of every product, summed over K, as exact
    float64 integers in units of 2^s_i: (n, M, N).

    Each product is cut from the top limb down by truncation at s_i, so limb i holds an integer
    multiple of 2^s_i below 2^(s_i + w) in magnitude (the top limb: |p| < 2^(s0 + n w); the
    bottom one: every product is a multiple of 2^low >= 2^s0); K of them sum to below
    K 2^w < 2^52 units, exactly, in any order, across tiles too.
    """
    M = A.shape[0]
    D = np.zeros((n, M, special.shape[1]))
    for rs, p in _product_tiles(A, B, cfg, paired, special):
        t = np.empty_like(p)
        for i in range(n - 1, -1, -1):
            np.multiply(p, 2.0 ** -(s0 + i * w), out=t)  # powers of two: exact
            if i:
                np.trunc(t, out=t)
            D[i, rs] += t.sum(axis=1)
            if i:
                t *= 2.0 ** (s0 + i * w)
                p -= t  # the bits below s_i: exact
    return D


EXACT_METHODS = ("auto", "blas", "slices", "two-limb", "limbs")


def _line_spans(X: np.ndarray, f, axis: int):
    """Per row (axis=1) or column (axis=0) of X: (top, low) int arrays as ``_value_span``
    (keepdims); all-zero lines get top = low."""
    ax = np.abs(X)
    big = ax.max(axis=axis, keepdims=True, initial=0.0)
    small = ax.min(axis=axis, keepdims=True, where=ax > 0, initial=np.inf)
    top = np.frexp(big)[1].astype(np.int64)
    low = np.maximum(np.frexp(np.where(np.isfinite(small), small, 1.0))[1] - 1 - f.mbits,
                     _spacing_exp(f)).astype(np.int64)
    return top, np.where(big > 0, low, top)


def _slice_plan(A, B, cfg: EngineConfig, paired: bool):
    """beta and, for A's rows and B's columns (B's rows when paired), (tops, slice count)."""
    beta = (53 - math.ceil(math.log2(A.shape[1] + 1))) // 2
    plan = []
    for X, f, axis in ((A, cfg.a_format, 1), (B, cfg.b_format, 1 if paired else 0)):
        top, low = _line_spans(X, _fmt(f), axis)
        plan.append((top, max(1, int(-(-(top - low).max() // beta)))))
    return beta, plan[0], plan[1]


def _slice_pairs(A, B, cfg: EngineConfig, paired: bool) -> int:
    """How many slice products the whole GEMM would take in one block."""
    _, (_, na), (_, nb) = _slice_plan(A, B, cfg, paired)
    return na * nb


def _exact_by_slices(A, B, cfg: EngineConfig, paired: bool) -> np.ndarray:
    """Exact sums by BLAS (an error-free matrix product in the manner of Ozaki et al., Numer.
    Algorithms 59, 2012): each row of A (column of B) is cut into integer slices of beta bits
    below its own top (``split_slices``), beta = floor((53 - ceil(log2(K+1))) / 2), so every
    product of two slices is an integer below 2^(2 beta) and any K-sum -- BLAS's, in any order,
    with or without FMA -- is an exact integer below 2^53. Slice pair (s, t) is the digit at
    level s + t, beta bits apart; ``digits_round_to_odd`` combines the digits. Blocks of outputs
    (their own slice counts) bound the memory: slices and digit levels of one block at a time."""
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    out = np.empty((M, N))
    cols = N if paired else min(N, 512)
    rows = max(1, min(M, (_TILE_ELEMS // max(1, K)) if paired else 512))
    for r0 in range(0, M, rows):
        rs = slice(r0, min(M, r0 + rows))
        for c0 in range(0, N, cols):
            cs = slice(c0, min(N, c0 + cols))
            a, b = A[rs], (B[rs] if paired else B[:, cs])
            out[rs, cs] = _slices_block(a, b, paired, _slice_plan(a, b, cfg, paired))
    return out


def _slices_block(A, B, paired: bool, plan) -> np.ndarray:
    beta, (ta, na), (tb, nb) = plan
    As = split_slices(A, ta, beta, na)
    Bs = split_slices(B, tb, beta, nb)
    top = ta + (tb if paired else tb.reshape(1, -1))  # (M, 1) or (M, N) exponent sums
    levels = na + nb - 1
    D = np.zeros((levels, A.shape[0], 1 if paired else B.shape[1]), dtype=np.int64)
    for s, a in enumerate(As):
        for t, b in enumerate(Bs):
            c = np.einsum("ij,ij->i", a, b)[:, None] if paired else a @ b
            D[levels - 1 - s - t] += c.astype(np.int64)  # in units of 2^(top - (s + t + 2) beta)
    return digits_round_to_odd(D, beta, np.broadcast_to(top - (levels + 1) * beta, D.shape[1:]))


def exact_sums(A, B, cfg: EngineConfig, paired: bool = False, fast: bool = True,
               method: str = "auto"):
    """The one-step exact engine before output rounding: float64 round-to-odd of each exact sum.

    Any operand formats (every product of two <= 24-bit significands is exact in float64). The
    bits every product can occupy are bounded from the data (``_product_span``). ``method``
    (``fast=False`` means "limbs", the reference):

    * "blas": the products span one float64 limb with K, so every partial sum is exact and a
      BLAS product is the sum (the "auto" choice where it applies);
    * "slices": BLAS over beta-bit operand slices (``_exact_by_slices``; "auto" without a
      ``product_format`` unless the slice pairs outnumber the limbs more than 24 to 1: one
      BLAS slice product cost 1/20 - 1/40 of one limb's passes on the 2-core container, and
      pairs grow as the square of the range, limbs linearly);
    * "two-limb": each product cut into a hi/lo float64 pair summed separately, then TwoSum
      ("auto" within two limbs when slices are not chosen: with a ``product_format``, or when
      the slice pairs would outnumber the limbs);
    * "limbs": each product cut into n limbs of w = 52 - ceil(log2(K+1)) bits, each limb summed
      exactly as an integer, the limb sums combined in int64 (``digits_round_to_odd``).
    """
    if method not in EXACT_METHODS:
        raise ValueError(f"method={method!r} is not one of {', '.join(EXACT_METHODS)}")
    if not (np.isfinite(A).all() and np.isfinite(B).all()):
        raise ValueError("exact_sums takes finite operands (the engine classifies NaN/Inf "
                         "outputs before it sums the finite ones)")
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    span = _product_span(A, B, cfg)
    if span is None or K == 0:
        return np.zeros((M, N))
    top, low = span
    one = 53 - math.ceil(math.log2(K + 1))  # bits of a limb whose K-sum float64 holds exactly
    fits_one = top - low <= one and cfg.product_format is None
    if not fast:
        method = "limbs"
    if method == "auto":
        if fits_one:
            method = "blas"
        elif cfg.product_format is None and _slice_pairs(A, B, cfg, paired) <= 24 * -(-(top - low) // (one - 1)):
            method = "slices"
        else:
            method = "two-limb" if top - low <= 2 * one else "limbs"
    if method == "blas":
        if not fits_one:
            raise ValueError(f"exact sums by one BLAS product need products within {one} bits "
                             f"and no product_format; these span {top - low}")
        # every product and every partial sum, in any order and with or without FMA, is
        # exactly representable, so a BLAS product is the exact sum
        return np.einsum("ij,ij->i", A, B)[:, None] if paired else A @ B
    if method == "slices":
        if cfg.product_format is not None:
            raise ValueError("exact sums by operand slices need exact products (product_format=None)")
        return _exact_by_slices(A, B, cfg, paired)
    special = np.zeros((M, N))
    if method == "two-limb":
        if top - low > 2 * one:
            raise ValueError(f"two float64 limbs hold {2 * one} bits; these products span {top - low}")
        split = low + one
        hi = np.zeros((M, N))
        lo = np.zeros((M, N))
        for rs, p in _product_tiles(A, B, cfg, paired, special):
            h = np.trunc(p * 2.0**-split) * 2.0**split
            hi[rs] += h.sum(axis=1)
            lo[rs] += (p - h).sum(axis=1)
        s, e = two_sum(hi, lo)
        r = round_to_odd(s, e)
    else:
        w = 52 - math.ceil(math.log2(K + 1))
        if w < 21:
            raise ValueError(f"exact engine: K={K} is too long for exact float64 limb sums")
        n = -(-(top - low) // w)
        s0 = top - n * w
        r = np.empty((M, N))
        rows = max(1, _TILE_ELEMS // (n * N))  # n digit sums of these rows at a time
        for r0 in range(0, M, rows):
            rs = slice(r0, min(M, r0 + rows))
            D = _limb_digits(A[rs], B[rs] if paired else B, cfg, paired, s0, n, w, special[rs])
            r[rs] = digits_round_to_odd(D.astype(np.int64), w, s0)
    if cfg.product_format is not None:
        hit = special != 0  # NaN != 0 too
        r[hit] = special[hit]
    return r
