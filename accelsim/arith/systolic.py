"""Functional model of an R x C systolic array of engine PEs (weight- and output-stationary).

Each PE performs one step of the engine (``block_width`` products fused with the partial sum
it receives). The dataflow fixes the reduction order along K:

* ``"os"`` (output stationary): PE (i, j) keeps output (i, j) and consumes all of K in order,
  so the result equals :func:`accelsim.arith.matmul` with the same engine (the engine's own
  promotion interval, if any, applies inside the PE).
* ``"ws"`` (weight stationary): a fold of R*W consecutive K elements is loaded as weights; a
  partial sum enters each column top at zero, passes R PEs, leaves at the bottom and is added
  into the output accumulator (``outer_format``/``outer_rounding``). So the array behaves as
  the engine with ``chunk = R * W``: the rounded result depends on R whenever the step
  format is narrower than the exact sum (e.g. fp16/dlfloat16 FMA chains: short chains swamp
  less), and is identical to ``matmul`` for exact arithmetic.

Tiling over M (rows streamed) and N (C columns) never changes a result: outputs are independent.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .engine import EngineConfig
from .gemm import _check_operand, _engine_step, _finish, _prepare, _promote, _run_steps, _specials

DATAFLOWS = ("ws", "os")


def systolic_matmul(a, b, engine: EngineConfig, *, rows: int, cols: int, dataflow: str = "ws") -> np.ndarray:
    """A @ B computed PE by PE on a rows x cols array; returns (M, N) float32 like matmul."""
    for key, v in (("rows", rows), ("cols", cols)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{key} must be a positive integer, got {v!r}")
    if dataflow not in DATAFLOWS:
        raise ValueError(f"dataflow={dataflow!r} is not one of {', '.join(DATAFLOWS)}")
    if engine.block_width is None:
        raise ValueError("a systolic PE needs an engine with a block_width (not the one-step exact engine)")
    if engine.split_k != 1:
        raise ValueError(f"split_k={engine.split_k}: the array model reduces along K itself; use split_k=1")
    A = _check_operand(a, engine.a_format, "a", 2)
    B = _check_operand(b, engine.b_format, "b", 2)
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"shape mismatch: a is {A.shape}, b is {B.shape}")
    with np.errstate(invalid="ignore", over="ignore"):
        return _systolic(A, B, engine, rows, cols, dataflow)


def _systolic(A, B, engine, rows, cols, dataflow):
    M, K = A.shape
    N = B.shape[1]
    spec = _specials(A, B)
    if spec is not None:
        A = np.where(np.isfinite(A), A, 0.0)
        B = np.where(np.isfinite(B), B, 0.0)
    out = np.zeros((M, N))
    if dataflow == "os":
        for m0 in range(0, M, rows):
            for n0 in range(0, N, cols):
                out[m0:m0 + rows, n0:n0 + cols] = _run_steps(A[m0:m0 + rows], B[:, n0:n0 + cols], engine)
        return _finish(out, engine, spec)
    W = engine.block_width
    fold = rows * W
    cfg = dataclasses.replace(engine, chunk=None)
    for n0 in range(0, N, cols):
        Ab, Bb, Ea, Eb = _prepare(A, B[:, n0:n0 + cols], engine)
        acc = np.zeros((M, Bb.shape[1]))
        for k0 in range(0, K, fold):  # one weight load: K rows k0 .. k0 + R*W
            psum = np.zeros_like(acc)  # enters the column tops, one per streamed row of A
            for r in range(rows):  # PE row r holds weights k0 + r*W .. k0 + (r+1)*W
                k_lo, k_hi = k0 + r * W, min(K, k0 + (r + 1) * W)
                if k_lo >= K:
                    break
                psum = _engine_step(psum, Ab, Bb, Ea, Eb, slice(0, M), k_lo, k_hi, cfg)
            acc = _promote(acc, psum, engine)
        out[:, n0:n0 + cols] = acc
    return _finish(out, engine, spec)
