"""Post-training quantization of Linear layers (y = x @ W), HiFloat8 paper Algorithm 1
(Luo et al., arXiv 2409.16626, Sec. 4.2): direct cast, and calibration with one power-of-two
scale per tensor for the activations (2^Ea) and the weights (2^Ew), searching Ea, Ew in [-4, 5]
for the pair that minimizes the layer's output MSE against the high-precision output.

Algorithm 1, per layer l: A_q = To_HiF8_TA(O_q^{l-1} x 2^Ea), W_q = To_HiF8_TA(W^l x 2^Ew),
O_q^l = (A_q x W_q) x 2^-(Ea+Ew), Err = MSE(O_q^l, O^l) with O^l the high-precision model's
output; keep the argmin, then apply the layer's vector operations to O_q^l. "TA" is ties-away
rounding (``rna``, HiF8's default); other formats use their own default rounding.

The GEMM is ``matmul(a, b)`` (default ``numpy.matmul``); pass an arith engine's GEMM to run the
calibration through a modelled datapath. Direct cast is the pair (0, 0) of the same search, so
``calibrated.mse <= calibrated.direct_mse`` holds exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from accelsim.numerics import get_format, quantize

# HiFloat8 paper, Algorithm 1, lines 6-7: Ea = [-4, 5], Ew = [-4, 5]
EXPONENT_RANGE: tuple[int, ...] = tuple(range(-4, 6))

MatMul = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class LinearPTQ:
    """Result of calibrating one Linear layer."""

    fmt: str
    ea: int  # activation scale 2^ea
    ew: int  # weight scale 2^ew
    mse: float  # output MSE at (ea, ew)
    direct_mse: float  # output MSE of the direct cast, (0, 0)
    y: np.ndarray  # O_q: descaled output of the quantized GEMM at (ea, ew)
    mse_grid: np.ndarray  # MSE for every (ea, ew), indexed [ea_range.index(ea), ew_range.index(ew)]
    ea_range: tuple[int, ...]
    ew_range: tuple[int, ...]

    @property
    def act_scale(self) -> float:
        return 2.0**self.ea

    @property
    def weight_scale(self) -> float:
        return 2.0**self.ew


def _as_2d(name: str, a) -> np.ndarray:
    arr = np.asarray(a, dtype=np.float64)
    if arr.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array, got shape {arr.shape}")
    if not np.isfinite(arr).all():
        raise ValueError(f"{name} must be finite")
    return arr


def quantize_operands(x, w, ea: int, ew: int, fmt: str = "hif8", rounding: str | None = None):
    """(A_q, W_q): the scaled operands as stored in ``fmt`` (Algorithm 1, line 8). Overflow
    saturates to the format's largest value (the search then rejects scales that overflow)."""
    xs = np.asarray(x, dtype=np.float64) * 2.0 ** int(ea)
    ws = np.asarray(w, dtype=np.float64) * 2.0 ** int(ew)
    return (quantize(xs, fmt, rounding, saturate=True), quantize(ws, fmt, rounding, saturate=True))


def quantized_linear(x, w, ea: int = 0, ew: int = 0, *, fmt: str = "hif8", rounding: str | None = None,
                     matmul: MatMul = np.matmul) -> np.ndarray:
    """O_q = (A_q @ W_q) * 2^-(ea+ew) (Algorithm 1, line 9); ``ea = ew = 0`` is the direct cast."""
    aq, wq = quantize_operands(x, w, ea, ew, fmt, rounding)
    return np.asarray(matmul(aq, wq), dtype=np.float64) * 2.0 ** (-(int(ea) + int(ew)))


def direct_cast_linear(x, w, *, fmt: str = "hif8", rounding: str | None = None,
                       matmul: MatMul = np.matmul) -> np.ndarray:
    """HiF8_Cast: cast activations and weights to ``fmt`` without scaling."""
    return quantized_linear(x, w, 0, 0, fmt=fmt, rounding=rounding, matmul=matmul)


def calibrate_linear(
    x,
    w,
    y_ref=None,
    *,
    fmt: str = "hif8",
    rounding: str | None = None,
    ea_range: Sequence[int] = EXPONENT_RANGE,
    ew_range: Sequence[int] = EXPONENT_RANGE,
    matmul: MatMul = np.matmul,
) -> LinearPTQ:
    """Search (Ea, Ew) minimizing MSE(O_q, y_ref) for ``y = x @ w`` (Algorithm 1, lines 6-13).

    ``x`` (batch, in) is the quantized model's input to this layer (O_q^{l-1}), ``w`` (in, out)
    the high-precision weights, ``y_ref`` the high-precision model's output of this layer
    (default ``x @ w``). Ties are broken toward the smallest |Ea| + |Ew| (then the lower Ea,
    then the lower Ew): for a format with uniform relative precision, shifting both operands
    inside the normal range changes nothing, and the unscaled choice is kept.
    """
    x2, w2 = _as_2d("x", x), _as_2d("w", w)
    if x2.shape[1] != w2.shape[0]:
        raise ValueError(f"x @ w: inner dimensions differ, x {x2.shape} vs w {w2.shape}")
    ref = x2 @ w2 if y_ref is None else _as_2d("y_ref", y_ref)
    if ref.shape != (x2.shape[0], w2.shape[1]):
        raise ValueError(f"y_ref shape {ref.shape} != output shape {(x2.shape[0], w2.shape[1])}")
    ea_range, ew_range = tuple(int(e) for e in ea_range), tuple(int(e) for e in ew_range)
    if 0 not in ea_range or 0 not in ew_range:
        raise ValueError("ea_range and ew_range must contain 0 (the direct cast)")
    name = get_format(fmt).name
    xq = {ea: quantize(x2 * 2.0**ea, name, rounding, saturate=True) for ea in ea_range}
    wq = {ew: quantize(w2 * 2.0**ew, name, rounding, saturate=True) for ew in ew_range}
    grid = np.empty((len(ea_range), len(ew_range)))
    outputs = {}
    for i, ea in enumerate(ea_range):
        for j, ew in enumerate(ew_range):
            y = np.asarray(matmul(xq[ea], wq[ew]), dtype=np.float64) * 2.0 ** (-(ea + ew))
            grid[i, j] = float(np.mean((y - ref) ** 2))
            outputs[ea, ew] = y
    best = min(
        ((grid[i, j], abs(ea) + abs(ew), ea, ew) for i, ea in enumerate(ea_range) for j, ew in enumerate(ew_range)),
    )
    _, _, ea, ew = best
    i0, j0 = ea_range.index(0), ew_range.index(0)
    grid.setflags(write=False)
    return LinearPTQ(fmt=name, ea=ea, ew=ew, mse=float(best[0]), direct_mse=float(grid[i0, j0]),
                     y=outputs[ea, ew], mse_grid=grid, ea_range=ea_range, ew_range=ew_range)


def calibrate_sequential(
    x,
    weights: Sequence[np.ndarray],
    vector_ops: Sequence[Callable[[np.ndarray], np.ndarray] | None] | None = None,
    *,
    fmt: str = "hif8",
    rounding: str | None = None,
    matmul: MatMul = np.matmul,
) -> list[LinearPTQ]:
    """Algorithm 1 over a chain of Linear layers: collect every layer's high-precision output
    (lines 1-3), then calibrate layer by layer on the quantized chain's own input (lines 4-15),
    applying ``vector_ops[l]`` (non-linearity / normalization, or None) after layer l."""
    ops = [None] * len(weights) if vector_ops is None else list(vector_ops)
    if len(ops) != len(weights):
        raise ValueError(f"{len(weights)} weights but {len(ops)} vector_ops")
    refs, h = [], _as_2d("x", x)
    for w, op in zip(weights, ops):
        o = h @ _as_2d("weight", w)
        refs.append(o)
        h = o if op is None else op(o)
    results, hq = [], _as_2d("x", x)
    for w, op, ref in zip(weights, ops, refs):
        r = calibrate_linear(hq, w, ref, fmt=fmt, rounding=rounding, matmul=matmul)
        results.append(r)
        hq = r.y if op is None else op(r.y)
    return results
