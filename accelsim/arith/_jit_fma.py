"""Compiled twins (the optional extra ``jit``: numba) of the width-1 FMA datapaths
(``block_width=1``, no alignment, exact products): the whole K loop of a block of output rows
in one compiled call instead of one numpy pass per K step, rows split over threads (the kernels
release the GIL; outputs are independent, so the thread count never changes a bit).

* ``native``: ``fastpath.FmaPath`` compiled -- the same native float32/float64 products, adds
  and bit-pattern roundings (``fastpath._Rounder``) in the same order, so its bits are that
  path's (which the plan proves equal to the reference's). Taken wherever ``fma_plan`` holds:
  it beats both the numpy FmaPath (no product arrays, several times faster at 512^3) and the
  reference kernel below (no two_sum per product).
* ``accumulate``: the reference datapath (``datapath.GeneralPath``) compiled, for operands the
  plan cannot prove: the same float64 operations -- product, Knuth two_sum, round-to-odd,
  rounding on the float64 bit pattern as ``_fast.round_fast`` does -- in the same order; below
  the format's normal range it rounds as ``_fast._round_general`` does. On overflow or a
  non-finite sum it gives up on the whole call (returns None) and the caller runs the reference.

Tested bit for bit against the reference (tests/test_arith_jit_fma.py). Why they exist: a width-1
engine steps through K one product at a time, and at training sizes (32 x 64 outputs) a numpy pass
per step costs ~30 us of overhead for ~2 us of arithmetic; at 512^3 the numpy pass writes and
reads a product array per step that the compiled loop never materializes.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from functools import lru_cache

import numba
import numpy as np

from accelsim.numerics import FloatFormat, get_format

from .engine import EngineConfig
from .fastpath import FmaPath

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
def _fma_loop(A, B, paired, chunk, cs, co, out, r0, r1):
    """Rows r0..r1 of the (M, N) accumulator of a width-1 FMA engine into ``out`` (the
    reference's float64 operations); False: give up (see module)."""
    K = A.shape[1]
    N = out.shape[1]
    inner = np.zeros(N)
    outer = np.zeros(N)
    for i in range(r0, r1):
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


_ROWS = 8  # output rows per block of the native kernel: B's row k is read once per 8 rows


@_compiled
def _round_rows(bits, n, c):
    """``fastpath._Rounder`` on the integer view ``bits`` of rows 0..n: v += ((v >> drop) & flag)
    + add; v &= keep (rne: flag 1, add half - 1; rna: flag 0, add half; rz: add 0)."""
    drop, add, flag, keep = c
    for r in range(n):
        for j in range(bits.shape[1]):
            v = bits[r, j]
            bits[r, j] = (v + (((v >> drop) & flag) + add)) & keep


@_compiled
def _native_loop(At, B, paired, chunk, sc, oc, step, promote, ity, out, r0, r1):
    """Rows r0..r1 of ``FmaPath``'s accumulator into ``out``: At (K, M), B (K, N) -- (K, M) when
    ``paired`` -- in the path's dtype; products, adds and roundings (``step``/``promote``: round
    with ``sc``/``oc``) in FmaPath's order, ``_ROWS`` output rows at a time. True."""
    K = At.shape[0]
    N = out.shape[1]
    inner = np.zeros((_ROWS, N), At.dtype)
    outer = np.zeros((_ROWS, N), At.dtype)
    ib = inner.view(ity)
    ob = outer.view(ity)
    for i0 in range(r0, r1, _ROWS):
        n = min(_ROWS, r1 - i0)
        inner[:] = 0
        outer[:] = 0
        for k in range(K):
            for r in range(n):
                if paired:
                    inner[r, 0] += At[k, i0 + r] * B[k, i0 + r]
                else:
                    a = At[k, i0 + r]
                    for j in range(N):
                        inner[r, j] += a * B[k, j]
            if step:
                _round_rows(ib, n, sc)
            if chunk > 0 and ((k + 1) % chunk == 0 or k + 1 == K):
                for r in range(n):
                    for j in range(N):
                        outer[r, j] += inner[r, j]
                        inner[r, j] = 0
                if promote:
                    _round_rows(ob, n, oc)
        acc = outer if chunk > 0 else inner
        for r in range(n):
            for j in range(N):
                out[i0 + r, j] = acc[r, j]
    return True


def _on_threads(kernel, M: int, work: int, threads: int) -> bool:
    """``kernel(r0, r1)`` over contiguous row ranges of 0..M on up to ``threads`` threads (one
    where the work, in multiply-adds, is too small to pay for a thread); all of them True?"""
    n = max(1, min(threads, -(-M // _ROWS), work // (1 << 20)))
    if n == 1:
        return bool(kernel(0, M))
    step = -(-M // n)
    step = -(-step // _ROWS) * _ROWS
    with ThreadPoolExecutor(n) as ex:
        done = list(ex.map(lambda r0: bool(kernel(r0, min(M, r0 + step))), range(0, M, step)))
    return all(done)


_WORK_INT = {np.float32: np.int32, np.float64: np.int64}


def _rounder_consts(r, ity) -> tuple:
    """(drop, add, flag, keep) of ``_round_rows`` for a ``fastpath._Rounder`` (None: unused)."""
    if r is None:
        return ity(0), ity(0), ity(0), ity(-1)
    add = {"rne": int(r.half) - 1, "rna": int(r.half), "rz": 0}[r.mode]
    return ity(r.drop), ity(add), ity(r.mode == "rne"), ity(r.keep)


def native(path: FmaPath, chunk: int | None, threads: int) -> np.ndarray:
    """The (M, N) float64 accumulator of ``path`` (an FmaPath: its plan holds for the operands),
    bit for bit what ``kloop.run_tiles(path, ...)`` returns."""
    ops = path.ops
    ity = _WORK_INT[path.dtype]
    out = np.empty((ops.M, ops.N))
    if ops.K == 0 or ops.M == 0 or ops.N == 0:
        out[...] = 0.0
        return out
    sc, oc = _rounder_consts(path.round_step, ity), _rounder_consts(path.round_promote, ity)

    def kernel(r0, r1):
        return _native_loop(ops.A, ops.B, ops.paired, chunk or 0, sc, oc, path.round_step is not None,
                            path.round_promote is not None, ity, out, r0, r1)

    _on_threads(kernel, ops.M, ops.M * ops.N * ops.K, threads)
    return out


def handles(cfg: EngineConfig) -> bool:
    """The kernel covers this engine: width-1 FMA steps rounded to a step format, exact products,
    a promotion (if any) rounded to an outer format."""
    return (cfg.block_width == 1 and cfg.align_bits is None and cfg.product_format is None
            and cfg.step_bits is None and cfg.step_format is not None
            and (cfg.chunk is None or cfg.outer_format is not None))


def accumulate(A: np.ndarray, B: np.ndarray, cfg: EngineConfig, paired: bool,
               threads: int = 1) -> np.ndarray | None:
    """The engine's (M, N) float64 accumulator for finite float64 operands (the reference's
    bits), or None where a sum overflowed the step/outer format (the caller runs the reference
    then); rows on up to ``threads`` threads."""
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
    if not _on_threads(lambda r0, r1: _fma_loop(A, B, paired, chunk, cs, co, out, r0, r1), M,
                       A.size * N, threads):
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
