"""Public entry points of the golden model: matmul, dot, partial_sums, fma (and their checks).

Operands are validated (every value representable in its format), NaN/Inf operands are taken out
and their IEEE result classes put back at the end, ``split_k`` partitions are summed in fp32, and
the result is rounded to the output format. The K-step loop lives in :mod:`accelsim.arith.kloop`,
the arithmetic of each step in :mod:`accelsim.arith.datapath` (a float64 reference with error-free
transformations) and :mod:`accelsim.arith.fastpath` (native-precision twins, used only where they
are provably bit-identical). Exactness of
the reference, step by step:

* products of two inputs with <= 24-bit significands are exact in float64 (<= 48 bits, exponent
  range far inside float64's for every format in accelsim.numerics);
* with ``align_bits = f``, each term times 2^(f - emax) is a float64 whose truncation/rint is an
  integer below 2^(f+2) in magnitude (2^(f+1) for the running sum), so the block sum of
  ``block_width + 1`` such integers is exact when f + 2 + ceil(log2(W + 1)) <= 53, which
  ``EngineConfig`` enforces; dividing by the power of two is exact;
* an FMA step (``block_width = 1``, no alignment) and every promotion add two float64s:
  ``two_sum`` gives the exact sum as s + e and ``round_to_odd`` makes one float64 from which the
  rounding to the (<= 24-bit) step/outer format is a single correct rounding;
* ``block_width=None`` (the ``exact`` preset): :mod:`accelsim.arith.exact` returns the float64
  round-to-odd of each exact sum, for any operand formats (fp32 included).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from accelsim.numerics import get_format, quantize

from ._fast import field_exponents, floor_log2, round_fast, round_to_odd, two_sum
from .datapath import aligned_step, choose_path, fma_step
from .engine import EngineConfig
from .exact import exact_sums
from .fastpath import AlignedPath, FmaPath, products_fit_step
from .kloop import check_threads, default_threads, k_loop, run_tiles

if TYPE_CHECKING:
    import pandas as pd


def _fmt(name):
    return get_format(name)


def _check_operand(x, fmt_name: str, what: str, ndim: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "fiu":
        raise ValueError(f"{what} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-D, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    f = _fmt(fmt_name)
    with np.errstate(all="ignore"):
        # round_fast equals quantize for fixed-width layouts (tested) and costs a few passes
        q = quantize(arr, fmt_name, "rne") if f.layout == "hif8" else round_fast(arr, f, "rne")
    if (q == arr).all():
        return arr
    bad = ~((q == arr) | (np.isnan(q) & np.isnan(arr)))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what}[{', '.join(map(str, idx))}] = {arr[idx]!r} is not representable "
                         f"in {fmt_name} (quantize the operand first)")
    return arr


def _specials(A, B):
    """IEEE result class of each output from NaN/Inf operands: (nan_mask, +inf, -inf) or None."""
    if np.isfinite(A).all() and np.isfinite(B).all():
        return None
    f = np.float64
    an, bn = np.isnan(A).astype(f), np.isnan(B).astype(f)
    api, ani = (A == np.inf).astype(f), (A == -np.inf).astype(f)
    bpi, bni = (B == np.inf).astype(f), (B == -np.inf).astype(f)
    apos, aneg = (A > 0).astype(f), (A < 0).astype(f)
    bpos, bneg = (B > 0).astype(f), (B < 0).astype(f)
    az, bz = (A == 0).astype(f), (B == 0).astype(f)
    # counts of 0/1 products: exact in float64 whatever the summation order
    nan = an.sum(1)[:, None] + bn.sum(0)[None, :] + (api + ani) @ bz + az @ (bpi + bni)
    pinf = api @ bpos + ani @ bneg + apos @ bpi + aneg @ bni
    ninf = api @ bneg + ani @ bpos + apos @ bni + aneg @ bpi
    nan_m = (nan > 0) | ((pinf > 0) & (ninf > 0))
    return nan_m, (pinf > 0) & ~nan_m, (ninf > 0) & ~nan_m


def _specials_paired(A, B):
    if np.isfinite(A).all() and np.isfinite(B).all():
        return None
    with np.errstate(invalid="ignore"):
        P = A * B
    nan = np.isnan(P).any(axis=1)
    pinf = (P == np.inf).any(axis=1)
    ninf = (P == -np.inf).any(axis=1)
    nan_m = nan | (pinf & ninf)
    return nan_m[:, None], (pinf & ~nan_m)[:, None], (ninf & ~nan_m)[:, None]


def _partitions(K: int, parts: int):
    """Contiguous K partitions, sizes as numpy.array_split: the first K % parts get one extra."""
    if parts > max(K, 1):
        raise ValueError(f"split_k={parts} exceeds K={K}")
    base, extra = divmod(K, parts)
    edges = [0]
    for i in range(parts):
        edges.append(edges[-1] + base + (1 if i < extra else 0))
    return [slice(edges[i], edges[i + 1]) for i in range(parts)]


def accumulate(A, B, cfg: EngineConfig, *, paired: bool = False, fast: bool = True,
               threads: int | None = None) -> np.ndarray:
    """The engine's accumulator for finite operands, before output rounding: (M, N) float64.

    Stepped engines run :func:`accelsim.arith.kloop.k_loop` over tiles of outputs on the
    datapath ``choose_path`` picks (``fast=False``: the float64 reference) -- with the ``jit``
    extra, its compiled twin (``_run_compiled``); ``split_k`` partitions are rounded to fp32 and
    summed in fp32.
    """
    check_threads(threads)
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    if K == 0:
        return np.zeros((M, N))

    def run(a, b):
        if cfg.block_width is None:
            return exact_sums(a, b, cfg, paired, fast)
        jit = _compiled_paths() if fast else None
        if jit is None:
            return run_tiles(choose_path(cfg, a, b, paired, fast), a.shape[1], cfg.chunk, threads)
        return _run_compiled(jit, a, b, cfg, paired, default_threads() if threads is None else threads)

    if cfg.split_k == 1:
        return run(A, B)
    r = np.zeros((M, N))
    f32 = _fmt("fp32")
    for ks in _partitions(K, cfg.split_k):
        part = round_fast(run(A[:, ks], B[:, ks] if paired else B[ks]), f32, "rne")
        s, e = two_sum(r, part)
        r = round_fast(round_to_odd(s, e), f32, "rne")
    return r


def _run_compiled(jit, a, b, cfg: EngineConfig, paired: bool, threads: int) -> np.ndarray:
    """The accumulator on the compiled twin of the datapath ``choose_path`` picks (the same bits,
    faster at every size measured); width-1 FMA engines whose products are wider than the step
    format (FmaPath would need every sum exact) go to the compiled reference without the proof."""
    fma, aligned = jit
    if fma.handles(cfg) and not products_fit_step(cfg):
        r = fma.accumulate(a, b, cfg, paired, threads)  # None: a value left the range
        return r if r is not None else run_tiles(choose_path(cfg, a, b, paired), a.shape[1], cfg.chunk, threads)
    path = choose_path(cfg, a, b, paired)
    if isinstance(path, FmaPath):
        return fma.native(path, cfg.chunk, threads)
    if isinstance(path, AlignedPath):
        return aligned.aligned(path, cfg.chunk, threads)
    if fma.handles(cfg):
        r = fma.accumulate(a, b, cfg, paired, threads)  # the reference; None: a value left the range
        if r is not None:
            return r
    return run_tiles(path, a.shape[1], cfg.chunk, threads)


@lru_cache(maxsize=1)
def _load_jit():
    try:  # imports numba (about 0.3 s): only once a stepped engine runs
        from . import _jit_aligned, _jit_fma
    except ImportError:  # numba not installed: the numpy datapaths
        return None
    return _jit_fma, _jit_aligned


def _compiled_paths():
    """(accelsim.arith._jit_fma, accelsim.arith._jit_aligned), the compiled datapaths, when numba
    is installed and ACCELSIM_JIT is not "0" (the same switch as the numerics casts); else None."""
    if os.environ.get("ACCELSIM_JIT") == "0":
        return None
    return _load_jit()


def round_finite(x, fmt: str, rounding: str) -> np.ndarray | None:
    """float64 ``x`` rounded once to format ``fmt`` with rne/rna/rz as ``numerics.quantize`` does
    (no saturation), by the compiled kernel of the FMA engines; None where that kernel is not
    available (numba missing, ACCELSIM_JIT=0, a tapered format) or a value is non-finite or
    overflows -- the caller then quantizes by the general route. For hot loops (training
    operands); tested against quantize in tests/test_arith_jit_fma.py."""
    f = _fmt(fmt)
    if rounding not in ("rne", "rna", "rz") or f.layout == "hif8" or os.environ.get("ACCELSIM_JIT") == "0":
        return None
    jit = _compiled_paths()
    return None if jit is None else jit[0].round_finite(x, f, rounding)


def engine_result(A, B, cfg: EngineConfig, *, paired: bool = False, fast: bool = True,
                  threads: int | None = None) -> np.ndarray:
    """Checked float64 operands (NaN/Inf allowed) -> the engine's float32 output array."""
    with np.errstate(invalid="ignore", over="ignore"):  # overflow to inf is modelled, not an error
        spec = _specials_paired(A, B) if paired else _specials(A, B)
        if spec is not None:
            A = np.where(np.isfinite(A), A, 0.0)
            B = np.where(np.isfinite(B), B, 0.0)
        r = accumulate(A, B, cfg, paired=paired, fast=fast, threads=threads)
        return _finish(r, cfg, spec)


def _finish(r, cfg: EngineConfig, spec):
    out = round_fast(r, _fmt(cfg.out_format), cfg.out_rounding)
    if spec is not None:
        nan_m, pinf, ninf = spec
        out[nan_m] = np.nan
        out[pinf] = np.inf if _fmt(cfg.out_format).has_inf else np.nan
        out[ninf] = -np.inf if _fmt(cfg.out_format).has_inf else np.nan
    if cfg.zero_result == "positive":
        out[out == 0] = 0.0
    out = out.astype(np.float32)
    if cfg.nan_bits is not None:
        bits = out.view(np.uint32)
        bits[np.isnan(out)] = np.uint32(cfg.nan_bits)
    return out


def _check_engine(engine) -> None:
    if not isinstance(engine, EngineConfig):
        raise TypeError(f"engine must be an EngineConfig (see get_engine), got {type(engine).__name__}")


def matmul(a: npt.ArrayLike, b: npt.ArrayLike, engine: EngineConfig, *, validate: bool = True, fast: bool = True,
           threads: int | None = None) -> np.ndarray:
    """D = A @ B as the engine computes it: (M, K) x (K, N) -> (M, N) float32 (output values).

    Every operand value must be representable in the engine's a_format/b_format (a bad value is
    a ValueError naming it, never a silent re-rounding). ``validate=False`` skips that check for
    callers that quantized the operands themselves. ``fast=False`` forces the float64 reference
    datapath (the fast ones are bit-identical; tests check it). ``threads``: tiles of outputs run
    on this many threads (default: the usable cores); it never changes a bit.
    """
    _check_engine(engine)
    if validate:
        A = _check_operand(a, engine.a_format, "a", 2)
        B = _check_operand(b, engine.b_format, "b", 2)
    else:
        A, B = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch: a is {A.shape}, b is {B.shape} (need a.shape[1] == b.shape[0])")
    return engine_result(A, B, engine, fast=fast, threads=threads)


def dot(a: npt.ArrayLike, b: npt.ArrayLike, engine: EngineConfig, *,
        fast: bool = True) -> float | np.ndarray:
    """The engine's dot product: 1-D a, b -> float; (n, K) a, b -> (n,) float32 row-wise dots.

    ``fast=False`` forces the float64 reference datapath (see :func:`matmul`).
    """
    _check_engine(engine)
    nd = np.ndim(a)
    if nd not in (1, 2):
        raise ValueError(f"dot takes 1-D vectors or (n, K) batches, got a of shape {np.shape(a)}")
    A = _check_operand(a, engine.a_format, "a", nd)
    B = _check_operand(b, engine.b_format, "b", nd)
    if A.shape != B.shape:
        raise ValueError(f"shape mismatch: a is {A.shape}, b is {B.shape}")
    if nd == 1:
        return float(engine_result(A[None, :], B[None, :], engine, paired=True, fast=fast)[0, 0])
    return engine_result(A, B, engine, paired=True, fast=fast)[:, 0]


def partial_sums(a: npt.ArrayLike, b: npt.ArrayLike, engine: EngineConfig) -> pd.DataFrame:
    """Per-step trace of a 1-D dot product: a pandas DataFrame with one row per hardware step.

    Columns: step, k_end (products consumed so far), inner (running inner sum after the step),
    outer (promoted accumulator, NaN when the engine never promotes), promoted (bool).
    split_k is ignored here (the trace is of one partition).
    """
    import pandas as pd

    _check_engine(engine)
    if engine.block_width is None:
        raise ValueError("the exact engine has a single step; partial_sums needs block_width")
    a1 = _check_operand(a, engine.a_format, "a", 1)
    b1 = _check_operand(b, engine.b_format, "b", 1)
    if a1.shape != b1.shape:
        raise ValueError(f"shape mismatch: a is {a1.shape}, b is {b1.shape}")
    if not (np.isfinite(a1).all() and np.isfinite(b1).all()):
        raise ValueError("partial_sums needs finite operands")
    rows: list[dict] = []

    def record(k_end, inner, outer, promoted):
        rows.append({"step": len(rows), "k_end": k_end, "inner": float(inner[0, 0]),
                     "outer": float(outer[0, 0]) if outer is not None else math.nan,
                     "promoted": promoted})

    A, B = a1[None, :], b1[None, :]
    path = choose_path(engine, A, B, paired=True)
    with np.errstate(invalid="ignore", over="ignore"):
        k_loop(path, (slice(0, 1), slice(0, 1)), A.shape[1], engine.chunk, on_step=record)
    return pd.DataFrame(rows, columns=["step", "k_end", "inner", "outer", "promoted"])


def fma(a: npt.ArrayLike, b: npt.ArrayLike, c: npt.ArrayLike, engine: EngineConfig) -> np.ndarray:
    """One engine step c + a*b, elementwise (block_width == 1 engines): float64 step values."""
    _check_engine(engine)
    if engine.block_width != 1:
        raise ValueError(f"fma needs an engine with block_width=1, got {engine.block_width}")
    A = np.atleast_1d(np.asarray(a, dtype=np.float64))
    B = np.atleast_1d(np.asarray(b, dtype=np.float64))
    C = np.atleast_1d(np.asarray(c, dtype=np.float64))
    if not (A.shape == B.shape == C.shape):
        raise ValueError(f"shape mismatch: a {A.shape}, b {B.shape}, c {C.shape}")
    _check_operand(A, engine.a_format, "a", A.ndim)
    _check_operand(B, engine.b_format, "b", B.ndim)
    if engine.step_format is not None:
        _check_operand(C, engine.step_format, "c", C.ndim)
    flat = [x.reshape(-1) for x in (A, B, C)]
    with np.errstate(invalid="ignore", over="ignore"):
        return _fma_quiet(flat, engine).reshape(A.shape)


def _fma_quiet(flat, engine):
    p = flat[0] * flat[1]
    if engine.product_format is not None:
        p = round_fast(p, _fmt(engine.product_format), engine.product_rounding)
    if engine.align_bits is None:
        return fma_step(flat[2], p, engine)
    # one output per element: rows = elements, a block of width 1, N = 1
    if engine.align_exponent == "field":
        e = (field_exponents(flat[0], _fmt(engine.a_format)).astype(np.int32)
             + field_exponents(flat[1], _fmt(engine.b_format)))
    else:
        e = floor_log2(p)
    return aligned_step(flat[2][:, None], p[:, None, None], e[:, None, None], engine)[:, 0]
