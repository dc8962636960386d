"""Compiled twin (the optional extra ``jit``: numba) of the reference datapath for FMA engines
(``block_width=1``, no alignment, exact products, a step format): the whole K loop of every
output in one compiled call instead of one numpy pass per K step.

It runs the same float64 operations as ``datapath.GeneralPath`` -- product, Knuth two_sum,
round-to-odd, rounding on the float64 bit pattern as ``_fast.round_fast`` does -- in the same
order, so its bits are the reference's; below the format's normal range it rounds as
``_fast._round_general`` does. On overflow or a non-finite sum the kernel gives up on the whole
call (returns None) and the caller runs the reference. Tested bit for bit against
the reference (tests/test_arith_jit_fma.py). Why it exists: a width-1 engine steps through K one
product at a time, and at training sizes (32 x 64 outputs) a numpy pass per step costs ~30 us of
overhead for ~2 us of arithmetic.
"""

from __future__ import annotations

from functools import lru_cache

import numba
import numpy as np

from accelsim.numerics import FloatFormat, get_format

from .engine import EngineConfig

_MODES = {"rne": 0, "rna": 1, "rz": 2}


def _compiled(fn):
    """``numba.njit(cache=True, nogil=True)``; compiled per process where no cache is writable."""
    try:
        return numba.njit(cache=True, nogil=True)(fn)
    except RuntimeError:  # pragma: no cover - read-only install without NUMBA_CACHE_DIR
        return numba.njit(nogil=True)(fn)


@lru_cache(maxsize=None)
def _consts(f: FloatFormat, mode: str) -> tuple:
    """The rounding constants of ``f``, ``mode`` as round_fast and _round_general use them:
    (drop, add, keep mask, lowest normal pattern, highest finite pattern, mode code, negative
    zero kept, subnormals kept, 2^(mbits - emin), 2^(emin - mbits), smallest normal)."""
    drop = 52 - f.mbits
    add = {"rne": (1 << (drop - 1)) - 1, "rna": 1 << (drop - 1), "rz": 0}[mode]
    lo = int(np.float64(f.min_normal).view(np.int64))
    hi = int(np.float64(f.max).view(np.int64))
    return (np.int64(drop), np.int64(add), np.int64(~((1 << drop) - 1)), np.int64(lo), np.int64(hi),
            np.int64(_MODES[mode]), bool(f.has_negative_zero), bool(f.has_subnormals),
            float(2.0 ** (f.mbits - f.emin)), float(2.0 ** (f.emin - f.mbits)), float(f.min_normal))


@_compiled
def _round_bits(b, c):
    """(the float64 with bit pattern ``b`` rounded once to the format of ``c``, overflow): on the
    bit pattern in the normal range (round_fast), on the format's lowest grid below it
    (_round_general; exact power-of-two scalings of normal float64 values). Branch-free."""
    drop, add, keep, lo, hi, mode, negzero, subnormals, up, down, min_normal = c
    mag0 = b & 0x7FFFFFFFFFFFFFFF
    sign = b - mag0
    mag = mag0
    if mode == 0:
        mag += ((mag >> drop) & 1) + add
    elif mode == 1:
        mag += add
    mag &= keep
    r = np.int64(mag | sign).view(np.float64)
    ax = np.int64(mag0).view(np.float64) * up
    if mode == 0:
        q = np.rint(ax)
    elif mode == 1:
        q = np.floor(ax + 0.5)
    else:
        q = np.trunc(ax)
    q *= down
    if not subnormals and q < min_normal:
        q = 0.0
    q = np.int64(np.float64(q).view(np.int64) | sign).view(np.float64)
    if (mag != 0) & (mag < lo):
        r = q
    if r == 0.0 and not negzero:
        r = 0.0
    return r, np.int64(mag > hi)


@_compiled
def _add_round(x, y, c):
    """(x + y rounded once to the format of ``c``, bad): two_sum, round-to-odd, ``_round_bits``;
    ``bad`` is nonzero on overflow or a non-finite sum (the caller gives up)."""
    s = x + y
    bb = s - x
    e = (x - (s - bb)) + (y - bb)
    b = np.float64(s).view(np.int64)
    # round to odd: an inexact sum with an even last bit moves one ulp towards the exact value
    # (away from zero: +1 on the magnitude, towards zero: -1; s != 0 whenever e != 0)
    fix = np.int64((e != 0.0) & ((b & 1) == 0))
    away = np.int64((e > 0.0) == (s > 0.0))
    b += fix * (2 * away - 1)
    r, over = _round_bits(b, c)
    return r, over | np.int64((s - s) != 0.0)


@_compiled
def _round_array(x, out, c):
    """``out`` = every (finite) ``x`` rounded to the format of ``c``; False on overflow or a
    non-finite value."""
    bad = np.int64(0)
    for i in range(x.size):
        v = x[i]
        r, over = _round_bits(np.float64(v).view(np.int64), c)
        out[i] = r
        bad |= over | np.int64((v - v) != 0.0)
    return bad == 0


@_compiled
def _fma_loop(A, B, paired, chunk, cs, co, out):
    """The (M, N) accumulator of a width-1 FMA engine into ``out``; False: give up (see module)."""
    M, K = A.shape
    N = out.shape[1]
    inner = np.zeros(N)
    outer = np.zeros(N)
    for i in range(M):
        inner[:] = 0.0
        outer[:] = 0.0
        bad = np.int64(0)
        for k in range(K):
            a = A[i, k]
            if paired:
                v, f = _add_round(inner[0], a * B[i, k], cs)
                inner[0] = v
                bad |= f
            else:
                for j in range(N):
                    v, f = _add_round(inner[j], a * B[k, j], cs)
                    inner[j] = v
                    bad |= f
            if chunk > 0 and ((k + 1) % chunk == 0 or k + 1 == K):
                for j in range(N):
                    v, f = _add_round(outer[j], inner[j], co)
                    outer[j] = v
                    inner[j] = 0.0
                    bad |= f
            if bad:  # overflow: later steps would build on a value this kernel does not model
                return False
        if chunk > 0:
            out[i, :] = outer
        else:
            out[i, :] = inner
    return True


def handles(cfg: EngineConfig) -> bool:
    """The kernel covers this engine: width-1 FMA steps rounded to a step format, exact products,
    a promotion (if any) rounded to an outer format."""
    return (cfg.block_width == 1 and cfg.align_bits is None and cfg.product_format is None
            and cfg.step_bits is None and cfg.step_format is not None
            and (cfg.chunk is None or cfg.outer_format is not None))


def accumulate(A: np.ndarray, B: np.ndarray, cfg: EngineConfig, paired: bool) -> np.ndarray | None:
    """The engine's (M, N) float64 accumulator for finite float64 operands, or None where a sum
    overflowed the step/outer format (the caller runs the reference then)."""
    cs = _consts(get_format(cfg.step_format), cfg.step_rounding)
    if cfg.chunk is not None:
        co, chunk = _consts(get_format(cfg.outer_format), cfg.outer_rounding), int(cfg.chunk)
    else:
        co, chunk = cs, 0
    A = np.ascontiguousarray(A, dtype=np.float64)
    B = np.ascontiguousarray(B, dtype=np.float64)
    M = A.shape[0]
    N = 1 if paired else B.shape[1]
    out = np.empty((M, N))
    if A.size == 0:
        out[...] = 0.0
        return out
    if not _fma_loop(A, B, paired, chunk, cs, co, out):
        return None
    return out


def round_finite(x: np.ndarray, f: FloatFormat, mode: str) -> np.ndarray | None:
    """float64 ``x`` rounded once to ``f`` with rne/rna/rz (``_fast.round_fast``'s values), or
    None where a value is non-finite or overflows the format (the caller's general route)."""
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    if not _round_array(x.reshape(-1), out.reshape(-1), _consts(f, mode)):
        return None
    return out
