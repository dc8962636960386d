"""Compiled twin (the optional extra ``jit``: numba) of ``fastpath.AlignedPath``, the H100-style
fused blocks aligned on field exponents in float32 (or float64): the whole K loop of a block of
output rows in one compiled call, rows split over threads, instead of numpy passes over
(rows, W, cols) arrays of products and exponents per step.

Per output and step it runs AlignedPath's operations: the block exponent max(inner's exponent,
the terms' field exponents, ``low``), the scale 2^(f - emax) built on the bit pattern, each
product times the scale cut by trunc/rint, the cut inner joined, the optional cut of the step's
bits (``fastpath._Rounder``), the division by the scale; a promotion adds in float32 (float64
dtype: the float64 sum of two fp32-grid values rounded to float32). The only difference is the
order of the block sum, and ``aligned_plan`` proves every term and partial sum an integer below
2^p, exact in any order: so the bits are AlignedPath's. Tested against it bit for bit
(tests/test_arith_jit_fma.py).
"""

from __future__ import annotations

import numpy as np

from ._jit_fma import _ROWS, _WORK_INT, _compiled, _on_threads, _round_rows, _rounder_consts
from .fastpath import AlignedPath


@_compiled
def _aligned_loop(A, B, EA, EB, paired, W, chunk, f, bias, mask, mant, low, rz, cut, cc, to32,
                  ity, out, r0, r1):
    """Rows r0..r1 of ``AlignedPath``'s accumulator into ``out``: A (M, K), B (K, N) -- (M, K)
    when ``paired`` -- in the path's dtype, EA/EB their field exponents (zero operands far below
    ``low``); ``rz``: cut by trunc, else rint; ``cut``: round each step's sum with ``cc``;
    ``to32``: promotions round the float64 sum to float32. True."""
    M, K = A.shape
    N = out.shape[1]
    inner = np.zeros((_ROWS, N), A.dtype)
    outer = np.zeros((_ROWS, N), A.dtype)
    acc = np.zeros((1, N), A.dtype)
    scale = np.zeros(N, A.dtype)
    ib = inner.view(ity)
    accb = acc.view(ity)
    sb = scale.view(ity)
    em = np.zeros(N, np.int32)
    for i0 in range(r0, r1, _ROWS):
        n = min(_ROWS, r1 - i0)
        inner[:] = 0
        outer[:] = 0
        for k0 in range(0, K, W):
            k1 = min(K, k0 + W)
            for r in range(n):
                i = i0 + r
                for j in range(N):  # the running sum's exponent (0: -bias, below low)
                    em[j] = ((ib[r, j] >> mant) & mask) - bias
                for k in range(k0, k1):
                    ea = EA[i, k]
                    for j in range(N):
                        e = ea + (EB[i, k] if paired else EB[k, j])
                        em[j] = max(em[j], e)
                for j in range(N):
                    sb[j] = (f + bias - max(em[j], low)) << mant  # 2^(f - emax)
                if rz:
                    for j in range(N):
                        acc[0, j] = np.trunc(inner[r, j] * scale[j])
                    for k in range(k0, k1):
                        a = A[i, k]
                        for j in range(N):
                            acc[0, j] += np.trunc((a * (B[i, k] if paired else B[k, j])) * scale[j])
                else:
                    for j in range(N):
                        acc[0, j] = np.rint(inner[r, j] * scale[j])
                    for k in range(k0, k1):
                        a = A[i, k]
                        for j in range(N):
                            acc[0, j] += np.rint((a * (B[i, k] if paired else B[k, j])) * scale[j])
                if cut:
                    _round_rows(accb, 1, cc)
                for j in range(N):
                    inner[r, j] = acc[0, j] / scale[j]
            if chunk > 0 and (k1 % chunk == 0 or k1 == K):
                for r in range(n):
                    for j in range(N):
                        s = outer[r, j] + inner[r, j]
                        outer[r, j] = np.float32(s) if to32 else s
                        inner[r, j] = 0
        acc_rows = outer if chunk > 0 else inner
        for r in range(n):
            for j in range(N):
                out[i0 + r, j] = acc_rows[r, j]
    return True


def aligned(path: AlignedPath, chunk: int | None, threads: int) -> np.ndarray:
    """The (M, N) float64 accumulator of ``path`` (an AlignedPath: its plan holds for the
    operands), bit for bit what ``kloop.run_tiles(path, ...)`` returns."""
    ops, cfg = path.ops, path.cfg
    ity = _WORK_INT[path.dtype]
    out = np.empty((ops.M, ops.N))
    if ops.K == 0 or ops.M == 0 or ops.N == 0:
        out[...] = 0.0
        return out
    cc = _rounder_consts(path.cut, ity)
    to32 = path.dtype is not np.float32

    def kernel(r0, r1):
        return _aligned_loop(ops.A, ops.B, path.exps.A, path.exps.B, ops.paired, path.width, chunk or 0,
                             ity(cfg.align_bits), ity(path.bias), ity(path.mask), ity(path.mant),
                             ity(path.low), cfg.align_rounding == "rz", path.cut is not None, cc, to32,
                             ity, out, r0, r1)

    _on_threads(kernel, ops.M, ops.M * ops.N * ops.K, threads)
    return out
