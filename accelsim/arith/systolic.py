"""Functional model of an R x C systolic array of engine PEs (weight- and output-stationary).

Each PE performs one step of the engine (``block_width`` products fused with the partial sum
it receives). The dataflow fixes the reduction order along K:

* ``"os"`` (output stationary): PE (i, j) keeps output (i, j) and consumes all of K in order,
  so the result equals :func:`accelsim.arith.matmul` with the same engine (the engine's own
  promotion interval, if any, applies inside the PE).
* ``"ws"`` (weight stationary): a fold of R*W consecutive K elements is loaded as weights; a
  partial sum enters each column top at zero, passes R PEs, leaves at the bottom and is added
  into the output accumulator (``outer_format``/``outer_rounding``). That is the engine's
  K-step loop with ``chunk = R * W`` (the engine's own promotion interval does not apply): the
  rounded result depends on R whenever the step format is narrower than the exact sum (e.g.
  fp16/dlfloat16 FMA chains: short chains swamp less), and is identical to ``matmul`` for exact
  arithmetic.

Tiling over M (rows streamed) and N (C columns) never changes a result: outputs are independent,
so the array runs the same K-step loop as matmul (``accelsim.arith.datapath.k_loop``) over the
whole output at once; ``cols`` only has to be valid.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import numpy.typing as npt

from accelsim.errors import check_int

from .engine import EngineConfig
from .gemm import _check_operand, engine_result

DATAFLOWS = ("ws", "os")


def systolic_matmul(a: npt.ArrayLike, b: npt.ArrayLike, engine: EngineConfig, *, rows: int, cols: int, dataflow: str = "ws") -> np.ndarray:
    """A @ B as a rows x cols array of engine PEs computes it; returns (M, N) float32 like matmul."""
    for key, v in (("rows", rows), ("cols", cols)):
        check_int(key, v)
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
    if dataflow == "ws":
        # a fold of rows * W products per column pass, each added into the output accumulator
        engine = dataclasses.replace(engine, chunk=rows * engine.block_width)
    return engine_result(A, B, engine)
