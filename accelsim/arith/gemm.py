"""Fast, bit-exact GEMM / dot / FMA emulation for an :class:`EngineConfig`.

Vectorized over M and N (and the block's width); the only Python loop runs over K-steps (and
tiles of rows, which cap memory). Exactness argument, step by step:

* products of two inputs with <= 24-bit significands are exact in float64 (<= 48 bits, exponent
  range far inside float64's for every format in accelsim.numerics);
* with ``align_bits = f``, each term times 2^(f - emax) is a float64 whose truncation/rint is an
  integer below 2^(f+2) in magnitude (2^(f+1) for the running sum), so the block sum of
  ``block_width + 1`` such integers is exact when f + 2 + ceil(log2(W + 1)) <= 53, which
  ``EngineConfig`` enforces; dividing by the power of two is exact;
* an FMA step (``block_width = 1``, no alignment) and every promotion add two float64s:
  ``two_sum`` gives the exact sum as s + e and ``round_to_odd`` makes one float64 from which the
  rounding to the (<= 24-bit) step/outer format is a single correct rounding;
* ``block_width=None`` (the ``exact`` preset) sums products in one or two float64 limbs whose
  widths are chosen from the formats' ranges and K so that every limb sum is exact.
"""

from __future__ import annotations

import math

import numpy as np

from accelsim.numerics import get_format, quantize

from ._fast import ZERO_EXP, cut_bits, floor_log2, round_fast, round_to_odd, two_sum
from .engine import EngineConfig

_TILE_ELEMS = 1 << 20  # elements of the (rows, width, N) product block per step


def _fmt(name):
    return get_format(name)


def _round(x, fmt_name, mode):
    return round_fast(x, _fmt(fmt_name), mode)


def _check_operand(x, fmt_name: str, what: str, ndim: int) -> np.ndarray:
    arr = np.asarray(x)
    if arr.dtype == object or arr.dtype.kind not in "fiu":
        raise ValueError(f"{what} must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim != ndim:
        raise ValueError(f"{what} must be {ndim}-D, got shape {arr.shape}")
    arr = arr.astype(np.float64)
    with np.errstate(all="ignore"):
        q = quantize(arr, fmt_name, "rne")
    bad = ~((q == arr) | (np.isnan(q) & np.isnan(arr)))
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise ValueError(f"{what}[{', '.join(map(str, idx))}] = {arr[idx]!r} is not representable "
                         f"in {fmt_name} (quantize the operand first)")
    return arr


def _field_exp(x: np.ndarray, fmt_name: str) -> np.ndarray:
    """Exponent field value of each operand (subnormals at emin), ZERO_EXP for zeros."""
    e = np.maximum(floor_log2(x), _fmt(fmt_name).emin)
    return np.where(x == 0, ZERO_EXP, e).astype(np.int16)


def _block(A, B, rs, k0, k1, paired: bool):
    """Exact products of rows ``rs`` and K-slice k0:k1 as (rows, width, N); N = 1 when paired."""
    if paired:
        return (A[rs, k0:k1] * B[rs, k0:k1])[:, :, None]
    return A[rs, k0:k1, None] * B[None, k0:k1, :]


def _work_dtype(cfg: EngineConfig):
    """float32 for aligned blocks when it is provably exact, else float64.

    float32 holds every product exactly when the two input significands total <= 24 bits and
    the products' exponents lie in float32's normal range; the cut terms are integers below
    2^(align_bits + 2) and their block sum stays below 2^24 when align_bits + 2 +
    ceil(log2(W + 1)) <= 24; terms scaled below 1 cut to 0 whether or not they underflow.
    """
    fa, fb = _fmt(cfg.a_format), _fmt(cfg.b_format)
    ok = (fa.mbits + fb.mbits + 2 <= 24
          and cfg.product_format is None
          and cfg.align_bits + 2 + math.ceil(math.log2(cfg.block_width + 1)) <= 24
          and fa.min_subnormal * fb.min_subnormal >= 2.0**-126
          and fa.max * fb.max * 2.0**(cfg.align_bits + 2) < 2.0**127
          and cfg.align_exponent == "field")
    return np.float32 if ok else np.float64


def _fma_step(inner, p, cfg: EngineConfig):
    s, e = two_sum(inner, p)
    if cfg.step_format is None:
        if np.any(e != 0):
            raise ValueError("step_format=None with an unaligned FMA step: the float64 running "
                             "sum became inexact for these operands; give a step_format")
        return s
    return _round(round_to_odd(s, e), cfg.step_format, cfg.step_rounding)


def _aligned_step(inner, p, e, cfg: EngineConfig):
    """One fused step: inner (T, N) joins the (T, W, N) products p with exponents e.

    p may be float32 (see ``_work_dtype``): then every product, its scaled and cut value and the
    block's integer sum are exact in float32 as well.
    """
    f = cfg.align_bits
    emax = np.maximum(e.max(axis=1), floor_log2(inner))
    emax[emax < ZERO_EXP // 2] = 0
    scale = np.ldexp(1.0, (f - emax).astype(np.int32))
    t = p * scale.astype(p.dtype)[:, None, :]
    cut = np.trunc if cfg.align_rounding == "rz" else np.rint
    cut(t, out=t)
    s = t.sum(axis=1).astype(np.float64)
    s += cut(inner * scale)
    s /= scale
    if cfg.step_bits is not None:
        s = cut_bits(s, cfg.step_bits, cfg.step_bits_rounding)
    if cfg.step_format is not None:
        s = _round(s, cfg.step_format, cfg.step_rounding)
    return s


def _promote(outer, inner, cfg: EngineConfig):
    s, e = two_sum(outer, inner)
    if cfg.outer_format is None:
        if np.any(e != 0):
            raise ValueError("outer_format=None: the float64 outer sum became inexact for these "
                             "operands; give an outer_format")
        return s
    return _round(round_to_odd(s, e), cfg.outer_format, cfg.outer_rounding)


def _engine_step(inner, A, B, Ea, Eb, rs, k0, k1, cfg: EngineConfig, paired: bool = False):
    """One hardware step for rows ``rs`` over K-slice k0:k1 (Ea/Eb: field exponents or None)."""
    p = _block(A, B, rs, k0, k1, paired)
    if cfg.product_format is not None:
        p = _round(p, cfg.product_format, cfg.product_rounding)
    if cfg.align_bits is None:
        return _fma_step(inner, p[:, 0, :], cfg)
    if Ea is not None:
        e = ((Ea[rs, k0:k1] + Eb[rs, k0:k1])[:, :, None] if paired
             else Ea[rs, k0:k1, None] + Eb[None, k0:k1, :])
    else:
        e = floor_log2(p)
    return _aligned_step(inner, p, e, cfg)


def _prepare(A, B, cfg: EngineConfig):
    """Field exponents (when aligning on them) and the working dtype of the operands."""
    aligned = cfg.align_bits is not None
    field = aligned and cfg.align_exponent == "field"
    Ea = _field_exp(A, cfg.a_format) if field else None
    Eb = _field_exp(B, cfg.b_format) if field else None
    if aligned:
        wd = _work_dtype(cfg)
        A, B = A.astype(wd), B.astype(wd)
    return A, B, Ea, Eb


def _run_steps(A, B, cfg: EngineConfig, trace=None, paired: bool = False):
    """Stepped engine over finite operands; float64 result in the accumulator's precision.

    A is (M, K); B is (K, N), or (M, K) with ``paired`` (row i of A dotted with row i of B).
    """
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    W = cfg.block_width
    out = np.empty((M, N))
    aligned = cfg.align_bits is not None
    A, B, Ea, Eb = _prepare(A, B, cfg)
    rows = max(1, _TILE_ELEMS // max(1, W * N)) if aligned else max(1, (1 << 15) // max(1, N))
    for r0 in range(0, M, rows):
        rs = slice(r0, min(M, r0 + rows))
        inner = np.zeros((rs.stop - r0, N))
        outer = np.zeros_like(inner) if cfg.chunk is not None else None
        for k0 in range(0, K, W):
            k1 = min(K, k0 + W)
            inner = _engine_step(inner, A, B, Ea, Eb, rs, k0, k1, cfg, paired)
            promoted = cfg.chunk is not None and (k1 % cfg.chunk == 0 or k1 == K)
            if promoted:
                outer = _promote(outer, inner, cfg)
                inner = np.zeros_like(inner)
            if trace is not None:
                trace.append({"step": len(trace), "k_end": k1, "inner": float(inner[0, 0]),
                              "outer": float(outer[0, 0]) if outer is not None else math.nan,
                              "promoted": promoted})
        out[rs] = outer if cfg.chunk is not None else inner
    return out


def _exact_limbs(cfg: EngineConfig, K: int):
    """Split exponents so that every limb's sum over K products is exact in float64."""
    fa, fb = _fmt(cfg.a_format), _fmt(cfg.b_format)
    q = (fa.emin - fa.mbits) + (fb.emin - fb.mbits)
    top = (math.floor(math.log2(fa.max)) + 1) + (math.floor(math.log2(fb.max)) + 1)
    if cfg.product_format is not None:
        fp = _fmt(cfg.product_format)
        q = min(q, fp.emin - fp.mbits)
        top = max(top, math.floor(math.log2(fp.max)) + 1)
    width = 53 - math.ceil(math.log2(K + 1))
    if top - q <= width:
        return None
    if top - q <= 2 * width:
        return q + width
    raise ValueError(f"exact sum of {cfg.a_format} x {cfg.b_format} products over K={K} needs "
                     f"{top - q} bits, more than two float64 limbs of {width} bits")


def _run_exact(A, B, cfg: EngineConfig, trace=None, paired: bool = False):
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    split = _exact_limbs(cfg, K)
    hi = np.zeros((M, N))
    lo = np.zeros((M, N))
    kt = max(1, _TILE_ELEMS // max(1, M * N))
    for k0 in range(0, K, kt):
        p = _block(A, B, slice(0, M), k0, min(K, k0 + kt), paired)
        if cfg.product_format is not None:
            p = _round(p, cfg.product_format, cfg.product_rounding)
        if split is None:
            hi += p.sum(axis=1)
        else:
            h = np.trunc(np.ldexp(p, -split)) * 2.0**split
            hi += h.sum(axis=1)
            lo += (p - h).sum(axis=1)
    s, e = two_sum(hi, lo)
    return round_to_odd(s, e)


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
    nan = an.sum(1)[:, None] + bn.sum(0)[None, :] + (api + ani) @ bz + az @ (bpi + bni)
    pinf = api @ bpos + ani @ bneg + apos @ bpi + aneg @ bni
    ninf = api @ bneg + ani @ bpos + apos @ bni + aneg @ bpi
    nan_m = (nan > 0) | ((pinf > 0) & (ninf > 0))
    return nan_m, (pinf > 0) & ~nan_m, (ninf > 0) & ~nan_m


def _partitions(K: int, parts: int):
    """Contiguous K partitions, sizes as numpy.array_split: the first K % parts get one extra."""
    if parts > max(K, 1):
        raise ValueError(f"split_k={parts} exceeds K={K}")
    base, extra = divmod(K, parts)
    edges = [0]
    for i in range(parts):
        edges.append(edges[-1] + base + (1 if i < extra else 0))
    return [slice(edges[i], edges[i + 1]) for i in range(parts)]


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


def _compute(A, B, cfg: EngineConfig, paired: bool) -> np.ndarray:
    with np.errstate(invalid="ignore", over="ignore"):  # overflow to inf is modelled, not an error
        return _compute_quiet(A, B, cfg, paired)


def _compute_quiet(A, B, cfg: EngineConfig, paired: bool) -> np.ndarray:
    spec = _specials_paired(A, B) if paired else _specials(A, B)
    if spec is not None:
        A = np.where(np.isfinite(A), A, 0.0)
        B = np.where(np.isfinite(B), B, 0.0)
    M, K = A.shape
    N = 1 if paired else B.shape[1]
    if K == 0:
        return _finish(np.zeros((M, N)), cfg, spec)
    run = _run_exact if cfg.block_width is None else _run_steps
    if cfg.split_k == 1:
        r = run(A, B, cfg, paired=paired)
    else:
        r = np.zeros((M, N))
        f32 = _fmt("fp32")
        for ks in _partitions(K, cfg.split_k):
            Bk = B[:, ks] if paired else B[ks]
            part = round_fast(run(A[:, ks], Bk, cfg, paired=paired), f32, "rne")
            s, e = two_sum(r, part)
            r = round_fast(round_to_odd(s, e), f32, "rne")
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


def matmul(a, b, engine: EngineConfig, *, validate: bool = True) -> np.ndarray:
    """D = A @ B as the engine computes it: (M, K) x (K, N) -> (M, N) float32 (output values).

    Every operand value must be representable in the engine's a_format/b_format (a bad value is
    a ValueError naming it, never a silent re-rounding). ``validate=False`` skips that check for
    callers that quantized the operands themselves.
    """
    if not isinstance(engine, EngineConfig):
        raise TypeError(f"engine must be an EngineConfig (see get_engine), got {type(engine).__name__}")
    if validate:
        A = _check_operand(a, engine.a_format, "a", 2)
        B = _check_operand(b, engine.b_format, "b", 2)
    else:
        A, B = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch: a is {A.shape}, b is {B.shape} (need a.shape[1] == b.shape[0])")
    return _compute(A, B, engine, paired=False)


def dot(a, b, engine: EngineConfig):
    """The engine's dot product: 1-D a, b -> float; (n, K) a, b -> (n,) float32 row-wise dots."""
    if not isinstance(engine, EngineConfig):
        raise TypeError(f"engine must be an EngineConfig (see get_engine), got {type(engine).__name__}")
    nd = np.ndim(a)
    if nd not in (1, 2):
        raise ValueError(f"dot takes 1-D vectors or (n, K) batches, got a of shape {np.shape(a)}")
    A = _check_operand(a, engine.a_format, "a", nd)
    B = _check_operand(b, engine.b_format, "b", nd)
    if A.shape != B.shape:
        raise ValueError(f"shape mismatch: a is {A.shape}, b is {B.shape}")
    if nd == 1:
        return float(_compute(A[None, :], B[None, :], engine, paired=True)[0, 0])
    return _compute(A, B, engine, paired=True)[:, 0]


def partial_sums(a, b, engine: EngineConfig):
    """Per-step trace of a 1-D dot product: a pandas DataFrame with one row per hardware step.

    Columns: step, k_end (products consumed so far), inner (running inner sum after the step),
    outer (promoted accumulator, NaN when the engine never promotes), promoted (bool).
    split_k is ignored here (the trace is of one partition).
    """
    import pandas as pd

    if engine.block_width is None:
        raise ValueError("the exact engine has a single step; partial_sums needs block_width")
    a1 = _check_operand(a, engine.a_format, "a", 1)
    b1 = _check_operand(b, engine.b_format, "b", 1)
    if a1.shape != b1.shape:
        raise ValueError(f"shape mismatch: a is {a1.shape}, b is {b1.shape}")
    if not (np.isfinite(a1).all() and np.isfinite(b1).all()):
        raise ValueError("partial_sums needs finite operands")
    trace: list[dict] = []
    _run_steps(a1[None, :], b1[None, :], engine, trace, paired=True)
    return pd.DataFrame(trace, columns=["step", "k_end", "inner", "outer", "promoted"])


def fma(a, b, c, engine: EngineConfig) -> np.ndarray:
    """One engine step c + a*b, elementwise (block_width == 1 engines): float64 step values."""
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
        p = _round(p, engine.product_format, engine.product_rounding)
    if engine.align_bits is None:
        r = _fma_step(flat[2], p, engine)
    else:
        # one output per element: rows = elements, a block of width 1, N = 1
        if engine.align_exponent == "field":
            e = _field_exp(flat[0], engine.a_format) + _field_exp(flat[1], engine.b_format)
        else:
            e = floor_log2(p)
        r = _aligned_step(flat[2][:, None], p[:, None, None], e[:, None, None], engine)[:, 0]
    return r
